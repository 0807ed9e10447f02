#include "grpc/oplock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/server.h"

struct held {
	struct held *next;
	char key[];
};

struct grpc_oplock {
	pthread_mutex_t mu;
	struct held *held;
};

struct grpc_oplock *grpc_oplock_new(void)
{
	struct grpc_oplock *t = calloc(1, sizeof(*t));
	if (t)
		pthread_mutex_init(&t->mu, NULL);
	return t;
}

void grpc_oplock_free(struct grpc_oplock *t)
{
	if (!t)
		return;
	while (t->held) {
		struct held *h = t->held;
		t->held = h->next;
		free(h);
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
}

int grpc_oplock_try(struct grpc_oplock *t, const char *key, struct grpc_call *call)
{
	struct held *h;
	int rc = GRPC_OK;

	pthread_mutex_lock(&t->mu);
	for (h = t->held; h; h = h->next)
		if (strcmp(h->key, key) == 0)
			break;
	if (h) {
		rc = GRPC_ABORTED;
		if (call)
			grpc_call_set_status_msg(
			    call, "an operation on volume %s is already in progress", key);
	} else if (!(h = malloc(sizeof(*h) + strlen(key) + 1))) {
		rc = GRPC_RESOURCE_EXHAUSTED;
		if (call)
			grpc_call_set_status_msg(call, "out of memory");
	} else {
		strcpy(h->key, key);
		h->next = t->held;
		t->held = h;
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

void grpc_oplock_release(struct grpc_oplock *t, const char *key)
{
	struct held **p;

	pthread_mutex_lock(&t->mu);
	for (p = &t->held; *p; p = &(*p)->next) {
		if (strcmp((*p)->key, key) == 0) {
			struct held *h = *p;
			*p = h->next;
			free(h);
			break;
		}
	}
	pthread_mutex_unlock(&t->mu);
}
