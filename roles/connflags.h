/* connflags — the connection limits every serving role's gRPC server takes (docs/cli.md):
 * --handshake-timeout, --idle-timeout, --keepalive-time, --keepalive-timeout,
 * --max-connections and --max-connections-per-peer, with grpc/server.h's defaults.
 *
 * Use: `struct conn_flags cf = CONN_FLAGS_INIT;`, append CONN_FLAG_DEFS(&cf) to the role's
 * flag_def table, then conn_flags_opts() for the role's grpc_server_opts after parsing.
 */
#ifndef PILLAR_ROLES_CONNFLAGS_H
#define PILLAR_ROLES_CONNFLAGS_H

#include <stdint.h>

#include "base/err.h"
#include "base/flags.h"
#include "grpc/server.h"

struct conn_flags {
	int64_t handshake_ms, idle_ms, keepalive_ms, keepalive_timeout_ms; /* 0: off */
	int64_t max_conns, max_per_peer;                                   /* per_peer 0: off */
};

/* clang-format off */
#define CONN_FLAGS_INIT {10000, 300000, 120000, 20000, 1024, 64}

#define CONN_FLAG_DEFS(f)                                                                         \
	{"handshake-timeout", FLAG_DURATION, &(f)->handshake_ms,                                  \
	 "close a connection that has not finished its TLS handshake and HTTP/2 preface by then " \
	 "(0: never)", false},                                                                     \
	{"idle-timeout", FLAG_DURATION, &(f)->idle_ms,                                            \
	 "close a connection that has had no call for this long (0: never)", false},              \
	{"keepalive-time", FLAG_DURATION, &(f)->keepalive_ms,                                     \
	 "send an HTTP/2 PING on a connection that has been quiet this long (0: never)", false},  \
	{"keepalive-timeout", FLAG_DURATION, &(f)->keepalive_timeout_ms,                          \
	 "close the connection when nothing answers that PING within this time", false},          \
	{"max-connections", FLAG_INT, &(f)->max_conns,                                            \
	 "connections served at once; more are refused", false},                                 \
	{"max-connections-per-peer", FLAG_INT, &(f)->max_per_peer,                                \
	 "connections served at once from one IP address (0: no limit below --max-connections)", \
	 false}
/* clang-format on */

/* Checks the values, then initialises o (grpc_server_opts_init) with them.  0, or -EINVAL with a usage message in e
 * ("--keepalive-timeout must be positive when --keepalive-time is set"). */
int conn_flags_opts(const struct conn_flags *f, struct grpc_server_opts *o, struct err *e);

#endif
