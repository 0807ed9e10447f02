/* Generic HTTP/2 client.  Requests are submitted holding the loop (h2_loop_run); the loop's
 * threads read the connection and append each stream's response to that stream's buffer, from
 * which the owner's thread takes it under the stream's mutex.
 *
 * Receive flow control: a stream's window is max_buffer and is given back only for bytes its
 * reader has taken (in steps of a quarter window, from the reader's thread), so a server never
 * has more than max_buffer bytes of a stream in our buffer or in flight.  The connection's
 * window is given back as bytes arrive: a reader that stops holds up its own stream only. */
#include "h2/client.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "h2/conn.h"
#include "h2/net.h"

#define RETRY_FIRST_MS     200
#define RETRY_MAX_MS       10000
#define MAX_HEADERS        60
#define DEFAULT_MAX_BUFFER (1u << 20)
#define MAX_WINDOW         0x7fffffffu /* RFC 9113 6.9.1 */
#define CONNECTION_WINDOW  (16u << 20)

struct client_connection {
	struct h2_client *cl;
	struct h2_conn *h2;
	bool ready;
	struct h2_stream *streams; /* submitted, not yet closed */
	struct client_connection
	    *next; /* the client's connections, current or draining after GOAWAY */
};

struct h2_client {
	struct h2_loop *loop;
	struct h2_addr addr;
	struct h2_tls_cfg *tls;
	char authority[300], verify[256];
	size_t max_buffer; /* the stream window */
	size_t consume_step;
	struct client_connection *cur;
	struct client_connection *conns; /* every connection not yet torn down */
	atomic_int live;                 /* connections not yet torn down */
	atomic_uint made;                /* connections started */
	uint64_t retry_ms, retry_at;
	char last_err[ERR_MSG_MAX];
	struct h2_stream *pend; /* waiting for the connection, newest first */
	bool closing;
};

struct h2_stream {
	struct h2_client *cl;
	atomic_int refs; /* the owner's and, until the stream is over for it, the loop's */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* loop only */
	struct client_connection *hc;
	int32_t sid;
	struct h2_stream *next, *prev;
	nghttp2_nv nv[MAX_HEADERS + 4];
	size_t n_nv;
	char *req; /* the request's strings and body, one allocation */
	bool has_body;
	struct h2_body body;
	/* under mu */
	int status;
	bool head, ended;
	int err; /* negative errno once the stream failed */
	char msg[ERR_MSG_MAX];
	char *hdrs; /* "name\0value\0" pairs of the response headers */
	size_t hdrs_len, hdrs_cap;
	uint8_t *buf;
	size_t off, len, cap;
	size_t taken;        /* read but not yet given back to the stream's window */
	bool consume_queued; /* consume_post is queued */
	struct h2_post consume_post;
};

static void stream_unref(struct h2_stream *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->req);
	free(s->hdrs);
	free(s->buf);
	free(s);
}

