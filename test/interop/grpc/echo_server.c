/* Our side of the gRPC interop and bench suites: the pillar.test.v1.Echo service on src/grpc.
 *
 *   echo_server --listen ADDR [--listen ADDR]... [--cert F --key F [--ca F]] [--workers N]
 *               [--max-msg N] [--max-conns N] [--idle-ms N] [--nonblocking METHOD]...
 * Prints "ready <port of the first TCP listener or 0>" once listening; SIGTERM/SIGINT shut it down
 * gracefully (GOAWAY, 2 s grace) and it exits 0.  Built by run.sh from the library sources. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/keylock.h"
#include "echo.pb-c.h"
#include "grpc/server.h"

static atomic_int cancels_seen, naps_begun;
static struct keylock locks;

static int64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps ms of wall-clock time (however late a loaded machine wakes it) in small steps; returns
 * false when the call was cancelled meanwhile. */
static bool nap(struct grpc_call *call, int ms)
{
	int64_t until = monotonic_ms() + ms;
	atomic_fetch_add(&naps_begun, 1);
	while (monotonic_ms() < until) {
		struct timespec ts = {0, 5 * 1000000};
		if (grpc_call_cancelled(call)) {
			atomic_fetch_add(&cancels_seen, 1);
			return false;
		}
		nanosleep(&ts, NULL);
	}
	return true;
}

static Pillar__Test__V1__EchoResponse *make_resp(struct grpc_call *call,
                                                 const Pillar__Test__V1__EchoRequest *rq)
{
	Pillar__Test__V1__EchoResponse *r = grpc_call_alloc(call, sizeof(*r));
	int64_t left;

	if (!r)
		return NULL;
	pillar__test__v1__echo_response__init(r);
	r->message = rq->message;
	if (rq->response_size > 0) {
		r->payload.data = grpc_call_alloc(call, (size_t)rq->response_size);
		if (!r->payload.data)
			return NULL;
		memset(r->payload.data, 'x', (size_t)rq->response_size);
		r->payload.len = (size_t)rq->response_size;
	}
	if (rq->echo_metadata && *rq->echo_metadata) {
		const char *v = grpc_call_metadata(call, rq->echo_metadata);
		r->metadata_value = v ? (char *)v : "";
	}
	left = grpc_call_deadline_ms(call);
	r->deadline_ms = left == INT64_MAX ? -1 : left;
	return r;
}

static int h_unary(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                   void *ctx)
{
	const Pillar__Test__V1__EchoRequest *rq = (const Pillar__Test__V1__EchoRequest *)req;
	Pillar__Test__V1__EchoResponse *r;
	(void)ctx;

	/* "stats": the cancellations handlers saw; "naps": the delays handlers began */
	if (rq->message && (!strcmp(rq->message, "stats") || !strcmp(rq->message, "naps"))) {
		char buf[64];
		r = make_resp(call, rq);
		if (!r)
			return GRPC_RESOURCE_EXHAUSTED;
		if (!strcmp(rq->message, "naps"))
			snprintf(buf, sizeof(buf), "naps=%d", atomic_load(&naps_begun));
		else
			snprintf(buf, sizeof(buf), "cancelled=%d", atomic_load(&cancels_seen));
		r->message = grpc_call_strdup(call, buf);
		*resp = &r->base;
		return GRPC_OK;
	}
	if (rq->echo_metadata && *rq->echo_metadata) {
		const char *v = grpc_call_metadata(call, rq->echo_metadata);
		grpc_call_add_metadata(call, "x-echo-reply", v ? v : "");
	}
	if (rq->delay_ms > 0 && !nap(call, rq->delay_ms)) {
		grpc_call_set_status_msg(call, "cancelled while sleeping");
		return GRPC_CANCELLED;
	}
	if (rq->status) {
		grpc_call_set_status_msg(call, "%s", rq->status_message ? rq->status_message : "");
		return rq->status;
	}
	r = make_resp(call, rq);
	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	*resp = &r->base;
	return GRPC_OK;
}

