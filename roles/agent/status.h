/* status — gRPC status codes and messages returned by the agent's request handlers.
 *
 * Handlers return a gRPC code (enum grpc_code of grpc/status.h) and fill a struct agent_status with
 * a message a person can act on.  The mapping from the layers' negative errno values to codes
 * happens here, once (nvmet.md §9 plus the agent's own conventions, see agent_status_from_errno).
 */
#ifndef PILLAR_ROLES_AGENT_STATUS_H
#define PILLAR_ROLES_AGENT_STATUS_H

#include "base/err.h"
#include "grpc/status.h"

struct agent_status {
	int code;
	char msg[ERR_MSG_MAX];
};

/* Sets code and message (st may be NULL); returns code. */
int agent_status_set(struct agent_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Code for a layer's negative errno:
 *   -ESTALE (stale token), -EBUSY, -ENOENT, -EACCES, -EPERM, -EOPNOTSUPP → FAILED_PRECONDITION;
 *   -EINVAL, -ENAMETOOLONG → INVALID_ARGUMENT;  -EADDRINUSE, -EADDRNOTAVAIL, -ENODEV, -ENXIO,
 *   -EAGAIN, -ETIMEDOUT → UNAVAILABLE;  -ENOSPC, -ENOMEM, -EDQUOT → RESOURCE_EXHAUSTED;
 *   -EEXIST → ALREADY_EXISTS;  -ERANGE → OUT_OF_RANGE;  anything else (-EIO, -EBADMSG) → INTERNAL. */
int agent_status_from_errno(int err);
/* Sets st from an errno and the layer's message; returns the code. */
int agent_status_from_err(struct agent_status *st, const struct err *e);

#endif
