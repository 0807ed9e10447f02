/* The power-cut fault point of the durability tests (base/file.h, PILLAR_TEST_POWERCUT).
 *
 * From the start of the process it keeps what a power cut would leave of each directory it
 * fsyncs: after every completed fsync of a directory D, a copy of D's regular files in
 * <control>.durable/<D with '/' as '!'>, where a file whose data was written since the start
 * and not fsynced since is copied empty (its name is durable, its data is not).  The test
 * replaces each directory by that copy (or by its own copy taken before the process started)
 * to drop what was not yet durable: renames and creates not followed by an fsync of their
 * directory, and data not fsynced.  A subdirectory of D is kept in the copy as an empty
 * directory of its name: its entry is durable, its content has a copy of its own (or none).   An fsync of a file whose name is in its directory's copy
 * puts the file's data into that copy (the data of a durable name is durable after its fsync).
 * A file fsynced before and written in place since (a journal) keeps in the copy what its
 * previous copy held: its last durable content, not nothing.
 * A syncfs(2) (file_syncfs) makes every file and directory beneath its root durable.
 * The control file holds "N ROUND": when ROUND changes, the fsyncs (fdatasyncs and syncfs
 * calls too) are counted anew, and the process kills itself just before the N-th. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"

struct synced {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

static struct {
	pthread_mutex_t mu;
	const char *control;
	long at, seen, round;
	struct timespec started;
	char last[PATH_MAX];
	struct synced *synced;
	size_t n_synced, cap;
} cut = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool same_time(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static bool before_start(struct timespec t)
{
	return t.tv_sec < cut.started.tv_sec ||
	       (t.tv_sec == cut.started.tv_sec && t.tv_nsec <= cut.started.tv_nsec);
}

/* true when the data of the file st describes is durable: untouched since the start, or
 * fsynced since its last change */
static bool data_durable(const struct stat *st)
{
	if (before_start(st->st_mtim))
		return true;
	for (size_t i = 0; i < cut.n_synced; i++) {
		const struct synced *s = &cut.synced[i];
		if (s->dev == st->st_dev && s->ino == st->st_ino && s->size == st->st_size &&
		    same_time(s->mtime, st->st_mtim))
			return true;
	}
	return false;
}

/* true when the file st describes was fsynced at some time (its data may have changed since) */
static bool ever_synced(const struct stat *st)
{
	for (size_t i = 0; i < cut.n_synced; i++)
		if (cut.synced[i].dev == st->st_dev && cut.synced[i].ino == st->st_ino)
			return true;
	return false;
}

static void remember(const struct stat *st)
{
	for (size_t i = 0; i < cut.n_synced; i++)
		if (cut.synced[i].dev == st->st_dev && cut.synced[i].ino == st->st_ino) {
			cut.synced[i] =
			    (struct synced){st->st_dev, st->st_ino, st->st_size, st->st_mtim};
			return;
		}
	if (cut.n_synced == cut.cap) {
		size_t cap = cut.cap ? 2 * cut.cap : 64;
		struct synced *v = realloc(cut.synced, cap * sizeof(*v));
		if (!v)
			abort(); /* a test's fault point: an unknown state is no result */
		cut.synced = v;
		cut.cap = cap;
	}
	cut.synced[cut.n_synced++] =
	    (struct synced){st->st_dev, st->st_ino, st->st_size, st->st_mtim};
}

static void copy_file(int dirfd, const char *name, const char *to, bool data)
{
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int in = data ? openat(dirfd, name, O_RDONLY | O_CLOEXEC) : -1;
	char buf[65536];
	ssize_t n;
	while (out >= 0 && in >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			abort();
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
}

/* The durable copy of directory path (its fsync just completed). */
static void keep_directory(const char *path)
{
	char dest[PATH_MAX], tmp[PATH_MAX + 8], to[PATH_MAX * 2];
	int k = snprintf(dest, sizeof(dest), "%s.durable/", cut.control);
	for (const char *p = path; *p && k < (int)sizeof(dest) - 1; p++)
		dest[k++] = *p == '/' ? '!' : *p;
	dest[k] = '\0';
	snprintf(tmp, sizeof(tmp), "%s.new", dest);
	snprintf(to, sizeof(to), "%s.durable", cut.control);
	mkdir(to, 0700);
	mkdir(tmp, 0700);
	DIR *d = opendir(path);
	struct dirent *de;
	struct stat st;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
			snprintf(to, sizeof(to), "%s/%s", tmp, de->d_name);
			char was[PATH_MAX * 2 + 8];
			snprintf(was, sizeof(was), "%s/%s", dest, de->d_name);
			if (S_ISDIR(st.st_mode))
				mkdir(to, 0700);
			else if (!data_durable(&st) && ever_synced(&st) && access(was, F_OK) == 0)
				copy_file(AT_FDCWD, was, to, true); /* rewritten in place since */
			else
				copy_file(dirfd(d), de->d_name, to, data_durable(&st));
		}
	if (d)
		closedir(d);
	snprintf(to, sizeof(to), "%s.old", dest);
	rename(dest, to); /* the previous copy, if any, out of the way */
	if (rename(tmp, dest) < 0)
		abort();
	DIR *old = opendir(to);
	while (old && (de = readdir(old)))
		if (unlinkat(dirfd(old), de->d_name, 0) < 0 && (errno == EISDIR || errno == EPERM))
			unlinkat(dirfd(old), de->d_name, AT_REMOVEDIR);
	if (old)
		closedir(old);
	rmdir(to);
}

