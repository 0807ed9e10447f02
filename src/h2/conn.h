/* h2/conn — one HTTP/2 connection: socket, optional TLS, and an nghttp2 session driven sans-I/O.
 *
 * The owner (grpc server or channel) creates the nghttp2 session with its own callbacks and
 * hands it over with h2_conn_set_session(); this layer moves bytes: socket/TLS → 
 * nghttp2_session_mem_recv, nghttp2_session_mem_send → socket/TLS, with EPOLLOUT back-pressure.
 * All functions run on the loop thread.  A connection with fd < 0 is in memory mode: tests and
 * the fuzzer feed bytes with h2_conn_feed() and take the output with h2_conn_take().
 * h2_conn_close() never frees at once: the connection is torn down from a posted callback after
 * the current nghttp2 call returns, and ops->on_close runs then (the last use of the owner's arg).
 */
#ifndef PILLAR_H2_CONN_H
#define PILLAR_H2_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "base/err.h"
#include "h2/loop.h"
#include "h2/net.h"
#include "h2/tls.h"

struct h2_conn;

struct h2_conn_ops {
	/* Connected (and TLS handshake done): create the session now if not yet set. */
	void (*on_open)(void *arg, struct h2_conn *c);
	/* Final: the connection is being freed.  why is "" for an orderly close. */
	void (*on_close)(void *arg, struct h2_conn *c, int err, const char *why);
};

/* fd: a connected (or connecting, see `connecting`) non-blocking socket, owned from now on
 * (closed on failure too); -1 for memory mode.  tls may be NULL (plaintext). */
/* nghttp2's allocator for every session we create: the C library's malloc/free, called from
 * h2/conn.c, so that a test wrapping those calls (test_allocfail) sees nghttp2's allocations. */
nghttp2_mem *h2_nghttp2_mem(void);

int h2_conn_new(struct h2_conn **out, struct h2_loop *l, int fd, bool connecting,
                struct h2_tls_cfg *tls, const char *verify_name, const struct h2_conn_ops *ops,
                void *arg, struct err *e);

/* The time limits of an accepted connection; 0 turns one off. */
struct h2_conn_limits {
	/* From accept to the TLS handshake done (with tls) and the 24-byte HTTP/2 client preface
	 * read; then the connection is closed with -ETIMEDOUT. */
	uint64_t handshake_ms;
	/* Keepalive of an open connection: nothing received for keepalive_ms sends a PING;
	 * nothing received for keepalive_timeout_ms after it closes with -ETIMEDOUT. */
	uint64_t keepalive_ms, keepalive_timeout_ms;
};

/* An accepted connection (fd >= 0, owned from now on).  Until its first byte arrives it holds
 * no TLS session and no buffers; ops->on_open runs once the TLS handshake is done and the client
 * preface has arrived (the owner creates its server session then, and the preface is fed to it
 * right after), so a peer that sends nothing costs the connection's own struct only. */
int h2_conn_new_server(struct h2_conn **out, struct h2_loop *l, int fd, struct h2_tls_cfg *tls,
                       const struct h2_conn_limits *lim, const struct h2_conn_ops *ops, void *arg,
                       struct err *e);
/* True once the connection has been open (an accepted one: handshake and preface done). */
bool h2_conn_was_open(const struct h2_conn *c);
void h2_conn_set_session(struct h2_conn *c, nghttp2_session *s);
nghttp2_session *h2_conn_session(const struct h2_conn *c);
/* Sends what the session has queued (and closes when the session is done). */
void h2_conn_flush(struct h2_conn *c);
void h2_conn_close(struct h2_conn *c, int err, const char *why);
bool h2_conn_closing(const struct h2_conn *c);
uint64_t h2_conn_last_activity(const struct h2_conn *c);

/* The receive windows of a client session.  manual: no WINDOW_UPDATE goes out by itself; the
 * owner gives the window back with nghttp2_session_consume_connection/_stream as it takes the
 * bytes (DATA that nghttp2 drops, and padding, it gives back itself). */
struct h2_client_window {
	uint32_t stream;     /* SETTINGS_INITIAL_WINDOW_SIZE, 1 .. 2^31-1 */
	uint32_t connection; /* the connection's window */
	bool manual;
};

/* The client session both HTTP/2 clients (grpc/client, h2/client) open on a new connection:
 * set_callbacks installs the owner's callbacks, ud is their user data; server push off, the
 * windows of w (NULL: 1 MiB stream windows, a 16 MiB connection window, automatic updates).
 * Returns 0, or -ENOMEM after closing c. */
int h2_conn_client_session(struct h2_conn *c, void (*set_callbacks)(nghttp2_session_callbacks *),
                           void *ud, const struct h2_client_window *w);

/* A request body sent from memory: a data source whose ptr is a struct h2_body. */
struct h2_body {
	const uint8_t *data;
	size_t len, off;
};
ssize_t h2_body_read(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t len, uint32_t *flags,
                     nghttp2_data_source *src, void *ud);

/* External reader: a thread that waits for this connection's input itself (poll(2) on the fd)
 * instead of leaving it to the loop, so the thread that waits for a response also reads it.
 * begin: the loop stops watching for input and the fd stays open until end, even when the
 * connection is torn down meanwhile (shutdown(2) wakes the poll).  Returns the fd to poll, or -1
 * when the connection is not open or already has a reader.  read: reads and processes what has
 * arrived, then flushes (nothing once the connection is closing).  end: input goes back to the
 * loop; a connection torn down meanwhile is freed now.  All three hold the loop. */
int h2_conn_reader_begin(struct h2_conn *c);
void h2_conn_reader_read(struct h2_conn *c);
void h2_conn_reader_end(struct h2_conn *c);

/* Memory mode.  feed: returns 0 or a negative nghttp2 error (the connection is then closing).
 * take: returns the pending output (valid until the next call) and its length. */
int h2_conn_feed(struct h2_conn *c, const uint8_t *data, size_t len);
const uint8_t *h2_conn_take(struct h2_conn *c, size_t *len);
/* Memory mode: runs the deferred teardown now (tests/fuzzer, no loop thread). */
void h2_conn_destroy(struct h2_conn *c);

#endif
