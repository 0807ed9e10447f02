/* Handler side of the gRPC server: the call object, the worker job, streaming sends, health. */
#include "grpc/server_int.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "grpc/calllog.h"
#include "grpc/metrics.h"
#include "grpc/strcheck.h"

#define SEND_HIGH (1u << 20) /* a streaming sender waits while this much is unsent */

struct health_entry {
	struct health_entry *next;
	bool serving;
	char name[];
};

struct grpc_call *call_new(struct grpc_server *s)
{
	struct grpc_call *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->server = s;
	c->loop = s->loop;
	atomic_init(&c->refs, 1);
	atomic_init(&c->cancelled, false);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->timeout_ms = -1;
	grpc_deframer_init(&c->df, s->o.max_msg);
	return c;
}

void call_ref(struct grpc_call *c)
{
	atomic_fetch_add(&c->refs, 1);
}

static void md_free(struct metadata_entry *m, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(m[i].key);
		free(m[i].value);
	}
	free(m);
}

void call_unref(struct grpc_call *c)
{
	struct arena_block *a;

	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	md_free(c->req_md, c->n_req_md);
	md_free(c->resp_md, c->n_resp_md);
	while (c->out_head) {
		struct out_message *m = c->out_head;
		c->out_head = m->next;
		free(m);
	}
	while ((a = c->arena)) {
		c->arena = a->next;
		free(a);
	}
	grpc_deframer_free(&c->df);
	if (c->meter)
		meter_unref(c->meter);
	free(c->path);
	free(c->encoding);
	free(c->req);
	free(c->status_msg);
	free(c->handler_msg);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

void call_kick(struct grpc_call *c)
{
	bool post;

	if (c->on_loop)
		return; /* dispatch() responds when the handler returns */
	pthread_mutex_lock(&c->mu);
	/* after the stream is gone, only to give an orphan's memory back (grpc/stream.c) */
	post = !c->kick_pending && (!c->stream_closed || c->handler_done);
	if (post) {
		c->kick_pending = true;
		call_ref(c);
	}
	pthread_mutex_unlock(&c->mu);
	if (post) /* kick_pending: kick_post is queued at most once at a time */
		h2_loop_run_or_defer(c->loop, &c->kick_post, server_kick_fn, c);
}

static void finish(struct grpc_call *c, int code, const char *msg, bool done)
{
	bool first;

	pthread_mutex_lock(&c->mu);
	first = !c->finished;
	if (first) {
		c->finished = true;
		c->status = code;
		c->status_msg = msg && *msg ? strdup(msg) : NULL;
		pthread_cond_broadcast(&c->cv);
	}
	if (done)
		c->handler_done = true;
	pthread_mutex_unlock(&c->mu);
	if (first || done)
		call_kick(c);
}

void call_finish(struct grpc_call *c, int code, const char *msg)
{
	finish(c, code, msg, false);
}

void call_done(struct grpc_call *c, int code, const char *msg)
{
	finish(c, code, msg, true);
}

int call_queue_bytes(struct grpc_call *c, const uint8_t *msg, size_t len)
{
	struct out_message *m = malloc(sizeof(*m) + GRPC_PREFIX_LEN + len);

	if (!m)
		return -ENOMEM;
	m->next = NULL;
	m->off = 0;
	m->len = GRPC_PREFIX_LEN + len;
	grpc_prefix_write(m->data, false, (uint32_t)len);
	if (len)
		memcpy(m->data + GRPC_PREFIX_LEN, msg, len);
	if (c->out_tail)
		c->out_tail->next = m;
	else
		c->out_head = m;
	c->out_tail = m;
	c->out_bytes += m->len;
	return 0;
}

/* Packs msg and queues it; waits (on worker threads) while the queue is above SEND_HIGH.  With
 * kick the loop is asked to send it now; a unary response waits for call_finish instead, so that
 * headers, message and trailers leave in one write. */
static int send_msg(struct grpc_call *c, const ProtobufCMessage *msg, bool wait, bool kick)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf;
	int rc;

	if (len > c->server->o.max_msg)
		return -EMSGSIZE;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf);
	pthread_mutex_lock(&c->mu);
	while (wait && c->out_bytes > SEND_HIGH && !c->finished && !c->stream_closed &&
	       !atomic_load(&c->cancelled))
		pthread_cond_wait(&c->cv, &c->mu);
	if (c->finished || c->stream_closed || atomic_load(&c->cancelled))
		rc = -ECANCELED;
	else
		rc = call_queue_bytes(c, buf, len);
	pthread_mutex_unlock(&c->mu);
	free(buf);
	if (rc == 0 && kick)
		call_kick(c);
	return rc;
}

