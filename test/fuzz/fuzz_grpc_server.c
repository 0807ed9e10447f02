/* libFuzzer target: raw bytes after the HTTP/2 client preface go through our server's connection
 * (nghttp2 frames and HPACK → gRPC headers → message framing → protobuf → handler → response),
 * in memory, with handlers run inline.  Any crash, leak or sanitizer report is a bug. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "echo.pb-c.h"
#include "grpc/server.h"
#include "h2/conn.h"
#include "h2/loop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int h_unary(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                   void *ctx)
{
	const Pillar__Test__V1__EchoRequest *rq = (const Pillar__Test__V1__EchoRequest *)req;
	Pillar__Test__V1__EchoResponse *r = grpc_call_alloc(call, sizeof(*r));
	(void)ctx;
	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	pillar__test__v1__echo_response__init(r);
	r->message = rq->message;
	if (grpc_call_metadata(call, "x-fail")) {
		grpc_call_set_status_msg(call, "failed: %s", rq->message ? rq->message : "");
		return GRPC_FAILED_PRECONDITION;
	}
	*resp = &r->base;
	return GRPC_OK;
}

static int h_stream(struct grpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	const Pillar__Test__V1__EchoRequest *rq = (const Pillar__Test__V1__EchoRequest *)req;
	Pillar__Test__V1__EchoResponse r = PILLAR__TEST__V1__ECHO_RESPONSE__INIT;
	int i;
	(void)ctx;
	for (i = 0; i < rq->count && i < 4; i++) {
		r.index = i;
		if (grpc_call_send(call, &r.base) < 0)
			break;
	}
	return GRPC_OK;
}

static const struct grpc_method methods[] = {
    {.name = "Unary",
     .unary = h_unary,
     .req = &pillar__test__v1__echo_request__descriptor,
     .resp = &pillar__test__v1__echo_response__descriptor},
    {.name = "Stream",
     .server_stream = h_stream,
     .req = &pillar__test__v1__echo_request__descriptor,
     .resp = &pillar__test__v1__echo_response__descriptor},
};
static const struct grpc_service svc = {
    .name = "pillar.test.v1.Echo", .methods = methods, .n_methods = 2};

static struct h2_loop *loop;
static struct grpc_server *srv;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct h2_conn *c;
	size_t len;

	if (!srv) {
		struct grpc_server_opts o;
		grpc_server_opts_init(&o);
		o.workers = 0;
		o.max_msg = 65536;
		o.max_header_list = 4096;
		if (h2_loop_new(&loop, NULL) < 0)
			abort();
		o.loop = loop;
		if (grpc_server_new(&srv, &o, NULL) < 0 ||
		    grpc_server_add_service(srv, &svc, NULL) < 0)
			abort();
	}
	if (grpc_server_mem_conn(srv, &c, NULL) < 0)
		return 0;
	if (h2_conn_feed(c, (const uint8_t *)preface, sizeof(preface) - 1) == 0) {
		/* feed in two pieces so frame boundaries across reads are exercised */
		size_t half = size / 2;
		if (h2_conn_feed(c, data, half) == 0)
			h2_conn_feed(c, data + half, size - half);
	}
	h2_loop_run_pending(loop);
	h2_conn_take(c, &len);
	h2_loop_run_pending(loop);
	h2_conn_take(c, &len);
	h2_conn_destroy(c);
	h2_loop_run_pending(loop);
	return 0;
}
