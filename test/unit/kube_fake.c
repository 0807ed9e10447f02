/* In-process HTTP/2 TLS server for the kube client tests (see kube_fake.h). */
#include "kube_fake.h"

#include "kube/client.h"
#include "kube/config.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "base/json.h"
#include "h2/conn.h"
#include "h2/loop.h"
#include "h2/net.h"
#include "h2/tls.h"

#define LOG_MAX 256

struct kf_stream {
	struct kf_req rq;
	struct kf_resp resp;
	size_t next, off;
};

struct kf_conn {
	struct kf_server *srv;
	struct h2_conn *h2;
	struct kf_conn *next;
};

struct kf_server {
	struct h2_loop *loop;
	struct h2_tls_cfg *tls;
	int lfd, port;
	kf_handler fn;
	void *arg;
	pthread_mutex_t mu;
	struct kf_req *log[LOG_MAX];
	size_t n_log;
	unsigned accepted;
	int live;
	struct kf_conn *conns;
};

void kf_certs_make(struct kf_certs *c)
{
	char cmd[4096];
	char tmpl[] = "/tmp/kube-certs-XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	snprintf(c->dir, sizeof(c->dir), "%s", tmpl);
	snprintf(c->ca, sizeof(c->ca), "%s/ca.crt", c->dir);
	snprintf(c->server_cert, sizeof(c->server_cert), "%s/server.crt", c->dir);
	snprintf(c->server_key, sizeof(c->server_key), "%s/server.key", c->dir);
	snprintf(c->client_cert, sizeof(c->client_cert), "%s/client.crt", c->dir);
	snprintf(c->client_key, sizeof(c->client_key), "%s/client.key", c->dir);
	snprintf(
	    cmd, sizeof(cmd),
	    "(cd %s && E='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes' && "
	    "openssl req -x509 $E -days 2 -subj /CN=kube-test-ca -keyout ca.key -out ca.crt "
	    "&& openssl req -new $E -subj /CN=kube-apiserver -keyout server.key -out s.csr "
	    "&& printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > s.ext "
	    "&& openssl x509 -req -in s.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
	    "-extfile s.ext -out server.crt "
	    "&& openssl req -new $E -subj '/O=system:masters/CN=pillar-test' -keyout client.key "
	    "-out c.csr && openssl x509 -req -in c.csr -CA ca.crt -CAkey ca.key "
	    "-CAcreateserial -days 2 -out client.crt) >/dev/null 2>&1",
	    c->dir);
	ck_assert_msg(system(cmd) == 0, "openssl could not make test certificates");
}

