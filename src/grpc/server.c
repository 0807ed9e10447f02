/* Loop side of the gRPC server: listeners, connections, nghttp2 callbacks, responses. */
#include "grpc/server_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "h2/net.h"

#define HEALTH_PATH "/grpc.health.v1.Health/Check"

struct sconn {
	struct grpc_server *srv;
	struct h2_conn *h2;
	struct grpc_call *calls;
	unsigned n_calls;
	struct h2_timer idle;
	struct sconn *next, *prev;
};

void grpc_server_opts_init(struct grpc_server_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->unix_mode = 0660;
	o->max_msg = GRPC_DEFAULT_MAX_MSG;
	o->max_streams = 100;
	o->max_conns = 1024;
	o->max_header_list = 16384;
	o->idle_timeout_ms = 3600000;
	o->workers = 8;
}

/* ---- responses ---------------------------------------------------------------------------- */

#define MKNV(n, v, vl)                                                                \
	{                                                                             \
		(uint8_t *)(n), (uint8_t *)(v), strlen(n), (vl), NGHTTP2_NV_FLAG_NONE \
	}

static size_t status_nv(nghttp2_nv *nv, char *codebuf, char *msgbuf, size_t msgcap, int code,
                        const char *msg)
{
	size_t n = 0;
	snprintf(codebuf, 8, "%d", code);
	nv[n++] = (nghttp2_nv)MKNV("grpc-status", codebuf, strlen(codebuf));
	if (msg && *msg) {
		size_t ml = grpc_msg_encode(msg, msgbuf, msgcap);
		nv[n++] = (nghttp2_nv)MKNV("grpc-message", msgbuf, ml);
	}
	return n;
}

