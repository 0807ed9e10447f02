/* The file backend: sparse files <directory>/<name>.img (agent-api.md §14). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/file.h"

static int img_path(const backend *b, const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s.img", b->cfg.directory, name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

#define PATH_OR_FAIL(b, name, p)                                                              \
	do {                                                                                  \
		if (img_path(b, name, p, sizeof(p)) < 0)                                      \
			return err_set(e, -EINVAL, "file name for \"%s\" is too long", name); \
	} while (0)

int backend_file_write_through(int fd, const char *path, struct err *e)
{
	int flags = 0, r = ioctl(fd, FS_IOC_GETFLAGS, &flags);
	if (r == 0 && (flags & FS_SYNC_FL))
		return 0;
	if (r == 0) {
		flags |= FS_SYNC_FL;
		r = ioctl(fd, FS_IOC_SETFLAGS, &flags);
	}
	if (r == 0)
		return 0;
	int code = errno;
	err_set(e, -code, "make %s synchronous (chattr +S): %s", path, strerror(code));
	return code == ENOTTY || code == EOPNOTSUPP || code == EINVAL ? 1 : -code;
}

/* The attribute where the file system has it: a directory without it was refused at start. */
static int write_through(int fd, const char *path, struct err *e)
{
	struct err we = {0};
	int r = backend_file_write_through(fd, path, &we);
	return r < 0 ? err_set(e, r, "%s", we.msg) : 0;
}

/* Size (and allocation) first, then the attribute: the attribute would make each of them a
 * journal commit of its own.  Unsynced, the attribute may not outlive a power cut; file_serve
 * sets it again before the image is exported. */
static int grow(int fd, int64_t bytes, bool prealloc, bool sync, const char *p, struct err *e)
{
	if (ftruncate(fd, bytes) < 0)
		return err_set(e, errno == ENOSPC || errno == EFBIG ? -ENOSPC : -errno,
		               "truncate %s: %s", p, strerror(errno));
	if (prealloc) {
		int r = posix_fallocate(fd, 0, bytes);
		if (r)
			return err_set(e, r == ENOSPC ? -ENOSPC : -r, "fallocate %s: %s", p,
			               strerror(r));
	}
	int r = write_through(fd, p, e);
	if (r < 0)
		return r;
	r = sync ? file_fsync(fd, p) : 0;
	if (r < 0)
		return err_set(e, r, "fsync %s: %s", p, strerror(-r));
	return 0;
}

static int file_create(backend *b, const char *name, int64_t bytes,
                       const struct backend_create_opts *o, struct err *e)
{
	char p[4096];
	PATH_OR_FAIL(b, name, p);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(e, -errno, "create %s: %s", p, strerror(errno));
	bool prealloc = (o && o->preallocate) || b->cfg.preallocate;
	int r = grow(fd, bytes, prealloc, prealloc || !o || !o->size_recorded, p, e);
	close(fd);
	if (r < 0) {
		unlink(p);
		return r;
	}
	if (o && o->size_recorded && o->name_journaled && !prealloc)
		return 0;
	return file_fsync_dir_group(&b->dir_sync, b->cfg.directory, e);
}

static int file_expand(backend *b, const char *name, int64_t bytes, struct err *e)
{
	char p[4096];
	struct stat st;
	PATH_OR_FAIL(b, name, p);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "open %s: %s", p, strerror(errno));
	int r = fstat(fd, &st) < 0 ? err_set(e, -errno, "stat %s", p) : 0;
	if (r == 0 && st.st_size > bytes)
		r = err_set(e, -EINVAL, "cannot shrink");
	/* A preallocated volume keeps being fully allocated; a sparse one stays sparse. */
	if (r == 0)
		r = grow(fd, bytes,
		         b->cfg.preallocate ||
		             (st.st_size > 0 &&
		              st.st_blocks >= st.st_size / 512 + (st.st_size % 512 != 0)),
		         true, p, e);
	close(fd);
	/* The name of a new sparse image may be durable only through the fencing mark's journal,
	 * which remakes a lost image at the size it was created with: a grown image's name is
	 * made durable here, so a power cut cannot give it back smaller than acknowledged. */
	if (r == 0)
		r = file_fsync_dir_group(&b->dir_sync, b->cfg.directory, e);
	return r;
}