static void fail_locked(struct h2_stream *s, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_locked(struct h2_stream *s, int err, const char *fmt, ...)
{
	va_list ap;

	if (s->err)
		return;
	s->err = err;
	va_start(ap, fmt);
	vsnprintf(s->msg, sizeof(s->msg), fmt, ap);
	va_end(ap);
}

/* Loop: the stream is over for the loop (err 0: ended normally). */
static void stream_over(struct h2_stream *s, int err, const char *why)
{
	pthread_mutex_lock(&s->mu);
	if (err)
		fail_locked(s, err, "%s", why);
	else if (!s->head)
		fail_locked(s, -EPROTO, "stream ended without response headers");
	s->ended = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	stream_unref(s);
}

static void unlink_stream(struct h2_stream **head, struct h2_stream *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		*head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
}

static void link_stream(struct h2_stream **head, struct h2_stream *s)
{
	s->prev = NULL;
	s->next = *head;
	if (*head)
		(*head)->prev = s;
	*head = s;
}

/* ---- nghttp2 callbacks ----------------------------------------------------------------------- */

static bool grow(void *pp, size_t *cap, size_t need)
{
	void **p = pp;
	size_t c = *cap ? *cap : 256;
	void *n;

	if (need <= *cap)
		return true;
	while (c < need)
		c *= 2;
	n = realloc(*p, c);
	if (!n)
		return false;
	*p = n;
	*cap = c;
	return true;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct h2_stream *s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	(void)flags;
	(void)ud;

	if (!s || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_RESPONSE)
		return 0;
	pthread_mutex_lock(&s->mu);
	if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
		s->status = 0;
		for (size_t i = 0; i < valuelen && i < 3; i++)
			s->status = s->status * 10 + (value[i] - '0');
	} else if (grow(&s->hdrs, &s->hdrs_cap, s->hdrs_len + namelen + valuelen + 2)) {
		memcpy(s->hdrs + s->hdrs_len, name, namelen);
		s->hdrs[s->hdrs_len + namelen] = '\0';
		s->hdrs_len += namelen + 1;
		memcpy(s->hdrs + s->hdrs_len, value, valuelen);
		s->hdrs[s->hdrs_len + valuelen] = '\0';
		s->hdrs_len += valuelen + 1;
	}
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct client_connection *hc = ud;
	struct h2_stream *s;

	if (f->hd.type == NGHTTP2_GOAWAY && hc->cl->cur == hc)
		hc->cl->cur = NULL; /* new requests open a new connection */
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_RESPONSE)
		return 0;
	s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	if (!s)
		return 0;
	pthread_mutex_lock(&s->mu);
	s->head = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* DATA nobody will read: its bytes go back to the stream's window at once. */
static int drop(nghttp2_session *ng, int32_t sid, size_t len)
{
	return nghttp2_session_consume_stream(ng, sid, len) ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t sid, const uint8_t *data,
                         size_t len, void *ud)
{
	struct h2_stream *s = nghttp2_session_get_stream_user_data(ng, sid);
	size_t max;
	bool reset = false;
	(void)flags;

	/* the connection's window comes back at once; the stream's as its reader takes the bytes */
	if (nghttp2_session_consume_connection(ng, len) != 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if (!s)
		return drop(ng, sid, len);
	max = ((struct client_connection *)ud)->cl->max_buffer;
	pthread_mutex_lock(&s->mu);
	if (s->err) {
		pthread_mutex_unlock(&s->mu);
		return drop(ng, sid, len);
	}
	if (s->off && s->off == s->len)
		s->off = s->len = 0;
	if (s->len - s->off + len > max) {
		/* more than the window we granted: only a server ignoring flow control */
		fail_locked(s, -EMSGSIZE,
		            "the server sent more than the %zu bytes a stream buffers", max);
		reset = true;
	} else {
		if (s->off && s->len + len > s->cap) {
			memmove(s->buf, s->buf + s->off, s->len - s->off);
			s->len -= s->off;
			s->off = 0;
		}
		if (grow(&s->buf, &s->cap, s->len + len)) {
			memcpy(s->buf + s->len, data, len);
			s->len += len;
		} else {
			fail_locked(s, -ENOMEM, "out of memory receiving a response");
			reset = true;
		}
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (!reset)
		return 0;
	nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, sid, NGHTTP2_CANCEL);
	return drop(ng, sid, len);
}

static int on_stream_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *ud)
{
	struct client_connection *hc = ud;
	struct h2_stream *s = nghttp2_session_get_stream_user_data(ng, sid);
	char why[96];

	if (!s)
		return 0;
	nghttp2_session_set_stream_user_data(ng, sid, NULL);
	unlink_stream(&hc->streams, s);
	s->hc = NULL;
	snprintf(why, sizeof(why), "stream reset by the server (HTTP/2 error %u)", code);
	stream_over(s, code ? -ECONNRESET : 0, why);
	return 0;
}

/* ---- connection ----------------------------------------------------------------------------- */

