/* loop — the driver of the controller's reconcilers.
 *
 * controller_loop_start opens a watch on every kind the reconcilers read (PillarAgent,
 * PillarStore, PillarProtocol, PillarStorageClass, PillarVolumeState, StorageClass, Node,
 * PersistentVolumeClaim, PersistentVolume), each on its own thread: list, then watch from the
 * list's resourceVersion, relisting on STORE_EXPIRED.  Events become keys of a de-duplicating
 * work queue ("PillarAgent/<name>", ...; dependents are queued too, e.g. the PillarStores of an
 * agent whose status changed).  A PillarVolumeState whose status.exportSpec or
 * status.publishedNodes changed gets a one-item resync (agent-api.md §12.3).  Worker threads run
 * the reconcilers (reconcile.h) with client-go's rate limiting after failures and conflicts
 * (per-key exponential backoff and an overall token bucket).  agentmon.h probes every agent
 * with a resolved address (an unreachable one every 100 ms) and queues it, ahead of every other
 * key, when its liveness or restore gate changed, so a restart is noticed within a second.  A
 * timer queues every object each interval (PILLAR_RECONCILE_INTERVAL, default 30s) and the
 * per-agent periodic export resyncs, spread over the interval (agent i of n at i/n of it), and
 * a capacity refresh of each PillarStore each PILLAR_CAPACITY_INTERVAL (default 60s).  The
 * loop also sets ctl.restore_kick, so an agent RPC failing with `export restore pending` runs
 * that agent's restore at once.  controller_loop_stop stops and joins every thread and frees everything.
 *
 * The ctl and its store must outlive the loop.  Functions return 0 or a negative errno with a
 * message in e.
 */
#ifndef PILLAR_ROLES_CONTROLLER_LOOP_H
#define PILLAR_ROLES_CONTROLLER_LOOP_H

#include <stdbool.h>

#include "base/err.h"
#include "controller/ctl.h"
#include "model/model.h"

struct controller_loop_opts {
	int interval_ms; /* periodic resync; 0: PILLAR_RECONCILE_INTERVAL or 30000 */
	int capacity_ms; /* PillarStore capacity refresh; 0: PILLAR_CAPACITY_INTERVAL or 60000 */
	int workers;     /* worker threads, 1 or 2; 0: 2 */
	int backoff_base_ms; /* first retry after a failure; 0: 5 (client-go) */
	int backoff_max_ms;  /* 0: 1000000 (client-go's 1000 s) */
	/* Asked before each reconcile of key ("pa/<name>", ...) when set: false skips it (leader
	 * election: the Lease is no longer held, cluster/lease.h). */
	bool (*may_reconcile)(void *arg, const char *key);
	void *may_reconcile_arg;
	/* Called (when set) with every object a watch delivers, on the watch's thread. */
	void (*observe)(void *arg, const struct model_kind *k, enum store_event_type type,
	                const void *obj);
	void *observe_arg;
};

struct controller_loop;

int controller_loop_start(struct ctl *c, const struct controller_loop_opts *o,
                          struct controller_loop **out, struct err *e);
/* Stops the watches, the timer and the workers (a running reconcile finishes first), clears
 * ctl.restore_kick and frees the loop.  NULL is a no-op. */
void controller_loop_stop(struct controller_loop *l);

/* Parses a duration such as "30s", "1m30s", "500ms", "2h" (Go's time.Duration form without
 * fractions; a bare number is seconds) into milliseconds.  0 or -EINVAL. */
int controller_duration_parse(const char *s, int *ms);

/* Number of reconciles run so far (for tests and metrics). */
unsigned long controller_loop_passes(struct controller_loop *l);
/* Milliseconds from the loop's start to the end of its first reconcile pass — every watched
 * kind listed once and every key those lists queued (and the reconciles they ran queued at
 * once, not after a delay) reconciled — or -1 while it runs.  Its end is logged once: "first
 * reconcile pass done" with its seconds. */
long controller_loop_first_pass_ms(struct controller_loop *l);

#endif
