/* agent/metrics — the agent's families on /metrics (docs/metrics.md): exports, allowed hosts,
 * the export gate and per-pool capacity read at scrape time, and the ReconcileState duration
 * observed by the handler.  The backend command durations live in src/backend. */
#ifndef PILLAR_ROLES_AGENT_METRICS_H
#define PILLAR_ROLES_AGENT_METRICS_H

#include <stdbool.h>

#include "agent/service.h"
#include "metrics/metrics.h"

/* Registers the agent's families and a collector reading a (metrics_unregister_collector with
 * agent_metrics_collect, a before a is freed). */
void agent_metrics_register(agent_service *a);
void agent_metrics_collect(struct metrics_text *t, void *a);

/* One ReconcileState batch took seconds (complete: the request's complete flag). */
void agent_metrics_reconcile(bool complete, double seconds);

#endif
