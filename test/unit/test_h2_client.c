/* src/h2/client (the generic HTTP/2 client under src/kube) against an in-process HTTP/2 TLS
 * server (kube_fake.h): headers and body both ways, a response in many DATA frames, a server
 * that drops its connections (the next request reconnects), a server that is gone (fail fast,
 * then back-off), a reader that falls behind its buffer limit, and cancellation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h2/client.h"
#include "h2/tls.h"
#include "kube_fake.h"
#include "testutil.h"

static struct kf_certs certs;
static struct kf_server *srv;
static struct h2_tls_cfg *tls;

static void handler(void *arg, const struct kf_req *rq, struct kf_resp *resp)
{
	(void)arg;
	resp->status = 200;
	if (strcmp(rq->path, "/big") == 0) {
		char chunk[1000];
		memset(chunk, 'x', sizeof(chunk));
		for (int i = 0; i < 10; i++)
			kf_resp_add(resp, chunk, sizeof(chunk));
	} else if (strcmp(rq->path, "/hold") == 0) {
		resp->hold = true;
	} else {
		kf_resp_add(resp, "echo:", 5);
		kf_resp_add(resp, rq->body ? rq->body : "", rq->body_len);
	}
}

static void setup(void)
{
	struct err e = {0};

	kf_certs_make(&certs);
	srv = kf_start(&certs, false, handler, NULL);
	ck_assert_int_eq(h2_tls_client_cfg_new(&tls, certs.ca, NULL, NULL, &e), 0);
}

static void teardown(void)
{
	if (srv)
		kf_stop(srv);
	h2_tls_cfg_free(tls);
	kf_certs_remove(&certs);
}

static struct h2_client *client(size_t max_buffer)
{
	struct h2_client_opts o = {.tls = tls, .max_buffer = max_buffer};
	struct h2_client *cl = NULL;
	char target[64];
	struct err e = {0};

	snprintf(target, sizeof(target), "127.0.0.1:%d", kf_port(srv));
	ck_assert_msg(h2_client_new(&cl, target, &o, &e) == 0, "%s", e.msg);
	return cl;
}

/* POST path with body; returns the status (or errno) and the body in *out. */
static int post(struct h2_client *cl, const char *path, const char *body, char **out)
{
	struct h2_header h[] = {{"x-test", "1"}};
	struct h2_request rq = {"POST", path, h, 1, body, strlen(body)};
	struct h2_stream *s;
	struct err e = {0};
	size_t n;
	int rc = h2_client_open(cl, &rq, &s, &e);

	*out = NULL;
	if (rc < 0)
		return rc;
	rc = h2_stream_head(s, 10000, &e);
	if (rc >= 0 && h2_stream_read_all(s, out, &n, 10000, &e) < 0)
		rc = e.code;
	h2_stream_free(s);
	return rc;
}

START_TEST(test_request_response)
{
	struct h2_client *cl = client(0);
	char *b;

	ck_assert_int_eq(post(cl, "/x?q=1", "hello", &b), 200);
	ck_assert_str_eq(b, "echo:hello");
	free(b);
	ck_assert_str_eq(kf_request(srv, 0)->method, "POST");
	ck_assert_str_eq(kf_request(srv, 0)->path, "/x?q=1");
	ck_assert_int_eq(post(cl, "/big", "", &b), 200);
	ck_assert_uint_eq(strlen(b), 10000);
	free(b);
	ck_assert_uint_eq(h2_client_connections(cl), 1);
	h2_client_free(cl);
}
END_TEST

START_TEST(test_reconnect_after_drop)
{
	struct h2_client *cl = client(0);
	char *b = NULL;
	int rc = 0;

	ck_assert_int_eq(post(cl, "/", "a", &b), 200);
	free(b);
	kf_drop(srv);
	/* a request racing the close may fail; one within the next 2 s reconnects */
	for (int i = 0; i < 200; i++) {
		rc = post(cl, "/", "b", &b);
		free(b);
		if (rc == 200)
			break;
		usleep(10000);
	}
	ck_assert_int_eq(rc, 200);
	ck_assert_uint_eq(h2_client_connections(cl), 2);
	ck_assert_uint_eq(kf_connections(srv), 2);
	h2_client_free(cl);
}
END_TEST

