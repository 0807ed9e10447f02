/* h2/net — gRPC listen/dial addresses and sockets.
 *
 * Accepted forms: `unix:///abs/path` (also `unix:/abs/path`), `tcp://host:port`, `host:port`,
 * `:port` (all addresses, IPv6 dual-stack), `[v6addr]:port`.  Host names are resolved with
 * getaddrinfo (blocking: call at set-up time, not on the loop).  Every socket is non-blocking and
 * close-on-exec.  Functions return 0 (or an fd) or a negative errno with the reason in e.
 */
#ifndef PILLAR_H2_NET_H
#define PILLAR_H2_NET_H

#include <stdbool.h>
#include <sys/socket.h>

#include "base/err.h"

struct h2_addr {
	int family; /* AF_UNIX, AF_INET, AF_INET6 */
	struct sockaddr_storage sa;
	socklen_t len;
	char host[256]; /* host as written (":authority" and TLS name), "localhost" for unix */
	char text[300]; /* the address as given, for messages */
};

int h2_addr_parse(const char *target, bool listen, struct h2_addr *a, struct err *e);
/* Binds and listens.  A unix socket path that holds a stale socket (nobody accepting) is
 * replaced; a live one gives -EADDRINUSE; a non-socket file is never removed (-EEXIST).
 * unix_mode (e.g. 0660) is applied to the socket file. */
int h2_listen(const struct h2_addr *a, unsigned unix_mode, struct err *e);
/* Starts a non-blocking connect: returns the fd; *in_progress tells whether to wait for
 * writability and then check h2_connect_result(). */
int h2_connect_start(const struct h2_addr *a, bool *in_progress, struct err *e);
/* 0 or the connect error of fd (negative errno). */
int h2_connect_result(int fd);

#endif
