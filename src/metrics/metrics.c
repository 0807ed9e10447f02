#include "metrics/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double metrics_default_buckets[] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, -1};

#define REGISTRY_MAX 128

struct entry {
	struct metrics_family *family;
	metrics_collect_fn fn;
	void *ctx;
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry registry[REGISTRY_MAX];
static size_t registry_n;
static struct metrics_counter dropped;
static atomic_bool disabled;

void metrics_disable(void)
{
	atomic_store_explicit(&disabled, true, memory_order_relaxed);
}

bool metrics_enabled(void)
{
	return !atomic_load_explicit(&disabled, memory_order_relaxed);
}

/* ---- text ------------------------------------------------------------------------------------ */

void metrics_text_printf(struct metrics_text *t, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = t->cap - t->len;
		va_start(ap, fmt);
		int n = t->buf ? vsnprintf(t->buf + t->len, room, fmt, ap) : -2;
		va_end(ap);
		if (n >= 0 && (size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		if (n == -1 || t->failed) {
			t->failed = true;
			return;
		}
		size_t need = t->len + (n > 0 ? (size_t)n : 0) + 1;
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < need)
			cap *= 2;
		char *b = realloc(t->buf, cap);
		if (!b) {
			t->failed = true;
			return;
		}
		t->buf = b;
		t->cap = cap;
		t->buf[t->len] = '\0';
	}
}

void metrics_text_free(struct metrics_text *t)
{
	free(t->buf);
	*t = (struct metrics_text){0};
}

static const char *type_name(enum metrics_type type)
{
	return type == METRICS_COUNTER ? "counter" : type == METRICS_GAUGE ? "gauge" : "histogram";
}

void metrics_text_header(struct metrics_text *t, const char *name, const char *help,
                         enum metrics_type type)
{
	metrics_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type_name(type));
}

/* A label value with \ " and newline escaped. */
static void put_value(struct metrics_text *t, const char *v)
{
	metrics_text_printf(t, "\"");
	for (const char *p = v; *p; p++) {
		size_t run = strcspn(p, "\\\"\n");
		if (run) {
			metrics_text_printf(t, "%.*s", (int)run, p);
			p += run;
			if (!*p)
				break;
		}
		metrics_text_printf(t, "\\%c", *p == '\n' ? 'n' : *p);
	}
	metrics_text_printf(t, "\"");
}

static void put_number(struct metrics_text *t, double v)
{
	if (isinf(v))
		metrics_text_printf(t, v > 0 ? "+Inf" : "-Inf");
	else if (isnan(v))
		metrics_text_printf(t, "NaN");
	else if (v == (double)(int64_t)v && fabs(v) < 9e15)
		metrics_text_printf(t, "%lld", (long long)v);
	else
		metrics_text_printf(t, "%.17g", v);
}

/* name{k="v",...,extra_k="extra_v"} value */
static void put_sample(struct metrics_text *t, const char *name, const char *suffix,
                       const char *const *names, const char *const *values, const char *extra_k,
                       const char *extra_v, double v)
{
	bool any = false;
	metrics_text_printf(t, "%s%s", name, suffix);
	for (size_t i = 0; names && names[i]; i++) {
		metrics_text_printf(t, "%s%s=", any ? "," : "{", names[i]);
		put_value(t, values[i] ? values[i] : "");
		any = true;
	}
	if (extra_k) {
		metrics_text_printf(t, "%s%s=\"%s\"", any ? "," : "{", extra_k, extra_v);
		any = true;
	}
	metrics_text_printf(t, "%s ", any ? "}" : "");
	put_number(t, v);
	metrics_text_printf(t, "\n");
}

void metrics_text_sample(struct metrics_text *t, const char *name, const char *const *labels,
                         double v)
{
	const char *names[METRICS_MAX_LABELS + 1] = {0}, *values[METRICS_MAX_LABELS] = {0};
	size_t n = 0;
	for (; labels && labels[2 * n] && n < METRICS_MAX_LABELS; n++) {
		names[n] = labels[2 * n];
		values[n] = labels[2 * n + 1];
	}
	put_sample(t, name, "", names, values, NULL, NULL, v);
}

void metrics_text_single(struct metrics_text *t, const char *name, const char *help,
                         enum metrics_type type, double v)
{
	metrics_text_header(t, name, help, type);
	metrics_text_sample(t, name, NULL, v);
}

