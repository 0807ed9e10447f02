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

#endif
