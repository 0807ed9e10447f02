/* Unit tests of src/grpc: status/timeout/message encodings, metadata validation, message framing,
 * and the server's gRPC semantics driven in memory by a raw nghttp2 client session (so every
 * byte on the wire is checked against the gRPC-over-HTTP/2 spec, not against our own client),
 * plus our channel against our server over a unix socket (reconnect after a restart). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "csi.pb-c.h"
#include "grpc/client.h"
#include "grpc/metrics.h"
#include "grpc/server.h"
#include "grpc/status.h"
#include "h2/conn.h"
#include "metrics/metrics.h"
#include "testutil.h"

/* ---- pure helpers ------------------------------------------------------------------------ */

START_TEST(test_code_names)
{
	ck_assert_str_eq(grpc_code_name(GRPC_OK), "OK");
	ck_assert_str_eq(grpc_code_name(GRPC_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
	ck_assert_str_eq(grpc_code_name(GRPC_UNAUTHENTICATED), "UNAUTHENTICATED");
	ck_assert_str_eq(grpc_code_name(17), "UNKNOWN_CODE");
	ck_assert_str_eq(grpc_code_name(-1), "UNKNOWN_CODE");
	ck_assert_int_eq(GRPC_ABORTED, 10);
	ck_assert_int_eq(GRPC_UNAVAILABLE, 14);
}
END_TEST

START_TEST(test_message_encoding)
{
	char enc[128], dec[128];

	grpc_msg_encode("volume pvc-1: 100% full", enc, sizeof(enc));
	ck_assert_str_eq(enc, "volume pvc-1: 100%25 full");
	grpc_msg_encode("caf\xc3\xa9\n", enc, sizeof(enc));
	ck_assert_str_eq(enc, "caf%C3%A9%0A");
	grpc_msg_decode(enc, strlen(enc), dec, sizeof(dec));
	ck_assert_str_eq(dec, "caf\xc3\xa9\n");
	/* malformed escapes stay literal */
	grpc_msg_decode("50%zz%4", 7, dec, sizeof(dec));
	ck_assert_str_eq(dec, "50%zz%4");
	/* a cut never splits an escape */
	grpc_msg_encode("ab\n", enc, 5);
	ck_assert_str_eq(enc, "ab");
}
END_TEST

START_TEST(test_timeout)
{
	int64_t ms;
	char buf[32];

	ck_assert_int_eq(grpc_timeout_parse("1S", 2, &ms), 0);
	ck_assert_int_eq(ms, 1000);
	ck_assert_int_eq(grpc_timeout_parse("250m", 4, &ms), 0);
	ck_assert_int_eq(ms, 250);
	ck_assert_int_eq(grpc_timeout_parse("2H", 2, &ms), 0);
	ck_assert_int_eq(ms, 7200000);
	ck_assert_int_eq(grpc_timeout_parse("3M", 2, &ms), 0);
	ck_assert_int_eq(ms, 180000);
	ck_assert_int_eq(grpc_timeout_parse("5u", 2, &ms), 0);
	ck_assert_int_eq(ms, 1);
	ck_assert_int_eq(grpc_timeout_parse("1000001n", 8, &ms), 0);
	ck_assert_int_eq(ms, 2);
	ck_assert_int_eq(grpc_timeout_parse("12345678S", 9, &ms), 0);
	ck_assert_int_eq(grpc_timeout_parse("123456789S", 10, &ms), -EINVAL); /* 9 digits */
	ck_assert_int_eq(grpc_timeout_parse("10x", 3, &ms), -EINVAL);
	ck_assert_int_eq(grpc_timeout_parse("S", 1, &ms), -EINVAL);
	ck_assert_int_eq(grpc_timeout_parse("-1S", 3, &ms), -EINVAL);
	grpc_timeout_format(1500, buf, sizeof(buf));
	ck_assert_str_eq(buf, "1500m");
	grpc_timeout_format(200000000, buf, sizeof(buf));
	ck_assert_str_eq(buf, "200000S");
	grpc_timeout_format(0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "1m");
}
END_TEST

START_TEST(test_metadata_validation)
{
	ck_assert(grpc_md_key_valid("x-request-id"));
	ck_assert(grpc_md_key_valid("a_b.c-1"));
	ck_assert(!grpc_md_key_valid("X-Upper"));
	ck_assert(!grpc_md_key_valid("grpc-status"));
	ck_assert(!grpc_md_key_valid(":path"));
	ck_assert(!grpc_md_key_valid(""));
	ck_assert(!grpc_md_key_valid("sp ace"));
	ck_assert(grpc_md_value_valid("k", "printable ~", 11));
	ck_assert(!grpc_md_value_valid("k", "line\nbreak", 10));
	ck_assert(grpc_md_value_valid("k-bin", "\x01\x02", 2));
	ck_assert_int_eq(grpc_code_from_http(404), GRPC_UNIMPLEMENTED);
	ck_assert_int_eq(grpc_code_from_http(503), GRPC_UNAVAILABLE);
	ck_assert_int_eq(grpc_code_from_http(500), GRPC_UNKNOWN);
	ck_assert_int_eq(grpc_code_from_h2_error(NGHTTP2_REFUSED_STREAM), GRPC_UNAVAILABLE);
	ck_assert_int_eq(grpc_code_from_h2_error(NGHTTP2_CANCEL), GRPC_CANCELLED);
}
END_TEST

struct got {
	int n;
	size_t lens[8];
	char first[64];
};

static int collect(void *arg, const uint8_t *m, size_t len)
{
	struct got *g = arg;
	if (g->n < 8)
		g->lens[g->n] = len;
	if (g->n == 0)
		snprintf(g->first, sizeof(g->first), "%.*s", (int)len, (const char *)m);
	g->n++;
	return 0;
}

START_TEST(test_deframer)
{
	struct grpc_deframer d;
	uint8_t wire[64];
	struct got g = {0};
	size_t i;

	grpc_prefix_write(wire, false, 5);
	memcpy(wire + 5, "hello", 5);
	grpc_prefix_write(wire + 10, false, 0); /* an empty message */
	grpc_deframer_init(&d, 100);
	for (i = 0; i < 15; i++) /* byte by byte */
		ck_assert_int_eq(grpc_deframer_feed(&d, wire + i, 1, collect, &g), 0);
	ck_assert_int_eq(g.n, 2);
	ck_assert_str_eq(g.first, "hello");
	ck_assert_uint_eq(g.lens[1], 0);
	ck_assert(grpc_deframer_idle(&d));
	ck_assert_int_eq(grpc_deframer_feed(&d, wire, 3, collect, &g), 0);
	ck_assert(!grpc_deframer_idle(&d));
	grpc_deframer_free(&d);

	grpc_deframer_init(&d, 100);
	grpc_prefix_write(wire, true, 1);
	ck_assert_int_eq(grpc_deframer_feed(&d, wire, 6, collect, &g), -EPROTO);
	grpc_deframer_free(&d);

	grpc_deframer_init(&d, 100);
	grpc_prefix_write(wire, false, 101);
	ck_assert_int_eq(grpc_deframer_feed(&d, wire, 5, collect, &g), -EMSGSIZE);
	ck_assert_uint_eq(d.last_len, 101);
	grpc_deframer_free(&d);
}
END_TEST

/* ---- in-memory server against a raw nghttp2 client ------------------------------------------ */

static int h_info(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	Csi__V1__GetPluginInfoResponse *r = grpc_call_alloc(call, sizeof(*r));
	const char *who = grpc_call_metadata(call, "x-who");
	(void)req;
	(void)ctx;
	if (who && strncmp(who, "sleep:", 6) == 0) { /* in steps, ending early when cancelled */
		for (int left = atoi(who + 6); left > 0 && !grpc_call_cancelled(call); left -= 10)
			usleep(10000);
		if (grpc_call_cancelled(call))
			return GRPC_CANCELLED;
	}
	if (who && strcmp(who, "fail") == 0) {
		grpc_call_set_status_msg(call, "volume %s: 100%% broken", "pvc-1");
		return GRPC_FAILED_PRECONDITION;
	}
	csi__v1__get_plugin_info_response__init(r);
	r->name = "pillar-csi.bhyoo.com";
	r->vendor_version = grpc_call_strdup(call, who ? who : "none");
	ck_assert_int_eq(grpc_call_add_metadata(call, "x-reply", "yes"), 0);
	ck_assert_int_eq(grpc_call_add_metadata(call, "Bad", "yes"), -EINVAL);
	*resp = &r->base;
	return GRPC_OK;
}

static const struct grpc_method info_methods[] = {
    {.name = "GetPluginInfo",
     .unary = h_info,
     .req = &csi__v1__get_plugin_info_request__descriptor,
     .resp = &csi__v1__get_plugin_info_response__descriptor},
};
static const struct grpc_service identity = {
    .name = "csi.v1.Identity", .methods = info_methods, .n_methods = 1};

struct resp {
	int http, grpc_status, n_headers_frames;
	bool closed, end_with_headers;
	uint32_t rst;
	char msg[256], reply_md[32], ctype[64];
	uint8_t body[4096];
	size_t body_len;
};

struct mem {
	struct h2_loop *loop;
	struct grpc_server *srv;
	struct h2_conn *sc;
	nghttp2_session *cli;
	struct resp r[8];
};

static int c_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *n, size_t nl,
                    const uint8_t *v, size_t vl, uint8_t fl, void *ud)
{
	struct mem *m = ud;
	struct resp *r = &m->r[(f->hd.stream_id / 2) % 8];
	(void)ng;
	(void)fl;
	if (nl == 7 && !memcmp(n, ":status", 7))
		r->http = atoi((const char *)v);
	else if (nl == 11 && !memcmp(n, "grpc-status", 11))
		r->grpc_status = atoi((const char *)v);
	else if (nl == 12 && !memcmp(n, "grpc-message", 12))
		snprintf(r->msg, sizeof(r->msg), "%.*s", (int)vl, (const char *)v);
	else if (nl == 7 && !memcmp(n, "x-reply", 7))
		snprintf(r->reply_md, sizeof(r->reply_md), "%.*s", (int)vl, (const char *)v);
	else if (nl == 12 && !memcmp(n, "content-type", 12))
		snprintf(r->ctype, sizeof(r->ctype), "%.*s", (int)vl, (const char *)v);
	return 0;
}

static int c_frame(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct mem *m = ud;
	struct resp *r = &m->r[(f->hd.stream_id / 2) % 8];
	(void)ng;
	if (f->hd.type == NGHTTP2_HEADERS) {
		r->n_headers_frames++;
		if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
			r->end_with_headers = true;
	}
	if (f->hd.type == NGHTTP2_RST_STREAM)
		r->rst = f->rst_stream.error_code;
	return 0;
}

static int c_data(nghttp2_session *ng, uint8_t fl, int32_t sid, const uint8_t *d, size_t len,
                  void *ud)
{
	struct mem *m = ud;
	struct resp *r = &m->r[(sid / 2) % 8];
	(void)ng;
	(void)fl;
	if (r->body_len + len <= sizeof(r->body)) {
		memcpy(r->body + r->body_len, d, len);
		r->body_len += len;
	}
	return 0;
}

static int c_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *ud)
{
	struct mem *m = ud;
	(void)ng;
	(void)code;
	m->r[(sid / 2) % 8].closed = true;
	return 0;
}

