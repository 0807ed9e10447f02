/* store/kube watches: a store_watch over API watch streams.  The server ends every stream after
 * its timeoutSeconds (and may drop the connection); the watch then reopens from the last
 * resourceVersion it saw (an event's or a bookmark's), so the caller sees one uninterrupted
 * sequence.  A watch from version 0 lists first and delivers the listed objects as ADDED, so a
 * reopen always has a version to resume from.  410 Gone/Expired is STORE_EXPIRED: relist. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "kube/watch.h"
#include "store/kube_int.h"

/* a stream silent 30 s longer than its timeoutSeconds is taken for a dead connection */
#define WATCH_GRACE_MS 30000LL
/* a stream whose answer did not come within this long is given up (the request timeout) */
#define OPEN_TIMEOUT_MS 30000LL

struct kube_store_watcher {
	store_watch base;
	struct kube_client *kc;
	const struct store_kind *k;
	struct kube_store_res res;
	char rv[32];
	int watch_secs;
	cJSON *pending; /* listed objects not yet delivered (from version 0) */
	struct kube_watch *w;
	bool ready;      /* w answered: its events are read; else its answer is awaited */
	int64_t last_ms; /* when the stream was started or last delivered something */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool closed, busy;
};

/* Starts a stream from x->rv without waiting for its answer (step() awaits it in slices of the
 * caller's timeout, and close can cancel it meanwhile). */
static int reopen(struct kube_store_watcher *x, struct err *e)
{
	struct kube_list_opts lo = {.resource_version = x->rv};
	struct kube_status ks;
	struct kube_watch *w = NULL;
	int rc = kube_watch_start(x->kc, &x->res.r, NULL, &lo, x->watch_secs, &w, &ks);
	if (rc < 0)
		return kube_store_fail(rc, &ks, e);
	pthread_mutex_lock(&x->mu);
	if (x->closed) {
		pthread_mutex_unlock(&x->mu);
		kube_watch_free(w);
		return err_set(e, -ECANCELED, "watch closed");
	}
	x->w = w;
	x->ready = false;
	pthread_mutex_unlock(&x->mu);
	x->last_ms = time_mono_ms();
	return 0;
}

static void drop_stream(struct kube_store_watcher *x)
{
	pthread_mutex_lock(&x->mu);
	struct kube_watch *w = x->w;
	x->w = NULL;
	pthread_mutex_unlock(&x->mu);
	kube_watch_free(w);
}

int kube_store_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **out,
                     struct err *e)
{
	struct kube_store_watcher *x = calloc(1, sizeof(*x));
	int rc;
	*out = NULL;
	if (!x)
		return err_set(e, -ENOMEM, "out of memory");
	x->base.ops = st->ops;
	x->kc = kube_store_client(st, &x->watch_secs);
	x->k = k;
	kube_store_resource(k, &x->res);
	pthread_mutex_init(&x->mu, NULL);
	pthread_cond_init(&x->cv, NULL);
	if (from_rv == 0) {
		uint64_t rv = 0;
		if ((rc = store_list(st, k, NULL, NULL, &x->pending, &rv, e)) < 0)
			goto fail;
		from_rv = rv;
	}
	snprintf(x->rv, sizeof(x->rv), "%" PRIu64, from_rv);
	if ((rc = reopen(x, e)) < 0)
		goto fail;
	*out = &x->base;
	return 0;
fail:
	kube_store_watch_close(&x->base);
	return rc;
}

static enum store_event_type store_type(enum kube_event_type t)
{
	return t == KUBE_ADDED ? STORE_ADDED : t == KUBE_MODIFIED ? STORE_MODIFIED : STORE_DELETED;
}

/* Waits up to wait_ms for the answer of a started stream: 2 when it is open, 0 when it has not
 * answered yet, or a negative code (the stream is dropped; STORE_EXPIRED for 410). */