static ssize_t data_read_cb(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t length,
                            uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct grpc_call *c = src->ptr;
	size_t n = 0;
	(void)ud;

	pthread_mutex_lock(&c->mu);
	while (c->oq_head && n < length) {
		struct outmsg *m = c->oq_head;
		size_t take = m->len - m->off;
		if (take > length - n)
			take = length - n;
		memcpy(buf + n, m->data + m->off, take);
		m->off += take;
		n += take;
		c->oq_bytes -= take;
		if (m->off == m->len) {
			c->oq_head = m->next;
			if (!c->oq_head)
				c->oq_tail = NULL;
			free(m);
		}
	}
	if (n > 0) {
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		return (ssize_t)n;
	}
	if (!c->finished) {
		pthread_mutex_unlock(&c->mu);
		return NGHTTP2_ERR_DEFERRED;
	}
	{
		nghttp2_nv nv[2];
		char code[8], msg[1024];
		size_t k = status_nv(nv, code, msg, sizeof(msg), c->status, c->status_msg);
		pthread_mutex_unlock(&c->mu);
		*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		c->trailers_sent = true;
		if (nghttp2_submit_trailer(ng, sid, nv, k) != 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	return 0;
}

/* rv of an nghttp2_submit_* of c's response: when nghttp2 could not queue it (out of memory)
 * the stream would wait for it forever, so the connection is closed instead and every stream on
 * it ends (the client sees UNAVAILABLE and retries on a new one). */
static void submitted(struct grpc_call *c, int rv)
{
	if (rv != 0)
		h2_conn_close(c->conn->h2, -ENOMEM, "out of memory queueing a response");
}

/* Sends the response headers (or a Trailers-Only response) or resumes the body. */
static void respond(struct grpc_call *c)
{
	nghttp2_session *ng;
	nghttp2_nv nv[64];
	char code[8], msg[1024];
	size_t n = 0, i;
	bool only;

	if (!c->conn || c->trailers_sent)
		return;
	ng = h2_conn_session(c->conn->h2);
	if (c->headers_sent) {
		nghttp2_session_resume_data(ng, c->stream_id);
		return;
	}
	pthread_mutex_lock(&c->mu);
	if (!c->finished && !c->oq_head) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	only = c->finished && !c->oq_head;
	nv[n++] = (nghttp2_nv)MKNV(":status", "200", 3);
	nv[n++] = (nghttp2_nv)MKNV("content-type", "application/grpc", 16);
	for (i = 0; i < c->n_resp_md && n < 60; i++)
		nv[n++] = (nghttp2_nv)MKNV(c->resp_md[i].key, c->resp_md[i].value,
		                           strlen(c->resp_md[i].value));
	if (only)
		n += status_nv(nv + n, code, msg, sizeof(msg), c->status, c->status_msg);
	c->headers_sent = true;
	pthread_mutex_unlock(&c->mu);
	if (only) {
		c->trailers_sent = true;
		submitted(c, nghttp2_submit_response(ng, c->stream_id, nv, n, NULL));
	} else {
		nghttp2_data_provider dp = {.source.ptr = c, .read_callback = data_read_cb};
		submitted(c, nghttp2_submit_response(ng, c->stream_id, nv, n, &dp));
	}
}

/* An error found on the loop before (or instead of) running the handler. */
static void early_status(struct grpc_call *c, int http, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void early_status(struct grpc_call *c, int http, int code, const char *fmt, ...)
{
	nghttp2_session *ng = h2_conn_session(c->conn->h2);
	char msg[512];
	va_list ap;

	if (c->early || c->dispatched)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->early = true;
	call_finish(c, code, msg);
	if (http != 200) {
		nghttp2_nv nv[4];
		char hs[8], cs[8], em[1024];
		size_t n = 0;
		snprintf(hs, sizeof(hs), "%d", http);
		nv[n++] = (nghttp2_nv)MKNV(":status", hs, strlen(hs));
		n += status_nv(nv + n, cs, em, sizeof(em), code, msg);
		c->headers_sent = c->trailers_sent = true;
		submitted(c, nghttp2_submit_response(ng, c->stream_id, nv, n, NULL));
	} else {
		respond(c);
	}
	/* on_frame_send resets the stream with NO_ERROR if the client is still sending */
}

void server_kick_fn(void *arg)
{
	struct grpc_call *c = arg;

	pthread_mutex_lock(&c->mu);
	c->kick_pending = false;
	pthread_mutex_unlock(&c->mu);
	if (c->conn) {
		respond(c);
		h2_conn_flush(c->conn->h2);
	}
	call_unref(c);
}

static void deadline_fn(void *arg)
{
	struct grpc_call *c = arg;

	if (!c->conn)
		return;
	atomic_store(&c->cancelled, true);
	if (!c->dispatched) {
		early_status(c, 200, GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
	} else {
		pthread_mutex_lock(&c->mu);
		while (c->oq_head) {
			struct outmsg *m = c->oq_head;
			c->oq_head = m->next;
			free(m);
		}
		/* bytes of a half-sent message cannot be dropped: the stream is reset below */
		c->oq_tail = NULL;
		c->oq_bytes = 0;
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		call_finish(c, GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
		if (c->headers_sent) {
			/* mid-stream: end it now rather than after a partial message */
			nghttp2_submit_rst_stream(h2_conn_session(c->conn->h2), NGHTTP2_FLAG_NONE,
			                          c->stream_id, NGHTTP2_CANCEL);
		} else {
			respond(c);
		}
	}
	h2_conn_flush(c->conn->h2);
}

/* ---- routing ------------------------------------------------------------------------------- */

static void route(struct grpc_call *c)
{
	struct grpc_server *s = c->srv;
	const char *p = c->path, *slash;
	size_t i, j, sl;

	if (c->bad_method) {
		early_status(c, 405, GRPC_UNIMPLEMENTED, "method must be POST");
		return;
	}
	if (c->bad_ctype) {
		early_status(c, 415, GRPC_INTERNAL, "content-type must be application/grpc");
		return;
	}
	if (!p || p[0] != '/' || !(slash = strchr(p + 1, '/')) || !slash[1]) {
		early_status(c, 200, GRPC_UNIMPLEMENTED, "malformed method path %s", p ? p : "");
		return;
	}
	if (c->timeout_ms == -2) {
		early_status(c, 200, GRPC_INTERNAL, "malformed grpc-timeout header");
		return;
	}
	if (strcmp(p, HEALTH_PATH) == 0) {
		c->health = true;
	} else {
		sl = (size_t)(slash - p - 1);
		for (i = 0; i < s->n_svcs && !c->method; i++) {
			const struct grpc_service *sv = s->svcs[i];
			if (strlen(sv->name) != sl || strncmp(sv->name, p + 1, sl) != 0)
				continue;
			c->svc = sv;
			for (j = 0; j < sv->n_methods; j++)
				if (strcmp(sv->methods[j].name, slash + 1) == 0)
					c->method = &sv->methods[j];
			if (!c->method) {
				early_status(c, 200, GRPC_UNIMPLEMENTED,
				             "unknown method %s for service %.*s", slash + 1,
				             (int)sl, p + 1);
				return;
			}
		}
		if (!c->svc) {
			early_status(c, 200, GRPC_UNIMPLEMENTED, "unknown service %.*s", (int)sl,
			             p + 1);
			return;
		}
	}
	if (c->timeout_ms >= 0) {
		c->deadline_at = h2_now_ms() + (uint64_t)c->timeout_ms;
		h2_timer_arm(c->loop, &c->deadline_timer, c->deadline_at, deadline_fn, c);
	}
}

static void dispatch(struct grpc_call *c)
{
	if (c->n_msgs != 1) {
		early_status(c, 200, GRPC_INTERNAL,
		             "expected exactly one request message for %s, got %d", c->path,
		             c->n_msgs);
		return;
	}
	c->dispatched = true;
	if (c->health) {
		call_health(c);
		respond(c);
		return;
	}
	call_ref(c);
	if (h2_jobs_submit(c->srv->jobs, call_run, c) < 0) {
		call_unref(c);
		c->dispatched = false;
		early_status(c, 200, GRPC_RESOURCE_EXHAUSTED, "server out of memory");
	}
}

/* ---- nghttp2 callbacks ---------------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct sconn *sc = ud;
	struct grpc_call *c;

	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	c = call_new(sc->srv);
	if (!c)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	c->conn = sc;
	c->stream_id = f->hd.stream_id;
	c->cnext = sc->calls;
	if (sc->calls)
		sc->calls->cprev = c;
	sc->calls = c;
	sc->n_calls++;
	nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, c);
	return 0;
}

static bool ctype_ok(const uint8_t *v, size_t len)
{
	return len >= 16 && memcmp(v, "application/grpc", 16) == 0 &&
	       (len == 16 || v[16] == '+' || v[16] == ';');
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct sconn *sc = ud;
	struct grpc_call *c = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	(void)flags;

	if (!c || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	c->hdr_bytes += namelen + valuelen + 32;
	if (c->hdr_bytes > sc->srv->o.max_header_list)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
#define IS(s) (namelen == sizeof(s) - 1 && memcmp(name, s, namelen) == 0)
	if (IS(":path")) {
		free(c->path);
		c->path = strndup((const char *)value, valuelen);
		if (!c->path)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	} else if (IS(":method")) {
		c->bad_method = !(valuelen == 4 && memcmp(value, "POST", 4) == 0);
	} else if (IS("content-type")) {
		c->bad_ctype = !ctype_ok(value, valuelen);
	} else if (IS("grpc-timeout")) {
		int64_t ms;
		c->timeout_ms =
		    grpc_timeout_parse((const char *)value, valuelen, &ms) == 0 ? ms : -2;
	} else if (IS("grpc-encoding")) {
		free(c->encoding);
		c->encoding = strndup((const char *)value, valuelen);
	} else if (name[0] != ':' && !IS("te") && !(namelen >= 5 && !memcmp(name, "grpc-", 5))) {
		struct md *nm = realloc(c->req_md, (c->n_req_md + 1) * sizeof(*nm));
		if (!nm)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		c->req_md = nm;
		nm[c->n_req_md].key = strndup((const char *)name, namelen);
		nm[c->n_req_md].value = strndup((const char *)value, valuelen);
		c->n_req_md++;
		if (!nm[c->n_req_md - 1].key || !nm[c->n_req_md - 1].value)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
#undef IS
	return 0;
}

static int on_msg(void *arg, const uint8_t *msg, size_t len)
{
	struct grpc_call *c = arg;

	if (++c->n_msgs > 1)
		return 0; /* reported at end of stream */
	c->req = malloc(len ? len : 1);
	if (!c->req)
		return -ENOMEM;
	if (len)
		memcpy(c->req, msg, len);
	c->req_len = len;
	return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t sid, const uint8_t *data,
                         size_t len, void *ud)
{
	struct grpc_call *c = nghttp2_session_get_stream_user_data(ng, sid);
	int rc;
	(void)flags;
	(void)ud;

	if (!c || c->early || c->dispatched)
		return 0;
	rc = grpc_deframer_feed(&c->df, data, len, on_msg, c);
	if (rc == -EPROTO)
		early_status(c, 200, GRPC_UNIMPLEMENTED,
		             "compressed messages are not supported (grpc-encoding %s)",
		             c->encoding ? c->encoding : "not set");
	else if (rc == -EMSGSIZE)
		early_status(c, 200, GRPC_RESOURCE_EXHAUSTED,
		             "received message larger than max (%u vs. %zu)", c->df.last_len,
		             c->df.max);
	else if (rc < 0)
		early_status(c, 200, GRPC_RESOURCE_EXHAUSTED, "server out of memory");
	return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct grpc_call *c;
	(void)ud;

	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
		return 0;
	c = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	if (!c)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
		route(c);
	if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) && !c->early && !c->dispatched) {
		if (!grpc_deframer_idle(&c->df))
			early_status(c, 200, GRPC_INTERNAL, "request ended inside a message");
		else
			dispatch(c);
	}
	return 0;
}

/* After our END_STREAM: a client still sending is told to stop (RST_STREAM NO_ERROR). */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	(void)ud;
	if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
	    !nghttp2_session_get_stream_remote_close(ng, f->hd.stream_id))
		nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
	return 0;
}