static void mem_setup(struct mem *m, size_t max_msg)
{
	struct grpc_server_opts o;
	nghttp2_session_callbacks *cb;
	struct err e = {0};

	memset(m, 0, sizeof(*m));
	ck_assert_int_eq(h2_loop_new(&m->loop, &e), 0);
	grpc_server_opts_init(&o);
	o.workers = 0;
	o.loop = m->loop;
	o.max_msg = max_msg;
	o.max_header_list = 1024;
	ck_assert_int_eq(grpc_server_new(&m->srv, &o, &e), 0);
	ck_assert_int_eq(grpc_server_add_service(m->srv, &identity, &e), 0);
	ck_assert_int_eq(grpc_server_mem_conn(m->srv, &m->sc, &e), 0);
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_on_header_callback(cb, c_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, c_frame);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, c_close);
	nghttp2_session_client_new(&m->cli, cb, m);
	nghttp2_session_callbacks_del(cb);
	nghttp2_submit_settings(m->cli, NGHTTP2_FLAG_NONE, NULL, 0);
}

static void pump(struct mem *m)
{
	int i;
	for (i = 0; i < 50; i++) {
		const uint8_t *p;
		ssize_t n;
		size_t len;
		while ((n = nghttp2_session_mem_send(m->cli, &p)) > 0)
			h2_conn_feed(m->sc, p, (size_t)n);
		h2_loop_run_pending(m->loop);
		p = h2_conn_take(m->sc, &len);
		if (len)
			ck_assert_int_ge(nghttp2_session_mem_recv(m->cli, p, len), 0);
		else if (!nghttp2_session_want_write(m->cli))
			break;
	}
}

