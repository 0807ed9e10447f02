/* gRPC channel.  A call is submitted holding the loop on the caller's thread; the caller then
 * reads its connection itself until its response is in (h2_conn_reader_*), or, when another
 * caller is reading that connection already, waits on a per-call condition. */
#include "grpc/client.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/time.h"
#include "grpc/metrics.h"
#include "h2/conn.h"
#include "h2/net.h"
#include "h2/tls.h"

#define BACKOFF_FIRST 200
#define BACKOFF_MAX   10000

struct client_connection;

struct client_call {
	struct grpc_channel *ch;
	struct client_connection *cc;
	int32_t sid;
	struct client_call *next, *prev; /* pending list or client_conn's active list */
	atomic_int refs;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done, started;
	pthread_t caller;
	struct h2_conn *rconn; /* caller only: the connection it reads itself */
	int rfd;               /* its fd, -1 when not reading */
	bool rgone;            /* the connection closed while the caller read it */
	/* request: copies, because the loop may use them after the caller gave up */
	char *path;
	struct grpc_md *md; /* md and its strings share one allocation */
	uint8_t *body;
	struct h2_body src;   /* reads body */
	uint64_t deadline_at; /* 0: none */
	/* response (loop) */
	struct grpc_deframer df;
	uint8_t *resp;
	size_t resp_len;
	int n_msgs;
	int http_status, grpc_status;
	int local_code; /* -1: none */
	char msg[GRPC_STATUS_MSG_MAX];
};

struct client_connection {
	struct grpc_channel *ch;
	struct h2_conn *h2;
	bool ready;
	uint64_t id; /* set when ready: ch->conn_ids */
	struct client_call *calls;
};

struct grpc_channel {
	struct h2_loop *loop;
	struct h2_addr addr;
	struct h2_tls_cfg *tls;
	char authority[300], verify[256];
	size_t max_msg;
	struct client_connection *cur; /* set by current() only */
	_Atomic uint64_t ready_id;     /* cur's id while cur is ready, else 0: grpc_channel_conn_id */
	atomic_int n_conns;
	uint64_t backoff, retry_at, conn_ids, backoff_first, backoff_max;
	char last_err[ERR_MSG_MAX];
	struct client_call *pend_head, *pend_tail;
	bool closing;
};

void grpc_channel_opts_init(struct grpc_channel_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_msg = GRPC_DEFAULT_MAX_MSG;
}

static void client_call_unref(struct client_call *c)
{
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	grpc_deframer_free(&c->df);
	free(c->path);
	free(c->md);
	free(c->body);
	free(c->resp);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static void set_local(struct client_call *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_local(struct client_call *c, int code, const char *fmt, ...)
{
	va_list ap;
	if (c->local_code >= 0)
		return;
	c->local_code = code;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
}

/* Loop: the call is over for the loop; wake the caller and drop the loop's reference. */
static void client_call_done(struct client_call *c, uint32_t h2err)
{
	if (c->local_code < 0 && c->grpc_status < 0) {
		if (c->http_status && c->http_status != 200)
			set_local(c, grpc_code_from_http(c->http_status), "HTTP status %d",
			          c->http_status);
		else if (h2err)
			set_local(c, grpc_code_from_h2_error(h2err),
			          "stream reset by the server (HTTP/2 error %u)", h2err);
		else
			set_local(c, GRPC_INTERNAL, "response ended without grpc-status");
	}
	pthread_mutex_lock(&c->mu);
	c->done = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	client_call_unref(c);
}

static void list_del(struct client_call **head, struct client_call **tail, struct client_call *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else if (tail)
		*tail = c->prev;
	c->next = c->prev = NULL;
}

/* ---- nghttp2 callbacks ----------------------------------------------------------------------- */

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct client_call *c = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	(void)flags;
	(void)ud;

	if (!c || f->hd.type != NGHTTP2_HEADERS)
		return 0;
#define IS(s) (namelen == sizeof(s) - 1 && memcmp(name, s, namelen) == 0)
	if (IS(":status")) {
		c->http_status = 0;
		for (size_t i = 0; i < valuelen && i < 4; i++)
			c->http_status = c->http_status * 10 + (value[i] - '0');
	} else if (IS("grpc-status")) {
		int v = 0;
		for (size_t i = 0; i < valuelen && i < 4; i++)
			v = v * 10 + (value[i] >= '0' && value[i] <= '9' ? value[i] - '0' : 0);
		c->grpc_status = v;
	} else if (IS("grpc-message")) {
		grpc_msg_decode((const char *)value, valuelen, c->msg, sizeof(c->msg));
	}
#undef IS
	return 0;
}

static int on_msg(void *arg, const uint8_t *msg, size_t len)
{
	struct client_call *c = arg;
	if (++c->n_msgs > 1)
		return 0;
	c->resp = malloc(len ? len : 1);
	if (!c->resp)
		return -ENOMEM;
	if (len)
		memcpy(c->resp, msg, len);
	c->resp_len = len;
	return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t sid, const uint8_t *data,
                         size_t len, void *ud)
{
	struct client_call *c = nghttp2_session_get_stream_user_data(ng, sid);
	int rc;
	(void)flags;
	(void)ud;

	if (!c || c->local_code >= 0)
		return 0;
	rc = grpc_deframer_feed(&c->df, data, len, on_msg, c);
	if (rc == 0)
		return 0;
	if (rc == -EMSGSIZE)
		set_local(c, GRPC_RESOURCE_EXHAUSTED,
		          "received message larger than max (%u vs. %zu)", c->df.last_len,
		          c->df.max);
	else if (rc == -EPROTO)
		set_local(c, GRPC_INTERNAL, "compressed response messages are not supported");
	else
		set_local(c, GRPC_RESOURCE_EXHAUSTED, "client out of memory");
	nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, sid, NGHTTP2_CANCEL);
	return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *ud)
{
	struct client_connection *cc = ud;
	struct client_call *c = nghttp2_session_get_stream_user_data(ng, sid);

	if (!c)
		return 0;
	nghttp2_session_set_stream_user_data(ng, sid, NULL);
	list_del(&cc->calls, NULL, c);
	c->cc = NULL;
	client_call_done(c, code);
	return 0;
}

