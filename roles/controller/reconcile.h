/* reconcile — the controller's reconcilers as plain functions over the store and the agent
 * client (crds.md §3–§6, §14; agent-api.md §12.2–§12.4), plus a small work queue with backoff
 * that the driver (loop.h) feeds from store watches and a periodic resync.  Every reconciler
 * writes status only when it changed (no timestamp churn) and returns 0, or a negative errno
 * for a store failure (message in e) after which the caller retries with backoff.
 *
 * reconcile_agent(c, name, &requeue_ms) runs one pass for a PillarAgent: finalizer, address,
 * HealthCheck, GetCapabilities, the full restore when the agent reports
 * export_restore_pending (one ReconcileState{complete=true} with every export of the agent),
 * ExportsReady/Ready, deletion (DeletionBlocked).  Status is written only when it changed.
 * Returns 0, or a negative errno for a store failure (message in e); *requeue_ms is when the
 * agent wants to be looked at again (5 s after a failed restore, else the interval).
 */
#ifndef PILLAR_ROLES_CONTROLLER_RECONCILE_H
#define PILLAR_ROLES_CONTROLLER_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/ctl.h"
#include "model/pillar.h"

#define RECONCILE_INTERVAL_MS      30000
#define RECONCILE_RESTORE_RETRY_MS 5000
#define CAPACITY_REFRESH_MS        60000

int reconcile_agent(struct ctl *c, const char *name, int *requeue_ms, struct err *e);

/* The PillarAgent's status counts (volumes, publishedVolumes, connectedHosts,
 * outageBudgetSeconds: model/outage.h) from the volumes labeled with its name, set in pa's
 * status for the pass's one status write.  A volume whose resourceVersion the agent's last
 * count saw is not read again (ctl.tallies).  0, or a store error / -ENOMEM with e (the counts
 * are then left as they were). */
int reconcile_agent_counts(struct ctl *c, struct model_pa *pa, struct err *e);
struct agent_tally;
void reconcile_agent_tallies_free(struct agent_tally *t);
/* What a list of every volume decoded, kept for reconcile_agent_counts: each volume given to
 * reconcile_agent_counts_seed_add becomes the entry the count of the agent its label names
 * would make of it, and reconcile_agent_counts_seeded keeps them as that count's previous pass
 * for each agent no count has kept one for yet, so that an agent's first count after a start
 * decodes none of its volumes listed at the version seen here (then empties s).  Out of memory
 * keeps nothing (the counts decode). */
struct seed_agent;
struct agent_counts_seed {
	struct seed_agent *agents, *last;
	int err;
};
void reconcile_agent_counts_seed_add(struct agent_counts_seed *s, const struct model_pvst *v);
void reconcile_agent_counts_seeded(struct ctl *c, struct agent_counts_seed *s);

/* Called once the ReconcileState RPC has returned (code, message), before any volume's outcome
 * is recorded: the restore records the PillarAgent's ExportsReady there, so that it does not wait
 * for the volume writes. */
struct reconcile_sent {
	void (*fn)(void *arg, int code, const struct grpc_status *st);
	void *arg;
};

/* The full restore of agent-api.md §12.2 for one agent at addr.  Returns the gRPC code of the
 * ReconcileState RPC (0 = OK) with its message in gs; volumes get ExportReconciled.  sent may be
 * NULL. */
int reconcile_agent_restore(struct ctl *c, const char *agent, const char *addr,
                            const struct reconcile_sent *sent, struct grpc_status *gs);

/* One ReconcileState for the volumes of `agent` (label pillar-csi.bhyoo.com/agent), or only for
 * PillarVolumeState `only`; volumes deleting or in phase Provisioning are skipped, volumes
 * without exportSpec get ExportSpecMissing and are left out; every sent volume gets
 * ExportReconciled from its result (agent-api.md §12.4).  complete=false with no eligible volume
 * sends nothing.  addr NULL: nothing is sent (the RPC's code is UNAVAILABLE with the message
 * of *noaddr).  An RPC that fails UNAVAILABLE or past its deadline (AgentUnavailable) writes
 * nothing on the volumes: readers derive that from the PillarAgent (model/outage.h), so an
 * outage costs no write per volume.  The other outcomes are written only where they changed; a failed
 * resync (complete=false) stops recording when ctl.agents_epoch moves.  Returns the RPC's gRPC
 * code (message in gs).  sent may be NULL. */
