/* store/cache — watch-fed caches over another store (store.h: store_cache_open).  One informer
 * thread per kind lists the kind once, then follows its watch, relisting only on STORE_EXPIRED
 * (or after the watch failed); get and list on a reading thread are answered from memory, and
 * watches of a cached kind are served from the informer's own stream (one watch of backing per
 * kind).  Objects are kept as their compact text (store/blob.h), several times smaller than
 * their cJSON trees; readers take references under the lock and parse outside it.  A reader
 * may follow a kind's first list as it arrives instead (cache_join.c); the cache's own watches
 * are cache_watch.c's. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "store/cache_int.h"

#define WATCH_WAIT_MS 1000 /* how soon an informer sees the cache closing (a wake costs CPU) */
#define RETRY_MS      1000

static __thread bool reads_cached;

bool store_cache_thread_reads(bool on)
{
	bool was = reads_cached;
	reads_cached = on;
	return was;
}

/* ---- the map of one kind (callers hold s->mu) ------------------------------------------------- */

static void key_of(const char *ns, const char *name, char *key)
{
	snprintf(key, KEY_MAX, "%s%s%s", ns && *ns ? ns : "", ns && *ns ? "/" : "", name);
}

/* The index of key, or where it would go (*found false). */
static size_t find(const struct cache_kind *ck, const char *key, bool *found)
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

static void remove_at(struct cache_kind *ck, size_t i)
{
	free(ck->v[i].key);
	store_blob_put(ck->v[i].obj);
	memmove(&ck->v[i], &ck->v[i + 1], (ck->n - i - 1) * sizeof(ck->v[0]));
	ck->n--;
}

static bool insert_at(struct cache_kind *ck, size_t i, const char *key)
{
	char *k = strdup(key);
	if (k && ck->n == ck->cap) {
		size_t cap = ck->cap ? ck->cap * 2 : 64;
		struct cache_entry *v = realloc(ck->v, cap * sizeof(*v));
		if (!v) {
			free(k);
			return false;
		}
		ck->v = v;
		ck->cap = cap;
	}
	if (!k)
		return false;
	memmove(&ck->v[i + 1], &ck->v[i], (ck->n - i) * sizeof(ck->v[0]));
	ck->v[i] = (struct cache_entry){.key = k};
	ck->n++;
	return true;
}

/* An object with a deletionTimestamp and no finalizer left no longer exists: the update that
 * removed its last finalizer returns it so.  Absorbed as a deletion, such a result cannot bring
 * the object back when the watch's DELETED came first. */
static bool gone(const cJSON *obj)
{
	const cJSON *fin = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "finalizers");
	return store_meta_str(obj, "deletionTimestamp") && cJSON_GetArraySize(fin) == 0;
}

/* Takes the version b (a reference) of obj into the map unless the map holds a newer one;
 * deleted (or gone): removes it. */
static void absorb(struct cache_kind *ck, const cJSON *obj, struct store_blob *b, bool deleted)
{
	char key[KEY_MAX];
	deleted = deleted || gone(obj);
	const char *name = store_meta_str(obj, "name");
	uint64_t rv = store_meta_rv(obj);
	bool found;
	if (!name)
		return;
	key_of(store_meta_str(obj, "namespace"), name, key);
	size_t i = find(ck, key, &found);
	if (found && ck->v[i].rv > rv)
		return; /* an older event than a write already absorbed */
	if (deleted) {
		if (found)
			remove_at(ck, i);
		return;
	}
	if (!found && !insert_at(ck, i, key))
		return; /* out of memory: the next relist repairs it */
	store_blob_put(ck->v[i].obj);
	ck->v[i].obj = store_blob_ref(b);
	ck->v[i].rv = rv;
}

static void clear(struct cache_kind *ck)
{
	while (ck->n)
		remove_at(ck, ck->n - 1);
	while (ck->first_seq < ck->next_seq)
		store_blob_put(ck->hist[ck->first_seq++ % HIST].obj);
}

/* Appends a received event to the kind's history, dropping the oldest beyond HIST. */
static void hist_push(struct cache_kind *ck, enum store_event_type t, uint64_t rv,
                      struct store_blob *b)
{
	if (ck->next_seq - ck->first_seq == HIST) {
		struct cache_event *old = &ck->hist[ck->first_seq++ % HIST];
		ck->floor_rv = old->rv;
		store_blob_put(old->obj);
	}
	ck->hist[ck->next_seq++ % HIST] = (struct cache_event){t, rv, store_blob_ref(b)};
}

