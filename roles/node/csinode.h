/* node/csinode — in a cluster, the worker's host identity on the CSINode kubelet creates
 * (csi.md §6.1 steps 4–5, §10.3; deploy.md §10: the node may get/list/watch/patch/update
 * CSINodes, create/patch Events and get Nodes — it never creates a CSINode).
 *
 * node_csinode_publish (a node_publish_identity_fn with ctx = struct node_csinode *) returns at
 * once; a thread merge-patches metadata.annotations pillar-csi.bhyoo.com/nvmeof-host-nqn and
 * pillar-csi.bhyoo.com/nvmeof-host-id of CSINode <node>.  kubelet creates the CSINode only
 * after the registrar has registered the plugin, which needs the plugin serving, so a failed
 * patch (NotFound) is retried 10 times 3 s apart and then every 30 s until it succeeds; the node
 * serves meanwhile.  After the patch the CSINodes are listed (node_identity_check_duplicates):
 * another node with the same host NQN or host ID is logged and recorded as a Warning Event
 * `DuplicateHostNQN` on this worker's Node with csi.md's message.
 *
 * Functions return 0 or a negative errno with a message in e.
 */
#ifndef PILLAR_ROLES_NODE_CSINODE_H
#define PILLAR_ROLES_NODE_CSINODE_H

#include "base/err.h"
#include "cluster/events.h"
#include "kube/client.h"
#include "nvme/host.h"
#include "store/store.h"

#define NODE_CSINODE_ATTEMPTS    10
#define NODE_CSINODE_INTERVAL_MS 3000
#define NODE_CSINODE_SLOW_MS     30000

struct node_csinode_opts {
	struct kube_client *kc;  /* the PATCH */
	store *st;               /* reads: the CSINode list, the Node (its uid for the Event) */
	struct kube_events *rec; /* the DuplicateHostNQN Event (NULL: logged only) */
	int attempts, interval_ms, slow_ms; /* 0: the values above */
};

struct node_csinode;

/* Everything in o must outlive it. */
int node_csinode_new(struct node_csinode **out, const struct node_csinode_opts *o, struct err *e);
/* A node_publish_identity_fn: starts the publishing thread (once). */
int node_csinode_publish(void *ctx, const char *node_id, const struct nvme_host_identity *id,
                         struct err *e);
/* A node_health_report_fn with ctx = struct node_csinode *: merge-patches the annotation
 * pillar-csi.bhyoo.com/nvmeof-lost-volumes of CSINode node_id (a failure is logged; the next
 * change reports the whole set again). */
void node_csinode_report_lost(void *ctx, const char *node_id, const char *lost_json);
/* Stops the thread.  NULL is a no-op. */
void node_csinode_free(struct node_csinode *c);

#endif