void kf_certs_remove(struct kf_certs *c)
{
	char cmd[400];

	if (!c->dir[0] || strncmp(c->dir, "/tmp/kube-certs-", 16) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
	ck_assert_int_eq(system(cmd), 0);
}

void kf_resp_add(struct kf_resp *r, const char *data, size_t len)
{
	char *c;

	ck_assert_uint_lt(r->n_chunks, KF_CHUNKS_MAX);
	c = malloc(len + 1);
	ck_assert_ptr_nonnull(c);
	memcpy(c, data, len);
	c[len] = '\0';
	r->chunks[r->n_chunks++] = c;
}

static cJSON *transcript(const char *name)
{
	char path[512];
	cJSON *t = NULL;

	snprintf(path, sizeof(path), "test/unit/kube/%s", name);
	ck_assert_msg(json_read_file(path, &t, NULL) == 0, "cannot read %s", path);
	return t;
}

void kf_resp_transcript(struct kf_resp *r, const char *name)
{
	cJSON *t = transcript(name), *resp = cJSON_GetObjectItem(t, "response");
	cJSON *chunks = cJSON_GetObjectItem(resp, "chunks"), *c;
	const char *raw = json_get_str(resp, "body_raw");
	int64_t status = 0;

	ck_assert_int_eq(json_get_int64(resp, "status", &status), 0);
	r->status = (int)status;
	if (cJSON_IsArray(chunks)) {
		cJSON_ArrayForEach(c, chunks)
		{
			const char *d = json_get_str(c, "data");
			if (d && *d)
				kf_resp_add(r, d, strlen(d));
		}
	} else {
		ck_assert_ptr_nonnull(raw);
		kf_resp_add(r, raw, strlen(raw));
	}
	cJSON_Delete(t);
}

char *kf_transcript_request(const char *name, const char *what)
{
	cJSON *t = transcript(name),
	      *v = cJSON_GetObjectItem(cJSON_GetObjectItem(t, "request"), what);
	char *s;

	ck_assert_ptr_nonnull(v);
	s = cJSON_IsString(v) ? strdup(v->valuestring) : cJSON_PrintUnformatted(v);
	cJSON_Delete(t);
	ck_assert_ptr_nonnull(s);
	return s;
}

/* ---- HTTP/2 server side --------------------------------------------------------------------- */

static void stream_free(struct kf_stream *st)
{
	for (size_t i = 0; i < st->resp.n_chunks; i++)
		free(st->resp.chunks[i]);
	free(st->rq.body);
	free(st);
}

static ssize_t resp_read(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct kf_stream *st = src->ptr;
	(void)ng;
	(void)sid;
	(void)ud;

	while (st->next < st->resp.n_chunks) {
		const char *c = st->resp.chunks[st->next];
		size_t n = strlen(c) - st->off;
		if (n == 0) {
			st->next++;
			st->off = 0;
			continue;
		}
		if (n > len)
			n = len;
		memcpy(buf, c + st->off, n);
		st->off += n;
		return (ssize_t)n; /* one chunk (or part of it) per DATA frame */
	}
	if (st->resp.hold)
		return NGHTTP2_ERR_DEFERRED;
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	return 0;
}

static void dispatch(struct kf_conn *kc, nghttp2_session *ng, int32_t sid, struct kf_stream *st)
{
	struct kf_server *s = kc->srv;
	nghttp2_data_provider dp = {.source.ptr = st, .read_callback = resp_read};
	char code[8];
	nghttp2_nv nv[3];
	size_t n = 2;
	struct kf_req *copy = malloc(sizeof(*copy));

	if (copy) {
		*copy = st->rq;
		copy->body = strdup(st->rq.body ? st->rq.body : "");
	}
	pthread_mutex_lock(&s->mu);
	if (copy && s->n_log < LOG_MAX)
		s->log[s->n_log++] = copy;
	else if (copy) {
		free(copy->body);
		free(copy);
	}
	pthread_mutex_unlock(&s->mu);
	st->resp.status = 500;
	s->fn(s->arg, &st->rq, &st->resp);
	if (st->resp.silent)
		return; /* the stream waits until the client cancels it */
	snprintf(code, sizeof(code), "%d", st->resp.status);
	nv[0] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)code, 7, strlen(code), 0};
	if (!st->resp.ctype)
		st->resp.ctype = "application/json";
	nv[1] = (nghttp2_nv){(uint8_t *)"content-type", (uint8_t *)st->resp.ctype, 12,
	                     strlen(st->resp.ctype), 0};
	if (st->resp.retry_after)
		nv[n++] = (nghttp2_nv){(uint8_t *)"retry-after", (uint8_t *)st->resp.retry_after,
		                       11, strlen(st->resp.retry_after), 0};
	nghttp2_submit_response(ng, sid, nv, n, &dp);
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct kf_stream *st;
	(void)ud;

	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, st);
	return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct kf_stream *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	char *dst = NULL;
	size_t size = 0;
	(void)flags;
	(void)ud;

	if (!st)
		return 0;
#define H(n, field)                                                  \
	if (namelen == strlen(n) && memcmp(name, n, namelen) == 0) { \
		dst = st->rq.field;                                  \
		size = sizeof(st->rq.field);                         \
	}
	H(":method", method)
	H(":path", path)
	H("user-agent", ua)
	H("authorization", auth)
	H("content-type", ctype)
	H("accept", accept)
#undef H
	if (dst)
		snprintf(dst, size, "%.*s", (int)valuelen, value);
	return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t sid, const uint8_t *data, size_t len,
                   void *ud)
{
	struct kf_stream *st = nghttp2_session_get_stream_user_data(ng, sid);
	char *b;
	(void)flags;
	(void)ud;

	if (!st)
		return 0;
	b = realloc(st->rq.body, st->rq.body_len + len + 1);
	if (!b)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	memcpy(b + st->rq.body_len, data, len);
	st->rq.body = b;
	st->rq.body_len += len;
	b[st->rq.body_len] = '\0';
	return 0;
}

