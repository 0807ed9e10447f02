/* controller/leader — the reconcilers on the Lease holder only (leader.h). */
#include "controller/leader.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cluster/events.h"
#include "cluster/lease.h"
#include "controller/events.h"
#include "controller/loop.h"

struct ctl_leader {
	struct ctl *c;
	struct kube_lease *lease; /* NULL without election */
	struct kube_events *rec;  /* NULL on the embedded store */
	pthread_mutex_t mu;       /* loop and events */
	struct controller_loop *loop;
	struct ctl_events *events;
};

static bool may_reconcile(void *arg, const char *key)
{
	struct ctl_leader *l = arg;
	bool ok = !l->lease || kube_lease_held(l->lease);
	if (!ok && log_verbosity() >= 2)
		log_info("reconcile skipped: this replica does not hold the Lease", "key", key);
	else if (ok && key && log_verbosity() >= 4)
		log_info("reconcile", "key", key);
	return ok;
}

/* Starts the loop and the Events (the started() callback, or at once without election). */
static void run(void *arg)
{
	struct ctl_leader *l = arg;
	struct controller_loop_opts lo = {.may_reconcile = may_reconcile, .may_reconcile_arg = l};
	struct err e = {0};

	pthread_mutex_lock(&l->mu);
	l->c->rec = l->rec;
	if (l->rec && !l->events && ctl_events_new(l->rec, &l->events, &e) < 0)
		log_error("events not recorded", "error", e.msg);
	if (l->events) {
		lo.observe = ctl_events_observe;
		lo.observe_arg = l->events;
	}
	if (!l->loop && controller_loop_start(l->c, &lo, &l->loop, &e) < 0)
		log_error("reconcilers not started", "error", e.msg);
	pthread_mutex_unlock(&l->mu);
}

/* Stops them (the stopped() callback, and at the end). */
static void halt(void *arg)
{
	struct ctl_leader *l = arg;
	pthread_mutex_lock(&l->mu);
	controller_loop_stop(l->loop);
	l->loop = NULL;
	ctl_events_free(l->events); /* after the loop: its watches call it */
	l->events = NULL;
	pthread_mutex_unlock(&l->mu);
	if (l->lease)
		log_info("reconcilers stopped: not the leader");
}

int ctl_leader_start(struct ctl *c, const struct ctl_leader_opts *o, struct ctl_leader **out,
                     struct err *e)
{
	struct ctl_leader *l = calloc(1, sizeof(*l));
	char id[320];
	int rc = 0;

	if (!l)
		return err_set(e, -ENOMEM, "out of memory");
	l->c = c;
	pthread_mutex_init(&l->mu, NULL);
	*out = l;
	if (o->kc) {
		struct kube_events_opts eo = {.component = "pillar-csi-controller"};
		rc = kube_events_new(&l->rec, o->kc, &eo, e);
	}
	if (rc == 0 && o->kc && o->elect) {
		struct kube_lease_opts lo = {.ns = o->ns,
		                             .name = KUBE_LEASE_NAME,
		                             .identity = id,
		                             .lease_ms = o->lease_ms,
		                             .renew_deadline_ms = o->renew_deadline_ms,
		                             .retry_ms = o->retry_ms,
		                             .started = run,
		                             .stopped = halt,
		                             .arg = l};
		if (kube_lease_identity_make(id, sizeof(id)) < 0)
			rc = err_set(e, -EIO, "leader election: no random identity");
		if (rc == 0)
			rc = kube_lease_new(&l->lease, o->lease_kc ? o->lease_kc : o->kc, &lo, e);
		if (rc == 0)
			rc = kube_lease_start(l->lease, e);
		return rc;
	}
	if (rc == 0)
		run(l);
	return rc;
}

bool ctl_leader_active(struct ctl_leader *l)
{
	return l && may_reconcile(l, NULL);
}

void ctl_leader_stop(struct ctl_leader *l)
{
	if (!l)
		return;
	if (l->lease)
		kube_lease_free(l->lease); /* stopped() (= halt) first, then the release */
	halt(l);
	l->c->rec = NULL;
	kube_events_free(l->rec);
	pthread_mutex_destroy(&l->mu);
	free(l);
}
