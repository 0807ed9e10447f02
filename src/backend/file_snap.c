/* File-backend snapshots and clones (docs/snapshots.md "Agent API").
 *
 * Snapshot <pool>/<snap> of volume <vol> is the read-only file <directory>/<vol>@<snap>.snap
 * ("@" never appears in a name, agent-api.md §5.1); its length is the volume's size when it
 * was taken and its mtime the time it was taken.  A restore or clone is a new <name>.img.
 * Every copy is a reflink (ioctl FICLONE) where the filesystem has it, otherwise a sparse copy
 * that keeps holes (SEEK_DATA/SEEK_HOLE), into the temporary name .<final>.tmp, then fsync,
 * rename, fsync of the directory: the final name exists only complete.
 *
 * A copy runs on a thread of its own (file_copy.c); a call waits for it up to copy_wait_ms and
 * otherwise answers -EINPROGRESS with the progress, and the retried call goes on waiting for
 * the same copy.  Deleting the snapshot or volume being copied to cancels the copy and removes
 * the temporary file; one left by a killed agent is overwritten by the retried call or removed
 * by the delete. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/file.h"

#define SNAP_EXT ".snap"

static int snap_file(const backend *b, const char *vol, const char *snap, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s@%s" SNAP_EXT, b->cfg.directory, vol, snap);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int img_file(const backend *b, const char *vol, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s.img", b->cfg.directory, vol);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Splits a directory entry "<vol>@<snap>.snap" (or, with temp, ".<vol>@<snap>.snap.tmp"). */
static bool split(const char *entry, bool temp, char *vol, char *snap, size_t cap)
{
	size_t len = strlen(entry), ext = strlen(SNAP_EXT) + (temp ? 4 : 0);
	if (temp) {
		if (entry[0] != '.' || len < 5 || strcmp(entry + len - 4, ".tmp") != 0)
			return false;
		entry++, len--;
	} else if (entry[0] == '.') {
		return false;
	}
	const char *at = memchr(entry, '@', len);
	if (len <= ext || strncmp(entry + len - ext, SNAP_EXT, strlen(SNAP_EXT)) != 0 || !at ||
	    at == entry || (size_t)(at - entry) >= cap ||
	    len - ext - (size_t)(at - entry) - 1 >= cap || at + 1 == entry + len - ext)
		return false;
	memcpy(vol, entry, (size_t)(at - entry));
	vol[at - entry] = '\0';
	size_t sl = len - ext - (size_t)(at - entry) - 1;
	memcpy(snap, at + 1, sl);
	snap[sl] = '\0';
	return true;
}

static int info_of(const backend *b, const char *vol, const char *snap, struct backend_snap *info,
                   struct err *e)
{
	char p[4096];
	struct stat st;
	if (snap_file(b, vol, snap, p, sizeof(p)) < 0 || stat(p, &st) < 0)
		return err_set(e, -EIO, "stat %s: %s", p, strerror(errno));
	if (info) {
		snprintf(info->name, sizeof(info->name), "%s", snap);
		snprintf(info->source, sizeof(info->source), "%s", vol);
		info->size = st.st_size;
		info->created = st.st_mtim.tv_sec;
	}
	return 0;
}

/* The volume snapshot snap is (or, copying, is being) taken of: 0 and vol, or -ENOENT. */
static int owner(backend *b, const char *snap, char *vol, size_t cap, bool *copying, struct err *e)
{
	struct dirent *de;
	char v[132], s[132];
	int r = err_set(e, -ENOENT, "snapshot \"%s\" does not exist", snap);
	DIR *d = opendir(b->cfg.directory);
	if (!d)
		return err_set(e, -errno, "open %s: %s", b->cfg.directory, strerror(errno));
	while (r == -ENOENT && (de = readdir(d)))
		for (int temp = 0; temp < 2 && r == -ENOENT; temp++)
			if (split(de->d_name, temp, v, s, sizeof(v)) && strcmp(s, snap) == 0) {
				snprintf(vol, cap, "%s", v);
				*copying = temp;
				r = 0;
			}
	closedir(d);
	return r;
}

