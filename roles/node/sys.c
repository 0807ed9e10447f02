#include "node/sys.h"
#include "base/str.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

static int r_mount(void *ctx, const char *src, const char *target, const char *fstype,
                   unsigned long flags, const char *data)
{
	(void)ctx;
	return mount(src, target, fstype, flags, data) < 0 ? -errno : 0;
}

static int r_umount(void *ctx, const char *target)
{
	(void)ctx;
	return umount2(target, UMOUNT_NOFOLLOW) < 0 ? -errno : 0;
}

static int r_blk_set_ro(void *ctx, const char *dev)
{
	int one = 1, fd, r = 0;
	(void)ctx;
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, BLKROSET, &one) < 0)
		r = -errno;
	close(fd);
	return r;
}

static int r_blk_size(void *ctx, const char *path, uint64_t *bytes)
{
	int fd, r = 0;
	(void)ctx;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, BLKGETSIZE64, bytes) < 0) /* 0x80081272 */
		r = -errno;
	close(fd);
	return r;
}

static int r_stat(void *ctx, const char *path, struct stat *st)
{
	(void)ctx;
	return stat(path, st) < 0 ? -errno : 0;
}

const struct node_sys_ops node_sys_ops_real = {
    .mount = r_mount,
    .umount = r_umount,
    .blk_set_ro = r_blk_set_ro,
    .blk_size = r_blk_size,
    .stat = r_stat,
    .ctx = NULL,
};

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *w = s;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*w++ = *s++;
		}
	}
	*w = '\0';
}

static bool has_opt(const char *list, const char *opt)
{
	size_t ol = strlen(opt);
	const char *p = list;
	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t l = end ? (size_t)(end - p) : strlen(p);
		if (l == ol && !strncmp(p, opt, ol))
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

int node_mount_find(const char *proc_root, const char *path, struct node_mount *m)
{
	char mi[PATH_MAX], want[PATH_MAX];
	char *line = NULL;
	size_t cap = 0;
	int found = -ENOENT;
	FILE *f;

	if (snprintf(mi, sizeof(mi), "%s/self/mountinfo", proc_root) >= (int)sizeof(mi))
		return -ENAMETOOLONG;
	str_copy(want, sizeof(want), path);
	{ /* compare without trailing slashes */
		size_t l = strlen(want);
		while (l > 1 && want[l - 1] == '/')
			want[--l] = '\0';
	}
	f = fopen(mi, "re");
	if (!f)
		return errno == ENOENT ? -EIO : -errno; /* no mountinfo: cannot probe */
	while (getline(&line, &cap, f) > 0) {
		char *fld[12] = {0}, *sp = NULL, *tok;
		int n = 0, dash = -1;
		unsigned ma, mn;
		line[strcspn(line, "\n")] = '\0';
		for (tok = strtok_r(line, " ", &sp); tok && n < 12;
		     tok = strtok_r(NULL, " ", &sp)) {
			if (!strcmp(tok, "-") && dash < 0 && n >= 6)
				dash = n;
			fld[n++] = tok;
		}
		if (n < 6 || dash < 0 || dash + 2 >= n || sscanf(fld[2], "%u:%u", &ma, &mn) != 2)
			continue;
		unescape(fld[4]);
		if (strcmp(fld[4], want) != 0)
			continue;
		m->major = ma;
		m->minor = mn;
		unescape(fld[3]);
		str_copy(m->root, sizeof(m->root), fld[3]);
		str_copy(m->fstype, sizeof(m->fstype), fld[dash + 1]);
		unescape(fld[dash + 2]);
		str_copy(m->source, sizeof(m->source), fld[dash + 2]);
		m->read_only = has_opt(fld[5], "ro");
		found = 0; /* keep going: the last line is the topmost mount */
	}
	free(line);
	fclose(f);
	return found;
}

static const struct {
	const char *name;
	unsigned long set, clear;
} flag_tab[] = {
    {"ro", MS_RDONLY, 0},           {"rw", 0, MS_RDONLY},
    {"nosuid", MS_NOSUID, 0},       {"suid", 0, MS_NOSUID},
    {"nodev", MS_NODEV, 0},         {"dev", 0, MS_NODEV},
    {"noexec", MS_NOEXEC, 0},       {"exec", 0, MS_NOEXEC},
    {"sync", MS_SYNCHRONOUS, 0},    {"async", 0, MS_SYNCHRONOUS},
    {"dirsync", MS_DIRSYNC, 0},     {"noatime", MS_NOATIME, 0},
    {"atime", 0, MS_NOATIME},       {"nodiratime", MS_NODIRATIME, 0},
    {"diratime", 0, MS_NODIRATIME}, {"relatime", MS_RELATIME, 0},
    {"norelatime", 0, MS_RELATIME}, {"strictatime", MS_STRICTATIME, 0},
    {"lazytime", MS_LAZYTIME, 0},   {"defaults", 0, 0},
};

int node_mount_flags(const char *opts, unsigned long *flags, char *data, size_t cap)
{
	const char *p = opts;
	size_t used = 0;
	*flags = 0;
	data[0] = '\0';
	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t l = end ? (size_t)(end - p) : strlen(p), i;
		bool known = false;
		for (i = 0; i < sizeof(flag_tab) / sizeof(flag_tab[0]) && l; i++) {
			if (strlen(flag_tab[i].name) == l && !strncmp(flag_tab[i].name, p, l)) {
				*flags = (*flags | flag_tab[i].set) & ~flag_tab[i].clear;
				known = true;
				break;
			}
		}
		if (!known && l) {
			if (used + l + 2 > cap)
				return -ENAMETOOLONG;
			if (used)
				data[used++] = ',';
			memcpy(data + used, p, l);
			used += l;
			data[used] = '\0';
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}