/* ---- families -------------------------------------------------------------------------------- */

static size_t label_count(const struct metrics_family *f)
{
	size_t n = 0;
	while (f->labels && f->labels[n] && n < METRICS_MAX_LABELS)
		n++;
	return n;
}

static bool child_matches(const struct metrics_child *c, size_t nl, const char *const *values)
{
	for (size_t i = 0; i < nl; i++)
		if (strcmp(c->values[i], values[i] ? values[i] : "") != 0)
			return false;
	return true;
}

static struct metrics_child *find(struct metrics_family *f, size_t nl, const char *const *values)
{
	size_t n = atomic_load_explicit(&f->n, memory_order_acquire);
	struct metrics_child *cs = atomic_load_explicit(&f->children, memory_order_acquire);
	for (size_t i = 0; i < n; i++)
		if (child_matches(&cs[i], nl, values))
			return &cs[i];
	return NULL;
}

static struct metrics_child *add_locked(struct metrics_family *f, size_t nl,
                                        const char *const *values)
{
	struct metrics_child *cs = atomic_load_explicit(&f->children, memory_order_relaxed);
	size_t n = atomic_load_explicit(&f->n, memory_order_relaxed);
	size_t cap = f->cap ? f->cap : 1;
	if (!cs) {
		if (!(cs = calloc(cap, sizeof(*cs))))
			return NULL;
		atomic_store_explicit(&f->children, cs, memory_order_release);
	}
	if (n >= cap)
		return NULL;
	struct metrics_child *c = &cs[n];
	for (size_t i = 0; i < nl; i++) {
		if (!(c->values[i] = strdup(values[i] ? values[i] : ""))) {
			for (size_t j = 0; j < i; j++) {
				free(c->values[j]);
				c->values[j] = NULL;
			}
			return NULL;
		}
	}
	atomic_store_explicit(&f->n, n + 1, memory_order_release);
	return c;
}

static struct metrics_child *child_of(struct metrics_family *f, const char *const *values)
{
	size_t nl = label_count(f);
	struct metrics_child *c = find(f, nl, values);
	if (c)
		return c;
	pthread_mutex_lock(&f->mu);
	if (!(c = find(f, nl, values)))
		c = add_locked(f, nl, values);
	pthread_mutex_unlock(&f->mu);
	if (!c)
		metrics_counter_add(&dropped, 1);
	return c;
}

struct metrics_child *metrics_child(struct metrics_family *f, const char *const *values)
{
	if (atomic_load_explicit(&disabled, memory_order_relaxed))
		return NULL;
	return child_of(f, values);
}

void metrics_inc(struct metrics_family *f, const char *const *values, uint64_t n)
{
	struct metrics_child *c = metrics_child(f, values);
	if (c)
		metrics_counter_add(&c->m.counter, n);
}

void metrics_set(struct metrics_family *f, const char *const *values, int64_t v)
{
	struct metrics_child *c = metrics_child(f, values);
	if (c)
		metrics_gauge_set(&c->m.gauge, v);
}

void metrics_histogram_observe(struct metrics_histogram *h, const double *bounds, double v)
{
	size_t i = 0;
	while (i < METRICS_MAX_BUCKETS && bounds[i] >= 0 && v > bounds[i])
		i++;
	if (i < METRICS_MAX_BUCKETS && bounds[i] < 0)
		i = METRICS_MAX_BUCKETS; /* beyond the last bound: the +Inf bucket */
	atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	uint64_t old = atomic_load_explicit(&h->sum_bits, memory_order_relaxed), next;
	do {
		double s;
		memcpy(&s, &old, sizeof(s));
		s += v;
		memcpy(&next, &s, sizeof(next));
	} while (!atomic_compare_exchange_weak_explicit(
	    &h->sum_bits, &old, next, memory_order_relaxed, memory_order_relaxed));
}

void metrics_observe(struct metrics_family *f, const char *const *values, double v)
{
	struct metrics_child *c = metrics_child(f, values);
	if (c)
		metrics_histogram_observe(&c->m.histogram, f->bounds, v);
}

void metrics_family_reset(struct metrics_family *f)
{
	struct metrics_child *cs = atomic_load(&f->children);
	size_t n = atomic_load(&f->n);
	for (size_t i = 0; cs && i < n; i++)
		for (size_t j = 0; j < METRICS_MAX_LABELS; j++)
			free(cs[i].values[j]);
	free(cs);
	atomic_store(&f->children, NULL);
	atomic_store(&f->n, 0);
}