static void mem_teardown(struct mem *m)
{
	nghttp2_session_del(m->cli);
	h2_conn_destroy(m->sc);
	grpc_server_free(m->srv);
	h2_loop_free(m->loop);
}

#define NV(k, v)                                                        \
	{                                                               \
		(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), 0 \
	}

/* Sends one request; extra headers replace the defaults when their name is given. */
static int32_t request(struct mem *m, const char *method, const char *path, const char *ctype,
                       const char *extra_k, const char *extra_v, struct h2_body *b)
{
	nghttp2_nv nv[8] = {NV(":method", method),     NV(":scheme", "http"),
	                    NV(":path", path),         NV(":authority", "localhost"),
	                    NV("content-type", ctype), NV("te", "trailers")};
	size_t n = 6;
	nghttp2_data_provider dp = {.source.ptr = b, .read_callback = h2_body_read};
	if (extra_k) {
		nv[n].name = (uint8_t *)extra_k;
		nv[n].namelen = strlen(extra_k);
		nv[n].value = (uint8_t *)extra_v;
		nv[n].valuelen = strlen(extra_v);
		nv[n++].flags = 0;
	}
	return nghttp2_submit_request(m->cli, NULL, nv, n, b ? &dp : NULL, NULL);
}

static struct h2_body *info_body(uint8_t *buf, size_t *len, struct h2_body *b)
{
	Csi__V1__GetPluginInfoRequest rq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	size_t n = csi__v1__get_plugin_info_request__pack(&rq, buf + 5);
	grpc_prefix_write(buf, false, (uint32_t)n);
	*len = n + 5;
	b->data = buf;
	b->len = *len;
	b->off = 0;
	return b;
}

/* A request body that stops short of its end (no END_STREAM): the client keeps sending later. */
static ssize_t partial_read(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t len,
                            uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct h2_body *b = src->ptr;
	size_t n = b->len - b->off < len ? b->len - b->off : len;
	(void)ng;
	(void)sid;
	(void)flags;
	(void)ud;

	if (n == 0)
		return NGHTTP2_ERR_DEFERRED;
	memcpy(buf, b->data + b->off, n);
	b->off += n;
	return (ssize_t)n;
}

