/* grpc/server_int — shared between server.c (loop side: connections, lifecycle), stream.c (loop
 * side: one stream) and call.c (handler side). Internal. */
#ifndef PILLAR_GRPC_SERVER_INT_H
#define PILLAR_GRPC_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "grpc/server.h"
#include "h2/conn.h"
#include "h2/connlog.h"
#include "h2/net.h"
#include "h2/tls.h"

struct metadata_entry {
	char *key, *value;
};

struct out_message {
	struct out_message *next;
	size_t len, off;
	uint8_t data[];
};

struct arena_block {
	struct arena_block *next;
	max_align_t data[];
};

/* The remote end of a connection: its IP address (an IPv4-mapped IPv6 address counts as the
 * IPv4 one) and the address as text for log lines. */
struct peer_address {
	uint8_t ip[16];
	uint8_t ip_len; /* 4, 16, or 0 for a unix socket */
	char text[64];
};

/* Memory held for requests in progress by one connection or by the whole server (grpc/server.h:
 * max_conn_pending, max_pending), in two counts that any thread may read: held, written by the
 * loop only (request buffers, requests, headers, calls, unsent responses), and decoded, what
 * decoded requests take beyond their own bytes, added to by the handler threads as they decode
 * and taken back when they free the message.  A connection's meter is referenced by the
 * connection and by each of its calls, so that a call may be counted after its connection has
 * gone. */
struct pending_meter {
	_Atomic size_t held, decoded;
	atomic_int refs;
};

/* The bytes m counts. */
static inline size_t meter_total(const struct pending_meter *m)
{
	return atomic_load_explicit(&m->held, memory_order_relaxed) +
	       atomic_load_explicit(&m->decoded, memory_order_relaxed);
}

/* Adds n to m->held, or takes n back; the loop only, so no read-modify-write. */
static inline void meter_held_add(struct pending_meter *m, size_t n)
{
	atomic_store_explicit(&m->held, atomic_load_explicit(&m->held, memory_order_relaxed) + n,
	                      memory_order_relaxed);
}

static inline void meter_held_sub(struct pending_meter *m, size_t n)
{
	atomic_store_explicit(&m->held, atomic_load_explicit(&m->held, memory_order_relaxed) - n,
	                      memory_order_relaxed);
}

/* One connection of the server (loop only). */
struct server_connection {
	struct grpc_server *server;
	struct h2_conn *h2;
	struct grpc_call *calls;
	unsigned n_calls;
	uint64_t idle_since; /* when n_calls last became 0 */
	struct h2_timer idle;
	struct peer_address peer;
	/* held: the sum of its calls' pending and charged, orphans' included */
	struct pending_meter *meter;
	/* Calls whose stream is gone while their handler still runs (linked by
	 * next_in_connection): they hold their request until the handler returns. */
	struct grpc_call *orphans;
	struct server_connection *next, *prev;
	/* The responses that handler threads hand to the loop leave in one write per connection
	 * per turn: their kicks queue flush_post once (grpc/stream.c). */
	struct h2_post flush_post;
	bool flush_queued; /* flush_post is queued */
	bool closed;       /* torn down while flush_post was queued: its callback frees it */
};

struct grpc_call {
	struct h2_loop *loop;
	struct grpc_server *server;
	struct server_connection
	    *connection; /* loop only; NULL once the stream or connection is gone */
	int32_t stream_id;
	struct grpc_call *next_in_connection, *prev_in_connection;
	atomic_int refs;
	atomic_bool cancelled;
	pthread_mutex_t mu;
	pthread_cond_t cv;