/* ---- informers --------------------------------------------------------------------------------- */

static bool stopping(struct cache_store *s, int nap_ms)
{
	struct timespec ts = time_after(CLOCK_MONOTONIC, nap_ms);
	pthread_mutex_lock(&s->mu);
	while (nap_ms > 0 && !s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT)
		;
	bool stop = s->stop;
	pthread_mutex_unlock(&s->mu);
	return stop;
}

/* A relist: the kind's live map (read, never changed, while the new one is built) and the new
 * map being built. */
struct relisting {
	struct cache_kind *live, fresh;
	unsigned long shared;
	bool joinable; /* the kind's first list: readers may join it (cache_join.c) */
	struct cache_joined joined;
};

/* The live map's text of obj when it holds obj at obj's own version (a reference), else NULL:
 * an object version's text never changes, so a relist takes it over instead of a copy. */
static struct store_blob *live_blob(struct cache_kind *ck, const cJSON *obj)
{
	const char *name = store_meta_str(obj, "name");
	uint64_t rv = store_meta_rv(obj);
	struct store_blob *b = NULL;
	char key[KEY_MAX];
	bool found;
	if (!name || !rv)
		return NULL;
	key_of(store_meta_str(obj, "namespace"), name, key);
	pthread_mutex_lock(&ck->s->mu);
	size_t i = find(ck, key, &found);
	if (found && ck->v[i].rv == rv)
		b = store_blob_ref(ck->v[i].obj);
	pthread_mutex_unlock(&ck->s->mu);
	return b;
}

/* One listed object into the map being built (arg: a struct relisting), handed to the readers
 * that joined the list. */
static int relist_one(cJSON *obj, char *text, size_t len, void *arg)
{
	struct relisting *r = arg;
	if (r->joinable)
		cache_join_feed(r->live, &r->joined, &r->fresh, gone(obj) ? NULL : obj);
	struct store_blob *b = live_blob(r->live, obj);
	if (b)
		r->shared++;
	else if (!(b = store_blob_of_listed(obj, text, len)))
		return -ENOMEM;
	absorb(&r->fresh, obj, b, false);
	store_blob_put(b);
	return 0;
}

static void drop_map(struct cache_kind *m)
{
	while (m->n)
		remove_at(m, m->n - 1);
	free(m->v);
	m->v = NULL;
	m->cap = 0;
}

/* Lists the kind into the map; 0 or a negative code.  The list is taken one object at a time
 * (store_list_each_kept, any for the first) into a new map of compact texts, which replaces the
 * old one under the lock:
 * the kind's objects are never all held as trees at once (the peak memory of a start or a
 * relist), and an object the old map holds at the listed version is not copied (a relist costs
 * the changed objects' texts, not a second copy of the kind).  A list that expired while it was
 * taken (STORE_EXPIRED) is taken again at once. */
