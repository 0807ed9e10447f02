/* kube/events — client-go's event recorder semantics over src/kube (events.h). */
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
#include "model/kube.h"

#define CACHE_MAX      4096
#define QUEUE_MAX      1000
#define AGG_MAX_EVENTS 10
#define AGG_WINDOW_US  (600ull * 1000000)
#define SPAM_BURST     25.0
#define SPAM_QPS       (1.0 / 300.0)
#define MSG_MAX        1024
#define AGG_PREFIX     "(combined from similar events): "

static const struct kube_resource events_res = {"", "v1", "events", true};

struct item {
	struct item *next;
	char api_version[128], kind[64], ns[254], name[254], uid[64];
	char type[16], reason[128], message[MSG_MAX];
};

/* Cache entries start with a slot: key and last use (least recently used goes first). */
struct slot {
	char key[1400];
	uint64_t used;
};
struct seen { /* the logger: an Event already written */
	struct slot s;
	char name[300];
	char first[32];
	int64_t count;
};
struct agg { /* the aggregator: messages seen per aggregate key */
	struct slot s;
	uint64_t msgs[AGG_MAX_EVENTS];
	size_t n;
	uint64_t last_us;
};
struct spam { /* the spam filter's token bucket */
	struct slot s;
	double tokens;
	uint64_t last_us;
};

struct cache {
	void *v;
	size_t esz, n;
};

struct kube_events {
	struct kube_client *kc;
	struct kube_events_opts o;
	char component[128], host[254];
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	struct item *head, *tail;
	size_t queued;
	bool busy, stop;
	pthread_t th;
	unsigned long created, patched, dropped;
	struct cache seen, agg, spam; /* the sender thread's own */
	uint64_t tick;
	uint64_t last_ns; /* the last name's time stamp */
};

/* ---- caches ---------------------------------------------------------------------------------- */

/* The entry of key, or a new zeroed one (evicting the least recently used when full). */
static void *cache_take(struct kube_events *ev, struct cache *c, const char *key, bool *fresh)
{
	struct slot *lru = NULL;
	ev->tick++;
	for (size_t i = 0; i < c->n; i++) {
		struct slot *s = (struct slot *)((char *)c->v + i * c->esz);
		if (strcmp(s->key, key) == 0) {
			s->used = ev->tick;
			*fresh = false;
			return s;
		}
		if (!lru || s->used < lru->used)
			lru = s;
	}
	if (c->n < CACHE_MAX)
		lru = (struct slot *)((char *)c->v + c->n++ * c->esz);
	memset(lru, 0, c->esz);
	snprintf(lru->key, sizeof(lru->key), "%s", key);
	lru->used = ev->tick;
	*fresh = true;
	return lru;
}

/* ---- correlation (client-go's EventCorrelator) --------------------------------------------- */

static void key_of(const struct kube_events *ev, const struct item *it, bool with_reason, char *buf,
                   size_t cap)
{
	snprintf(buf, cap, "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", ev->component,
	         ev->host, it->kind, it->ns, it->name, it->uid, it->api_version, it->type,
	         with_reason ? it->reason : "");
}

/* The aggregator: may turn it into the aggregate event; *key becomes the logger's key. */
static void aggregate(struct kube_events *ev, struct item *it, uint64_t now, char *key, size_t cap)
{
	char akey[1400];
	bool fresh;
	key_of(ev, it, true, akey, sizeof(akey));
	struct agg *a = cache_take(ev, &ev->agg, akey, &fresh);
	if (!fresh && now - a->last_us > AGG_WINDOW_US)
		a->n = 0;
	a->last_us = now;
	uint64_t h = hash_fnv1a64(it->message);
	bool known = false;
	for (size_t i = 0; i < a->n; i++)
		known |= a->msgs[i] == h;
	if (!known && a->n < AGG_MAX_EVENTS)
		a->msgs[a->n++] = h;
	if (a->n < AGG_MAX_EVENTS) {
		snprintf(key, cap, "%s\x1f%s", akey, it->message);
		return;
	}
	char m[MSG_MAX + sizeof(AGG_PREFIX)];
	snprintf(m, sizeof(m), AGG_PREFIX "%s", it->message);
	str_copy(it->message, sizeof(it->message), m);
	snprintf(key, cap, "%s", akey);
}

