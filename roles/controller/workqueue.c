/* workqueue — keyed, de-duplicated, delayed work with per-key exponential backoff. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/time.h"
#include "controller/reconcile.h"

struct item {
	struct item *next;
	char key[320];
	int64_t due_ms;
	bool queued, active, dirty;
	int failures;
};

struct workqueue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item *items;
	int base_ms, max_ms;
	bool shutdown;
};

int workqueue_new(int base_ms, int max_ms, workqueue **out)
{
	struct workqueue *q = calloc(1, sizeof(*q));
	*out = NULL;
	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cv, &a);
	pthread_condattr_destroy(&a);
	q->base_ms = base_ms;
	q->max_ms = max_ms;
	*out = q;
	return 0;
}

void workqueue_free(workqueue *q)
{
	if (!q)
		return;
	while (q->items) {
		struct item *n = q->items->next;
		free(q->items);
		q->items = n;
	}
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

static struct item *find(workqueue *q, const char *key, bool create)
{
	for (struct item *i = q->items; i; i = i->next)
		if (!strcmp(i->key, key))
			return i;
	if (!create)
		return NULL;
	struct item *i = calloc(1, sizeof(*i));
	if (!i)
		return NULL;
	snprintf(i->key, sizeof(i->key), "%s", key);
	i->next = q->items;
	q->items = i;
	return i;
}

void workqueue_add(workqueue *q, const char *key, int delay_ms)
{
	pthread_mutex_lock(&q->mu);
	struct item *i = find(q, key, true);
	if (i) {
		int64_t due = time_mono_ms() + (delay_ms > 0 ? delay_ms : 0);
		if (i->active) {
			i->dirty = true; /* re-run after the current pass */
			if (!i->queued || due < i->due_ms)
				i->due_ms = due;
		} else if (!i->queued || due < i->due_ms) {
			i->due_ms = due;
		}
		i->queued = true;
	}
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

int workqueue_get(workqueue *q, int timeout_ms, char *key, size_t cap)
{
	int64_t deadline = time_mono_ms() + timeout_ms;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		if (q->shutdown) {
			pthread_mutex_unlock(&q->mu);
			return -ESHUTDOWN;
		}
		int64_t t = time_mono_ms(), next = deadline;
		struct item *best = NULL;
		for (struct item *i = q->items; i; i = i->next) {
			if (!i->queued || i->active)
				continue;
			if (i->due_ms <= t && (!best || i->due_ms < best->due_ms))
				best = i;
			else if (i->due_ms < next)
				next = i->due_ms;
		}
		if (best) {
			best->queued = false;
			best->active = true;
			best->dirty = false;
			snprintf(key, cap, "%s", best->key);
			pthread_mutex_unlock(&q->mu);
			return 1;
		}
		if (t >= deadline) {
			pthread_mutex_unlock(&q->mu);
			return 0;
		}
		struct timespec ts = time_after(CLOCK_MONOTONIC, next - t);
		pthread_cond_timedwait(&q->cv, &q->mu, &ts);
	}
}

int workqueue_done(workqueue *q, const char *key, bool ok)
{
	int delay = 0;
	pthread_mutex_lock(&q->mu);
	struct item *i = find(q, key, false);
	if (i) {
		i->active = false;
		if (ok) {
			i->failures = 0;
		} else {
			int64_t d = q->base_ms;
			for (int k = 0; k < i->failures && d < q->max_ms; k++)
				d *= 2;
			if (d > q->max_ms)
				d = q->max_ms;
			i->failures++;
			delay = (int)d;
			int64_t due = time_mono_ms() + d;
			if (!i->queued || i->dirty || due < i->due_ms)
				i->due_ms = i->queued && i->due_ms < due ? i->due_ms : due;
			i->queued = true;
		}
	}
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return delay;
}

void workqueue_shutdown(workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	q->shutdown = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

size_t workqueue_len(workqueue *q)
{
	size_t n = 0;
	pthread_mutex_lock(&q->mu);
	for (struct item *i = q->items; i; i = i->next)
		n += i->queued;
	pthread_mutex_unlock(&q->mu);
	return n;
}
