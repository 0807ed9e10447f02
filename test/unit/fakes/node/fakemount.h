/* Fake mounts for the node tests: node_sys_ops that record calls and keep a mountinfo file
 * shaped like the kernel's, which the code under test reads.  Header-only (static inline). */
#ifndef PILLAR_TEST_FAKEMOUNT_H
#define PILLAR_TEST_FAKEMOUNT_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "../../testutil.h"

/* ---- fake mounts: a mountinfo file the code under test reads --------------------------------- */

struct fk_mounts {
	char mountinfo[8400];
	char blk_paths[4][4200]; /* paths stat reports as block devices */
	int mounts, umounts, blk_ro;
	int umount_rc;
	int blk_size_err; /* fm_blk_size's answer when not 0 (a device that is gone: -EIO) */
	char last_data[512];
	unsigned long last_flags;
};

static inline void mi_append(struct fk_mounts *m, const char *majmin, const char *root,
                             const char *target, const char *opts, const char *fstype,
                             const char *src)
{
	FILE *f = fopen(m->mountinfo, "a");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%d 1 %s %s %s %s shared:1 - %s %s rw\n", 100 + m->mounts, majmin, root, target,
	        opts, fstype, src);
	fclose(f);
}

/* Finds the last line for target: copies majmin and root; rewrites or drops it when asked. */
static inline int mi_edit(struct fk_mounts *m, const char *target, char *majmin, char *root,
                          int drop, int make_ro)
{
	char lines[64][1024], want[1100];
	int n = 0, hit = -1, i;
	FILE *f = fopen(m->mountinfo, "r");
	if (!f)
		return -1;
	snprintf(want, sizeof(want), " %s ", target);
	while (n < 64 && fgets(lines[n], sizeof(lines[n]), f)) {
		char a[64], b[64], mm[64], r[1024], t[1024];
		if (sscanf(lines[n], "%63s %63s %63s %1023s %1023s", a, b, mm, r, t) == 5 &&
		    !strcmp(t, target)) {
			hit = n;
			if (majmin)
				strcpy(majmin, mm);
			if (root)
				strcpy(root, r);
		}
		n++;
	}
	fclose(f);
	if (hit < 0 || (!drop && !make_ro))
		return hit;
	f = fopen(m->mountinfo, "w");
	for (i = 0; i < n; i++) {
		if (i == hit && drop)
			continue;
		if (i == hit && make_ro) {
			char *p = strstr(lines[i], want);
			p = strstr(p + strlen(want) - 1, " rw ");
			if (p)
				memcpy(p, " ro ", 4);
		}
		fputs(lines[i], f);
	}
	fclose(f);
	return hit;
}

static inline int fm_mount(void *ctx, const char *src, const char *target, const char *fstype,
                           unsigned long flags, const char *data)
{
	struct fk_mounts *m = ctx;
	char majmin[64] = "0:5", root[1024] = "/";
	m->last_flags = flags;
	snprintf(m->last_data, sizeof(m->last_data), "%s", data ? data : "");
	if (flags & MS_REMOUNT) {
		mi_edit(m, target, NULL, NULL, 0, 1);
		return 0;
	}
	m->mounts++;
	if (flags & MS_BIND) {
		if (mi_edit(m, src, majmin, root, 0, 0) < 0) {
			/* binding a device node: devtmpfs, root = /<dev> */
			snprintf(root, sizeof(root), "/%s", strrchr(src, '/') + 1);
		}
		mi_append(m, majmin, root, target, "rw", "none", src);
		return 0;
	}
	/* A filesystem mount: the fake device node holds "major:minor". */
	FILE *f = fopen(src, "r");
	if (f) {
		if (fgets(majmin, sizeof(majmin), f))
			majmin[strcspn(majmin, "\n")] = '\0';
		fclose(f);
	}
	mi_append(m, majmin, "/", target, (flags & MS_RDONLY) ? "ro" : "rw", fstype, src);
	return 0;
}

static inline int fm_umount(void *ctx, const char *target)
{
	struct fk_mounts *m = ctx;
	m->umounts++;
	if (m->umount_rc)
		return m->umount_rc;
	return mi_edit(m, target, NULL, NULL, 1, 0) < 0 ? -EINVAL : 0;
}

static inline int fm_blk_ro(void *ctx, const char *dev)
{
	(void)dev;
	((struct fk_mounts *)ctx)->blk_ro++;
	return 0;
}

static inline int fm_blk_size(void *ctx, const char *path, uint64_t *bytes)
{
	struct fk_mounts *m = ctx;
	(void)path;
	*bytes = 1073741824ull;
	return m->blk_size_err;
}

static inline int fm_stat(void *ctx, const char *path, struct stat *st)
{
	struct fk_mounts *m = ctx;
	int i;
	if (stat(path, st) < 0)
		return -errno;
	for (i = 0; i < 4; i++)
		if (m->blk_paths[i][0] && !strcmp(m->blk_paths[i], path))
			st->st_mode = (st->st_mode & ~S_IFMT) | S_IFBLK;
	return 0;
}

#endif