/* On the loop: cc (or NULL) becomes the connection new calls use; what grpc_channel_conn_id
 * answers follows it. */
static void current(struct grpc_channel *ch, struct client_connection *cc)
{
	ch->cur = cc;
	atomic_store(&ch->ready_id, cc && cc->ready ? cc->id : 0);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct client_connection *cc = ud;
	(void)ng;

	if (f->hd.type == NGHTTP2_GOAWAY && cc->ch->cur == cc)
		current(cc->ch, NULL); /* new calls open a new connection */
	return 0;
}

/* ---- connection ----------------------------------------------------------------------------- */

static void submit(struct client_connection *cc, struct client_call *c)
{
	struct grpc_channel *ch = cc->ch;
	nghttp2_session *ng = h2_conn_session(cc->h2);
	nghttp2_nv nv[72];
	nghttp2_data_provider dp = {.source.ptr = &c->src, .read_callback = h2_body_read};
	char tmo[32];
	size_t n = 0, i;
	int32_t sid;

#define NV(k, v) nv[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), 0}
	NV(":method", "POST");
	NV(":scheme", ch->tls ? "https" : "http");
	NV(":path", c->path);
	NV(":authority", ch->authority);
	NV("te", "trailers");
	NV("content-type", "application/grpc");
	NV("user-agent", "pillar-csi-grpc/0.1");
	if (c->deadline_at) {
		uint64_t now = h2_now_ms();
		if (now >= c->deadline_at) {
			set_local(c, GRPC_DEADLINE_EXCEEDED, "deadline exceeded before sending");
			client_call_done(c, 0);
			return;
		}
		grpc_timeout_format((int64_t)(c->deadline_at - now), tmo, sizeof(tmo));
		NV("grpc-timeout", tmo);
	}
	for (i = 0; c->md && c->md[i].key && n < 70; i++)
		NV(c->md[i].key, c->md[i].value);
#undef NV
	sid = nghttp2_submit_request(ng, NULL, nv, n, &dp, c);
	if (sid < 0) {
		set_local(c, GRPC_INTERNAL, "cannot submit request: %s", nghttp2_strerror(sid));
		client_call_done(c, 0);
		return;
	}
	c->sid = sid;
	c->cc = cc;
	c->next = cc->calls;
	if (cc->calls)
		cc->calls->prev = c;
	cc->calls = c;
}

static void cc_callbacks(nghttp2_session_callbacks *cb)
{
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
}

