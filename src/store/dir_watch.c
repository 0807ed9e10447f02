/* store: the embedded store's object cache, event ring, poll thread and watches (see dir.c). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "base/json.h"
#include "base/time.h"
#include "store/dir_int.h"

/* ---- cache and events ---------------------------------------------------------------------------- */

static unsigned hash(const char *k)
{
	unsigned h = 2166136261u;
	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 16777619u;
	return h % NBUCKETS;
}

struct centry *dir_cache_find(struct dstore *s, const char *key)
{
	for (struct centry *c = s->buckets[hash(key)]; c; c = c->next)
		if (strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

void dir_cache_drop(struct dstore *s, struct centry *victim)
{
	struct centry **pp = &s->buckets[hash(victim->key)];
	while (*pp && *pp != victim)
		pp = &(*pp)->next;
	if (*pp)
		*pp = victim->next;
	free(victim->key);
	cJSON_Delete(victim->obj);
	free(victim);
}

void dir_cache_put(struct dstore *s, const char *key, const struct store_kind *k, ino_t ino,
                   uint64_t rv, const cJSON *obj)
{
	struct centry *c = dir_cache_find(s, key);
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return;
		c->key = strdup(key);
		if (!c->key) {
			free(c);
			return;
		}
		c->next = s->buckets[hash(key)];
		s->buckets[hash(key)] = c;
	}
	c->kind = k;
	c->ino = ino;
	c->rv = rv;
	cJSON_Delete(c->obj);
	c->obj = cJSON_Duplicate(obj, true);
	c->seen = true;
}

void dir_ring_push(struct dstore *s, enum store_event_type t, const struct store_kind *k,
                   uint64_t rv, const cJSON *obj)
{
	struct event *ev;
	if (s->next_seq - s->first_seq == RING_CAP) {
		ev = &s->ring[s->first_seq % RING_CAP];
		s->floor_rv = ev->rv;
		cJSON_Delete(ev->obj);
		ev->obj = NULL;
		s->first_seq++;
	}
	ev = &s->ring[s->next_seq % RING_CAP];
	ev->seq = s->next_seq++;
	ev->rv = rv;
	ev->kind = k;
	ev->type = t;
	ev->obj = cJSON_Duplicate(obj, true);
	pthread_cond_broadcast(&s->cv);
}

struct change {
	uint64_t rv;
	enum store_event_type type;
	struct centry *entry; /* for DELETED: the entry to drop after the event */
	char *key;
	const struct store_kind *kind;
	ino_t ino;
	cJSON *obj;
};

static int cmp_change(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	return x->rv < y->rv ? -1 : x->rv > y->rv;
}

static int scan_dir(struct dstore *s, const struct store_kind *k, const char *dir,
                    const char *keyprefix, struct change **chg, size_t *n, size_t *cap, bool emit)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		char path[PATH_MAX], key[PATH_MAX];
		struct stat st;
		size_t len = strlen(de->d_name);
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (k->namespaced && !keyprefix[strlen(k->plural)]) { /* a namespace directory */
			char sub[PATH_MAX];
			snprintf(sub, sizeof(sub), "%s/%s", keyprefix, de->d_name);
			if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
				scan_dir(s, k, path, sub, chg, n, cap, emit);
			continue;
		}
		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		if (stat(path, &st) < 0)
			continue;
		snprintf(key, sizeof(key), "%s/%.*s", keyprefix, (int)(len - 5), de->d_name);
		struct centry *c = dir_cache_find(s, key);
		if (c && c->ino == st.st_ino) {
			c->seen = true;
			continue;
		}
		cJSON *obj = NULL;
		if (json_read_file(path, &obj, NULL) < 0)
			continue; /* corrupt files are reported by get/list, not by watches */
		if (!emit) {
			dir_cache_put(s, key, k, st.st_ino, store_meta_rv(obj), obj);
			cJSON_Delete(obj);
			continue;
		}
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 16;
			struct change *p = realloc(*chg, nc * sizeof(**chg));
			if (!p) {
				cJSON_Delete(obj);
				break;
			}
			*chg = p;
			*cap = nc;
		}
		(*chg)[(*n)++] = (struct change){store_meta_rv(obj),
		                                 c ? STORE_MODIFIED : STORE_ADDED,
		                                 NULL,
		                                 strdup(key),
		                                 k,
		                                 st.st_ino,
		                                 obj};
		if (c)
			c->seen = true;
	}
	closedir(d);
	return 0;
}

