/* Unit tests of the gRPC server's memory limits for requests in progress (grpc/server.h:
 * max_conn_pending, max_pending): requests dispatched to a slow handler, running or queued for a
 * worker, count against their connection until the handler returns and the response has left,
 * also after the client gave up on them; many connections together reach the server's limit,
 * which refuses new streams with RESOURCE_EXHAUSTED and new connections; once the handlers
 * return, everything they held is given back and the same load fits again; a request's
 * decoded message counts against both limits until its handler returns, and
 * pillar_csi_grpc_server_pending_bytes shows what the server holds.  Our channel against
 * our server over a unix socket; waits are for conditions with generous deadlines. */
#include <malloc.h>
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
#include "metrics/metrics.h"
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

/* A request whose name has size bytes and with n_caps empty volume capabilities (2 bytes each
 * on the wire, a submessage each once decoded); free its name and volume_capabilities. */
static Csi__V1__CreateVolumeRequest request(size_t size, size_t n_caps)
{
	static Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__CreateVolumeRequest rq = CSI__V1__CREATE_VOLUME_REQUEST__INIT;

	rq.name = malloc(size + 1);
	rq.volume_capabilities = malloc((n_caps ? n_caps : 1) * sizeof(*rq.volume_capabilities));
	ck_assert_ptr_nonnull(rq.name);
	ck_assert_ptr_nonnull(rq.volume_capabilities);
	memset(rq.name, 'a', size);
	rq.name[size] = '\0';
	for (size_t i = 0; i < n_caps; i++)
		rq.volume_capabilities[i] = &cap;
	rq.n_volume_capabilities = n_caps;
	return rq;
}

/* One call of method whose request carries size bytes of name and n_caps capabilities; the
 * code, st the status. */
static int call_caps(struct grpc_channel *ch, const char *method, size_t size, size_t n_caps,
                     int64_t timeout_ms, struct grpc_status *st)
{
	Csi__V1__CreateVolumeRequest rq = request(size, n_caps);
	ProtobufCMessage *r;
	char path[64];

	snprintf(path, sizeof(path), "/test.Limits/%s", method);
	int code =
	    grpc_channel_call(ch, path, &rq.base, &csi__v1__get_plugin_info_response__descriptor,
	                      &r, timeout_ms, NULL, st);
	if (code == GRPC_OK)
		protobuf_c_message_free_unpacked(r, NULL);
	free(rq.name);
	free(rq.volume_capabilities);
	return code;
}

static int call(struct grpc_channel *ch, const char *method, size_t size, int64_t timeout_ms,
                struct grpc_status *st)
{
	return call_caps(ch, method, size, 0, timeout_ms, st);
}

/* A call on a thread of its own (it blocks in a slow handler). */
struct caller {
	struct grpc_channel *ch;
	const char *method;
	size_t size, n_caps;
	int64_t timeout_ms;
	int code;
	struct grpc_status st;
	atomic_bool done;
	pthread_t t;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	c->code = call_caps(c->ch, c->method, c->size, c->n_caps, c->timeout_ms, &c->st);
	atomic_store(&c->done, true);
	return NULL;
}

static void caller_start_caps(struct caller *c, struct grpc_channel *ch, const char *method,
                              size_t size, size_t n_caps, int64_t timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->ch = ch;
	c->method = method;
	c->size = size;
	c->n_caps = n_caps;
	c->timeout_ms = timeout_ms;
	atomic_init(&c->done, false);
	ck_assert_int_eq(pthread_create(&c->t, NULL, caller_main, c), 0);
}

