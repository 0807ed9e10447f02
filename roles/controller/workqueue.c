/* workqueue — keyed, de-duplicated, delayed work with client-go's default controller rate
 * limiting (reconcile.h).  Items live in a hash table while they are queued, waiting, being
 * processed or remembered for backoff; ready items form a FIFO, delayed ones a min-heap on their
 * due time, so add, get and done cost O(log n) whatever the number of keys. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hash.h"
#include "base/time.h"
#include "controller/reconcile.h"

struct item {
	struct item *hnext, *qnext;
	int64_t due_ms;
	size_t heap_at; /* index in the heap while waiting */
	bool dirty, processing, waiting;
	int failures;
	char key[];
};

struct workqueue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item **tab;
	size_t nbuckets, nitems;
	struct item *head, *tail; /* ready FIFO (dirty, not processing) */
	struct item **heap;       /* waiting, ordered by due_ms */
	size_t nheap, heapcap, nready;
	int base_ms, max_ms;
	double tokens; /* the overall token bucket */
	int64_t tokens_at;
	bool shutdown;
};

int workqueue_new(int base_ms, int max_ms, workqueue **out)
{
	struct workqueue *q = calloc(1, sizeof(*q));
	*out = NULL;
	if (!q || !(q->tab = calloc(64, sizeof(*q->tab)))) {
		free(q);
		return -ENOMEM;
	}
	q->nbuckets = 64;
	pthread_mutex_init(&q->mu, NULL);
	time_cond_init_mono(&q->cv);
	q->base_ms = base_ms;
	q->max_ms = max_ms;
	q->tokens = WORKQUEUE_BURST;
	q->tokens_at = time_mono_ms();
	*out = q;
	return 0;
}

