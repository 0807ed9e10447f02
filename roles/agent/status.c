#include "agent/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int agent_status_set(struct agent_status *st, int code, const char *fmt, ...)
{
	if (st) {
		va_list ap;
		va_start(ap, fmt);
		st->code = code;
		vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

int agent_status_from_errno(int err)
{
	switch (err) {
	case 0: return GRPC_OK;
	case -ESTALE:
	case -EBUSY:
	case -ENOENT:
	case -EACCES:
	case -EPERM:
	case -EOPNOTSUPP: return GRPC_FAILED_PRECONDITION;
	case -EINVAL:
	case -ENAMETOOLONG: return GRPC_INVALID_ARGUMENT;
	case -EADDRINUSE:
	case -EADDRNOTAVAIL:
	case -ENODEV:
	case -ENXIO:
	case -EAGAIN:
	case -ETIMEDOUT: return GRPC_UNAVAILABLE;
	case -ENOSPC:
	case -ENOMEM:
	case -EDQUOT: return GRPC_RESOURCE_EXHAUSTED;
	case -EEXIST: return GRPC_ALREADY_EXISTS;
	case -ERANGE: return GRPC_OUT_OF_RANGE;
	default: return GRPC_INTERNAL;
	}
}

int agent_status_from_err(struct agent_status *st, const struct err *e)
{
	int code = agent_status_from_errno(e->code);
	return agent_status_set(st, code, "%s", e->msg[0] ? e->msg : "internal error");
}
