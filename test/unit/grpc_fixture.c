/* grpc_fixture — the gRPC threading tests' server and calls (grpc_fixture.h). */
#include "grpc_fixture.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "grpc/status.h"
#include "h2/loop.h"
#include "testutil.h"

struct h2_loop *grpcfx_loop;
atomic_int grpcfx_gate_open, grpcfx_gate_entered, grpcfx_gate_cancelled;
static const char *started_service; /* the name of the service grpcfx_start serves */

int grpcfx_wait(atomic_int *v, int want)
{
	uint64_t until = h2_now_ms() + GRPCFX_WAIT_MS;
	while (atomic_load(v) < want && h2_now_ms() < until)
		usleep(2000);
	return atomic_load(v);
}

int grpcfx_answer(struct grpc_call *call, ProtobufCMessage **resp, const char *name)
{
	Csi__V1__GetPluginInfoResponse *r = grpc_call_alloc(call, sizeof(*r));
	const char *id = grpc_call_metadata(call, "x-id");

	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	csi__v1__get_plugin_info_response__init(r);
	r->name = (char *)name;
	r->vendor_version = grpc_call_strdup(call, id ? id : "");
	*resp = &r->base;
	return GRPC_OK;
}

int grpcfx_h_gate(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	(void)req;
	(void)ctx;
	atomic_fetch_add(&grpcfx_gate_entered, 1);
	while (!atomic_load(&grpcfx_gate_open) && !grpc_call_cancelled(call))
		usleep(1000);
	if (grpc_call_cancelled(call)) {
		atomic_fetch_add(&grpcfx_gate_cancelled, 1);
		return GRPC_CANCELLED;
	}
	return grpcfx_answer(call, resp, "gate");
}

void *grpcfx_caller_main(void *arg)
{
	struct grpcfx_caller *c = arg;
	struct grpc_status st;
	char id[32];

	for (int i = 0; i < c->n; i++) {
		snprintf(id, sizeof(id), "%d-%d", c->index, i);
		c->last_code = grpcfx_call(c->ch, started_service, c->method, id,
		                           c->timeout_ms ? c->timeout_ms : 60000, NULL, &st);
		c->ok += c->last_code == GRPC_OK;
	}
	return NULL;
}

struct grpc_server *grpcfx_start(const char *url, unsigned workers,
                                 const struct grpc_service *service)
{
	const char *listen[] = {url, NULL};
	struct grpc_server_opts o;
	struct grpc_server *s;
	struct err e = {0};

	atomic_store(&grpcfx_gate_open, 0);
	atomic_store(&grpcfx_gate_entered, 0);
	atomic_store(&grpcfx_gate_cancelled, 0);
	started_service = service->name;
	ck_assert_int_eq(h2_loop_new(&grpcfx_loop, &e), 0);
	ck_assert_int_eq(h2_loop_start(grpcfx_loop, &e), 0);
	grpc_server_opts_init(&o);
	o.listen = listen;
	o.workers = workers;
	o.loop = grpcfx_loop;
	ck_assert_msg(grpc_server_new(&s, &o, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(grpc_server_add_service(s, service, &e), 0);
	ck_assert_msg(grpc_server_start(s, &e) == 0, "%s", e.msg);
	return s;
}

void grpcfx_stop(struct grpc_server *s)
{
	grpc_server_free(s);
	h2_loop_free(grpcfx_loop);
	grpcfx_loop = NULL;
}

int grpcfx_call(struct grpc_channel *ch, const char *service, const char *method, const char *id,
                int64_t timeout_ms, const char *server_timeout, struct grpc_status *st)
{
	Csi__V1__GetPluginInfoRequest rq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	struct grpc_md md[] = {{"x-id", id}, {"grpc-timeout", server_timeout}, {NULL, NULL}};
	ProtobufCMessage *r;
	char path[128];

	if (!server_timeout)
		md[1].key = NULL;
	snprintf(path, sizeof(path), "/%s/%s", service, method);
	int code =
	    grpc_channel_call(ch, path, &rq.base, &csi__v1__get_plugin_info_response__descriptor,
	                      &r, timeout_ms, md, st);
	if (code == GRPC_OK) {
		Csi__V1__GetPluginInfoResponse *info = (Csi__V1__GetPluginInfoResponse *)r;
		ck_assert_str_eq(info->vendor_version, id);
		ck_assert_str_eq(info->name, strcmp(method, "Gate") == 0 ? "gate" : "echo");
		protobuf_c_message_free_unpacked(r, NULL);
	}
	return code;
}
