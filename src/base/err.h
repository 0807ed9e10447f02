/* err — a failure explained for a person.
 *
 * Library functions in every layer return 0 or a negative errno.  When a person will read the
 * reason (a log line, a gRPC status message), the function also fills an optional `struct err`
 * out-parameter.  Passing NULL for it is always allowed.  The mapping to gRPC/CSI status codes
 * happens once, at a role's edge, from `code` plus the role's own knowledge.
 */
#ifndef PILLAR_BASE_ERR_H
#define PILLAR_BASE_ERR_H

#include <stdarg.h>

#define ERR_MSG_MAX 512

struct err {
	int code;              /* negative errno, 0 when clear */
	char msg[ERR_MSG_MAX]; /* one line, no trailing newline */
};

/* Records code and a printf-formatted message in e (if not NULL) and returns code, so that a
 * failing path can `return err_set(e, -EINVAL, "...")`. */
int err_set(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int err_setv(struct err *e, int code, const char *fmt, va_list ap);

/* Prepends "<prefix>: " to the message already in e (no-op for NULL). */
void err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void err_clear(struct err *e);

#endif
