/* ctl — the controller core: per-volume locks, the agent status versions it wrote, store
 * readiness. */
#include "controller/ctl.h"

#include "base/time.h"
#include "controller/xitem.h"
#include "model/pillar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_init(struct ctl *c, store *st, agentclient *ac)
{
	memset(c, 0, sizeof(*c));
	c->st = st;
	c->ac = ac;
	c->agent_default_port = 9500;
	keylock_init(&c->locks);
	pthread_mutex_init(&c->own_mu, NULL);
	pthread_mutex_init(&c->memo_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->own_cv, &ca);
	pthread_condattr_destroy(&ca);
}

struct ctl_own {
	struct ctl_own *next;
	uint64_t rv;
	bool writing;
	char name[]; /* a PillarAgent */
};

void ctl_fini(struct ctl *c)
{
	if (!c)
		return;
	keylock_fini(&c->locks);
	while (c->own) {
		struct ctl_own *o = c->own;
		c->own = o->next;
		free(o);
	}
	pthread_cond_destroy(&c->own_cv);
	pthread_mutex_destroy(&c->own_mu);
	xmemo_free(c->memos);
	c->memos = NULL;
	pthread_mutex_destroy(&c->memo_mu);
}

/* The agent's entry (own_mu held), created when create; NULL when absent or out of memory. */
static struct ctl_own *own_find(struct ctl *c, const char *name, bool create)
{
	struct ctl_own *o = c->own;
	while (o && strcmp(o->name, name))
		o = o->next;
	if (!o && create && (o = calloc(1, sizeof(*o) + strlen(name) + 1)) != NULL) {
		strcpy(o->name, name);
		o->next = c->own;
		c->own = o;
	}
	return o;
}

void ctl_own_begin(struct ctl *c, const char *name)
{
	pthread_mutex_lock(&c->own_mu);
	struct ctl_own *o = own_find(c, name, true);
	if (o)
		o->writing = true;
	pthread_mutex_unlock(&c->own_mu);
}

void ctl_own_end(struct ctl *c, const char *name, uint64_t rv)
{
	pthread_mutex_lock(&c->own_mu);
	struct ctl_own *o = own_find(c, name, false);
	if (o) {
		o->writing = false;
		if (rv)
			o->rv = rv;
	}
	pthread_cond_broadcast(&c->own_cv);
	pthread_mutex_unlock(&c->own_mu);
}

bool ctl_own_event(struct ctl *c, const char *name, uint64_t rv)
{
	struct timespec ts = time_after(CLOCK_MONOTONIC, 2000);
	pthread_mutex_lock(&c->own_mu);
	const struct ctl_own *o = own_find(c, name, false);
	while (o && o->writing && pthread_cond_timedwait(&c->own_cv, &c->own_mu, &ts) == 0)
		;
	bool own = o && rv && o->rv == rv;
	pthread_mutex_unlock(&c->own_mu);
	return own;
}

bool ctl_store_ready(struct ctl *c)
{
	void *items = NULL;
	size_t n = 0;
	int r = model_list(c->st, &model_pa_kind, NULL, NULL, &items, &n, NULL, NULL);
	model_list_free(&model_pa_kind, items, n);
	return r == 0;
}
