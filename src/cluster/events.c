/* cluster/events — client-go's event recorder semantics over src/kube (events.h). */
#include "cluster/events.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "cluster/lru.h"
#include "metrics/metrics.h"
#include "model/kube.h"

#define CACHE_MAX        4096
#define SEEN_BYTES       (2u << 20)
#define CACHE_BYTES      (1u << 20)
#define NORMAL_QUEUE_MAX 8000
#define NORMAL_BYTES     (3u << 20)
#define QUEUE_MAX        10000
#define QUEUE_BYTES      (4u << 20)
#define PENDING_BUCKETS  4096
#define AGG_MAX_EVENTS   10
#define AGG_WINDOW_US    (600ull * 1000000)
#define SPAM_BURST       25.0
#define SPAM_QPS         (1.0 / 300.0)
#define MSG_MAX          1024
#define AGG_PREFIX       "(combined from similar events): "

static const struct kube_resource events_res = {"", "v1", "events", true};

static const char *const verb_label[] = {"verb", NULL};
static const char *const cause_label[] = {"cause", NULL};
static const char *const verbs[] = {"create", "patch"};
static const char *const causes[] = {"queue_full", "spam_filter", "write_failed"};
static struct metrics_family written_total = METRICS_FAMILY(
    "pillar_csi_events_written_total",
    "Kubernetes Events written: create (a new Event) or patch (a repeat counted on one).",
    METRICS_COUNTER, verb_label, NULL, 2);
static struct metrics_family dropped_total = METRICS_FAMILY(
    "pillar_csi_events_dropped_total",
    "Kubernetes Events not written, by cause: queue_full, spam_filter, write_failed.",
    METRICS_COUNTER, cause_label, NULL, 3);

/* The fields of an event in the order of its key, and the longest kept of each (with NUL). */
enum { F_KIND, F_NS, F_NAME, F_UID, F_API, F_TYPE, F_REASON, F_MESSAGE, F_N };
static const size_t field_cap[F_N] = {64, 254, 254, 64, 128, 16, 128, MSG_MAX};
#define KEY_MAX (64 + 254 + 254 + 64 + 128 + 16 + 128 + MSG_MAX + 8)

/* A queued event: one allocation holding its key, the fields joined by 0x1f, the message last
 * (the other fields hold no 0x1f: item_new replaces it). */
struct item {
	struct item *next;  /* the queue */
	struct item *chain; /* the pending index's bucket */
	uint64_t hash;      /* of key */
	int64_t repeats;    /* identical events recorded while it waited */
	size_t bytes;
	size_t agg_len, spam_len; /* key prefixes: up to the reason, up to the type */
	bool warning;
	char key[];
};

/* An item as the sender reads it: its fields split out of a copy of the key. */
struct event {
	const char *key;
	size_t agg_len, spam_len;
	int64_t repeats;
	const char *f[F_N];
	char text[KEY_MAX];
};

/* Cache values (cluster/lru.h); the key says what they belong to. */
struct seen {               /* the logger: an Event already written */
	uint64_t stamp;     /* its name is "<object name>.<stamp in hex>" */
	int64_t first_wall; /* firstTimestamp */
	int64_t count;
};
struct agg { /* the aggregator: messages seen per aggregate key */
	uint64_t msgs[AGG_MAX_EVENTS];
	size_t n;
	uint64_t last_us;
};
struct spam { /* the spam filter's token bucket */
	double tokens;
	uint64_t last_us;
};

struct kube_events {
	struct kube_client *kc;
	struct kube_events_opts o;
	uint64_t (*hash)(const char *key);
	char component[128], host[254];
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	struct item *head, *tail;
	struct item *pending[PENDING_BUCKETS]; /* the queued items by key */
	size_t queued, queue_bytes;
	bool busy, stop;
	void (*feed)(void *arg); /* kube_events_set_feeder */
	void *feed_arg;
	bool feeding; /* feed is running */
	pthread_t th;
	struct kube_events_stats st;
	unsigned long burst_dropped; /* dropped since the queue was last empty */
	unsigned long fail_run;      /* writes failed in a row */
	struct lru seen, agg, spam;  /* the sender thread's own */
	uint64_t last_ns;            /* the last name's time stamp */
};

/* ---- correlation (client-go's EventCorrelator) --------------------------------------------- */

/* The aggregator: returns the message to write (msg or, once 10 similar events came within the
 * window, the combined message in buf); key becomes the logger's key. */
