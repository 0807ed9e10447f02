/* cluster/lru — hashed LRU cache of string keys (lru.h). */
#include "cluster/lru.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

struct lru_entry {
	struct lru_entry *chain;         /* the next entry of the bucket */
	struct lru_entry *newer, *older; /* the use order */
	uint64_t hash;
	size_t bytes;
	const char *key; /* after the value */
	alignas(max_align_t) unsigned char value[];
};

/* The value size rounded up so that the key after it stays in the entry's alignment. */
static size_t value_room(const struct lru *c)
{
	return (c->value_size + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
}

size_t lru_entry_bytes(const struct lru *c, const char *key)
{
	return sizeof(struct lru_entry) + value_room(c) + strlen(key) + 1;
}

int lru_init(struct lru *c, size_t cap, size_t max_bytes, size_t value_size,
             uint64_t (*hash)(const char *key))
{
	size_t nb = 16;

	if (cap == 0 || cap > SIZE_MAX / 4)
		return -EINVAL;
	while (nb < 2 * cap)
		nb *= 2;
	*c = (struct lru){.cap = cap,
	                  .max_bytes = max_bytes,
	                  .value_size = value_size,
	                  .hash = hash ? hash : hash_fnv1a64,
	                  .mask = nb - 1};
	c->buckets = calloc(nb, sizeof(*c->buckets));
	return c->buckets ? 0 : -ENOMEM;
}

static struct lru_entry **slot_of(const struct lru *c, uint64_t h)
{
	return &c->buckets[h & c->mask];
}

static void unlink_use(struct lru *c, struct lru_entry *x)
{
	if (x->newer)
		x->newer->older = x->older;
	else
		c->newest = x->older;
	if (x->older)
		x->older->newer = x->newer;
	else
		c->oldest = x->newer;
	x->newer = x->older = NULL;
}

static void push_newest(struct lru *c, struct lru_entry *x)
{
	x->older = c->newest;
	x->newer = NULL;
	if (c->newest)
		c->newest->newer = x;
	else
		c->oldest = x;
	c->newest = x;
}

static void evict_oldest(struct lru *c)
{
	struct lru_entry *x = c->oldest, **p = slot_of(c, x->hash);

	while (*p != x)
		p = &(*p)->chain;
	*p = x->chain;
	unlink_use(c, x);
	c->n--;
	c->bytes -= x->bytes;
	free(x);
}

static struct lru_entry *find(const struct lru *c, const char *key, uint64_t h)
{
	for (struct lru_entry *x = *slot_of(c, h); x; x = x->chain)
		if (x->hash == h && strcmp(x->key, key) == 0)
			return x;
	return NULL;
}

void *lru_peek(const struct lru *c, const char *key)
{
	struct lru_entry *x = c->buckets ? find(c, key, c->hash(key)) : NULL;
	return x ? x->value : NULL;
}

void *lru_take(struct lru *c, const char *key, bool *fresh)
{
	uint64_t h = c->hash(key);
	struct lru_entry *x = find(c, key, h);
	size_t len = strlen(key), bytes = lru_entry_bytes(c, key);

	if (x) {
		unlink_use(c, x);
		push_newest(c, x);
		*fresh = false;
		return x->value;
	}
	if (bytes > c->max_bytes)
		return NULL;
	while (c->n > 0 && (c->n >= c->cap || c->bytes + bytes > c->max_bytes))
		evict_oldest(c);
	x = calloc(1, bytes);
	if (!x)
		return NULL;
	char *k = (char *)x->value + value_room(c);
	memcpy(k, key, len + 1);
	x->key = k;
	x->hash = h;
	x->bytes = bytes;
	x->chain = *slot_of(c, h);
	*slot_of(c, h) = x;
	push_newest(c, x);
	c->n++;
	c->bytes += bytes;
	*fresh = true;
	return x->value;
}

void lru_clear(struct lru *c)
{
	while (c->n > 0)
		evict_oldest(c);
	free(c->buckets);
	c->buckets = NULL;
	c->newest = c->oldest = NULL;
}