/* A GetPluginInfo request whose body is b, sent without END_STREAM. */
static int32_t partial_request(struct mem *m, struct h2_body *b)
{
	nghttp2_nv nv[] = {NV(":method", "POST"),
	                   NV(":scheme", "http"),
	                   NV(":path", "/csi.v1.Identity/GetPluginInfo"),
	                   NV(":authority", "localhost"),
	                   NV("content-type", "application/grpc"),
	                   NV("te", "trailers")};
	nghttp2_data_provider dp = {.source.ptr = b, .read_callback = partial_read};
	return nghttp2_submit_request(m->cli, NULL, nv, 6, &dp, NULL);
}

/* Requests still arriving on one connection hold at most max_conn_pending (4 * max_msg by
 * default) in buffers sized by what their prefixes announce: with max_msg 1 MiB, four streams that each
 * announce a 1 MiB message and send a little of it are let in, the fifth and sixth fail with
 * RESOURCE_EXHAUSTED at once; a stream that ends gives its share back to the next one. */
START_TEST(test_server_pending_limit)
{
	struct mem m;
	static uint8_t part[1005];
	struct h2_body b[7];
	int32_t sid[7];
	struct resp *r;

	mem_setup(&m, 1u << 20);
	grpc_prefix_write(part, false, 1u << 20);
	for (int i = 0; i < 7; i++)
		b[i] = (struct h2_body){part, sizeof(part), 0};
	for (int i = 0; i < 6; i++) {
		sid[i] = partial_request(&m, &b[i]);
		pump(&m);
	}
	for (int i = 0; i < 6; i++) {
		r = &m.r[(sid[i] / 2) % 8];
		if (i < 4) {
			ck_assert_msg(!r->closed && r->http == 0, "stream %d answered", i);
		} else {
			ck_assert_int_eq(r->grpc_status, GRPC_RESOURCE_EXHAUSTED);
			ck_assert_ptr_nonnull(strstr(r->msg, "would hold more than 4194304 bytes"));
		}
	}
	nghttp2_submit_rst_stream(m.cli, NGHTTP2_FLAG_NONE, sid[0], NGHTTP2_CANCEL);
	sid[6] = partial_request(&m, &b[6]);
	pump(&m);
	r = &m.r[(sid[6] / 2) % 8];
	ck_assert_msg(!r->closed && r->http == 0, "the stream after a cancelled one answered");
	mem_teardown(&m);
}
END_TEST

START_TEST(test_server_unary_ok)
{
	struct mem m;
	uint8_t buf[64];
	size_t len;
	struct h2_body b;
	struct resp *r;
	Csi__V1__GetPluginInfoResponse *out;
	int32_t sid;

	mem_setup(&m, 4096);
	sid = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "application/grpc", "x-who",
	              "tester", info_body(buf, &len, &b));
	pump(&m);
	r = &m.r[(sid / 2) % 8];
	ck_assert(r->closed);
	ck_assert_int_eq(r->http, 200);
	ck_assert_str_eq(r->ctype, "application/grpc");
	ck_assert_int_eq(r->grpc_status, 0);
	ck_assert_str_eq(r->reply_md, "yes");
	ck_assert_int_eq(r->n_headers_frames, 2); /* headers, then trailers */
	ck_assert(r->end_with_headers);
	ck_assert_uint_ge(r->body_len, 5);
	ck_assert_int_eq(r->body[0], 0);
	ck_assert_uint_eq((size_t)r->body[4] + 5, r->body_len);
	out = csi__v1__get_plugin_info_response__unpack(NULL, r->body_len - 5, r->body + 5);
	ck_assert_ptr_nonnull(out);
	ck_assert_str_eq(out->name, "pillar-csi.bhyoo.com");
	ck_assert_str_eq(out->vendor_version, "tester");
	csi__v1__get_plugin_info_response__free_unpacked(out, NULL);
	mem_teardown(&m);
}
END_TEST

START_TEST(test_server_error_status)
{
	struct mem m;
	uint8_t buf[64];
	size_t len;
	struct h2_body b;
	struct resp *r;
	int32_t sid;

	mem_setup(&m, 4096);
	sid = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "application/grpc", "x-who",
	              "fail", info_body(buf, &len, &b));
	pump(&m);
	r = &m.r[(sid / 2) % 8];
	ck_assert_int_eq(r->grpc_status, GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(r->msg, "volume pvc-1: 100%25 broken"); /* percent-encoded */
	ck_assert_int_eq(r->n_headers_frames, 1);                /* Trailers-Only */
	ck_assert_uint_eq(r->body_len, 0);
	mem_teardown(&m);
}
END_TEST

