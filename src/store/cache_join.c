/* store/cache: readers that join a kind's first list as the informer takes it
 * (store_cache_thread_joins, cache_int.h).  A reader that would wait for the whole list and then
 * parse every object of the cache again is handed each object from the informer's own parse
 * instead, as it arrives: on a loaded machine its work is done while the API server is still
 * answering, and each object is parsed once.  The reader waits on its own stack; the informer
 * calls its fn, never with the lock held. */
#include <errno.h>
#include <pthread.h>

#include "store/cache_int.h"

static __thread bool reads_joined;

bool store_cache_thread_joins(bool on)
{
	bool was = reads_joined;
	reads_joined = on;
	return was;
}

/* fn of reader j on obj, with the reader's receiver of unreadable objects set around it. */
static void hand(struct cache_join *j, cJSON *obj)
{
	struct store_unreadable prev;
	store_unreadable_catch(&j->receiver, &prev);
	j->rc = j->fn(obj, j->arg);
	store_unreadable_catch(&prev, NULL);
}

/* What fresh holds so far, handed to a reader that joins now (in fresh's order: the list's). */
static void catch_up(struct cache_join *j, const struct cache_kind *fresh)
{
	for (size_t i = 0; i < fresh->n && j->rc == 0; i++) {
		cJSON *obj = NULL;
		j->rc = store_blob_parse(fresh->v[i].obj, &obj, j->e);
		if (j->rc == 0)
			hand(j, obj);
		cJSON_Delete(obj);
	}
}

void cache_join_feed(struct cache_kind *ck, struct cache_joined *jd, const struct cache_kind *fresh,
                     cJSON *obj)
{
	struct cache_store *s = ck->s;
	pthread_mutex_lock(&s->mu);
	struct cache_join *fresh_joins = ck->joins;
	ck->joins = NULL;
	for (struct cache_join *j = fresh_joins; j; j = j->next)
		j->fed = true;
	pthread_mutex_unlock(&s->mu);
	while (fresh_joins) {
		struct cache_join *j = fresh_joins;
		fresh_joins = j->next;
		catch_up(j, fresh);
		j->next = jd->fed;
		jd->fed = j;
	}
	for (struct cache_join *j = obj ? jd->fed : NULL; j; j = j->next)
		if (j->rc == 0)
			hand(j, obj);
}

void cache_join_end(struct cache_kind *ck, struct cache_joined *jd, int rc, uint64_t rv,
                    const struct err *e, bool final)
{
	for (struct cache_join *j = jd->fed; j; j = j->next) {
		if (j->rc == 0 && rc < 0)
			j->rc =
			    err_set(j->e, rc, "%s", e && e->msg[0] ? e->msg : "the list failed");
		j->rv = rv;
		j->done = true;
	}
	jd->fed = NULL;
	for (struct cache_join *j = final ? ck->joins : NULL; j; j = j->next)
		j->declined = j->done = true;
	if (final)
		ck->joins = NULL;
	pthread_cond_broadcast(&ck->s->cv);
}

int cache_join(struct cache_kind *ck, store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e,
               int *rc)
{
	struct cache_store *s = ck->s;
	struct cache_join j = {.fn = fn, .arg = arg, .e = e};
	if (!reads_joined)
		return 0;
	store_unreadable_catch(NULL, &j.receiver); /* the caller's, read and set back */
	store_unreadable_catch(&j.receiver, NULL);
	pthread_mutex_lock(&s->mu);
	if (!ck->listing) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	j.next = ck->joins;
	ck->joins = &j;
	while (!j.done && (j.fed || !s->stop))
		pthread_cond_wait(&s->cv, &s->mu);
	if (!j.done) { /* the cache closes before the informer took it: not joined */
		struct cache_join **p = &ck->joins;
		while (*p && *p != &j)
			p = &(*p)->next;
		if (*p)
			*p = j.next;
		j.declined = true;
	}
	pthread_mutex_unlock(&s->mu);
	if (j.declined)
		return 0;
	*rc = j.rc;
	if (j.rc == 0 && list_rv)
		*list_rv = j.rv;
	return 1;
}
