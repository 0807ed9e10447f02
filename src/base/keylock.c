/* keylock — per-key operation locks without allocation. */
#include "base/keylock.h"

#include <errno.h>
#include <string.h>

#include "base/hash.h"

void keylock_init(struct keylock *k)
{
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	memset(k->held, 0, sizeof(k->held));
	k->releases = 0;
}

void keylock_fini(struct keylock *k)
{
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
}

static struct keylock_hold **chain(struct keylock *k, const char *key)
{
	return &k->held[hash_fnv1a32(key) % KEYLOCK_BUCKETS];
}

static bool busy(struct keylock *k, const char *key)
{
	for (const struct keylock_hold *h = *chain(k, key); h; h = h->next)
		if (!strcmp(h->key, key))
			return true;
	return false;
}

static void link_hold(struct keylock *k, struct keylock_hold *h, const char *key)
{
	struct keylock_hold **head = chain(k, key);
	h->key = key;
	h->next = *head;
	h->pprev = head;
	if (*head)
		(*head)->pprev = &h->next;
	*head = h;
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
	if (h->pprev) {
		*h->pprev = h->next;
		if (h->next)
			h->next->pprev = h->pprev;
		h->next = NULL;
		h->pprev = NULL;
	}
	k->releases++;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
}

unsigned long keylock_releases(struct keylock *k)
{
	pthread_mutex_lock(&k->mu);
	unsigned long n = k->releases;
	pthread_mutex_unlock(&k->mu);
	return n;
}
