/* kube/status — the API server's errors: a `Status` object decoded once into a typed reason and
 * a negative errno the store layer uses (store.h's STORE_* values).
 *
 * Every failed API request answers with `{"kind":"Status",...,"reason":R,"code":N,"details":{
 * "name","group","kind","causes":[{"reason","message","field"}]}}`; a watch reports failures
 * in-stream as an ERROR event carrying the same object.  Callers match on the reason and the
 * causes, never on the message text.  Decoding never fails: a body that is not a Status (a
 * proxy's text page, truncated JSON) gives the reason its HTTP code implies and the body's first
 * line as the message.  Parsers accept any bytes (test/fuzz/fuzz_kube.c).
 */
#ifndef PILLAR_KUBE_STATUS_H
#define PILLAR_KUBE_STATUS_H

#include <stddef.h>

enum kube_reason {
	KUBE_OK = 0,
	KUBE_UNKNOWN,            /* a reason this client does not know: see .reason */
	KUBE_BAD_REQUEST,        /* 400: -EINVAL */
	KUBE_UNAUTHORIZED,       /* 401: -EPERM (credentials missing, expired or wrong) */
	KUBE_FORBIDDEN,          /* 403: -EACCES (RBAC) */
	KUBE_NOT_FOUND,          /* 404: -ENOENT */
	KUBE_METHOD_NOT_ALLOWED, /* 405: -EOPNOTSUPP */
	KUBE_NOT_ACCEPTABLE,     /* 406: -EPROTONOSUPPORT */
	KUBE_ALREADY_EXISTS,     /* 409: -EEXIST */
	KUBE_CONFLICT,           /* 409: -ESTALE (stale resourceVersion, failed precondition) */
	KUBE_GONE,               /* 410: -ERANGE */
	KUBE_EXPIRED,            /* 410: -ERANGE (compacted resourceVersion: relist) */
	KUBE_REQUEST_ENTITY_TOO_LARGE, /* 413: -EFBIG */
	KUBE_UNSUPPORTED_MEDIA_TYPE,   /* 415: -EPROTONOSUPPORT */
	KUBE_INVALID,                  /* 422: -EINVAL (see the causes) */
	KUBE_TOO_MANY_REQUESTS,        /* 429: -EBUSY (retry after .retry_after seconds) */
	KUBE_INTERNAL_ERROR,           /* 500: -EIO */
	KUBE_SERVICE_UNAVAILABLE,      /* 503: -EAGAIN */
	KUBE_SERVER_TIMEOUT,           /* 500/504: -ETIMEDOUT */
	KUBE_TIMEOUT,                  /* 504: -ETIMEDOUT */
};

#define KUBE_CAUSES_MAX 8

struct kube_cause {
	char reason[64]; /* FieldValueInvalid, FieldValueRequired, FieldManagerConflict, ... */
	char field[256]; /* spec.nodeRef.port, "<nil>" for the root */
	char message[512];
};

struct kube_status {
	int code;              /* HTTP status (the Status's code when it has one) */
	enum kube_reason kind; /* typed reason */
	char reason[64];       /* the reason as sent ("" when none) */
	char message[1024];
	char name[254], group[254], resource[64]; /* details: name, group, kind (plural or Kind) */
	int retry_after;                          /* details.retryAfterSeconds, 0 when absent */
	size_t n_causes;                          /* causes beyond KUBE_CAUSES_MAX are dropped */
	struct kube_cause causes[KUBE_CAUSES_MAX];
};

/* Fills st from an error response (http_status >= 300) and returns kube_status_errno(st).
 * (The Status codec, with kube_status_from_json: kube/codec.h.) */
int kube_status_decode(struct kube_status *st, int http_status, const char *body, size_t len);
/* The negative errno of st's reason (0 for KUBE_OK). */
int kube_status_errno(const struct kube_status *st);
/* Resets st to "no error". */
void kube_status_clear(struct kube_status *st);
/* A local failure (no answer from the server): code 0, reason "", kind KUBE_UNKNOWN unless a
 * specific one is given. */
void kube_status_local(struct kube_status *st, enum kube_reason kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The reason's name as the API spells it ("NotFound"), or "Unknown". */
const char *kube_reason_name(enum kube_reason r);
/* The reason an HTTP status implies (by class for codes without one of their own: 5xx
 * InternalError, 4xx BadRequest; 2xx KUBE_OK; others KUBE_UNKNOWN). */
enum kube_reason kube_reason_from_code(int code);
/* The reason named (the API's spelling), KUBE_UNKNOWN for a name this client does not know. */
enum kube_reason kube_reason_from_name(const char *name);

#endif
