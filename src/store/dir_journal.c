/* store: the embedded store's write-ahead journal (base/journal.h), PATH/.journal.
 *
 * A durable write is one journal entry (tag PUT: the object's key and its full text as stored;
 * tag DEL: its key), appended with one fdatasync that concurrent writers of a process share,
 * then applied to the object's file WITHOUT fsync (temp, rename; unlink).  The write is durable
 * once the append returns, and only then applied, published and acknowledged.  A checkpoint
 * (syncfs of the store's filesystem) makes the applied files durable and retires the entries;
 * it runs when the journal is half full and when the owner closes the store.
 *
 * Every process that writes the store holds the operation lock (.oplock) from before its append
 * until after its apply, and records in .oplock, before it lets the lock go, that the journal's
 * entries up to its last are applied ("J <boot ID> <sequence>" at MARK_AT; page cache only, like
 * the last issued version).  Whoever takes the lock next (and every process opening the store)
 * compares: the same boot and a lower sequence means a writer died between its append and its
 * apply (its write was never acknowledged, but it is durable): those entries are applied again;
 * another boot (or no mark) means the page cache, and with it any applied file not yet
 * checkpointed, may be gone: every entry the journal holds is applied again and checkpointed.
 * Applying an entry twice gives the same file, so a crash during replay is followed by the same
 * replay.
 *
 * A lazy write (store_write_lazy; dir_commit.c decides when one may be) appends its entry lazily
 * (journal_append_lazy: written and synced with the process's next batch) and is applied and
 * acknowledged at once; the process keeps the operation lock until the entry is written, so
 * the journal's order stays the order of the writes for every process.  A power cut, or the
 * process killed, loses a queued entry: the next holder notes it (.lazy-lost; LAZY_AT). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/journal.h"
#include "base/log.h"
#include "store/dir_int.h"

#define TAG_PUT 1u
#define TAG_DEL 2u
#define MARK_AT 256

/* ---- the applied mark in .oplock -------------------------------------------------------------- */

/* ---- the lazy flag in .oplock ------------------------------------------------------------------ */

/* While the lock holder may have lazy entries queued, .oplock holds "L <boot ID>" at LAZY_AT
 * (page cache only, like the mark): written before the holder's first lazy entry is queued
 * (dir_journal_lazy_flag), cleared with the mark when it lets the lock go, every lazy entry
 * written by then.  A holder killed in between, with no power cut, leaves it: its lazy entries
 * are lost while the files they applied stay, and the next holder, applying the entries past
 * the mark again, may put an object's previous durable version over such a file, as a power
 * cut's replay would.  That holder notes it in .lazy-lost (dir_journal_locked). */
#define LAZY_AT (MARK_AT + 128)
#define LAZY_CLEAR "-                                              \n"

static bool lazy_flag_write(struct dir_store *s, int fd, bool on)
{
	char text[64];
	int n = on ? snprintf(text, sizeof(text), "L %-44s\n", *s->boot_id ? s->boot_id : "-")
	           : snprintf(text, sizeof(text), "%s", LAZY_CLEAR);
	if (pwrite(fd, text, (size_t)n, LAZY_AT) != n)
		return false;
	s->lazy_flagged = on;
	return true;
}

/* True when .oplock holds the lazy flag of this boot. */
static bool lazy_flag_read(struct dir_store *s, int fd)
{
	char buf[64], boot[40];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, LAZY_AT);
	if (n <= 0 || !*s->boot_id)
		return false;
	buf[n] = '\0';
	return sscanf(buf, "L %39s", boot) == 1 && strcmp(boot, s->boot_id) == 0;
}

bool dir_journal_lazy_flag(struct dir_store *s, int fd)
{
	return s->lazy_flagged || (*s->boot_id && fd >= 0 && lazy_flag_write(s, fd, true));
}

