/* h2/tls — TLS 1.2 over a non-blocking socket with mbedtls (ECDHE + AEAD suites, ALPN "h2").
 *
 * A configuration holds certificates, keys and a random generator; it is shared by every session
 * it creates and used from one thread (the event loop).  A server configuration with a CA
 * requires and verifies a client certificate (mTLS).  A client configuration always verifies the
 * server against its CA; the name checked is a DNS name from the certificate's SAN/CN, or, for an
 * IP literal, an iPAddress SAN.  Constructors return 0 or a negative errno with the reason in e.
 */
#ifndef PILLAR_H2_TLS_H
#define PILLAR_H2_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

struct h2_tls_cfg;
struct h2_tls;

int h2_tls_server_cfg_new(struct h2_tls_cfg **out, const char *cert, const char *key,
                          const char *client_ca, struct err *e);
/* cert/key may be NULL (no client certificate). */
int h2_tls_client_cfg_new(struct h2_tls_cfg **out, const char *ca, const char *cert,
                          const char *key, struct err *e);
/* The same from PEM texts (NUL-terminated) instead of file names, e.g. from a kubeconfig. */
int h2_tls_client_cfg_new_pem(struct h2_tls_cfg **out, const char *ca, const char *cert,
                              const char *key, struct err *e);
/* Sessions already set up keep the configuration they started with (nothing is freed under
 * them).  NULL is a no-op. */
void h2_tls_cfg_free(struct h2_tls_cfg *c);
/* Rotation (deploy.md §9.5): a configuration made from file names re-reads its certificate,
 * key and CA when one of the files changed (inode, size or modification time), checked before
 * each new session at most every H2_TLS_RELOAD_MS; established sessions keep theirs.  A set of
 * files that does not load is logged and the current one kept.  Tests shorten the interval:
 * h2_tls_cfg_set_reload_interval, or for the running roles the environment variable
 * PILLAR_TLS_RELOAD_MS (milliseconds), read when a configuration is made. */
#define H2_TLS_RELOAD_MS 60000
void h2_tls_cfg_set_reload_interval(struct h2_tls_cfg *c, uint64_t ms);

/* verify_name: for client sessions the server name or IP literal to verify (required). */
int h2_tls_new(struct h2_tls **out, struct h2_tls_cfg *c, int fd, const char *verify_name,
               struct err *e);
void h2_tls_free(struct h2_tls *t);

#define H2_TLS_WANT_READ  1
#define H2_TLS_WANT_WRITE 2
/* 0 when done, H2_TLS_WANT_READ/WRITE to wait, or a negative errno (reason in e; a refused
 * certificate gives -EACCES, a peer without ALPN h2 -EPROTO). */
int h2_tls_handshake(struct h2_tls *t, struct err *e);
/* Bytes read (> 0), 0 at the peer's close, -EAGAIN to wait for input, or a negative errno. */
ssize_t h2_tls_read(struct h2_tls *t, void *buf, size_t len);
/* Bytes written (> 0), -EAGAIN to wait for writability (call again with the same bytes). */
ssize_t h2_tls_write(struct h2_tls *t, const void *buf, size_t len);
void h2_tls_close_notify(struct h2_tls *t);

#endif
