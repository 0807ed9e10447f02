/* src/h2/client (the generic HTTP/2 client under src/kube) against an in-process HTTP/2 TLS
 * server (kube_fake.h): headers and body both ways, a response in many DATA frames, a server
 * that drops its connections (the next request reconnects), a server that is gone (fail fast,
 * then back-off), a response larger than the stream's buffer, and cancellation.  Receive flow
 * control against a plaintext nghttp2 server on a thread of its own that sends as fast as the
 * windows let it: a reader that takes nothing stops it at one stream window, a slow reader
 * paces it, and a stopped stream does not hold up the others on the connection. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

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

START_TEST(test_small_buffer_and_cancel)
{
	struct h2_client *cl = client(4096);
	struct h2_request big = {"GET", "/big", NULL, 0, NULL, 0};
	struct h2_request hold = {"GET", "/hold", NULL, 0, NULL, 0};
	struct h2_stream *s;
	struct err e = {0};
	char buf[64], *b;
	size_t n;

	/* a response larger than the buffer waits for the reader instead of failing */
	ck_assert_int_eq(h2_client_open(cl, &big, &s, &e), 0);
	ck_assert_int_eq(h2_stream_head(s, 10000, &e), 200);
	usleep(100000);
	ck_assert_msg(h2_stream_read_all(s, &b, &n, 10000, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(n, 10000);
	ck_assert_uint_eq(strspn(b, "x"), 10000);
	free(b);
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

/* ---- receive flow control -------------------------------------------------------------------- */

/* A plaintext HTTP/2 server on its own thread, one connection: it answers each request with
 * a body of `total` bytes (0: endless, a watch) of a known pattern, as fast as the client's
 * windows let it, and counts what it has sent per stream. */
struct flood {
	int lfd, port;
	pthread_t th;
	atomic_bool stop;
	size_t total;
	atomic_size_t sent[8]; /* by request order */
	int32_t sid[8];
	int n;
};

struct flood_conn { /* the server session's user data */
	int fd;
	struct flood *f;
};

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + i / 251);
}

static ssize_t flood_read(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t len,
                          uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct flood *f = ((struct flood_conn *)ud)->f;
	atomic_size_t *sent = src->ptr;
	size_t off = atomic_load(sent);
	(void)ng;
	(void)sid;

	if (f->total && len > f->total - off)
		len = f->total - off;
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(off + i);
	atomic_store(sent, off + len);
	if (f->total && off + len == f->total)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)len;
}

static int flood_frame(nghttp2_session *ng, const nghttp2_frame *fr, void *ud)
{
	struct flood *f = ((struct flood_conn *)ud)->f;
	nghttp2_nv nv[] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0}};

	if (fr->hd.type != NGHTTP2_HEADERS || fr->headers.cat != NGHTTP2_HCAT_REQUEST || f->n == 8)
		return 0;
	nghttp2_data_provider dp = {.source.ptr = &f->sent[f->n], .read_callback = flood_read};
	f->sid[f->n++] = fr->hd.stream_id;
	return nghttp2_submit_response(ng, fr->hd.stream_id, nv, 1, &dp);
}

static ssize_t flood_send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
                             void *ud)
{
	int fd = ((struct flood_conn *)ud)->fd;
	(void)ng;
	(void)flags;

	for (size_t done = 0; done < len;) {
		ssize_t n = send(fd, data + done, len - done, MSG_NOSIGNAL);
		if (n < 0)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		done += (size_t)n;
	}
	return (ssize_t)len;
}

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	struct flood_conn fc = {accept(f->lfd, NULL, NULL), f};
	nghttp2_session_callbacks *cb;
	nghttp2_session *ng;
	uint8_t buf[65536];

	if (fc.fd < 0)
		return NULL;
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_send_callback(cb, flood_send_cb);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, flood_frame);
	nghttp2_session_server_new(&ng, cb, &fc);
	nghttp2_session_callbacks_del(cb);
	nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, NULL, 0);
	while (!atomic_load(&f->stop)) {
		struct pollfd p = {.fd = fc.fd, .events = POLLIN};
		ssize_t n;
		if (nghttp2_session_send(ng) != 0)
			break;
		if (poll(&p, 1, 20) <= 0)
			continue;
		n = recv(fc.fd, buf, sizeof(buf), 0);
		if (n <= 0 || nghttp2_session_mem_recv(ng, buf, (size_t)n) < 0)
			break;
	}
	nghttp2_session_del(ng);
	close(fc.fd);
	return NULL;
}

static struct flood *flood_start(size_t total)
{
	struct flood *f = calloc(1, sizeof(*f));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);

	ck_assert_ptr_nonnull(f);
	f->total = total;
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(f->lfd, 0);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(f->lfd, 4), 0);
	ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&a, &l), 0);
	f->port = ntohs(a.sin_port);
	ck_assert_int_eq(pthread_create(&f->th, NULL, flood_main, f), 0);
	return f;
}

static void flood_stop(struct flood *f)
{
	atomic_store(&f->stop, true);
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->th, NULL);
	close(f->lfd);
	free(f);
}

/* What the server has sent on the i-th stream once it stopped sending (nothing new for 200 ms;
 * at most 10 s). */
