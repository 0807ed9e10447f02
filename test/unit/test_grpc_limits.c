/* Unit tests of the gRPC server's memory limits for requests in progress (grpc/server.h:
 * max_conn_pending, max_pending): requests dispatched to a slow handler, running or queued for a
 * worker, count against their connection until the handler returns and the response has left,
 * also after the client gave up on them; many connections together reach the server's limit,
 * which refuses new streams with RESOURCE_EXHAUSTED and new connections; once the handlers
 * return, everything they held is given back and the same load fits again; a request's
 * decoding takes no more than the room left.  Our channel against
 * our server over a unix socket; waits are for conditions with generous deadlines. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csi.pb-c.h"
#include "grpc/client.h"
#include "grpc/server.h"
#include "grpc/status.h"
#include "h2/loop.h"
#include "testutil.h"

#define WAIT_MS 20000
#define KIB     1024u

static atomic_int gate_open, entered;

static int answer(struct grpc_call *call, ProtobufCMessage **resp)
{
	Csi__V1__GetPluginInfoResponse *r = grpc_call_alloc(call, sizeof(*r));

	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	csi__v1__get_plugin_info_response__init(r);
	r->name = "limits";
	r->vendor_version = "1";
	*resp = &r->base;
	return GRPC_OK;
}

/* A slow handler: blocks until the gate opens or its call is cancelled. */
static int h_gate(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	(void)req;
	(void)ctx;
	atomic_fetch_add(&entered, 1);
	while (!atomic_load(&gate_open) && !grpc_call_cancelled(call))
		usleep(1000);
	return grpc_call_cancelled(call) ? GRPC_CANCELLED : answer(call, resp);
}

/* A handler that does not look at cancellation (a backend command running to its end). */
static int h_stuck(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                   void *ctx)
{
	(void)req;
	(void)ctx;
	atomic_fetch_add(&entered, 1);
	while (!atomic_load(&gate_open))
		usleep(1000);
	return answer(call, resp);
}

static int h_echo(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	(void)req;
	(void)ctx;
	return answer(call, resp);
}

#define METHOD(mname, fn)                                                                       \
	{                                                                                       \
		.name = mname, .unary = fn, .req = &csi__v1__create_volume_request__descriptor, \
		.resp = &csi__v1__get_plugin_info_response__descriptor                          \
	}
static const struct grpc_method methods[] = {METHOD("Gate", h_gate), METHOD("Stuck", h_stuck),
                                             METHOD("Echo", h_echo)};
static const struct grpc_service service = {
    .name = "test.Limits", .methods = methods, .n_methods = 3};

static struct h2_loop *loop;
static const char *dir;
static char url[512];

static struct grpc_server *start(size_t max_conn_pending, size_t max_pending)
{
	const char *listen[] = {url, NULL};
	struct grpc_server_opts o;
	struct grpc_server *s;
	struct err e = {0};

