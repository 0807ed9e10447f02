/* Unit tests of the gRPC server's threading: a method marked nonblocking runs on the thread that
 * read its request (holding the event loop, no hand-off to a worker), is not held up by blocking
 * handlers that occupy every worker, shares one connection with many concurrent callers, keeps
 * its metrics, and a blocking call's deadline still ends it on time.  Our channel against our
 * server over a unix socket. */
#include <errno.h>
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
#include "grpc_fixture.h"
#include "h2/loop.h"
#include "metrics/metrics.h"
#include "testutil.h"

static atomic_int quick_on_loop, quick_off_loop;
static atomic_bool slow_held, slow_release; /* a "hold" call is running; it may return */

/* Blocking: sleeps for the milliseconds in x-sleep, or with x-sleep "hold" until slow_release
 * (in steps, ending early when cancelled). */
static int h_slow(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	Csi__V1__GetPluginInfoResponse *r = grpc_call_alloc(call, sizeof(*r));
	const char *ms = grpc_call_metadata(call, "x-sleep");
	(void)req;
	(void)ctx;
	if (ms && !strcmp(ms, "hold")) {
		atomic_store(&slow_held, true);
		while (!atomic_load(&slow_release) && !grpc_call_cancelled(call))
			usleep(10000);
	}
	for (int left = ms ? atoi(ms) : 0; left > 0 && !grpc_call_cancelled(call); left -= 10)
		usleep(10000);
	if (grpc_call_cancelled(call))
		return GRPC_CANCELLED;
	csi__v1__get_plugin_info_response__init(r);
	r->name = "slow";
	*resp = &r->base;
	return GRPC_OK;
}

/* Nonblocking: answers at once and notes whether it ran holding the loop. */
static int h_quick(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                   void *ctx)
{
	Csi__V1__GetPluginInfoResponse *r = grpc_call_alloc(call, sizeof(*r));
	(void)req;
	(void)ctx;
	atomic_fetch_add(h2_loop_in_thread(grpcfx_loop) ? &quick_on_loop : &quick_off_loop, 1);
	csi__v1__get_plugin_info_response__init(r);
	r->name = "quick";
	r->vendor_version = grpc_call_strdup(call, grpc_call_path(call));
	*resp = &r->base;
	return GRPC_OK;
}

static const struct grpc_method methods[] = {GRPCFX_INFO("Slow", h_slow),
                                             GRPCFX_INFO("Quick", h_quick)};
static const char *const quick_only[] = {"Quick", NULL};
static const struct grpc_service service = {
    .name = "test.Threads", .methods = methods, .n_methods = 2, .nonblocking = quick_only};

/* A server with one worker thread on a loop of its own. */
static struct grpc_server *start_server(const char *url)
{
	atomic_store(&quick_on_loop, 0);
	atomic_store(&quick_off_loop, 0);
	return grpcfx_start(url, 1, &service);
}

static int call(struct grpc_channel *ch, const char *method, const char *sleep_ms,
                int64_t timeout_ms, struct grpc_status *st)
{
	Csi__V1__GetPluginInfoRequest rq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	struct grpc_md md[] = {{"x-sleep", sleep_ms ? sleep_ms : "0"}, {NULL, NULL}};
	ProtobufCMessage *r;
	char path[64];
	int code;

	snprintf(path, sizeof(path), "/test.Threads/%s", method);
	code = grpc_channel_call(ch, path, &rq.base, &csi__v1__get_plugin_info_response__descriptor,
	                         &r, timeout_ms, md, st);
	if (code == GRPC_OK) {
		ck_assert_str_eq(((Csi__V1__GetPluginInfoResponse *)r)->name,
		                 strcmp(method, "Quick") == 0 ? "quick" : "slow");
		protobuf_c_message_free_unpacked(r, NULL);
	}
	return code;
}

struct slow_arg {
	const char *url, *sleep_ms;
	int code;
};

static void *slow_main(void *arg)
{
	struct slow_arg *a = arg;
	struct grpc_channel *ch;
	struct grpc_status st;
	struct err e = {0};

	ck_assert_int_eq(grpc_channel_new(&ch, a->url, NULL, &e), 0);
	a->code = call(ch, "Slow", a->sleep_ms, 60000, &st);
	grpc_channel_free(ch);
	return NULL;
}

/* The only worker is held in a blocking handler until the test lets it go: nonblocking calls on
 * another connection are answered meanwhile, on the thread that read them (held up behind the
 * worker, they would run into their deadlines). */
START_TEST(test_nonblocking_not_held_up_by_blocking)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct grpc_status st;
	struct slow_arg a;
	struct err e = {0};
	pthread_t t;

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	s = start_server(url);
	atomic_store(&slow_held, false);
	atomic_store(&slow_release, false);
	a = (struct slow_arg){.url = url, .sleep_ms = "hold"};
	ck_assert_int_eq(pthread_create(&t, NULL, slow_main, &a), 0);
	for (uint64_t t0 = h2_now_ms(); !atomic_load(&slow_held) && h2_now_ms() - t0 < 30000;)
		usleep(10000);
	ck_assert_msg(atomic_load(&slow_held), "the slow call never reached the worker");
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(call(ch, "Quick", NULL, 10000, &st), GRPC_OK);
	ck_assert_int_eq(atomic_load(&quick_on_loop), 20);
	ck_assert_int_eq(atomic_load(&quick_off_loop), 0);
	atomic_store(&slow_release, true);
	pthread_join(t, NULL);
	ck_assert_int_eq(a.code, GRPC_OK);
	grpc_channel_free(ch);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