int reconcile_exports(struct ctl *c, const char *agent, const char *addr, const char *only,
                      bool complete, const struct grpc_status *noaddr,
                      const struct reconcile_sent *sent, struct grpc_status *gs);
/* The per-volume resync (agent-api.md §12.3): a one-item ReconcileState{complete=false} for
 * PillarVolumeState `name` (change-triggered). */
int reconcile_volume(struct ctl *c, const char *name, struct err *e);
/* The periodic pass of §12.3: one ReconcileState{complete=false} with every eligible volume of
 * the agent. */
int reconcile_agent_resync(struct ctl *c, const char *agent, struct err *e);

/* crds.md §7.6: deletes (DeleteVolume sequence) PillarVolumeStates in phase Provisioning or
 * CreatePartial older than ABANDONED_AGE_S at `now` (Unix seconds) whose claimRef.uid names no
 * existing PVC, with no PersistentVolume of the same name and no success-recorded annotation.
 * Volumes without claimRef are never touched.  *deleted counts the deletions.  0 or a negative
 * errno when the volumes cannot be listed. */
#define ABANDONED_AGE_S     600
#define ABANDONED_PERIOD_MS 300000
int reconcile_abandoned(struct ctl *c, long long now, int *deleted, struct err *e);
/* Unfinished creates after a power cut (reconcile_abandoned.c): while the store notes lost lazy
 * writes, every PillarVolumeState in Provisioning or CreatePartial (not deleting) is marked
 * success-recorded, then the note is removed; each unfinished one marked so is provisioned
 * again (its failures logged, tried at the next pass).  reconcile_abandoned runs it first.
 * 0, or a negative errno when the volumes cannot be listed or marked (the note stays). */
int reconcile_unfinished(struct ctl *c, struct err *e);
/* Sets ExportReconciled of a PillarVolumeState (pinned to its UID) when it changed. */
void reconcile_set_export_cond(struct ctl *c, const struct model_pvst *v, const char *reason,
                               const char *msg);

/* PillarStore (crds.md §5.2): finalizer, AgentReady, PoolDiscovered, BackendSupported, Ready,
 * capacity from GetCapacity (when refresh_capacity, or when none is recorded yet, while
 * PoolDiscovered is True), deletion (§14). */
int reconcile_store(struct ctl *c, const char *name, bool refresh_capacity, struct err *e);
/* PillarProtocol (crds.md §4.2): storageClassCount, activeAgents, Ready, deletion. */
int reconcile_protocol(struct ctl *c, const char *name, struct err *e);
/* PillarStorageClass (crds.md §6.2, §6.3): conditions, the generated StorageClass with its
 * update rules and carry-over annotation, deletion. */
int reconcile_psc(struct ctl *c, const char *name, struct err *e);

/* ---- shared helpers (reconcile_common.c) -------------------------------------------------------- */

#define RECONCILE_DEPS_MAX_NAMES 10
/* "Deletion blocked: <Kind> "a", "b" and <n> more; <n> volumes (v1, v2)" (crds.md §14). */
struct reconcile_deps {
	char msg[1024];
	size_t o;
};
void reconcile_deps_objects(struct reconcile_deps *d, const char *kind,
                            const struct model_strs *names);
void reconcile_deps_volumes(struct reconcile_deps *d, const struct model_strs *names);

/* Adds or removes a finalizer of obj (a struct of kind k) with an update; on success obj
 * becomes the stored object.  0 or negative errno. */
int reconcile_finalizer(struct ctl *c, const struct model_kind *k, void *obj, const char *fin,
                        bool present, struct err *e);