static int relist(struct cache_kind *ck, bool any)
{
	struct cache_store *s = ck->s;
	struct relisting r = {.live = ck};
	uint64_t rv = 0, t0 = time_mono_ms();
	struct err e = {0};
	pthread_mutex_lock(&s->mu);
	r.joinable = ck->listing = !ck->synced;
	pthread_mutex_unlock(&s->mu);
	int rc = store_list_each_kept(s->b, ck->k, any, relist_one, &r, &rv, &e);
	for (int again = 0; rc == STORE_EXPIRED && again < 3; again++) {
		pthread_mutex_lock(&s->mu);
		cache_join_end(ck, &r.joined, rc, 0, &e, false); /* they list again */
		pthread_mutex_unlock(&s->mu);
		drop_map(&r.fresh); /* a list that expired while it was taken: take it again */
		r.shared = 0;
		rc = store_list_each_kept(s->b, ck->k, any, relist_one, &r, &rv, &e);
	}
	if (rc < 0) {
		drop_map(&r.fresh);
		log_warnf("store cache: listing %s: %s", ck->k->plural,
		          rc == -ENOMEM && !e.msg[0] ? "out of memory" : e.msg);
		pthread_mutex_lock(&s->mu);
		ck->list_failed = true;
		ck->listing = false;
		cache_join_end(ck, &r.joined, rc, 0, &e, true);
		pthread_cond_broadcast(&s->cv); /* synced(): its readers read through */
		pthread_mutex_unlock(&s->mu);
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	ck->list_failed = false;
	clear(ck);
	free(ck->v);
	ck->v = r.fresh.v;
	ck->n = r.fresh.n;
	ck->cap = r.fresh.cap;
	ck->rv = ck->floor_rv = rv;
	ck->gen++;
	ck->synced = true;
	ck->listing = false;
	cache_join_end(ck, &r.joined, 0, rv, NULL, true);
	s->stats.lists++;
	s->stats.relist_shared += r.shared;
	pthread_cond_broadcast(&s->cv); /* synced() */
	pthread_cond_broadcast(&ck->cv);
	pthread_mutex_unlock(&s->mu);
	char objects[24], secs[32];
	snprintf(objects, sizeof(objects), "%zu", r.fresh.n);
	snprintf(secs, sizeof(secs), "%.3f", (double)(time_mono_ms() - t0) / 1000);
	log_info("store cache: kind listed", "kind", ck->k->plural, "objects", objects, "seconds",
	         secs);
	return 0;
}

/* Absorbs one event of the watch and keeps it for the cache's own watches. */
static void on_event(struct cache_kind *ck, enum store_event_type t, cJSON *obj)
{
	struct cache_store *s = ck->s;
	uint64_t rv = store_meta_rv(obj);
	struct store_blob *b = store_blob_of_kept(obj);
	pthread_mutex_lock(&s->mu);
	if (b) {
		absorb(ck, obj, b, t == STORE_DELETED);
		hist_push(ck, t, rv, b);
	} else {
		ck->gen++; /* out of memory: this event is lost to the cache's watches */
	}
	if (rv > ck->rv)
		ck->rv = rv;
	s->stats.events++;
	pthread_cond_broadcast(&ck->cv); /* only this kind's watches */
	pthread_mutex_unlock(&s->mu);
	store_blob_put(b);
	cJSON_Delete(obj);
}

/* Follows one watch until it fails or the cache stops; STORE_EXPIRED asks for a relist. */
static int follow(struct cache_kind *ck)
{
	struct cache_store *s = ck->s;
	store_watch *w = NULL;
	struct err e = {0};
	int rc = store_watch_open(s->b, ck->k, ck->rv, &w, &e);
	while (rc >= 0 && !stopping(s, 0)) {
		enum store_event_type t;
		cJSON *obj = NULL;
		rc = store_watch_next(w, WATCH_WAIT_MS, &t, &obj, &e);
		if (rc == 1)
			on_event(ck, t, obj);
	}
	store_watch_close(w);
	return rc;
}

static void *informer_main(void *arg)
{
	struct cache_kind *ck = arg;
	bool listed = false, any = true;
	while (!stopping(ck->s, 0)) {
		/* the first list may come from the server's memory, as client-go's reflector's
		 * (resourceVersion=0); a relist after lost events asks for the latest.  After a
		 * failed one the list is taken page by page: the watch cache answers a kind whole,
		 * which a reader that falls too far behind cannot buffer (h2/client.h) */
		if (!listed && relist(ck, any) < 0) {
			any = false;
			stopping(ck->s, RETRY_MS);
			continue;
		}
		listed = true;
		any = false;
		int rc = follow(ck);
		if (rc == STORE_EXPIRED)
			listed = false; /* events were lost: relist */
		else if (rc < 0)
			stopping(ck->s, RETRY_MS); /* then watch again from ck->rv */
	}
	return NULL;
}

/* ---- reads ------------------------------------------------------------------------------------- */

static struct cache_kind *kind_cache(struct cache_store *s, const struct store_kind *k)
{
	for (size_t i = 0; i < s->nk; i++)
		if (s->kinds[i].k == k)
			return &s->kinds[i];
	return NULL;
}

/* The kind's cache once synced; NULL: read through.  Until the kind's first list is in, a read
 * waits for it as long as it is being taken, however long a large kind takes on a slow server
 * (reading through meanwhile would ask the server for a second copy of the kind, and a
 * selector's list more per reader, just when it is slow), and reads through once an attempt
 * failed (until one succeeds).  Returns with s->mu held when not NULL. */
struct cache_kind *cache_synced(struct cache_store *s, const struct store_kind *k)
{
	struct cache_kind *ck = kind_cache(s, k);
	if (!ck)
		return NULL;
	pthread_mutex_lock(&s->mu);
	while (!ck->synced && !ck->list_failed && !s->stop)
		pthread_cond_wait(&s->cv, &s->mu);
	if (ck->synced)
		return ck;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* synced() for threads that read cached; NULL for the others. */
static struct cache_kind *cached(struct cache_store *s, const struct store_kind *k)
{
	return reads_cached ? cache_synced(s, k) : NULL;
}

static int c_get(store *st, const struct store_kind *k, const char *ns, const char *name,
                 cJSON **out, struct err *e)
{
	struct cache_store *s = (struct cache_store *)st;
	struct cache_kind *ck = name ? cached(s, k) : NULL;
	struct store_blob *b = NULL;
	char key[KEY_MAX];
	bool found = false;
	*out = NULL;
	if (ck) {
		key_of(k->namespaced ? ns : NULL, name, key);
		size_t i = find(ck, key, &found);
		if (found)
			b = store_blob_ref(ck->v[i].obj);
		s->stats.hits += found;
		pthread_mutex_unlock(&s->mu);
		if (found) {
			int r = store_blob_parse(b, out, e);
			store_blob_put(b);
			return r;
		}
	}
	/* not cached here, or not in the cache: the store answers (and names the error) */
	return store_get(s->b, k, ns, name, out, e);
}

/* Asks skip about the object of entry ce (key "namespace/name" or "name"). */
static bool skipped(const struct cache_kind *ck, const struct cache_entry *ce, store_skip_fn skip,
                    void *arg)
{
	char ns[KEY_MAX];
	const char *slash = ck->k->namespaced ? strchr(ce->key, '/') : NULL;
	if (!slash)
		return skip(NULL, ce->key, ce->rv, arg);
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - ce->key), ce->key);
	return skip(ns, slash + 1, ce->rv, arg);
}

