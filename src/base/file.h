/* file — durable writes and strict reads of small state files.
 *
 * Every durable record (fencing marks, identity pins, stage records, the embedded store) is
 * written with file_write_atomic: a temporary file in the same directory, fsync, rename over
 * the target, fsync of the directory.  A reader therefore sees the old content or the new,
 * never a mix, even across a power loss.  Readers never guess: a missing file is -ENOENT, an
 * oversized one -EFBIG, and format checks (json.h) turn a truncated or corrupt file into
 * -EBADMSG.
 */
#ifndef PILLAR_BASE_FILE_H
#define PILLAR_BASE_FILE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/err.h"

/* Replaces path with data.  0 or a negative errno; a failure leaves the old file in place and
 * no temporary file behind, and its message names path ("write <path>: <reason>", with
 * "(ENOSPC)" / "(EDQUOT)" appended when the filesystem or quota is full). */
int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode, struct err *e);
/* The same, and *st describes the file written (its inode and mtime stay through the rename),
 * so a reader can tell later whether the file is still the one written. */
struct stat;
int file_write_atomic_stat(const char *path, const void *data, size_t len, mode_t mode,
                           struct stat *st, struct err *e);
/* file_write_atomic_stat for a directory whose writers all hold one lock (the embedded store's
 * operation lock), the caller's promise: no two writes in path's directory run at once.  The
 * temporary file is then not a new inode but the one the directory's previous write replaced
 * (<dir>/FILE_SPARE, kept as <dir>/FILE_SPARE_PREV while the rename replaces it), so writing
 * an existing file allocates and frees no inode (on ext4 without a journal, allocating one
 * scans the group's recently deleted inodes, a cost paid on every write otherwise).
 * The same durability: the new content is written and fsync'd before the rename, the
 * directory after it; the same failures (the old file whole, no temporary file behind).  The
 * spare is used only when no other name links it (st_nlink 1), so one left by a killed process
 * is harmless; both names may be removed whenever no write runs. */
#define FILE_SPARE      ".spare"
#define FILE_SPARE_PREV ".spare.prev"
int file_write_atomic_reuse(const char *path, const void *data, size_t len, mode_t mode,
                            struct stat *st, struct err *e);

/* The temporary file of a write that will replace path: created exclusively (never an existing
 * name, never through a symlink) beside path as ".<name of path>.tmp.XXXXXX" (hidden, and
 * in path's directory so that a rename can replace path), with exactly mode (not narrowed by
 * the umask), close-on-exec, open for writing.  Its name goes into tmp (cap bytes).  An fd,
 * or a negative errno: -ENAMETOOLONG when the name does not fit, -EINVAL when path names no
 * file (empty, or ending in '/'), -ENOENT when the directory is missing, another from
 * mkostemp or fchmod; nothing is left behind on failure. */
#define FILE_TEMP_INFIX ".tmp."
int file_temp_create(const char *path, mode_t mode, char *tmp, size_t cap);

/* True when name (a directory entry) has the form of a file_temp_create name:
 * ".<name>.tmp.XXXXXX", <name> not empty, the last six characters letters or digits. */
bool file_temp_name(const char *name);
/* True when name is one of the spares of file_write_atomic_reuse and file_write_atomic_grouped
 * (below): FILE_SPARE or FILE_SPARE_PREV, alone or followed by "." and a slot number. */
bool file_spare_name(const char *name);
/* Removes from the directory dir the temporary files of writes that a process killed between
 * creating and renaming them never finished: the regular files whose name is_temp accepts
 * (NULL: file_temp_name).  Nothing else is touched: never a name is_temp refuses, a symlink
 * (nor what it names), a directory or another type of file.  Only for a directory whose
 * writers are the caller's, before any of them runs (or under the lock every writer holds).
 * Logs how many it removed when any, and a warning when dir cannot be read or a file stays
 * (a leftover is never read as a record, so neither stops the caller).  The number of files
 * removed; 0 when dir is missing. */
int file_remove_temps(const char *dir, bool (*is_temp)(const char *name));

/* Reads the whole file into a NUL-terminated malloc'd buffer (caller frees *out).  0, or
 * -ENOENT (missing), -EFBIG (more than max bytes), another negative errno. */
int file_read_all(const char *path, size_t max, char **out, size_t *len, struct err *e);
/* file_read_all of name relative to the directory dirfd (AT_FDCWD: the working directory), path
 * naming it in messages; *st (optional) the status of the file read (fstat of what was opened).
 * Neither waits on a FIFO nor opens a device as a terminal: anything not regular is -EINVAL. */
int file_read_at(int dirfd, const char *name, const char *path, size_t max, char **out, size_t *len,
                 struct stat *st, struct err *e);

/* Removes path and fsyncs its directory; a missing file is success. */
int file_remove_durable(const char *path, struct err *e);

/* fsync of the directory that holds path (or of path itself when it is a directory). */
int file_fsync_dir(const char *dir, struct err *e);

/* mkdir -p with mode for every created component. */
int file_mkdir_p(const char *path, mode_t mode, struct err *e);

/* A directory of durable records that must itself exist durably (its entry in its parent
 * fsync'd) before a record written in it is: file_dir_once_ensure creates path (file_mkdir_p)
 * and fsyncs its parent the first time it is called for path in this process, and again
 * whenever path is no longer the directory it made durable (missing, or another inode); an
 * unchanged directory costs one stat and no fsync.  A record's own write then fsyncs only the
 * directory it renames in.  Thread-safe (one mutex per object, held through the first call's
 * fsync).  0, or a negative errno with e set (nothing is remembered then). */