static void call_detach(struct sconn *sc, struct grpc_call *c)
{
	if (c->cprev)
		c->cprev->cnext = c->cnext;
	else
		sc->calls = c->cnext;
	if (c->cnext)
		c->cnext->cprev = c->cprev;
	c->cnext = c->cprev = NULL;
	sc->n_calls--;
	h2_timer_cancel(c->loop, &c->deadline_timer);
	pthread_mutex_lock(&c->mu);
	c->stream_closed = true;
	if (!c->finished)
		atomic_store(&c->cancelled, true);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	c->conn = NULL;
	call_unref(c);
}

static int on_stream_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *ud)
{
	struct sconn *sc = ud;
	struct grpc_call *c = nghttp2_session_get_stream_user_data(ng, sid);
	(void)code;

	if (c) {
		nghttp2_session_set_stream_user_data(ng, sid, NULL);
		call_detach(sc, c);
	}
	return 0;
}

/* ---- connections ---------------------------------------------------------------------------- */

static void idle_fn(void *arg)
{
	struct sconn *sc = arg;
	uint64_t now = h2_now_ms(), last = h2_conn_last_activity(sc->h2);
	uint64_t idle = sc->srv->o.idle_timeout_ms;

	if (sc->n_calls == 0 && now - last >= idle) {
		nghttp2_session *ng = h2_conn_session(sc->h2);
		nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE,
		                      nghttp2_session_get_last_proc_stream_id(ng), NGHTTP2_NO_ERROR,
		                      (const uint8_t *)"idle", 4);
		h2_conn_flush(sc->h2);
		h2_conn_close(sc->h2, 0, "idle");
		return;
	}
	h2_timer_arm(sc->srv->loop, &sc->idle, (last > now ? last : now) + idle, idle_fn, sc);
}

