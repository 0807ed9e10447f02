/* store/cache internals shared by cache.c (informers, reads, writes) and cache_watch.c (the
 * cache's own watches): the maps of compact texts, one per kind, under the store's one lock. */
#ifndef PILLAR_STORE_CACHE_INT_H
#define PILLAR_STORE_CACHE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/blob.h"
#include "store/store.h"

#define KEY_MAX 512
#define HIST    512 /* events of each kind kept for the cache's own watches */

struct cache_entry {
	char *key; /* "namespace/name" or "name": the list order */
	struct store_blob *obj;
	uint64_t rv;
};

struct cache_event {
	enum store_event_type type;
	uint64_t rv;
	struct store_blob *obj;
};

struct cache_store;

struct cache_kind {
	struct cache_store *s;
	const struct store_kind *k;
	pthread_t th;
	pthread_cond_t cv; /* an event or a relist of this kind (its watches wait here) */
	bool started, synced;
	bool list_failed; /* the last attempt to list failed: reads go through until one succeeds */
	struct cache_entry *v; /* sorted by key */
	size_t n, cap;
	uint64_t rv; /* the version the cache of this kind is consistent with */
	/* the watch stream as received since the last list: hist[seq % HIST], seq in
	 * [first_seq, next_seq); a watch from a version below floor_rv must relist */
	struct cache_event hist[HIST];
	uint64_t first_seq, next_seq, floor_rv;
	unsigned long gen; /* bumped by each relist: the cache's watches of the kind expire */
	bool listing;      /* its first list is being taken: a reader may join it */
	struct cache_join *joins; /* readers waiting to join it (cache_join.c) */
};

struct cache_store {
	store base;
	store *b;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	size_t nk;
	struct cache_kind *kinds;
	struct store_cache_stats stats;
};

struct cache_watch {
	store_watch base;
	struct cache_kind *ck;
	unsigned long gen;
	uint64_t next_seq;
	struct store_blob **initial; /* from_rv 0: the objects at the start, delivered as ADDED */
	size_t n_initial, initial_idx;
};

/* The kind's cache once synced; NULL: read through (returns with s->mu held when not NULL). */
struct cache_kind *cache_synced(struct cache_store *s, const struct store_kind *k);
/* References to the kind's objects (s->mu held, released on return): cache.c's snapshot. */
struct store_blob **cache_snapshot(struct cache_store *s, struct cache_kind *ck, const char *ns,
                                   const char *selector, store_skip_fn skip, void *arg, size_t *n,
                                   uint64_t *rv, bool *oom);
void cache_put_all(struct store_blob **v, size_t n);

/* ---- readers that join a kind's first list (cache_join.c; store_cache_thread_joins) ---------- */

/* One reader, on its own stack while it waits. */
struct cache_join {
	struct cache_join *next;
	store_each_fn fn;
	void *arg;
	struct store_unreadable receiver; /* the reader's, set around fn */
	struct err *e;
	int rc; /* fn's return (it stopped the list), else the list's outcome */
	uint64_t rv;
	bool fed;      /* the informer hands it the objects: it waits until done */
	bool done;     /* the list ended for it: rc, rv (s->cv) */
	bool declined; /* no list to join after all: it reads as before */
};

/* The informer's side of one attempt to list: the readers it feeds (its thread's only). */
struct cache_joined {
	struct cache_join *fed;
};

/* s->mu not held: takes the readers waiting to join ck's list, hands each what fresh (the map
 * being built) holds so far, then hands obj (NULL: nothing) to every reader fed. */
void cache_join_feed(struct cache_kind *ck, struct cache_joined *jd, const struct cache_kind *fresh,
                     cJSON *obj);
/* s->mu held: ends the list for the readers fed (rc 0: listed at rv; else rc with e's message)
 * and, when final, declines those still waiting; wakes them (s->cv). */
void cache_join_end(struct cache_kind *ck, struct cache_joined *jd, int rc, uint64_t rv,
                    const struct err *e, bool final);
/* The reader's side: 1 with *rc when it joined ck's list (fn was handed every object on the
 * informer's thread while this one waited), 0 when there was none to join. */
int cache_join(struct cache_kind *ck, store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e,
               int *rc);

int cache_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **out,
                struct err *e);
int cache_watch_next(store_watch *bw, int timeout_ms, enum store_event_type *type, cJSON **obj,
                     struct err *e);
void cache_watch_close(store_watch *bw);

#endif
