/* Unit tests of the event loop's pollers under the gRPC server's worker path: the thread that
 * reads a request runs its handler and sends the response while the other poller keeps watching
 * the fds.  Many connections with concurrent callers each get their own answers (the sanitizers
 * check that nothing leaks or races); blocking handlers on one connection each get a thread of
 * their own (the jobs queued behind the first wake helpers); and a timer armed by the reading
 * thread fires on time though that thread then blocks in its job.  Our channels against our
 * server over a unix socket; waits are for conditions with generous deadlines. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "csi.pb-c.h"
#include "grpc/client.h"
#include "grpc/server.h"
#include "grpc/status.h"
#include "grpc_fixture.h"
#include "h2/loop.h"
#include "testutil.h"

static int h_echo(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	(void)req;
	(void)ctx;
	return grpcfx_answer(call, resp, "echo");
}

/* Big: the request is a GetPluginInfoResponse whose name is megabytes long; the answer's
 * vendor_version is that length. */
static int h_big(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                 void *ctx)
{
	const Csi__V1__GetPluginInfoResponse *in = (const Csi__V1__GetPluginInfoResponse *)req;
	Csi__V1__GetPluginInfoResponse *r = grpc_call_alloc(call, sizeof(*r));
	char len[32];

	(void)ctx;
	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	csi__v1__get_plugin_info_response__init(r);
	snprintf(len, sizeof(len), "%zu", strlen(in->name));
	r->name = "big";
	r->vendor_version = grpc_call_strdup(call, len);
	*resp = &r->base;
	return GRPC_OK;
}

static const struct grpc_method methods[] = {
    GRPCFX_INFO("Echo", h_echo),
    GRPCFX_INFO("Gate", grpcfx_h_gate),
    {.name = "Big",
     .unary = h_big,
     .req = &csi__v1__get_plugin_info_response__descriptor,
     .resp = &csi__v1__get_plugin_info_response__descriptor},
};
static const struct grpc_service service = {
    .name = "test.Pollers", .methods = methods, .n_methods = 3};

static struct grpc_server *start_server(const char *url, unsigned workers)
{
	return grpcfx_start(url, workers, &service);
}

/* One call of method with x-id id (and a grpc-timeout header of server_timeout, if not NULL,
 * which the client itself does not watch); on OK checks that the answer is this call's own. */
static int call_with(struct grpc_channel *ch, const char *method, const char *id,
                     int64_t timeout_ms, const char *server_timeout)
{
	struct grpc_status st;
	return grpcfx_call(ch, "test.Pollers", method, id, timeout_ms, server_timeout, &st);
}

static int call(struct grpc_channel *ch, const char *method, const char *id, int64_t timeout_ms)
{
	return call_with(ch, method, id, timeout_ms, NULL);
}

#define N_CONNS   12
#define PER_CONN  3
#define N_CALLS   60
#define N_CALLERS (N_CONNS * PER_CONN)

/* 12 connections with 3 callers each, 60 calls per caller at once: each call gets its own
 * answer, whichever poller read it and whichever thread ran it; then everything is freed
 * (LeakSanitizer) and the connections are gone. */
START_TEST(test_many_connections_concurrent_calls)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_channel *ch[N_CONNS];
	struct grpcfx_caller c[N_CALLERS];
	pthread_t t[N_CALLERS];
	struct err e = {0};

	snprintf(url, sizeof(url), "unix://%s/p.sock", dir);
	struct grpc_server *s = start_server(url, 4);
	for (int i = 0; i < N_CONNS; i++)
		ck_assert_int_eq(grpc_channel_new(&ch[i], url, NULL, &e), 0);
	for (int i = 0; i < N_CALLERS; i++) {
		c[i] = (struct grpcfx_caller){
		    .ch = ch[i % N_CONNS], .method = "Echo", .index = i, .n = N_CALLS};
		ck_assert_int_eq(pthread_create(&t[i], NULL, grpcfx_caller_main, &c[i]), 0);
	}
	for (int i = 0; i < N_CALLERS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(c[i].ok == N_CALLS, "caller %d: %d of %d calls OK (last code %d)", i,
		              c[i].ok, N_CALLS, c[i].last_code);
	}
	for (int i = 0; i < N_CONNS; i++)
		grpc_channel_free(ch[i]);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

/* Six blocking handlers on one connection, sent at once: each runs on a thread of its own (all
 * six enter while none has returned), and a call on another connection is answered meanwhile. */
START_TEST(test_blocking_handlers_one_connection_all_run)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_channel *ch, *other;
	struct grpcfx_caller c[6];
	pthread_t t[6];
	struct err e = {0};

	snprintf(url, sizeof(url), "unix://%s/p.sock", dir);
	struct grpc_server *s = start_server(url, 8);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	ck_assert_int_eq(grpc_channel_new(&other, url, NULL, &e), 0);
	for (int i = 0; i < 6; i++) {
		c[i] = (struct grpcfx_caller){.ch = ch, .method = "Gate", .index = i, .n = 1};
		ck_assert_int_eq(pthread_create(&t[i], NULL, grpcfx_caller_main, &c[i]), 0);
	}
	ck_assert_int_eq(grpcfx_wait(&grpcfx_gate_entered, 6), 6);
	ck_assert_int_eq(call(other, "Echo", "other", 60000), GRPC_OK);
	atomic_store(&grpcfx_gate_open, 1);
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(c[i].ok, 1);
	}
	grpc_channel_free(other);
	grpc_channel_free(ch);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

#define BIG_LEN (3 * 1024 * 1024)

struct big_caller {
	struct grpc_channel *ch;
	const char *name;
	int ok;
};