static void before_fsync(const char *path)
{
	long at = 0, round = 0;
	pthread_mutex_lock(&cut.mu);
	FILE *f = fopen(cut.control, "re");
	if (f && fscanf(f, "%ld %ld", &at, &round) == 2 && round != cut.round) {
		cut.round = round; /* a new round: counted anew */
		cut.at = at;
		cut.seen = 0;
	}
	if (f)
		fclose(f);
	if (cut.at > 0 && ++cut.seen == cut.at) {
		char hit[PATH_MAX + 8];
		snprintf(hit, sizeof(hit), "%s.hit", cut.control);
		f = fopen(hit, "ae");
		if (f) {
			fprintf(f, "%s %s\n", path, cut.last[0] ? cut.last : "-");
			fclose(f);
		}
		raise(SIGKILL);
	}
	snprintf(cut.last, sizeof(cut.last), "%s", path);
	pthread_mutex_unlock(&cut.mu);
}

/* The fsync of file path made its data durable under every name that already was durable: the
 * copy of path in its directory's durable copy, if there is one, takes that data. */
static void keep_file(int fd, const char *path)
{
	char dest[PATH_MAX * 2], tmp[PATH_MAX * 2 + 8];
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return;
	int k = snprintf(dest, sizeof(dest), "%s.durable/", cut.control);
	for (const char *p = path; p < slash && k < (int)sizeof(dest) - 1; p++)
		dest[k++] = *p == '/' ? '!' : *p;
	dest[k] = '\0';
	snprintf(dest + k, sizeof(dest) - (size_t)k, "%s", slash);
	if (access(dest, F_OK) != 0)
		return; /* the name is not durable: the file stays lost */
	snprintf(tmp, sizeof(tmp), "/proc/self/fd/%d", fd); /* fd may be write-only */
	int in = open(tmp, O_RDONLY | O_CLOEXEC);
	snprintf(tmp, sizeof(tmp), "%s.new", dest);
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char buf[65536];
	ssize_t n;
	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			abort();
	if (in < 0 || out < 0 || close(out) < 0 || rename(tmp, dest) < 0)
		abort(); /* a test's fault point: an unknown state is no result */
	close(in);
}

static void after_fsync(int fd, const char *path)
{
	struct stat st;
	pthread_mutex_lock(&cut.mu);
	if (fstat(fd, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			keep_directory(path);
		} else {
			remember(&st);
			keep_file(fd, path);
		}
	}
	pthread_mutex_unlock(&cut.mu);
}

/* A syncfs of the filesystem that holds root made everything beneath root durable: every file's
 * data, every directory's entries (what lies elsewhere on that filesystem is left as it was:
 * the copies stay on the safe side). */
static void keep_tree(const char *root, int depth)
{
	DIR *d = opendir(root);
	struct dirent *de;
	struct stat st;
	char p[PATH_MAX];
	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISREG(st.st_mode))
				remember(&st);
			else if (S_ISDIR(st.st_mode) && depth > 0 &&
			         snprintf(p, sizeof(p), "%s/%s", root, de->d_name) < (int)sizeof(p))
				keep_tree(p, depth - 1);
		}
	closedir(d);
	keep_directory(root);
}

static void after_syncfs(const char *root)
{
	pthread_mutex_lock(&cut.mu);
	keep_tree(root, 8);
	pthread_mutex_unlock(&cut.mu);
}

void file_powercut_from_env(void)
{
	const char *control = getenv("PILLAR_TEST_POWERCUT");
	if (control && *control) {
		cut.control = control;
		clock_gettime(CLOCK_REALTIME, &cut.started);
		file_fsync_observer = before_fsync;
		file_fsync_done_observer = after_fsync;
		file_syncfs_done_observer = after_syncfs;
	}
}