static void caller_start(struct caller *c, struct grpc_channel *ch, const char *method, size_t size,
                         int64_t timeout_ms)
{
	caller_start_caps(c, ch, method, size, 0, timeout_ms);
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
 * the connection's 1 MiB allows, so the call fails with RESOURCE_EXHAUSTED before its handler
 * runs; a plain request of the same size is served. */
START_TEST(test_decoding_bounded)
{
	struct grpc_server *s = start(1024 * KIB, 64u << 20);
	struct grpc_channel *ch = channel();
	size_t n = 200 * KIB;
	Csi__V1__CreateVolumeRequest rq = request(1, n);
	struct grpc_status st;
	ProtobufCMessage *r = NULL;

	ck_assert_uint_eq(protobuf_c_message_get_packed_size(&rq.base), 2 * n + 3);
	ck_assert_int_eq(grpc_channel_call(ch, "/test.Limits/Echo", &rq.base,
	                                   &csi__v1__get_plugin_info_response__descriptor, &r,
	                                   60000, NULL, &st),
	                 GRPC_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(st.msg, "requests in progress on this connection would hold more "
	                             "than 1048576 bytes with this request decoded"),
	              "%s", st.msg);
	ck_assert_int_eq(call(ch, "Echo", 2 * n, 60000, &st), GRPC_OK);
	free(rq.name);
	free(rq.volume_capabilities);
	grpc_channel_free(ch);
	stop(s);
}
END_TEST

/* ---- decoded requests count until their handler returns ---- */

/* What a decoding holds, as malloc sizes it (as the server counts it): at its end (live) and at
 * most (peak: protobuf-c's scratch space for the fields it has scanned included). */
struct decoding {
	size_t live, peak;
};
static struct decoding counted;

static void *count_alloc(void *data, size_t n)
{
	void *p = malloc(n);
	(void)data;
	if (p)
		counted.live += malloc_usable_size(p);
	if (counted.live > counted.peak)
		counted.peak = counted.live;
	return p;
}

static void count_free(void *data, void *p)
{
	(void)data;
	if (p)
		counted.live -= malloc_usable_size(p);
	free(p);
}

/* The decoding of a request with n_caps capabilities. */
static struct decoding decoding_of(size_t n_caps)
{
	Csi__V1__CreateVolumeRequest rq = request(0, n_caps);
	ProtobufCAllocator a = {count_alloc, count_free, NULL};
	size_t len = protobuf_c_message_get_packed_size(&rq.base);
	uint8_t *buf = malloc(len);

	ck_assert_ptr_nonnull(buf);
	protobuf_c_message_pack(&rq.base, buf);
	counted = (struct decoding){0};
	ProtobufCMessage *m = protobuf_c_message_unpack(&csi__v1__create_volume_request__descriptor,
	                                                &a, len, buf);
	ck_assert_ptr_nonnull(m);
	protobuf_c_message_free_unpacked(m, NULL);
	free(buf);
	free(rq.name);
	free(rq.volume_capabilities);
	return counted;
}

/* The value of family in the registry's text, or -1 when absent. */
static double metric(const char *family)
{
	struct metrics_text t = {0};
	char key[128];
	double v = -1;

	metrics_write(&t);
	snprintf(key, sizeof(key), "\n%s ", family);
	const char *p = t.buf ? strstr(t.buf, key) : NULL;
	if (p)
		v = strtod(p + strlen(key), NULL);
	metrics_text_free(&t);
	return v;
}

/* Starts slow calls of CAPS capabilities (9 KiB on the wire, about 250 KiB once decoded,
 * more while decoding) one after the other, the i-th on ch[i / per_channel], until one is
 * refused; how many entered their handler (the rest of c[0..n) were refused). */
#define CAPS 4500
static int start_until_refused(struct caller *c, int n, struct grpc_channel **ch, int per_channel)
{
	int in = 0;

	atomic_store(&gate_open, 0);
	atomic_store(&entered, 0);
	for (int i = 0; i < n; i++) {
		caller_start_caps(&c[i], ch[i / per_channel], "Gate", 0, CAPS, 60000);
		uint64_t until = h2_now_ms() + WAIT_MS;
		while (atomic_load(&entered) == in && !atomic_load(&c[i].done) && h2_now_ms() < until)
			usleep(1000);
		in = atomic_load(&entered);
	}
	return in;
}

/* How many calls that each hold call bytes, d.live of them their decoded request, fit under
 * limit one after the other: the next one's decoding (d.peak) would take it past. */
static int fitting(size_t limit, size_t call, struct decoding d)
{
	int k = 0;
	while ((size_t)k * call + call - d.live + d.peak <= limit)
		k++;
	return k;
}

/* Joins c[0..n): the first in were served, the others refused with a message containing why. */
static void join_callers(struct caller *c, int n, int in, const char *why)
{
	atomic_store(&gate_open, 1);
	for (int i = 0; i < n; i++) {
		pthread_join(c[i].t, NULL);
		if (i < in) {
			ck_assert_int_eq(c[i].code, GRPC_OK);
		} else {
			ck_assert_int_eq(c[i].code, GRPC_RESOURCE_EXHAUSTED);
			ck_assert_msg(strstr(c[i].st.msg, why), "%s", c[i].st.msg);
		}
	}
}

/* Waits until the server holds nothing for requests; what it holds then. */
static size_t wait_given_back(struct grpc_server *s)
{
	uint64_t until = h2_now_ms() + WAIT_MS;
	while (grpc_server_pending_bytes(s) && h2_now_ms() < until)
		usleep(2000);
	return grpc_server_pending_bytes(s);
}

/* Requests of 9 KiB that take about 250 KiB each once decoded, held in slow handlers on one
 * connection: as many as its 1 MiB has room for (three: a decoding takes about twice the
 * decoded message) run, the next ones are refused with RESOURCE_EXHAUSTED naming the
 * connection's limit (their wire bytes alone, 54 KiB, would fit: before the decoded messages
 * were counted all six ran).  While they run the server holds, and its gauge shows, their
 * decoded size and a little more for each call; once they return it holds nothing, and the
 * same load fits again. */
START_TEST(test_decoded_count_against_connection)
{
	struct grpc_server *s = start(1024 * KIB, 64u << 20);
	struct grpc_channel *ch = channel();
	struct decoding d = decoding_of(CAPS);
	struct caller c[6];

	ck_assert_uint_gt(d.live, 200 * KIB);
	ck_assert_uint_lt(d.live, 340 * KIB);
	int in = start_until_refused(c, 6, &ch, 6);
	ck_assert_int_ge(in, 1);
	size_t held = grpc_server_pending_bytes(s), call = held / (size_t)in;
	ck_assert_uint_eq(held % (size_t)in, 0);
	ck_assert_uint_ge(call, d.live);
	ck_assert_uint_le(call, d.live + 2 * KIB);
	ck_assert_int_eq(in, fitting(1024 * KIB, call, d));
	ck_assert_int_lt(in, 6);
	ck_assert_uint_eq((size_t)metric("pillar_csi_grpc_server_pending_bytes"), held);
	ck_assert_uint_eq((size_t)metric("pillar_csi_grpc_server_pending_limit_bytes"), 64u << 20);
	join_callers(c, 6, in,
	             "requests in progress on this connection would hold more than 1048576 bytes "
	             "with this request decoded");
	ck_assert_uint_eq(wait_given_back(s), 0);
	ck_assert_uint_eq((size_t)metric("pillar_csi_grpc_server_pending_bytes"), 0);
	ck_assert_int_eq(start_until_refused(c, in + 1, &ch, in + 1), in);
	join_callers(c, in + 1, in, "with this request decoded");
	grpc_channel_free(ch);
	stop(s);
}
END_TEST

/* The same requests, two per connection on four connections (each well under its 1 MiB),
 * reach the server's 2 MiB: the calls beyond what it has room for are refused naming the
 * server's limit. */
START_TEST(test_decoded_count_against_server)
{
	struct grpc_server *s = start(1024 * KIB, 2048 * KIB);
	struct decoding d = decoding_of(CAPS);
	struct grpc_channel *ch[4];
	struct grpc_status st;
	struct caller c[8];

	for (int i = 0; i < 4; i++) { /* connected before the server fills */
		ch[i] = channel();
		ck_assert_int_eq(call(ch[i], "Echo", 0, 60000, &st), GRPC_OK);
	}
	int in = start_until_refused(c, 8, ch, 2);
	ck_assert_int_ge(in, 1);
	size_t held = grpc_server_pending_bytes(s), call = held / (size_t)in;
	ck_assert_int_ge(fitting(1024 * KIB, call, d), 2); /* a connection's limit is not reached */
	ck_assert_int_eq(in, fitting(2048 * KIB, call, d));
	ck_assert_int_lt(in, 8);
	join_callers(c, 8, in,
	             "requests in progress on this server would hold more than 2097152 bytes "
	             "across all its connections with this request decoded");
	ck_assert_uint_eq(wait_given_back(s), 0);
	for (int i = 0; i < 4; i++)
		grpc_channel_free(ch[i]);
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
	tcase_add_test(t, test_decoded_count_against_connection);
	tcase_add_test(t, test_decoded_count_against_server);
	suite_add_tcase(su, t);
	return su;
}

int main(void)
{
	return tu_run(suite());
}