static void *big_caller_main(void *arg)
{
	struct big_caller *b = arg;
	Csi__V1__GetPluginInfoResponse rq = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;
	struct grpc_status st;
	ProtobufCMessage *r;
	char want[32];

	rq.name = (char *)b->name;
	snprintf(want, sizeof(want), "%d", BIG_LEN);
	for (int i = 0; i < 3; i++) {
		if (grpc_channel_call(b->ch, "/test.Pollers/Big", &rq.base,
		                      &csi__v1__get_plugin_info_response__descriptor, &r, 60000,
		                      NULL, &st) != GRPC_OK)
			continue;
		Csi__V1__GetPluginInfoResponse *info = (Csi__V1__GetPluginInfoResponse *)r;
		b->ok += strcmp(info->vendor_version, want) == 0;
		protobuf_c_message_free_unpacked(r, NULL);
	}
	return NULL;
}

/* Requests of 3 MiB from four callers on one connection: the socket holds more than one read
 * turn takes (the edge-triggered connection asks for its event again), and every call arrives
 * whole. */
START_TEST(test_big_requests_one_connection)
{
	const char *dir = tu_mkdtemp();
	char url[512], *name = malloc(BIG_LEN + 1);
	struct grpc_channel *ch;
	struct big_caller b[4];
	pthread_t t[4];
	struct err e = {0};

	ck_assert_ptr_nonnull(name);
	memset(name, 'n', BIG_LEN);
	name[BIG_LEN] = 0;
	snprintf(url, sizeof(url), "unix://%s/p.sock", dir);
	struct grpc_server *s = start_server(url, 4);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	for (int i = 0; i < 4; i++) {
		b[i] = (struct big_caller){.ch = ch, .name = name};
		ck_assert_int_eq(pthread_create(&t[i], NULL, big_caller_main, &b[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(b[i].ok, 3);
	}
	grpc_channel_free(ch);
	grpcfx_stop(s);
	free(name);
	tu_rmtree(dir);
}
END_TEST

/* ---- the loop: a timer armed by a poller that then runs a blocking job ----------------------- */

struct timer_case {
	struct h2_loop *loop;
	struct h2_jobs *jobs;
	struct h2_timer timer;
	int fds[2];
	atomic_int fired, job_done;
	atomic_int release; /* the test has seen the timer fire, or given up on it */
};

static void timer_fired(void *arg)
{
	struct timer_case *tc = arg;
	atomic_store(&tc->fired, 1);
}

/* Blocks until the timer fired or the test gave up on it: meanwhile this thread, which armed
 * the timer, cannot poll. */
static void wait_for_timer_job(void *arg)
{
	struct timer_case *tc = arg;

	while (!atomic_load(&tc->fired) && !atomic_load(&tc->release))
		usleep(1000);
	atomic_store(&tc->job_done, 1);
}

/* Loop work of the poller the pipe woke: arms a timer 100 ms ahead and submits a job that this
 * same thread runs next, blocking until the timer fired. */
static void pipe_ready(void *arg, uint32_t events)
{
	struct timer_case *tc = arg;
	char b;

	(void)events;
	ck_assert_int_eq(read(tc->fds[0], &b, 1), 1);
	h2_timer_arm(tc->loop, &tc->timer, h2_now_ms() + 100, timer_fired, tc);
	ck_assert_int_eq(h2_jobs_submit(tc->jobs, wait_for_timer_job, tc), 0);
}

static void watch_pipe(void *arg)
{
	struct timer_case *tc = arg;
	ck_assert_int_eq(h2_loop_add_fd(tc->loop, tc->fds[0], EPOLLIN, pipe_ready, tc), 0);
}

static void unwatch_pipe(void *arg)
{
	struct timer_case *tc = arg;
	h2_loop_del_fd(tc->loop, tc->fds[0]);
	h2_timer_cancel(tc->loop, &tc->timer);
}

/* The other poller sleeps without a timeout (the loop had no timer) while the thread that armed
 * the timer runs the job: that poller is woken to watch the timer, which fires, and the job
 * that waits for it ends. */
START_TEST(test_timer_armed_before_blocking_job_fires)
{
	struct timer_case tc = {0};
	struct err e = {0};

	ck_assert_int_eq(pipe(tc.fds), 0);
	ck_assert_int_eq(h2_loop_new(&tc.loop, &e), 0);
	ck_assert_int_eq(h2_jobs_new(&tc.jobs, tc.loop, 2, &e), 0);
	ck_assert_int_eq(h2_loop_start(tc.loop, &e), 0);
	h2_loop_run_sync(tc.loop, watch_pipe, &tc);
	usleep(100000); /* lets both pollers go to sleep (the test passes either way) */
	ck_assert_int_eq(write(tc.fds[1], "x", 1), 1);
	int fired = grpcfx_wait(&tc.fired, 1);
	atomic_store(&tc.release, 1);
	ck_assert_msg(fired == 1, "the timer did not fire while its job blocked");
	ck_assert_int_eq(grpcfx_wait(&tc.job_done, 1), 1);
	h2_loop_run_sync(tc.loop, unwatch_pipe, &tc);
	h2_jobs_free(tc.jobs);
	h2_loop_free(tc.loop);
	close(tc.fds[0]);
	close(tc.fds[1]);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("grpc_pollers");
	TCase *t = tcase_create("grpc_pollers");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_many_connections_concurrent_calls);
	tcase_add_test(t, test_blocking_handlers_one_connection_all_run);
	tcase_add_test(t, test_big_requests_one_connection);
	tcase_add_test(t, test_timer_armed_before_blocking_job_fires);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