	atomic_store(&gate_open, 0);
	atomic_store(&entered, 0);
	dir = tu_mkdtemp();
	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	ck_assert_int_eq(h2_loop_new(&loop, &e), 0);
	ck_assert_int_eq(h2_loop_start(loop, &e), 0);
	grpc_server_opts_init(&o);
	o.listen = listen;
	o.workers = 8;
	o.loop = loop;
	o.max_msg = 1024 * KIB;
	o.max_conn_pending = max_conn_pending;
	o.max_pending = max_pending;
	ck_assert_msg(grpc_server_new(&s, &o, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(grpc_server_add_service(s, &service, &e), 0);
	ck_assert_msg(grpc_server_start(s, &e) == 0, "%s", e.msg);
	return s;
}

static void stop(struct grpc_server *s)
{
	grpc_server_free(s);
	h2_loop_free(loop);
	loop = NULL;
	tu_rmtree(dir);
}

static struct grpc_channel *channel(void)
{
	struct grpc_channel *ch;
	struct err e = {0};
	ck_assert_msg(grpc_channel_new(&ch, url, NULL, &e) == 0, "%s", e.msg);
	return ch;
}

/* One call of method whose request carries size bytes; the code, st the status. */
static int call(struct grpc_channel *ch, const char *method, size_t size, int64_t timeout_ms,
                struct grpc_status *st)
{
	Csi__V1__CreateVolumeRequest rq = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	ProtobufCMessage *r;
	char path[64];
	char *name = malloc(size + 1);

	ck_assert_ptr_nonnull(name);
	memset(name, 'a', size);
	name[size] = '\0';
	rq.name = name;
	snprintf(path, sizeof(path), "/test.Limits/%s", method);
	int code =
	    grpc_channel_call(ch, path, &rq.base, &csi__v1__get_plugin_info_response__descriptor,
	                      &r, timeout_ms, NULL, st);
	if (code == GRPC_OK)
		protobuf_c_message_free_unpacked(r, NULL);
	free(name);
	return code;
}

/* A call on a thread of its own (it blocks in a slow handler). */
struct caller {
	struct grpc_channel *ch;
	const char *method;
	size_t size;
	int64_t timeout_ms;
	int code;
	pthread_t t;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	struct grpc_status st;
	c->code = call(c->ch, c->method, c->size, c->timeout_ms, &st);
	return NULL;
}

static void caller_start(struct caller *c, struct grpc_channel *ch, const char *method, size_t size,
                         int64_t timeout_ms)
{
	*c = (struct caller){.ch = ch, .method = method, .size = size, .timeout_ms = timeout_ms};
	ck_assert_int_eq(pthread_create(&c->t, NULL, caller_main, c), 0);
}

static int wait_entered(int want)
{
	uint64_t until = h2_now_ms() + WAIT_MS;
	while (atomic_load(&entered) < want && h2_now_ms() < until)
		usleep(2000);
	return atomic_load(&entered);
}

/* Repeats a call until it is not refused with RESOURCE_EXHAUSTED (memory is given back on the
 * loop just after the handler returns) or WAIT_MS passed; its code. */
static int call_when_free(struct grpc_channel *ch, const char *method, size_t size)
{
	uint64_t until = h2_now_ms() + WAIT_MS;
	struct grpc_status st;
	int code;
	while ((code = call(ch, method, size, 60000, &st)) == GRPC_RESOURCE_EXHAUSTED &&
	       h2_now_ms() < until)
		usleep(5000);
	return code;
}

/* Requests dispatched to a slow handler count against their connection: with 1 MiB per
 * connection, two 400 KiB requests held in handlers leave no room for a third on that
 * connection, which fails with RESOURCE_EXHAUSTED at once, while a small call on it and a large
 * one on another connection are served; once the handlers return, the third fits. */
START_TEST(test_dispatched_count_against_connection)
{
	struct grpc_server *s = start(1024 * KIB, 64u << 20);
	struct grpc_channel *ch = channel(), *other = channel();
	struct grpc_status st;
	struct caller c[2];

	for (int i = 0; i < 2; i++)
		caller_start(&c[i], ch, "Gate", 400 * KIB, 60000);
	ck_assert_int_eq(wait_entered(2), 2);
	ck_assert_int_eq(call(ch, "Echo", 400 * KIB, 60000, &st), GRPC_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(st.msg, "requests in progress on this connection would hold more "
	                             "than 1048576 bytes; retry when"),
	              "%s", st.msg);
	ck_assert_int_eq(call(ch, "Echo", 1 * KIB, 60000, &st), GRPC_OK);
	ck_assert_int_eq(call(other, "Echo", 400 * KIB, 60000, &st), GRPC_OK);
	atomic_store(&gate_open, 1);
	for (int i = 0; i < 2; i++) {
		pthread_join(c[i].t, NULL);
		ck_assert_int_eq(c[i].code, GRPC_OK);
	}
	ck_assert_int_eq(call_when_free(ch, "Echo", 400 * KIB), GRPC_OK);
	grpc_channel_free(ch);
	grpc_channel_free(other);
	stop(s);
}
END_TEST

/* A request whose client gave up (deadline) while its handler runs on still holds its memory
 * until the handler returns: a client cannot cancel and resend to hold more than its share. */
START_TEST(test_abandoned_call_holds_until_handler_returns)
{
	struct grpc_server *s = start(1024 * KIB, 64u << 20);
	struct grpc_channel *ch = channel();
	struct grpc_status st;
	struct caller stuck;

	caller_start(&stuck, ch, "Stuck", 600 * KIB, 300);
	ck_assert_int_eq(wait_entered(1), 1);
	pthread_join(stuck.t, NULL);
	ck_assert_int_ne(stuck.code, GRPC_OK); /* the client has given up on it */
	ck_assert_int_eq(call(ch, "Echo", 600 * KIB, 60000, &st), GRPC_RESOURCE_EXHAUSTED);
	ck_assert_int_eq(call(ch, "Echo", 1 * KIB, 60000, &st), GRPC_OK);
	atomic_store(&gate_open, 1);
	ck_assert_int_eq(call_when_free(ch, "Echo", 600 * KIB), GRPC_OK);
	grpc_channel_free(ch);
	stop(s);
}
END_TEST

/* Fills the server's 2 MiB with 400 KiB requests in slow handlers, one per connection of
 * ch[0..5]: the first five fit, the sixth gets RESOURCE_EXHAUSTED naming the server's limit. */
static void fill(struct grpc_channel **ch, struct caller *c)
{
	struct grpc_status st;

	atomic_store(&gate_open, 0);
	atomic_store(&entered, 0);
	for (int i = 0; i < 5; i++)
		caller_start(&c[i], ch[i], "Gate", 400 * KIB, 60000);
	ck_assert_int_eq(wait_entered(5), 5);
	ck_assert_int_eq(call(ch[5], "Echo", 400 * KIB, 60000, &st), GRPC_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(st.msg, "requests in progress on this server would hold more than "
	                             "2097152 bytes across all its connections; retry later"),
	              "%s", st.msg);
}

static void drain(struct caller *c)
{
	atomic_store(&gate_open, 1);
	for (int i = 0; i < 5; i++) {
		pthread_join(c[i].t, NULL);
		ck_assert_int_eq(c[i].code, GRPC_OK);
	}
}

/* Many connections, each well under its own limit, reach the server's: new streams fail with
 * RESOURCE_EXHAUSTED and a new connection is closed at once (UNAVAILABLE).  When the handlers
 * return, every byte is given back: new connections and calls are served, and the same load
 * fills the server exactly as before. */
START_TEST(test_server_limit_across_connections)
{
	struct grpc_server *s = start(1024 * KIB, 2048 * KIB);
	struct grpc_channel *ch[6];
	struct grpc_status st;
	struct caller c[5];

	for (int i = 0; i < 6; i++) { /* connected before the server fills */
		ch[i] = channel();
		ck_assert_int_eq(call(ch[i], "Echo", 0, 60000, &st), GRPC_OK);
	}
	fill(ch, c);
	struct grpc_channel *late = channel();
	ck_assert_int_eq(call(late, "Echo", 0, 60000, &st), GRPC_UNAVAILABLE);
	grpc_channel_free(late);
	drain(c);
	ck_assert_int_eq(call_when_free(ch[5], "Echo", 400 * KIB), GRPC_OK);
	late = channel();
	ck_assert_int_eq(call(late, "Echo", 400 * KIB, 60000, &st), GRPC_OK);
	grpc_channel_free(late);
	fill(ch, c);
	drain(c);
	for (int i = 0; i < 6; i++)
		grpc_channel_free(ch[i]);
	stop(s);
}
END_TEST

/* A request of many small submessages takes tens of times its size once decoded (protobuf-c
 * allocates each one): 400 KiB of empty volume capabilities would take about 24 MiB, more than
 * the connection's 1 MiB has room for, so the call fails with RESOURCE_EXHAUSTED before its
 * handler runs; a plain request of the same size is served. */
START_TEST(test_decoding_bounded)
{
	struct grpc_server *s = start(1024 * KIB, 64u << 20);
	struct grpc_channel *ch = channel();
	Csi__V1__CreateVolumeRequest rq = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	size_t n = 200 * KIB;
	Csi__V1__VolumeCapability **caps = malloc(n * sizeof(*caps));
	struct grpc_status st;
	ProtobufCMessage *r = NULL;

	ck_assert_ptr_nonnull(caps);
	for (size_t i = 0; i < n; i++)
		caps[i] = &cap;
	rq.name = "v";
	rq.n_volume_capabilities = n;
	rq.volume_capabilities = caps;
	ck_assert_uint_eq(protobuf_c_message_get_packed_size(&rq.base), 2 * n + 3);
	ck_assert_int_eq(grpc_channel_call(ch, "/test.Limits/Echo", &rq.base,
	                                   &csi__v1__get_plugin_info_response__descriptor, &r,
	                                   60000, NULL, &st),
	                 GRPC_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(st.msg, "the request takes more than") &&
	                  strstr(st.msg, "bytes once decoded"),
	              "%s", st.msg);
	ck_assert_int_eq(call(ch, "Echo", 2 * n, 60000, &st), GRPC_OK);
	free(caps);
	grpc_channel_free(ch);
	stop(s);
}
END_TEST

static Suite *suite(void)
{
	Suite *su = suite_create("grpc_limits");
	TCase *t = tcase_create("core");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_dispatched_count_against_connection);
	tcase_add_test(t, test_abandoned_call_holds_until_handler_returns);
	tcase_add_test(t, test_server_limit_across_connections);
	tcase_add_test(t, test_decoding_bounded);
	suite_add_tcase(su, t);
	return su;
}

int main(void)
{
	return tu_run(suite());
}
