/* grpc/client — a gRPC channel: one long-lived HTTP/2 connection to a unix or TCP target,
 * shared by every call, with optional TLS/mTLS, reconnection with backoff and blocking calls.
 *
 * grpc_channel_call() may be called from any thread that does not hold the event loop (handler
 * jobs included); it blocks until the response, the deadline or a connection failure, and always
 * fills *st.  The request is sent from the calling thread, and a call alone on its connection
 * reads its response there too.  The connection is made
 * on the first call; after a failed connection attempt, calls fail fast with UNAVAILABLE until
 * the backoff (by default 200 ms doubling to 10 s) has passed, then the next call reconnects.  A GOAWAY
 * from the server lets its in-flight calls finish while new calls open a new connection.
 * Constructors return 0 or a negative errno with the reason in e.
 */
#ifndef PILLAR_GRPC_CLIENT_H
#define PILLAR_GRPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "base/err.h"
#include "grpc/status.h"
#include "h2/loop.h"

struct grpc_channel;

/* Request metadata: an array ended by an entry with key NULL.  Keys are lower-case; values of
 * keys ending in "-bin" must already be base64. */
struct grpc_md {
	const char *key, *value;
};

struct grpc_channel_opts {
	const char *tls_ca;             /* set: TLS, verify the server against this CA */
	const char *tls_cert, *tls_key; /* optional client certificate (mTLS) */
	const char *server_name;        /* name to verify and send as :authority; default: host */
	size_t max_msg;                 /* receive limit; default 4 MiB */
	/* the reconnect backoff after the first failed attempt, doubled after each further one up
	 * to 10 s or to itself when larger (gRPC core's initial_reconnect_backoff_ms); 0: 200 ms */
	uint64_t initial_backoff_ms;
	struct h2_loop *loop; /* default h2_loop_default() */
};

void grpc_channel_opts_init(struct grpc_channel_opts *o);
/* target: an address in h2/net.h form ("unix:///run/x.sock", "10.0.0.5:9500", "[::1]:9500"). */
int grpc_channel_new(struct grpc_channel **out, const char *target,
                     const struct grpc_channel_opts *o, struct err *e);
/* Forgets the reconnect backoff (like gRPC core's grpc_channel_reset_connect_backoff): the next
 * call connects at once instead of failing fast.  For a caller that knows the peer is back. */
void grpc_channel_reset_backoff(struct grpc_channel *ch);
/* An id of the connection new calls use while it is established (a new connection gets a new
 * id), 0 when there is none: a caller sees a dropped connection without sending anything.  One
 * atomic load: it never waits for the channel's loop. */
uint64_t grpc_channel_conn_id(struct grpc_channel *ch);
/* Closes the connection (calls still running end with UNAVAILABLE) and frees. */
void grpc_channel_free(struct grpc_channel *ch);

/* Calls path ("/pkg.Service/Method") with req and waits.  timeout_ms <= 0 means no deadline.
 * md may be NULL.  On OK, *resp is a message of resp_desc to free with
 * protobuf_c_message_free_unpacked(*resp, NULL); otherwise *resp is NULL.  Returns st->code. */
int grpc_channel_call(struct grpc_channel *ch, const char *path, const ProtobufCMessage *req,
                      const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                      int64_t timeout_ms, const struct grpc_md *md, struct grpc_status *st);

#endif