static const char *aggregate(struct kube_events *ev, const struct event *it, uint64_t now,
                             char *buf, size_t buf_cap, char *key, size_t cap)
{
	bool fresh = true;
	snprintf(key, cap, "%.*s", (int)it->agg_len, it->key);
	struct agg *a = lru_take(&ev->agg, key, &fresh);
	struct agg none = {0};
	if (!a)
		a = &none;
	if (!fresh && now - a->last_us > AGG_WINDOW_US)
		a->n = 0;
	a->last_us = now;
	uint64_t h = hash_fnv1a64(it->f[F_MESSAGE]);
	bool known = false;
	for (size_t i = 0; i < a->n; i++)
		known |= a->msgs[i] == h;
	if (!known && a->n < AGG_MAX_EVENTS)
		a->msgs[a->n++] = h;
	if (a->n < AGG_MAX_EVENTS) {
		snprintf(key, cap, "%s", it->key); /* the message included */
		return it->f[F_MESSAGE];
	}
	snprintf(buf, buf_cap, AGG_PREFIX "%.*s", (int)(MSG_MAX - 1 - strlen(AGG_PREFIX)),
	         it->f[F_MESSAGE]);
	return buf;
}

/* The spam filter: false when the object's bucket is empty. */
static bool spam_accept(struct kube_events *ev, const struct event *it, uint64_t now)
{
	char skey[KEY_MAX];
	bool fresh;
	snprintf(skey, sizeof(skey), "%.*s", (int)it->spam_len, it->key);
	struct spam *s = lru_take(&ev->spam, skey, &fresh);
	if (!s)
		return true;
	if (fresh)
		s->tokens = SPAM_BURST;
	else
		s->tokens += (double)(now - s->last_us) / 1e6 * SPAM_QPS;
	if (s->tokens > SPAM_BURST)
		s->tokens = SPAM_BURST;
	s->last_us = now;
	if (s->tokens < 1.0)
		return false;
	s->tokens -= 1.0;
	return true;
}

/* ---- writes ---------------------------------------------------------------------------------- */