START_TEST(test_goaway)
{
	struct h2_client *cl = client(0);
	struct h2_request hold = {"GET", "/hold", NULL, 0, NULL, 0};
	struct h2_stream *s;
	struct err e = {0};
	char buf[16], *b = NULL;
	int rc = 0;

	ck_assert_int_eq(h2_client_open(cl, &hold, &s, &e), 0); /* a watch in flight */
	ck_assert_int_eq(h2_stream_head(s, 10000, &e), 200);
	kf_goaway(srv);
	/* new requests move to a new connection once the GOAWAY is in (bounded wait) */
	for (int i = 0; i < 200 && h2_client_connections(cl) < 2; i++) {
		rc = post(cl, "/", "x", &b);
		free(b);
		if (h2_client_connections(cl) < 2)
			usleep(10000);
	}
	ck_assert_int_eq(rc, 200);
	ck_assert_uint_eq(h2_client_connections(cl), 2);
	/* the stream in flight on the old connection is untouched */
	ck_assert_int_eq(h2_stream_read(s, buf, sizeof(buf), 50, &e), -ETIMEDOUT);
	h2_stream_free(s);
	h2_client_free(cl); /* closes both connections */
}
END_TEST

START_TEST(test_server_gone)
{
	struct h2_client *cl = client(0);
	struct h2_request rq = {"GET", "/", NULL, 0, NULL, 0};
	struct h2_stream *s;
	struct err e = {0};
	char *b;

	kf_stop(srv);
	srv = NULL;
	ck_assert_int_lt(post(cl, "/", "", &b), 0);
	/* within the back-off (200 ms, doubling): fails at once and says when it retries; a stalled
	 * machine may pass the window, so look a few times (each miss doubles it) */
	for (int i = 0; i < 5 && !strstr(e.msg, "retrying in"); i++) {
		ck_assert_int_eq(h2_client_open(cl, &rq, &s, &e), 0);
		ck_assert_int_eq(h2_stream_head(s, 5000, &e), -ECONNREFUSED);
		h2_stream_free(s);
	}
	ck_assert_ptr_nonnull(strstr(e.msg, "retrying in"));
	ck_assert_uint_le(h2_client_connections(cl), 5);
	h2_client_free(cl);
}
END_TEST

START_TEST(test_buffer_limit_and_cancel)
{
	struct h2_client *cl = client(4096);
	struct h2_request big = {"GET", "/big", NULL, 0, NULL, 0};
	struct h2_request hold = {"GET", "/hold", NULL, 0, NULL, 0};
	struct h2_stream *s;
	struct err e = {0};
	char buf[64];

	ck_assert_int_eq(h2_client_open(cl, &big, &s, &e), 0);
	ck_assert_int_eq(h2_stream_head(s, 10000, &e), 200);
	while (h2_stream_read(s, buf, 0, 10000, &e) == 0 && e.code == 0)
		usleep(1000); /* never take the bytes: let them pile up */
	ck_assert_int_eq(h2_stream_read(s, buf, sizeof(buf), 10000, &e), -EMSGSIZE);
	h2_stream_free(s);

	ck_assert_int_eq(h2_client_open(cl, &hold, &s, &e), 0);
	ck_assert_int_eq(h2_stream_head(s, 10000, &e), 200);
	ck_assert_int_eq(h2_stream_read(s, buf, sizeof(buf), 50, &e), -ETIMEDOUT);
	h2_stream_cancel(s);
	ck_assert_int_eq(h2_stream_read(s, buf, sizeof(buf), 10000, &e), -ECANCELED);
	h2_stream_free(s);
	h2_client_free(cl);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("h2_client");
	TCase *t = tcase_create("server");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_request_response);
	tcase_add_test(t, test_reconnect_after_drop);
	tcase_add_test(t, test_goaway);
	tcase_add_test(t, test_server_gone);
	tcase_add_test(t, test_buffer_limit_and_cancel);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