/* ---- writing --------------------------------------------------------------------------------- */

static void write_histogram(struct metrics_text *t, const struct metrics_family *f,
                            const char *const *values, struct metrics_histogram *h)
{
	uint64_t cum = 0;
	char le[32];
	size_t i = 0;
	for (; i < METRICS_MAX_BUCKETS && f->bounds[i] >= 0; i++) {
		cum += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
		snprintf(le, sizeof(le), "%g", f->bounds[i]);
		put_sample(t, f->name, "_bucket", f->labels, values, "le", le, (double)cum);
	}
	cum += atomic_load_explicit(&h->counts[METRICS_MAX_BUCKETS], memory_order_relaxed);
	put_sample(t, f->name, "_bucket", f->labels, values, "le", "+Inf", (double)cum);
	uint64_t bits = atomic_load_explicit(&h->sum_bits, memory_order_relaxed);
	double sum;
	memcpy(&sum, &bits, sizeof(sum));
	put_sample(t, f->name, "_sum", f->labels, values, NULL, NULL, sum);
	put_sample(t, f->name, "_count", f->labels, values, NULL, NULL, (double)cum);
}

void metrics_write_family(struct metrics_text *t, struct metrics_family *f)
{
	size_t n = atomic_load_explicit(&f->n, memory_order_acquire);
	struct metrics_child *cs = atomic_load_explicit(&f->children, memory_order_acquire);
	size_t nl = label_count(f);
	if (nl == 0 && n == 0) { /* an unlabelled family always has its one child */
		child_of(f, NULL);
		n = atomic_load_explicit(&f->n, memory_order_acquire);
		cs = atomic_load_explicit(&f->children, memory_order_acquire);
	}
	metrics_text_header(t, f->name, f->help, f->type);
	for (size_t i = 0; i < n; i++) {
		const char *const *values = (const char *const *)cs[i].values;
		if (f->type == METRICS_HISTOGRAM)
			write_histogram(t, f, values, &cs[i].m.histogram);
		else if (f->type == METRICS_COUNTER)
			put_sample(t, f->name, "", f->labels, values, NULL, NULL,
			           (double)atomic_load(&cs[i].m.counter.v));
		else
			put_sample(t, f->name, "", f->labels, values, NULL, NULL,
			           (double)atomic_load(&cs[i].m.gauge.v));
	}
}

static int add_entry(struct entry en)
{
	int r = 0;
	pthread_mutex_lock(&registry_mu);
	for (size_t i = 0; i < registry_n; i++)
		if (registry[i].family == en.family && registry[i].fn == en.fn &&
		    registry[i].ctx == en.ctx)
			goto out;
	if (registry_n == REGISTRY_MAX)
		r = -ENOSPC;
	else
		registry[registry_n++] = en;
out:
	pthread_mutex_unlock(&registry_mu);
	return r;
}

int metrics_register(struct metrics_family *f)
{
	return add_entry((struct entry){.family = f});
}

int metrics_register_collector(metrics_collect_fn fn, void *ctx)
{
	return add_entry((struct entry){.fn = fn, .ctx = ctx});
}

void metrics_unregister_collector(metrics_collect_fn fn, void *ctx)
{
	pthread_mutex_lock(&registry_mu);
	for (size_t i = 0; i < registry_n; i++) {
		if (!registry[i].family && registry[i].fn == fn && registry[i].ctx == ctx) {
			memmove(&registry[i], &registry[i + 1],
			        (registry_n - i - 1) * sizeof(registry[0]));
			registry_n--;
			break;
		}
	}
	pthread_mutex_unlock(&registry_mu);
}

void metrics_write(struct metrics_text *t)
{
	/* Collectors run under the registry lock, so one cannot be unregistered (and its context
	 * freed) while it writes. */
	pthread_mutex_lock(&registry_mu);
	for (size_t i = 0; i < registry_n; i++) {
		if (registry[i].family)
			metrics_write_family(t, registry[i].family);
		else
			registry[i].fn(t, registry[i].ctx);
	}
	metrics_text_single(
	    t, "pillar_csi_metrics_dropped_total",
	    "Updates dropped because their family had no room for another label set.",
	    METRICS_COUNTER, (double)atomic_load(&dropped.v));
	pthread_mutex_unlock(&registry_mu);
}