static void sc_open(void *arg, struct h2_conn *h)
{
	struct sconn *sc = arg;
	struct grpc_server *s = sc->srv;
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_session *ng = NULL;
	nghttp2_settings_entry iv[] = {
	    {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->o.max_streams},
	    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
	    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, s->o.max_header_list},
	};

	if (nghttp2_session_callbacks_new(&cb) != 0)
		goto fail;
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cb);
		goto fail;
	}
	nghttp2_option_set_max_send_header_block_length(opt, 65536);
	if (nghttp2_session_server_new3(&ng, cb, sc, opt, h2_nghttp2_mem()) != 0)
		ng = NULL;
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (!ng)
		goto fail;
	h2_conn_set_session(h, ng);
	if (nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0)
		goto fail; /* the preface's SETTINGS is not optional */
	nghttp2_session_set_local_window_size(ng, NGHTTP2_FLAG_NONE, 0, 16 << 20);
	if (s->draining)
		nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
	if (s->o.idle_timeout_ms)
		h2_timer_arm(s->loop, &sc->idle, h2_now_ms() + s->o.idle_timeout_ms, idle_fn, sc);
	return;
fail:
	h2_conn_close(h, -ENOMEM, "out of memory");
}

static void sc_close(void *arg, struct h2_conn *h, int err, const char *why)
{
	struct sconn *sc = arg;
	struct grpc_server *s = sc->srv;
	(void)h;

	if (err && err != -ECONNRESET)
		log_v(2, "gRPC connection closed", "reason", why);
	while (sc->calls)
		call_detach(sc, sc->calls);
	h2_timer_cancel(s->loop, &sc->idle);
	if (sc->prev)
		sc->prev->next = sc->next;
	else
		s->conns = sc->next;
	if (sc->next)
		sc->next->prev = sc->prev;
	atomic_fetch_sub(&s->n_conns, 1);
	free(sc);
}

static const struct h2_conn_ops sconn_ops = {.on_open = sc_open, .on_close = sc_close};