/* After a failed connection attempt at now: the next wait, doubled up to the maximum. */
static void backoff_grow(struct grpc_channel *ch, uint64_t now)
{
	uint64_t b = ch->backoff ? ch->backoff * 2 : ch->backoff_first;
	ch->backoff = b > ch->backoff_max ? ch->backoff_max : b;
	ch->retry_at = now + ch->backoff;
}

static void cc_open(void *arg, struct h2_conn *h)
{
	struct client_connection *cc = arg;
	struct grpc_channel *ch = cc->ch;

	if (h2_conn_client_session(h, cc_callbacks, cc, NULL) < 0)
		return;
	cc->ready = true;
	cc->id = ++ch->conn_ids;
	if (ch->cur == cc)
		current(ch, cc);
	ch->backoff = 0;
	while (ch->cur == cc && ch->pend_head) {
		struct client_call *c = ch->pend_head;
		list_del(&ch->pend_head, &ch->pend_tail, c);
		submit(cc, c);
	}
}

static void cc_close(void *arg, struct h2_conn *h, int err, const char *why)
{
	struct client_connection *cc = arg;
	struct grpc_channel *ch = cc->ch;
	char msg[ERR_MSG_MAX];
	(void)h;

	snprintf(msg, sizeof(msg), "%.200s: %.250s", ch->addr.text,
	         *why ? why : "connection closed");
	if (ch->cur == cc) {
		current(ch, NULL);
		if (!cc->ready) {
			backoff_grow(ch, h2_now_ms());
			snprintf(ch->last_err, sizeof(ch->last_err), "%s", msg);
		}
		while (ch->pend_head) {
			struct client_call *c = ch->pend_head;
			list_del(&ch->pend_head, &ch->pend_tail, c);
			set_local(c, GRPC_UNAVAILABLE, "%s", msg);
			client_call_done(c, 0);
		}
	}
	(void)err;
	while (cc->calls) {
		struct client_call *c = cc->calls;
		list_del(&cc->calls, NULL, c);
		c->cc = NULL;
		set_local(c, GRPC_UNAVAILABLE, "%s", msg);
		client_call_done(c, 0);
	}
	atomic_fetch_sub(&ch->n_conns, 1);
	free(cc);
}

static const struct h2_conn_ops client_conn_ops = {.on_open = cc_open, .on_close = cc_close};

static void reset_backoff_fn(void *arg)
{
	struct grpc_channel *ch = arg;
	ch->backoff = 0;
	ch->retry_at = 0;
}

void grpc_channel_reset_backoff(struct grpc_channel *ch)
{
	h2_loop_run_sync(ch->loop, reset_backoff_fn, ch);
}

uint64_t grpc_channel_conn_id(struct grpc_channel *ch)
{
	return atomic_load(&ch->ready_id);
}

/* Holding the loop, on the caller's thread: read the connection itself while waiting. */
static void read_myself(struct client_call *c, struct client_connection *cc)
{
	bool done;

	if (!pthread_equal(c->caller, pthread_self()))
		return;
	pthread_mutex_lock(&c->mu);
	done = c->done;
	pthread_mutex_unlock(&c->mu);
	/* only a call alone on its connection: with calls in flight side by side the loop reads
	 * for all of them and no single caller becomes everyone's reader */
	if (done || c->cc != cc || cc->calls != c || c->next)
		return;
	c->rfd = h2_conn_reader_begin(cc->h2);
	if (c->rfd >= 0)
		c->rconn = cc->h2;
}

/* Sends c on its channel's current connection when that one is ready: true when sent. */
static bool send_if_ready(struct client_call *c)
{
	struct client_connection *cc = c->ch->cur;
	if (!cc || !cc->ready)
		return false;
	submit(cc, c);
	h2_conn_flush(cc->h2);
	read_myself(c, cc);
	return true;
}