START_TEST(test_server_early_errors)
{
	struct mem m;
	uint8_t buf[64], big[64];
	size_t len;
	struct h2_body b[6], bb = {0};
	int32_t s_unk_svc, s_unk_m, s_ctype, s_get, s_big, s_comp, s_tmo, s_bad, s_empty;

	mem_setup(&m, 16);
	s_unk_svc = request(&m, "POST", "/no.Such/Thing", "application/grpc", NULL, NULL,
	                    info_body(buf, &len, &b[0]));
	s_unk_m = request(&m, "POST", "/csi.v1.Identity/Nope", "application/grpc", NULL, NULL,
	                  info_body(buf, &len, &b[1]));
	s_ctype = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "text/plain", NULL, NULL,
	                  info_body(buf, &len, &b[2]));
	s_get = request(&m, "GET", "/csi.v1.Identity/GetPluginInfo", "application/grpc", NULL, NULL,
	                NULL);
	pump(&m);
	ck_assert_int_eq(m.r[(s_unk_svc / 2) % 8].grpc_status, GRPC_UNIMPLEMENTED);
	ck_assert_str_eq(m.r[(s_unk_svc / 2) % 8].msg, "unknown service no.Such");
	ck_assert_int_eq(m.r[(s_unk_svc / 2) % 8].n_headers_frames, 1);
	ck_assert_int_eq(m.r[(s_unk_m / 2) % 8].grpc_status, GRPC_UNIMPLEMENTED);
	ck_assert_str_eq(m.r[(s_unk_m / 2) % 8].msg,
	                 "unknown method Nope for service csi.v1.Identity");
	ck_assert_int_eq(m.r[(s_ctype / 2) % 8].http, 415);
	ck_assert_int_eq(m.r[(s_get / 2) % 8].http, 405);
	memset(&m.r, 0, sizeof(m.r));

	/* 17 bytes > max 16: RESOURCE_EXHAUSTED */
	memset(big, 0, sizeof(big));
	grpc_prefix_write(big, false, 17);
	bb.data = big;
	bb.len = 22;
	s_big = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "application/grpc", NULL,
	                NULL, &bb);
	pump(&m);
	ck_assert_int_eq(m.r[(s_big / 2) % 8].grpc_status, GRPC_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(m.r[(s_big / 2) % 8].msg, "received message larger than max (17 vs. 16)");

	/* compressed flag */
	grpc_prefix_write(big, true, 1);
	b[3].data = big;
	b[3].len = 6;
	b[3].off = 0;
	s_comp = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "application/grpc",
	                 "grpc-encoding", "gzip", &b[3]);
	/* malformed timeout */
	s_tmo = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "application/grpc",
	                "grpc-timeout", "soon", info_body(buf, &len, &b[4]));
	/* bytes that are not a protobuf message */
	grpc_prefix_write(big + 8, false, 3);
	memcpy(big + 13, "\xff\xff\xff", 3);
	b[5].data = big + 8;
	b[5].len = 8;
	b[5].off = 0;
	s_bad = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "application/grpc", NULL,
	                NULL, &b[5]);
	/* no message at all */
	s_empty = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "application/grpc", NULL,
	                  NULL, NULL);
	pump(&m);
	ck_assert_int_eq(m.r[(s_comp / 2) % 8].grpc_status, GRPC_UNIMPLEMENTED);
	ck_assert_int_eq(m.r[(s_tmo / 2) % 8].grpc_status, GRPC_INTERNAL);
	ck_assert_str_eq(m.r[(s_tmo / 2) % 8].msg, "malformed grpc-timeout header");
	ck_assert_int_eq(m.r[(s_bad / 2) % 8].grpc_status, GRPC_INTERNAL);
	ck_assert_int_eq(m.r[(s_empty / 2) % 8].grpc_status, GRPC_INTERNAL);
	mem_teardown(&m);
}
END_TEST

START_TEST(test_server_health)
{
	struct mem m;
	uint8_t req[32] = {0, 0, 0, 0, 17, 0x0a, 15};
	struct h2_body b = {.data = req, .len = 22};
	struct resp *r;
	int32_t sid;

	mem_setup(&m, 4096);
	memcpy(req + 7, "csi.v1.Identity", 15);
	sid =
	    request(&m, "POST", "/grpc.health.v1.Health/Check", "application/grpc", NULL, NULL, &b);
	pump(&m);
	r = &m.r[(sid / 2) % 8];
	ck_assert_int_eq(r->grpc_status, 0);
	ck_assert_uint_eq(r->body_len, 7);
	ck_assert_int_eq(r->body[5], 0x08);
	ck_assert_int_eq(r->body[6], 1); /* SERVING */
	grpc_server_set_serving(m.srv, "csi.v1.Identity", false);
	b.off = 0;
	sid =
	    request(&m, "POST", "/grpc.health.v1.Health/Check", "application/grpc", NULL, NULL, &b);
	pump(&m);
	ck_assert_int_eq(m.r[(sid / 2) % 8].body[6], 2); /* NOT_SERVING */
	memcpy(req + 7, "csi.v1.Nothing!", 15);
	b.off = 0;
	sid =
	    request(&m, "POST", "/grpc.health.v1.Health/Check", "application/grpc", NULL, NULL, &b);
	pump(&m);
	ck_assert_int_eq(m.r[(sid / 2) % 8].grpc_status, GRPC_NOT_FOUND);
	mem_teardown(&m);
}
END_TEST