static int add_conn(struct grpc_server *s, int fd, struct h2_conn **out, struct err *e)
{
	struct sconn *sc = calloc(1, sizeof(*sc));
	int rc;

	if (!sc) {
		if (fd >= 0)
			close(fd);
		return err_set(e, -ENOMEM, "out of memory");
	}
	sc->srv = s;
	sc->next = s->conns;
	if (s->conns)
		s->conns->prev = sc;
	s->conns = sc;
	atomic_fetch_add(&s->n_conns, 1);
	rc = h2_conn_new(&sc->h2, s->loop, fd, false, s->tls, NULL, &sconn_ops, sc, e);
	if (rc < 0) {
		s->conns = sc->next;
		if (sc->next)
			sc->next->prev = NULL;
		atomic_fetch_sub(&s->n_conns, 1);
		free(sc);
		return rc;
	}
	if (fd < 0)
		sc_open(sc, sc->h2);
	if (out)
		*out = sc->h2;
	return 0;
}

int grpc_server_mem_conn(struct grpc_server *s, struct h2_conn **out, struct err *e)
{
	return add_conn(s, -1, out, e);
}

static void accept_io(void *arg, uint32_t ev)
{
	struct grpc_server *s = arg;
	int lfd = -1, one = 1;
	size_t i;
	(void)ev;

	/* find which listener fired: the registration arg is the server, so try them all */
	for (i = 0; i < s->n_listen; i++) {
		lfd = s->lfds[i];
		for (int k = 0; k < 64 && lfd >= 0; k++) {
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0)
				break;
			if ((unsigned)atomic_load(&s->n_conns) >= s->o.max_conns || s->draining) {
				log_v(2, "gRPC connection refused: too many connections");
				close(fd);
				continue;
			}
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			add_conn(s, fd, NULL, NULL);
		}
	}
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int grpc_server_new(struct grpc_server **out, const struct grpc_server_opts *o, struct err *e)
{
	struct grpc_server *s = calloc(1, sizeof(*s));
	size_t n = 0;
	int rc;

	if (!s)
		return err_set(e, -ENOMEM, "gRPC server: out of memory");
	s->o = *o;
	if (!s->o.max_msg)
		s->o.max_msg = GRPC_DEFAULT_MAX_MSG;
	if (!s->o.max_streams)
		s->o.max_streams = 100;
	if (!s->o.max_conns)
		s->o.max_conns = 1024;
	if (!s->o.max_header_list)
		s->o.max_header_list = 16384;
	s->o.listen = NULL;
	pthread_mutex_init(&s->health_mu, NULL);
	s->loop = o->loop ? o->loop : h2_loop_default();
	if (!s->loop) {
		rc = err_set(e, -ENOMEM, "gRPC server: no event loop");
		goto fail;
	}
	while (o->listen && o->listen[n])
		n++;
	s->lfds = calloc(n + 1, sizeof(int));
	s->ports = calloc(n + 1, sizeof(int));
	s->listen_addrs = calloc(n + 1, sizeof(struct h2_addr));
	if (!s->lfds || !s->ports || !s->listen_addrs) {
		rc = err_set(e, -ENOMEM, "gRPC server: out of memory");
		goto fail;
	}
	for (s->n_listen = 0; s->n_listen < n; s->n_listen++) {
		s->lfds[s->n_listen] = -1;
		s->ports[s->n_listen] = -1;
		rc = h2_addr_parse(o->listen[s->n_listen], true, &s->listen_addrs[s->n_listen], e);
		if (rc < 0)
			goto fail;
	}
	if (o->tls_cert || o->tls_key) {
		rc = h2_tls_server_cfg_new(&s->tls, o->tls_cert, o->tls_key, o->tls_ca, e);
		if (rc < 0)
			goto fail;
	} else if (o->tls_ca) {
		rc = err_set(e, -EINVAL, "a client CA needs a server certificate and key");
		goto fail;
	}
	rc = h2_jobs_new(&s->jobs, s->loop, o->workers, e);
	if (rc < 0)
		goto fail;
	grpc_server_set_serving(s, "", true);
	*out = s;
	return 0;
fail:
	grpc_server_free(s);
	return rc;
}