static size_t flood_settled(struct flood *f, int i)
{
	size_t last = (size_t)-1, now = atomic_load(&f->sent[i]);
	for (int k = 0; k < 100 && now != last; k++) {
		last = now;
		usleep(200000);
		now = atomic_load(&f->sent[i]);
	}
	return now;
}

static struct h2_client *flood_client(struct flood *f, size_t max_buffer)
{
	struct h2_client_opts o = {.max_buffer = max_buffer};
	struct h2_client *cl = NULL;
	char target[64];
	struct err e = {0};

	snprintf(target, sizeof(target), "127.0.0.1:%d", f->port);
	ck_assert_msg(h2_client_new(&cl, target, &o, &e) == 0, "%s", e.msg);
	return cl;
}

static struct h2_stream *flood_get(struct h2_client *cl)
{
	struct h2_request rq = {"GET", "/flood", NULL, 0, NULL, 0};
	struct h2_stream *s;
	struct err e = {0};

	ck_assert_int_eq(h2_client_open(cl, &rq, &s, &e), 0);
	ck_assert_msg(h2_stream_head(s, 10000, &e) == 200, "%s", e.msg);
	return s;
}

/* Reads n bytes of the pattern from offset *off on. */
static void read_pattern(struct h2_stream *s, size_t *off, size_t n)
{
	static uint8_t buf[16384];
	struct err e = {0};

	while (n > 0) {
		ssize_t r = h2_stream_read(s, buf, n < sizeof(buf) ? n : sizeof(buf), 10000, &e);
		ssize_t bad = 0;
		if (r <= 0)
			ck_abort_msg("read: %zd %s", r, e.msg);
		while (bad < r && buf[bad] == pattern(*off + (size_t)bad))
			bad++;
		if (bad < r)
			ck_abort_msg("byte %zu of the body is wrong", *off + (size_t)bad);
		*off += (size_t)r;
		n -= (size_t)r;
	}
}

/* A server that has far more to send than the window, to a reader that takes nothing: it stops
 * at one stream window (the default, 1 MiB); as the reader takes bytes it goes on, never more
 * than a window ahead of the reader, and the whole body arrives intact. */
START_TEST(test_flow_reader_stops_server)
{
	size_t total = 24u << 20, win = 1u << 20, off = 0;
	struct flood *f = flood_start(total);
	struct h2_client *cl = flood_client(f, 0);
	struct h2_stream *s = flood_get(cl);
	struct err e = {0};
	char one;

	ck_assert_uint_le(flood_settled(f, 0), win);
	for (int round = 0; round < 4; round++) {
		read_pattern(s, &off, 3 * win);
		ck_assert_uint_le(flood_settled(f, 0), off + win);
	}
	read_pattern(s, &off, total - off);
	ck_assert_int_eq(h2_stream_read(s, &one, 1, 10000, &e), 0);
	h2_stream_free(s);
	h2_client_free(cl);
	flood_stop(f);
}
END_TEST

/* A watch (an endless body) read slowly in small pieces with a small window: what the server
 * gets ahead of the reader, which is all the stream can hold, stays within the window however
 * long it runs; cancelling ends it. */
START_TEST(test_flow_slow_watch)
{
	size_t win = 64u << 10, off = 0;
	struct flood *f = flood_start(0);
	struct h2_client *cl = flood_client(f, win);
	struct h2_stream *s = flood_get(cl);
	struct err e = {0};
	char one;

	for (int i = 0; i < 40; i++) {
		read_pattern(s, &off, 10000);
		usleep(5000);
		ck_assert_uint_le(atomic_load(&f->sent[0]), off + win);
	}
	ck_assert_uint_le(flood_settled(f, 0), off + win);
	h2_stream_cancel(s);
	ck_assert_int_eq(h2_stream_read(s, &one, 1, 10000, &e), -ECANCELED);
	h2_stream_free(s);
	h2_client_free(cl);
	flood_stop(f);
}
END_TEST

/* Streams that nobody reads hold their own windows only: on the same connection a later stream
 * is read to its end while three stopped ones each hold a window of bytes (together more than
 * the connection's 16 MiB window would allow if they counted against it). */
START_TEST(test_flow_stopped_streams_do_not_block_others)
{
	size_t total = 12u << 20, win = 8u << 20, off = 0;
	struct flood *f = flood_start(total);
	struct h2_client *cl = flood_client(f, win);
	struct h2_stream *stopped[3], *s;

	for (int i = 0; i < 3; i++) {
		stopped[i] = flood_get(cl);
		ck_assert_uint_le(flood_settled(f, i), win);
	}
	s = flood_get(cl);
	read_pattern(s, &off, total);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_le(atomic_load(&f->sent[i]), win);
		h2_stream_free(stopped[i]);
	}
	h2_stream_free(s);
	ck_assert_uint_eq(h2_client_connections(cl), 1);
	h2_client_free(cl);
	flood_stop(f);
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
	tcase_add_test(t, test_small_buffer_and_cancel);
	suite_add_tcase(s, t);
	t = tcase_create("flow");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_flow_reader_stops_server);
	tcase_add_test(t, test_flow_slow_watch);
	tcase_add_test(t, test_flow_stopped_streams_do_not_block_others);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