START_TEST(test_server_header_limit_and_garbage)
{
	struct mem m;
	char big[2000];
	int32_t sid;

	mem_setup(&m, 4096);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	sid = request(&m, "POST", "/csi.v1.Identity/GetPluginInfo", "application/grpc", "x-big",
	              big, NULL);
	pump(&m);
	ck_assert(m.r[(sid / 2) % 8].closed);
	ck_assert_uint_ne(m.r[(sid / 2) % 8].rst, 0); /* refused, not served */
	/* a CONTINUATION frame out of nowhere is a connection error: GOAWAY, no crash */
	{
		const uint8_t *p;
		size_t len, off = 0;
		bool goaway = false;
		h2_conn_feed(m.sc, (const uint8_t *)"\0\0\4\x09\0\0\0\0\1junk", 13);
		p = h2_conn_take(m.sc, &len);
		while (off + 9 <= len) {
			size_t flen = (size_t)p[off] << 16 | (size_t)p[off + 1] << 8 | p[off + 2];
			if (p[off + 3] == NGHTTP2_GOAWAY)
				goaway = true;
			off += 9 + flen;
		}
		ck_assert(goaway);
		ck_assert(!nghttp2_session_want_read(h2_conn_session(m.sc)));
	}
	mem_teardown(&m);
}
END_TEST

/* ---- our channel against our server over a unix socket ------------------------------------- */

static const struct grpc_service *start_server(struct grpc_server **s, const char *url)
{
	const char *listen[] = {url, NULL};
	struct grpc_server_opts o;
	struct err e = {0};

	grpc_server_opts_init(&o);
	o.listen = listen;
	o.workers = 2;
	ck_assert_msg(grpc_server_new(s, &o, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(grpc_server_add_service(*s, &identity, &e), 0);
	ck_assert_msg(grpc_server_start(*s, &e) == 0, "%s", e.msg);
	return &identity;
}

static int who_call(struct grpc_channel *ch, const char *who, int64_t timeout_ms,
                    struct grpc_status *st)
{
	Csi__V1__GetPluginInfoRequest rq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	struct grpc_md md[] = {{"x-who", who}, {NULL, NULL}};
	ProtobufCMessage *r;
	int code = grpc_channel_call(ch, "/csi.v1.Identity/GetPluginInfo", &rq.base,
	                             &csi__v1__get_plugin_info_response__descriptor, &r, timeout_ms,
	                             md, st);
	if (code == GRPC_OK) {
		ck_assert_str_eq(((Csi__V1__GetPluginInfoResponse *)r)->vendor_version, who);
		protobuf_c_message_free_unpacked(r, NULL);
	}
	return code;
}

static int info_call(struct grpc_channel *ch, struct grpc_status *st)
{
	return who_call(ch, "channel", 5000, st);
}

START_TEST(test_channel_reconnect)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct grpc_status st;
	struct err e = {0};
	int i, code = -1;

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	start_server(&s, url);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	grpc_server_free(s);
	ck_assert_int_eq(info_call(ch, &st), GRPC_UNAVAILABLE);
	ck_assert_ptr_nonnull(strstr(st.msg, "g.sock"));
	start_server(&s, url);
	for (i = 0; i < 50 && code != GRPC_OK; i++) {
		code = info_call(ch, &st);
		if (code != GRPC_OK)
			usleep(50000); /* backoff */
	}
	ck_assert_int_eq(code, GRPC_OK);
	grpc_channel_free(ch);
	grpc_server_free(s);
	tu_rmtree(dir);
}
END_TEST

/* After a failed connection attempt the channel refuses calls for its backoff (an hour here),
 * even once the server is back; grpc_channel_reset_backoff makes the next call connect. */
START_TEST(test_channel_backoff_reset)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct grpc_channel_opts o;
	struct grpc_status st;
	struct err e = {0};

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	grpc_channel_opts_init(&o);
	o.initial_backoff_ms = 3600000;
	ck_assert_int_eq(grpc_channel_new(&ch, url, &o, &e), 0);
	ck_assert_int_eq(info_call(ch, &st), GRPC_UNAVAILABLE); /* nothing listens */
	start_server(&s, url);
	ck_assert_int_eq(info_call(ch, &st), GRPC_UNAVAILABLE);
	ck_assert_msg(strstr(st.msg, "(retrying in "), "not refused by the backoff: %s", st.msg);
	grpc_channel_reset_backoff(ch);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	grpc_channel_free(ch);
	grpc_server_free(s);
	tu_rmtree(dir);
}
END_TEST

