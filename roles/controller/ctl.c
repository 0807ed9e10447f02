/* ctl — the controller core: per-volume locks, the agent status versions it wrote, store
 * readiness. */
#include "controller/ctl.h"

#include "base/time.h"
#include "controller/dhchap.h"
#include "controller/metrics.h"
#include "controller/readiness.h"
#include "controller/reconcile.h"
#include "controller/reconcile_batch.h"

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
	c->dhchap_ns = "default";
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

static void own_list_free(struct ctl_own **l)
{
	while (*l) {
		struct ctl_own *o = *l;
		*l = o->next;
		free(o);
	}
}

void ctl_fini(struct ctl *c)
{
	if (!c)
		return;
	keylock_fini(&c->locks);
	own_list_free(&c->own);
	own_list_free(&c->est);
	pthread_cond_destroy(&c->own_cv);
	pthread_mutex_destroy(&c->own_mu);
	reconcile_batch_memos_free(c->memos);
	c->memos = NULL;
	dhchap_records_free(c);
	free(c->unreadable);
	c->unreadable = NULL;
	reconcile_agent_tallies_free(c->tallies);
	c->tallies = NULL;
	ctl_metrics_volumes_free(c->metrics_volumes);
	c->metrics_volumes = NULL;
	pthread_mutex_destroy(&c->memo_mu);
}

/* name's entry in list *l (own_mu held), created at the head when create; NULL when absent
 * or out of memory. */
static struct ctl_own *list_find(struct ctl_own **l, const char *name, bool create)
{
	struct ctl_own *o = *l;
	while (o && strcmp(o->name, name))
		o = o->next;
	if (!o && create && (o = calloc(1, sizeof(*o) + strlen(name) + 1)) != NULL) {
		strcpy(o->name, name);
		o->next = *l;
		*l = o;
	}
	return o;
}

/* The agent's entry (own_mu held). */
static struct ctl_own *own_find(struct ctl *c, const char *name, bool create)
{
	return list_find(&c->own, name, create);
}

/* Unlinks and frees volume's record (own_mu held); its version, 0 when there was none. */
static uint64_t est_drop(struct ctl *c, const char *volume)
{
	for (struct ctl_own **p = &c->est; *p; p = &(*p)->next)
		if (!strcmp((*p)->name, volume)) {
			struct ctl_own *o = *p;
			uint64_t rv = o->rv;
			*p = o->next;
			free(o);
			c->n_est--;
			return rv;
		}
	return 0;
}

void ctl_export_established(struct ctl *c, const char *volume, uint64_t rv)
{
	pthread_mutex_lock(&c->own_mu);
	est_drop(c, volume);
	struct ctl_own *o = rv ? list_find(&c->est, volume, true) : NULL;
	if (o) {
		o->rv = rv;
		if (++c->n_est > CTL_EST_MAX) { /* the oldest is the last */
			struct ctl_own **p = &c->est;
			while ((*p)->next)
				p = &(*p)->next;
			free(*p);
			*p = NULL;
			c->n_est--;
		}
	}
	pthread_mutex_unlock(&c->own_mu);
}

bool ctl_export_take(struct ctl *c, const char *volume, uint64_t seen)
{
	pthread_mutex_lock(&c->own_mu);
	uint64_t rv = est_drop(c, volume);
	pthread_mutex_unlock(&c->own_mu);
	return rv && seen == rv;
}

void ctl_export_forget(struct ctl *c, const char *volume)
{
	pthread_mutex_lock(&c->own_mu);
	est_drop(c, volume);
	pthread_mutex_unlock(&c->own_mu);
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

int ctl_store_code(int r)
{
	return grpc_code_from_errno(r) == GRPC_RESOURCE_EXHAUSTED ? GRPC_RESOURCE_EXHAUSTED
	                                                          : GRPC_UNAVAILABLE;
}

bool ctl_store_ready(struct ctl *c)
{
	return c->readiness ? ctl_readiness_ready(c->readiness) : ctl_readiness_check(c->st, NULL);
}
