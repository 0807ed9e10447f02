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
#include "metrics/metrics.h"

struct item {
	struct item *hnext, *qnext;
	int64_t due_ms;
	uint64_t added_ns, started_ns; /* client-go's metrics: queued since, processed since */
	size_t heap_at;                /* index in the heap while waiting */
	bool dirty, processing, waiting;
	bool first; /* added with workqueue_add_first while it ran: runs again ahead of the rest */
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
	size_t nheap, heapcap, nready, nprocessing;
	int base_ms, max_ms;
	double tokens; /* the overall token bucket */
	int64_t tokens_at;
	bool shutdown;
	const char *name; /* the label of client-go's workqueue_* families */
};

/* client-go's workqueue metrics (k8s.io/client-go/util/workqueue, its Prometheus provider in
 * component-base): the same names, the label `name`, and the duration buckets 10 ns .. 10 s in
 * powers of ten. */
static const char *const name_label[] = {"name", NULL};
static const double duration_buckets[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3,
                                          1e-2, 1e-1, 1,    10,   -1};
#define QUEUES_MAX 8
static struct metrics_family adds =
    METRICS_FAMILY("workqueue_adds_total", "Total number of adds handled by workqueue",
                   METRICS_COUNTER, name_label, NULL, QUEUES_MAX);
static struct metrics_family retries =
    METRICS_FAMILY("workqueue_retries_total", "Total number of retries handled by workqueue",
                   METRICS_COUNTER, name_label, NULL, QUEUES_MAX);
static struct metrics_family depth = METRICS_FAMILY("workqueue_depth", "Current depth of workqueue",
                                                    METRICS_GAUGE, name_label, NULL, QUEUES_MAX);
static struct metrics_family queue_seconds =
    METRICS_FAMILY("workqueue_queue_duration_seconds",
                   "How long in seconds an item stays in workqueue before being requested.",
                   METRICS_HISTOGRAM, name_label, duration_buckets, QUEUES_MAX);
static struct metrics_family work_seconds =
    METRICS_FAMILY("workqueue_work_duration_seconds",
                   "How long in seconds processing an item from workqueue takes.",
                   METRICS_HISTOGRAM, name_label, duration_buckets, QUEUES_MAX);

static pthread_mutex_t queues_mu = PTHREAD_MUTEX_INITIALIZER;
static struct workqueue *queues[QUEUES_MAX];

/* workqueue_unfinished_work_seconds and workqueue_longest_running_processor_seconds: computed
 * from the items being processed when scraped. */
static void collect_running(struct metrics_text *t, void *arg)
{
	(void)arg;
	static const char *const names[2] = {"workqueue_unfinished_work_seconds",
	                                     "workqueue_longest_running_processor_seconds"};
	static const char *const helps[2] = {
	    "How many seconds of work has done that is in progress and hasn't been observed by "
	    "work_duration. Large values indicate stuck threads. One can deduce the number of "
	    "stuck threads by observing the rate at which this increases.",
	    "How many seconds has the longest running processor for workqueue been running."};
	pthread_mutex_lock(&queues_mu);
	for (int k = 0; k < 2; k++) {
		metrics_text_header(t, names[k], helps[k], METRICS_GAUGE);
		for (int j = 0; j < QUEUES_MAX; j++) {
			struct workqueue *q = queues[j];
			if (!q)
				continue;
			double sum = 0, longest = 0;
			uint64_t now = time_mono_ns();
			pthread_mutex_lock(&q->mu);
			for (size_t b = 0; b < q->nbuckets; b++)
				for (struct item *i = q->tab[b]; i; i = i->hnext)
					if (i->processing) {
						double d = (double)(now - i->started_ns) / 1e9;
						sum += d;
						longest = d > longest ? d : longest;
					}
			pthread_mutex_unlock(&q->mu);
			const char *labels[] = {"name", q->name, NULL};
			metrics_text_sample(t, names[k], labels, k == 0 ? sum : longest);
		}
	}
	pthread_mutex_unlock(&queues_mu);
}