static int h_stream(struct grpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	const Pillar__Test__V1__EchoRequest *rq = (const Pillar__Test__V1__EchoRequest *)req;
	Pillar__Test__V1__EchoResponse *r = make_resp(call, rq);
	int i;
	(void)ctx;

	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	for (i = 0; i < rq->count; i++) {
		r->index = i;
		if (grpc_call_send(call, &r->base) < 0) {
			atomic_fetch_add(&cancels_seen, 1);
			return GRPC_CANCELLED;
		}
		if (rq->delay_ms > 0 && !nap(call, rq->delay_ms))
			return GRPC_CANCELLED;
	}
	if (rq->status) {
		grpc_call_set_status_msg(call, "%s", rq->status_message ? rq->status_message : "");
		return rq->status;
	}
	return GRPC_OK;
}

static int h_lock(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	const Pillar__Test__V1__EchoRequest *rq = (const Pillar__Test__V1__EchoRequest *)req;
	Pillar__Test__V1__EchoResponse *r;
	struct keylock_hold hold;
	(void)ctx;

	if (keylock_try(&locks, &hold, rq->message) < 0) {
		grpc_call_set_status_msg(call, "an operation on volume %s is already in progress",
		                         rq->message);
		return GRPC_ABORTED;
	}
	nap(call, rq->delay_ms);
	keylock_release(&locks, &hold);
	r = make_resp(call, rq);
	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	*resp = &r->base;
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
    {.name = "Lock",
     .unary = h_lock,
     .req = &pillar__test__v1__echo_request__descriptor,
     .resp = &pillar__test__v1__echo_response__descriptor},
};
/* --nonblocking NAME adds NAME here (the bench's Unary never sleeps: it asks for no delay) */
static const char *nonblocking[4];
static struct grpc_service echo_svc = {
    .name = "pillar.test.v1.Echo", .methods = methods, .n_methods = 3, .nonblocking = nonblocking};
/* registered only to show a NOT_SERVING health status */
static const struct grpc_service unhealthy_svc = {
    .name = "pillar.test.v1.Unhealthy", .methods = methods, .n_methods = 1};

static volatile sig_atomic_t stop;
static void on_sig(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	const char *listen[8] = {0};
	struct grpc_server_opts o;
	struct grpc_server *s;
	struct err e = {0};
	size_t nl = 0, n_nonblocking = 0;
	int i;

	grpc_server_opts_init(&o);
	o.workers = 16;
	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--listen") && nl < 7)
			listen[nl++] = argv[i + 1];
		else if (!strcmp(argv[i], "--cert"))
			o.tls_cert = argv[i + 1];
		else if (!strcmp(argv[i], "--key"))
			o.tls_key = argv[i + 1];
		else if (!strcmp(argv[i], "--ca"))
			o.tls_ca = argv[i + 1];
		else if (!strcmp(argv[i], "--workers"))
			o.workers = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--max-msg"))
			o.max_msg = (size_t)atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--max-conns"))
			o.max_conns = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--idle-ms"))
			o.idle_timeout_ms = (uint64_t)atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--nonblocking") && n_nonblocking < 3)
			nonblocking[n_nonblocking++] = argv[i + 1];
		else {
			fprintf(stderr, "echo_server: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	o.listen = listen;
	keylock_init(&locks);
	signal(SIGTERM, on_sig);
	signal(SIGINT, on_sig);
	signal(SIGPIPE, SIG_IGN);
	if (grpc_server_new(&s, &o, &e) < 0 || grpc_server_add_service(s, &echo_svc, &e) < 0 ||
	    grpc_server_add_service(s, &unhealthy_svc, &e) < 0 || grpc_server_start(s, &e) < 0) {
		fprintf(stderr, "echo_server: %s\n", e.msg);
		return 1;
	}
	grpc_server_set_serving(s, "pillar.test.v1.Unhealthy", false);
	{
		int port = 0;
		for (size_t k = 0; k < nl && port <= 0; k++)
			port = grpc_server_port(s, k);
		printf("ready %d\n", port < 0 ? 0 : port);
	}
	fflush(stdout);
	while (!stop)
		pause();
	grpc_server_shutdown(s, 2000);
	grpc_server_free(s);
	keylock_fini(&locks);
	return 0;
}