int grpc_call_send(struct grpc_call *c, const ProtobufCMessage *msg)
{
	if (!c->method || !c->method->server_stream)
		return -EINVAL;
	if (msg->descriptor != c->method->resp)
		return -EINVAL;
	int rc = send_msg(c, msg, c->server->o.workers > 0, true);
	if (rc == 0)
		grpc_metrics_server_sent(server_method_metrics(c));
	return rc;
}

/* A request whose strings are not the bytes that were sent is refused before its handler runs
 * (grpc/strcheck.h): INVALID_ARGUMENT naming the field, else GRPC_OK. */
static int request_strings(const struct grpc_call *c, char *msg, size_t cap)
{
	if (grpc_strcheck(c->method->req, c->req, c->req_len, msg, cap) < 0)
		return GRPC_INVALID_ARGUMENT;
	return GRPC_OK;
}

/* A unary method's handler and its response: the code, with the response queued on GRPC_OK. */
static int run_unary(struct grpc_call *c, const ProtobufCMessage *req, uint64_t t0,
                     struct grpc_method_metrics *mm)
{
	const struct grpc_method *m = c->method;
	ProtobufCMessage *resp = NULL;
	int code = m->unary(c, req, &resp, c->svc->ctx);

	if (code == GRPC_OK && !resp) {
		code = GRPC_INTERNAL;
		grpc_call_set_status_msg(c, "handler of %s returned no response", c->path);
	} else if (code == GRPC_OK && resp->descriptor != m->resp) {
		code = GRPC_INTERNAL;
		grpc_call_set_status_msg(c, "handler of %s returned the wrong message type",
		                         c->path);
	} else if (code == GRPC_OK) {
		int rc = send_msg(c, resp, false, false);
		if (rc == -EMSGSIZE) {
			code = GRPC_RESOURCE_EXHAUSTED;
			grpc_call_set_status_msg(c, "response larger than max (%zu vs. %zu)",
			                         protobuf_c_message_get_packed_size(resp),
			                         c->server->o.max_msg);
		} else if (rc == -ENOMEM) {
			code = GRPC_RESOURCE_EXHAUSTED;
			grpc_call_set_status_msg(c, "server out of memory");
		} else if (rc == 0) {
			grpc_metrics_server_sent(mm);
		}
	}
	calllog_result(c->path, req, code == GRPC_OK ? resp : NULL, code, c->handler_msg, t0);
	if (resp && m->resp_free)
		m->resp_free(resp, c->svc->ctx);
	return code;
}

/* The allocator of one request's decoding (a message of many small submessages takes tens of
 * times its size once decoded).  The bytes it holds (as malloc sizes them, its scratch space
 * included) beyond the request's own (counted already; the decoded message takes their place)
 * count in the connection's meter and the server's until the message is freed; an allocation
 * that would take either past its limit fails the decoding.  The meters are charged ahead,
 * twice as much as before each time, so a decoding costs a few atomic additions whatever its
 * number of allocations. */
enum over { OVER_NONE, OVER_CONNECTION, OVER_SERVER };

struct decode_budget {
	struct grpc_call *c;
	size_t live;    /* bytes allocated and not freed */
	size_t charged; /* counted in both meters: at least live beyond c->req_len */
	enum over over; /* the limit that failed the decoding, with live bytes wanted */
	size_t wanted;
};

