#include "base/file.h"
#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dir_of(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return snprintf(dir, cap, ".") < (int)cap ? 0 : -ENAMETOOLONG;
	if (slash == path)
		return snprintf(dir, cap, "/") < (int)cap ? 0 : -ENAMETOOLONG;
	if ((size_t)(slash - path) >= cap)
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	return 0;
}

void (*file_fsync_observer)(const char *path);
void (*file_fsync_done_observer)(int fd, const char *path);

static void observe(const char *path)
{
	if (file_fsync_observer)
		file_fsync_observer(path);
}

/* fsync(fd) of path, announced to the observers before and after (file.h). */
static int fsync_observed(int fd, const char *path)
{
	observe(path);
	if (fsync(fd) < 0)
		return -1;
	if (file_fsync_done_observer)
		file_fsync_done_observer(fd, path);
	return 0;
}

int file_fsync(int fd, const char *path)
{
	return fsync_observed(fd, path) < 0 ? -errno : 0;
}

int file_fdatasync(int fd, const char *path)
{
	observe(path);
	if (fdatasync(fd) < 0)
		return -errno;
	if (file_fsync_done_observer)
		file_fsync_done_observer(fd, path);
	return 0;
}

void (*file_syncfs_done_observer)(const char *root);

int file_syncfs(int fd, const char *root)
{
	observe(root);
	if (syncfs(fd) < 0)
		return -errno;
	if (file_syncfs_done_observer)
		file_syncfs_done_observer(root);
	return 0;
}

int file_fsync_dir(const char *dir, struct err *e)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "open directory %s: %s", dir, strerror(errno));
	if (fsync_observed(fd, dir) < 0 && errno != EINVAL) {
		int r = -errno;
		close(fd);
		return err_set(e, r, "fsync directory %s: %s", dir, strerror(-r));
	}
	close(fd);
	return 0;
}

int file_fsync_dir_group(struct file_dir_group *g, const char *dir, struct err *e)
{
	int r = 0;
	pthread_mutex_lock(&g->mu);
	unsigned long long mine = ++g->requested;
	while (r == 0 && g->done < mine) {
		if (g->running) {
			pthread_cond_wait(&g->cv, &g->mu);
			continue;
		}
		/* the leader: its fsync starts after every call counted so far began */
		unsigned long long upto = g->requested;
		g->running = true;
		pthread_mutex_unlock(&g->mu);
		r = file_fsync_dir(dir, e);
		pthread_mutex_lock(&g->mu);
		g->running = false;
		if (r == 0 && upto > g->done)
			g->done = upto;
		pthread_cond_broadcast(&g->cv);
	}
	pthread_mutex_unlock(&g->mu);
	return r;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int write_failed(const char *path, int r, struct err *e)
{
	return err_set(e, r, "write %s: %s%s", path, strerror(-r),
	               r == -ENOSPC   ? " (ENOSPC)"
	               : r == -EDQUOT ? " (EDQUOT)"
	                              : "");
}

int file_temp_create(const char *path, mode_t mode, char *tmp, size_t cap)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	if (!*base)
		return -EINVAL;
	int n = slash ? snprintf(tmp, cap, "%.*s/.%s" FILE_TEMP_INFIX "XXXXXX", (int)(slash - path),
	                         path, base)
	              : snprintf(tmp, cap, ".%s" FILE_TEMP_INFIX "XXXXXX", base);
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	int fd = mkostemp(tmp, O_CLOEXEC); /* O_CREAT | O_EXCL: a symlink is never followed */
	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode) < 0) {
		int r = -errno;
		close(fd);
		unlink(tmp);
		return r;
	}
	return fd;
}