void workqueue_metrics(workqueue *q, const char *name)
{
	q->name = name;
	/* every family of the queue from the start, as client-go creates them with the queue */
	metrics_child(&adds, (const char *[]){name});
	metrics_child(&retries, (const char *[]){name});
	metrics_child(&depth, (const char *[]){name});
	metrics_child(&queue_seconds, (const char *[]){name});
	metrics_child(&work_seconds, (const char *[]){name});
	metrics_register(&depth);
	metrics_register(&adds);
	metrics_register(&queue_seconds);
	metrics_register(&work_seconds);
	metrics_register(&retries);
	metrics_register_collector(collect_running, NULL);
	pthread_mutex_lock(&queues_mu);
	for (int j = 0; j < QUEUES_MAX; j++)
		if (!queues[j]) {
			queues[j] = q;
			break;
		}
	pthread_mutex_unlock(&queues_mu);
}

static void set_depth(workqueue *q)
{
	if (q->name)
		metrics_set(&depth, (const char *[]){q->name}, (int64_t)q->nready);
}

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
	pthread_mutex_lock(&queues_mu);
	for (int j = 0; j < QUEUES_MAX; j++)
		if (queues[j] == q)
			queues[j] = NULL;
	pthread_mutex_unlock(&queues_mu);
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

/* Takes ready item i out of the FIFO (a walk: only for workqueue_add_first). */
static void unlink_ready(workqueue *q, struct item *i)
{
	struct item *prev = NULL;
	for (struct item *x = q->head; x && x != i; x = x->qnext)
		prev = x;
	if (prev)
		prev->qnext = i->qnext;
	else
		q->head = i->qnext;
	if (q->tail == i)
		q->tail = prev;
	q->nready--;
}

/* client-go Add: a key already queued is not queued twice; a key being processed runs again
 * after workqueue_done.  first: at the head of the FIFO (moved there when already queued). */
static void add_ready(workqueue *q, struct item *i, bool first)
{
	if (i->waiting)
		heap_remove(q, i);
	if (i->dirty && (!first || i->processing || q->head == i)) {
		i->first |= first && i->processing;
		return;
	}
	if (i->dirty) {
		unlink_ready(q, i); /* queued behind others: to the head */
	} else {
		i->dirty = true;
		if (q->name) {
			metrics_inc(&adds, (const char *[]){q->name}, 1);
			i->added_ns = time_mono_ns();
		}
		if (i->processing) {
			i->first = first;
			return;
		}
	}
	if (first) {
		i->qnext = q->head;
		q->head = i;
		if (!q->tail)
			q->tail = i;
	} else {
		i->qnext = NULL;
		if (q->tail)
			q->tail->qnext = i;
		else
			q->head = i;
		q->tail = i;
	}
	q->nready++;
	set_depth(q);
}

static void add_now(workqueue *q, struct item *i)
{
	add_ready(q, i, false);
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

void workqueue_add_first(workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	struct item *i = find(q, key, true);
	if (i)
		add_ready(q, i, true);
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
		if (q->name)
			metrics_inc(&retries, (const char *[]){q->name}, 1);
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
			q->nprocessing++;
			if (q->name) {
				set_depth(q);
				i->started_ns = time_mono_ns();
				metrics_observe(&queue_seconds, (const char *[]){q->name},
				                (double)(i->started_ns - i->added_ns) / 1e9);
			}
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
		q->nprocessing--;
		if (q->name)
			metrics_observe(&work_seconds, (const char *[]){q->name},
			                (double)(time_mono_ns() - i->started_ns) / 1e9);
		if (ok)
			i->failures = 0; /* Forget */
		else
			delay = (int)rate_limited_delay(q, i);
		if (!ok && q->name)
			metrics_inc(&retries, (const char *[]){q->name}, 1);
		if (i->dirty) { /* added while it ran: run again now */
			bool first = i->first;
			i->dirty = i->first = false;
			add_ready(q, i, first);
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

bool workqueue_idle(workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	bool idle = !q->nready && !q->nprocessing;
	pthread_mutex_unlock(&q->mu);
	return idle;
}