static void start_fn(void *arg)
{
	struct client_call *c = arg;
	struct grpc_channel *ch = c->ch;
	struct err e = {0};
	bool inprog;
	int fd;
	if (ch->closing) {
		set_local(c, GRPC_UNAVAILABLE, "channel closed");
		goto fail;
	}
	if (send_if_ready(c))
		return;
	if (!ch->cur) {
		struct client_connection *cc;
		uint64_t now = h2_now_ms();
		if (now < ch->retry_at) {
			set_local(c, GRPC_UNAVAILABLE, "%s (retrying in %llu ms)", ch->last_err,
			          (unsigned long long)(ch->retry_at - now));
			goto fail;
		}
		cc = calloc(1, sizeof(*cc));
		if (!cc) {
			set_local(c, GRPC_RESOURCE_EXHAUSTED, "client out of memory");
			goto fail;
		}
		cc->ch = ch;
		fd = h2_connect_start(&ch->addr, &inprog, &e);
		if (fd >= 0) {
			current(ch, cc);
			atomic_fetch_add(&ch->n_conns, 1);
			if (h2_conn_new(&cc->h2, ch->loop, fd, inprog, ch->tls, ch->verify,
			                &client_conn_ops, cc, &e) < 0) {
				atomic_fetch_sub(&ch->n_conns, 1);
				current(ch, NULL);
				fd = -1;
			}
		}
		if (fd < 0) {
			free(cc);
			backoff_grow(ch, now);
			snprintf(ch->last_err, sizeof(ch->last_err), "%s", e.msg);
			set_local(c, GRPC_UNAVAILABLE, "%s", e.msg);
			goto fail;
		}
	}
	/* connecting (maybe already open: cc_open ran inside h2_conn_new) */
	if (send_if_ready(c))
		return;
	if (!ch->cur) {
		set_local(c, GRPC_UNAVAILABLE, "%s", ch->last_err);
		goto fail;
	}
	c->prev = ch->pend_tail;
	c->next = NULL;
	if (ch->pend_tail)
		ch->pend_tail->next = c;
	else
		ch->pend_head = c;
	ch->pend_tail = c;
	return;
fail: /* c's local status is set */
	client_call_done(c, 0);
}

static void reader_read_fn(void *arg)
{
	struct client_call *c = arg;
	h2_conn_reader_read(c->rconn);
	c->rgone = h2_conn_closing(c->rconn);
}

static void reader_end_fn(void *arg)
{
	struct client_call *c = arg;
	h2_conn_reader_end(c->rconn);
	c->rconn = NULL;
}

/* The caller reads its connection until its call is done, the connection closes or the deadline
 * passes; then input goes back to the loop. */
static void read_own_response(struct client_call *c)
{
	for (;;) {
		struct pollfd p = {.fd = c->rfd, .events = POLLIN};
		/* re-check now and then: a close or a done call should wake the poll anyway */
		int tmo = 100;
		bool done;

		pthread_mutex_lock(&c->mu);
		done = c->done;
		pthread_mutex_unlock(&c->mu);
		if (done || c->rgone)
			break;
		if (c->deadline_at) {
			uint64_t now = h2_now_ms();
			if (now >= c->deadline_at)
				break;
			if (c->deadline_at - now < (uint64_t)tmo)
				tmo = (int)(c->deadline_at - now);
		}
		if (poll(&p, 1, tmo) > 0)
			h2_loop_run_sync(c->ch->loop, reader_read_fn, c);
	}
	h2_loop_run_sync(c->ch->loop, reader_end_fn, c);
	c->rfd = -1;
}

static void cancel_fn(void *arg)
{
	struct client_call *c = arg;
	bool done;
	pthread_mutex_lock(&c->mu);
	done = c->done;
	pthread_mutex_unlock(&c->mu);
	if (!done && c->cc) {
		nghttp2_submit_rst_stream(h2_conn_session(c->cc->h2), NGHTTP2_FLAG_NONE, c->sid,
		                          NGHTTP2_CANCEL);
		h2_conn_flush(c->cc->h2);
	} else if (!done) {
		struct grpc_channel *ch = c->ch;
		struct client_call *p;
		for (p = ch->pend_head; p && p != c; p = p->next)
			;
		if (p) {
			list_del(&ch->pend_head, &ch->pend_tail, c);
			set_local(c, GRPC_DEADLINE_EXCEEDED, "deadline exceeded while connecting");
			client_call_done(c, 0);
		}
	}
	client_call_unref(c);
}

/* ---- public API --------------------------------------------------------------------------- */