static void rfc3339(int64_t wall_us, char *buf, size_t cap)
{
	time_t t = (time_t)(wall_us / 1000000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* JSON string literal of s into buf (quotes included); false when it does not fit. */
static bool json_quote(const char *s, char *buf, size_t cap)
{
	size_t o = 0;
	if (cap < 3)
		return false;
	buf[o++] = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (o + 8 >= cap)
			return false;
		if (*p == '"' || *p == '\\')
			o += (size_t)snprintf(buf + o, cap - o, "\\%c", *p);
		else if (*p < 0x20)
			o += (size_t)snprintf(buf + o, cap - o, "\\u%04x", *p);
		else
			buf[o++] = (char)*p;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return true;
}

/* What one write says: the Event's name, its firstTimestamp, now, its count and message. */
struct write {
	char name[300], first[32], now[32];
	int64_t count;
	const char *message;
};

static int post_event(struct kube_events *ev, const struct event *it, const struct write *w,
                      struct kube_status *st)
{
	struct model_event e = {0};
	char path[512], *body;
	const char *ns = it->f[F_NS][0] ? it->f[F_NS] : "default";
	int rc = kube_path(path, sizeof(path), &events_res, ns, NULL, NULL);
	if (rc < 0)
		return rc;
	e.meta.name = (char *)w->name;
	e.meta.ns = (char *)ns;
	e.involved_object.api_version = it->f[F_API][0] ? (char *)it->f[F_API] : NULL;
	e.involved_object.kind = (char *)it->f[F_KIND];
	e.involved_object.ns = it->f[F_NS][0] ? (char *)it->f[F_NS] : NULL;
	e.involved_object.name = (char *)it->f[F_NAME];
	e.involved_object.uid = it->f[F_UID][0] ? (char *)it->f[F_UID] : NULL;
	e.reason = (char *)it->f[F_REASON];
	e.message = (char *)w->message;
	e.type = (char *)it->f[F_TYPE];
	e.source.component = ev->component;
	e.source.host = ev->host[0] ? ev->host : NULL;
	e.first_timestamp = (char *)w->first;
	e.last_timestamp = (char *)w->now;
	e.has_count = true;
	e.count = w->count;
	e.reporting_component = ev->component;
	e.reporting_instance = ev->host[0] ? ev->host : NULL;
	body = model_encode_text(&model_event_kind, &e); /* e borrows every string: no clear */
	if (!body)
		return -ENOMEM;
	rc = kube_request_on(ev->kc, KUBE_BUDGET_EVENTS, "POST", path, "application/json", body,
	                     strlen(body), NULL, NULL, st);
	free(body);
	return rc;
}

static int patch_event(struct kube_events *ev, const struct event *it, const struct write *w,
                       struct kube_status *st)
{
	char path[1024], msg[2 * MSG_MAX + 64], body[sizeof(msg) + 128];
	int rc = kube_path(path, sizeof(path), &events_res,
	                   it->f[F_NS][0] ? it->f[F_NS] : "default", w->name, NULL);
	if (rc < 0)
		return rc;
	if (!json_quote(w->message, msg, sizeof(msg)))
		return -ENAMETOOLONG;
	snprintf(body, sizeof(body),
	         "{\"count\":%" PRId64 ",\"lastTimestamp\":\"%s\",\"message\":%s}", w->count,
	         w->now, msg);
	return kube_request_on(ev->kc, KUBE_BUDGET_EVENTS, "PATCH", path,
	                       "application/strategic-merge-patch+json", body, strlen(body), NULL,
	                       NULL, st);
}

/* Creates or patches (a patch answered NotFound: creates again), one retry after a second. */
static int write_event(struct kube_events *ev, const struct event *it, const struct write *w,
                       bool update, struct kube_status *st)
{
	int rc = 0;
	*st = (struct kube_status){0};
	for (int attempt = 0; attempt < 2; attempt++) {
		rc = update ? patch_event(ev, it, w, st) : -ENOENT;
		if (update && rc == 0)
			break;
		if (!update || (rc == -ENOENT && st->kind == KUBE_NOT_FOUND)) {
			update = false;
			rc = post_event(ev, it, w, st);
		}
		if (rc == 0 || (st->code >= 400 && st->code < 500))
			break;
		time_sleep_ms(1000);
	}
	return rc < 0 ? rc : update ? 1 : 0;
}

/* Counts n events not written for cause (under ev->mu). */
static void count_dropped(struct kube_events *ev, const char *cause, unsigned long n)
{
	ev->st.dropped += n;
	metrics_inc(&dropped_total, (const char *[]){cause}, n);
}

/* Under ev->mu: the caches' figures for kube_events_stats. */
static void cache_figures(struct kube_events *ev)
{
	ev->st.cache_entries = ev->seen.n + ev->agg.n + ev->spam.n;
	ev->st.cache_bytes = ev->seen.bytes + ev->agg.bytes + ev->spam.bytes;
}

/* After a write: the counts, and a failure logged once per run of failures. */
static void written(struct kube_events *ev, const struct event *it, int rc,
                    const struct kube_status *st)
{
	unsigned long failed = 0;
	pthread_mutex_lock(&ev->mu);
	if (rc >= 0) {
		failed = ev->fail_run;
		ev->fail_run = 0;
		*(rc == 1 ? &ev->st.patched : &ev->st.created) += 1;
		metrics_inc(&written_total, (const char *[]){rc == 1 ? "patch" : "create"}, 1);
	} else {
		ev->fail_run++;
		count_dropped(ev, "write_failed", 1 + (unsigned long)it->repeats);
	}
	cache_figures(ev);
	unsigned long run = ev->fail_run;
	pthread_mutex_unlock(&ev->mu);
	if (rc < 0 && run == 1)
		log_warn("event not written; the failures that follow in a row are counted and "
		         "logged when a write succeeds",
		         "object", it->f[F_NAME], "reason", it->f[F_REASON], "error",
		         st->message[0] ? st->message : strerror(-rc));
	if (failed > 1) {
		char n[32];
		snprintf(n, sizeof(n), "%lu", failed);
		log_warn("events written again after failures", "failed", n);
	}
}

/* The sender's view of item: its fields split out of a copy of its key. */
static void split(const struct item *item, struct event *it)
{
	char *p = it->text;
	it->key = item->key;
	it->agg_len = item->agg_len;
	it->spam_len = item->spam_len;
	it->repeats = item->repeats;
	snprintf(it->text, sizeof(it->text), "%s", item->key);
	for (int i = 0; i < F_N; i++) {
		it->f[i] = p;
		char *end = i + 1 < F_N ? strchr(p, '\x1f') : NULL;
		if (end)
			*end = '\0';
		p = end ? end + 1 : p + strlen(p);
	}
}

/* Correlates and writes one event (on the sender thread). */
static void handle(struct kube_events *ev, const struct item *item)
{
	struct event event, *it = &event;
	uint64_t now = ev->o.now_us(ev->o.clock_arg);
	int64_t wall = ev->o.wall_us(ev->o.clock_arg);
	char key[KEY_MAX], combined[MSG_MAX];
	struct write w = {.message = NULL};
	struct seen none = {0}, *sn;
	struct kube_status st;
	bool fresh = true;

	split(item, it);
	w.message = aggregate(ev, it, now, combined, sizeof(combined), key, sizeof(key));
	if (!(sn = lru_take(&ev->seen, key, &fresh)))
		sn = &none;
	rfc3339(wall, w.now, sizeof(w.now));
	if (fresh || sn->count == 0) {
		uint64_t ns = (uint64_t)wall * 1000; /* client-go: UnixNano, unique here */
		ev->last_ns = ns > ev->last_ns ? ns : ev->last_ns + 1;
		sn->stamp = ev->last_ns;
		sn->first_wall = wall;
		sn->count = 0;
	}
	bool update = sn->count > 0;
	sn->count += 1 + it->repeats;
	snprintf(w.name, sizeof(w.name), "%s.%" PRIx64, it->f[F_NAME], sn->stamp);
	rfc3339(sn->first_wall, w.first, sizeof(w.first));
	w.count = sn->count;
	if (!spam_accept(ev, it, now)) {
		pthread_mutex_lock(&ev->mu);
		count_dropped(ev, "spam_filter", 1 + (unsigned long)it->repeats);
		cache_figures(ev);
		pthread_mutex_unlock(&ev->mu);
		return;
	}
	int rc = write_event(ev, it, &w, update, &st);
	written(ev, it, rc, &st);
}

/* ---- the queue ----------------------------------------------------------------------------- */

static struct item **pending_slot(struct kube_events *ev, uint64_t h)
{
	return &ev->pending[h % PENDING_BUCKETS];
}

/* Under ev->mu: the first item off the queue, out of the pending index. */
static struct item *dequeue(struct kube_events *ev)
{
	struct item *it = ev->head, **p = pending_slot(ev, it->hash);
	ev->head = it->next;
	if (!ev->head)
		ev->tail = NULL;
	while (*p != it)
		p = &(*p)->chain;
	*p = it->chain;
	ev->queued--;
	ev->queue_bytes -= it->bytes;
	return it;
}

/* Under ev->mu, when the queue ran empty: the end of a burst of drops, logged once. */
static unsigned long burst_end(struct kube_events *ev)
{
	unsigned long n = ev->head ? 0 : ev->burst_dropped;
	if (n)
		ev->burst_dropped = 0;
	return n;
}

/* Under ev->mu, on the sender thread: the feeder's turn when few events are left queued. */
static void feed_more(struct kube_events *ev)
{
	if (!ev->feed || ev->queued >= KUBE_EVENTS_FEED_LOW || ev->stop)
		return;
	void (*feed)(void *) = ev->feed;
	void *arg = ev->feed_arg;
	ev->feeding = true;
	pthread_mutex_unlock(&ev->mu);
	feed(arg);
	pthread_mutex_lock(&ev->mu);
	ev->feeding = false;
	pthread_cond_broadcast(&ev->cv);
}

static void *sender_main(void *arg)
{
	struct kube_events *ev = arg;
	pthread_mutex_lock(&ev->mu);
	for (;;) {
		while (!ev->head && !ev->stop)
			pthread_cond_wait(&ev->cv, &ev->mu);
		if (!ev->head || ev->stop)
			break;
		struct item *it = dequeue(ev);
		ev->busy = true;
		pthread_mutex_unlock(&ev->mu);
		handle(ev, it);
		free(it);
		pthread_mutex_lock(&ev->mu);
		feed_more(ev);
		unsigned long dropped = burst_end(ev);
		if (dropped) {
			char n[32];
			pthread_mutex_unlock(&ev->mu);
			snprintf(n, sizeof(n), "%lu", dropped);
			log_warn("events dropped while the queue was full", "dropped", n);
			pthread_mutex_lock(&ev->mu);
		}
		ev->busy = false;
		pthread_cond_broadcast(&ev->cv);
	}
	pthread_mutex_unlock(&ev->mu);
	return NULL;
}

/* A new item of these fields (message formatted), or NULL when out of memory. */
static struct item *item_new(const struct kube_event_ref *obj, const char *type, const char *reason,
                             const char *fmt, va_list ap)
{
	char message[MSG_MAX];
	const char *v[F_N] = {obj->kind,        obj->ns, obj->name, obj->uid,
	                      obj->api_version, type,    reason,    message};
	size_t len[F_N], total = 0;

	vsnprintf(message, sizeof(message), fmt, ap);
	for (int i = 0; i < F_N; i++) {
		v[i] = v[i] ? v[i] : "";
		len[i] = strnlen(v[i], field_cap[i] - 1);
		total += len[i] + 1;
	}
	struct item *it = calloc(1, sizeof(*it) + total);
	if (!it)
		return NULL;
	char *k = it->key;
	for (int i = 0; i < F_N; i++) {
		for (size_t j = 0; j < len[i]; j++)
			*k++ = v[i][j] == '\x1f' && i != F_MESSAGE ? '?' : v[i][j];
		*k++ = i + 1 < F_N ? '\x1f' : '\0';
		if (i == F_TYPE)
			it->spam_len = (size_t)(k - 1 - it->key);
		if (i == F_REASON)
			it->agg_len = (size_t)(k - 1 - it->key);
	}
	it->warning = type && strcmp(type, KUBE_EVENT_WARNING) == 0;
	it->bytes = sizeof(*it) + total;
	return it;
}

/* Under ev->mu: true when it may wait in the queue (Normal events leave room for Warnings). */
static bool admit(const struct kube_events *ev, const struct item *it)
{
	size_t most = it->warning ? QUEUE_MAX : NORMAL_QUEUE_MAX;
	size_t bytes = it->warning ? QUEUE_BYTES : NORMAL_BYTES;
	return !ev->stop && ev->queued < most && ev->queue_bytes + it->bytes <= bytes;
}

/* Under ev->mu: queues it, or counts it on an identical queued item (then frees it).  False
 * when it is dropped (and freed). */
static bool enqueue(struct kube_events *ev, struct item *it)
{
	struct item **p = pending_slot(ev, it->hash);
	for (struct item *x = *p; x; x = x->chain)
		if (x->hash == it->hash && strcmp(x->key, it->key) == 0) {
			x->repeats++;
			ev->st.folded++;
			free(it);
			return true;
		}
	if (!admit(ev, it)) {
		count_dropped(ev, "queue_full", 1);
		free(it);
		return false;
	}
	it->chain = *p;
	*p = it;
	if (ev->tail)
		ev->tail->next = it;
	else
		ev->head = it;
	ev->tail = it;
	ev->queued++;
	ev->queue_bytes += it->bytes;
	pthread_cond_broadcast(&ev->cv);
	return true;
}

/* ---- the interface ------------------------------------------------------------------------- */

/* Frees the caches, the lock and ev itself (the thread is not running). */
static void release(struct kube_events *ev)
{
	lru_clear(&ev->seen);
	lru_clear(&ev->agg);
	lru_clear(&ev->spam);
	pthread_cond_destroy(&ev->cv);
	pthread_mutex_destroy(&ev->mu);
	free(ev);
}

int kube_events_new(struct kube_events **out, struct kube_client *kc,
                    const struct kube_events_opts *o, struct err *e)
{
	struct kube_events *ev;
	pthread_condattr_t ca;
	int rc;

	if (!o->component || !*o->component)
		return err_set(e, -EINVAL, "events: a component name is required");
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return err_set(e, -ENOMEM, "out of memory");
	metrics_register(&written_total);
	metrics_register(&dropped_total);
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) /* 0 from the start */
		metrics_child(&written_total, (const char *[]){verbs[i]});
	for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
		metrics_child(&dropped_total, (const char *[]){causes[i]});
	ev->kc = kc;
	ev->o = *o;
	ev->o.now_us = o->now_us ? o->now_us : time_mono_us_fn;
	ev->o.wall_us = o->wall_us ? o->wall_us : time_real_us_fn;
	ev->hash = o->key_hash ? o->key_hash : hash_fnv1a64;
	snprintf(ev->component, sizeof(ev->component), "%s", o->component);
	snprintf(ev->host, sizeof(ev->host), "%s", o->host ? o->host : "");
	rc = lru_init(&ev->seen, CACHE_MAX, SEEN_BYTES, sizeof(struct seen), ev->hash);
	if (rc == 0)
		rc = lru_init(&ev->agg, CACHE_MAX, CACHE_BYTES, sizeof(struct agg), ev->hash);
	if (rc == 0)
		rc = lru_init(&ev->spam, CACHE_MAX, CACHE_BYTES, sizeof(struct spam), ev->hash);
	pthread_mutex_init(&ev->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ev->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc == 0)
		rc = -pthread_create(&ev->th, NULL, sender_main, ev);
	if (rc < 0) {
		release(ev);
		return err_set(e, rc, "events: %s", strerror(-rc));
	}
	*out = ev;
	return 0;
}

void kube_events_record(struct kube_events *ev, const struct kube_event_ref *obj, const char *type,
                        const char *reason, const char *fmt, ...)
{
	va_list ap;
	struct item *it;

	if (!ev || !obj || !obj->name || !*obj->name)
		return;
	va_start(ap, fmt);
	it = item_new(obj, type, reason, fmt, ap);
	va_end(ap);
	if (!it) {
		log_warn("event dropped", "reason", reason, "error", "out of memory");
		return;
	}
	it->hash = ev->hash(it->key);
	pthread_mutex_lock(&ev->mu);
	bool queued = enqueue(ev, it);
	bool first = !queued && ev->burst_dropped++ == 0;
	char n[32];
	snprintf(n, sizeof(n), "%zu", ev->queued);
	pthread_mutex_unlock(&ev->mu);
	if (first)
		log_warn("events dropped: more are queued than the Events budget writes; Normal "
		         "events go first, the count is logged when the queue has drained",
		         "queued", n, "reason", reason);
}

void kube_events_set_feeder(struct kube_events *ev, void (*feed)(void *arg), void *arg)
{
	pthread_mutex_lock(&ev->mu);
	while (ev->feeding)
		pthread_cond_wait(&ev->cv, &ev->mu);
	ev->feed = feed;
	ev->feed_arg = arg;
	pthread_mutex_unlock(&ev->mu);
}

size_t kube_events_backlog(struct kube_events *ev)
{
	pthread_mutex_lock(&ev->mu);
	size_t n = ev->queued;
	pthread_mutex_unlock(&ev->mu);
	return n;
}

void kube_events_drop(struct kube_events *ev, unsigned long n)
{
	pthread_mutex_lock(&ev->mu);
	count_dropped(ev, "queue_full", n);
	bool first = n && ev->burst_dropped == 0;
	ev->burst_dropped += n;
	pthread_mutex_unlock(&ev->mu);
	char count[32];
	snprintf(count, sizeof(count), "%lu", n);
	if (first)
		log_warn("events dropped: more wait to be recorded than are kept; the count is "
		         "logged when the queue has drained",
		         "dropped", count);
}

bool kube_events_flush(struct kube_events *ev, int timeout_ms)
{
	struct timespec ts = time_after(CLOCK_MONOTONIC, timeout_ms);
	pthread_mutex_lock(&ev->mu);
	while ((ev->head || ev->busy) && pthread_cond_timedwait(&ev->cv, &ev->mu, &ts) != ETIMEDOUT)
		;
	bool done = !ev->head && !ev->busy;
	pthread_mutex_unlock(&ev->mu);
	return done;
}

void kube_events_counts(struct kube_events *ev, unsigned long *created, unsigned long *patched,
                        unsigned long *dropped)
{
	pthread_mutex_lock(&ev->mu);
	*created = ev->st.created;
	*patched = ev->st.patched;
	*dropped = ev->st.dropped;
	pthread_mutex_unlock(&ev->mu);
}

void kube_events_stats(struct kube_events *ev, struct kube_events_stats *out)
{
	pthread_mutex_lock(&ev->mu);
	*out = ev->st;
	out->queued = ev->queued;
	out->queue_bytes = ev->queue_bytes;
	pthread_mutex_unlock(&ev->mu);
}

void kube_events_free(struct kube_events *ev)
{
	if (!ev)
		return;
	kube_events_flush(ev, 2000);
	pthread_mutex_lock(&ev->mu);
	ev->stop = true;
	pthread_cond_broadcast(&ev->cv);
	pthread_mutex_unlock(&ev->mu);
	pthread_join(ev->th, NULL);
	while (ev->head)
		free(dequeue(ev));
	release(ev);
}
