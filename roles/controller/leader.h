/* controller/leader — who runs the reconcilers (deploy.md §1.3).
 *
 * With the embedded store its owner lock already makes this controller the only one: the
 * reconcile loop starts at once.  With the API as the store and --leader-elect, the loop and the
 * condition Events (controller/events.h) run only while this replica holds the Lease
 * `pillar-csi-controller` in POD_NAMESPACE (cluster/lease.h): started when it is acquired, stopped
 * when it is lost; in between every reconcile first checks that the Lease is still held within
 * its renew deadline, so a replica resumed after a stall (SIGSTOP) does not act before its
 * elector has noticed.  Without --leader-elect on the API they start at once.  The CSI services
 * are not affected: every replica serves them.
 *
 * ctl_leader_stop stops the loop and the Events, then releases the Lease (ReleaseOnCancel).
 * Functions return 0 or a negative errno with a message in e.
 */
#ifndef PILLAR_ROLES_CONTROLLER_LEADER_H
#define PILLAR_ROLES_CONTROLLER_LEADER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "controller/ctl.h"
#include "kube/client.h"

struct ctl_leader_opts {
	struct kube_client *kc; /* the API (NULL: the embedded store: no election, no Events) */
	/* The Lease's own client, so that renewals never wait behind the rate limit of the
	 * store's traffic (client-go's controllers use a separate leader-election client too). */
	struct kube_client *lease_kc;
	bool elect;                                    /* --leader-elect */
	const char *ns;                                /* the Lease's namespace (POD_NAMESPACE) */
	int64_t lease_ms, renew_deadline_ms, retry_ms; /* 0: deploy.md's 15 s, 10 s, 2 s */
};

struct ctl_leader;

/* c (and its store) and o->kc must outlive it. */
int ctl_leader_start(struct ctl *c, const struct ctl_leader_opts *o, struct ctl_leader **out,
                     struct err *e);
/* true while this replica may reconcile (always without election). */
bool ctl_leader_active(struct ctl_leader *l);
/* NULL is a no-op. */
void ctl_leader_stop(struct ctl_leader *l);

#endif
