/* glue — one macro that turns a transport-independent handler of the one handler shape
 *     int fn(ctx, const Req *req, Resp *resp, struct grpc_status *st)
 * (grpc/status.h: a code returned and, on error, a message in st->msg; the response is allocated
 * and initialised here — its initialiser is the variadic argument — and its members are
 * heap-allocated by the handler) into a grpc_unary_fn for the gRPC server.  On failure the
 * message becomes grpc-message and the response is freed; on success the server frees it after
 * sending through glue_resp_free.  Out of memory here is RESOURCE_EXHAUSTED, as everywhere. */
#ifndef PILLAR_ROLES_GLUE_H
#define PILLAR_ROLES_GLUE_H

#include <stdlib.h>

#include "grpc/server.h"

static inline void glue_resp_free(ProtobufCMessage *m, void *ctx)
{
	(void)ctx;
	protobuf_c_message_free_unpacked(m, NULL);
}

/* Two new initialised messages of descriptors a and b (a message and the sub-message it will
 * point to), both or neither: .a is NULL when out of memory. */
struct glue_pair {
	void *a, *b;
};
static inline struct glue_pair glue_new_pair(const ProtobufCMessageDescriptor *a,
                                             const ProtobufCMessageDescriptor *b)
{
	struct glue_pair m = {malloc(a->sizeof_message), malloc(b->sizeof_message)};
	if (!m.a || !m.b) {
		free(m.a);
		free(m.b);
		return (struct glue_pair){NULL, NULL};
	}
	protobuf_c_message_init(a, m.a);
	protobuf_c_message_init(b, m.b);
	return m;
}

#define GLUE_UNARY(name, handler, Ctx, Req, Resp, ...)                       \
	static int name(struct grpc_call *call, const ProtobufCMessage *req, \
	                ProtobufCMessage **resp, void *ctx)                  \
	{                                                                    \
		Resp *r = malloc(sizeof(*r));                                \
		struct grpc_status st = {0};                                 \
		int code;                                                    \
		if (!r) {                                                    \
			grpc_status_oom(&st);                                \
			grpc_call_set_status_msg(call, "%s", st.msg);        \
			return st.code;                                      \
		}                                                            \
		*r = (Resp)__VA_ARGS__;                                      \
		code = handler((Ctx *)ctx, (const Req *)req, r, &st);        \
		if (code != GRPC_OK) {                                       \
			grpc_call_set_status_msg(call, "%s", st.msg);        \
			protobuf_c_message_free_unpacked(&r->base, NULL);    \
			return code;                                         \
		}                                                            \
		*resp = &r->base;                                            \
		return GRPC_OK;                                              \
	}

#define GLUE_METHOD(mname, fn, reqdesc, respdesc)                    \
	{                                                            \
		mname, fn, NULL, &reqdesc, &respdesc, glue_resp_free \
	}

/* The service of a method table (an array, not a pointer) with ctx for its handlers. */
#define GLUE_SERVICE(name_, methods_, ctx_)                                           \
	((struct grpc_service){.name = (name_),                                       \
	                       .methods = (methods_),                                 \
	                       .n_methods = sizeof(methods_) / sizeof((methods_)[0]), \
	                       .ctx = (ctx_)})

/* The CSI Identity service's methods (csi.v1.Identity: GetPluginInfo, GetPluginCapabilities,
 * Probe) as the method table glue_identity_methods, served by the handlers
 * <prefix>get_plugin_info, <prefix>get_plugin_capabilities and <prefix>probe on a Ctx — the
 * same for every role that serves CSI.  Needs csi.pb-c.h. */
#define GLUE_CSI_IDENTITY(prefix, Ctx)                                                            \
	GLUE_UNARY(glue_get_plugin_info, prefix##get_plugin_info, Ctx,                            \
	           Csi__V1__GetPluginInfoRequest, Csi__V1__GetPluginInfoResponse,                 \
	           CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT)                                       \
	GLUE_UNARY(glue_get_plugin_capabilities, prefix##get_plugin_capabilities, Ctx,            \
	           Csi__V1__GetPluginCapabilitiesRequest, Csi__V1__GetPluginCapabilitiesResponse, \
	           CSI__V1__GET_PLUGIN_CAPABILITIES_RESPONSE__INIT)                               \
	GLUE_UNARY(glue_probe, prefix##probe, Ctx, Csi__V1__ProbeRequest, Csi__V1__ProbeResponse, \
	           CSI__V1__PROBE_RESPONSE__INIT)                                                 \
	static const struct grpc_method glue_identity_methods[] = {                               \
	    GLUE_METHOD("GetPluginInfo", glue_get_plugin_info,                                    \
	                csi__v1__get_plugin_info_request__descriptor,                             \
	                csi__v1__get_plugin_info_response__descriptor),                           \
	    GLUE_METHOD("GetPluginCapabilities", glue_get_plugin_capabilities,                    \
	                csi__v1__get_plugin_capabilities_request__descriptor,                     \
	                csi__v1__get_plugin_capabilities_response__descriptor),                   \
	    GLUE_METHOD("Probe", glue_probe, csi__v1__probe_request__descriptor,                  \
	                csi__v1__probe_response__descriptor),                                     \
	}

#endif
