#include "base/err.h"

#include <stdio.h>
#include <string.h>

int err_setv(struct err *e, int code, const char *fmt, va_list ap)
{
	if (e) {
		e->code = code;
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	}
	return code;
}

int err_set(struct err *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_setv(e, code, fmt, ap);
	va_end(ap);
	return code;
}

void err_prefix(struct err *e, const char *fmt, ...)
{
	char pre[ERR_MSG_MAX], old[ERR_MSG_MAX];
	size_t n;
	va_list ap;

	if (!e)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	/* "<pre>: <old>", cut at the buffer's end */
	n = strlen(pre);
	memcpy(e->msg, pre, n);
	if (n + 2 < sizeof(e->msg)) {
		e->msg[n++] = ':';
		e->msg[n++] = ' ';
		size_t m = strlen(old);
		if (m > sizeof(e->msg) - 1 - n)
			m = sizeof(e->msg) - 1 - n;
		memcpy(e->msg + n, old, m);
		n += m;
	}
	e->msg[n] = '\0';
}

void err_clear(struct err *e)
{
	if (e) {
		e->code = 0;
		e->msg[0] = '\0';
	}
}
