/* store/cache — watch-fed caches over another store (store.h: store_cache_open).  One informer
 * thread per kind lists the kind once, then follows its watch, relisting only on STORE_EXPIRED
 * (or after the watch failed); get and list on a reading thread are answered from memory. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "store/store.h"

#define WATCH_WAIT_MS 200
#define RETRY_MS      1000
#define SYNC_WAIT_MS  10000 /* a read waits this long for a kind's first list, then reads through */
#define KEY_MAX       512

struct centry {
	char key[KEY_MAX]; /* "namespace/name" or "name": the list order */
	cJSON *obj;
	uint64_t rv;
};

struct cstore;

struct ckind {
	struct cstore *s;
	const struct store_kind *k;
	pthread_t th;
	bool started, synced;
	struct centry *v; /* sorted by key */
	size_t n, cap;
	uint64_t rv; /* the version the cache of this kind is consistent with */
};

struct cstore {
	store base;
	store *b;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	size_t nk;
	struct ckind *kinds;
	struct store_cache_stats stats;
};

static __thread bool reads_cached;

void store_cache_thread_reads(bool on)
{
	reads_cached = on;
}

/* ---- the map of one kind (callers hold s->mu) ------------------------------------------------- */

static void key_of(const char *ns, const char *name, char *key)
{
	snprintf(key, KEY_MAX, "%s%s%s", ns && *ns ? ns : "", ns && *ns ? "/" : "", name);
}

/* The index of key, or where it would go (*found false). */
static size_t find(const struct ckind *ck, const char *key, bool *found)
{
	size_t lo = 0, hi = ck->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(ck->v[mid].key, key);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* An object with a deletionTimestamp and no finalizer left no longer exists: the update that
 * removed its last finalizer returns it so.  Absorbed as a deletion, such a result cannot bring
 * the object back when the watch's DELETED came first. */
static bool gone(const cJSON *obj)
{
	const cJSON *fin = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "finalizers");
	return store_meta_str(obj, "deletionTimestamp") && cJSON_GetArraySize(fin) == 0;
}

/* Takes obj (owned) into the map unless the map holds a newer version; deleted (or gone):
 * remove. */
static void absorb(struct ckind *ck, cJSON *obj, bool deleted)
{
	char key[KEY_MAX];
	deleted = deleted || gone(obj);
	const char *name = store_meta_str(obj, "name");
	uint64_t rv = store_meta_rv(obj);
	bool found;
	if (!name) {
		cJSON_Delete(obj);
		return;
	}
	key_of(store_meta_str(obj, "namespace"), name, key);
	size_t i = find(ck, key, &found);
	if (found && ck->v[i].rv > rv) {
		cJSON_Delete(obj); /* an older event than a write already absorbed */
		return;
	}
	if (deleted) {
		cJSON_Delete(obj);
		if (found) {
			cJSON_Delete(ck->v[i].obj);
			memmove(&ck->v[i], &ck->v[i + 1], (ck->n - i - 1) * sizeof(ck->v[0]));
			ck->n--;
		}
		return;
	}
	if (found) {
		cJSON_Delete(ck->v[i].obj);
		ck->v[i].obj = obj;
		ck->v[i].rv = rv;
		return;
	}
	if (ck->n == ck->cap) {
		size_t cap = ck->cap ? ck->cap * 2 : 64;
		struct centry *v = realloc(ck->v, cap * sizeof(*v));
		if (!v) {
			cJSON_Delete(obj); /* the next relist repairs it */
			return;
		}
		ck->v = v;
		ck->cap = cap;
	}
	memmove(&ck->v[i + 1], &ck->v[i], (ck->n - i) * sizeof(ck->v[0]));
	memcpy(ck->v[i].key, key, KEY_MAX);
	ck->v[i].obj = obj;
	ck->v[i].rv = rv;
	ck->n++;
}

static void clear(struct ckind *ck)
{
	for (size_t i = 0; i < ck->n; i++)
		cJSON_Delete(ck->v[i].obj);
	ck->n = 0;
}

/* ---- informers --------------------------------------------------------------------------------- */

static bool stopping(struct cstore *s, int nap_ms)
{
	struct timespec ts = time_after(CLOCK_MONOTONIC, nap_ms);
	pthread_mutex_lock(&s->mu);
	while (nap_ms > 0 && !s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT)
		;
	bool stop = s->stop;
	pthread_mutex_unlock(&s->mu);
	return stop;
}