int grpc_channel_new(struct grpc_channel **out, const char *target,
                     const struct grpc_channel_opts *o, struct err *e)
{
	struct grpc_channel *ch = calloc(1, sizeof(*ch));
	struct grpc_channel_opts def;
	const char *hostport;
	int rc;

	if (!ch)
		return err_set(e, -ENOMEM, "gRPC channel: out of memory");
	if (!o) {
		grpc_channel_opts_init(&def);
		o = &def;
	}
	rc = h2_addr_parse(target, false, &ch->addr, e);
	if (rc < 0)
		goto fail;
	ch->max_msg = o->max_msg ? o->max_msg : GRPC_DEFAULT_MAX_MSG;
	ch->backoff_first = o->initial_backoff_ms ? o->initial_backoff_ms : BACKOFF_FIRST;
	ch->backoff_max = ch->backoff_first > BACKOFF_MAX ? ch->backoff_first : BACKOFF_MAX;
	ch->loop = o->loop ? o->loop : h2_loop_default();
	if (!ch->loop) {
		rc = err_set(e, -ENOMEM, "gRPC channel: no event loop");
		goto fail;
	}
	snprintf(ch->verify, sizeof(ch->verify), "%s",
	         o->server_name ? o->server_name : ch->addr.host);
	hostport = strncmp(target, "tcp://", 6) == 0 ? target + 6 : target;
	if (o->server_name)
		snprintf(ch->authority, sizeof(ch->authority), "%s", o->server_name);
	else
		snprintf(ch->authority, sizeof(ch->authority), "%s",
		         ch->addr.family == AF_UNIX ? "localhost" : hostport);
	if (o->tls_ca || o->tls_cert || o->tls_key) {
		rc = h2_tls_client_cfg_new(&ch->tls, o->tls_ca, o->tls_cert, o->tls_key, e);
		if (rc < 0)
			goto fail;
	}
	*out = ch;
	return 0;
fail:
	free(ch);
	return rc;
}

static void close_fn(void *arg)
{
	struct grpc_channel *ch = arg;

	ch->closing = true;
	if (ch->cur)
		h2_conn_close(ch->cur->h2, 0, "channel closed");
}

void grpc_channel_free(struct grpc_channel *ch)
{
	uint64_t until;

	if (!ch)
		return;
	h2_loop_run_sync(ch->loop, close_fn, ch);
	until = h2_now_ms() + 10000;
	while (atomic_load(&ch->n_conns) > 0 && h2_now_ms() < until)
		usleep(2000);
	h2_tls_cfg_free(ch->tls);
	free(ch);
}

static void status_set(struct grpc_status *st, int code, const char *msg)
{
	st->code = code;
	snprintf(st->msg, sizeof(st->msg), "%s", msg ? msg : "");
}

/* One allocation holding the array and its strings. */
static struct grpc_md *md_copy(const struct grpc_md *md)
{
	size_t n = 0, bytes = 0, i;
	struct grpc_md *out;
	char *p;

	if (!md)
		return NULL;
	for (; md[n].key; n++)
		bytes += strlen(md[n].key) + strlen(md[n].value) + 2;
	out = malloc((n + 1) * sizeof(*out) + bytes);
	if (!out)
		return NULL;
	p = (char *)(out + n + 1);
	for (i = 0; i < n; i++) {
		size_t kl = strlen(md[i].key) + 1, vl = strlen(md[i].value) + 1;
		out[i].key = memcpy(p, md[i].key, kl);
		p += kl;
		out[i].value = memcpy(p, md[i].value, vl);
		p += vl;
	}
	out[n].key = out[n].value = NULL;
	return out;
}

/* Request metadata a call may send (grpc/status.h rules).  GRPC_OK or INVALID_ARGUMENT. */
static int md_check(const struct grpc_md *md, struct grpc_status *st)
{
	for (size_t i = 0; md && md[i].key; i++) {
		if (!grpc_md_key_valid(md[i].key) || !md[i].value ||
		    !grpc_md_value_valid(md[i].key, md[i].value, strlen(md[i].value))) {
			status_set(st, GRPC_INVALID_ARGUMENT, "invalid request metadata");
			snprintf(st->msg, sizeof(st->msg),
			         "invalid request metadata key or value: %s", md[i].key);
			return st->code;
		}
	}
	return GRPC_OK;
}

/* A call with its framed request, two references (the caller's and the loop's); NULL when out
 * of memory. */
