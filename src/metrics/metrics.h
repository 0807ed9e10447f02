/* metrics — a small Prometheus registry shared by every role: counters, gauges and histograms
 * with fixed buckets, alone or in families with a bounded set of label values, written out in the
 * Prometheus text exposition format 0.0.4 (HELP and TYPE lines, one block per family).
 *
 * The hot path is lock-free: counters, gauges and histogram buckets are relaxed atomics, and a
 * labelled child is found by a scan of the children already published (no lock); only the first
 * use of a new label set takes the family's mutex.  A family holds at most its cap children;
 * observations for a label set beyond the cap are dropped and counted in
 * pillar_csi_metrics_dropped_total, so label values taken from requests can never grow memory.
 *
 * The registry is process-wide (one role per process): families and collectors are registered
 * once at start (registering the same one twice is a no-op) and written by metrics_write.  A
 * collector is a function that writes families computed at scrape time (process figures, gauges
 * read from a role's state).  Functions cannot fail unless they say so; out of memory while
 * writing leaves the text marked failed (metrics_text.failed).
 */
#ifndef PILLAR_METRICS_METRICS_H
#define PILLAR_METRICS_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_MAX_LABELS  4
#define METRICS_MAX_BUCKETS 16

enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM };

/* A growing text (the scrape body). */
struct metrics_text {
	char *buf;
	size_t len, cap;
	bool failed; /* out of memory: the text is incomplete */
};
void metrics_text_printf(struct metrics_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void metrics_text_free(struct metrics_text *t);

struct metrics_counter {
	_Atomic uint64_t v;
};
struct metrics_gauge {
	_Atomic int64_t v;
};
struct metrics_histogram {
	_Atomic uint64_t counts[METRICS_MAX_BUCKETS + 1]; /* per bucket, last = +Inf */
	_Atomic uint64_t count;
	_Atomic uint64_t sum_bits; /* a double's bits */
};

static inline void metrics_counter_add(struct metrics_counter *c, uint64_t n)
{
	atomic_fetch_add_explicit(&c->v, n, memory_order_relaxed);
}
static inline void metrics_gauge_set(struct metrics_gauge *g, int64_t v)
{
	atomic_store_explicit(&g->v, v, memory_order_relaxed);
}
static inline void metrics_gauge_add(struct metrics_gauge *g, int64_t d)
{
	atomic_fetch_add_explicit(&g->v, d, memory_order_relaxed);
}

/* One child of a family: its label values and its value. */
struct metrics_child {
	char *values[METRICS_MAX_LABELS];
	union {
		struct metrics_counter counter;
		struct metrics_gauge gauge;
		struct metrics_histogram histogram;
	} m;
};

/* A family.  Define it statically with METRICS_FAMILY; labels is a NULL-ended list (none: an
 * unlabelled family with one child), bounds the ascending upper bounds of a histogram's
 * buckets (+Inf implied), ended by a negative number. */
struct metrics_family {
	const char *name, *help;
	enum metrics_type type;
	const char *const *labels;
	const double *bounds;
	size_t cap; /* most children kept */
	pthread_mutex_t mu;
	_Atomic size_t n; /* children published */
	struct metrics_child *_Atomic children;
	bool registered;
};

#define METRICS_FAMILY(nm, hp, ty, lb, bd, cp)                                            \
	{                                                                                 \
		.name = (nm), .help = (hp), .type = (ty), .labels = (lb), .bounds = (bd), \
		.cap = (cp), .mu = PTHREAD_MUTEX_INITIALIZER                              \
	}

/* Prometheus' default buckets (seconds): .005 … 10. */
extern const double metrics_default_buckets[];

/* The child for these label values (as many as the family has labels; NULL for none), created
 * on first use; NULL when the family is full or memory is out (the caller skips the update). */
struct metrics_child *metrics_child(struct metrics_family *f, const char *const *values);

/* Shorthands: the family's child for values, updated; a full family drops the update. */
void metrics_inc(struct metrics_family *f, const char *const *values, uint64_t n);
void metrics_set(struct metrics_family *f, const char *const *values, int64_t v);
void metrics_observe(struct metrics_family *f, const char *const *values, double v);
void metrics_histogram_observe(struct metrics_histogram *h, const double *bounds, double v);

/* Turns recording off for the rest of the process (a role without a /metrics endpoint): from
 * then on metrics_child finds no child, so every update is skipped at the cost of one relaxed
 * load.  Children handed out before keep counting: call it before the role builds anything
 * that records.  metrics_enabled() says whether it was called. */
void metrics_disable(void);
bool metrics_enabled(void);

/* Forgets every child of f (tests; never while another thread updates f). */
void metrics_family_reset(struct metrics_family *f);

typedef void (*metrics_collect_fn)(struct metrics_text *t, void *ctx);

/* Registers a family or a collector for metrics_write (same pointer twice: no-op).  Returns 0 or
 * -ENOMEM / -ENOSPC (the registry holds at most 128 entries). */
int metrics_register(struct metrics_family *f);
int metrics_register_collector(metrics_collect_fn fn, void *ctx);
/* Removes a collector (its ctx is about to be freed); a no-op when absent. */
void metrics_unregister_collector(metrics_collect_fn fn, void *ctx);

/* Writes every registered family and collector, in registration order. */
void metrics_write(struct metrics_text *t);
/* Writes one family (registered or not). */
void metrics_write_family(struct metrics_text *t, struct metrics_family *f);

/* For collectors: a family's HELP and TYPE lines, then its samples.  labels is a NULL-ended
 * list of name, value pairs (NULL: none); values are escaped as the format requires. */
void metrics_text_header(struct metrics_text *t, const char *name, const char *help,
                         enum metrics_type type);
void metrics_text_sample(struct metrics_text *t, const char *name, const char *const *labels,
                         double v);
/* A one-sample family without labels. */
void metrics_text_single(struct metrics_text *t, const char *name, const char *help,
                         enum metrics_type type, double v);

/* The standard process_* families of this process, read from /proc/self at scrape time
 * (resident and virtual memory, CPU seconds, open and maximum file descriptors, start time). */
void metrics_process_collect(struct metrics_text *t, void *ctx);

#endif