static void submit(struct client_connection *hc, struct h2_stream *s)
{
	nghttp2_data_provider dp = {.source.ptr = &s->body, .read_callback = h2_body_read};
	int32_t sid = nghttp2_submit_request(h2_conn_session(hc->h2), NULL, s->nv, s->n_nv,
	                                     s->has_body ? &dp : NULL, s);
	char why[160];

	if (sid < 0) {
		snprintf(why, sizeof(why), "cannot submit the request: %s", nghttp2_strerror(sid));
		stream_over(s, -EIO, why);
		return;
	}
	s->sid = sid;
	s->hc = hc;
	link_stream(&hc->streams, s);
}

static void retry_later(struct h2_client *cl, const char *why)
{
	uint64_t b = cl->retry_ms ? cl->retry_ms * 2 : RETRY_FIRST_MS;

	cl->retry_ms = b > RETRY_MAX_MS ? RETRY_MAX_MS : b;
	cl->retry_at = h2_now_ms() + cl->retry_ms;
	snprintf(cl->last_err, sizeof(cl->last_err), "%s", why);
}

static void hc_callbacks(nghttp2_session_callbacks *cb)
{
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
}

static void hc_open(void *arg, struct h2_conn *h)
{
	struct client_connection *hc = arg;
	struct h2_client *cl = hc->cl;
	struct h2_client_window w = {(uint32_t)cl->max_buffer, CONNECTION_WINDOW, true};

	if (h2_conn_client_session(h, hc_callbacks, hc, &w) < 0)
		return;
	hc->ready = true;
	cl->retry_ms = 0;
	while (cl->cur == hc && cl->pend) {
		struct h2_stream *s = cl->pend;
		unlink_stream(&cl->pend, s);
		submit(hc, s);
	}
}

static void hc_close(void *arg, struct h2_conn *h, int err, const char *why)
{
	struct client_connection *hc = arg;
	struct h2_client *cl = hc->cl;
	char msg[ERR_MSG_MAX];
	(void)h;

	snprintf(msg, sizeof(msg), "%.200s: %.250s", cl->addr.text,
	         *why ? why : "connection closed");
	if (err == 0)
		err = cl->closing ? -ECONNABORTED : -ECONNRESET;
	if (cl->cur == hc) {
		cl->cur = NULL;
		if (!hc->ready)
			retry_later(cl, msg);
		while (cl->pend) {
			struct h2_stream *s = cl->pend;
			unlink_stream(&cl->pend, s);
			stream_over(s, err, msg);
		}
	}
	while (hc->streams) {
		struct h2_stream *s = hc->streams;
		unlink_stream(&hc->streams, s);
		s->hc = NULL;
		stream_over(s, err, msg);
	}
	for (struct client_connection **p = &cl->conns; *p; p = &(*p)->next)
		if (*p == hc) {
			*p = hc->next;
			break;
		}
	atomic_fetch_sub(&cl->live, 1);
	free(hc);
}

static const struct h2_conn_ops hconn_ops = {.on_open = hc_open, .on_close = hc_close};

/* Loop: a new connection becomes cl->cur, or the reason it could not is returned. */
static int connect_new(struct h2_client *cl, struct err *e)
{
	struct client_connection *hc = calloc(1, sizeof(*hc));
	bool inprog;
	int fd, rc;

	if (!hc)
		return err_set(e, -ENOMEM, "out of memory");
	hc->cl = cl;
	fd = h2_connect_start(&cl->addr, &inprog, e);
	if (fd < 0) {
		free(hc);
		return fd;
	}
	cl->cur = hc;
	atomic_fetch_add(&cl->live, 1);
	atomic_fetch_add(&cl->made, 1);
	/* hc_open may run inside h2_conn_new; a failure there runs no callback */
	hc->next = cl->conns;
	cl->conns = hc;
	rc = h2_conn_new(&hc->h2, cl->loop, fd, inprog, cl->tls, cl->verify, &hconn_ops, hc, e);
	if (rc < 0) {
		cl->conns = hc->next;
		cl->cur = NULL;
		atomic_fetch_sub(&cl->live, 1);
		free(hc);
	}
	return rc;
}