/* The go-grpc-prometheus families, server and client side, with Go's code names. */
START_TEST(test_grpc_metrics)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct grpc_status st;
	struct err e = {0};
	struct metrics_text t = {0};

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	start_server(&s, url);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	ck_assert_int_eq(who_call(ch, "fail", 5000, &st), GRPC_FAILED_PRECONDITION);
	metrics_write(&t);
	if (getenv("SHOW_METRICS"))
		fputs(t.buf, stderr);
	const char *want[] = {
	    "\ngrpc_server_started_total{grpc_type=\"unary\",grpc_service=\"csi.v1.Identity\","
	    "grpc_method=\"GetPluginInfo\"} 3\n",
	    "\ngrpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"csi.v1.Identity\","
	    "grpc_method=\"GetPluginInfo\",grpc_code=\"OK\"} 2\n",
	    "\ngrpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"csi.v1.Identity\","
	    "grpc_method=\"GetPluginInfo\",grpc_code=\"FailedPrecondition\"} 1\n",
	    "\ngrpc_server_msg_received_total{grpc_type=\"unary\",grpc_service=\"csi.v1.Identity\","
	    "grpc_method=\"GetPluginInfo\"} 3\n",
	    "\ngrpc_server_msg_sent_total{grpc_type=\"unary\",grpc_service=\"csi.v1.Identity\","
	    "grpc_method=\"GetPluginInfo\"} 2\n",
	    "\ngrpc_server_handling_seconds_count{grpc_type=\"unary\",grpc_service=\"csi.v1."
	    "Identity\",grpc_method=\"GetPluginInfo\"} 3\n",
	    "grpc_method=\"GetPluginInfo\",le=\"0.005\"} ",
	    "\ngrpc_client_handled_total{grpc_type=\"unary\",grpc_service=\"csi.v1.Identity\","
	    "grpc_method=\"GetPluginInfo\",grpc_code=\"FailedPrecondition\"} 1\n",
	    "\ngrpc_client_started_total{grpc_type=\"unary\",grpc_service=\"csi.v1.Identity\","
	    "grpc_method=\"GetPluginInfo\"} 3\n",
	    "# TYPE grpc_client_handling_seconds histogram\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(strstr(t.buf, want[i]), "missing %s", want[i]);
	metrics_text_free(&t);
	ck_assert_str_eq(grpc_code_go_name(GRPC_DEADLINE_EXCEEDED), "DeadlineExceeded");
	ck_assert_str_eq(grpc_code_go_name(GRPC_CANCELLED), "Canceled");
	ck_assert_str_eq(grpc_code_go_name(99), "Unknown");
	grpc_channel_free(ch);
	grpc_server_free(s);
	tu_rmtree(dir);
}
END_TEST

/* ---- callers that read their own responses --------------------------------------------------- */

struct burst {
	struct grpc_channel *ch;
	int idx, ok;
};

static void *burst_main(void *arg)
{
	struct burst *b = arg;
	struct grpc_status st;
	char who[32];

	for (int i = 0; i < 40; i++) {
		snprintf(who, sizeof(who), i % 8 == 0 ? "sleep:%d" : "t%d-%d",
		         i % 8 == 0 ? 3 : b->idx, i);
		if (who_call(b->ch, who, 10000, &st) == GRPC_OK)
			b->ok++;
	}
	return NULL;
}

/* Many callers share one connection: one reads it, the others are woken with their responses. */
START_TEST(test_channel_concurrent_callers)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct burst b[16];
	pthread_t t[16];
	struct err e = {0};
	int i;

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	start_server(&s, url);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	for (i = 0; i < 16; i++) {
		b[i] = (struct burst){.ch = ch, .idx = i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, burst_main, &b[i]), 0);
	}
	for (i = 0; i < 16; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(b[i].ok, 40);
	}
	grpc_channel_free(ch);
	grpc_server_free(s);
	tu_rmtree(dir);
}
END_TEST

struct stopper {
	struct grpc_server *s;
	uint64_t after_ms;
};

static void *stop_main(void *arg)
{
	struct stopper *sp = arg;
	usleep((useconds_t)sp->after_ms * 1000);
	grpc_server_shutdown(sp->s, 0);
	return NULL;
}

/* A caller waiting for its own response: the deadline ends the wait on time and the connection
 * stays usable; a connection closed under it ends the call at once with UNAVAILABLE; between
 * calls the loop reads the connection again. */
START_TEST(test_channel_caller_reads_itself)
{
	char url[64];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct grpc_status st;
	struct stopper sp;
	struct err e = {0};
	pthread_t t;
	uint64_t t0;

	/* TCP: a peer's close shows as input (no EPOLLHUP), so only a reader notices it */
	start_server(&s, "127.0.0.1:0");
	snprintf(url, sizeof(url), "127.0.0.1:%d", grpc_server_port(s, 0));
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	/* the handlers below would take 20 s: the bounds lie far from both that and the times that
	 * end the calls (a 200 ms deadline, a close after 200 ms), so that a loaded machine's
	 * scheduling cannot decide the verdict */
	t0 = h2_now_ms();
	ck_assert_int_eq(who_call(ch, "sleep:20000", 200, &st), GRPC_DEADLINE_EXCEEDED);
	ck_assert_uint_lt(h2_now_ms() - t0, 10000);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);

	/* the server closes the connection while the handler still runs */
	sp = (struct stopper){.s = s, .after_ms = 200};
	ck_assert_int_eq(pthread_create(&t, NULL, stop_main, &sp), 0);
	t0 = h2_now_ms();
	ck_assert_int_eq(who_call(ch, "sleep:20000", 30000, &st), GRPC_UNAVAILABLE);
	ck_assert_uint_lt(h2_now_ms() - t0, 10000);
	pthread_join(t, NULL);
	grpc_server_free(s);

	/* between calls the loop reads the connection: it sees the server go and the next call
	 * opens a new connection at once */
	start_server(&s, url);
	for (int i = 0; i < 50 && info_call(ch, &st) != GRPC_OK; i++)
		usleep(50000);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	grpc_server_free(s);
	start_server(&s, url);
	/* the loop noticed the close when the channel has no connection (conn_id 0) */
	for (uint64_t t1 = h2_now_ms(); grpc_channel_conn_id(ch) && h2_now_ms() - t1 < 30000;)
		usleep(10000);
	ck_assert_msg(!grpc_channel_conn_id(ch),
	              "the loop never saw the server close the connection");
	ck_assert_msg(info_call(ch, &st) == GRPC_OK, "first call after a server restart: %d %s",
	              st.code, st.msg);
	grpc_channel_free(ch);
	grpc_server_free(s);
}
END_TEST

