#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "h2/conn.h"
#include "h2/loop.h"
#include "h2/tls.h"

#define MAX_SVC  4
#define MAX_BODY 60000 /* below the 65535-byte initial flow-control windows */

/* The roles' logs (every failed call is logged) would only slow the fuzzer down. */
__attribute__((constructor)) static void fuzz_quiet(void)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		log_set_fd(fd);
}

static struct h2_loop *loop;
static struct grpc_server *srv;
static const struct grpc_service *svcs[MAX_SVC];
static size_t n_svcs;

void fuzz_rpc_add(const struct grpc_service *svc)
{
	if (!srv) {
		struct grpc_server_opts o;
		grpc_server_opts_init(&o);
		o.workers = 0;
		if (h2_loop_new(&loop, NULL) < 0)
			abort();
		o.loop = loop;
		if (grpc_server_new(&srv, &o, NULL) < 0)
			abort();
	}
	if (n_svcs == MAX_SVC || grpc_server_add_service(srv, svc, NULL) < 0)
		abort();
	svcs[n_svcs++] = svc;
}

const char *fuzz_rpc_pick(uint8_t b, char *buf, size_t cap)
{
	size_t total = 0, i, k;
	for (i = 0; i < n_svcs; i++)
		total += svcs[i]->n_methods;
	if (!total)
		abort();
	k = b % total;
	for (i = 0; k >= svcs[i]->n_methods; i++)
		k -= svcs[i]->n_methods;
	snprintf(buf, cap, "/%s/%s", svcs[i]->name, svcs[i]->methods[k].name);
	return buf;
}

static size_t put_frame(uint8_t *out, uint8_t type, uint8_t flags, uint32_t sid, size_t len)
{
	out[0] = (uint8_t)(len >> 16);
	out[1] = (uint8_t)(len >> 8);
	out[2] = (uint8_t)len;
	out[3] = type;
	out[4] = flags;
	out[5] = (uint8_t)(sid >> 24);
	out[6] = (uint8_t)(sid >> 16);
	out[7] = (uint8_t)(sid >> 8);
	out[8] = (uint8_t)sid;
	return 9;
}

/* HPACK "literal header field without indexing, new name" with 7-bit lengths (< 127). */
static size_t put_lit(uint8_t *out, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value), o = 0;
	if (nl > 126 || vl > 126)
		abort();
	out[o++] = 0;
	out[o++] = (uint8_t)nl;
	memcpy(out + o, name, nl);
	o += nl;
	out[o++] = (uint8_t)vl;
	memcpy(out + o, value, vl);
	return o + vl;
}

static size_t build_request(uint8_t *out, const char *path, const uint8_t *body, size_t len)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	static const char *const hdr[][2] = {{":method", "POST"},
	                                     {":scheme", "http"},
	                                     {":authority", "fuzz"},
	                                     {"content-type", "application/grpc"},
	                                     {"te", "trailers"}};
	size_t o = sizeof(preface) - 1, h, sent = 0;
	memcpy(out, preface, o);
	o += put_frame(out + o, 4, 0, 0, 0); /* SETTINGS */
	h = o;
	o += 9;
	o += put_lit(out + o, ":path", path);
	for (size_t i = 0; i < sizeof(hdr) / sizeof(hdr[0]); i++)
		o += put_lit(out + o, hdr[i][0], hdr[i][1]);
	put_frame(out + h, 1, 4, 1, o - h - 9); /* HEADERS, END_HEADERS */
	uint8_t msg[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
	                  (uint8_t)len};
	/* DATA frames of at most 16384 bytes (the default SETTINGS_MAX_FRAME_SIZE) */
	size_t total = len + 5;
	while (sent < total) {
		size_t n = total - sent < 16384 ? total - sent : 16384;
		o += put_frame(out + o, 0, sent + n == total ? 1 : 0, 1, n);
		for (size_t i = 0; i < n; i++, sent++)
			out[o + i] = sent < 5 ? msg[sent] : body[sent - 5];
		o += n;
	}
	return o;
}

void fuzz_rpc_call(const char *path, const uint8_t *body, size_t len)
{
	static uint8_t buf[MAX_BODY + 4096];
	struct h2_conn *c;
	size_t n, out;

	if (len > MAX_BODY)
		len = MAX_BODY;
	n = build_request(buf, path, body, len);
	if (grpc_server_mem_conn(srv, &c, NULL) < 0)
		return;
	h2_conn_feed(c, buf, n);
	h2_loop_run_pending(loop);
	h2_conn_take(c, &out);
	h2_loop_run_pending(loop);
	h2_conn_take(c, &out);
	h2_conn_destroy(c);
	h2_loop_run_pending(loop);
}

