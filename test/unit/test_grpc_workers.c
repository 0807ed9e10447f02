/* Unit tests of the gRPC server's worker path (blocking handlers on the loop's threads): many
 * streams with blocking handlers on one connection each get their own answer, a handler that
 * blocks does not hold up the others, a call cancelled mid-handler ends and its handler sees it,
 * and a shutdown with handlers in flight ends them and frees everything.  Below them, the event
 * loop's deferred posts (h2_loop_run_or_defer, how a handler thread hands its response to the
 * loop) all run while other threads hold the loop.  Our channel against our server over a unix
 * socket; waits are for conditions with generous deadlines, never fixed sleeps. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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
#include "testutil.h"

#define WAIT_MS GRPCFX_WAIT_MS

/* Blocking (it runs on a worker): answers with the caller's x-id after a millisecond. */
static int h_echo(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	(void)req;
	(void)ctx;
	usleep(1000);
	return grpcfx_answer(call, resp, "echo");
}

static const struct grpc_method methods[] = {GRPCFX_INFO("Echo", h_echo),
                                             GRPCFX_INFO("Gate", grpcfx_h_gate)};
static const struct grpc_service service = {
    .name = "test.Workers", .methods = methods, .n_methods = 2};

static struct grpc_server *start_server(const char *url, unsigned workers)
{
	return grpcfx_start(url, workers, &service);
}

/* One call of method with x-id id; on OK checks that the answer is this call's own. */
static int call(struct grpc_channel *ch, const char *method, const char *id, int64_t timeout_ms,
                struct grpc_status *st)
{
	return grpcfx_call(ch, "test.Workers", method, id, timeout_ms, NULL, st);
}

/* 32 callers share one connection, every call on a worker: each gets its own answer, and the
 * responses that leave together in one write stay whole and in their streams. */
START_TEST(test_many_blocking_streams_one_connection)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_channel *ch;
	struct grpcfx_caller c[32];
	pthread_t t[32];
	struct err e = {0};

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	struct grpc_server *s = start_server(url, 8);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	for (int i = 0; i < 32; i++) {
		c[i] = (struct grpcfx_caller){
		    .ch = ch, .method = "Echo", .index = i, .n = 40, .timeout_ms = 60000};
		ck_assert_int_eq(pthread_create(&t[i], NULL, grpcfx_caller_main, &c[i]), 0);
	}
	for (int i = 0; i < 32; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(c[i].ok == 40, "caller %d: %d of 40 calls OK (last code %d)", i,
		              c[i].ok, c[i].last_code);
	}
	grpc_channel_free(ch);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

/* A handler that blocks holds one worker only: calls on the same connection keep being
 * answered by the other, then the blocked one completes too. */
START_TEST(test_blocked_handler_holds_up_nothing)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_channel *ch;
	struct grpc_status st;
	struct err e = {0};
	pthread_t t;

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	struct grpc_server *s = start_server(url, 2);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	struct grpcfx_caller gate = {
	    .ch = ch, .method = "Gate", .index = 99, .n = 1, .timeout_ms = 60000};
	ck_assert_int_eq(pthread_create(&t, NULL, grpcfx_caller_main, &gate), 0);
	ck_assert_int_eq(grpcfx_wait(&grpcfx_gate_entered, 1), 1);
	for (int i = 0; i < 50; i++) {
		char id[16];
		snprintf(id, sizeof(id), "%d", i);
		ck_assert_int_eq(call(ch, "Echo", id, 60000, &st), GRPC_OK);
	}
	ck_assert_int_eq(gate.ok, 0); /* still blocked: nothing waited for it */
	atomic_store(&grpcfx_gate_open, 1);
	pthread_join(t, NULL);
	ck_assert_int_eq(gate.ok, 1);
	grpc_channel_free(ch);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

/* A call whose deadline passes while its handler blocks ends with DEADLINE_EXCEEDED, the handler
 * sees it cancelled, and the connection goes on serving. */
START_TEST(test_cancelled_mid_call)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_channel *ch;
	struct grpc_status st;
	struct err e = {0};

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	struct grpc_server *s = start_server(url, 2);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	/* A loaded machine may take a worker to the call only after its deadline, and then the
	 * handler never runs: longer deadlines until one handler ran.  Every handler that ran
	 * waits for its cancellation, so each one must see it. */
	int entered = 0;
	for (int64_t ms = 200; ms <= 12800 && !entered; ms *= 2) {
		ck_assert_int_eq(call(ch, "Gate", "late", ms, &st), GRPC_DEADLINE_EXCEEDED);
		uint64_t until = h2_now_ms() + 2000;
		while (!(entered = atomic_load(&grpcfx_gate_entered)) && h2_now_ms() < until)
			usleep(2000);
	}
	ck_assert_msg(entered > 0, "no Gate handler ran before its call's deadline");
	ck_assert_int_ge(grpcfx_wait(&grpcfx_gate_cancelled, entered), entered);
	ck_assert_int_eq(call(ch, "Echo", "after", 60000, &st), GRPC_OK);
	grpc_channel_free(ch);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