/* Counts n more bytes in m unless that takes it past limit. */
static bool meter_charge(struct pending_meter *m, size_t n, size_t limit)
{
	if (n > limit)
		return false;
	size_t d = atomic_fetch_add_explicit(&m->decoded, n, memory_order_relaxed) + n;
	if (d + atomic_load_explicit(&m->held, memory_order_relaxed) <= limit)
		return true;
	atomic_fetch_sub_explicit(&m->decoded, n, memory_order_relaxed);
	return false;
}

/* Counts n more bytes of b in both meters, else says which limit they would pass. */
static enum over budget_charge(struct decode_budget *b, size_t n)
{
	struct grpc_server *s = b->c->server;

	if (!meter_charge(b->c->meter, n, s->o.max_conn_pending))
		return OVER_CONNECTION;
	if (!meter_charge(&s->pending, n, s->o.max_pending)) {
		atomic_fetch_sub_explicit(&b->c->meter->decoded, n, memory_order_relaxed);
		return OVER_SERVER;
	}
	b->charged += n;
	return OVER_NONE;
}

/* Gives back what b counts beyond what live bytes need. */
static void budget_trim(struct decode_budget *b, size_t live)
{
	size_t keep = live > b->c->req_len ? live - b->c->req_len : 0;
	size_t n = b->charged - keep;

	if (!n)
		return;
	atomic_fetch_sub_explicit(&b->c->meter->decoded, n, memory_order_relaxed);
	atomic_fetch_sub_explicit(&b->c->server->pending.decoded, n, memory_order_relaxed);
	b->charged = keep;
}

static void *budget_alloc(void *data, size_t n)
{
	struct decode_budget *b = data;
	void *p = malloc(n);

	if (!p)
		return NULL;
	size_t live = b->live + malloc_usable_size(p);
	size_t need = live > b->c->req_len ? live - b->c->req_len : 0;
	if (need > b->charged) {
		size_t more = need - b->charged;
		if ((more >= b->charged || budget_charge(b, b->charged) != OVER_NONE) &&
		    (b->over = budget_charge(b, more)) != OVER_NONE) {
			b->wanted = live;
			free(p);
			return NULL;
		}
	}
	b->live = live;
	return p;
}

static void budget_free(void *data, void *p)
{
	struct decode_budget *b = data;

	if (p)
		b->live -= malloc_usable_size(p);
	free(p);
}

/* c's request decoded through b, NULL with the status in code and msg when it is not. */
static ProtobufCMessage *decode(struct grpc_call *c, struct decode_budget *b, int *code,
                                char *msg, size_t cap)
{
	const struct grpc_server *s = c->server;
	ProtobufCAllocator allocator = {budget_alloc, budget_free, b};
	ProtobufCMessage *req =
	    protobuf_c_message_unpack(c->method->req, &allocator, c->req_len, c->req);

	if (req) {
		budget_trim(b, b->live);
		return req;
	}
	budget_trim(b, 0);
	*code = GRPC_RESOURCE_EXHAUSTED;
	if (b->over == OVER_CONNECTION)
		snprintf(msg, cap,
		         "requests in progress on this connection would hold more than %zu bytes "
		         "with this request decoded (it takes at least %zu bytes); send a smaller "
		         "request or retry when its earlier calls have finished",
		         s->o.max_conn_pending, b->wanted);
	else if (b->over == OVER_SERVER)
		snprintf(msg, cap,
		         "requests in progress on this server would hold more than %zu bytes across "
		         "all its connections with this request decoded (it takes at least %zu "
		         "bytes); send a smaller request or retry later",
		         s->o.max_pending, b->wanted);
	else
		*code = GRPC_INTERNAL;
	if (*code == GRPC_INTERNAL)
		snprintf(msg, cap, "cannot parse the request as %s", c->method->req->name);
	return NULL;
}