static struct client_call *client_call_new(struct grpc_channel *ch, const char *path,
                                           const ProtobufCMessage *req, const struct grpc_md *md,
                                           int64_t timeout_ms)
{
	size_t len = protobuf_c_message_get_packed_size(req);
	struct client_call *c = calloc(1, sizeof(*c));
	if (!c || !(c->body = malloc(GRPC_PREFIX_LEN + len))) {
		free(c);
		return NULL;
	}
	grpc_prefix_write(c->body, false, (uint32_t)len);
	protobuf_c_message_pack(req, c->body + GRPC_PREFIX_LEN);
	c->src = (struct h2_body){c->body, GRPC_PREFIX_LEN + len, 0};
	c->ch = ch;
	c->path = strdup(path);
	c->md = md_copy(md);
	if (!c->path || (md && !c->md)) {
		free(c->path);
		free(c->md);
		free(c->body);
		free(c);
		return NULL;
	}
	c->grpc_status = -1;
	c->local_code = -1;
	c->rfd = -1;
	c->caller = pthread_self();
	grpc_deframer_init(&c->df, ch->max_msg);
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&c->refs, 2);
	if (timeout_ms > 0)
		c->deadline_at = h2_now_ms() + (uint64_t)timeout_ms;
	return c;
}

/* Waits for the call to finish until its deadline; false (and the call cancelled, the caller's
 * reference dropped) when the deadline came first. */
static bool client_call_wait(struct client_call *c)
{
	pthread_mutex_lock(&c->mu);
	while (!c->done) {
		if (c->deadline_at) {
			struct timespec ts = {.tv_sec = (time_t)(c->deadline_at / 1000),
			                      .tv_nsec = (long)(c->deadline_at % 1000) * 1000000};
			if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT && !c->done)
				break;
		} else {
			pthread_cond_wait(&c->cv, &c->mu);
		}
	}
	bool done = c->done;
	pthread_mutex_unlock(&c->mu);
	if (done)
		return true;
	atomic_fetch_add(&c->refs, 1);
	if (h2_loop_run(c->ch->loop, cancel_fn, c) < 0)
		client_call_unref(c);
	client_call_unref(c);
	return false;
}

/* The outcome of a finished call (the loop is done with c: its fields are ours now). */
static void client_call_result(struct client_call *c, const char *path,
                               const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                               struct grpc_status *st)
{
	if (c->local_code >= 0) {
		status_set(st, c->local_code, c->msg);
	} else if (c->grpc_status != GRPC_OK) {
		status_set(st, c->grpc_status, c->msg);
	} else if (c->n_msgs != 1) {
		status_set(st, GRPC_INTERNAL, NULL);
		snprintf(st->msg, sizeof(st->msg), "expected one response message from %s, got %d",
		         path, c->n_msgs);
	} else {
		*resp =
		    protobuf_c_message_unpack(resp_desc, &grpc_pb_allocator, c->resp_len, c->resp);
		if (*resp)
			status_set(st, GRPC_OK, NULL);
		else {
			status_set(st, GRPC_INTERNAL, NULL);
			snprintf(st->msg, sizeof(st->msg), "cannot parse the response of %s as %s",
			         path, resp_desc->name);
		}
	}
}

static int channel_call(struct grpc_channel *ch, const char *path, const ProtobufCMessage *req,
                        const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                        int64_t timeout_ms, const struct grpc_md *md, struct grpc_status *st)
{
	struct client_call *c;
	int code;

	*resp = NULL;
	if ((code = md_check(md, st)) != GRPC_OK)
		return code;
	if (!(c = client_call_new(ch, path, req, md, timeout_ms))) {
		status_set(st, GRPC_RESOURCE_EXHAUSTED, "client out of memory");
		return st->code;
	}
	if (h2_loop_run(ch->loop, start_fn, c) < 0) {
		client_call_unref(c);
		client_call_unref(c);
		status_set(st, GRPC_RESOURCE_EXHAUSTED, "client out of memory");
		return st->code;
	}
	if (c->rfd >= 0)
		read_own_response(c);
	if (!client_call_wait(c)) {
		snprintf(st->msg, sizeof(st->msg), "deadline exceeded after %lld ms calling %s",
		         (long long)timeout_ms, path);
		st->code = GRPC_DEADLINE_EXCEEDED;
		return st->code;
	}
	client_call_result(c, path, resp_desc, resp, st);
	code = st->code;
	client_call_unref(c);
	return code;
}

int grpc_channel_call(struct grpc_channel *ch, const char *path, const ProtobufCMessage *req,
                      const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                      int64_t timeout_ms, const struct grpc_md *md, struct grpc_status *st)
{
	uint64_t t0 = time_mono_ns();
	int code = channel_call(ch, path, req, resp_desc, resp, timeout_ms, md, st);
	grpc_metrics_client_call(path, code, (time_mono_ns() - t0) / 1e9, code != GRPC_UNAVAILABLE,
	                         code == GRPC_OK);
	return code;
}
