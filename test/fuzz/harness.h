/* test/fuzz/harness — what the libFuzzer targets share.
 *
 * fuzz_rpc_*: a gRPC server in memory mode (grpc_server_mem_conn: no socket, handlers inline)
 * with the services a target registers; fuzz_rpc_call() sends one request on a fresh connection
 * exactly as a gRPC client frames it (client preface, SETTINGS, HEADERS with HPACK literals,
 * DATA with the 5-byte message prefix) and runs it to completion, so the bytes the fuzzer
 * chooses reach protobuf-c's unpacker and the service's handler.  fuzz_rpc_pick() maps a byte to
 * one of the registered methods.
 *
 * fuzz_dir_*: a scratch directory under $TMPDIR (default /tmp), made once per process, that a
 * target may wipe and rebuild (fuzz_dir_reset) so state left by earlier inputs does not grow.
 * The roles' log goes to /dev/null.  Setup failures abort(): a target that cannot start must not report "no crashes".
 */
#ifndef PILLAR_TEST_FUZZ_HARNESS_H
#define PILLAR_TEST_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "grpc/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Creates the server (once) and registers svc (outlives the process). */
void fuzz_rpc_add(const struct grpc_service *svc);
/* "/<service>/<method>" of registered method number b % count, in buf. */
const char *fuzz_rpc_pick(uint8_t b, char *buf, size_t cap);
/* One request with body (at most 60000 bytes are sent) to path; the response is discarded. */
void fuzz_rpc_call(const char *path, const uint8_t *body, size_t len);

/* fuzz_peer_*: a server that answers every connection with bytes the fuzzer chose: it accepts
 * on 127.0.0.1 (port in *port), writes an empty HTTP/2 SETTINGS frame followed by the bytes
 * given to fuzz_peer_answer(), closes its writing side, and reads (discarding) what the client
 * sends until the client closes (a client that retries meets the same answer again).
 * fuzz_peer_wait() returns once no connection is open or waiting; call it after closing the
 * client.  For the clients' response paths (gRPC channel, Kubernetes client). */
void fuzz_peer_start(int *port);
/* Before the first fuzz_peer_answer(): the peer speaks TLS (ALPN h2) with a throwaway
 * self-signed certificate for IP 127.0.0.1 (made once with openssl); returns its PEM text, the
 * CA a client must trust. */
const char *fuzz_peer_tls(void);
void fuzz_peer_answer(const uint8_t *data, size_t len);
void fuzz_peer_wait(void);

/* The scratch directory (created on first use). */
const char *fuzz_dir(void);
/* Empties the scratch directory. */
void fuzz_dir_reset(void);
/* Writes len bytes to fuzz_dir()/rel (parents created); aborts on failure. */
void fuzz_write(const char *rel, const void *data, size_t len);

#endif