void workqueue_free(workqueue *q)
{
	if (!q)
		return;
	for (size_t b = 0; b < q->nbuckets; b++)
		while (q->tab[b]) {
			struct item *n = q->tab[b]->hnext;
			free(q->tab[b]);
			q->tab[b] = n;
		}
	free(q->tab);
	free(q->heap);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

static void grow(workqueue *q)
{
	size_t nb = q->nbuckets * 2;
	struct item **t = calloc(nb, sizeof(*t));
	if (!t)
		return; /* longer chains, still correct */
	for (size_t b = 0; b < q->nbuckets; b++)
		while (q->tab[b]) {
			struct item *i = q->tab[b];
			q->tab[b] = i->hnext;
			i->hnext = t[hash_fnv1a64(i->key) & (nb - 1)];
			t[hash_fnv1a64(i->key) & (nb - 1)] = i;
		}
	free(q->tab);
	q->tab = t;
	q->nbuckets = nb;
}

static struct item *find(workqueue *q, const char *key, bool create)
{
	struct item **b = &q->tab[hash_fnv1a64(key) & (q->nbuckets - 1)];
	for (struct item *i = *b; i; i = i->hnext)
		if (!strcmp(i->key, key))
			return i;
	if (!create)
		return NULL;
	size_t n = strlen(key) + 1;
	struct item *i = calloc(1, sizeof(*i) + n);
	if (!i)
		return NULL;
	memcpy(i->key, key, n);
	i->hnext = *b;
	*b = i;
	if (++q->nitems > q->nbuckets)
		grow(q);
	return i;
}

/* Frees an item nothing refers to any more (no backoff to remember). */
static void maybe_drop(workqueue *q, struct item *i)
{
	if (i->dirty || i->processing || i->waiting || i->failures)
		return;
	for (struct item **p = &q->tab[hash_fnv1a64(i->key) & (q->nbuckets - 1)]; *p;
	     p = &(*p)->hnext)
		if (*p == i) {
			*p = i->hnext;
			q->nitems--;
			free(i);
			return;
		}
}

/* ---- the waiting heap ---------------------------------------------------------------------------- */

static void heap_swap(workqueue *q, size_t a, size_t b)
{
	struct item *t = q->heap[a];
	q->heap[a] = q->heap[b];
	q->heap[b] = t;
	q->heap[a]->heap_at = a;
	q->heap[b]->heap_at = b;
}

static void heap_fix(workqueue *q, size_t k)
{
	while (k > 0 && q->heap[(k - 1) / 2]->due_ms > q->heap[k]->due_ms) {
		heap_swap(q, k, (k - 1) / 2);
		k = (k - 1) / 2;
	}
	for (;;) {
		size_t l = 2 * k + 1, r = l + 1, m = k;
		if (l < q->nheap && q->heap[l]->due_ms < q->heap[m]->due_ms)
			m = l;
		if (r < q->nheap && q->heap[r]->due_ms < q->heap[m]->due_ms)
			m = r;
		if (m == k)
			return;
		heap_swap(q, k, m);
		k = m;
	}
}

static void heap_remove(workqueue *q, struct item *i)
{
	size_t k = i->heap_at;
	i->waiting = false;
	if (k != --q->nheap) {
		heap_swap(q, k, q->nheap);
		heap_fix(q, k);
	}
}

/* ---- adding ---------------------------------------------------------------------------------- */

/* client-go Add: a key already queued is not queued twice; a key being processed runs again
 * after workqueue_done. */
static void add_now(workqueue *q, struct item *i)
{
	if (i->waiting)
		heap_remove(q, i);
	if (i->dirty)
		return;
	i->dirty = true;
	if (i->processing)
		return;
	i->qnext = NULL;
	if (q->tail)
		q->tail->qnext = i;
	else
		q->head = i;
	q->tail = i;
	q->nready++;
}

/* client-go AddAfter: waits in the heap; a waiting key keeps the earlier due time. */
static void add_after(workqueue *q, struct item *i, int64_t delay_ms)
{
	if (delay_ms <= 0) {
		add_now(q, i);
		return;
	}
	if (i->dirty && !i->processing)
		return; /* runs sooner anyway */
	int64_t due = time_mono_ms() + delay_ms;
	if (i->waiting) {
		if (due < i->due_ms) {
			i->due_ms = due;
			heap_fix(q, i->heap_at);
		}
		return;
	}
	if (q->nheap == q->heapcap) {
		size_t cap = q->heapcap ? q->heapcap * 2 : 64;
		struct item **h = realloc(q->heap, cap * sizeof(*h));
		if (!h) {
			add_now(q, i); /* out of memory: run it now rather than lose it */
			return;
		}
		q->heap = h;
		q->heapcap = cap;
	}
	i->due_ms = due;
	i->waiting = true;
	i->heap_at = q->nheap;
	q->heap[q->nheap++] = i;
	heap_fix(q, i->heap_at);
}

/* client-go's DefaultControllerRateLimiter.When: the larger of the item's exponential backoff
 * (base_ms * 2^failures up to max_ms) and the overall token bucket's delay. */
static int64_t rate_limited_delay(workqueue *q, struct item *i)
{
	int64_t d = q->base_ms;
	for (int k = 0; k < i->failures && d < q->max_ms; k++)
		d *= 2;
	if (d > q->max_ms)
		d = q->max_ms;
	if (i->failures < 64)
		i->failures++;
	int64_t t = time_mono_ms();
	q->tokens += (double)(t - q->tokens_at) * WORKQUEUE_QPS / 1000.0;
	if (q->tokens > WORKQUEUE_BURST)
		q->tokens = WORKQUEUE_BURST;
	q->tokens_at = t;
	q->tokens -= 1;
	int64_t b = q->tokens < 0 ? (int64_t)(-q->tokens * 1000.0 / WORKQUEUE_QPS) : 0;
	return b > d ? b : d;
}

void workqueue_add(workqueue *q, const char *key, int delay_ms)
{
	pthread_mutex_lock(&q->mu);
	struct item *i = find(q, key, true);
	if (i)
		add_after(q, i, delay_ms);
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

int workqueue_add_rate_limited(workqueue *q, const char *key)
{
	int delay = 0;
	pthread_mutex_lock(&q->mu);
	struct item *i = find(q, key, true);
	if (i) {
		delay = (int)rate_limited_delay(q, i);
		add_after(q, i, delay);
	}
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return delay;
}

/* ---- getting ---------------------------------------------------------------------------------- */

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
		while (q->nheap && q->heap[0]->due_ms <= t)
			add_now(q, q->heap[0]);
		if (q->head) {
			struct item *i = q->head;
			q->head = i->qnext;
			if (!q->head)
				q->tail = NULL;
			q->nready--;
			i->dirty = false;
			i->processing = true;
			snprintf(key, cap, "%s", i->key);
			pthread_mutex_unlock(&q->mu);
			return 1;
		}
		if (q->nheap && q->heap[0]->due_ms < next)
			next = q->heap[0]->due_ms;
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
	if (i && i->processing) {
		i->processing = false;
		if (ok)
			i->failures = 0; /* Forget */
		else
			delay = (int)rate_limited_delay(q, i);
		if (i->dirty) { /* added while it ran: run again now */
			i->dirty = false;
			add_now(q, i);
		} else if (!ok) {
			add_after(q, i, delay);
		}
		maybe_drop(q, i);
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
	pthread_mutex_lock(&q->mu);
	size_t n = q->nready + q->nheap;
	pthread_mutex_unlock(&q->mu);
	return n;
}