/* Brings the cache up to date with the directory; with emit, differences become events. */
void dir_sync_locked(struct dstore *s, bool emit)
{
	struct change *chg = NULL;
	size_t n = 0, cap = 0;
	uint64_t now_rv = 0;

	for (unsigned b = 0; b < NBUCKETS; b++)
		for (struct centry *c = s->buckets[b]; c; c = c->next)
			c->seen = false;
	for (const struct store_kind *const *k = store_kinds(); *k; k++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s/%s", s->path, (*k)->plural);
		scan_dir(s, *k, dir, (*k)->plural, &chg, &n, &cap, emit);
	}
	dir_rv_read(s, &now_rv, NULL);
	for (unsigned b = 0; b < NBUCKETS; b++) {
		for (struct centry *c = s->buckets[b], *next; c; c = next) {
			next = c->next;
			if (c->seen)
				continue;
			if (!emit || n == cap) {
				if (n == cap && emit) {
					size_t nc = cap ? cap * 2 : 16;
					struct change *p = realloc(chg, nc * sizeof(*chg));
					if (p) {
						chg = p;
						cap = nc;
					}
				}
				if (!emit || n == cap) {
					dir_cache_drop(s, c);
					continue;
				}
			}
			chg[n++] =
			    (struct change){now_rv, STORE_DELETED, c, NULL, c->kind, 0, NULL};
		}
	}
	if (n > 1)
		qsort(chg, n, sizeof(*chg), cmp_change);
	for (size_t i = 0; i < n; i++) {
		if (chg[i].type == STORE_DELETED) {
			dir_ring_push(s, STORE_DELETED, chg[i].kind, chg[i].rv, chg[i].entry->obj);
			dir_cache_drop(s, chg[i].entry);
		} else {
			dir_ring_push(s, chg[i].type, chg[i].kind, chg[i].rv, chg[i].obj);
			if (chg[i].key)
				dir_cache_put(s, chg[i].key, chg[i].kind, chg[i].ino, chg[i].rv,
				              chg[i].obj);
			free(chg[i].key);
			cJSON_Delete(chg[i].obj);
		}
	}
	free(chg);
}

void dir_cache_init_locked(struct dstore *s)
{
	if (s->cache_ready)
		return;
	int fd = dir_oplock(s, LOCK_SH, NULL);
	dir_sync_locked(s, false);
	dir_rv_read(s, &s->floor_rv, NULL);
	dir_opunlock(fd);
	s->cache_ready = true;
}

void *dir_poller_main(void *arg)
{
	struct dstore *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		struct timespec ts = time_after(CLOCK_REALTIME, s->poll_ms);
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		if (s->stopping)
			break;
		if (s->watchers > 0) {
			int fd = dir_oplock(s, LOCK_SH, NULL);
			if (fd >= 0) {
				dir_sync_locked(s, true);
				dir_opunlock(fd);
			}
		}
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- watches ----------------------------------------------------------------------------------- */

static int start_poller_locked(struct dstore *s)
{
	if (s->poller_running)
		return 0;
	if (pthread_create(&s->poller, NULL, dir_poller_main, s) != 0)
		return -EAGAIN;
	s->poller_running = true;
	return 0;
}

int dir_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **out,
              struct err *e)
{
	struct dstore *s = DS(st);
	struct dwatch *w = calloc(1, sizeof(*w));
	int r = 0;

	*out = NULL;
	if (!w)
		return err_set(e, -ENOMEM, "watch: out of memory");
	w->base.ops = st->ops;
	w->s = s;
	w->kind = k;
	pthread_mutex_lock(&s->mu);
	dir_cache_init_locked(s);
	if (from_rv == 0) {
		w->initial = cJSON_CreateArray();
		for (unsigned b = 0; b < NBUCKETS; b++)
			for (struct centry *c = s->buckets[b]; c; c = c->next)
				if (c->kind == k && c->obj)
					cJSON_AddItemToArray(w->initial,
					                     cJSON_Duplicate(c->obj, true));
		w->next_seq = s->next_seq;
	} else if (from_rv < s->floor_rv) {
		r = err_set(e, STORE_EXPIRED, "too old resource version: %" PRIu64 " (%" PRIu64 ")",
		            from_rv, s->floor_rv);
	} else {
		uint64_t q = s->first_seq;
		while (q < s->next_seq && s->ring[q % RING_CAP].rv <= from_rv)
			q++;
		w->next_seq = q;
	}
	if (r == 0 && (r = start_poller_locked(s)) < 0)
		err_set(e, r, "watch: cannot start the poll thread");
	if (r == 0)
		s->watchers++;
	pthread_mutex_unlock(&s->mu);
	if (r < 0) {
		cJSON_Delete(w->initial);
		free(w);
		return r;
	}
	*out = &w->base;
	return 0;
}

int dir_watch_next(store_watch *bw, int timeout_ms, enum store_event_type *type, cJSON **obj,
                   struct err *e)
{
	struct dwatch *w = (struct dwatch *)bw;
	struct dstore *s = w->s;
	struct timespec ts;
	int r = 0;

	*obj = NULL;
	if (w->initial && w->initial_idx < cJSON_GetArraySize(w->initial)) {
		*type = STORE_ADDED;
		*obj = cJSON_Duplicate(cJSON_GetArrayItem(w->initial, w->initial_idx++), true);
		return 1;
	}
	ts = time_after(CLOCK_REALTIME, timeout_ms);
	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (w->closed) {
			r = err_set(e, -ECANCELED, "watch closed");
			break;
		}
		if (w->next_seq < s->first_seq) {
			r = err_set(e, STORE_EXPIRED, "watch fell behind: too many events; relist");
			break;
		}
		while (w->next_seq < s->next_seq && s->ring[w->next_seq % RING_CAP].kind != w->kind)
			w->next_seq++;
		if (w->next_seq < s->next_seq) {
			struct event *ev = &s->ring[w->next_seq % RING_CAP];
			*type = ev->type;
			*obj = cJSON_Duplicate(ev->obj, true);
			w->next_seq++;
			r = 1;
			break;
		}
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) {
			r = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

void dir_watch_close(store_watch *bw)
{
	struct dwatch *w = (struct dwatch *)bw;
	pthread_mutex_lock(&w->s->mu);
	w->s->watchers--;
	pthread_mutex_unlock(&w->s->mu);
	cJSON_Delete(w->initial);
	free(w);
}
