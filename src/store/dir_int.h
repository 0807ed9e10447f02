/* store/dir_int — internal to the embedded store (dir.c: paths, locks and operations;
 * dir_watch.c: the object cache, the event ring, the poll thread and watches). */
#ifndef PILLAR_STORE_DIR_INT_H
#define PILLAR_STORE_DIR_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/store.h"

#define RING_CAP 4096
#define NBUCKETS 1024

struct centry {
	struct centry *next;
	char *key; /* plural/name or plural/ns/name */
	const struct store_kind *kind;
	ino_t ino;
	uint64_t rv;
	cJSON *obj;
	bool seen; /* mark during a scan */
};

struct event {
	uint64_t seq;
	uint64_t rv;
	const struct store_kind *kind;
	enum store_event_type type;
	cJSON *obj;
};

struct dstore {
	store base;
	char *path;
	int owner_fd;
	int poll_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool cache_ready;
	uint64_t floor_rv; /* events with rv > floor_rv are all in the ring */
	struct centry *buckets[NBUCKETS];
	struct event ring[RING_CAP];
	uint64_t first_seq, next_seq; /* ring holds [first_seq, next_seq) */
	pthread_t poller;
	bool poller_running, stopping;
	int watchers;
};

struct dwatch {
	store_watch base;
	struct dstore *s;
	const struct store_kind *kind;
	uint64_t next_seq;
	cJSON *initial; /* array of objects delivered first as ADDED */
	int initial_idx;
	bool closed;
};

#define DS(s) ((struct dstore *)(s))

/* dir.c: the resourceVersion counter and the operation lock (a flock fd, or -1). */
int dir_rv_read(struct dstore *s, uint64_t *rv, struct err *e);
int dir_oplock(struct dstore *s, int how, struct err *e);
void dir_opunlock(int fd);

/* dir_watch.c, called with s->mu held (_locked) or from the operations. */
struct centry *dir_cache_find(struct dstore *s, const char *key);
void dir_cache_drop(struct dstore *s, struct centry *victim);
void dir_cache_put(struct dstore *s, const char *key, const struct store_kind *k, ino_t ino,
                   uint64_t rv, const cJSON *obj);
void dir_ring_push(struct dstore *s, enum store_event_type t, const struct store_kind *k,
                   uint64_t rv, const cJSON *obj);
/* Brings the cache up to date with the directory; with emit, differences become events. */
void dir_sync_locked(struct dstore *s, bool emit);
void dir_cache_init_locked(struct dstore *s);
void *dir_poller_main(void *arg);
int dir_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **out,
              struct err *e);
int dir_watch_next(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
                   struct err *e);
void dir_watch_close(store_watch *w);

#endif