/* The applied sequence when .oplock's mark is of this boot, else false. */
static bool mark_read(struct dir_store *s, int fd, uint64_t *seq)
{
	char buf[128], boot[40];
	unsigned long long v;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, MARK_AT);
	if (n <= 0 || !*s->boot_id)
		return false;
	buf[n] = '\0';
	if (sscanf(buf, "J %39s %llu", boot, &v) != 2 || strcmp(boot, s->boot_id) != 0)
		return false;
	*seq = v;
	return true;
}

void dir_journal_mark(struct dir_store *s, int fd)
{
	char text[128];
	if (!s->journal || s->journal_unapplied || fd < 0)
		return; /* no mark: the next lock holder applies the journal again */
	int n = snprintf(text, sizeof(text), "J %s %020llu\n", *s->boot_id ? s->boot_id : "-",
	                 (unsigned long long)journal_last_seq(s->journal));
	if (pwrite(fd, text, (size_t)n, MARK_AT) != n)
		s->journal_unapplied = true;
	else if (s->lazy_flagged)
		lazy_flag_write(s, fd, false);
}

/* ---- applying an entry ------------------------------------------------------------------------- */

static bool secret_key(const char *key)
{
	return strncmp(key, "secrets/", 8) == 0;
}

/* path's directory made when it is missing (a new namespace). */
static int make_dir(const char *path, bool secret, struct err *e)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (mkdir(dir, secret ? 0700 : 0755) == 0 || errno == EEXIST)
		return 0;
	int r = file_mkdir_p(dir, secret ? 0700 : 0755, e);
	return r < 0 ? r : 0;
}

/* data written without fsync under a temporary name in the store's root (tmp, PATH_MAX + 32
 * bytes); path's directory made when it is missing unless dir_known (a file is at path, so its
 * directory is there); *id what was written.  The root is not watched (dir_watch.c): the
 * temporary file's creation and writes wake no notification thread, only its placing does.
 * Nothing is left behind on failure. */