bool file_temp_name(const char *name)
{
	size_t len = strlen(name), infix = strlen(FILE_TEMP_INFIX);
	if (name[0] != '.' || len < 1 + 1 + infix + 6 ||
	    strncmp(name + len - 6 - infix, FILE_TEMP_INFIX, infix) != 0)
		return false;
	for (const char *p = name + len - 6; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

bool file_spare_name(const char *name)
{
	const char *rest = NULL;
	if (strncmp(name, FILE_SPARE_PREV, strlen(FILE_SPARE_PREV)) == 0)
		rest = name + strlen(FILE_SPARE_PREV);
	else if (strncmp(name, FILE_SPARE, strlen(FILE_SPARE)) == 0)
		rest = name + strlen(FILE_SPARE);
	if (!rest || !*rest)
		return rest != NULL;
	if (rest[0] != '.' || !rest[1] || strlen(rest + 1) > 3)
		return false;
	for (const char *p = rest + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

int file_remove_temps(const char *dir, bool (*is_temp)(const char *name))
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;
	int removed = 0;
	if (!d) {
		if (errno != ENOENT)
			log_warn("cannot look for temporary files a killed process left", "dir",
			         dir, "error", strerror(errno));
		return 0;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (!(is_temp ? is_temp(n) : file_temp_name(n)) ||
		    fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (unlinkat(dirfd(d), n, 0) == 0)
			removed++;
		else if (errno != ENOENT)
			log_warn("cannot remove a temporary file a killed process left", "dir", dir,
			         "file", n, "error", strerror(errno));
	}
	if (errno)
		log_warn("cannot look for temporary files a killed process left", "dir", dir,
		         "error", strerror(errno));
	closedir(d);
	if (removed > 0) {
		char count[16];
		snprintf(count, sizeof(count), "%d", removed);
		log_info("removed temporary files of writes a killed process left", "dir", dir,
		         "count", count);
	}
	return removed;
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode, struct err *e)
{
	return file_write_atomic_stat(path, data, len, mode, NULL, e);
}

int file_write_atomic_stat(const char *path, const void *data, size_t len, mode_t mode,
                           struct stat *st, struct err *e)
{
	char dir[PATH_MAX], tmp[PATH_MAX];
	int fd, r;

	if (dir_of(path, dir, sizeof(dir)) < 0)
		return err_set(e, -ENAMETOOLONG, "path too long: %s", path);
	fd = file_temp_create(path, mode, tmp, sizeof(tmp));
	if (fd == -EINVAL)
		return err_set(e, -EINVAL, "not a file path: %s", path);
	if (fd == -ENAMETOOLONG)
		return err_set(e, -ENAMETOOLONG, "path too long: %s", path);
	if (fd < 0) /* named after the file it was for: the operator looks for that one */
		return err_set(e, fd, "write %s: create temporary file: %s%s", path, strerror(-fd),
		               fd == -ENOSPC ? " (ENOSPC)" : "");
	r = write_all(fd, data, len);
	if (r == 0 && fsync_observed(fd, path) < 0)
		r = -errno;
	if (r == 0 && st && fstat(fd, st) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp); /* the old file, if any, is left whole */
		return write_failed(path, r, e);
	}
	return file_fsync_dir(dir, e);
}

/* The directory's spare opened for writing (a new file when there is none, or when another
 * name links it); its old size in *size.  An fd or a negative errno. */
static int spare_open(const char *spare, mode_t mode, off_t *size)
{
	struct stat sb;
	int fd = open(spare, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_nlink == 1) {
		*size = sb.st_size;
		return fd;
	}
	if (fd >= 0)
		close(fd);
	if (unlink(spare) < 0 && errno != ENOENT)
		return -errno;
	*size = 0;
	fd = open(spare, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	return fd < 0 ? -errno : fd;
}

/* Keeps path's inode under prev while the rename replaces path: true when it was kept. */
static bool keep_replaced(const char *path, const char *prev)
{
	if (link(path, prev) == 0)
		return true;
	return errno == EEXIST && unlink(prev) == 0 && link(path, prev) == 0;
}

int file_write_atomic_reuse(const char *path, const void *data, size_t len, mode_t mode,
                            struct stat *st, struct err *e)
{
	char dir[PATH_MAX], spare[PATH_MAX + 32], prev[PATH_MAX + 32];
	off_t old = 0;
	if (dir_of(path, dir, sizeof(dir)) < 0)
		return err_set(e, -ENAMETOOLONG, "path too long: %s", path);
	snprintf(spare, sizeof(spare), "%s/" FILE_SPARE, dir);
	snprintf(prev, sizeof(prev), "%s/" FILE_SPARE_PREV, dir);
	int fd = spare_open(spare, mode, &old), r = fd < 0 ? fd : write_all(fd, data, len);
	if (r == 0 && old > (off_t)len && ftruncate(fd, (off_t)len) < 0)
		r = -errno;
	if (r == 0 &&
	    (fchmod(fd, mode) < 0 || fsync_observed(fd, path) < 0 || (st && fstat(fd, st) < 0)))
		r = -errno;
	if (fd >= 0 && close(fd) < 0 && r == 0)
		r = -errno;
	bool kept = r == 0 && keep_replaced(path, prev);
	if (r == 0 && rename(spare, path) < 0)
		r = -errno;
	if (r < 0) {
		if (kept)
			unlink(prev); /* still path's inode: never a spare */
		unlink(spare);        /* as file_write_atomic: no temporary file behind */
		return write_failed(path, r, e);
	}
	r = file_fsync_dir(dir, e);
	if (kept && rename(prev, spare) < 0)
		unlink(prev); /* the next write makes a new spare */
	return r;
}

/* A free slot of g (waiting while all are in use), and whether dir is g's directory. */
static int slot_take(struct file_write_group *g, const char *dir, bool *same)
{
	int slot = 0;
	pthread_mutex_lock(&g->mu);
	while (g->busy == (unsigned)((1ull << FILE_GROUP_SLOTS) - 1))
		pthread_cond_wait(&g->cv, &g->mu);
	while (g->busy & (1u << slot))
		slot++;
	g->busy |= 1u << slot;
	if (g->busy == 1u << slot) /* no write in the group: it may serve another directory */
		snprintf(g->dir, sizeof(g->dir), "%s", dir);
	*same = strcmp(g->dir, dir) == 0;
	pthread_mutex_unlock(&g->mu);
	return slot;
}

static void slot_give(struct file_write_group *g, int slot)
{
	pthread_mutex_lock(&g->mu);
	g->busy &= ~(1u << slot);
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* Writes data into the slot's file tmp (the directory's spare when there is one) and fsyncs
 * it; *st describes it.  0 or a negative errno. */
static int slot_write(const char *spare, const char *tmp, const void *data, size_t len, mode_t mode,
                      const char *path, struct stat *st)
{
	off_t old = 0;
	if (rename(spare, tmp) < 0 && errno != ENOENT)
		return -errno;
	int fd = spare_open(tmp, mode, &old), r = fd < 0 ? fd : write_all(fd, data, len);
	if (r == 0 && old > (off_t)len && ftruncate(fd, (off_t)len) < 0)
		r = -errno;
	if (r == 0 && (fchmod(fd, mode) < 0 || fsync_observed(fd, path) < 0 || fstat(fd, st) < 0))
		r = -errno;
	if (fd >= 0 && close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

static void grouped_names(const struct file_grouped *w, const char *what, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s.%d", w->dir, what, w->slot);
}

int file_grouped_prepare(struct file_write_group *g, const char *path, const void *data, size_t len,
                         mode_t mode, struct file_grouped *w, struct err *e)
{
	char spare[PATH_MAX + 32], tmp[PATH_MAX + 32];
	struct stat st;
	w->path = path;
	w->kept = false;
	if (dir_of(path, w->dir, sizeof(w->dir)) < 0 || strlen(path) >= PATH_MAX)
		return err_set(e, -ENAMETOOLONG, "path too long: %s", path);
	w->g = g;
	w->slot = slot_take(g, w->dir, &w->same);
	snprintf(spare, sizeof(spare), "%s/" FILE_SPARE, w->dir);
	grouped_names(w, FILE_SPARE, tmp, sizeof(tmp));
	int r = slot_write(spare, tmp, data, len, mode, path, &st);
	if (r < 0) {
		unlink(tmp);
		slot_give(g, w->slot);
		return write_failed(path, r, e);
	}
	w->id = st;
	return 0;
}

int file_grouped_place(struct file_grouped *w, struct err *e)
{
	char tmp[PATH_MAX + 32], prev[PATH_MAX + 32];
	grouped_names(w, FILE_SPARE, tmp, sizeof(tmp));
	grouped_names(w, FILE_SPARE_PREV, prev, sizeof(prev));
	w->kept = keep_replaced(w->path, prev);
	if (rename(tmp, w->path) == 0)
		return 0;
	int r = -errno;
	if (w->kept)
		unlink(prev); /* still path's inode: never a spare */
	unlink(tmp);
	slot_give(w->g, w->slot);
	return write_failed(w->path, r, e);
}

int file_grouped_sync(struct file_grouped *w, struct err *e)
{
	char spare[PATH_MAX + 32], prev[PATH_MAX + 32];
	int r = w->same ? file_fsync_dir_group(&w->g->sync, w->dir, e) : file_fsync_dir(w->dir, e);
	/* the replaced inode is free once its replacement is durable; one spare is enough */
	snprintf(spare, sizeof(spare), "%s/" FILE_SPARE, w->dir);
	grouped_names(w, FILE_SPARE_PREV, prev, sizeof(prev));
	if (w->kept && (r < 0 || link(prev, spare) < 0 || unlink(prev) < 0))
		unlink(prev);
	slot_give(w->g, w->slot);
	return r;
}

void file_grouped_abort(struct file_grouped *w)
{
	char tmp[PATH_MAX + 32];
	grouped_names(w, FILE_SPARE, tmp, sizeof(tmp));
	unlink(tmp);
	slot_give(w->g, w->slot);
}

int file_write_atomic_grouped(struct file_write_group *g, const char *path, const void *data,
                              size_t len, mode_t mode, struct err *e)
{
	struct file_grouped w;
	int r = file_grouped_prepare(g, path, data, len, mode, &w, e);
	if (r == 0 && (r = file_grouped_place(&w, e)) == 0)
		r = file_grouped_sync(&w, e);
	return r;
}

int file_read_all(const char *path, size_t max, char **out, size_t *len, struct err *e)
{
	return file_read_at(AT_FDCWD, path, path, max, out, len, NULL, e);
}

int file_read_at(int dirfd, const char *name, const char *path, size_t max, char **out, size_t *len,
                 struct stat *status, struct err *e)
{
	struct stat st;
	char *buf;
	size_t n = 0;
	int fd;

	*out = NULL;
	if (len)
		*len = 0;
	/* non-blocking: a FIFO or a device in the file's place is refused below, not waited on */
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return err_set(e, -errno, "open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(e, -EINVAL, "%s is not a regular file", path);
	}
	if ((size_t)st.st_size > max) {
		close(fd);
		return err_set(e, -EFBIG, "%s is larger than %zu bytes", path, max);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return err_set(e, -ENOMEM, "read %s: out of memory", path);
	}
	for (;;) {
		size_t want = (size_t)st.st_size + 1 - n;
		ssize_t rd = read(fd, buf + n, want);
		if (rd < 0) {
			if (errno == EINTR)
				continue;
			int r = -errno;
			free(buf);
			close(fd);
			return err_set(e, r, "read %s: %s", path, strerror(-r));
		}
		if (rd == 0)
			break;
		n += (size_t)rd;
		if (n > (size_t)st.st_size) { /* grew while reading */
			free(buf);
			close(fd);
			return err_set(e, -EAGAIN, "%s changed while it was read", path);
		}
		/* a regular file reads short only at its end: the read that would return 0 is
		 * saved (one system call of every file read) */
		if ((size_t)rd < want)
			break;
	}
	close(fd);
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	if (status)
		*status = st;
	return 0;
}

int file_remove_durable(const char *path, struct err *e)
{
	char dir[PATH_MAX];
	if (unlink(path) < 0) {
		if (errno == ENOENT)
			return 0;
		return err_set(e, -errno, "remove %s: %s", path, strerror(errno));
	}
	if (dir_of(path, dir, sizeof(dir)) < 0)
		return err_set(e, -ENAMETOOLONG, "path too long: %s", path);
	return file_fsync_dir(dir, e);
}

int file_mkdir_p(const char *path, mode_t mode, struct err *e)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return err_set(e, -ENAMETOOLONG, "bad directory path \"%s\"", path);
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return err_set(e, -errno, "create directory %s: %s", buf,
				               strerror(errno));
			*p = c;
			if (c == '\0')
				break;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return err_set(e, -ENOTDIR, "%s exists and is not a directory", path);
	return 0;
}

int file_dir_once_ensure(struct file_dir_once *o, const char *path, mode_t mode, struct err *e)
{
	char parent[PATH_MAX];
	struct stat st;
	int r = 0;
	pthread_mutex_lock(&o->mu);
	bool same = o->durable && strcmp(o->path, path) == 0 && stat(path, &st) == 0 &&
	            S_ISDIR(st.st_mode) && st.st_dev == o->dev && st.st_ino == o->ino;
	if (!same) {
		o->durable = false;
		if (strlen(path) >= sizeof(o->path) || dir_of(path, parent, sizeof(parent)) < 0)
			r = err_set(e, -ENAMETOOLONG, "bad directory path \"%s\"", path);
		if (r == 0)
			r = file_mkdir_p(path, mode, e);
		if (r == 0)
			r = file_fsync_dir(parent, e);
		if (r == 0 && stat(path, &st) < 0)
			r = err_set(e, -errno, "stat %s: %s", path, strerror(errno));
		if (r == 0) {
			snprintf(o->path, sizeof(o->path), "%s", path);
			o->dev = st.st_dev;
			o->ino = st.st_ino;
			o->durable = true;
		}
	}
	pthread_mutex_unlock(&o->mu);
	return r;
}