/* References to the kind's objects in namespace ns (NULL or "": all) that selector (optional)
 * may select and skip (optional) does not skip, in list order, with the cache's version; NULL with *n 0 when there are none or
 * memory is short (*oom). */
struct store_blob **cache_snapshot(struct cache_store *s, struct cache_kind *ck, const char *ns,
                                   const char *selector, store_skip_fn skip, void *arg, size_t *n,
                                   uint64_t *rv, bool *oom)
{
	size_t nl = ns && *ns ? strlen(ns) : 0;
	struct store_blob **v = ck->n ? malloc(ck->n * sizeof(*v)) : NULL;
	*n = 0;
	*oom = ck->n && !v;
	for (size_t i = 0; v && i < ck->n; i++)
		if ((!nl || (!strncmp(ck->v[i].key, ns, nl) && ck->v[i].key[nl] == '/')) &&
		    !(selector && store_blob_selects(ck->v[i].obj, selector) == 0) &&
		    !(skip && skipped(ck, &ck->v[i], skip, arg)))
			v[(*n)++] = store_blob_ref(ck->v[i].obj);
	*rv = ck->rv;
	s->stats.hits++;
	pthread_mutex_unlock(&s->mu);
	return v;
}

void cache_put_all(struct store_blob **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		store_blob_put(v[i]);
	free(v);
}

/* The cached objects one at a time (parsed outside the lock), those skip skips left out. */
static int each_cached(struct cache_store *s, struct cache_kind *ck, const char *ns,
                       const char *selector, store_skip_fn skip, store_each_fn fn, void *arg,
                       uint64_t *list_rv, struct err *e)
{
	size_t n;
	uint64_t rv;
	bool oom;
	struct store_blob **v = cache_snapshot(s, ck, ck->k->namespaced ? ns : NULL, selector, skip,
	                                       arg, &n, &rv, &oom);
	int r = oom ? err_set(e, -ENOMEM, "out of memory") : 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		cJSON *o = NULL;
		if ((r = store_blob_parse(v[i], &o, e)) == 0 &&
		    (!selector || store_selector_match(selector, o, NULL) == 1))
			r = fn(o, arg);
		cJSON_Delete(o);
	}
	cache_put_all(v, n);
	if (r == 0 && list_rv)
		*list_rv = rv;
	return r;
}

static int c_list_each(store *st, const struct store_kind *k, const char *ns, const char *selector,
                       store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	struct cache_store *s = (struct cache_store *)st;
	int r;
	if (selector && store_selector_match(selector, NULL, e) < 0)
		return STORE_INVALID;
	struct cache_kind *ck = reads_cached && !selector && !(ns && *ns) ? kind_cache(s, k) : NULL;
	if (ck && cache_join(ck, fn, arg, list_rv, e, &r))
		return r; /* the kind's first list, as it was taken */
	if (!(ck = cached(s, k)))
		return store_list_each(s->b, k, ns, selector, fn, arg, list_rv, e);
	return each_cached(s, ck, ns, selector, NULL, fn, arg, list_rv, e);
}

