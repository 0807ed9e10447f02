/* controller/readiness — what the controller's Probe, /readyz and pillar_csi_store_ready
 * answer, kept current off the call path (csi.md §1.1).
 *
 * On the API server the store is ready when a request reaches it and is answered (GET /version:
 * not a list, so the checks never add a list to what the watches' resumption after an API
 * server restart costs).  The embedded store is ready when a list of PillarAgents succeeds (its
 * index) and store_health finds nothing wrong (its directory readable and writable, its lock
 * held).  A thread of its own makes that list at start
 * (in ctl_readiness_start, so that the answer is right from the first call) and then every
 * interval_ms; a reader loads the last answer and its time: ready when the last check
 * succeeded and finished at most stale_ms ago (a check that hangs — an API server that accepts
 * but never answers — turns the answer to not ready once stale_ms have passed since the last
 * success).  A reader makes no store call and no system call: Probe never touches a file or
 * the network and never blocks.
 */
#ifndef PILLAR_ROLES_CONTROLLER_READINESS_H
#define PILLAR_ROLES_CONTROLLER_READINESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "kube/client.h"
#include "store/store.h"

#define CTL_READINESS_CHECK_MS 10000 /* csi.md §1.1: checked every 10 s */
#define CTL_READINESS_STALE_MS 30000 /* ... and succeeded within 30 s */

struct ctl_readiness {
	store *st;              /* borrowed; const after start */
	struct kube_client *kc; /* borrowed: the API server's client; NULL on the embedded store */
	uint64_t interval_ms;   /* 0: CTL_READINESS_CHECK_MS */
	uint64_t stale_ms;      /* 0: CTL_READINESS_STALE_MS */
	/* CLOCK_MONOTONIC ms when the last successful check finished, 0 when the last check
	 * failed (or none has succeeded) */
	atomic_uint_least64_t ok_at;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* stop */
	bool stop, running;
	pthread_t thread;
};

/* Checks once, then starts the thread that re-checks.  r's st, kc, interval_ms and stale_ms are set
 * by the caller (the rest zeroed).  0 or a negative errno with e. */
int ctl_readiness_start(struct ctl_readiness *r, struct err *e);
/* The last answer (see above); callable from any thread. */
bool ctl_readiness_ready(struct ctl_readiness *r);
/* Stops and joins the thread (waiting for a check in progress).  A never started r (zeroed) is
 * a no-op. */
void ctl_readiness_stop(struct ctl_readiness *r);

/* One check: true when a list of PillarAgents on st succeeds and store_health finds nothing
 * wrong (the embedded store answers the list from memory: its directory and lock are checked
 * apart); false with the reason in e (optional). */
bool ctl_readiness_check(store *st, struct err *e);

#endif
