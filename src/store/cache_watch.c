/* store/cache's own watches (store.h: store_cache_open): a watch of a cached kind is served from
 * its informer's stream, the events it kept (cache_int.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/time.h"
#include "store/cache_int.h"

/* A watch of a cached kind from the informer's stream; STORE_EXPIRED when from_rv is older than
 * what the cache kept.  Other kinds: the store's own watch. */
int cache_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **out,
                struct err *e)
{
	struct cache_store *s = (struct cache_store *)st;
	struct cache_kind *ck = cache_synced(s, k);
	if (!ck)
		return store_watch_open(s->b, k, from_rv, out, e);
	struct cache_watch *w = calloc(1, sizeof(*w));
	int r = w ? 0 : err_set(e, -ENOMEM, "watch: out of memory");
	if (r == 0 && from_rv && from_rv < ck->floor_rv)
		r = err_set(e, STORE_EXPIRED, "too old resource version: %llu (%llu)",
		            (unsigned long long)from_rv, (unsigned long long)ck->floor_rv);
	if (r == 0) {
		*w = (struct cache_watch){.base.ops = st->ops, .ck = ck, .gen = ck->gen};
		w->next_seq = ck->first_seq;
		while (w->next_seq < ck->next_seq && ck->hist[w->next_seq % HIST].rv <= from_rv)
			w->next_seq++;
		if (!from_rv) { /* the current objects first, then what follows */
			uint64_t rv;
			bool oom;
			w->next_seq = ck->next_seq;
			w->initial =
			    cache_snapshot(s, ck, NULL, NULL, NULL, NULL, &w->n_initial, &rv, &oom);
			if (!oom) {
				*out = &w->base;
				return 0;
			}
			free(w);
			return err_set(e, -ENOMEM, "watch: out of memory");
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (r < 0)
		free(w);
	else
		*out = &w->base;
	return r;
}

/* The next event of w (s->mu held): 1 with *b (a reference), 0 when none yet, or an error. */
static int next_locked(struct cache_watch *w, enum store_event_type *type, struct store_blob **b,
                       struct err *e)
{
	struct cache_kind *ck = w->ck;
	if (w->gen != ck->gen || w->next_seq < ck->first_seq)
		return err_set(e, STORE_EXPIRED, "watch fell behind the cache; relist");
	if (w->next_seq == ck->next_seq)
		return 0;
	struct cache_event *ev = &ck->hist[w->next_seq++ % HIST];
	*type = ev->type;
	*b = store_blob_ref(ev->obj);
	return 1;
}

int cache_watch_next(store_watch *bw, int timeout_ms, enum store_event_type *type, cJSON **obj,
                     struct err *e)
{
	struct cache_watch *w = (struct cache_watch *)bw;
	struct cache_store *s = w->ck->s;
	struct store_blob *b = NULL;
	struct timespec ts = time_after(CLOCK_MONOTONIC, timeout_ms);
	int r;
	*obj = NULL;
	if (w->initial_idx < w->n_initial) {
		*type = STORE_ADDED;
		r = store_blob_parse(w->initial[w->initial_idx++], obj, e);
		return r < 0 ? r : 1;
	}
	pthread_mutex_lock(&s->mu);
	while ((r = next_locked(w, type, &b, e)) == 0 && !s->stop &&
	       pthread_cond_timedwait(&w->ck->cv, &s->mu, &ts) != ETIMEDOUT)
		;
	if (r == 0 && s->stop)
		r = err_set(e, -ECANCELED, "watch closed");
	pthread_mutex_unlock(&s->mu);
	if (r == 1) {
		int p = store_blob_parse(b, obj, e);
		r = p < 0 ? p : 1;
	}
	store_blob_put(b);
	return r;
}

void cache_watch_close(store_watch *bw)
{
	struct cache_watch *w = (struct cache_watch *)bw;
	cache_put_all(w->initial, w->n_initial);
	free(w);
}