static int write_temp(const char *root, const char *path, const char *data, size_t len, bool secret,
                      bool dir_known, char *tmp, struct file_identity *id, struct err *e)
{
	char in_root[PATH_MAX + 64];
	const char *slash = strrchr(path, '/');
	struct stat st;
	mode_t mode = secret ? 0600 : 0644;
	int made = dir_known ? 0 : make_dir(path, secret, e);
	if (made < 0)
		return made;
	snprintf(in_root, sizeof(in_root), "%s/%s", root, slash + 1);
	int fd = file_temp_create(in_root, mode, tmp, PATH_MAX + 32);
	if (fd == -ENAMETOOLONG)
		return err_set(e, fd, "path too long: %s", path);
	if (fd < 0)
		return err_set(e, fd, "write %s: %s%s", path, strerror(-fd),
		               fd == -ENOSPC ? " (ENOSPC)" : "");
	int r = 0;
	for (size_t off = 0; r == 0 && off < len;) {
		ssize_t n = write(fd, data + off, len - off);
		if (n < 0 && errno != EINTR)
			r = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (r == 0 && fstat(fd, &st) < 0)
		r = -errno;
	close(fd);
	if (r < 0) {
		unlink(tmp);
		return err_set(e, r, "write %s: %s%s", path, strerror(-r),
		               r == -ENOSPC ? " (ENOSPC)" : "");
	}
	if (id)
		*id = (struct file_identity){st.st_ino, st.st_size, st.st_mtim};
	return 0;
}

/* tmp becomes path.  A file it replaces is exchanged with it, then unlinked under the temporary
 * name: readers see at every moment a whole file at path, and one that opened the old file
 * keeps reading it, as a rename gives them; but ext4 takes a rename over an existing file as the
 * replace-by-rename pattern and starts writing the new file's data out at once
 * (auto_da_alloc), an I/O on the path of every write that the journal makes needless (the
 * entry is durable, the file is written out by the checkpoint).  Without an old file (fresh:
 * the writer knows of none, so no exchange is tried), or where the filesystem cannot exchange,
 * a rename.  A directory found missing after all (removed behind the store's back) is made
 * again. */
static int place(const char *tmp, const char *path, bool fresh, bool secret, struct err *e)
{
	if (!fresh && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
		unlink(tmp); /* left behind, a temporary file the owner's open removes */
		return 0;
	}
	if (rename(tmp, path) == 0)
		return 0;
	int r = -errno;
	if (r == -ENOENT && make_dir(path, secret, NULL) == 0 && rename(tmp, path) == 0)
		return 0;
	unlink(tmp);
	return err_set(e, r, "write %s: %s%s", path, strerror(-r), r == -ENOSPC ? " (ENOSPC)" : "");
}

/* A journal entry's key names a file beneath the store: plural/name or plural/ns/name. */
static bool key_ok(const char *key)
{
	int parts = 1;
	if (!*key || *key == '/' || *key == '.')
		return false;
	for (const char *p = key; *p; p++)
		if (*p == '/') {
			if (p[1] == '/' || p[1] == '.' || !p[1])
				return false;
			parts++;
		}
	return parts == 2 || parts == 3;
}

static int apply_entry(void *arg, uint64_t seq, const struct journal_entry *en, struct err *e)
{
	struct dir_store *s = arg;
	char path[PATH_MAX + 64];
	if (!key_ok(en->name) || (en->tag != TAG_PUT && en->tag != TAG_DEL))
		return err_set(e, -EBADMSG,
		               "store journal %s/.journal is corrupt: batch %llu holds "
		               "an entry that is not an object's",
		               s->path, (unsigned long long)seq);
	snprintf(path, sizeof(path), "%s/%s.json", s->path, en->name);
	if (en->tag == TAG_DEL)
		return unlink(path) < 0 && errno != ENOENT
		           ? err_set(e, -errno, "remove %s: %s", path, strerror(errno))
		           : 0;
	char tmp[PATH_MAX + 32];
	bool secret = secret_key(en->name);
	int r = write_temp(s->path, path, en->data, en->len, secret, false, tmp, NULL, e);
	return r < 0 ? r : place(tmp, path, false, secret, e);
}

/* ---- checkpoint -------------------------------------------------------------------------------- */

int dir_journal_sync(void *arg, struct err *e)
{
	struct dir_store *s = arg;
	int fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "open %s: %s", s->path, strerror(errno));
	int r = file_syncfs(fd, s->path);
	close(fd);
	return r < 0 ? err_set(e, r, "sync the filesystem of %s: %s", s->path, strerror(-r)) : 0;
}

int dir_journal_checkpoint(struct dir_store *s, struct err *e)
{
	return s->journal ? journal_checkpoint(s->journal, dir_journal_sync, s, e) : 0;
}

/* ---- the lock holder's duties ----------------------------------------------------------------- */

/* ---- lazy writes a power cut may have taken --------------------------------------------------- */

#define LAZY_LOST "/.lazy-lost"

/* Notes that a journal of another boot held entries (the first lock holder after a power cut,
 * before the replay's checkpoint, whose syncfs makes the note durable): lazy entries queued
 * then may be lost.  A journal with nothing pending held none: a lazy entry is made only while
 * its object's last entry is pending (dir_commit.c), and a close writes the queued ones. */
static void lazy_lost_note(struct dir_store *s)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s" LAZY_LOST, s->path);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		log_warn("store: cannot note that lazy writes may be lost", "file", path, "error",
		         strerror(errno));
	else
		close(fd);
}

bool store_dir_lazy_lost(store *st)
{
	char path[PATH_MAX + 16];
	if (!st || st->ops != &dir_ops)
		return false;
	snprintf(path, sizeof(path), "%s" LAZY_LOST, DS(st)->path);
	return access(path, F_OK) == 0;
}

