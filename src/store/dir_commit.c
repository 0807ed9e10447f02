/* store: group commit of an indexed store's writes.
 *
 * A write is one journal entry and its file written without fsync (dir_journal.c), and the
 * process's mutex is not held across the journal's fdatasync: concurrent writes of different
 * objects share one (the journal's group commit).  What stays serial, and why:
 *   - the version and the plan: issued under the mutex and the operation lock, from the index,
 *     as before; the process keeps the operation lock (flock) while any write is in flight, so
 *     no other process writes, or reads a version, in between (and lets it go after at most
 *     OP_TURN writes, so that other processes' writes get their turn);
 *   - one object's writes: a write waits while another of the same object is in flight, so it
 *     plans against the durable result of the one before;
 *   - publication: the index and the event history (what get, list and watches see) take a
 *     write only once it is durable, and in version order (a write that finished early waits
 *     for the ones issued before it), so nothing is seen that a power cut could take back, and
 *     watches see versions in order.  The index leaves an in-flight object's file alone
 *     (dir_in_flight): the write publishes it, or, when the write failed after its rename, the
 *     index reads the file again once the write is no longer in flight.
 * A failed write publishes nothing; its version is spent (versions are unique, not dense).
 *
 * A lazy write (store_write_lazy) is an update whose journal entry is lazy
 * (journal_append_lazy): queued, written with the next batch of the process, so it is
 * published once applied, before it is durable.  It is lazy only when the object's last
 * durable entry (index_entry.jseq) is in the journal's active region: no checkpoint can retire
 * that entry before the lazy one's file is synced (a checkpoint begins only with no write in
 * flight, after the lazy write's apply, and its syncfs covers that file), so a power cut that
 * loses the lazy entry replays the previous one over whatever the file holds (the file,
 * written without fsync, may be torn).  While lazy entries are queued the process holds a
 * share of the operation lock (no other process appends ahead of them: the journal's order is
 * the order of the writes); the flusher thread writes them (journal_flush) STORE_LAZY_MS after
 * the first, or at once when a write waits for the lock's turn (OP_TURN), then lets the share
 * go.  A durable write of the process carries them in its own batch before that. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "store/dir_int.h"

bool dir_in_flight(struct dir_store *s, const char *key)
{
	for (const struct flight *f = s->flight; f; f = f->next)
		if (strcmp(f->key, key) == 0)
			return true;
	return false;
}

/* The process's share of the operation lock (mu held).  The lock is other processes' turn
 * too (writers take it per operation): once OP_TURN writes have joined since the process took
 * it, a new write waits until the writes in flight are done and the lock was let go. */
#define OP_TURN 64
static int op_hold(struct dir_store *s, struct err *e)
{
	while (s->op_holders > 0 && s->op_batch >= OP_TURN) {
		if (s->lazy_share && !s->flush_now) { /* the lazy entries' share: let it go now */
			s->flush_now = true;
			pthread_cond_signal(&s->flush_cv);
		}
		pthread_cond_wait(&s->flight_cv, &s->mu);
	}
	if (s->op_holders == 0) {
		int fd = dir_oplock_kept(s, e), r;
		if (fd < 0)
			return fd;
		if ((r = dir_journal_locked(s, fd, e)) < 0) {
			flock(fd, LOCK_UN);
			return r;
		}
		s->op_fd = fd;
		s->op_batch = 0;
	}
	s->op_holders++;
	s->op_batch++;
	return 0;
}

static void op_let_go(struct dir_store *s);

/* The checkpoint's sync and the old region's retirement, on their own thread, with the share
 * of the operation lock its beginning took. */