/* Runs the handler of c's decoded request; the code, final the status message. */
static int handle(struct grpc_call *c, const ProtobufCMessage *req, struct grpc_method_metrics *mm,
                  char *msg, size_t cap, const char **final)
{
	const struct grpc_method *m = c->method;
	uint64_t t0 = calllog_request(c->path, req);
	int code;

	if (atomic_load(&c->cancelled)) {
		code = grpc_call_deadline_ms(c) <= 0 ? GRPC_DEADLINE_EXCEEDED : GRPC_CANCELLED;
		*final = "call ended before the handler ran";
		calllog_result(c->path, req, NULL, code, *final, t0);
	} else if ((code = request_strings(c, msg, cap)) != GRPC_OK) {
		/* not req: its strings end where the sender's did not */
		calllog_result(c->path, NULL, NULL, code, msg, t0);
		*final = msg;
	} else {
		free(c->req); /* decoded: the handler holds req in its place */
		c->req = NULL;
		if (m->unary) {
			code = run_unary(c, req, t0, mm);
		} else {
			code = m->server_stream(c, req, c->svc->ctx);
			calllog_result(c->path, req, NULL, code, c->handler_msg, t0);
		}
		*final = code == GRPC_OK ? NULL : c->handler_msg;
	}
	return code;
}

void call_run(void *arg)
{
	struct grpc_call *c = arg;
	char msg[GRPC_STATUS_MSG_MAX];
	const char *final = msg; /* the status message */
	int code;
	struct decode_budget budget = {.c = c};
	struct grpc_method_metrics *mm = server_method_metrics(c);
	uint64_t t_start = time_mono_ns();

	grpc_metrics_server_started(mm);
	ProtobufCMessage *req = decode(c, &budget, &code, msg, sizeof(msg));
	if (req) {
		code = handle(c, req, mm, msg, sizeof(msg), &final);
		protobuf_c_message_free_unpacked(req, NULL);
		budget_trim(&budget, 0);
	}
	grpc_metrics_server_handled(mm, code, (time_mono_ns() - t_start) / 1e9);
	call_done(c, code, final);
	call_unref(c);
}

/* ---- handler API ------------------------------------------------------------------------------ */

bool grpc_call_cancelled(const struct grpc_call *c)
{
	return atomic_load(&c->cancelled);
}

int64_t grpc_call_deadline_ms(const struct grpc_call *c)
{
	if (!c->deadline_at)
		return INT64_MAX;
	return (int64_t)c->deadline_at - (int64_t)h2_now_ms();
}

const char *grpc_call_path(const struct grpc_call *c)
{
	return c->path;
}

const char *grpc_call_metadata(const struct grpc_call *c, const char *key)
{
	size_t i;
	for (i = 0; i < c->n_req_md; i++)
		if (strcmp(c->req_md[i].key, key) == 0)
			return c->req_md[i].value;
	return NULL;
}

