/* grpc/server — a gRPC server over HTTP/2 (nghttp2) with optional TLS/mTLS (mbedtls).
 *
 * Services are tables of methods (name, handler, protobuf-c request/response descriptors).
 * Connections and streams live on the event loop (h2/loop).  A request of a method listed as
 * nonblocking runs its handler on the loop as soon as it is complete, and the responses of every
 * request read in one turn leave in one write per connection.  Any other request runs its handler
 * as a job of the server's group (opts.workers threads of the loop; 0: inline on the loop, for
 * tests): on the thread that read the request, which also sends the response, while the loop's
 * other poller keeps watching every connection — at one call in flight nothing is handed between
 * threads, and a slow handler delays nothing else.  Such handlers may block (backend commands,
 * store writes): the requests read behind one wake idle threads, so up to opts.workers handlers
 * run at once, and a request beyond that waits for the first handler to return.  A handler thread
 * never waits for the loop to send: when another thread holds it, that one sends the response,
 * in one write with the connection's other responses handed over meanwhile.  Early errors (unknown
 * method, oversize or compressed message, bad headers, memory limits: max_conn_pending) are
 * answered on the loop as Trailers-Only responses.  `grpc.health.v1.Health/Check` is built in: "" and every added service start
 * SERVING; grpc_server_set_serving() changes one.
 *
 * A unary handler returns a status code (enum grpc_code).  On GRPC_OK it sets *resp to a message
 * that stays valid after it returns — memory from grpc_call_alloc()/grpc_call_strdup() (freed
 * with the call), static data, or its own allocation released by the method's resp_free.  On any
 * other code it may describe the failure with grpc_call_set_status_msg().  A server-streaming
 * handler sends with grpc_call_send() (blocking under flow control) and returns the final code.
 * Constructors return 0 or a negative errno with the reason in e.
 */
#ifndef PILLAR_GRPC_SERVER_H
#define PILLAR_GRPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "base/err.h"
#include "grpc/status.h"
#include "h2/loop.h"

struct grpc_server;
struct grpc_call;

typedef int (*grpc_unary_fn)(struct grpc_call *call, const ProtobufCMessage *req,
                             ProtobufCMessage **resp, void *ctx);
typedef int (*grpc_stream_fn)(struct grpc_call *call, const ProtobufCMessage *req, void *ctx);

struct grpc_method {
	const char *name;             /* "CreateVolume" */
	grpc_unary_fn unary;          /* exactly one of unary / server_stream */
	grpc_stream_fn server_stream; /* server-streaming: one request, many responses */
	const ProtobufCMessageDescriptor *req, *resp;
	void (*resp_free)(ProtobufCMessage *resp, void *ctx); /* optional, unary only */
};

struct grpc_service {
	const char *name; /* "pillar_csi.agent.v1.AgentService" */
	const struct grpc_method *methods;
	size_t n_methods;
	void *ctx; /* passed to every handler */
	/* NULL or a NULL-terminated list of the names of unary methods whose handler never blocks
	 * (no file or network I/O, no waiting for a lock held for long, no sleep).  Such a
	 * handler runs at once on the thread that read the request, holding the event loop, and
	 * its response leaves with that connection's next write: no hand-off between threads. */
	const char *const *nonblocking;
};