int backend_file_snap_find(backend *b, const char *snap, struct backend_snap *info, struct err *e)
{
	char vol[132];
	bool copying;
	int r = owner(b, snap, vol, sizeof(vol), &copying, e);
	if (r == 0 && copying)
		return err_set(e, -ENOENT, "snapshot \"%s\" does not exist (still copying)", snap);
	return r < 0 ? r : info_of(b, vol, snap, info, e);
}

int backend_file_snap_list(backend *b, struct backend_snap **out, size_t *n, struct err *e)
{
	struct dirent *de;
	size_t cap = 0;
	char v[132], s[132];
	int r = 0;
	*out = NULL;
	*n = 0;
	DIR *d = opendir(b->cfg.directory);
	if (!d)
		return err_set(e, -errno, "open %s: %s", b->cfg.directory, strerror(errno));
	while (r == 0 && (de = readdir(d))) {
		if (!split(de->d_name, false, v, s, sizeof(v)))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			struct backend_snap *grown = realloc(*out, cap * sizeof(*grown));
			if (!grown) {
				r = err_set(e, -ENOMEM, "out of memory");
				break;
			}
			*out = grown;
		}
		if (info_of(b, v, s, &(*out)[*n], NULL) == 0)
			(*n)++;
	}
	closedir(d);
	if (r < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return r;
}

int backend_file_snap_create(backend *b, const char *snap, const char *source,
                             struct backend_snap *info, struct err *e)
{
	char vol[132], src[4096], dst[4096];
	bool copying;
	int r = owner(b, snap, vol, sizeof(vol), &copying, e);
	if (r == 0 && strcmp(vol, source) != 0)
		return err_set(e, -EEXIST, "snapshot \"%s\" exists of volume \"%s\"", snap, vol);
	if (r < 0 && r != -ENOENT)
		return r;
	if (img_file(b, source, src, sizeof(src)) < 0 ||
	    snap_file(b, source, snap, dst, sizeof(dst)) < 0)
		return err_set(e, -EINVAL, "file name for \"%s\" is too long", snap);
	if ((r = backend_file_copy(b, src, dst, 0400, 0, e)) < 0)
		return r;
	return info_of(b, source, snap, info, e);
}

int backend_file_snap_destroy(backend *b, const char *snap, struct err *e)
{
	char vol[132], p[4096];
	bool copying;
	int r = owner(b, snap, vol, sizeof(vol), &copying, e);
	if (r == -ENOENT)
		return 0;
	if (r < 0 || snap_file(b, vol, snap, p, sizeof(p)) < 0)
		return r < 0 ? r : err_set(e, -EINVAL, "file name for \"%s\" is too long", snap);
	backend_file_copy_cancel(b, p);
	return file_remove_durable(p, e);
}

int backend_file_clone(backend *b, const char *name, enum backend_source kind, const char *source,
                       int64_t bytes, const struct backend_create_opts *o, struct err *e)
{
	char src[4096], dst[4096], vol[132];
	bool copying = false;
	int r = 0;
	(void)o;
	if (kind == BACKEND_FROM_SNAPSHOT) {
		r = owner(b, source, vol, sizeof(vol), &copying, e);
		if (r == 0 && copying)
			r = err_set(e, -ENOENT, "snapshot \"%s\" does not exist", source);
		if (r == 0 && snap_file(b, vol, source, src, sizeof(src)) < 0)
			r = err_set(e, -EINVAL, "file name for \"%s\" is too long", source);
	} else if (img_file(b, source, src, sizeof(src)) < 0) {
		r = err_set(e, -EINVAL, "file name for \"%s\" is too long", source);
	} else if (access(src, F_OK) < 0) {
		r = err_set(e, -ENOENT, "volume \"%s\" does not exist", source);
	}
	if (r < 0)
		return r;
	if (img_file(b, name, dst, sizeof(dst)) < 0)
		return err_set(e, -EINVAL, "file name for \"%s\" is too long", name);
	return backend_file_copy(b, src, dst, 0600, bytes, e);
}