int grpc_call_add_metadata(struct grpc_call *c, const char *key, const char *value)
{
	struct metadata_entry *nm;
	int rc = 0;

	if (!grpc_md_key_valid(key) || !value || !grpc_md_value_valid(key, value, strlen(value)))
		return -EINVAL;
	pthread_mutex_lock(&c->mu);
	if (c->headers_sent || c->out_head || c->finished) {
		rc = -EALREADY;
	} else if (!(nm = realloc(c->resp_md, (c->n_resp_md + 1) * sizeof(*nm)))) {
		rc = -ENOMEM;
	} else {
		c->resp_md = nm;
		nm[c->n_resp_md].key = strdup(key);
		nm[c->n_resp_md].value = strdup(value);
		c->n_resp_md++;
		if (!nm[c->n_resp_md - 1].key || !nm[c->n_resp_md - 1].value)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void grpc_call_set_status_msg(struct grpc_call *c, const char *fmt, ...)
{
	char buf[GRPC_STATUS_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	free(c->handler_msg);
	c->handler_msg = strdup(buf);
}

void *grpc_call_alloc(struct grpc_call *c, size_t n)
{
	struct arena_block *a = calloc(1, sizeof(*a) + n);
	if (!a)
		return NULL;
	a->next = c->arena;
	c->arena = a;
	return a->data;
}

char *grpc_call_strdup(struct grpc_call *c, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = grpc_call_alloc(c, n);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* ---- health ------------------------------------------------------------------------------------ */

void grpc_server_set_serving(struct grpc_server *s, const char *service, bool serving)
{
	struct health_entry *h;

	pthread_mutex_lock(&s->health_mu);
	for (h = s->health; h; h = h->next)
		if (strcmp(h->name, service) == 0)
			break;
	if (!h && (h = calloc(1, sizeof(*h) + strlen(service) + 1))) {
		strcpy(h->name, service);
		h->next = s->health;
		s->health = h;
	}
	if (h)
		h->serving = serving;
	pthread_mutex_unlock(&s->health_mu);
}

void server_health_free(struct grpc_server *s)
{
	while (s->health) {
		struct health_entry *h = s->health;
		s->health = h->next;
		free(h);
	}
}

/* HealthCheckRequest { string service = 1; } decoded by hand: the protocol is tiny and fixed. */
static int health_decode(const uint8_t *p, size_t len, char *svc, size_t cap, enum str_fault *bad)
{
	size_t i = 0;

	svc[0] = '\0';
	while (i < len) {
		uint64_t key = 0, v = 0;
		int shift = 0;
		while (i < len && shift < 64) {
			key |= (uint64_t)(p[i] & 0x7f) << shift;
			shift += 7;
			if (!(p[i++] & 0x80))
				break;
		}
		shift = 0;
		switch (key & 7) {
		case 0:
		case 2:
			while (i < len && shift < 64) {
				v |= (uint64_t)(p[i] & 0x7f) << shift;
				shift += 7;
				if (!(p[i++] & 0x80))
					break;
			}
			if ((key & 7) == 0)
				break;
			if (v > len - i)
				return -EINVAL;
			if (key >> 3 == 1) {
				if ((*bad = str_check((const char *)p + i, v, NULL)) != STR_OK)
					return -EILSEQ;
				if (v >= cap)
					return -EINVAL;
				memcpy(svc, p + i, v);
				svc[v] = '\0';
			}
			i += v;
			break;
		case 1: i += 8; break;
		case 5: i += 4; break;
		default: return -EINVAL;
		}
	}
	return i == len ? 0 : -EINVAL;
}

void call_health(struct grpc_call *c)
{
	struct grpc_server *s = c->server;
	struct health_entry *h;
	char svc[256], msg[300];
	int st = -1;

	enum str_fault bad = STR_OK;
	int r = health_decode(c->req, c->req_len, svc, sizeof(svc), &bad);
	if (r == -EILSEQ) { /* as grpc_strcheck words it for every other request */
		snprintf(msg, sizeof(msg), "field service %s", str_fault_text(bad));
		call_finish(c, GRPC_INVALID_ARGUMENT, msg);
		return;
	}
	if (r < 0) {
		call_finish(c, GRPC_INTERNAL,
		            "cannot parse the request as grpc.health.v1.HealthCheckRequest");
		return;
	}
	pthread_mutex_lock(&s->health_mu);
	for (h = s->health; h; h = h->next)
		if (strcmp(h->name, svc) == 0)
			st = h->serving ? 1 : 2;
	pthread_mutex_unlock(&s->health_mu);
	if (st < 0) {
		snprintf(msg, sizeof(msg), "unknown service %s", svc);
		call_finish(c, GRPC_NOT_FOUND, msg);
		return;
	}
	{
		uint8_t out[2] = {0x08, (uint8_t)st}; /* field 1 varint: ServingStatus */
		pthread_mutex_lock(&c->mu);
		call_queue_bytes(c, out, sizeof(out));
		pthread_mutex_unlock(&c->mu);
		call_finish(c, GRPC_OK, NULL);
	}
}
