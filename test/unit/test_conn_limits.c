/* The gRPC server's connection limits (grpc/server.h, h2/conn.h, h2/connlog.h) over loopback
 * TCP with short timeouts: a connection that sends nothing, or only part of the client
 * preface, is closed at the handshake deadline; one with no call is closed after the idle
 * timeout even while it sends PINGs; keepalive PINGs a quiet peer and closes it when nothing
 * answers, while a peer that answers stays; the per-peer cap refuses one peer's extra
 * connection while another peer still gets in; refusals, time-outs and refused mTLS
 * handshakes are logged at the default verbosity, once per interval with the count after it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "grpc/client.h"
#include "grpc/health/v1/health.pb-c.h"
#include "grpc/server.h"
#include "h2/connlog.h"
#include "h2/loop.h"
#include "testutil.h"

static const char magic[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* How long a test waits for something the server must do (a close, a log line) before it
 * fails: waits end as soon as it happens, so this only bounds a broken server, and a loaded
 * machine (the sanitizers, other test programs) must not fail a test.  Lower bounds are
 * measured from before the connection exists, so they hold however late the test runs. */
#define PATIENCE_MS 20000
static char logpath[600];

/* Log lines go to a file of the test's own. */
static void capture_log(void)
{
	const char *dir = tu_mkdtemp();
	int fd;
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	log_set_fd(fd);
	log_set_verbosity(0);
}

/* Lines of the captured log that contain every one of the texts. */
static int log_count(const char *a, const char *b, const char *c)
{
	char line[2048];
	int n = 0;
	FILE *f = fopen(logpath, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, a) && (!b || strstr(line, b)) && (!c || strstr(line, c));
	fclose(f);
	return n;
}

static struct grpc_server *start(struct grpc_server_opts *o)
{
	static const char *listen[] = {"127.0.0.1:0", NULL};
	struct grpc_server *s;
	struct err e = {0};
	o->listen = listen;
	o->workers = 1;
	ck_assert_msg(grpc_server_new(&s, o, &e) == 0, "%s", e.msg);
	ck_assert_msg(grpc_server_start(s, &e) == 0, "%s", e.msg);
	return s;
}

/* Every limit off: each test turns on the one it checks. */
static void opts_none(struct grpc_server_opts *o)
{
	grpc_server_opts_init(o);
	o->handshake_timeout_ms = 0;
	o->idle_timeout_ms = 0;
	o->keepalive_ms = 0;
	o->max_conns_per_peer = 0;
}