	/* request, built on the loop, read-only once dispatched (call_run frees req once it is
	 * decoded) */
	char *path;
	const struct grpc_service *svc;
	const struct grpc_method *method;
	bool health;
	bool bad_method, bad_ctype;
	char *encoding;
	struct metadata_entry *req_md;
	size_t n_req_md, hdr_bytes;
	int64_t timeout_ms; /* -1: none; -2: malformed */
	uint64_t deadline_at;
	struct grpc_deframer df;
	/* Memory the call holds, counted in its account's held and the server's held (loop
	 * only): pending is df's buffer while the request arrives; charged, from dispatch on, the
	 * request's bytes (the decoded message replaces them when the handler starts), headers,
	 * the call itself and the response bytes not yet taken by nghttp2 (out_charged of them). */
	size_t pending, charged, out_charged;
	struct server_connection *account; /* NULL once its connection has closed */
	/* Its connection's meter (referenced until the call is freed): decoding the request
	 * counts what it takes beyond req_len there and in the server's (grpc/call.c). */
	struct pending_meter *meter;
	bool running; /* a worker runs (or will run) the handler: the loop has not seen it return */
	uint8_t *req;
	size_t req_len;
	int n_msgs;
	bool early, dispatched;
	bool nonblocking; /* the method's handler runs on the loop (grpc_service.nonblocking) */
	bool on_loop; /* a nonblocking handler is running on the loop: its dispatcher responds */
	struct h2_timer deadline_timer;

	/* response, under mu */
	struct metadata_entry *resp_md;
	size_t n_resp_md;
	struct out_message *out_head, *out_tail;
	size_t out_bytes;
	bool finished, stream_closed, kick_pending, headers_sent, trailers_sent;
	bool handler_done; /* call_run has returned or is about to: the next kick tells the loop */
	struct h2_post kick_post; /* server_kick_fn, queued while kick_pending */
	int status;
	char *status_msg;
	char *handler_msg;
	struct arena_block *arena;
};

struct grpc_server {
	struct grpc_server_opts o;
	struct h2_loop *loop;
	struct h2_jobs *jobs;
	struct h2_tls_cfg *tls;
	const struct grpc_service **svcs;
	struct grpc_method_metrics ***metrics; /* per service, per method (grpc/metrics.h) */
	bool **nonblocking; /* per service, per method: listed in the service's nonblocking */
	size_t n_svcs;
	struct h2_addr *listen_addrs;
	int *lfds;
	int *ports;
	size_t n_listen;
	struct server_connection *conns;
	atomic_int n_conns;
	/* held: the sum of every call's pending and charged; decoded: the sum of its calls' */
	struct pending_meter pending;
	size_t pending_room; /* new connections are refused with less left under max_pending */
	int conns_peak;      /* the most connections since the heap was last trimmed (loop only) */
	struct h2_connlog connlog;
	struct h2_timer accept_pause; /* accepting resumes after running out of descriptors */
	bool started, draining, shut;
	pthread_mutex_t health_mu;
	struct health_entry *health;
};

/* server.c: the metrics of c's method (NULL: not counted). */
struct grpc_method_metrics *server_method_metrics(const struct grpc_call *c);

/* call.c */
struct grpc_call *call_new(struct grpc_server *s);
void call_ref(struct grpc_call *c);
void call_unref(struct grpc_call *c);
/* Sets the final status once (later calls are ignored) and wakes the loop. */
void call_finish(struct grpc_call *c, int code, const char *msg);
/* call_finish by the handler's job as it ends: the kick also tells the loop that the handler
 * has returned (so that an orphan's memory is given back), even after the stream is gone. */
void call_done(struct grpc_call *c, int code, const char *msg);
/* Asks the loop to push what the call has queued. */
void call_kick(struct grpc_call *c);
/* Worker job: unpack, run the handler, finish. */
void call_run(void *arg);
/* Health/Check on the loop: decodes the request and queues the answer. */
void call_health(struct grpc_call *c);
int call_queue_bytes(struct grpc_call *c, const uint8_t *msg, size_t len);

void server_health_free(struct grpc_server *s);
/* A new meter (held by its creator), or NULL when out of memory; meter_unref frees it with its
 * last reference. */
struct pending_meter *meter_new(void);
void meter_unref(struct pending_meter *m);

/* stream.c */
void server_kick_fn(void *arg);
/* Installs the callbacks of a server stream (user data: the struct server_connection). */
void server_stream_callbacks(nghttp2_session_callbacks *cb);
/* Frees a torn-down connection now, or from its queued flush_post. */
void server_connection_free(struct server_connection *connection);
/* Detaches c from its connection (its stream or connection is gone), cancelling it when it has
 * not finished, and drops the connection's reference.  A call whose handler still runs becomes
 * an orphan of the connection, still holding its memory. */
void server_call_detach(struct server_connection *connection, struct grpc_call *c);
/* The connection is closing: its orphans' memory now counts against the server only. */
void server_orphans_disown(struct server_connection *connection);

#endif
