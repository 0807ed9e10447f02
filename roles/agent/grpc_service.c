#include "agent/grpc_service.h"

#include "glue.h"

#define UNARY(fn, Req, Resp, ...)                                                  \
	GLUE_UNARY(h_##fn, agent_##fn, agent_service, PillarCsi__Agent__V1__##Req, \
	           PillarCsi__Agent__V1__##Resp, __VA_ARGS__)

#define P(x) PILLAR_CSI__AGENT__V1__##x
UNARY(get_capabilities, GetCapabilitiesRequest, GetCapabilitiesResponse,
      P(GET_CAPABILITIES_RESPONSE__INIT))
UNARY(get_capacity, GetCapacityRequest, GetCapacityResponse, P(GET_CAPACITY_RESPONSE__INIT))
UNARY(list_volumes, ListVolumesRequest, ListVolumesResponse, P(LIST_VOLUMES_RESPONSE__INIT))
UNARY(list_exports, ListExportsRequest, ListExportsResponse, P(LIST_EXPORTS_RESPONSE__INIT))
UNARY(health_check, HealthCheckRequest, HealthCheckResponse, P(HEALTH_CHECK_RESPONSE__INIT))
UNARY(create_volume, CreateVolumeRequest, CreateVolumeResponse, P(CREATE_VOLUME_RESPONSE__INIT))
UNARY(delete_volume, DeleteVolumeRequest, DeleteVolumeResponse, P(DELETE_VOLUME_RESPONSE__INIT))
UNARY(expand_volume, ExpandVolumeRequest, ExpandVolumeResponse, P(EXPAND_VOLUME_RESPONSE__INIT))
UNARY(export_volume, ExportVolumeRequest, ExportVolumeResponse, P(EXPORT_VOLUME_RESPONSE__INIT))
UNARY(unexport_volume, UnexportVolumeRequest, UnexportVolumeResponse,
      P(UNEXPORT_VOLUME_RESPONSE__INIT))
UNARY(allow_initiator, AllowInitiatorRequest, AllowInitiatorResponse,
      P(ALLOW_INITIATOR_RESPONSE__INIT))
UNARY(deny_initiator, DenyInitiatorRequest, DenyInitiatorResponse, P(DENY_INITIATOR_RESPONSE__INIT))
UNARY(reconcile_state, ReconcileStateRequest, ReconcileStateResponse,
      P(RECONCILE_STATE_RESPONSE__INIT))
UNARY(drain, DrainRequest, DrainResponse, P(DRAIN_RESPONSE__INIT))
UNARY(create_snapshot, CreateSnapshotRequest, CreateSnapshotResponse,
      P(CREATE_SNAPSHOT_RESPONSE__INIT))
UNARY(delete_snapshot, DeleteSnapshotRequest, DeleteSnapshotResponse,
      P(DELETE_SNAPSHOT_RESPONSE__INIT))
UNARY(list_snapshots, ListSnapshotsRequest, ListSnapshotsResponse, P(LIST_SNAPSHOTS_RESPONSE__INIT))

static int h_send_volume(struct grpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	struct grpc_status st = {0};
	int code = agent_unimplemented("SendVolume", &st);
	(void)req;
	(void)ctx;
	grpc_call_set_status_msg(call, "%s", st.msg);
	return code;
}

#define M(name, fn, Req, Resp)                                                \
	GLUE_METHOD(name, h_##fn, pillar_csi__agent__v1__##Req##__descriptor, \
	            pillar_csi__agent__v1__##Resp##__descriptor)

static const struct grpc_method methods[] = {
    M("GetCapabilities", get_capabilities, get_capabilities_request, get_capabilities_response),
    M("GetCapacity", get_capacity, get_capacity_request, get_capacity_response),
    M("ListVolumes", list_volumes, list_volumes_request, list_volumes_response),
    M("ListExports", list_exports, list_exports_request, list_exports_response),
    M("HealthCheck", health_check, health_check_request, health_check_response),
    M("CreateVolume", create_volume, create_volume_request, create_volume_response),
    M("DeleteVolume", delete_volume, delete_volume_request, delete_volume_response),
    M("ExpandVolume", expand_volume, expand_volume_request, expand_volume_response),
    M("ExportVolume", export_volume, export_volume_request, export_volume_response),
    M("UnexportVolume", unexport_volume, unexport_volume_request, unexport_volume_response),
    M("AllowInitiator", allow_initiator, allow_initiator_request, allow_initiator_response),
    M("DenyInitiator", deny_initiator, deny_initiator_request, deny_initiator_response),
    M("ReconcileState", reconcile_state, reconcile_state_request, reconcile_state_response),
    M("Drain", drain, drain_request, drain_response),
    M("CreateSnapshot", create_snapshot, create_snapshot_request, create_snapshot_response),
    M("DeleteSnapshot", delete_snapshot, delete_snapshot_request, delete_snapshot_response),
    M("ListSnapshots", list_snapshots, list_snapshots_request, list_snapshots_response),
    {"SendVolume", NULL, h_send_volume, &pillar_csi__agent__v1__send_volume_request__descriptor,
     &pillar_csi__agent__v1__send_volume_chunk__descriptor, NULL},
};

void agent_grpc_service(agent_service *a, struct grpc_service *out)
{
	out->name = AGENT_SERVICE_NAME;
	out->methods = methods;
	out->n_methods = sizeof(methods) / sizeof(methods[0]);
	out->ctx = a;
}