void store_dir_lazy_recovered(store *st)
{
	char path[PATH_MAX + 16];
	if (!st || st->ops != &dir_ops)
		return;
	snprintf(path, sizeof(path), "%s" LAZY_LOST, DS(st)->path);
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("store: cannot remove a recovered note", "file", path, "error",
		         strerror(errno));
}

int dir_journal_locked(struct dir_store *s, int fd, struct err *e)
{
	uint64_t mark = 0;
	if (!s->journal)
		return 0;
	int r = journal_refresh(s->journal, e);
	if (r < 0)
		return r;
	uint64_t last = journal_last_seq(s->journal);
	bool same_boot = mark_read(s, fd, &mark) && mark <= last;
	bool killed_lazy = same_boot && lazy_flag_read(s, fd); /* see LAZY_AT */
	if (killed_lazy)
		s->lazy_flagged = true; /* cleared with this holder's mark */
	if (same_boot && mark == last && !s->journal_unapplied)
		return 0; /* nothing to apply again: the lazy writes' files stand */
	s->journal_unapplied = true;
	if ((!same_boot && journal_pending(s->journal)) || (killed_lazy && mark < last))
		lazy_lost_note(s);
	r = journal_replay(s->journal, same_boot ? mark : 0, apply_entry, s, e);
	if (r == 0 && !same_boot)
		r = dir_journal_checkpoint(s,
		                           e); /* what was applied before the reboot may be lost */
	if (r < 0)
		return r;
	s->journal_unapplied = false;
	dir_journal_mark(s, fd);
	return 0;
}

int dir_journal_attach(struct dir_store *s, struct err *e)
{
	char path[PATH_MAX];
	if (s->journal)
		return 0;
	snprintf(path, sizeof(path), "%s/.journal", s->path);
	return journal_open(path, STORE_JOURNAL_REGION, 0600, &s->journal, e);
}

int dir_journal_open(struct dir_store *s, bool owner, struct err *e)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s/.journal", s->path);
	if (!owner && stat(path, &st) < 0 && errno == ENOENT)
		return 0; /* nothing to apply; this process's first write makes it */
	int fd = dir_oplock(s, LOCK_EX, e);
	if (fd < 0)
		return fd;
	int r = dir_journal_attach(s, e);
	if (r == 0)
		r = dir_journal_locked(s, fd, e);
	dir_opunlock(fd);
	return r;
}

/* ---- writes ------------------------------------------------------------------------------------ */

int dir_journal_put(struct dir_store *s, const char *key, const char *path, const char *text,
                    size_t len, bool fresh, bool lazy, struct file_identity *id, uint64_t *seq,
                    struct err *e)
{
	bool secret = secret_key(key);
	struct journal_entry en = {TAG_PUT, key, text, len};
	if (len > STORE_OBJECT_MAX)
		return err_set(e, STORE_INVALID, "%s is too large to store: %zu bytes, at most %u",
		               key, len, STORE_OBJECT_MAX);
	char tmp[PATH_MAX + 32];
	/* the content first: a full disk refuses the write before anything is durable */
	int r = write_temp(s->path, path, text, len, secret, !fresh, tmp, id, e);
	if (r < 0)
		return r;
	r = lazy ? journal_append_lazy(s->journal, &en, 1, e)
	         : journal_append(s->journal, &en, 1, seq, e);
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	if (place(tmp, path, fresh, secret, e) < 0) {
		s->journal_unapplied =
		    true; /* durable, not applied: the next lock holder applies it */
		return 1;
	}
	return 0;
}

int dir_journal_del(struct dir_store *s, const char *key, const char *path, struct err *e)
{
	struct journal_entry en = {TAG_DEL, key, NULL, 0};
	int r = journal_append(s->journal, &en, 1, NULL, e);
	if (r < 0)
		return r;
	if (unlink(path) < 0 && errno != ENOENT) {
		s->journal_unapplied = true;
		err_set(e, -errno, "remove %s: %s", path, strerror(errno));
		return 1;
	}
	return 0;
}
