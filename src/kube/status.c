#include "kube/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"

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

/* The reason an HTTP status implies (5xx and other unknown codes: by class). */
static enum kube_reason from_code(int code)
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

static void copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

int kube_status_from_json(struct kube_status *st, int http_status, const cJSON *obj)
{
	const cJSON *details = cJSON_GetObjectItemCaseSensitive(obj, "details");
	const cJSON *causes = cJSON_GetObjectItemCaseSensitive(details, "causes");
	const cJSON *list = cJSON_IsArray(causes) ? causes : NULL;
	const cJSON *c;
	int64_t v;

	kube_status_clear(st);
	st->code = http_status;
	if (json_get_int64(obj, "code", &v) == 0 && v > 0 && v < 1000)
		st->code = (int)v;
	copy(st->reason, sizeof(st->reason), json_get_str(obj, "reason"));
	copy(st->message, sizeof(st->message), json_get_str(obj, "message"));
	copy(st->name, sizeof(st->name), json_get_str(details, "name"));
	copy(st->group, sizeof(st->group), json_get_str(details, "group"));
	copy(st->resource, sizeof(st->resource), json_get_str(details, "kind"));
	if (json_get_int64(details, "retryAfterSeconds", &v) == 0 && v > 0 && v < 86400)
		st->retry_after = (int)v;
	cJSON_ArrayForEach(c, list)
	{
		struct kube_cause *k;
		if (st->n_causes == KUBE_CAUSES_MAX || !cJSON_IsObject(c))
			continue;
		k = &st->causes[st->n_causes++];
		copy(k->reason, sizeof(k->reason), json_get_str(c, "reason"));
		copy(k->field, sizeof(k->field), json_get_str(c, "field"));
		copy(k->message, sizeof(k->message), json_get_str(c, "message"));
	}
	st->kind = from_code(st->code);
	if (st->reason[0]) {
		st->kind = KUBE_UNKNOWN;
		for (size_t i = 1; i < N_REASONS; i++)
			if (strcmp(reasons[i].name, st->reason) == 0)
				st->kind = reasons[i].kind;
		if (st->kind == KUBE_UNKNOWN && st->code >= 300)
			st->kind = from_code(st->code); /* a new reason: keep the code's meaning */
	} else if (st->kind == KUBE_OK && json_get_str(obj, "status") &&
	           strcmp(json_get_str(obj, "status"), "Failure") == 0) {
		st->kind = KUBE_UNKNOWN;
	}
	return kube_status_errno(st);
}

int kube_status_decode(struct kube_status *st, int http_status, const char *body, size_t len)
{
	cJSON *obj = NULL;
	const char *kind;
	size_t n;
	int rc;

	if (body && len && json_parse_strict(body, len, &obj, NULL) == 0 &&
	    (kind = json_get_str(obj, "kind")) && strcmp(kind, "Status") == 0) {
		rc = kube_status_from_json(st, http_status, obj);
		cJSON_Delete(obj);
		return rc;
	}
	cJSON_Delete(obj);
	kube_status_clear(st);
	st->code = http_status;
	st->kind = from_code(http_status);
	for (n = 0; body && n < len && body[n] != '\n' && n < sizeof(st->message) - 1; n++)
		st->message[n] = body[n] >= 0x20 && body[n] < 0x7f ? body[n] : '?';
	st->message[n] = '\0';
	if (!n)
		snprintf(st->message, sizeof(st->message), "HTTP status %d", http_status);
	return kube_status_errno(st);
}