/* The spam filter: false when the object's bucket is empty. */
static bool spam_accept(struct kube_events *ev, const struct item *it, uint64_t now)
{
	char skey[1400];
	bool fresh;
	key_of(ev, it, false, skey, sizeof(skey));
	struct spam *s = cache_take(ev, &ev->spam, skey, &fresh);
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

static int post_event(struct kube_events *ev, const struct item *it, const struct seen *sn,
                      const char *now, struct kube_status *st)
{
	struct model_event e = {0};
	char path[512], *body;
	const char *ns = it->ns[0] ? it->ns : "default";
	int rc = kube_path(path, sizeof(path), &events_res, ns, NULL, NULL);
	if (rc < 0)
		return rc;
	e.meta.name = (char *)sn->name;
	e.meta.ns = (char *)ns;
	e.involved_object.api_version = it->api_version[0] ? (char *)it->api_version : NULL;
	e.involved_object.kind = (char *)it->kind;
	e.involved_object.ns = it->ns[0] ? (char *)it->ns : NULL;
	e.involved_object.name = (char *)it->name;
	e.involved_object.uid = it->uid[0] ? (char *)it->uid : NULL;
	e.reason = (char *)it->reason;
	e.message = (char *)it->message;
	e.type = (char *)it->type;
	e.source.component = ev->component;
	e.source.host = ev->host[0] ? ev->host : NULL;
	e.first_timestamp = (char *)sn->first;
	e.last_timestamp = (char *)now;
	e.has_count = true;
	e.count = sn->count;
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

static int patch_event(struct kube_events *ev, const struct item *it, const struct seen *sn,
                       const char *now, struct kube_status *st)
{
	char path[1024], msg[2 * MSG_MAX + 64], body[sizeof(msg) + 128];
	int rc = kube_path(path, sizeof(path), &events_res, it->ns[0] ? it->ns : "default",
	                   sn->name, NULL);
	if (rc < 0)
		return rc;
	if (!json_quote(it->message, msg, sizeof(msg)))
		return -ENAMETOOLONG;
	snprintf(body, sizeof(body),
	         "{\"count\":%" PRId64 ",\"lastTimestamp\":\"%s\",\"message\":%s}", sn->count, now,
	         msg);
	return kube_request_on(ev->kc, KUBE_BUDGET_EVENTS, "PATCH", path,
	                       "application/strategic-merge-patch+json", body, strlen(body), NULL,
	                       NULL, st);
}

/* Correlates and writes one event (on the sender thread). */
static void handle(struct kube_events *ev, struct item *it)
{
	uint64_t now = ev->o.now_us(ev->o.clock_arg);
	int64_t wall = ev->o.wall_us(ev->o.clock_arg);
	char key[2 * 1400 + MSG_MAX], ts[32];
	struct kube_status st;
	bool fresh;
	int rc = 0;

	aggregate(ev, it, now, key, sizeof(key));
	struct seen *sn = cache_take(ev, &ev->seen, key, &fresh);
	rfc3339(wall, ts, sizeof(ts));
	if (fresh || sn->count == 0) {
		uint64_t ns = (uint64_t)wall * 1000; /* client-go: UnixNano, unique here */
		ev->last_ns = ns > ev->last_ns ? ns : ev->last_ns + 1;
		snprintf(sn->name, sizeof(sn->name), "%s.%" PRIx64, it->name, ev->last_ns);
		snprintf(sn->first, sizeof(sn->first), "%s", ts);
		sn->count = 0;
	}
	bool update = sn->count > 0;
	sn->count++;
	if (!spam_accept(ev, it, now)) {
		pthread_mutex_lock(&ev->mu);
		ev->dropped++;
		pthread_mutex_unlock(&ev->mu);
		return;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		rc = update ? patch_event(ev, it, sn, ts, &st) : -ENOENT;
		if (update && rc == 0)
			break;
		if (!update || (rc == -ENOENT && st.kind == KUBE_NOT_FOUND))
			rc = post_event(ev, it, sn, ts, &st);
		if (rc == 0 || (st.code >= 400 && st.code < 500))
			break;
		time_sleep_ms(1000);
	}
	pthread_mutex_lock(&ev->mu);
	if (rc == 0 && update)
		ev->patched++;
	else if (rc == 0)
		ev->created++;
	else
		ev->dropped++;
	pthread_mutex_unlock(&ev->mu);
	if (rc < 0)
		log_warn("event not written", "object", it->name, "reason", it->reason, "error",
		         st.message[0] ? st.message : strerror(-rc));
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
		struct item *it = ev->head;
		ev->head = it->next;
		if (!ev->head)
			ev->tail = NULL;
		ev->queued--;
		ev->busy = true;
		pthread_mutex_unlock(&ev->mu);
		handle(ev, it);
		free(it);
		pthread_mutex_lock(&ev->mu);
		ev->busy = false;
		pthread_cond_broadcast(&ev->cv);
	}
	pthread_mutex_unlock(&ev->mu);
	return NULL;
}

/* ---- the interface ------------------------------------------------------------------------- */

/* Frees the caches, the lock and ev itself (the thread is not running). */
static void release(struct kube_events *ev)
{
	free(ev->seen.v);
	free(ev->agg.v);
	free(ev->spam.v);
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
	ev->kc = kc;
	ev->o = *o;
	ev->o.now_us = o->now_us ? o->now_us : time_mono_us_fn;
	ev->o.wall_us = o->wall_us ? o->wall_us : time_real_us_fn;
	snprintf(ev->component, sizeof(ev->component), "%s", o->component);
	snprintf(ev->host, sizeof(ev->host), "%s", o->host ? o->host : "");
	ev->seen.esz = sizeof(struct seen);
	ev->agg.esz = sizeof(struct agg);
	ev->spam.esz = sizeof(struct spam);
	ev->seen.v = calloc(CACHE_MAX, sizeof(struct seen));
	ev->agg.v = calloc(CACHE_MAX, sizeof(struct agg));
	ev->spam.v = calloc(CACHE_MAX, sizeof(struct spam));
	pthread_mutex_init(&ev->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ev->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (!ev->seen.v || !ev->agg.v || !ev->spam.v)
		rc = -ENOMEM;
	else
		rc = -pthread_create(&ev->th, NULL, sender_main, ev);
	if (rc < 0) {
		release(ev);
		return err_set(e, rc, "events: %s", strerror(-rc));
	}
	*out = ev;
	return 0;
}

static void field(char *dst, size_t cap, const char *s)
{
	snprintf(dst, cap, "%s", s ? s : "");
}

void kube_events_record(struct kube_events *ev, const struct kube_event_ref *obj, const char *type,
                        const char *reason, const char *fmt, ...)
{
	va_list ap;
	struct item *it;

	if (!ev || !obj || !obj->name || !*obj->name)
		return;
	if (!(it = calloc(1, sizeof(*it)))) {
		log_warn("event dropped", "reason", reason, "error", "out of memory");
		return;
	}
	field(it->api_version, sizeof(it->api_version), obj->api_version);
	field(it->kind, sizeof(it->kind), obj->kind);
	field(it->ns, sizeof(it->ns), obj->ns);
	field(it->name, sizeof(it->name), obj->name);
	field(it->uid, sizeof(it->uid), obj->uid);
	field(it->type, sizeof(it->type), type);
	field(it->reason, sizeof(it->reason), reason);
	va_start(ap, fmt);
	vsnprintf(it->message, sizeof(it->message), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&ev->mu);
	if (ev->queued >= QUEUE_MAX || ev->stop) {
		ev->dropped++;
		pthread_mutex_unlock(&ev->mu);
		log_warn("event dropped: too many events queued", "object", it->name, "reason",
		         it->reason);
		free(it);
		return;
	}
	if (ev->tail)
		ev->tail->next = it;
	else
		ev->head = it;
	ev->tail = it;
	ev->queued++;
	pthread_cond_broadcast(&ev->cv);
	pthread_mutex_unlock(&ev->mu);
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
	*created = ev->created;
	*patched = ev->patched;
	*dropped = ev->dropped;
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
	while (ev->head) {
		struct item *it = ev->head;
		ev->head = it->next;
		free(it);
	}
	release(ev);
}
