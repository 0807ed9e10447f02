/* cluster/lru — a hashed cache of string keys with least-recently-used eviction, the event
 * correlator's caches (events.h): a lookup hashes the key, walks one bucket's chain and compares
 * whole keys (two keys with one hash are two entries), so it costs O(1) whatever the number of
 * entries.
 *
 * Each entry is one allocation: a value of the cache's value size, zeroed when the entry is made,
 * and a copy of its key, so an entry costs its key's length plus a fixed overhead.  The cache
 * holds at most `cap` entries and `max_bytes` bytes of entries (lru_entry_bytes); making an entry
 * beyond either evicts the least recently used ones first.  Not thread-safe: one owner.
 */
#ifndef PILLAR_CLUSTER_LRU_H
#define PILLAR_CLUSTER_LRU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lru_entry;

struct lru {
	size_t cap, max_bytes, value_size;
	uint64_t (*hash)(const char *key);
	struct lru_entry **buckets; /* a power of two of them, at least 2 * cap */
	size_t mask;
	struct lru_entry *newest, *oldest;
	size_t n, bytes;
};

/* Sets c up; hash NULL is FNV-1a 64.  Returns 0 or -ENOMEM / -EINVAL (cap 0). */
int lru_init(struct lru *c, size_t cap, size_t max_bytes, size_t value_size,
             uint64_t (*hash)(const char *key));
/* The value of key, made most recently used; *fresh says whether it was just made (zeroed).
 * NULL when out of memory or the entry alone exceeds max_bytes. */
void *lru_take(struct lru *c, const char *key, bool *fresh);
/* The value of key or NULL; its use is not recorded. */
void *lru_peek(const struct lru *c, const char *key);
/* What an entry of this key costs (counted against max_bytes). */
size_t lru_entry_bytes(const struct lru *c, const char *key);
/* Frees every entry and the buckets; c may be initialized again. */
void lru_clear(struct lru *c);

#endif
