/* reconcile — the controller's reconcilers as plain functions over the store and the agent
 * client (crds.md §3.5, agent-api.md §12.2–§12.4), plus a small work queue with backoff that a
 * driver feeds from store watches and a periodic resync.
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

#define RECONCILE_INTERVAL_MS      30000
#define RECONCILE_RESTORE_RETRY_MS 5000
#define AGENT_FINALIZER            "pillar-csi.bhyoo.com/pillar-agent-protection"

int reconcile_agent(struct ctl *c, const char *name, int *requeue_ms, struct err *e);

/* The full restore of agent-api.md §12.2 for one agent at addr.  Returns the gRPC code of the
 * ReconcileState RPC (0 = OK) with its message in gs; volumes get ExportReconciled. */
int reconcile_agent_restore(struct ctl *c, const char *agent, const char *addr,
                            struct grpc_status *gs);

/* ---- work queue -------------------------------------------------------------------------------- */

typedef struct workqueue workqueue;

/* 0 or -ENOMEM.  Backoff after failures: base_ms doubling up to max_ms. */
int workqueue_new(int base_ms, int max_ms, workqueue **out);
void workqueue_free(workqueue *q); /* NULL is a no-op */
/* Adds key, due after delay_ms; a key already queued keeps the earlier due time. */
void workqueue_add(workqueue *q, const char *key, int delay_ms);
/* Waits up to timeout_ms for a due key; 1 with key copied (cap bytes), 0 on timeout, -ESHUTDOWN
 * after workqueue_shutdown.  A key handed out is not handed out again until workqueue_done. */
int workqueue_get(workqueue *q, int timeout_ms, char *key, size_t cap);
/* Finishes key: ok resets its backoff; !ok requeues it after its next backoff delay.
 * Returns the delay used (0 when ok). */
int workqueue_done(workqueue *q, const char *key, bool ok);
void workqueue_shutdown(workqueue *q);
size_t workqueue_len(workqueue *q);

#endif