/* A job on the channel's loop that holds it until released (or 10 s): released says which. */
struct loop_holder {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool held, release, released;
};

static void hold_loop(void *arg)
{
	struct loop_holder *h = arg;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&h->mu);
	h->held = true;
	pthread_cond_broadcast(&h->cv);
	while (!h->release && pthread_cond_timedwait(&h->cv, &h->mu, &until) == 0)
		;
	h->released = h->release;
	pthread_mutex_unlock(&h->mu);
}

/* grpc_channel_conn_id: 0 before a connection, the connection's id while it is established, a
 * new id for a new connection; and it answers while the channel's loop is busy (the agent
 * monitor asks about every agent every 100 ms and must not queue behind the loop's work). */
START_TEST(test_channel_conn_id)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct grpc_channel_opts o;
	struct grpc_status st;
	struct h2_loop *loop;
	struct loop_holder h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	struct err e = {0};
	uint64_t first, second;

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	start_server(&s, url);
	ck_assert_int_eq(h2_loop_new(&loop, &e), 0);
	ck_assert_int_eq(h2_loop_start(loop, &e), 0);
	grpc_channel_opts_init(&o);
	o.loop = loop;
	ck_assert_int_eq(grpc_channel_new(&ch, url, &o, &e), 0);
	ck_assert_uint_eq(grpc_channel_conn_id(ch), 0);
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	first = grpc_channel_conn_id(ch);
	ck_assert_uint_ne(first, 0);

	ck_assert_int_eq(h2_loop_post(loop, hold_loop, &h), 0);
	pthread_mutex_lock(&h.mu);
	while (!h.held)
		pthread_cond_wait(&h.cv, &h.mu);
	pthread_mutex_unlock(&h.mu);
	ck_assert_uint_eq(grpc_channel_conn_id(ch), first);
	pthread_mutex_lock(&h.mu);
	h.release = true;
	pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.mu);
	for (uint64_t t0 = h2_now_ms(); h2_now_ms() - t0 < 15000;) {
		pthread_mutex_lock(&h.mu);
		bool done = h.released || !h.release;
		pthread_mutex_unlock(&h.mu);
		if (done)
			break;
		usleep(1000);
	}
	ck_assert_int_eq(info_call(ch, &st), GRPC_OK);
	ck_assert_msg(h.released, "conn_id waited for the loop's job to end");

	grpc_server_free(s);
	for (uint64_t t0 = h2_now_ms(); grpc_channel_conn_id(ch) && h2_now_ms() - t0 < 20000;)
		usleep(10000);
	ck_assert_uint_eq(grpc_channel_conn_id(ch), 0);
	start_server(&s, url);
	for (int i = 0; i < 50 && info_call(ch, &st) != GRPC_OK; i++)
		usleep(50000);
	second = grpc_channel_conn_id(ch);
	ck_assert_uint_ne(second, 0);
	ck_assert_uint_ne(second, first);
	grpc_channel_free(ch);
	grpc_server_free(s);
	h2_loop_free(loop);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("grpc");
	TCase *t = tcase_create("grpc");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_code_names);
	tcase_add_test(t, test_channel_conn_id);
	tcase_add_test(t, test_message_encoding);
	tcase_add_test(t, test_timeout);
	tcase_add_test(t, test_metadata_validation);
	tcase_add_test(t, test_deframer);
	tcase_add_test(t, test_server_unary_ok);
	tcase_add_test(t, test_server_error_status);
	tcase_add_test(t, test_server_early_errors);
	tcase_add_test(t, test_server_pending_limit);
	tcase_add_test(t, test_server_health);
	tcase_add_test(t, test_server_header_limit_and_garbage);
	tcase_add_test(t, test_channel_reconnect);
	tcase_add_test(t, test_channel_backoff_reset);
	tcase_add_test(t, test_grpc_metrics);
	tcase_add_test(t, test_channel_concurrent_callers);
	tcase_add_test(t, test_channel_caller_reads_itself);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