static void start_fn(void *arg)
{
	struct h2_stream *s = arg;
	struct h2_client *cl = s->cl;
	struct err e = {0};
	uint64_t now;
	int rc;

	if (cl->closing) {
		stream_over(s, -ECONNABORTED, "client closed");
		return;
	}
	if (!cl->cur) {
		now = h2_now_ms();
		if (now < cl->retry_at) {
			char why[ERR_MSG_MAX + 40];
			snprintf(why, sizeof(why), "%s (retrying in %llu ms)", cl->last_err,
			         (unsigned long long)(cl->retry_at - now));
			stream_over(s, -ECONNREFUSED, why);
			return;
		}
		rc = connect_new(cl, &e);
		if (rc < 0) {
			retry_later(cl, e.msg);
			stream_over(s, rc, e.msg);
			return;
		}
	}
	if (!cl->cur) { /* failed inside h2_conn_new; hc_close said why */
		stream_over(s, -ECONNREFUSED, cl->last_err);
		return;
	}
	if (cl->cur->ready) {
		submit(cl->cur, s);
		h2_conn_flush(cl->cur->h2);
	} else {
		link_stream(&cl->pend, s);
	}
}

static void cancel_fn(void *arg)
{
	struct h2_stream *s = arg;
	struct h2_client *cl = s->cl;
	struct h2_stream *p;

	if (s->hc) {
		nghttp2_submit_rst_stream(h2_conn_session(s->hc->h2), NGHTTP2_FLAG_NONE, s->sid,
		                          NGHTTP2_CANCEL);
		h2_conn_flush(s->hc->h2);
	} else {
		for (p = cl->pend; p && p != s; p = p->next)
			;
		if (p) {
			unlink_stream(&cl->pend, s);
			stream_over(s, -ECANCELED, "cancelled");
		}
	}
	stream_unref(s);
}

/* Loop: gives what the reader took back to the stream's window. */
static void consume_fn(void *arg)
{
	struct h2_stream *s = arg;
	size_t n;

	pthread_mutex_lock(&s->mu);
	n = s->taken;
	s->taken = 0;
	s->consume_queued = false;
	pthread_mutex_unlock(&s->mu);
	if (s->hc && n > 0) {
		if (nghttp2_session_consume_stream(h2_conn_session(s->hc->h2), s->sid, n) != 0)
			h2_conn_close(s->hc->h2, -ENOMEM, "out of memory");
		else
			h2_conn_flush(s->hc->h2);
	}
	stream_unref(s);
}

static void close_fn(void *arg)
{
	struct h2_client *cl = arg;

	cl->closing = true;
	for (struct client_connection *hc = cl->conns; hc; hc = hc->next)
		h2_conn_close(hc->h2, -ECONNABORTED, "client closed");
}

/* ---- public API --------------------------------------------------------------------------- */

int h2_client_new(struct h2_client **out, const char *target, const struct h2_client_opts *o,
                  struct err *e)
{
	struct h2_client *cl = calloc(1, sizeof(*cl));
	const char *hostport;
	int rc;

	if (!cl)
		return err_set(e, -ENOMEM, "HTTP/2 client: out of memory");
	rc = h2_addr_parse(target, false, &cl->addr, e);
	if (rc < 0) {
		free(cl);
		return rc;
	}
	cl->loop = o && o->loop ? o->loop : h2_loop_default();
	if (!cl->loop) {
		free(cl);
		return err_set(e, -ENOMEM, "HTTP/2 client: no event loop");
	}
	cl->tls = o ? o->tls : NULL;
	cl->max_buffer = o && o->max_buffer ? o->max_buffer : DEFAULT_MAX_BUFFER;
	if (cl->max_buffer > MAX_WINDOW)
		cl->max_buffer = MAX_WINDOW;
	/* below half the window: the server stops only once all of it waits in our buffer */
	cl->consume_step = cl->max_buffer / 4 ? cl->max_buffer / 4 : 1;
	hostport = strncmp(target, "tcp://", 6) == 0 ? target + 6 : target;
	if (o && o->server_name) {
		snprintf(cl->verify, sizeof(cl->verify), "%s", o->server_name);
		snprintf(cl->authority, sizeof(cl->authority), "%s", o->server_name);
	} else {
		snprintf(cl->verify, sizeof(cl->verify), "%s", cl->addr.host);
		snprintf(cl->authority, sizeof(cl->authority), "%s",
		         cl->addr.family == AF_UNIX ? "localhost" : hostport);
	}
	*out = cl;
	return 0;
}

