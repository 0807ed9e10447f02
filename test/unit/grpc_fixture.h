/* grpc_fixture — the server and calls shared by the gRPC threading tests (test_grpc_workers,
 * test_grpc_pollers, test_grpc_nonblocking): our server on a loop of its own, handlers that
 * answer with the caller's x-id, calls that check the answer is their own, and waits for a
 * condition with a deadline generous enough for a loaded machine. */
#ifndef PILLAR_TEST_GRPC_FIXTURE_H
#define PILLAR_TEST_GRPC_FIXTURE_H

#include <stdatomic.h>
#include <stdint.h>

#include "csi.pb-c.h"
#include "grpc/client.h"
#include "grpc/server.h"

/* how long a test waits for a condition on a loaded machine */
#define GRPCFX_WAIT_MS 20000

/* A unary method name/handler taking and answering GetPluginInfo messages. */
#define GRPCFX_INFO(mname, fn)                                                                    \
	{                                                                                         \
		.name = mname, .unary = fn, .req = &csi__v1__get_plugin_info_request__descriptor, \
		.resp = &csi__v1__get_plugin_info_response__descriptor                            \
	}

/* The loop of the server grpcfx_start started (NULL when none runs). */
extern struct h2_loop *grpcfx_loop;
/* The handler grpcfx_h_gate blocks until grpcfx_gate_open is set or its call is cancelled
 * (counted in grpcfx_gate_cancelled); grpcfx_gate_entered counts the handlers that began.
 * grpcfx_start resets all three. */
extern atomic_int grpcfx_gate_open, grpcfx_gate_entered, grpcfx_gate_cancelled;

/* A thread (grpcfx_caller_main) making n calls of method to the server grpcfx_start started,
 * with x-ids "index-0".."index-(n-1)" and timeout_ms (60 s when 0): ok counts the answers that
 * were its own, last_code is the last call's code. */
struct grpcfx_caller {
	struct grpc_channel *ch;
	const char *method;
	int index, n, ok, last_code;
	int64_t timeout_ms;
};

/* Waits until *v >= want or GRPCFX_WAIT_MS passed; the last value. */
int grpcfx_wait(atomic_int *v, int want);
/* A GetPluginInfoResponse named name whose vendor_version is the caller's x-id. */
int grpcfx_answer(struct grpc_call *call, ProtobufCMessage **resp, const char *name);
int grpcfx_h_gate(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx);
void *grpcfx_caller_main(void *arg);
/* A server of service with workers worker threads on a new loop (grpcfx_loop), listening at
 * url; grpcfx_stop frees both. */
struct grpc_server *grpcfx_start(const char *url, unsigned workers,
                                 const struct grpc_service *service);
void grpcfx_stop(struct grpc_server *s);
/* One call of /service/method with x-id id (and a grpc-timeout header of server_timeout when not
 * NULL, which the client itself does not watch).  On OK it checks that the answer is this call's
 * own: vendor_version id, name "gate" for method Gate and "echo" for any other.  Returns the
 * code. */
int grpcfx_call(struct grpc_channel *ch, const char *service, const char *method, const char *id,
                int64_t timeout_ms, const char *server_timeout, struct grpc_status *st);

#endif