static int peer_fd = -1;
static const uint8_t *peer_data;
static size_t peer_len;
static pthread_mutex_t peer_mu = PTHREAD_MUTEX_INITIALIZER;
static int peer_busy;
static struct h2_tls_cfg *peer_tls;

static void peer_send(int c, struct h2_tls *t, const uint8_t *d, size_t n)
{
	while (n) {
		ssize_t w = t ? h2_tls_write(t, d, n) : send(c, d, n, MSG_NOSIGNAL);
		if (w <= 0)
			return; /* the client is gone: fine */
		d += w;
		n -= (size_t)w;
	}
}

static void peer_serve(int c)
{
	static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
	uint8_t sink[4096];
	struct h2_tls *t = NULL;
	if (peer_tls) {
		int r;
		if (h2_tls_new(&t, peer_tls, c, NULL, NULL) < 0)
			abort();
		while ((r = h2_tls_handshake(t, NULL)) > 0)
			;
		if (r < 0) {
			h2_tls_free(t);
			return;
		}
	}
	peer_send(c, t, settings, sizeof(settings));
	peer_send(c, t, peer_data, peer_len);
	if (t)
		h2_tls_close_notify(t);
	shutdown(c, SHUT_WR);
	while (t ? h2_tls_read(t, sink, sizeof(sink)) > 0 : recv(c, sink, sizeof(sink), 0) > 0)
		;
	h2_tls_free(t);
}

/* Serves every connection, each with the current answer, until the process ends. */
static void *peer_main(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(peer_fd, NULL, NULL);
		if (c < 0)
			continue;
		pthread_mutex_lock(&peer_mu);
		peer_busy = 1;
		peer_serve(c);
		close(c);
		peer_busy = 0;
		pthread_mutex_unlock(&peer_mu);
	}
	return NULL;
}

const char *fuzz_peer_tls(void)
{
	static char pem[4096];
	char cmd[1400], crt[300], key[300];
	FILE *f;
	size_t n;
	if (peer_tls)
		return pem;
	snprintf(crt, sizeof(crt), "%s/peer.crt", fuzz_dir());
	snprintf(key, sizeof(key), "%s/peer.key", fuzz_dir());
	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	         "-keyout '%s' -out '%s' -days 2 -subj /CN=127.0.0.1 "
	         "-addext subjectAltName=IP:127.0.0.1 2>/dev/null",
	         key, crt);
	if (system(cmd) != 0 || !(f = fopen(crt, "r")))
		abort();
	n = fread(pem, 1, sizeof(pem) - 1, f);
	fclose(f);
	pem[n] = 0;
	if (h2_tls_server_cfg_new(&peer_tls, crt, key, NULL, NULL) < 0)
		abort();
	return pem;
}

void fuzz_peer_start(int *port)
{
	static int started;
	static struct sockaddr_in a;
	socklen_t len = sizeof(a);
	pthread_t t;
	if (!started) {
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		peer_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (peer_fd < 0 || bind(peer_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    listen(peer_fd, 4) < 0 ||
		    getsockname(peer_fd, (struct sockaddr *)&a, &len) < 0 ||
		    pthread_create(&t, NULL, peer_main, NULL) != 0)
			abort();
		started = 1;
	}
	*port = ntohs(a.sin_port);
}

void fuzz_peer_answer(const uint8_t *data, size_t len)
{
	pthread_mutex_lock(&peer_mu);
	peer_data = data;
	peer_len = len;
	pthread_mutex_unlock(&peer_mu);
}

void fuzz_peer_wait(void)
{
	for (;;) {
		struct pollfd p = {.fd = peer_fd, .events = POLLIN};
		pthread_mutex_lock(&peer_mu);
		int idle = !peer_busy && poll(&p, 1, 0) == 0;
		pthread_mutex_unlock(&peer_mu);
		if (idle)
			return;
		usleep(100);
	}
}

static char dir[256];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	if (ftw->level > 0)
		remove(path);
	return 0;
}

const char *fuzz_dir(void)
{
	if (!dir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(dir, sizeof(dir), "%s/pillar-fuzz-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(dir))
			abort();
	}
	return dir;
}

void fuzz_dir_reset(void)
{
	if (nftw(fuzz_dir(), rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
		abort();
}

void fuzz_write(const char *rel, const void *data, size_t len)
{
	char path[512], *slash;
	int fd;
	snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), rel);
	for (slash = strchr(path + strlen(fuzz_dir()) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = 0;
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			abort();
		*slash = '/';
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || (len && write(fd, data, len) != (ssize_t)len))
		abort();
	close(fd);
}