void h2_client_free(struct h2_client *cl)
{
	uint64_t until;

	if (!cl)
		return;
	h2_loop_run_sync(cl->loop, close_fn, cl);
	until = h2_now_ms() + 10000;
	while (atomic_load(&cl->live) > 0 && h2_now_ms() < until)
		usleep(2000);
	free(cl);
}

unsigned h2_client_connections(const struct h2_client *cl)
{
	return atomic_load(&cl->made);
}

/* The request's strings and body in one allocation, and the header block pointing into it. */
static int stream_prepare(struct h2_stream *s, const struct h2_request *rq, struct err *e)
{
	const char *k[MAX_HEADERS + 4], *v[MAX_HEADERS + 4];
	size_t n = 0, bytes = rq->body_len, i;
	char *p;

	if (rq->n_headers > MAX_HEADERS)
		return err_set(e, -E2BIG, "more than %d request headers", MAX_HEADERS);
	k[n] = ":method", v[n++] = rq->method;
	k[n] = ":scheme", v[n++] = s->cl->tls ? "https" : "http";
	k[n] = ":path", v[n++] = rq->path;
	k[n] = ":authority", v[n++] = s->cl->authority;
	for (i = 0; i < rq->n_headers; i++)
		k[n] = rq->headers[i].name, v[n++] = rq->headers[i].value;
	for (i = 0; i < n; i++)
		bytes += strlen(k[i]) + strlen(v[i]) + 2;
	s->req = p = malloc(bytes + 1);
	if (!p)
		return err_set(e, -ENOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		size_t kl = strlen(k[i]), vl = strlen(v[i]);
		s->nv[i] = (nghttp2_nv){(uint8_t *)memcpy(p, k[i], kl + 1),
		                        (uint8_t *)memcpy(p + kl + 1, v[i], vl + 1), kl, vl,
		                        NGHTTP2_NV_FLAG_NONE};
		p += kl + vl + 2;
	}
	s->n_nv = n;
	if (rq->body) {
		if (rq->body_len)
			memcpy(p, rq->body, rq->body_len);
		s->body = (struct h2_body){(const uint8_t *)p, rq->body_len, 0};
		s->has_body = true;
	}
	return 0;
}

int h2_client_open(struct h2_client *cl, const struct h2_request *rq, struct h2_stream **out,
                   struct err *e)
{
	struct h2_stream *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;
	int rc;