static void *checkpoint_main(void *arg)
{
	struct dir_store *s = arg;
	struct err e = {0};
	int r = dir_journal_sync(s, &e);
	pthread_mutex_lock(&s->mu);
	if (r == 0)
		r = journal_checkpoint_end(s->journal, s->checkpoint_ticket, &e);
	if (r < 0) /* retried by the next checkpoint: its beginning completes this one */
		log_warn("store journal checkpoint failed", "error", e.msg);
	s->checkpointing = false;
	op_let_go(s);
	pthread_cond_broadcast(&s->flight_cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

void dir_checkpointer_join(struct dir_store *s)
{
	if (s->checkpointer_joinable)
		pthread_join(s->checkpointer, NULL);
	s->checkpointer_joinable = false;
}

/* The checkpoint when the journal is half full, begun by the last write out of flight (mu
 * held, no write in flight, every appended entry applied): the regions switched (a header
 * write, no sync), then the sync and the retirement on the checkpoint thread, which takes a
 * share of the operation lock over from the write.  Writes go on meanwhile, into the new
 * region; none waits for the sync. */
static void checkpoint_due(struct dir_store *s)
{
	struct err e = {0};
	if (s->checkpointing || !journal_should_checkpoint(s->journal))
		return;
	dir_checkpointer_join(s); /* the last one is done: it let go of the mutex last */
	int r = journal_checkpoint_begin(s->journal, &s->checkpoint_ticket, &e);
	if (r < 0)
		log_warn("store journal checkpoint failed", "error", e.msg);
	if (r < 0 || !s->checkpoint_ticket)
		return;
	s->checkpointing = true;
	s->op_holders++;
	if (pthread_create(&s->checkpointer, NULL, checkpoint_main, s) == 0) {
		s->checkpointer_joinable = true;
		return;
	}
	pthread_mutex_unlock(&s->mu); /* no thread: the sync here, as a last resort */
	r = dir_journal_sync(s, &e);
	pthread_mutex_lock(&s->mu);
	if (r == 0)
		r = journal_checkpoint_end(s->journal, s->checkpoint_ticket, &e);
	if (r < 0)
		log_warn("store journal checkpoint failed", "error", e.msg);
	s->checkpointing = false;
	s->op_holders--;
}

/* A share of the operation lock given back (mu held): the last one lets the lock go. */
static void op_let_go(struct dir_store *s)
{
	if (--s->op_holders == 0) {
		dir_journal_mark(s, s->op_fd);
		flock(s->op_fd, LOCK_UN); /* op_keep stays open for the next write */
		s->op_fd = -1;
	}
}

static void op_release(struct dir_store *s)
{
	if (s->op_holders == 1u + s->lazy_share) /* the last write out of flight */
		checkpoint_due(s);
	op_let_go(s);
}

/* True when key's last durable entry is in the journal's active region (mu and the operation
 * lock held): a lazy entry of it may be lost to a power cut. */
static bool lazy_ok(struct dir_store *s, const char *key)
{
	struct index_entry *en = dir_index_find(s, key);
	return s->journal && en && en->jseq && en->jseq >= journal_active_first(s->journal);
}

/* ---- lazy entries ------------------------------------------------------------------------------ */

static void lazy_deadline(const struct dir_store *s, struct timespec *t)
{
	*t = s->lazy_since;
	t->tv_nsec += (long)(STORE_LAZY_MS % 1000) * 1000000L;
	t->tv_sec += STORE_LAZY_MS / 1000 + t->tv_nsec / 1000000000L;
	t->tv_nsec %= 1000000000L;
}

static bool lazy_due(const struct dir_store *s)
{
	struct timespec now, due;
	clock_gettime(CLOCK_MONOTONIC, &now);
	lazy_deadline(s, &due);
	return s->flush_now || now.tv_sec > due.tv_sec ||
	       (now.tv_sec == due.tv_sec && now.tv_nsec >= due.tv_nsec);
}

/* Writes the queued lazy entries (mu held, lazy_share; mu let go meanwhile) and lets their
 * share of the operation lock go, unless more were queued meanwhile or the write failed (then
 * tried again STORE_LAZY_MS later; a full journal is checkpointed first when nothing else
 * holds the lock, its syncfs covering what the entries applied). */
static void lazy_flush(struct dir_store *s)
{
	struct err e = {0};
	s->flush_now = false;
	pthread_mutex_unlock(&s->mu);
	int r = journal_flush(s->journal, &e);
	pthread_mutex_lock(&s->mu);
	if (r < 0 && r != JOURNAL_FULL)
		log_warn("store journal: lazy entries not written yet", "error", e.msg);
	if (r == JOURNAL_FULL && s->op_holders == 1)
		checkpoint_due(s);
	if (r < 0 || journal_lazy_pending(s->journal)) {
		clock_gettime(CLOCK_MONOTONIC, &s->lazy_since);
		return;
	}
	s->lazy_share = false;
	op_release(s);
	pthread_cond_broadcast(&s->flight_cv);
}

static void *flusher_main(void *arg)
{
	struct dir_store *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->flusher_stop) {
		struct timespec due;
		if (!s->lazy_share) {
			pthread_cond_wait(&s->flush_cv, &s->mu);
		} else if (!lazy_due(s)) {
			lazy_deadline(s, &due);
			pthread_cond_timedwait(&s->flush_cv, &s->mu, &due);
		} else {
			lazy_flush(s);
		}
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* A lazy entry was queued (mu held): the process keeps a share of the operation lock for the
 * queued entries, and the flusher (started the first time) writes them by the deadline. */
static void lazy_hold(struct dir_store *s)
{
	if (!s->flusher_running && !s->flusher_stop) {
		pthread_condattr_t a;
		pthread_condattr_init(&a);
		pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
		pthread_cond_init(&s->flush_cv, &a);
		pthread_condattr_destroy(&a);
		s->flusher_running = pthread_create(&s->flusher, NULL, flusher_main, s) == 0;
		if (!s->flusher_running)
			pthread_cond_destroy(&s->flush_cv);
	}
	if (!s->lazy_share) {
		s->lazy_share = true;
		s->op_holders++;
		clock_gettime(CLOCK_MONOTONIC, &s->lazy_since);
		if (s->flusher_running)
			pthread_cond_signal(&s->flush_cv); /* its deadline starts now */
	}
	if (!s->flusher_running) /* no thread: written here, as a last resort */
		lazy_flush(s);
}

int store_dir_flush(store *st, struct err *e)
{
	if (!st || st->ops != &dir_ops || !DS(st)->journal)
		return 0;
	return journal_flush(DS(st)->journal, e);
}

void dir_lazy_stop(struct dir_store *s)
{
	pthread_mutex_lock(&s->mu);
	bool running = s->flusher_running;
	s->flusher_stop = true;
	if (running)
		pthread_cond_signal(&s->flush_cv);
	pthread_mutex_unlock(&s->mu);
	if (running) {
		pthread_join(s->flusher, NULL);
		pthread_cond_destroy(&s->flush_cv);
	}
	pthread_mutex_lock(&s->mu);
	s->flusher_running = false;
	if (s->lazy_share) { /* once; what is left the close's checkpoint makes durable */
		s->flush_now = true;
		lazy_flush(s);
		if (s->lazy_share) {
			s->lazy_share = false;
			op_release(s);
		}
	}
	pthread_mutex_unlock(&s->mu);
}

/* Plans q under the mutex and the operation lock: *next (NULL: a delete), *cur, *rv, and f in
 * flight.  mu held; on failure nothing is in flight and the lock share is given back. */
static int plan(struct dir_store *s, struct opreq *q, struct flight *f, const char *path,
                cJSON **cur, cJSON **next, uint64_t *rv, struct err *e)
{
	while (dir_in_flight(s, f->key))
		pthread_cond_wait(&s->flight_cv, &s->mu);
	int r = op_hold(s, e);
	if (r < 0)
		return r;
	if ((r = dir_current(s, f->key, path, cur, e)) == 0 &&
	    (r = dir_plan(q, *cur, next, e)) >= 0)
		r = dir_rv_issue(s, s->op_fd, rv, e);
	f->lazy = r == 0 && q->lazy && *cur && *next && lazy_ok(s, f->key) &&
	          dir_journal_lazy_flag(s, s->op_fd);
	if (r < 0) {
		op_release(s);
		return r;
	}
	f->rv = *rv;
	if (s->flight_tail)
		s->flight_tail->next = f;
	else
		s->flight = f;
	s->flight_tail = f;
	return 0;
}

/* The durable part, without the mutex: the journal entry, then the file written and renamed
 * (or removed) without fsync (dir_journal.c); *placed when path may have changed. */
static int persist(struct dir_store *s, struct opreq *q, struct flight *f, const char *path,
                   const cJSON *cur, cJSON *next, struct file_identity *id, bool *placed,
                   struct err *e)
{
	size_t len;
	int r;
	*placed = false;
	if (dir_kind_index(q->kind) < 0)
		return err_set(e, STORE_INVALID, "kind %s is not stored here", q->kind->kind);
	if (!next) {
		r = dir_journal_del(s, f->key, path, e);
	} else {
		char *text = dir_encode(next, f->rv, &len);
		if (!text)
			return err_set(e, -ENOMEM, "encode %s: out of memory", path);
		r = dir_journal_put(s, f->key, path, text, len, !cur, f->lazy, id, &f->seq, e);
		free(text);
	}
	f->queued = f->lazy && r >= 0;
	if (r == JOURNAL_FULL)
		err_prefix(e, "store %s: its journal waits for a checkpoint, retry", s->path);
	*placed = r >= 0;
	return r == 1 ? e && e->code ? e->code : -EIO : r;
}

/* Publishes f in version order, takes it out of flight (mu held). */
static void finish(struct dir_store *s, struct opreq *q, struct flight *f, const cJSON *cur,
                   cJSON *next, const struct file_identity *id, bool published, bool placed)
{
	while (s->flight != f)
		pthread_cond_wait(&s->flight_cv, &s->mu);
	if (published)
		dir_publish(s, q, f->key, cur, next, f->rv, id);
	struct index_entry *en = published && next && !f->lazy ? dir_index_find(s, f->key) : NULL;
	if (en)
		en->jseq = f->seq;
	if (f->queued)
		lazy_hold(s);
	s->flight = f->next;
	if (!s->flight)
		s->flight_tail = NULL;
	if (!published && placed) { /* the file changed, durably or not: the index reads it */
		char *key = (char *)f->key;
		dir_index_refresh(s, store_kinds(), &key, 1, true);
	}
	op_release(s);
	pthread_cond_broadcast(&s->flight_cv);
}

/* One attempt of a write: planned, made durable, published.  *cur and *next are the attempt's
 * (the caller frees them). */
static int write_once(struct dir_store *s, struct opreq *q, const char *key, const char *path,
                      cJSON **cur, cJSON **next, struct err *e)
{
	struct flight f = {.key = key};
	struct file_identity id = {0};
	uint64_t rv;
	bool placed;
	pthread_mutex_lock(&s->mu);
	int r = plan(s, q, &f, path, cur, next, &rv, e);
	pthread_mutex_unlock(&s->mu);
	if (r < 0)
		return r;
	r = persist(s, q, &f, path, *cur, *next, &id, &placed, e);
	pthread_mutex_lock(&s->mu);
	finish(s, q, &f, *cur, *next, &id, r == 0, placed);
	pthread_mutex_unlock(&s->mu);
	return r;
}

/* A write that found the journal full made nothing durable; the region frees once the running
 * checkpoint's sync ends, or once the last write out of flight begins one (finish above).  The
 * write waits for that and is tried again, so a slow disk slows writes and fails none.  Each
 * retry follows a checkpoint, so a write gives up only if other writes fill every region it
 * frees, WRITE_TRIES times in a row. */
#define WRITE_TRIES 16

int dir_write_grouped(struct dir_store *s, struct opreq *q, const char *key, const char *path,
                      struct err *e)
{
	cJSON *cur = NULL, *next = NULL;
	int r = JOURNAL_FULL;
	bool lazy = store_write_lazy(false);
	store_write_lazy(lazy);
	q->lazy = lazy;
	for (int tries = 0; r == JOURNAL_FULL && tries < WRITE_TRIES; tries++) {
		if (tries) {
			cJSON_Delete(cur);
			cJSON_Delete(next);
			cur = next = NULL;
			err_clear(e);
			pthread_mutex_lock(&s->mu);
			while (s->checkpointing)
				pthread_cond_wait(&s->flight_cv, &s->mu);
			pthread_mutex_unlock(&s->mu);
		}
		r = write_once(s, q, key, path, &cur, &next, e);
	}
	if (r == 0 && next && q->out) {
		*q->out = next;
		next = NULL;
	}
	cJSON_Delete(cur);
	cJSON_Delete(next);
	return r < 0 ? r : 0;
}