static int c_list_each_skip(store *st, const struct store_kind *k, const char *ns,
                            const char *selector, store_skip_fn skip, store_each_fn fn, void *arg,
                            uint64_t *list_rv, struct err *e)
{
	struct cache_store *s = (struct cache_store *)st;
	if (selector && store_selector_match(selector, NULL, e) < 0)
		return STORE_INVALID;
	struct cache_kind *ck = cached(s, k);
	if (!ck)
		return store_list_each_skip(s->b, k, ns, selector, skip, fn, arg, list_rv, e);
	return each_cached(s, ck, ns, selector, skip, fn, arg, list_rv, e);
}

static int add_to(cJSON *obj, void *arr)
{
	cJSON *d = cJSON_Duplicate(obj, 1);
	return d && cJSON_AddItemToArray(arr, d) ? 0 : (cJSON_Delete(d), -ENOMEM);
}

static int c_list(store *st, const struct store_kind *k, const char *ns, const char *selector,
                  cJSON **items, uint64_t *list_rv, struct err *e)
{
	struct cache_store *s = (struct cache_store *)st;
	*items = NULL;
	if (!reads_cached || !kind_cache(s, k))
		return store_list(s->b, k, ns, selector, items, list_rv, e);
	cJSON *arr = cJSON_CreateArray();
	int r = arr ? c_list_each(st, k, ns, selector, add_to, arr, list_rv, e) : -ENOMEM;
	if (r == -ENOMEM)
		err_set(e, r, "out of memory");
	if (r < 0) {
		cJSON_Delete(arr);
		return r;
	}
	*items = arr;
	return 0;
}

/* ---- writes: through to the store, the result absorbed (read your writes) --------------------- */

static void absorb_result(struct cache_store *s, cJSON *got, cJSON **out)
{
	const struct store_kind *k = got ? store_kind_of(got, NULL) : NULL;
	struct cache_kind *ck = k ? kind_cache(s, k) : NULL;
	struct store_blob *b = ck ? store_blob_of_kept(got) : NULL;
	if (b) {
		pthread_mutex_lock(&s->mu);
		absorb(ck, got, b, false);
		pthread_mutex_unlock(&s->mu);
		store_blob_put(b);
	}
	if (out)
		*out = got;
	else
		cJSON_Delete(got);
}

static int c_write(store *st, int (*op)(store *, const cJSON *, cJSON **, struct err *),
                   const cJSON *obj, cJSON **out, struct err *e)
{
	struct cache_store *s = (struct cache_store *)st;
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

static int c_write_all(store *st, const cJSON *obj, bool create, cJSON **out, struct err *e)
{
	return c_write(st, create ? store_create_with_status : store_update_with_status, obj, out,
	               e);
}

static int c_remove(store *st, const struct store_kind *k, const char *ns, const char *name,
                    const char *uid, const char *rv, struct err *e)
{
	return store_delete(((struct cache_store *)st)->b, k, ns, name, uid, rv, e);
}

/* ---- lifecycle ----------------------------------------------------------------------------------- */

static void c_close(store *st)
{
	struct cache_store *s = (struct cache_store *)st;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	for (size_t i = 0; i < s->nk; i++)
		pthread_cond_broadcast(&s->kinds[i].cv);
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < s->nk; i++) {
		if (s->kinds[i].started)
			pthread_join(s->kinds[i].th, NULL);
		clear(&s->kinds[i]);
		free(s->kinds[i].v);
		pthread_cond_destroy(&s->kinds[i].cv);
	}
	free(s->kinds);
	store_close(s->b);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static const struct store_ops cache_ops = {
    .get = c_get,
    .list = c_list,
    .list_each = c_list_each,
    .list_each_skip = c_list_each_skip,
    .create = c_create,
    .update = c_update,
    .update_status = c_update_status,
    .write_all = c_write_all,
    .remove = c_remove,
    .watch = cache_watch,
    .watch_next = cache_watch_next,
    .watch_close = cache_watch_close,
    .close = c_close,
};

void store_cache_stats(store *st, struct store_cache_stats *out)
{
	struct cache_store *s = (struct cache_store *)st;
	pthread_mutex_lock(&s->mu);
	*out = s->stats;
	pthread_mutex_unlock(&s->mu);
}

int store_cache_open(store *backing, const struct store_kind *const *kinds, store **out,
                     struct err *e)
{
	struct cache_store *s = calloc(1, sizeof(*s));
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
	for (size_t i = 0; i < n; i++)
		pthread_cond_init(&s->kinds[i].cv, &ca);
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
