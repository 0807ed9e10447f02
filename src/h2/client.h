/* h2/client — a generic HTTP/2 client: requests and long-lived response streams to one server,
 * all on one connection (TLS with ALPN h2, or plaintext), the way client-go keeps every request
 * and watch of a process on one connection.  The gRPC channel (grpc/client.h) is separate.
 *
 * h2_client_open() queues a request and returns its stream at once; h2_stream_head() waits for
 * the response headers and h2_stream_read() for body bytes, so a watch is read as it arrives.
 * These may be called from any thread that does not hold the event loop; one thread at a time
 * uses a stream, except h2_stream_cancel(), which any thread may call (a blocked reader then
 * returns -ECANCELED).  The connection is made on the first request; after a failed attempt,
 * requests fail fast until a backoff (200 ms doubling to 10 s) has passed.  A GOAWAY lets the
 * streams in flight finish while new requests open a new connection.  A stream buffers at most
 * max_buffer bytes that its reader has not taken: that is the stream's HTTP/2 window, given back
 * as the reader takes bytes, so a server waits for a slow reader (one ignoring flow control gets
 * the stream reset and reads give -EMSGSIZE); a reader that stops holds up its own stream only.
 * Functions return 0 (or a count) or a negative errno with the reason in e.
 */
#ifndef PILLAR_H2_CLIENT_H
#define PILLAR_H2_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "h2/loop.h"
#include "h2/tls.h"

struct h2_client;
struct h2_stream;

struct h2_client_opts {
	struct h2_tls_cfg *tls;  /* NULL: plaintext; borrowed, must outlive the client */
	const char *server_name; /* name to verify and send as :authority; default: the host */
	size_t max_buffer;       /* per stream; default 1 MiB, at most 2^31-1 */
	struct h2_loop *loop;    /* default h2_loop_default() */
};

struct h2_header {
	const char *name, *value; /* names in lower case */
};

struct h2_request {
	const char *method, *path; /* path with its query, already percent-encoded */
	const struct h2_header *headers;
	size_t n_headers;
	const void *body; /* copied; NULL: no body */
	size_t body_len;
};

/* target: an address in h2/net.h form ("10.0.0.1:6443", "[::1]:443", "host:port"). */
int h2_client_new(struct h2_client **out, const char *target, const struct h2_client_opts *o,
                  struct err *e);
/* Closes the connection (open streams end with -ECONNABORTED) and frees.  Every stream must have
 * been freed before.  NULL is a no-op. */
void h2_client_free(struct h2_client *cl);
/* Connections made so far (a reconnect after a failure or a GOAWAY adds one). */
unsigned h2_client_connections(const struct h2_client *cl);

/* Queues the request (headers may exceed 60 entries only at the cost of -E2BIG). */
int h2_client_open(struct h2_client *cl, const struct h2_request *rq, struct h2_stream **out,
                   struct err *e);
/* Waits for the response headers: returns the HTTP status, or -ETIMEDOUT, -ECANCELED, or the
 * failure of the connection or stream (-ECONNRESET, -ECONNREFUSED, ...).  timeout_ms <= 0: none. */
int h2_stream_head(struct h2_stream *s, int64_t timeout_ms, struct err *e);
/* The first response header of that (lower-case) name, or NULL; valid until the stream is freed. */
const char *h2_stream_header(struct h2_stream *s, const char *name);
/* Body bytes: > 0 bytes read, 0 at the end of the body, or a negative errno as for head. */
ssize_t h2_stream_read(struct h2_stream *s, void *buf, size_t len, int64_t timeout_ms,
                       struct err *e);
/* The whole (rest of the) body, NUL-terminated, malloc'd into *body; 0 or a negative errno. */
int h2_stream_read_all(struct h2_stream *s, char **body, size_t *len, int64_t timeout_ms,
                       struct err *e);
/* Ends the stream early (RST_STREAM CANCEL); callable from any thread, also while another thread
 * reads it. */
void h2_stream_cancel(struct h2_stream *s);
/* Cancels the stream if it is still open and frees the caller's side.  NULL is a no-op. */
void h2_stream_free(struct h2_stream *s);

#endif
