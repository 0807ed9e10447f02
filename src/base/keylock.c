/* keylock — per-key operation locks without allocation. */
#include "base/keylock.h"

#include <errno.h>
#include <string.h>

void keylock_init(struct keylock *k)
{
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	k->held = NULL;
}

void keylock_fini(struct keylock *k)
{
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
}

static bool busy(const struct keylock *k, const char *key)
{
	for (const struct keylock_hold *h = k->held; h; h = h->next)
		if (!strcmp(h->key, key))
			return true;
	return false;
}

static void link_hold(struct keylock *k, struct keylock_hold *h, const char *key)
{
	h->key = key;
	h->next = k->held;
	k->held = h;
}

void keylock_wait(struct keylock *k, struct keylock_hold *h, const char *key)
{
	pthread_mutex_lock(&k->mu);
	while (busy(k, key))
		pthread_cond_wait(&k->cv, &k->mu);
	link_hold(k, h, key);
	pthread_mutex_unlock(&k->mu);
}

int keylock_try(struct keylock *k, struct keylock_hold *h, const char *key)
{
	int r = 0;
	pthread_mutex_lock(&k->mu);
	if (busy(k, key))
		r = -EBUSY;
	else
		link_hold(k, h, key);
	pthread_mutex_unlock(&k->mu);
	return r;
}

void keylock_release(struct keylock *k, struct keylock_hold *h)
{
	pthread_mutex_lock(&k->mu);
	for (struct keylock_hold **p = &k->held; *p; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			break;
		}
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
}