struct burst {
	struct grpc_channel *ch;
	int ok;
};

static void *burst_main(void *arg)
{
	struct burst *b = arg;
	struct grpc_status st;

	for (int i = 0; i < 50; i++)
		b->ok += call(b->ch, i % 10 == 0 ? "Slow" : "Quick", "2", 20000, &st) == GRPC_OK;
	return NULL;
}

/* 16 callers share one connection, nonblocking and blocking calls mixed: all complete, and the
 * metrics count each call of each method. */
START_TEST(test_sixteen_in_flight_on_one_connection)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct burst b[16];
	pthread_t t[16];
	struct err e = {0};
	struct metrics_text text = {0};

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	s = start_server(url);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	for (int i = 0; i < 16; i++) {
		b[i] = (struct burst){.ch = ch};
		ck_assert_int_eq(pthread_create(&t[i], NULL, burst_main, &b[i]), 0);
	}
	for (int i = 0; i < 16; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(b[i].ok, 50);
	}
	ck_assert_int_eq(atomic_load(&quick_on_loop), 16 * 45);
	metrics_write(&text);
	const char *want[] = {
	    "\ngrpc_server_started_total{grpc_type=\"unary\",grpc_service=\"test.Threads\","
	    "grpc_method=\"Quick\"} 720\n",
	    "\ngrpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"test.Threads\","
	    "grpc_method=\"Quick\",grpc_code=\"OK\"} 720\n",
	    "\ngrpc_server_handling_seconds_count{grpc_type=\"unary\",grpc_service=\"test."
	    "Threads\",grpc_method=\"Quick\"} 720\n",
	    "\ngrpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"test.Threads\","
	    "grpc_method=\"Slow\",grpc_code=\"OK\"} 80\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(strstr(text.buf, want[i]), "missing %s", want[i]);
	metrics_text_free(&text);
	grpc_channel_free(ch);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

/* A blocking call's deadline ends it on time while nonblocking calls keep being answered; the
 * connection stays usable. */
START_TEST(test_deadline_still_fires)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct grpc_status st;
	struct err e = {0};

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	s = start_server(url);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	/* the handler would take 20 s: the bound is far from both that and the 300 ms deadline, so
	 * that a loaded machine's scheduling cannot decide the verdict */
	uint64_t t0 = h2_now_ms();
	ck_assert_int_eq(call(ch, "Slow", "20000", 300, &st), GRPC_DEADLINE_EXCEEDED);
	ck_assert_uint_lt(h2_now_ms() - t0, 10000);
	ck_assert_int_eq(call(ch, "Quick", NULL, 30000, &st), GRPC_OK);
	ck_assert_int_eq(call(ch, "Slow", "1", 30000, &st), GRPC_OK);
	grpc_channel_free(ch);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

static int h_stream(struct grpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	(void)call;
	(void)req;
	(void)ctx;
	return GRPC_OK;
}

/* Only a unary handler can run on the loop (a streaming one may wait for flow control), and
 * only a method of the service can be listed. */
START_TEST(test_nonblocking_list_checked)
{
	static const struct grpc_method mixed[] = {
	    GRPCFX_INFO("Quick", h_quick),
	    {.name = "Watch",
	     .server_stream = h_stream,
	     .req = &csi__v1__get_plugin_info_request__descriptor,
	     .resp = &csi__v1__get_plugin_info_response__descriptor}};
	static const char *const stream_listed[] = {"Quick", "Watch", NULL};
	static const char *const unknown_listed[] = {"Quik", NULL};
	static const struct grpc_service bad_stream = {
	    .name = "test.Bad", .methods = mixed, .n_methods = 2, .nonblocking = stream_listed};
	static const struct grpc_service bad_name = {
	    .name = "test.Bad", .methods = mixed, .n_methods = 2, .nonblocking = unknown_listed};
	struct grpc_server_opts o;
	struct grpc_server *s;
	struct h2_loop *loop;
	struct err e = {0};

	ck_assert_int_eq(h2_loop_new(&loop, &e), 0);
	grpc_server_opts_init(&o);
	o.workers = 0;
	o.loop = loop;
	ck_assert_int_eq(grpc_server_new(&s, &o, &e), 0);
	ck_assert_int_eq(grpc_server_add_service(s, &bad_stream, &e), -EINVAL);
	ck_assert_str_eq(e.msg,
	                 "service test.Bad: method Watch: only a unary method can be nonblocking");
	ck_assert_int_eq(grpc_server_add_service(s, &bad_name, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "service test.Bad: nonblocking method Quik does not exist");
	ck_assert_int_eq(grpc_server_add_service(s, &service, &e), 0);
	grpc_server_free(s);
	h2_loop_free(loop);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("grpc_nonblocking");
	TCase *t = tcase_create("grpc_nonblocking");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_nonblocking_not_held_up_by_blocking);
	tcase_add_test(t, test_sixteen_in_flight_on_one_connection);
	tcase_add_test(t, test_deadline_still_fires);
	tcase_add_test(t, test_nonblocking_list_checked);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
