#include "controller/grpc_service.h"

#include "glue.h"

/* The controller's handlers allocate their responses themselves (controller/csi.h). */
#define FINISH(Resp)                                          \
	if (code != GRPC_OK) {                                \
		grpc_call_set_status_msg(call, "%s", gs.msg); \
		return code;                                  \
	}                                                     \
	*resp = &r->base;                                     \
	return GRPC_OK;

#define WITH_REQ(fn, Req, Resp)                                                 \
	static int h_##fn(struct grpc_call *call, const ProtobufCMessage *req,  \
	                  ProtobufCMessage **resp, void *ctx)                   \
	{                                                                       \
		Csi__V1__##Resp *r = NULL;                                      \
		struct grpc_status gs = {0};                                    \
		int code = csi_##fn(ctx, (const Csi__V1__##Req *)req, &r, &gs); \
		FINISH(Resp)                                                    \
	}

#define NO_REQ(fn, Resp)                                                       \
	static int h_##fn(struct grpc_call *call, const ProtobufCMessage *req, \
	                  ProtobufCMessage **resp, void *ctx)                  \
	{                                                                      \
		Csi__V1__##Resp *r = NULL;                                     \
		struct grpc_status gs = {0};                                   \
		int code = csi_##fn(ctx, &r, &gs);                             \
		(void)req;                                                     \
		FINISH(Resp)                                                   \
	}

#define M(name, fn, req, resp) \
	GLUE_METHOD(name, h_##fn, csi__v1__##req##__descriptor, csi__v1__##resp##__descriptor)

NO_REQ(get_plugin_info, GetPluginInfoResponse)
NO_REQ(get_plugin_capabilities, GetPluginCapabilitiesResponse)
NO_REQ(probe, ProbeResponse)
NO_REQ(controller_capabilities, ControllerGetCapabilitiesResponse)
WITH_REQ(create_volume, CreateVolumeRequest, CreateVolumeResponse)
WITH_REQ(delete_volume, DeleteVolumeRequest, DeleteVolumeResponse)
WITH_REQ(controller_publish, ControllerPublishVolumeRequest, ControllerPublishVolumeResponse)
WITH_REQ(controller_unpublish, ControllerUnpublishVolumeRequest, ControllerUnpublishVolumeResponse)
WITH_REQ(controller_expand, ControllerExpandVolumeRequest, ControllerExpandVolumeResponse)
WITH_REQ(validate_capabilities, ValidateVolumeCapabilitiesRequest,
         ValidateVolumeCapabilitiesResponse)
WITH_REQ(get_capacity, GetCapacityRequest, GetCapacityResponse)

static const struct grpc_method identity_methods[] = {
    M("GetPluginInfo", get_plugin_info, get_plugin_info_request, get_plugin_info_response),
    M("GetPluginCapabilities", get_plugin_capabilities, get_plugin_capabilities_request,
      get_plugin_capabilities_response),
    M("Probe", probe, probe_request, probe_response),
};

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
};

void controller_grpc_identity_service(struct ctl *c, struct grpc_service *out)
{
	out->name = "csi.v1.Identity";
	out->methods = identity_methods;
	out->n_methods = sizeof(identity_methods) / sizeof(identity_methods[0]);
	out->ctx = c;
}

void controller_grpc_controller_service(struct ctl *c, struct grpc_service *out)
{
	out->name = "csi.v1.Controller";
	out->methods = controller_methods;
	out->n_methods = sizeof(controller_methods) / sizeof(controller_methods[0]);
	out->ctx = c;
}