	if (!s)
		return err_set(e, -ENOMEM, "out of memory");
	s->cl = cl;
	rc = stream_prepare(s, rq, e);
	if (rc < 0) {
		free(s->req);
		free(s);
		return rc;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&s->refs, 2);
	if (h2_loop_run(cl->loop, start_fn, s) < 0) {
		stream_unref(s);
		stream_unref(s);
		return err_set(e, -ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

/* Under s->mu: waits until ready(s) or the deadline (0: none).  -ETIMEDOUT when it passed. */
static int wait_until(struct h2_stream *s, bool (*ready)(const struct h2_stream *), uint64_t at)
{
	struct timespec ts = {.tv_sec = (time_t)(at / 1000),
	                      .tv_nsec = (long)(at % 1000) * 1000000};

	while (!ready(s)) {
		if (!at)
			pthread_cond_wait(&s->cv, &s->mu);
		else if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT && !ready(s))
			return -ETIMEDOUT;
	}
	return 0;
}

static bool head_ready(const struct h2_stream *s)
{
	return s->head || s->err || s->ended;
}

static bool data_ready(const struct h2_stream *s)
{
	return s->off < s->len || s->err || s->ended;
}

static uint64_t deadline(int64_t timeout_ms)
{
	return timeout_ms > 0 ? h2_now_ms() + (uint64_t)timeout_ms : 0;
}

int h2_stream_head(struct h2_stream *s, int64_t timeout_ms, struct err *e)
{
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = wait_until(s, head_ready, deadline(timeout_ms));
	if (rc < 0)
		err_set(e, rc, "no response within %lld ms", (long long)timeout_ms);
	else if (s->head)
		rc = s->status;
	else
		rc = err_set(e, s->err, "%s", s->msg);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

const char *h2_stream_header(struct h2_stream *s, const char *name)
{
	const char *p = NULL;
	size_t i = 0;

	pthread_mutex_lock(&s->mu);
	if (s->head) {
		while (i < s->hdrs_len) {
			const char *k = s->hdrs + i, *v = k + strlen(k) + 1;
			if (strcmp(k, name) == 0) {
				p = v;
				break;
			}
			i = (size_t)(v - s->hdrs) + strlen(v) + 1;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return p;
}

ssize_t h2_stream_read(struct h2_stream *s, void *buf, size_t len, int64_t timeout_ms,
                       struct err *e)
{
	bool consume = false;
	ssize_t n;
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = wait_until(s, data_ready, deadline(timeout_ms));
	if (rc < 0) {
		n = err_set(e, rc, "no data within %lld ms", (long long)timeout_ms);
	} else if (s->err == -ECANCELED || s->err == -EMSGSIZE || s->off == s->len) {
		/* a cancelled or overflowing stream drops its buffer; otherwise data goes first */
		n = s->err ? err_set(e, s->err, "%s", s->msg) : 0;
	} else {
		n = (ssize_t)(s->len - s->off < len ? s->len - s->off : len);
		memcpy(buf, s->buf + s->off, (size_t)n);
		s->off += (size_t)n;
		s->taken += (size_t)n;
		if (s->taken >= s->cl->consume_step && !s->consume_queued && !s->ended) {
			s->consume_queued = consume = true;
			atomic_fetch_add(&s->refs, 1);
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (consume)
		h2_loop_run_or_defer(s->cl->loop, &s->consume_post, consume_fn, s);
	return n;
}

int h2_stream_read_all(struct h2_stream *s, char **body, size_t *len, int64_t timeout_ms,
                       struct err *e)
{
	uint64_t at = deadline(timeout_ms);
	size_t cap = 0, n = 0;
	char *b = NULL;

	for (;;) {
		int64_t left = 0;
		ssize_t r;
		if (at) {
			uint64_t now = h2_now_ms();
			if (now >= at) {
				free(b);
				return err_set(e, -ETIMEDOUT, "response incomplete after %lld ms",
				               (long long)timeout_ms);
			}
			left = (int64_t)(at - now);
		}
		if (!grow(&b, &cap, n + 16384 + 1)) {
			free(b);
			return err_set(e, -ENOMEM, "out of memory");
		}
		r = h2_stream_read(s, b + n, cap - n - 1, left, e);
		if (r < 0) {
			free(b);
			return (int)r;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	b[n] = '\0';
	*body = b;
	*len = n;
	return 0;
}

void h2_stream_cancel(struct h2_stream *s)
{
	pthread_mutex_lock(&s->mu);
	fail_locked(s, -ECANCELED, "cancelled");
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	atomic_fetch_add(&s->refs, 1);
	if (h2_loop_run(s->cl->loop, cancel_fn, s) < 0)
		stream_unref(s);
}

void h2_stream_free(struct h2_stream *s)
{
	bool ended;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	ended = s->ended;
	pthread_mutex_unlock(&s->mu);
	if (!ended)
		h2_stream_cancel(s);
	stream_unref(s);
}
