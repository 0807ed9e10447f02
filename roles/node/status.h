/* node/status — gRPC status codes as plain ints and the status a node handler returns.
 *
 * The values are gRPC's (grpc/status.h); the transport maps them onto the wire unchanged.  A
 * handler returns the code and fills `struct node_status` with the person-readable message
 * (the CSI error message clients and `kubectl describe` show).
 */
#ifndef PILLAR_ROLES_NODE_STATUS_H
#define PILLAR_ROLES_NODE_STATUS_H

#define NODE_OK                  0
#define NODE_INVALID_ARGUMENT    3
#define NODE_DEADLINE_EXCEEDED   4
#define NODE_NOT_FOUND           5
#define NODE_ALREADY_EXISTS      6
#define NODE_FAILED_PRECONDITION 9
#define NODE_ABORTED             10
#define NODE_OUT_OF_RANGE        11
#define NODE_UNIMPLEMENTED       12
#define NODE_INTERNAL            13
#define NODE_UNAVAILABLE         14

struct node_status {
	int code;
	char msg[1024];
};

/* Sets st (may be NULL) and returns code. */
int node_status_set(struct node_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