static int on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct kf_stream *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);

	if (st && (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		dispatch(ud, ng, f->hd.stream_id, st);
	return 0;
}

static int on_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *ud)
{
	struct kf_stream *st = nghttp2_session_get_stream_user_data(ng, sid);
	(void)code;
	(void)ud;

	if (st) {
		nghttp2_session_set_stream_user_data(ng, sid, NULL);
		stream_free(st);
	}
	return 0;
}

static void conn_open(void *arg, struct h2_conn *h)
{
	struct kf_conn *kc = arg;
	nghttp2_session_callbacks *cb;
	nghttp2_session *ng = NULL;

	ck_assert_int_eq(nghttp2_session_callbacks_new(&cb), 0);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
	/* closed streams are forgotten, as kube-apiserver's Go server does: a long test's memory
	 * is then the client's */
	nghttp2_option *opt;
	ck_assert_int_eq(nghttp2_option_new(&opt), 0);
	nghttp2_option_set_no_closed_streams(opt, 1);
	ck_assert_int_eq(nghttp2_session_server_new2(&ng, cb, kc, opt), 0);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	h2_conn_set_session(h, ng);
	nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, NULL, 0);
}

static void conn_close(void *arg, struct h2_conn *h, int err, const char *why)
{
	struct kf_conn *kc = arg, **p;
	struct kf_server *s = kc->srv;
	nghttp2_session *ng = h2_conn_session(h);
	(void)err;
	(void)why;

	/* streams still open (held watches) are freed with their user data */
	for (int32_t sid = 1; ng && sid < 2000; sid += 2) {
		struct kf_stream *st = nghttp2_session_get_stream_user_data(ng, sid);
		if (st) {
			nghttp2_session_set_stream_user_data(ng, sid, NULL);
			stream_free(st);
		}
	}
	for (p = &s->conns; *p; p = &(*p)->next)
		if (*p == kc) {
			*p = kc->next;
			break;
		}
	pthread_mutex_lock(&s->mu);
	s->live--;
	pthread_mutex_unlock(&s->mu);
	free(kc);
}

static const struct h2_conn_ops kf_ops = {.on_open = conn_open, .on_close = conn_close};

static void accept_io(void *arg, uint32_t ev)
{
	struct kf_server *s = arg;
	(void)ev;

	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct kf_conn *kc;
		if (fd < 0)
			return;
		kc = calloc(1, sizeof(*kc));
		ck_assert_ptr_nonnull(kc);
		kc->srv = s;
		pthread_mutex_lock(&s->mu);
		s->accepted++;
		s->live++;
		pthread_mutex_unlock(&s->mu);
		kc->next = s->conns;
		s->conns = kc;
		if (h2_conn_new(&kc->h2, s->loop, fd, false, s->tls, NULL, &kf_ops, kc, NULL) < 0) {
			s->conns = kc->next;
			pthread_mutex_lock(&s->mu);
			s->live--;
			pthread_mutex_unlock(&s->mu);
			free(kc);
		}
	}
}

struct kf_server *kf_start(const struct kf_certs *c, bool mtls, kf_handler fn, void *arg)
{
	struct kf_server *s = calloc(1, sizeof(*s));
	struct h2_addr a;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct err e = {0};

	ck_assert_ptr_nonnull(s);
	s->fn = fn;
	s->arg = arg;
	pthread_mutex_init(&s->mu, NULL);
	ck_assert_msg(h2_tls_server_cfg_new(&s->tls, c->server_cert, c->server_key,
	                                    mtls ? c->ca : NULL, &e) == 0,
	              "%s", e.msg);
	ck_assert_int_eq(h2_addr_parse("127.0.0.1:0", true, &a, &e), 0);
	s->lfd = h2_listen(&a, 0, &e);
	ck_assert_int_ge(s->lfd, 0);
	ck_assert_int_eq(getsockname(s->lfd, (struct sockaddr *)&sin, &sl), 0);
	s->port = ntohs(sin.sin_port);
	ck_assert_int_eq(h2_loop_new(&s->loop, &e), 0);
	ck_assert_int_eq(h2_loop_add_fd(s->loop, s->lfd, EPOLLIN, accept_io, s), 0);
	ck_assert_int_eq(h2_loop_start(s->loop, &e), 0);
	return s;
}

