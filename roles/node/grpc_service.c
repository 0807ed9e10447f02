#include "node/grpc_service.h"

#include "glue.h"

#define UNARY(fn, Req, Resp, ...) \
	GLUE_UNARY(h_##fn, node_##fn, struct node, Csi__V1__##Req, Csi__V1__##Resp, __VA_ARGS__)
#define M(name, fn, req, resp) \
	GLUE_METHOD(name, h_##fn, csi__v1__##req##__descriptor, csi__v1__##resp##__descriptor)

GLUE_CSI_IDENTITY(node_, struct node);
UNARY(stage_volume, NodeStageVolumeRequest, NodeStageVolumeResponse,
      CSI__V1__NODE_STAGE_VOLUME_RESPONSE__INIT)
UNARY(unstage_volume, NodeUnstageVolumeRequest, NodeUnstageVolumeResponse,
      CSI__V1__NODE_UNSTAGE_VOLUME_RESPONSE__INIT)
UNARY(publish_volume, NodePublishVolumeRequest, NodePublishVolumeResponse,
      CSI__V1__NODE_PUBLISH_VOLUME_RESPONSE__INIT)
UNARY(unpublish_volume, NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse,
      CSI__V1__NODE_UNPUBLISH_VOLUME_RESPONSE__INIT)
UNARY(get_volume_stats, NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse,
      CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT)
UNARY(expand_volume, NodeExpandVolumeRequest, NodeExpandVolumeResponse,
      CSI__V1__NODE_EXPAND_VOLUME_RESPONSE__INIT)
UNARY(get_capabilities, NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse,
      CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT)
UNARY(get_info, NodeGetInfoRequest, NodeGetInfoResponse, CSI__V1__NODE_GET_INFO_RESPONSE__INIT)

static const struct grpc_method node_methods[] = {
    M("NodeStageVolume", stage_volume, node_stage_volume_request, node_stage_volume_response),
    M("NodeUnstageVolume", unstage_volume, node_unstage_volume_request,
      node_unstage_volume_response),
    M("NodePublishVolume", publish_volume, node_publish_volume_request,
      node_publish_volume_response),
    M("NodeUnpublishVolume", unpublish_volume, node_unpublish_volume_request,
      node_unpublish_volume_response),
    M("NodeGetVolumeStats", get_volume_stats, node_get_volume_stats_request,
      node_get_volume_stats_response),
    M("NodeExpandVolume", expand_volume, node_expand_volume_request, node_expand_volume_response),
    M("NodeGetCapabilities", get_capabilities, node_get_capabilities_request,
      node_get_capabilities_response),
    M("NodeGetInfo", get_info, node_get_info_request, node_get_info_response),
};

/* Handlers that touch no file and wait for nothing (Probe reads node/readiness' flag): they run
 * on the thread that read the request (grpc/server.h). */
static const char *const identity_nonblocking[] = {"GetPluginInfo", "GetPluginCapabilities",
                                                   "Probe", NULL};
static const char *const node_nonblocking[] = {"NodeGetCapabilities", NULL};

void node_grpc_identity_service(struct node *n, struct grpc_service *out)
{
	*out = GLUE_SERVICE("csi.v1.Identity", glue_identity_methods, n);
	out->nonblocking = identity_nonblocking;
}

void node_grpc_node_service(struct node *n, struct grpc_service *out)
{
	*out = GLUE_SERVICE("csi.v1.Node", node_methods, n);
	out->nonblocking = node_nonblocking;
}
