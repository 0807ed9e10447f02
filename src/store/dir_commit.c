/* store: group commit of an indexed store's writes.
 *
 * A write is the same durable sequence as ever (temp -> fsync -> rename -> fsync(directory),
 * dir.c), but the process's mutex is not held across its fsyncs: concurrent writes of different
 * objects fsync their own files side by side and share the fsync of their kind's directory
 * (file_write_atomic_grouped's steps, one group per kind).  What stays serial, and why:
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
 * A failed write publishes nothing; its version is spent (versions are unique, not dense). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

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
	while (s->op_holders > 0 && s->op_batch >= OP_TURN)
		pthread_cond_wait(&s->flight_cv, &s->mu);
	if (s->op_holders == 0) {
		int fd = dir_oplock(s, LOCK_EX, e);
		if (fd < 0)
			return fd;
		s->op_fd = fd;
		s->op_batch = 0;
	}
	s->op_holders++;
	s->op_batch++;
	return 0;
}

static void op_release(struct dir_store *s)
{
	if (--s->op_holders == 0) {
		dir_opunlock(s->op_fd);
		s->op_fd = -1;
	}
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

/* The durable part, without the mutex: the file written, renamed and its directory fsync'd (or
 * the file removed and its directory fsync'd); *placed when path changed. */
static int persist(struct dir_store *s, struct opreq *q, const char *path, cJSON *next, uint64_t rv,
                   struct file_identity *id, bool *placed, struct err *e)
{
	int ki = dir_kind_index(q->kind);
	bool secret = strcmp(q->kind->kind, "Secret") == 0;
	struct file_grouped w;
	size_t len;
	*placed = false;
	if (ki < 0)
		return err_set(e, STORE_INVALID, "kind %s is not stored here", q->kind->kind);
	if (!next) {
		const char *slash = strrchr(path, '/');
		if (unlink(path) < 0)
			return errno == ENOENT
			           ? 0
			           : err_set(e, -errno, "remove %s: %s", path, strerror(errno));
		*placed = true;
		snprintf(w.dir, sizeof(w.dir), "%.*s", (int)(slash - path), path);
		return file_fsync_dir(w.dir, e);
	}
	struct file_write_group *g = &s->groups[ki];
	char *text = dir_encode(next, rv, &len);
	if (!text)
		return err_set(e, -ENOMEM, "encode %s: out of memory", path);
	int r = file_grouped_prepare(g, path, text, len, secret ? 0600 : 0644, &w, e);
	if (r == -ENOENT) { /* a new namespace: its directory */
		struct err e2 = {0};
		if ((r = file_mkdir_p(w.dir, secret ? 0700 : 0755, &e2)) == 0)
			r = file_grouped_prepare(g, path, text, len, secret ? 0600 : 0644, &w, e);
		else if (e)
			*e = e2;
	}
	free(text);
	if (r == 0 && (r = file_grouped_place(&w, e)) == 0) {
		*placed = true;
		*id = (struct file_identity){w.id.st_ino, w.id.st_size, w.id.st_mtim};
		r = file_grouped_sync(&w, e);
	}
	return r;
}

/* Publishes f in version order, takes it out of flight (mu held). */
static void finish(struct dir_store *s, struct opreq *q, struct flight *f, const cJSON *cur,
                   cJSON *next, const struct file_identity *id, bool published, bool placed)
{
	while (s->flight != f)
		pthread_cond_wait(&s->flight_cv, &s->mu);
	if (published)
		dir_publish(s, q, f->key, cur, next, f->rv, id);
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

int dir_write_grouped(struct dir_store *s, struct opreq *q, const char *key, const char *path,
                      struct err *e)
{
	struct flight f = {.key = key};
	struct file_identity id = {0};
	cJSON *cur = NULL, *next = NULL;
	uint64_t rv;
	bool placed;
	pthread_mutex_lock(&s->mu);
	int r = plan(s, q, &f, path, &cur, &next, &rv, e);
	pthread_mutex_unlock(&s->mu);
	if (r < 0) {
		cJSON_Delete(cur);
		cJSON_Delete(next);
		return r;
	}
	r = persist(s, q, path, next, rv, &id, &placed, e);
	pthread_mutex_lock(&s->mu);
	finish(s, q, &f, cur, next, &id, r == 0, placed);
	pthread_mutex_unlock(&s->mu);
	if (r == 0 && next && q->out) {
		*q->out = next;
		next = NULL;
	}
	cJSON_Delete(cur);
	cJSON_Delete(next);
	return r < 0 ? r : 0;
}