static int file_destroy(backend *b, const char *name, struct err *e)
{
	char p[4096];
	PATH_OR_FAIL(b, name, p);
	if (unlink(p) < 0) {
		if (errno == ENOENT)
			return 0;
		return err_set(e, -errno, "remove %s: %s", p, strerror(errno));
	}
	return file_fsync_dir_group(&b->dir_sync, b->cfg.directory, e);
}

static void file_cancel(backend *b, const char *name)
{
	char p[4096];
	if (img_path(b, name, p, sizeof(p)) == 0)
		backend_file_copy_cancel(b, p); /* a restore or clone still copying into it */
}

static int file_size(backend *b, const char *name, int64_t *bytes, struct err *e)
{
	char p[4096];
	struct stat st;
	PATH_OR_FAIL(b, name, p);
	if (stat(p, &st) < 0)
		return err_set(e, -errno, "stat %s: %s", p, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(e, -EIO, "%s is not a regular file", p);
	*bytes = st.st_size;
	return 0;
}

static int file_capacity(backend *b, int64_t *total, int64_t *avail, struct err *e)
{
	struct statvfs sv;
	if (statvfs(b->cfg.directory, &sv) < 0)
		return err_set(e, -errno, "statvfs %s: %s", b->cfg.directory, strerror(errno));
	/* a file system larger than int64_t bytes reports INT64_MAX */
	if (__builtin_mul_overflow(sv.f_blocks, sv.f_frsize, total))
		*total = INT64_MAX;
	if (__builtin_mul_overflow(sv.f_bavail, sv.f_frsize, avail))
		*avail = INT64_MAX;
	return 0;
}

static int file_list(backend *b, struct backend_vol **out, size_t *n, struct err *e)
{
	struct backend_vol_list l = {0};
	struct dirent *de;
	int r = 0;
	*out = NULL;
	*n = 0;
	DIR *d = opendir(b->cfg.directory);
	if (!d)
		return err_set(e, -errno, "open %s: %s", b->cfg.directory, strerror(errno));
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		int64_t size;
		if (len <= 4 || len - 4 >= sizeof(l.v->name) ||
		    strcmp(de->d_name + len - 4, ".img") != 0 || de->d_name[0] == '.')
			continue;
		char name[sizeof(l.v->name)];
		memcpy(name, de->d_name, len - 4);
		name[len - 4] = '\0';
		if (file_size(b, name, &size, NULL) < 0)
			continue;
		if ((r = backend_vol_list_add(&l, name, size, e)) < 0)
			break;
	}
	closedir(d);
	return backend_vol_list_finish(&l, r, out, n);
}

static int file_device_path(const backend *b, const char *name, char *out, size_t cap)
{
	return img_path(b, name, out, cap);
}

/* An image made by an agent that did not set the attribute gets it before it is served. */
static int file_serve(backend *b, const char *path, struct err *e)
{
	(void)b;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "open %s: %s", path, strerror(errno));
	int r = write_through(fd, path, e);
	close(fd);
	return r;
}

const struct backend_ops backend_file_ops = {
    .create = file_create,
    .destroy = file_destroy,
    .expand = file_expand,
    .size = file_size,
    .capacity = file_capacity,
    .list = file_list,
    .device_path = file_device_path,
    .activate = NULL,
    .serve = file_serve,
    .snap_create = backend_file_snap_create,
    .snap_destroy = backend_file_snap_destroy,
    .snap_find = backend_file_snap_find,
    .snap_list = backend_file_snap_list,
    .clone = backend_file_clone,
    .cancel = file_cancel,
};
