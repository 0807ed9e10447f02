#include "kube/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	enum kube_reason kind;
	const char *name;
	int code; /* the HTTP status that implies it when no reason came */
	int err;
} reasons[] = {
    {KUBE_OK, "", 200, 0},
    {KUBE_UNKNOWN, "Unknown", 0, -EIO},
    {KUBE_BAD_REQUEST, "BadRequest", 400, -EINVAL},
    {KUBE_UNAUTHORIZED, "Unauthorized", 401, -EPERM},
    {KUBE_FORBIDDEN, "Forbidden", 403, -EACCES},
    {KUBE_NOT_FOUND, "NotFound", 404, -ENOENT},
    {KUBE_METHOD_NOT_ALLOWED, "MethodNotAllowed", 405, -EOPNOTSUPP},
    {KUBE_NOT_ACCEPTABLE, "NotAcceptable", 406, -EPROTONOSUPPORT},
    {KUBE_ALREADY_EXISTS, "AlreadyExists", 0, -EEXIST},
    {KUBE_CONFLICT, "Conflict", 409, -ESTALE},
    {KUBE_GONE, "Gone", 0, -ERANGE},
    {KUBE_EXPIRED, "Expired", 410, -ERANGE},
    {KUBE_REQUEST_ENTITY_TOO_LARGE, "RequestEntityTooLarge", 413, -EFBIG},
    {KUBE_UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", 415, -EPROTONOSUPPORT},
    {KUBE_INVALID, "Invalid", 422, -EINVAL},
    {KUBE_TOO_MANY_REQUESTS, "TooManyRequests", 429, -EBUSY},
    {KUBE_INTERNAL_ERROR, "InternalError", 500, -EIO},
    {KUBE_SERVICE_UNAVAILABLE, "ServiceUnavailable", 503, -EAGAIN},
    {KUBE_SERVER_TIMEOUT, "ServerTimeout", 0, -ETIMEDOUT},
    {KUBE_TIMEOUT, "Timeout", 504, -ETIMEDOUT},
};
#define N_REASONS (sizeof(reasons) / sizeof(reasons[0]))

const char *kube_reason_name(enum kube_reason r)
{
	for (size_t i = 0; i < N_REASONS; i++)
		if (reasons[i].kind == r)
			return reasons[i].name;
	return "Unknown";
}

int kube_status_errno(const struct kube_status *st)
{
	for (size_t i = 0; i < N_REASONS; i++)
		if (reasons[i].kind == st->kind)
			return reasons[i].err;
	return -EIO;
}

void kube_status_clear(struct kube_status *st)
{
	memset(st, 0, sizeof(*st));
}

void kube_status_local(struct kube_status *st, enum kube_reason kind, const char *fmt, ...)
{
	va_list ap;

	kube_status_clear(st);
	st->kind = kind == KUBE_OK ? KUBE_UNKNOWN : kind;
	va_start(ap, fmt);
	vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
}

enum kube_reason kube_reason_from_code(int code)
{
	for (size_t i = 0; i < N_REASONS; i++)
		if (reasons[i].code && reasons[i].code == code)
			return reasons[i].kind;
	if (code >= 200 && code < 300)
		return KUBE_OK;
	if (code >= 500)
		return KUBE_INTERNAL_ERROR;
	if (code >= 400)
		return KUBE_BAD_REQUEST;
	return KUBE_UNKNOWN;
}

enum kube_reason kube_reason_from_name(const char *name)
{
	for (size_t i = 1; i < N_REASONS; i++)
		if (strcmp(reasons[i].name, name) == 0)
			return reasons[i].kind;
	return KUBE_UNKNOWN;
}