/* Shutdown with four handlers blocked: the grace period ends, their calls are cancelled (the
 * handlers see it and return), every caller gets an answer, and the server frees cleanly (the
 * sanitizers check for leaks and use after free). */
START_TEST(test_shutdown_with_calls_in_flight)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_channel *ch;
	struct grpcfx_caller c[4];
	pthread_t t[4];
	struct err e = {0};

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	struct grpc_server *s = start_server(url, 4);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	for (int i = 0; i < 4; i++) {
		c[i] = (struct grpcfx_caller){
		    .ch = ch, .method = "Gate", .index = i, .n = 1, .timeout_ms = 60000};
		ck_assert_int_eq(pthread_create(&t[i], NULL, grpcfx_caller_main, &c[i]), 0);
	}
	ck_assert_int_eq(grpcfx_wait(&grpcfx_gate_entered, 4), 4);
	grpc_server_shutdown(s, 100);
	ck_assert_int_eq(grpcfx_wait(&grpcfx_gate_cancelled, 4), 4);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(c[i].ok, 0);
		ck_assert_int_ne(c[i].last_code, GRPC_OK);
	}
	grpc_channel_free(ch);
	grpcfx_stop(s);
	tu_rmtree(dir);
}
END_TEST

/* ---- the loop's deferred posts ----------------------------------------------------------- */

struct deferrer {
	struct h2_loop *loop;
	struct h2_post post;
	atomic_int queued; /* post is queued */
	atomic_int *ran;
	int n;
};

static void deferred_fn(void *arg)
{
	struct deferrer *d = arg;
	ck_assert(h2_loop_in_thread(d->loop));
	atomic_store(&d->queued, 0);
	atomic_fetch_add(d->ran, 1);
}

static void *deferrer_main(void *arg)
{
	struct deferrer *d = arg;

	for (int i = 0; i < d->n; i++) {
		uint64_t until = h2_now_ms() + WAIT_MS;
		while (atomic_load(&d->queued) && h2_now_ms() < until)
			sched_yield(); /* the post may be queued once at a time */
		ck_assert(!atomic_load(&d->queued));
		atomic_store(&d->queued, 1);
		h2_loop_run_or_defer(d->loop, &d->post, deferred_fn, d);
	}
	return NULL;
}

static void busy_fn(void *arg)
{
	(void)arg;
	for (volatile int i = 0; i < 2000; i++)
		;
}

static void *holder_main(void *arg)
{
	struct h2_loop *l = arg;
	for (int i = 0; i < 2000; i++)
		h2_loop_run_sync(l, busy_fn, NULL);
	return NULL;
}

/* Four threads defer 2,000 posts each while two others keep taking the loop: every post runs,
 * holding the loop, though nothing wakes the poller for them. */
START_TEST(test_deferred_posts_never_stranded)
{
	struct h2_loop *l;
	struct deferrer d[4];
	pthread_t td[4], th[2];
	atomic_int ran;
	struct err e = {0};

	atomic_init(&ran, 0);
	ck_assert_int_eq(h2_loop_new(&l, &e), 0);
	ck_assert_int_eq(h2_loop_start(l, &e), 0);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, holder_main, l), 0);
	for (int i = 0; i < 4; i++) {
		d[i] = (struct deferrer){.loop = l, .ran = &ran, .n = 2000};
		atomic_init(&d[i].queued, 0);
		ck_assert_int_eq(pthread_create(&td[i], NULL, deferrer_main, &d[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(td[i], NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(grpcfx_wait(&ran, 8000), 8000);
	h2_loop_free(l);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("grpc_workers");
	TCase *t = tcase_create("grpc_workers");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_many_blocking_streams_one_connection);
	tcase_add_test(t, test_blocked_handler_holds_up_nothing);
	tcase_add_test(t, test_cancelled_mid_call);
	tcase_add_test(t, test_shutdown_with_calls_in_flight);
	tcase_add_test(t, test_deferred_posts_never_stranded);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