int kf_port(const struct kf_server *s)
{
	return s->port;
}

static void drop_fn(void *arg)
{
	struct kf_server *s = arg;

	for (struct kf_conn *kc = s->conns; kc; kc = kc->next)
		h2_conn_close(kc->h2, 0, "test server dropping connections");
}

static void goaway_fn(void *arg)
{
	struct kf_server *s = arg;

	for (struct kf_conn *kc = s->conns; kc; kc = kc->next) {
		nghttp2_session *ng = h2_conn_session(kc->h2);
		if (!ng)
			continue;
		nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE,
		                      nghttp2_session_get_last_proc_stream_id(ng), NGHTTP2_NO_ERROR,
		                      NULL, 0);
		h2_conn_flush(kc->h2);
	}
}

void kf_goaway(struct kf_server *s)
{
	h2_loop_run_sync(s->loop, goaway_fn, s);
}

void kf_drop(struct kf_server *s)
{
	h2_loop_run_sync(s->loop, drop_fn, s);
}

static void stop_fn(void *arg)
{
	struct kf_server *s = arg;

	h2_loop_del_fd(s->loop, s->lfd);
	drop_fn(s);
}

void kf_stop(struct kf_server *s)
{
	int live = 1;

	h2_loop_run_sync(s->loop, stop_fn, s);
	for (int i = 0; i < 5000 && live; i++) {
		pthread_mutex_lock(&s->mu);
		live = s->live;
		pthread_mutex_unlock(&s->mu);
		if (live)
			usleep(1000);
	}
	ck_assert_int_eq(live, 0);
	h2_loop_free(s->loop);
	close(s->lfd);
	h2_tls_cfg_free(s->tls);
	for (size_t i = 0; i < s->n_log; i++) {
		free(s->log[i]->body);
		free(s->log[i]);
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

size_t kf_requests(struct kf_server *s)
{
	size_t n;

	pthread_mutex_lock(&s->mu);
	n = s->n_log;
	pthread_mutex_unlock(&s->mu);
	return n;
}

const struct kf_req *kf_request(struct kf_server *s, size_t i)
{
	const struct kf_req *r;

	pthread_mutex_lock(&s->mu);
	r = i < s->n_log ? s->log[i] : NULL;
	pthread_mutex_unlock(&s->mu);
	return r;
}

unsigned kf_connections(struct kf_server *s)
{
	unsigned n;

	pthread_mutex_lock(&s->mu);
	n = s->accepted;
	pthread_mutex_unlock(&s->mu);
	return n;
}

static void kubeconfig_text(struct kf_server *s, const struct kf_certs *c, const char *token,
                            char *y, size_t cap)
{
	snprintf(y, cap,
	         "current-context: t\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\n"
	         "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:%d\n"
	         "    certificate-authority: %s\nusers:\n- name: u\n  user:\n    token: %s\n",
	         kf_port(s), c->ca, token);
}

void kf_kubeconfig(struct kf_server *s, const struct kf_certs *c, const char *token,
                   const char *path)
{
	char y[2048];
	kubeconfig_text(s, c, token, y, sizeof(y));
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(y, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

struct kube_client *kf_client(struct kf_server *s, const struct kf_certs *c, const char *token)
{
	char y[2048];
	struct kube_config *cfg = NULL;
	struct kube_client_opts ko;
	struct kube_client *kc = NULL;
	struct err e = {0};

	kubeconfig_text(s, c, token, y, sizeof(y));
	ck_assert_msg(kube_config_from_yaml(&cfg, y, strlen(y), c->dir, NULL, &e) == 0, "%s",
	              e.msg);
	kube_client_opts_init(&ko);
	ko.component = "pillar-csi-controller";
	ko.qps = -1;
	ck_assert_msg(kube_client_new(&kc, cfg, &ko, &e) == 0, "%s", e.msg);
	kube_config_free(cfg);
	return kc;
}