struct file_dir_once {
	pthread_mutex_t mu;
	bool durable;
	dev_t dev;
	ino_t ino;
	char path[PATH_MAX];
};
#define FILE_DIR_ONCE_INIT                      \
	{                                       \
		.mu = PTHREAD_MUTEX_INITIALIZER \
	}
int file_dir_once_ensure(struct file_dir_once *o, const char *path, mode_t mode, struct err *e);

/* Group commit of one directory's fsyncs: callers that each changed the directory share the
 * fsync one of them makes.  file_fsync_dir_group returns once an fsync of dir that started
 * after the call began has completed (so it covers every change the caller made before the
 * call), or that fsync's error. */
struct file_dir_group {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned long long requested, done; /* calls begun; calls covered by a completed fsync */
	bool running;                       /* an fsync is in progress */
};
#define FILE_DIR_GROUP_INIT                                                     \
	{                                                                       \
		.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER \
	}
int file_fsync_dir_group(struct file_dir_group *g, const char *dir, struct err *e);

/* Group-committed durable writes of the records of one directory, each record written by one
 * writer at a time (the caller's promise, as for its own records' locks) but different records
 * by any number of threads: file_write_atomic_grouped writes path as file_write_atomic_reuse
 * does (the new content fsync'd before its rename, the directory after it, the replaced inode
 * becoming the directory's spare), but no lock is held across the fsyncs, so that concurrent
 * writers fsync their files side by side and share one fsync of the directory
 * (file_fsync_dir_group).  A write takes the directory's spare by renaming it to a name of its
 * own (FILE_SPARE.<slot>, one of FILE_GROUP_SLOTS kept by the group while it runs) and keeps
 * the replaced inode as FILE_SPARE_PREV.<slot>; that inode becomes the spare again only after
 * the directory's fsync made the rename that replaced it durable (before, a power cut could
 * bring it back under its old name).  The group serves one directory at a time, the one of
 * the write that found it idle; a write in another directory meanwhile fsyncs that one alone.  Names FILE_SPARE.* left by a
 * killed process are harmless and reused; any may be removed whenever no write runs. */
#define FILE_GROUP_SLOTS 32
struct file_write_group {
	struct file_dir_group sync;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned int busy; /* slots in use, one bit each */
	char dir[PATH_MAX];
};
#define FILE_WRITE_GROUP_INIT                                                 \
	{                                                                     \
		.sync = FILE_DIR_GROUP_INIT, .mu = PTHREAD_MUTEX_INITIALIZER, \
		.cv = PTHREAD_COND_INITIALIZER                                \
	}
int file_write_atomic_grouped(struct file_write_group *g, const char *path, const void *data,
                              size_t len, mode_t mode, struct err *e);
/* The same write in its three steps, for a caller that must act between them (the embedded
 * store orders what it publishes): file_grouped_prepare writes and fsyncs the new content
 * under the slot's name (*w->id describes it: inode and mtime stay through the rename);
 * file_grouped_place renames it over path; file_grouped_sync makes the rename durable (the
 * shared directory fsync) and frees the slot.  After a failed step the slot is freed and
 * nothing is left behind; after a prepared write that will not be placed, file_grouped_abort.
 * w->path is the caller's string, which must live until the last step. */
struct file_grouped {
	struct file_write_group *g;
	const char *path;
	int slot;
	bool same, kept;
	struct stat id;
	char dir[PATH_MAX];
};
int file_grouped_prepare(struct file_write_group *g, const char *path, const void *data, size_t len,
                         mode_t mode, struct file_grouped *w, struct err *e);
int file_grouped_place(struct file_grouped *w, struct err *e);
int file_grouped_sync(struct file_grouped *w, struct err *e);
void file_grouped_abort(struct file_grouped *w);

/* Tests only: when set, called with the path of every file or directory this module fsyncs
 * (file_fsync_dir, the file_write_atomic* family, file_fsync), before the fsync; and, when
 * the fsync succeeded, with its descriptor and path after it.  NULL by default. */
extern void (*file_fsync_observer)(const char *path);
extern void (*file_fsync_done_observer)(int fd, const char *path);

/* fsync(fd) of the file path (for the observers above): 0 or -errno. */
int file_fsync(int fd, const char *path);
/* fdatasync(fd) of the file path, announced to the same observers: 0 or -errno. */
int file_fdatasync(int fd, const char *path);
/* syncfs(fd): everything written on the filesystem that holds the directory root (fd is open
 * on it) is durable when it returns 0 (else -errno).  Announced to file_fsync_observer with
 * root before, and to file_syncfs_done_observer with root after (NULL by default), which may
 * take it for every file and directory beneath root. */
extern void (*file_syncfs_done_observer)(const char *root);
int file_syncfs(int fd, const char *root);

/* The power-cut fault point of the durability tests (test/interop/powercut, base/powercut.c):
 * with the environment variable PILLAR_TEST_POWERCUT=<control file> set, the process keeps
 * copies of what a power cut would leave of each directory it fsyncs, and when the control
 * file holds "N ROUND" (a new ROUND), it kills itself (SIGKILL) just before its N-th fsync
 * (fsync, fdatasync or syncfs: file_fsync, file_fdatasync, file_syncfs) from
 * then, after appending "<path of that fsync> <path of the fsync before it>" to <control
 * file>.hit.  Unset: nothing. */
void file_powercut_from_env(void);

#endif
