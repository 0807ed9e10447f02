/* store: the embedded store's health (store_health) — what its index in memory cannot show. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/dir_int.h"

/* The owner's lock is its flock on the open .lock file (owner_fd).  It is held only while that
 * file is the one at PATH/.lock: a directory removed and made again, or a .lock replaced, lets
 * another controller lock the new file.  Re-locking through owner_fd is a no-op while the lock
 * is held, and fails when another process holds it (a lock the filesystem dropped). */
static int owner_lock_held(struct dir_store *s, struct err *e)
{
	char p[PATH_MAX];
	struct stat held, at;
	snprintf(p, sizeof(p), "%s/.lock", s->path);
	if (fstat(s->owner_fd, &held) < 0)
		return err_set(e, -errno, "store %s: its lock file: %s", s->path, strerror(errno));
	if (stat(p, &at) < 0) {
		int r = -errno;
		return err_set(e, r == -ENOENT ? -ENOLCK : r,
		               "store %s: this process no longer holds its lock: %s: %s", s->path,
		               p, strerror(-r));
	}
	if (held.st_dev != at.st_dev || held.st_ino != at.st_ino)
		return err_set(e, -ENOLCK,
		               "store %s: this process no longer holds its lock: %s was replaced",
		               s->path, p);
	if (flock(s->owner_fd, LOCK_EX | LOCK_NB) < 0)
		return err_set(e, -ENOLCK,
		               "store %s: this process no longer holds its lock on %s: %s", s->path,
		               p, strerror(errno));
	return 0;
}

int dir_health(store *st, struct err *e)
{
	struct dir_store *s = DS(st);
	/* the effective IDs, as the store's own opens use; root passes any mode bits but not a
	 * read-only filesystem (EROFS) nor a removed directory (ENOENT) */
	if (faccessat(AT_FDCWD, s->path, R_OK | W_OK | X_OK, AT_EACCESS) < 0)
		return err_set(e, -errno, "store directory %s is not readable and writable: %s",
		               s->path, strerror(errno));
	return s->owner_fd >= 0 ? owner_lock_held(s, e) : 0;
}
