/* node/metrics — the node plugin's families on /metrics (docs/metrics.md): staged volumes and,
 * per staged volume (label volume_id only, bounded by the volumes staged on this worker), the
 * NVMe path as node/health.h sees it, read at scrape time; and the connects of NodeStageVolume
 * as they happen. */
#ifndef PILLAR_ROLES_NODE_METRICS_H
#define PILLAR_ROLES_NODE_METRICS_H

#include <stdbool.h>

#include "metrics/metrics.h"

struct node;

/* Registers the node's families and a collector reading n (metrics_unregister_collector with
 * node_metrics_collect, n before n is freed). */
void node_metrics_register(struct node *n);
void node_metrics_collect(struct metrics_text *t, void *n);

/* A connect (attach and wait for the namespace) ended after seconds. */
void node_metrics_connect(bool ok, double seconds);

#endif