/* A TCP connection to the server from the source address src ("127.0.0.2"). */
static int dial(const struct grpc_server *s, const char *src)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(inet_pton(AF_INET, src, &a.sin_addr), 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(inet_pton(AF_INET, "127.0.0.1", &a.sin_addr), 1);
	a.sin_port = htons((uint16_t)grpc_server_port(s, 0));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void ping(int fd, bool ack)
{
	uint8_t f[17] = {0, 0, 8, 6, ack ? 1 : 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
	send_all(fd, f, sizeof(f));
}

/* Reads what arrives for up to ms; returns the milliseconds until the server closed the
 * connection, or -1 when it was still open.  *pings counts the PING frames (not ACKs) seen;
 * with answer each gets its ACK. */
static long pump(int fd, int ms, int *pings, bool answer)
{
	uint64_t t0 = h2_now_ms();
	uint8_t buf[4096];
	size_t have = 0;

	for (;;) {
		long left = (long)ms - (long)(h2_now_ms() - t0);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;
		if (left <= 0)
			return -1;
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		n = recv(fd, buf + have, sizeof(buf) - have, 0);
		if (n <= 0)
			return (long)(h2_now_ms() - t0);
		have += (size_t)n;
		/* frames: 9-byte header (24-bit length, type, flags, stream) */
		while (have >= 9) {
			size_t len = (size_t)buf[0] << 16 | (size_t)buf[1] << 8 | buf[2];
			if (have < 9 + len)
				break;
			if (pings && buf[3] == 6 && !(buf[4] & 1))
				(*pings)++;
			if (answer && buf[3] == 6 && !(buf[4] & 1))
				ping(fd, true);
			memmove(buf, buf + 9 + len, have - 9 - len);
			have -= 9 + len;
		}
		if (have == sizeof(buf))
			have = 0;
	}
}

static long until_closed(int fd, int ms, int *pings)
{
	return pump(fd, ms, pings, false);
}

/* The client preface and an empty SETTINGS frame. */
static void preface(int fd)
{
	static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
	send_all(fd, magic, sizeof(magic) - 1);
	send_all(fd, settings, sizeof(settings));
}

START_TEST(test_handshake_deadline)
{
	struct grpc_server_opts o;
	struct grpc_server *s;
	int silent, partial, open;
	uint64_t t0;
	long t;

	capture_log();
	opts_none(&o);
	o.handshake_timeout_ms = 300;
	s = start(&o);
	t0 = h2_now_ms();
	silent = dial(s, "127.0.0.1");
	partial = dial(s, "127.0.0.1");
	send_all(partial, magic, 10);
	open = dial(s, "127.0.0.1");
	preface(open);
	t = until_closed(silent, PATIENCE_MS, NULL);
	ck_assert_msg(t >= 0, "a silent connection stays open");
	t = (long)(h2_now_ms() - t0);
	ck_assert_msg(t >= 300, "a silent connection closed after %ld ms, before the deadline", t);
	t = until_closed(partial, PATIENCE_MS, NULL);
	ck_assert_msg(t >= 0, "a connection with a partial preface stays open");
	ck_assert_int_eq(until_closed(open, 300, NULL), -1); /* the preface came in time */
	ck_assert_int_eq(log_count("\"gRPC connection timed out\"", "peer=\"127.0.0.1\"",
	                           "HTTP/2 client preface not completed within 300ms"),
	                 1);
	close(silent);
	close(partial);
	close(open);
	grpc_server_free(s);
}
END_TEST

START_TEST(test_idle_timeout_ignores_pings)
{
	struct grpc_server_opts o;
	struct grpc_server *s;
	uint64_t t0;
	int fd;

	opts_none(&o);
	o.idle_timeout_ms = 400;
	s = start(&o);
	t0 = h2_now_ms();
	fd = dial(s, "127.0.0.1");
	preface(fd);
	/* a client that only PINGs has no call: the connection is idle all the same */
	while (h2_now_ms() - t0 < PATIENCE_MS) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint8_t f[17] = {0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
		char b[512];
		ssize_t n = 1;
		/* a PING into a connection the server has just closed fails (EPIPE, ECONNRESET)
		 * before the reads below reach its end: that is the close too */
		if (send(fd, f, sizeof(f), MSG_NOSIGNAL) < 0)
			break;
		if (poll(&p, 1, 100) == 1)
			while ((n = recv(fd, b, sizeof(b), MSG_DONTWAIT)) > 0)
				;
		if (n == 0 || (n < 0 && errno != EAGAIN))
			break;
	}
	ck_assert_msg(h2_now_ms() - t0 < PATIENCE_MS,
	              "a PINGing connection without calls stayed open");
	ck_assert_uint_ge(h2_now_ms() - t0, 400);
	close(fd);
	grpc_server_free(s);
}
END_TEST

START_TEST(test_keepalive_closes_dead_peer)
{
	struct grpc_server_opts o;
	struct grpc_server *s;
	int dead, alive, pings = 0, alive_pings = 0;
	uint64_t t0;
	long t;

	capture_log();
	opts_none(&o);
	/* the live peer answers as soon as this thread runs: the time it has for that is long, so
	 * that a loaded machine does not make it a dead peer */
	o.keepalive_ms = 200;
	o.keepalive_timeout_ms = 2000;
	s = start(&o);
	t0 = h2_now_ms();
	dead = dial(s, "127.0.0.1");
	preface(dead);
	alive = dial(s, "127.0.0.1");
	preface(alive);
	/* the dead peer never answers; the live one answers every PING and stays */
	t = -1;
	while ((t < 0 || alive_pings < 3) && h2_now_ms() - t0 < PATIENCE_MS) {
		ck_assert_int_eq(pump(alive, 20, &alive_pings, true), -1);
		if (t < 0 && pump(dead, 20, &pings, false) >= 0)
			t = (long)(h2_now_ms() - t0);
	}
	ck_assert_msg(t >= 0, "a peer that does not answer stays open");
	/* a PING after 200 ms without input, then 2 s without an answer */
	ck_assert_msg(t >= 2200, "a peer that does not answer closed after %ld ms", t);
	ck_assert_int_ge(pings, 1);
	ck_assert_int_ge(alive_pings, 3);
	ck_assert_int_eq(
	    log_count("\"gRPC connection timed out\"", "no answer to a keepalive PING", NULL), 1);
	close(dead);
	close(alive);
	grpc_server_free(s);
}
END_TEST

START_TEST(test_per_peer_cap)
{
	struct grpc_server_opts o;
	struct grpc_server *s;
	int fds[3], extra, again, other;

	capture_log();
	opts_none(&o);
	o.max_conns_per_peer = 3;
	o.conn_log_interval_ms = 3600000; /* the test's refusals fall in one interval */
	s = start(&o);
	for (int i = 0; i < 3; i++)
		fds[i] = dial(s, "127.0.0.2");
	extra = dial(s, "127.0.0.2");
	ck_assert_msg(until_closed(extra, PATIENCE_MS, NULL) >= 0,
	              "the 4th connection of a peer is served");
	again = dial(s, "127.0.0.2");
	ck_assert_int_ge(until_closed(again, PATIENCE_MS, NULL), 0);
	other = dial(s, "127.0.0.3");
	ck_assert_int_eq(until_closed(other, 300, NULL), -1);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(until_closed(fds[i], 10, NULL), -1);
	/* two refusals, one line */
	ck_assert_int_eq(log_count("\"gRPC connection refused\"", "peer=\"127.0.0.2\"",
	                           "too many connections from this peer (limit 3)"),
	                 1);
	/* a place freed by the peer is its own again, once the server has seen the close: a
	 * connection refused before that is tried again */
	close(fds[0]);
	uint64_t t0 = h2_now_ms();
	for (;;) {
		extra = dial(s, "127.0.0.2");
		if (until_closed(extra, 300, NULL) == -1)
			break;
		close(extra);
		ck_assert_msg(h2_now_ms() - t0 < PATIENCE_MS, "a freed place stays taken");
	}
	close(extra);
	close(again);
	close(other);
	close(fds[1]);
	close(fds[2]);
	grpc_server_free(s);
}
END_TEST

struct burst {
	struct h2_connlog *g;
	const char *peer;
	int n;
};

static void burst_fn(void *arg)
{
	struct burst *b = arg;
	for (int i = 0; i < b->n; i++)
		h2_connlog_event(b->g, "gRPC connection refused", b->peer, "too many");
}

static void stop_fn(void *arg)
{
	h2_connlog_stop(arg);
}

START_TEST(test_connlog_once_per_interval)
{
	struct h2_loop *l;
	struct h2_connlog g;
	struct err e = {0};
	struct burst a = {&g, "10.0.0.1", 5}, b = {&g, "10.0.0.2", 1};
	const char *msg = "\"gRPC connection refused\"";

	capture_log();
	ck_assert_int_eq(h2_loop_new(&l, &e), 0);
	h2_connlog_init(&g, l, 200);
	h2_loop_run_sync(l, burst_fn, &a);
	h2_loop_run_sync(l, burst_fn, &b);
	ck_assert_int_eq(log_count(msg, NULL, NULL), 2);
	ck_assert_int_eq(log_count(msg, "peer=\"10.0.0.1\" reason=\"too many\" count=\"1\"", NULL),
	                 1);
	ck_assert_int_eq(log_count(msg, "peer=\"10.0.0.2\"", NULL), 1);
	/* the interval ends: the four counted events of 10.0.0.1 in one line, nothing for .2 */
	usleep(250000);
	h2_loop_run_pending(l);
	ck_assert_int_eq(log_count(msg, NULL, NULL), 3);
	ck_assert_int_eq(log_count(msg, "peer=\"10.0.0.1\"", "count=\"4\" period=\"200ms\""), 1);
	/* still limited in the next interval; then .2 starts over with a line at once */
	a.n = 2;
	h2_loop_run_sync(l, burst_fn, &a);
	h2_loop_run_sync(l, burst_fn, &b);
	ck_assert_int_eq(log_count(msg, NULL, NULL), 4);
	usleep(250000);
	h2_loop_run_pending(l);
	ck_assert_int_eq(log_count(msg, "peer=\"10.0.0.1\"", "count=\"2\""), 1);
	ck_assert_int_eq(log_count(msg, "peer=\"10.0.0.2\"", "count=\"1\""), 2);
	h2_loop_run_sync(l, stop_fn, &g);
	h2_loop_free(l);
}
END_TEST

/* ---- refused mTLS handshakes ---------------------------------------------------------------- */

static char certs[512];

static const char *cert(const char *name, const char *ext)
{
	static char buf[4][700];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s.%s", certs, name, ext);
	return buf[i];
}

/* A health check over mTLS with the client certificate name ("" for none). */
static int tls_call(const struct grpc_server *s, const char *name, struct grpc_status *st)
{
	Grpc__Health__V1__HealthCheckRequest rq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	struct grpc_channel_opts co;
	struct grpc_channel *ch;
	ProtobufCMessage *r = NULL;
	struct err e = {0};
	char target[64];
	int code;

	grpc_channel_opts_init(&co);
	co.tls_ca = cert("ca1", "crt");
	if (*name) {
		co.tls_cert = cert(name, "crt");
		co.tls_key = cert(name, "key");
	}
	snprintf(target, sizeof(target), "127.0.0.1:%d", grpc_server_port(s, 0));
	ck_assert_msg(grpc_channel_new(&ch, target, &co, &e) == 0, "%s", e.msg);
	code = grpc_channel_call(ch, "/grpc.health.v1.Health/Check", &rq.base,
	                         &grpc__health__v1__health_check_response__descriptor, &r,
	                         PATIENCE_MS, NULL, st);
	if (r)
		protobuf_c_message_free_unpacked(r, NULL);
	grpc_channel_free(ch);
	return code;
}

START_TEST(test_tls_refusal_logged)
{
	char cmd[2000], script[1024];
	struct grpc_server_opts o;
	struct grpc_server *s;
	struct grpc_status st;
	const char *msg = "\"TLS handshake failed\"";

	snprintf(certs, sizeof(certs), "%s", tu_mkdtemp());
	ck_assert_ptr_nonnull(realpath("test/unit/fakes/mkcerts.py", script));
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s'", script, certs);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
	capture_log();
	opts_none(&o);
	o.conn_log_interval_ms = 3600000; /* the test's refusals fall in one interval */
	o.tls_cert = cert("srv1", "crt");
	o.tls_key = cert("srv1", "key");
	o.tls_ca = cert("ca1", "crt");
	s = start(&o);
	ck_assert_int_eq(tls_call(s, "cli1", &st), GRPC_OK);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_ne(tls_call(s, "cli2", &st), GRPC_OK);
		ck_assert_int_ne(tls_call(s, "srv-expired", &st), GRPC_OK);
		ck_assert_int_ne(tls_call(s, "", &st), GRPC_OK);
	}
	/* the server logs a refused handshake after its alert reached the client */
	for (uint64_t t0 = h2_now_ms(); log_count(msg, NULL, NULL) < 3;) {
		ck_assert_msg(h2_now_ms() - t0 < PATIENCE_MS, "%d refused handshakes logged",
		              log_count(msg, NULL, NULL));
		usleep(10000);
	}
	ck_assert_int_eq(
	    log_count(msg, "peer=\"127.0.0.1\"", "not correctly signed by the trusted CA"), 1);
	ck_assert_int_eq(log_count(msg, "peer=\"127.0.0.1\"", "validity has expired"), 1);
	ck_assert_int_eq(log_count(msg, "peer=\"127.0.0.1\"", "no client certificate"), 1);
	ck_assert_int_eq(log_count(msg, NULL, NULL), 3);
	ck_assert_int_eq(log_count("BEGIN", NULL, NULL), 0);
	grpc_server_free(s);
	tu_rmtree(certs);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conn_limits");
	TCase *t = tcase_create("conn_limits");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_handshake_deadline);
	tcase_add_test(t, test_idle_timeout_ignores_pings);
	tcase_add_test(t, test_keepalive_closes_dead_peer);
	tcase_add_test(t, test_per_peer_cap);
	tcase_add_test(t, test_connlog_once_per_interval);
	tcase_add_test(t, test_tls_refusal_logged);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