/* Names of the objects that refer to value (PillarStorageClasses by spec.storeRef /
 * spec.protocolRef, PillarStores by spec.agentRef), or that carry label=value.  Empty when the
 * store fails.  0 or -ENOMEM. */
enum reconcile_ref { REF_PSC_STORE, REF_PSC_PROTOCOL, REF_PST_AGENT };
int reconcile_names_where(struct ctl *c, enum reconcile_ref ref, const char *value,
                          struct model_strs *out);
int reconcile_names_labeled(struct ctl *c, const struct model_kind *k, const char *label,
                            const char *value, struct model_strs *out);
/* A store_unreadable receiver (arg: a struct model_strs) for a list of dependents: an object the
 * list could not read may be one, so its name ("<ns>/<name>" when namespaced) is added and the
 * deletion waits for its repair rather than guess.  Both functions above use it. */
void reconcile_unreadable_dependent(void *arg, const struct store_kind *k, const char *ns,
                                    const char *name, const char *error);
/* update_status of obj unless its status is still the one of `before` (model_encode_text of
 * obj taken before the changes); obj's resourceVersion follows the write.  0 or negative
 * errno. */
int reconcile_write_status(struct ctl *c, const struct model_kind *k, void *obj, const char *before,
                           struct err *e);
/* Ready: False/DeletionBlocked with message `blocked` when set; else True/ok_reason when every
 * condition of types (NULL-terminated) is True; else the first non-True one's reason/message.
 * 0 or -ENOMEM. */
int reconcile_ready(struct model_conds *conds, const char *const *types, const char *ok_reason,
                    const char *blocked, int64_t og);

/* ---- work queue -------------------------------------------------------------------------------- */

/* client-go's workqueue with DefaultControllerRateLimiter: a key queued twice runs once; a key
 * added while it runs runs once more after workqueue_done; a failed or rate-limited key waits the
 * larger of its own exponential backoff (base_ms doubling per failure up to max_ms; the loop's
 * default 5 ms .. 1000 s) and the overall token bucket's delay (WORKQUEUE_QPS refilled per
 * second, WORKQUEUE_BURST deep), which bounds every retry path together.  Keys with nothing
 * pending are forgotten, so memory follows the keys in flight. */
#define WORKQUEUE_QPS   10
#define WORKQUEUE_BURST 100

typedef struct workqueue workqueue;

/* 0 or -ENOMEM. */
int workqueue_new(int base_ms, int max_ms, workqueue **out);
void workqueue_free(workqueue *q); /* NULL is a no-op */
/* Counts q in client-go's workqueue_* families under the label name="<name>" (a static
 * string); at most 8 queues at a time.  Call once, before the queue is used. */
void workqueue_metrics(workqueue *q, const char *name);
/* Adds key, due after delay_ms (client-go Add / AddAfter, not rate limited); a key already
 * queued keeps the earlier due time. */
void workqueue_add(workqueue *q, const char *key, int delay_ms);
/* Adds key ready to run ahead of every key already queued (moved to the head when queued; when
 * running, it runs again after workqueue_done, also ahead): for work that must not wait behind
 * a periodic pass, an agent back from a reboot.  Not rate limited. */
void workqueue_add_first(workqueue *q, const char *key);
/* client-go AddRateLimited: adds key after the rate limiter's delay, which it returns. */
int workqueue_add_rate_limited(workqueue *q, const char *key);
/* Waits up to timeout_ms for a due key; 1 with key copied (cap bytes), 0 on timeout, -ESHUTDOWN
 * after workqueue_shutdown.  A key handed out is not handed out again until workqueue_done. */
int workqueue_get(workqueue *q, int timeout_ms, char *key, size_t cap);
/* Finishes key: ok forgets its backoff; !ok requeues it rate limited.  Returns the delay used
 * (0 when ok). */
int workqueue_done(workqueue *q, const char *key, bool ok);
void workqueue_shutdown(workqueue *q);
/* Keys queued or waiting. */
size_t workqueue_len(workqueue *q);
/* No key ready to run and none running (keys waiting for their delay do not count). */
bool workqueue_idle(workqueue *q);

#endif