struct grpc_server_opts {
	const char *const *listen; /* NULL-terminated list of listen addresses (h2/net.h forms) */
	unsigned unix_mode;        /* mode of unix socket files; default 0660 */
	const char *tls_cert, *tls_key; /* both set: TLS 1.2 with ALPN h2 */
	const char *tls_ca;       /* with TLS: require client certificates signed by this CA */
	size_t max_msg;           /* receive and send limit; default 4 MiB */
	unsigned max_streams;     /* concurrent streams per connection; default 100 */
	unsigned max_conns;       /* default 1024 */
	unsigned max_header_list; /* bytes of request headers; default 16 KiB */
	/* Memory held for requests in progress, per connection and across the server: the
	 * buffers of request messages still arriving (sized by what their prefixes announce)
	 * and, from dispatch until the handler has returned and the response has left (even when
	 * the client cancelled or went away meanwhile), each request's bytes, its headers, the
	 * call and its unsent responses, and from the start of its decoding until the handler
	 * has returned and the message is freed, what the decoded message takes beyond the
	 * request's bytes (a message of many small submessages takes tens of times its size).
	 * A stream whose request would take its connection past max_conn_pending, or the server
	 * past max_pending, ends at once with RESOURCE_EXHAUSTED and a message naming the limit,
	 * and so does a call whose decoding would (before its handler runs; the code a C-core
	 * server's resource quota gives, there by RST_STREAM ENHANCE_YOUR_CALM).  While less
	 * than 2 * max_msg (at most half of max_pending) is left under max_pending, new
	 * connections are closed as soon as they are accepted, as C-core's connection quota does
	 * under memory pressure (logged like the max_conns refusals).  Defaults:
	 * max_conn_pending 4 * max_msg, at least 1 MiB; max_pending 2 * max_conn_pending, at
	 * least 16 MiB. */
	size_t max_conn_pending;
	size_t max_pending;
	/* Connection limits (0 turns one off); refusals and timeouts are logged rate-limited,
	 * at most one line per event and peer per conn_log_interval_ms (default 10 s). */
	unsigned max_conns_per_peer;   /* connections from one IP address; default 64 */
	uint64_t handshake_timeout_ms; /* accept to TLS handshake and HTTP/2 preface; 10 s */
	uint64_t idle_timeout_ms;      /* close connections without calls this long; 5 min */
	uint64_t keepalive_ms;         /* PING after this long without input; 2 min */
	uint64_t keepalive_timeout_ms; /* close when the PING gets no answer; 20 s */
	uint64_t conn_log_interval_ms;
	unsigned workers;     /* handler threads; default 8; 0 runs handlers on the loop */
	struct h2_loop *loop; /* default h2_loop_default() */
};

void grpc_server_opts_init(struct grpc_server_opts *o);
int grpc_server_new(struct grpc_server **out, const struct grpc_server_opts *o, struct err *e);
/* Before grpc_server_start().  The service table must outlive the server. */
int grpc_server_add_service(struct grpc_server *s, const struct grpc_service *svc, struct err *e);
/* Binds every listen address and starts accepting. */
int grpc_server_start(struct grpc_server *s, struct err *e);
/* TCP port of the i-th listen address (useful with port 0), or -1. */
int grpc_server_port(const struct grpc_server *s, size_t i);
/* Health status of one service name ("" is the server as a whole). */
void grpc_server_set_serving(struct grpc_server *s, const char *service, bool serving);
/* Stops accepting, sends GOAWAY, lets in-flight calls finish for up to grace_ms, then closes
 * what is left (their handlers see grpc_call_cancelled()).  Blocks; not from the loop thread. */
void grpc_server_shutdown(struct grpc_server *s, uint64_t grace_ms);
/* Shuts down (grace 0) if still running, waits for running handlers, frees. */
void grpc_server_free(struct grpc_server *s);
/* The bytes the server holds for requests in progress, as counted against max_pending (any
 * thread; a figure of the moment), and max_pending itself. */
size_t grpc_server_pending_bytes(const struct grpc_server *s);
size_t grpc_server_pending_limit(const struct grpc_server *s);

/* ---- inside a handler (worker thread) ---- */
bool grpc_call_cancelled(const struct grpc_call *c);
/* Milliseconds left until the client's deadline (<= 0 when passed); INT64_MAX without one. */
int64_t grpc_call_deadline_ms(const struct grpc_call *c);
/* "/package.Service/Method" */
const char *grpc_call_path(const struct grpc_call *c);
/* First request metadata value for key (lower-case), or NULL. */
const char *grpc_call_metadata(const struct grpc_call *c, const char *key);
/* Adds response metadata (sent with the response headers, so before the first message or the
 * return).  Returns 0, -EINVAL for an invalid key or value, -EALREADY when headers are out. */
int grpc_call_add_metadata(struct grpc_call *c, const char *key, const char *value);
void grpc_call_set_status_msg(struct grpc_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Zeroed memory / a copy of s that lives as long as the call; NULL when out of memory. */
void *grpc_call_alloc(struct grpc_call *c, size_t n);
char *grpc_call_strdup(struct grpc_call *c, const char *s);
/* Server streaming: queues one message, blocking while too much is unsent (flow control).
 * Returns 0, -ECANCELED when the call is over (cancelled, deadline, closed), -EMSGSIZE above
 * the message limit, -ENOMEM. */
int grpc_call_send(struct grpc_call *c, const ProtobufCMessage *msg);

/* ---- for tests and the fuzzer: a connection without a socket (memory mode) ---- */
struct h2_conn;
/* Creates a connection on a server made with workers = 0 and a loop that is not started. */
int grpc_server_mem_conn(struct grpc_server *s, struct h2_conn **out, struct err *e);

#endif
