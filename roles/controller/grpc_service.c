#include "controller/grpc_service.h"

#include "glue.h"

#define UNARY(fn, Req, Resp, ...) \
	GLUE_UNARY(h_##fn, csi_##fn, struct ctl, Csi__V1__##Req, Csi__V1__##Resp, __VA_ARGS__)
#define M(name, fn, req, resp) \
	GLUE_METHOD(name, h_##fn, csi__v1__##req##__descriptor, csi__v1__##resp##__descriptor)

GLUE_CSI_IDENTITY(csi_, struct ctl);
UNARY(controller_capabilities, ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse,
      CSI__V1__CONTROLLER_GET_CAPABILITIES_RESPONSE__INIT)
UNARY(create_volume, CreateVolumeRequest, CreateVolumeResponse,
      CSI__V1__CREATE_VOLUME_RESPONSE__INIT)
UNARY(delete_volume, DeleteVolumeRequest, DeleteVolumeResponse,
      CSI__V1__DELETE_VOLUME_RESPONSE__INIT)
UNARY(controller_publish, ControllerPublishVolumeRequest, ControllerPublishVolumeResponse,
      CSI__V1__CONTROLLER_PUBLISH_VOLUME_RESPONSE__INIT)
UNARY(controller_unpublish, ControllerUnpublishVolumeRequest, ControllerUnpublishVolumeResponse,
      CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_RESPONSE__INIT)
UNARY(controller_expand, ControllerExpandVolumeRequest, ControllerExpandVolumeResponse,
      CSI__V1__CONTROLLER_EXPAND_VOLUME_RESPONSE__INIT)
UNARY(validate_capabilities, ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse,
      CSI__V1__VALIDATE_VOLUME_CAPABILITIES_RESPONSE__INIT)
UNARY(get_capacity, GetCapacityRequest, GetCapacityResponse, CSI__V1__GET_CAPACITY_RESPONSE__INIT)
UNARY(create_snapshot, CreateSnapshotRequest, CreateSnapshotResponse,
      CSI__V1__CREATE_SNAPSHOT_RESPONSE__INIT)
UNARY(delete_snapshot, DeleteSnapshotRequest, DeleteSnapshotResponse,
      CSI__V1__DELETE_SNAPSHOT_RESPONSE__INIT)
UNARY(list_snapshots, ListSnapshotsRequest, ListSnapshotsResponse,
      CSI__V1__LIST_SNAPSHOTS_RESPONSE__INIT)

static const struct grpc_method controller_methods[] = {
    M("CreateVolume", create_volume, create_volume_request, create_volume_response),
    M("DeleteVolume", delete_volume, delete_volume_request, delete_volume_response),
    M("ControllerPublishVolume", controller_publish, controller_publish_volume_request,
      controller_publish_volume_response),
    M("ControllerUnpublishVolume", controller_unpublish, controller_unpublish_volume_request,
      controller_unpublish_volume_response),
    M("ControllerExpandVolume", controller_expand, controller_expand_volume_request,
      controller_expand_volume_response),
    M("ValidateVolumeCapabilities", validate_capabilities, validate_volume_capabilities_request,
      validate_volume_capabilities_response),
    M("GetCapacity", get_capacity, get_capacity_request, get_capacity_response),
    M("ControllerGetCapabilities", controller_capabilities, controller_get_capabilities_request,
      controller_get_capabilities_response),
    M("CreateSnapshot", create_snapshot, create_snapshot_request, create_snapshot_response),
    M("DeleteSnapshot", delete_snapshot, delete_snapshot_request, delete_snapshot_response),
    M("ListSnapshots", list_snapshots, list_snapshots_request, list_snapshots_response),
};

/* Handlers that touch no file and wait for nothing: they run on the thread that read the
 * request (grpc/server.h).  Probe is one when it reads the readiness thread's answer
 * (ctl_store_ready with c->readiness set), not when it would list the store itself. */
static const char *const identity_nonblocking[] = {"GetPluginInfo", "GetPluginCapabilities",
                                                   "Probe", NULL};
static const char *const identity_nonblocking_no_probe[] = {"GetPluginInfo",
                                                            "GetPluginCapabilities", NULL};

void controller_grpc_identity_service(struct ctl *c, struct grpc_service *out)
{
	*out = GLUE_SERVICE("csi.v1.Identity", glue_identity_methods, c);
	out->nonblocking = c->readiness ? identity_nonblocking : identity_nonblocking_no_probe;
}

void controller_grpc_controller_service(struct ctl *c, struct grpc_service *out)
{
	*out = GLUE_SERVICE("csi.v1.Controller", controller_methods, c);
}