/* Lists the kind into the map; 0 or a negative code. */
static int relist(struct ckind *ck)
{
	struct cstore *s = ck->s;
	cJSON *items = NULL, *it;
	uint64_t rv = 0;
	struct err e = {0};
	int rc = store_list(s->b, ck->k, NULL, NULL, &items, &rv, &e);
	if (rc < 0) {
		log_warnf("store cache: listing %s: %s", ck->k->plural, e.msg);
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	clear(ck);
	while (items->child && (it = cJSON_DetachItemViaPointer(items, items->child)) != NULL)
		absorb(ck, it, false);
	ck->rv = rv;
	ck->synced = true;
	s->stats.lists++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	cJSON_Delete(items);
	return 0;
}

/* Follows one watch until it fails or the cache stops; STORE_EXPIRED asks for a relist. */
static int follow(struct ckind *ck)
{
	struct cstore *s = ck->s;
	store_watch *w = NULL;
	struct err e = {0};
	int rc = store_watch_open(s->b, ck->k, ck->rv, &w, &e);
	while (rc >= 0 && !stopping(s, 0)) {
		enum store_event_type t;
		cJSON *obj = NULL;
		rc = store_watch_next(w, WATCH_WAIT_MS, &t, &obj, &e);
		if (rc != 1)
			continue;
		uint64_t rv = store_meta_rv(obj);
		pthread_mutex_lock(&s->mu);
		absorb(ck, obj, t == STORE_DELETED);
		if (rv > ck->rv)
			ck->rv = rv;
		s->stats.events++;
		pthread_mutex_unlock(&s->mu);
	}
	store_watch_close(w);
	return rc;
}

static void *informer_main(void *arg)
{
	struct ckind *ck = arg;
	bool listed = false;
	while (!stopping(ck->s, 0)) {
		if (!listed && relist(ck) < 0) {
			stopping(ck->s, RETRY_MS);
			continue;
		}
		listed = true;
		int rc = follow(ck);
		if (rc == STORE_EXPIRED)
			listed = false; /* events were lost: relist */
		else if (rc < 0)
			stopping(ck->s, RETRY_MS); /* then watch again from ck->rv */
	}
	return NULL;
}

/* ---- reads ------------------------------------------------------------------------------------- */

/* The kind's cache when this thread reads cached and the kind is synced (waiting for its first
 * list); NULL: read through.  Returns with s->mu held when not NULL. */
static struct ckind *cached(struct cstore *s, const struct store_kind *k)
{
	struct ckind *ck = NULL;
	if (!reads_cached)
		return NULL;
	for (size_t i = 0; i < s->nk; i++)
		if (s->kinds[i].k == k)
			ck = &s->kinds[i];
	if (!ck)
		return NULL;
	struct timespec ts = time_after(CLOCK_MONOTONIC, SYNC_WAIT_MS);
	pthread_mutex_lock(&s->mu);
	while (!ck->synced && !s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT)
		;
	if (ck->synced)
		return ck;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static int c_get(store *st, const struct store_kind *k, const char *ns, const char *name,
                 cJSON **out, struct err *e)
{
	struct cstore *s = (struct cstore *)st;
	struct ckind *ck = name ? cached(s, k) : NULL;
	char key[KEY_MAX];
	bool found = false;
	*out = NULL;
	if (ck) {
		key_of(k->namespaced ? ns : NULL, name, key);
		size_t i = find(ck, key, &found);
		if (found)
			*out = cJSON_Duplicate(ck->v[i].obj, 1);
		s->stats.hits += found;
		pthread_mutex_unlock(&s->mu);
		if (found)
			return *out ? 0 : err_set(e, -ENOMEM, "out of memory");
	}
	/* not cached here, or not in the cache: the store answers (and names the error) */
	return store_get(s->b, k, ns, name, out, e);
}

static int c_list(store *st, const struct store_kind *k, const char *ns, const char *selector,
                  cJSON **items, uint64_t *list_rv, struct err *e)
{
	struct cstore *s = (struct cstore *)st;
	*items = NULL;
	if (selector && store_selector_match(selector, NULL, e) < 0)
		return STORE_INVALID;
	struct ckind *ck = cached(s, k);
	if (!ck)
		return store_list(s->b, k, ns, selector, items, list_rv, e);
	cJSON *arr = cJSON_CreateArray();
	bool oom = !arr;
	for (size_t i = 0; i < ck->n && !oom; i++) {
		const cJSON *o = ck->v[i].obj;
		const char *ons = store_meta_str(o, "namespace");
		if (ns && *ns && (!ons || strcmp(ons, ns)))
			continue;
		if (selector && store_selector_match(selector, o, NULL) != 1)
			continue;
		cJSON *d = cJSON_Duplicate(o, 1);
		oom = !d || !cJSON_AddItemToArray(arr, d);
	}
	if (list_rv)
		*list_rv = ck->rv;
	s->stats.hits++;
	pthread_mutex_unlock(&s->mu);
	if (oom) {
		cJSON_Delete(arr);
		return err_set(e, -ENOMEM, "out of memory");
	}
	*items = arr;
	return 0;
}

/* ---- writes: through to the store, the result absorbed (read your writes) --------------------- */

static void absorb_result(struct cstore *s, cJSON *got, cJSON **out)
{
	const struct store_kind *k = got ? store_kind_of(got, NULL) : NULL;
	cJSON *copy = NULL;
	for (size_t i = 0; k && i < s->nk; i++)
		if (s->kinds[i].k == k && (copy = cJSON_Duplicate(got, 1)) != NULL) {
			pthread_mutex_lock(&s->mu);
			absorb(&s->kinds[i], copy, false);
			pthread_mutex_unlock(&s->mu);
		}
	if (out)
		*out = got;
	else
		cJSON_Delete(got);
}

static int c_write(store *st, int (*op)(store *, const cJSON *, cJSON **, struct err *),
                   const cJSON *obj, cJSON **out, struct err *e)
{
	struct cstore *s = (struct cstore *)st;
	cJSON *got = NULL;
	if (out)
		*out = NULL;
	int rc = op(s->b, obj, &got, e);
	if (rc < 0)
		return rc;
	absorb_result(s, got, out);
	return 0;
}

static int c_create(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	return c_write(st, store_create, obj, out, e);
}

static int c_update(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	return c_write(st, store_update, obj, out, e);
}

static int c_update_status(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	return c_write(st, store_update_status, obj, out, e);
}

static int c_remove(store *st, const struct store_kind *k, const char *ns, const char *name,
                    const char *uid, const char *rv, struct err *e)
{
	return store_delete(((struct cstore *)st)->b, k, ns, name, uid, rv, e);
}

static int c_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **w,
                   struct err *e)
{
	return store_watch_open(((struct cstore *)st)->b, k, from_rv, w, e);
}

static void c_close(store *st)
{
	struct cstore *s = (struct cstore *)st;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < s->nk; i++) {
		if (s->kinds[i].started)
			pthread_join(s->kinds[i].th, NULL);
		clear(&s->kinds[i]);
		free(s->kinds[i].v);
	}
	free(s->kinds);
	store_close(s->b);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* Watches are the store's own: their ops point at it, never at the cache. */
static const struct store_ops cache_ops = {
    .get = c_get,
    .list = c_list,
    .create = c_create,
    .update = c_update,
    .update_status = c_update_status,
    .remove = c_remove,
    .watch = c_watch,
    .close = c_close,
};

void store_cache_stats(store *st, struct store_cache_stats *out)
{
	struct cstore *s = (struct cstore *)st;
	pthread_mutex_lock(&s->mu);
	*out = s->stats;
	pthread_mutex_unlock(&s->mu);
}

int store_cache_open(store *backing, const struct store_kind *const *kinds, store **out,
                     struct err *e)
{
	struct cstore *s = calloc(1, sizeof(*s));
	size_t n = 0;
	*out = NULL;
	if (!kinds)
		kinds = store_kinds();
	while (kinds[n])
		n++;
	if (!s || !(s->kinds = calloc(n ? n : 1, sizeof(*s->kinds)))) {
		free(s);
		return err_set(e, -ENOMEM, "store cache: out of memory");
	}
	s->base.ops = &cache_ops;
	s->b = backing;
	s->nk = n;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	for (size_t i = 0; i < n; i++) {
		s->kinds[i].s = s;
		s->kinds[i].k = kinds[i];
		if (pthread_create(&s->kinds[i].th, NULL, informer_main, &s->kinds[i]) != 0) {
			s->b = NULL; /* the caller keeps its store on failure */
			c_close(&s->base);
			return err_set(e, -EAGAIN, "store cache: cannot start an informer thread");
		}
		s->kinds[i].started = true;
	}
	*out = &s->base;
	return 0;
}
