/* node/service — the CSI Identity and Node services as plain functions over protobuf-c types.
 *
 * Transport-independent: the gRPC layer unpacks a request, calls the handler with a response
 * initialised by its __INIT macro, and sends either the response (return GRPC_OK) or the status
 * code and st->msg (st must not be NULL).  Members a handler sets in a response are
 * heap-allocated (strdup/malloc, including sub-messages and arrays), so a response that lives
 * on the heap is released with protobuf_c_message_free_unpacked(&resp->base, NULL); node_response_clear() frees the members
 * of one that lives on the stack.  Handlers are thread-safe; operations on one volume are
 * serialised by a per-volume lock that answers ABORTED to a concurrent second call.
 * Blocking kernel work (connect, delete_controller, device waits) happens inside the handler:
 * the transport must call handlers from worker threads (csi.md §10.5).
 */
#ifndef PILLAR_ROLES_NODE_SERVICE_H
#define PILLAR_ROLES_NODE_SERVICE_H

#include <stdbool.h>

#include "base/err.h"
#include "csi.pb-c.h"
#include "grpc/status.h"
#include "node/health.h"
#include "node/sys.h"
#include "nvme/host.h"
#include "nvme/initiator.h"
#include "rules/keys.h"

/* "Publish my host NQN to the cluster" (csi.md §6.1 step 4): the lead wires the store here. */
typedef int (*node_publish_identity_fn)(void *ctx, const char *node_id,
                                        const struct nvme_host_identity *id, struct err *e);

struct node_config {
	const char *node_id;      /* required */
	const char *state_dir;    /* default /var/lib/pillar-csi/node */
	const char *etc_nvme_dir; /* default /etc/nvme */
	const char *sysfs_root;   /* default /sys */
	const char *dev_root;     /* default /dev (also where nvme-fabrics is looked for) */
	const char *proc_root;    /* default /proc */
	const char *kubelet_dir;  /* default /var/lib/kubelet (node/paths.h) */
	const struct nvme_kernel_ops *nvme_ops; /* default nvme_kernel_ops_sys */
	const struct node_sys_ops *sys_ops;     /* default node_sys_ops_real */
	node_publish_identity_fn publish_identity;
	void *publish_ctx;
	node_health_report_fn
	    report_lost; /* the lost volumes (node/health.h); NULL: not reported */
	void *report_ctx;
	int dying_wait_ms, device_wait_ms, delete_wait_ms, size_wait_ms; /* 0: the spec's */
	bool dhchap; /* --dhchap: DH-HMAC-CHAP keys (docs/authentication.md) */
};

struct node;

/* Start-up (csi.md §6.1): checks the kubelet directory (-EINVAL `--kubelet-dir must be an
 * absolute, normalised path other than /: "<dir>"`), ensures the host identity (an invalid existing value is fatal:
 * -EINVAL with the spec's message), checks it for a shared identity (logged; Probe then answers
 * not ready), and sweeps stale stage records.  0 or a negative errno. */
int node_new(const struct node_config *cfg, struct node **out, struct err *e);
void node_free(struct node *n);

/* Calls the publish_identity hook (0 when none is set). */
int node_publish_identity(struct node *n, struct err *e);
/* The identity read at start-up; false from shared when it is unique. */
const struct nvme_host_identity *node_host_identity(const struct node *n, bool *shared);

void node_response_clear(ProtobufCMessage *m);

int node_get_plugin_info(struct node *n, const Csi__V1__GetPluginInfoRequest *req,
                         Csi__V1__GetPluginInfoResponse *resp, struct grpc_status *st);
int node_get_plugin_capabilities(struct node *n, const Csi__V1__GetPluginCapabilitiesRequest *req,
                                 Csi__V1__GetPluginCapabilitiesResponse *resp,
                                 struct grpc_status *st);
int node_probe(struct node *n, const Csi__V1__ProbeRequest *req, Csi__V1__ProbeResponse *resp,
               struct grpc_status *st);
int node_get_info(struct node *n, const Csi__V1__NodeGetInfoRequest *req,
                  Csi__V1__NodeGetInfoResponse *resp, struct grpc_status *st);
int node_get_capabilities(struct node *n, const Csi__V1__NodeGetCapabilitiesRequest *req,
                          Csi__V1__NodeGetCapabilitiesResponse *resp, struct grpc_status *st);
int node_stage_volume(struct node *n, const Csi__V1__NodeStageVolumeRequest *req,
                      Csi__V1__NodeStageVolumeResponse *resp, struct grpc_status *st);
int node_unstage_volume(struct node *n, const Csi__V1__NodeUnstageVolumeRequest *req,
                        Csi__V1__NodeUnstageVolumeResponse *resp, struct grpc_status *st);
int node_publish_volume(struct node *n, const Csi__V1__NodePublishVolumeRequest *req,
                        Csi__V1__NodePublishVolumeResponse *resp, struct grpc_status *st);
int node_unpublish_volume(struct node *n, const Csi__V1__NodeUnpublishVolumeRequest *req,
                          Csi__V1__NodeUnpublishVolumeResponse *resp, struct grpc_status *st);
int node_expand_volume(struct node *n, const Csi__V1__NodeExpandVolumeRequest *req,
                       Csi__V1__NodeExpandVolumeResponse *resp, struct grpc_status *st);
int node_get_volume_stats(struct node *n, const Csi__V1__NodeGetVolumeStatsRequest *req,
                          Csi__V1__NodeGetVolumeStatsResponse *resp, struct grpc_status *st);

#endif
