/* node/publish — the worker's host identity published through the object store
 * (csi.md §6.1 step 4, §10.3; standalone.md): the CSINode named after the node carries the
 * annotations pillar-csi.bhyoo.com/nvmeof-host-nqn and pillar-csi.bhyoo.com/nvmeof-host-id, as
 * the node plugin patches its CSINode in a cluster.  Then every other CSINode is checked for the
 * same host NQN or host ID. */
#ifndef PILLAR_ROLES_NODE_PUBLISH_H
#define PILLAR_ROLES_NODE_PUBLISH_H

#include "base/err.h"
#include "nvme/host.h"
#include "rules/keys.h"
#include "store/store.h"

/* A node_publish_identity_fn with ctx = store *.  Creates or updates the CSINode (retrying on
 * Conflict), then looks for duplicates: returns -ENOTUNIQ with the spec's message
 * `host NQN "<nqn>" is also used by node "<other>"; give every worker a unique
 * /etc/nvme/hostnqn and /etc/nvme/hostid` when another CSINode carries the same NQN or ID. */
int node_publish_identity_store(void *ctx, const char *node_id, const struct nvme_host_identity *id,
                                struct err *e);
/* The duplicate check alone (csi.md §10.3): lists the CSINodes of s; 0, -ENOTUNIQ with the
 * message above (also logged), or the store's error. */
int node_identity_check_duplicates(store *s, const char *node_id,
                                   const struct nvme_host_identity *id, struct err *e);

/* A node_health_report_fn with ctx = store *: the lost volumes into the annotation
 * pillar-csi.bhyoo.com/nvmeof-lost-volumes of CSINode node_id (retrying on Conflict; a missing
 * CSINode or a failure is logged). */
void node_report_lost_store(void *ctx, const char *node_id, const char *lost_json);

#endif