static int await_answer(struct kube_store_watcher *x, int64_t wait_ms, struct err *e)
{
	struct kube_status ks;
	int rc = kube_watch_ready(x->w, wait_ms > 0 ? wait_ms : 1, &ks);
	if (rc == 0 && time_mono_ms() - x->last_ms < OPEN_TIMEOUT_MS)
		return 0;
	if (rc == 1) {
		x->ready = true;
		x->last_ms = time_mono_ms();
		return 2;
	}
	drop_stream(x);
	if (rc == 0)
		return err_set(e, -ETIMEDOUT, "watch of %s: no answer within %lld ms", x->k->plural,
		               OPEN_TIMEOUT_MS);
	if (rc == -ECANCELED)
		return err_set(e, -ECANCELED, "watch closed");
	return kube_store_fail(rc, &ks, e);
}

/* One step: 1 with an event, 0 when nothing arrived within wait_ms, 2 to go on (bookmark,
 * stream reopened), or a negative code. */
static int step(struct kube_store_watcher *x, int64_t wait_ms, enum store_event_type *type,
                cJSON **obj, struct err *e)
{
	enum kube_event_type t;
	struct kube_status ks;
	cJSON *o = NULL;
	if (!x->w)
		return reopen(x, e) < 0 ? e->code : 2;
	if (!x->ready)
		return await_answer(x, wait_ms, e);
	int rc = kube_watch_next(x->w, &t, &o, wait_ms > 0 ? wait_ms : 1, &ks);
	if (rc == 1) {
		const char *rv = store_meta_str(o, "resourceVersion");
		x->last_ms = time_mono_ms();
		if (rv && *rv)
			snprintf(x->rv, sizeof(x->rv), "%s", rv);
		if (t == KUBE_BOOKMARK || !cJSON_IsObject(o)) {
			cJSON_Delete(o);
			return 2;
		}
		kube_store_typed(o, x->k);
		*type = store_type(t);
		*obj = o;
		return 1;
	}
	if (rc == -ETIMEDOUT &&
	    time_mono_ms() - x->last_ms < x->watch_secs * 1000LL + WATCH_GRACE_MS)
		return 0;
	if (rc == -ECANCELED)
		return err_set(e, -ECANCELED, "watch closed");
	if (rc < 0 && (rc == -ERANGE || ks.kind == KUBE_EXPIRED || ks.kind == KUBE_GONE))
		return kube_store_fail(rc, &ks, e);
	/* the stream ended (timeoutSeconds), fell silent or broke: resume from x->rv */
	drop_stream(x);
	return reopen(x, e) < 0 ? e->code : 2;
}

static int next_event(struct kube_store_watcher *x, int timeout_ms, enum store_event_type *type,
                      cJSON **obj, struct err *e)
{
	int64_t deadline = time_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	if (x->pending && x->pending->child) {
		*obj = cJSON_DetachItemViaPointer(x->pending, x->pending->child);
		*type = STORE_ADDED;
		return 1;
	}
	for (;;) {
		int rc = step(x, deadline - time_mono_ms(), type, obj, e);
		if (rc != 2)
			return rc;
		if (time_mono_ms() >= deadline)
			return 0;
	}
}

int kube_store_watch_next(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
                          struct err *e)
{
	struct kube_store_watcher *x = (struct kube_store_watcher *)w;
	struct err local = {0};
	*obj = NULL;
	if (!e)
		e = &local;
	pthread_mutex_lock(&x->mu);
	if (x->closed) {
		pthread_mutex_unlock(&x->mu);
		return err_set(e, -ECANCELED, "watch closed");
	}
	x->busy = true;
	pthread_mutex_unlock(&x->mu);
	int rc = next_event(x, timeout_ms, type, obj, e);
	pthread_mutex_lock(&x->mu);
	x->busy = false;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
	return rc;
}

void kube_store_watch_close(store_watch *w)
{
	struct kube_store_watcher *x = (struct kube_store_watcher *)w;
	pthread_mutex_lock(&x->mu);
	x->closed = true;
	if (x->w)
		kube_watch_cancel(x->w);
	while (x->busy)
		pthread_cond_wait(&x->cv, &x->mu);
	pthread_mutex_unlock(&x->mu);
	kube_watch_free(x->w);
	cJSON_Delete(x->pending);
	pthread_cond_destroy(&x->cv);
	pthread_mutex_destroy(&x->mu);
	free(x);
}
