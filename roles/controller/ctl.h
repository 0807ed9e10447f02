/* ctl — the controller core shared by the CSI handlers and the reconcilers: the object store,
 * the agent client and the in-process per-volume locks (csi.md §4: a second call for the same
 * volume waits for the first: keylock_wait on locks, keyed by PillarVolumeState name).
 *
 * The other shared pieces have headers of their own: controller/pvst.h (PillarVolumeState
 * lookup and the conditional status update), controller/agents.h (a volume's agent: address,
 * enums, errors), model/model.h (objects, conditions, quantities), rules/ (volume IDs, keys).
 * Handler-style functions return a gRPC code (0 = OK) and fill a struct grpc_status.
 */
#ifndef PILLAR_ROLES_CONTROLLER_CTL_H
#define PILLAR_ROLES_CONTROLLER_CTL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/keylock.h"
#include "controller/agentclient.h"
#include "grpc/status.h"
#include "rules/keys.h"
#include "rules/volid.h"
#include "store/store.h"

struct kube_events;

struct kube_client;
struct batch_memo;
struct agent_tally;
struct ctl_metrics_volumes;
struct dhchap_record;
struct ctl_readiness;

struct ctl {
	store *st;
	/* The API client when the store is the API server (NULL for the embedded store): writes
	 * the store interface does not carry, e.g. the Node label's merge patch.  Not owned. */
	struct kube_client *kc;
	/* The Event recorder of the reconcilers (leader.c; NULL: none, e.g. the embedded store). */
	struct kube_events *rec;
	agentclient *ac;
	int agent_default_port;
	/* DH-HMAC-CHAP keys (controller/dhchap.h): the namespace of the workers' Secrets, and
	 * whether keys may go to an agent reached without mTLS (--dhchap-allow-plaintext). */
	const char *dhchap_ns;
	bool dhchap_enabled; /* --dhchap: without it no Secret is ever read */
	bool dhchap_plaintext;
	/* Which generation of each node's keys each agent holds, from the last requests
	 * (dhchap_record), under memo_mu. */
	struct dhchap_record *dh_records;
	size_t n_dh_records;
	struct keylock locks; /* per PillarVolumeState name: a second call waits (csi.md §4) */
	/* Called (when set) with an agent name when an agent RPC failed with the
	 * `export restore pending` prefix, so the agent's restore runs at once. */
	void (*restore_kick)(void *arg, const char *agent);
	void *restore_kick_arg;
	/* Bumped whenever an agent's liveness or restore gate changed (the loop's kick): a resync
	 * recording a failure stops, so that it never holds up the restore that follows. */
	atomic_uint agents_epoch;
	/* The last PillarAgent status version this controller wrote, per agent (ctl_own_*). */
	pthread_mutex_t own_mu;
	pthread_cond_t own_cv;
	struct ctl_own *own;
	/* Exports this controller's CreateVolume established (ctl_export_*), under own_mu. */
	struct ctl_own *est;
	size_t n_est;
	/* The items of each agent's last whole-agent export pass (reconcile_batch.h). */
	pthread_mutex_t memo_mu;
	struct batch_memo *memos;
	/* The PillarVolumeStates the last whole-agent pass could not read (reconcile_batch.h:
	 * reconcile_batch_unreadable), NULL when none; under memo_mu. */
	char *unreadable;
	/* Each agent's volumes as its last status count saw them (agent_counts.c), under
	 * memo_mu. */
	struct agent_tally *tallies;
	/* The volumes as the last /metrics scrape saw them (metrics.c), under memo_mu. */
	struct ctl_metrics_volumes *metrics_volumes;
	/* The store's readiness as its own thread last checked it (controller/readiness.h), set
	 * by the controller after it started; NULL: ctl_store_ready asks the store.  Not owned. */
	struct ctl_readiness *readiness;
};

void ctl_init(struct ctl *c, store *st, agentclient *ac);
void ctl_fini(struct ctl *c);

/* The PillarAgent status writes of this controller (its agent reconcile): ctl_own_begin before
 * writing name's status, ctl_own_end after (rv: the version written, 0 when nothing was).
 * ctl_own_event is true for the watch event of exactly the last version written — it carries
 * nothing but the controller's own write, so the loop need not run the agent's pass again for
 * it (a file pool's free space changes between any two passes: each pass would write, and each
 * write queue the next).  An event that arrives while a write of name is in flight waits for
 * it (at most 2 s).  Out of memory: not recorded (the event then re-queues the pass). */
void ctl_own_begin(struct ctl *c, const char *name);
void ctl_own_end(struct ctl *c, const char *name, uint64_t rv);
bool ctl_own_event(struct ctl *c, const char *name, uint64_t rv);

/* The exports this controller's CreateVolume established itself: the agent's ExportVolume
 * succeeded and its result, with ExportReconciled True/Reconciled, was recorded at version rv.
 * The per-volume resync that the recorded exportSpec queues (agent-api.md §12.3) would send
 * the agent what it has just done; ctl_export_take tells it so: true, when the volume as read
 * under its lock is still at version rv (`seen`; versions are compared for equality only, as
 * resourceVersions must be: a cache that has not caught up sends the resync).  take forgets the
 * record either way, as does ctl_export_forget (the volume is gone).  At most CTL_EST_MAX are
 * kept (a replica whose loop does not run: the oldest go, and their resync is sent). */
#define CTL_EST_MAX 1024
void ctl_export_established(struct ctl *c, const char *volume, uint64_t rv);
bool ctl_export_take(struct ctl *c, const char *volume, uint64_t seen);
void ctl_export_forget(struct ctl *c, const char *volume);

/* true when the store answers (a list of PillarAgents succeeds): readiness (csi.md §1.1).
 * With c->readiness set, its last answer (no store call, no system call, never blocks); else
 * one list now. */
bool ctl_store_ready(struct ctl *c);

/* The gRPC code of a failed store call r (a negative errno): RESOURCE_EXHAUSTED when the
 * store's file system or quota is full or memory ran out (grpc_code_from_errno: -ENOSPC,
 * -EDQUOT, -ENOMEM; the embedded store's message names the file), else UNAVAILABLE: the
 * store may answer again. */
int ctl_store_code(int r);

#endif
