/* Loop side of the gRPC server, one stream of a connection: nghttp2 callbacks, routing to a
 * method, responses (headers, messages, trailers) and deadlines. */
#include "grpc/server_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define HEALTH_PATH "/grpc.health.v1.Health/Check"

/* ---- memory held for requests (grpc/server.h: max_conn_pending, max_pending) ---------------- */

static void held_add(struct grpc_call *c, size_t n)
{
	if (c->account)
		meter_held_add(c->account->meter, n);
	meter_held_add(&c->server->pending, n);
}

static void held_sub(struct grpc_call *c, size_t n)
{
	if (c->account)
		meter_held_sub(c->account->meter, n);
	meter_held_sub(&c->server->pending, n);
}

/* The response bytes queued and not yet taken by nghttp2 count in c->charged (holding c->mu). */
static void out_sync(struct grpc_call *c)
{
	if (c->out_bytes >= c->out_charged)
		held_add(c, c->out_bytes - c->out_charged);
	else
		held_sub(c, c->out_charged - c->out_bytes);
	c->charged = c->charged - c->out_charged + c->out_bytes;
	c->out_charged = c->out_bytes;
}

/* c's dispatched request no longer holds memory. */
static void release(struct grpc_call *c)
{
	held_sub(c, c->charged);
	c->charged = c->out_charged = 0;
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
	while (c->out_head && n < length) {
		struct out_message *m = c->out_head;
		size_t take = m->len - m->off;
		if (take > length - n)
			take = length - n;
		memcpy(buf + n, m->data + m->off, take);
		m->off += take;
		n += take;
		c->out_bytes -= take;
		if (m->off == m->len) {
			c->out_head = m->next;
			if (!c->out_head)
				c->out_tail = NULL;
			free(m);
		}
	}
	if (n > 0) {
		out_sync(c);
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
		h2_conn_close(c->connection->h2, -ENOMEM, "out of memory queueing a response");
}

/* Sends the response headers (or a Trailers-Only response) or resumes the body. */
static void respond(struct grpc_call *c)
{
	nghttp2_session *ng;
	nghttp2_nv nv[64];
	char code[8], msg[1024];
	size_t n = 0, i;
	bool only;

	if (!c->connection || c->trailers_sent)
		return;
	ng = h2_conn_session(c->connection->h2);
	if (c->headers_sent) {
		nghttp2_session_resume_data(ng, c->stream_id);
		return;
	}
	pthread_mutex_lock(&c->mu);
	out_sync(c);
	if (!c->finished && !c->out_head) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	only = c->finished && !c->out_head;
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

/* The request has arrived (or will not): its deframer's buffer is no longer needed. */
static void request_done(struct grpc_call *c)
{
	held_sub(c, c->pending);
	c->pending = 0;
	grpc_deframer_free(&c->df);
}

/* An error found on the loop before (or instead of) running the handler. */
static void early_status(struct grpc_call *c, int http, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void early_status(struct grpc_call *c, int http, int code, const char *fmt, ...)
{
	nghttp2_session *ng = h2_conn_session(c->connection->h2);
	char msg[512];
	va_list ap;

	if (c->early || c->dispatched)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->early = true;
	request_done(c);
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

/* Ends c with RESOURCE_EXHAUSTED when its connection or the server holds more than its limit
 * for requests; true when it did. */
static bool refuse_if_over(struct grpc_call *c)
{
	const struct grpc_server *s = c->server;

	if (meter_total(c->account->meter) > s->o.max_conn_pending) {
		release(c);
		early_status(c, 200, GRPC_RESOURCE_EXHAUSTED,
		             "requests in progress on this connection would hold more than %zu "
		             "bytes; retry when its earlier calls have finished",
		             s->o.max_conn_pending);
		return true;
	}
	if (meter_total(&s->pending) > s->o.max_pending) {
		release(c);
		early_status(c, 200, GRPC_RESOURCE_EXHAUSTED,
		             "requests in progress on this server would hold more than %zu bytes "
		             "across all its connections; retry later",
		             s->o.max_pending);
		return true;
	}
	return false;
}

/* The loop has seen c's handler return: an orphan's memory is given back. */
static void handler_returned(struct grpc_call *c)
{
	struct server_connection *account = c->account;

	c->running = false;
	if (c->connection)
		return; /* given back when the stream closes */
	if (account) {
		if (c->prev_in_connection)
			c->prev_in_connection->next_in_connection = c->next_in_connection;
		else
			account->orphans = c->next_in_connection;
		if (c->next_in_connection)
			c->next_in_connection->prev_in_connection = c->prev_in_connection;
		c->next_in_connection = c->prev_in_connection = NULL;
	}
	release(c);
	c->account = NULL;
}

void server_orphans_disown(struct server_connection *connection)
{
	struct grpc_call *c, *next;

	for (c = connection->orphans; c; c = next) {
		next = c->next_in_connection;
		c->next_in_connection = c->prev_in_connection = NULL;
		meter_held_sub(c->account->meter, c->charged);
		c->account = NULL;
	}
	connection->orphans = NULL;
}

void server_connection_free(struct server_connection *connection)
{
	if (connection->flush_queued)
		connection->closed = true;
	else
		free(connection);
}

static void connection_flush_fn(void *arg)
{
	struct server_connection *connection = arg;

	connection->flush_queued = false;
	if (connection->closed)
		free(connection);
	else
		h2_conn_flush(connection->h2);
}

/* A response handed over by a handler thread: queued in the session now, written with the
 * connection's other responses of this turn (the loop runs posts until none is left). */
void server_kick_fn(void *arg)
{
	struct grpc_call *c = arg;
	struct server_connection *connection = c->connection;
	bool done;

	pthread_mutex_lock(&c->mu);
	c->kick_pending = false;
	done = c->handler_done;
	if (connection)
		out_sync(c);
	pthread_mutex_unlock(&c->mu);
	if (done && c->running)
		handler_returned(c);
	if (connection) {
		respond(c);
		if (!connection->flush_queued && !h2_conn_closing(connection->h2)) {
			connection->flush_queued = true;
			h2_loop_post_embedded(c->loop, &connection->flush_post, connection_flush_fn,
			                      connection);
		}
	}
	call_unref(c);
}

static void deadline_fn(void *arg)
{
	struct grpc_call *c = arg;

	if (!c->connection)
		return;
	atomic_store(&c->cancelled, true);
	if (!c->dispatched) {
		early_status(c, 200, GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
	} else {
		pthread_mutex_lock(&c->mu);
		while (c->out_head) {
			struct out_message *m = c->out_head;
			c->out_head = m->next;
			free(m);
		}
		/* bytes of a half-sent message cannot be dropped: the stream is reset below */
		c->out_tail = NULL;
		c->out_bytes = 0;
		out_sync(c);
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		call_finish(c, GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
		if (c->headers_sent) {
			/* mid-stream: end it now rather than after a partial message */
			nghttp2_submit_rst_stream(h2_conn_session(c->connection->h2),
			                          NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_CANCEL);
		} else {
			respond(c);
		}
	}
	h2_conn_flush(c->connection->h2);
}

/* ---- routing ------------------------------------------------------------------------------- */

static void route(struct grpc_call *c)
{
	struct grpc_server *s = c->server;
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
				if (strcmp(sv->methods[j].name, slash + 1) == 0) {
					c->method = &sv->methods[j];
					c->nonblocking = s->nonblocking[i][j];
				}
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
	request_done(c); /* the message is in c->req */
	c->charged = sizeof(*c) + c->hdr_bytes + c->req_len;
	held_add(c, c->charged);
	if (refuse_if_over(c))
		return;
	c->dispatched = true;
	if (c->health) {
		call_health(c);
		respond(c);
		return;
	}
	if (c->nonblocking) {
		/* on this thread, holding the loop: the connection's flush after this read sends
		 * the response (together with the others this read completed) */
		c->on_loop = true;
		call_ref(c);
		call_run(c);
		c->on_loop = false;
		respond(c);
		return;
	}
	call_ref(c);
	c->running = true; /* before the job can run: its kick reads it */
	if (h2_jobs_submit(c->server->jobs, call_run, c) < 0) {
		call_unref(c);
		c->running = c->dispatched = false;
		release(c);
		early_status(c, 200, GRPC_RESOURCE_EXHAUSTED, "server out of memory");
	}
}

/* ---- nghttp2 callbacks ---------------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct server_connection *connection = ud;
	struct grpc_call *c;

	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	c = call_new(connection->server);
	if (!c)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	c->connection = c->account = connection;
	c->meter = connection->meter;
	atomic_fetch_add_explicit(&c->meter->refs, 1, memory_order_relaxed);
	c->stream_id = f->hd.stream_id;
	c->next_in_connection = connection->calls;
	if (connection->calls)
		connection->calls->prev_in_connection = c;
	connection->calls = c;
	connection->n_calls++;
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
	struct server_connection *connection = ud;
	struct grpc_call *c = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	(void)flags;

	if (!c || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	c->hdr_bytes += namelen + valuelen + 32;
	if (c->hdr_bytes > connection->server->o.max_header_list)
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
		struct metadata_entry *nm = realloc(c->req_md, (c->n_req_md + 1) * sizeof(*nm));
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
	if (c->df.cap != c->pending) {
		held_sub(c, c->pending);
		held_add(c, c->df.cap);
		c->pending = c->df.cap;
		if (rc == 0)
			refuse_if_over(c);
	}
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

void server_call_detach(struct server_connection *connection, struct grpc_call *c)
{
	if (c->prev_in_connection)
		c->prev_in_connection->next_in_connection = c->next_in_connection;
	else
		connection->calls = c->next_in_connection;
	if (c->next_in_connection)
		c->next_in_connection->prev_in_connection = c->prev_in_connection;
	c->next_in_connection = c->prev_in_connection = NULL;
	request_done(c);
	if (c->running) { /* an orphan until the loop sees its handler return */
		c->next_in_connection = connection->orphans;
		if (connection->orphans)
			connection->orphans->prev_in_connection = c;
		connection->orphans = c;
	} else {
		release(c);
		c->account = NULL;
	}
	if (--connection->n_calls == 0)
		connection->idle_since = h2_now_ms();
	h2_timer_cancel(c->loop, &c->deadline_timer);
	pthread_mutex_lock(&c->mu);
	c->stream_closed = true;
	if (!c->finished)
		atomic_store(&c->cancelled, true);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	c->connection = NULL;
	call_unref(c);
}

static int on_stream_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *ud)
{
	struct server_connection *connection = ud;
	struct grpc_call *c = nghttp2_session_get_stream_user_data(ng, sid);
	(void)code;

	if (c) {
		nghttp2_session_set_stream_user_data(ng, sid, NULL);
		server_call_detach(connection, c);
	}
	return 0;
}

void server_stream_callbacks(nghttp2_session_callbacks *cb)
{
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
}