int grpc_server_add_service(struct grpc_server *s, const struct grpc_service *svc, struct err *e)
{
	const struct grpc_service **ns;
	size_t i;

	if (s->started)
		return err_set(e, -EBUSY, "add service %s before starting the server", svc->name);
	for (i = 0; i < svc->n_methods; i++) {
		const struct grpc_method *m = &svc->methods[i];
		if (!m->name || !m->req || !m->resp || !m->unary == !m->server_stream)
			return err_set(e, -EINVAL, "service %s: method %zu is incomplete",
			               svc->name, i);
	}
	ns = realloc(s->svcs, (s->n_svcs + 1) * sizeof(*ns));
	if (!ns)
		return err_set(e, -ENOMEM, "out of memory");
	s->svcs = ns;
	s->svcs[s->n_svcs++] = svc;
	grpc_server_set_serving(s, svc->name, true);
	return 0;
}

struct start_arg {
	struct grpc_server *s;
	int rc;
};

static void start_fn(void *arg)
{
	struct start_arg *a = arg;
	size_t i;

	for (i = 0; i < a->s->n_listen && a->rc == 0; i++)
		a->rc = h2_loop_add_fd(a->s->loop, a->s->lfds[i], EPOLLIN, accept_io, a->s);
}

int grpc_server_start(struct grpc_server *s, struct err *e)
{
	struct start_arg a = {.s = s};
	size_t i;

	for (i = 0; i < s->n_listen; i++) {
		struct h2_addr *ad = &s->listen_addrs[i];
		int fd = h2_listen(ad, s->o.unix_mode, e);
		if (fd < 0)
			return fd;
		s->lfds[i] = fd;
		if (ad->family != AF_UNIX) {
			struct sockaddr_storage ss;
			socklen_t l = sizeof(ss);
			if (getsockname(fd, (struct sockaddr *)&ss, &l) == 0)
				s->ports[i] = ntohs(ss.ss_family == AF_INET
				                        ? ((struct sockaddr_in *)&ss)->sin_port
				                        : ((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	s->started = true;
	if (h2_loop_in_thread(s->loop))
		start_fn(&a);
	else
		h2_loop_run_sync(s->loop, start_fn, &a);
	if (a.rc < 0)
		return err_set(e, a.rc, "cannot watch listening sockets: %s", strerror(-a.rc));
	return 0;
}

int grpc_server_port(const struct grpc_server *s, size_t i)
{
	return i < s->n_listen ? s->ports[i] : -1;
}

static void drain_fn(void *arg)
{
	struct grpc_server *s = arg;
	struct sconn *sc;
	size_t i;

	s->draining = true;
	for (i = 0; i < s->n_listen; i++) {
		if (s->lfds[i] >= 0) {
			h2_loop_del_fd(s->loop, s->lfds[i]);
			close(s->lfds[i]);
			s->lfds[i] = -1;
			if (s->listen_addrs[i].family == AF_UNIX)
				unlink(((struct sockaddr_un *)&s->listen_addrs[i].sa)->sun_path);
		}
	}
	for (sc = s->conns; sc; sc = sc->next) {
		nghttp2_session *ng = h2_conn_session(sc->h2);
		if (!ng)
			continue;
		nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE,
		                      nghttp2_session_get_last_proc_stream_id(ng), NGHTTP2_NO_ERROR,
		                      (const uint8_t *)"shutdown", 8);
		h2_conn_flush(sc->h2);
	}
}

static void kill_fn(void *arg)
{
	struct grpc_server *s = arg;
	struct sconn *sc;

	for (sc = s->conns; sc; sc = sc->next)
		h2_conn_close(sc->h2, 0, "server shut down");
}

static void wait_conns(struct grpc_server *s, uint64_t until)
{
	while (atomic_load(&s->n_conns) > 0 && h2_now_ms() < until)
		usleep(5000);
}

void grpc_server_shutdown(struct grpc_server *s, uint64_t grace_ms)
{
	if (!s || s->shut)
		return;
	s->shut = true;
	grpc_server_set_serving(s, "", false);
	h2_loop_run_sync(s->loop, drain_fn, s);
	wait_conns(s, h2_now_ms() + grace_ms);
	h2_loop_run_sync(s->loop, kill_fn, s);
	wait_conns(s, h2_now_ms() + 10000);
}

void grpc_server_free(struct grpc_server *s)
{
	size_t i;

	if (!s)
		return;
	if (s->started)
		grpc_server_shutdown(s, 0);
	h2_jobs_free(s->jobs); /* waits for running handlers */
	for (i = 0; i < s->n_listen; i++)
		if (s->lfds[i] >= 0)
			close(s->lfds[i]);
	h2_tls_cfg_free(s->tls);
	server_health_free(s);
	pthread_mutex_destroy(&s->health_mu);
	free(s->svcs);
	free(s->lfds);
	free(s->ports);
	free(s->listen_addrs);
	free(s);
}
