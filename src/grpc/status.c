#include "grpc/status.h"

#include <stdarg.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *grpc_code_name(int code)
{
	if (code < 0 || code > GRPC_UNAUTHENTICATED)
		return "UNKNOWN_CODE";
	return code_names[code];
}

size_t grpc_msg_encode(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	if (cap == 0)
		return 0;
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x20 && c <= 0x7e && c != '%') {
			if (n + 1 >= cap)
				break;
			out[n++] = (char)c;
		} else {
			if (n + 3 >= cap)
				break;
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
	return n;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t grpc_msg_decode(const char *s, size_t len, char *out, size_t cap)
{
	size_t i = 0, n = 0;

	if (cap == 0)
		return 0;
	while (i < len && n + 1 < cap) {
		int hi, lo;
		if (s[i] == '%' && i + 2 < len && (hi = hexval(s[i + 1])) >= 0 &&
		    (lo = hexval(s[i + 2])) >= 0) {
			out[n++] = (char)(hi << 4 | lo);
			i += 3;
		} else {
			out[n++] = s[i++];
		}
	}
	out[n] = '\0';
	return n;
}

int grpc_timeout_parse(const char *s, size_t len, int64_t *ms)
{
	int64_t v = 0;
	size_t i;

	if (len < 2 || len > 9)
		return -EINVAL;
	for (i = 0; i + 1 < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	switch (s[len - 1]) {
	case 'H': *ms = v * 3600000; break;
	case 'M': *ms = v * 60000; break;
	case 'S': *ms = v * 1000; break;
	case 'm': *ms = v; break;
	case 'u': *ms = (v + 999) / 1000; break;
	case 'n': *ms = (v + 999999) / 1000000; break;
	default: return -EINVAL;
	}
	return 0;
}

size_t grpc_timeout_format(int64_t ms, char *out, size_t cap)
{
	int n;

	if (ms < 1)
		ms = 1;
	if (ms <= 99999999)
		n = snprintf(out, cap, "%lldm", (long long)ms);
	else if (ms / 1000 <= 99999999)
		n = snprintf(out, cap, "%lldS", (long long)((ms + 999) / 1000));
	else if (ms / 60000 <= 99999999)
		n = snprintf(out, cap, "%lldM", (long long)((ms + 59999) / 60000));
	else
		n = snprintf(out, cap, "99999999H");
	return n < 0 ? 0 : (size_t)n;
}

bool grpc_md_key_valid(const char *key)
{
	const char *p;

	if (!key || !*key || key[0] == ':' || strncmp(key, "grpc-", 5) == 0)
		return false;
	for (p = key; *p; p++) {
		char c = *p;
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_' || c == '.' ||
		      c == '-'))
			return false;
	}
	return true;
}

bool grpc_md_value_valid(const char *key, const char *value, size_t len)
{
	size_t kl = key ? strlen(key) : 0, i;

	if (kl > 4 && strcmp(key + kl - 4, "-bin") == 0)
		return true;
	for (i = 0; i < len; i++)
		if ((unsigned char)value[i] < 0x20 || (unsigned char)value[i] > 0x7e)
			return false;
	return true;
}

int grpc_code_from_http(int http_status)
{
	switch (http_status) {
	case 400: return GRPC_INTERNAL;
	case 401: return GRPC_UNAUTHENTICATED;
	case 403: return GRPC_PERMISSION_DENIED;
	case 404: return GRPC_UNIMPLEMENTED;
	case 429:
	case 502:
	case 503:
	case 504: return GRPC_UNAVAILABLE;
	default: return GRPC_UNKNOWN;
	}
}

int grpc_code_from_h2_error(uint32_t h2_error)
{
	switch (h2_error) {
	case 0x7: /* REFUSED_STREAM */ return GRPC_UNAVAILABLE;
	case 0x8: /* CANCEL */ return GRPC_CANCELLED;
	case 0xb: /* ENHANCE_YOUR_CALM */ return GRPC_RESOURCE_EXHAUSTED;
	case 0xc: /* INADEQUATE_SECURITY */ return GRPC_PERMISSION_DENIED;
	default: return GRPC_INTERNAL;
	}
}

void grpc_prefix_write(uint8_t out[GRPC_PREFIX_LEN], bool compressed, uint32_t len)
{
	out[0] = compressed ? 1 : 0;
	out[1] = (uint8_t)(len >> 24);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 8);
	out[4] = (uint8_t)len;
}

void grpc_deframer_init(struct grpc_deframer *d, size_t max)
{
	memset(d, 0, sizeof(*d));
	d->max = max;
}

int grpc_deframer_feed(struct grpc_deframer *d, const uint8_t *data, size_t len, grpc_msg_fn on_msg,
                       void *arg)
{
	while (len > 0 || (d->in_body && d->len == d->want)) {
		if (!d->in_body) {
			size_t take = GRPC_PREFIX_LEN - d->hdr_len;
			if (take > len)
				take = len;
			memcpy(d->hdr + d->hdr_len, data, take);
			d->hdr_len += take;
			data += take;
			len -= take;
			if (d->hdr_len < GRPC_PREFIX_LEN)
				return 0;
			d->last_len = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
			              (uint32_t)d->hdr[3] << 8 | d->hdr[4];
			if (d->hdr[0] != 0)
				return -EPROTO;
			if (d->last_len > d->max)
				return -EMSGSIZE;
			d->want = d->last_len;
			d->len = 0;
			d->in_body = true;
			if (d->want > d->cap) {
				size_t ncap = d->want < 256 ? 256 : d->want;
				uint8_t *nb = realloc(d->buf, ncap);
				if (!nb)
					return -ENOMEM;
				d->buf = nb;
				d->cap = ncap;
			}
		}
		if (d->len < d->want) {
			size_t take = d->want - d->len;
			if (take > len)
				take = len;
			memcpy(d->buf + d->len, data, take);
			d->len += take;
			data += take;
			len -= take;
		}
		if (d->len == d->want) {
			int rc;
			d->in_body = false;
			d->hdr_len = 0;
			rc = on_msg(arg, d->buf, d->len);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

bool grpc_deframer_idle(const struct grpc_deframer *d)
{
	return !d->in_body && d->hdr_len == 0;
}

void grpc_deframer_free(struct grpc_deframer *d)
{
	free(d->buf);
	d->buf = NULL;
	d->cap = 0;
}

int grpc_status_set(struct grpc_status *st, int code, const char *fmt, ...)
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

int grpc_status_oom(struct grpc_status *st)
{
	return grpc_status_set(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
}

int grpc_code_from_errno(int err)
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
	case -ETIME: return GRPC_DEADLINE_EXCEEDED;
	case -ENOSPC:
	case -ENOMEM:
	case -EDQUOT: return GRPC_RESOURCE_EXHAUSTED;
	case -EEXIST: return GRPC_ALREADY_EXISTS;
	case -ERANGE: return GRPC_OUT_OF_RANGE;
	default: return GRPC_INTERNAL;
	}
}

int grpc_status_from_err(struct grpc_status *st, const struct err *e)
{
	return grpc_status_set(st, grpc_code_from_errno(e->code), "%s",
	                       e->msg[0] ? e->msg : "internal error");
}

static void *pb_alloc(void *ud, size_t n)
{
	(void)ud;
	return malloc(n);
}

static void pb_free(void *ud, void *p)
{
	(void)ud;
	free(p);
}

ProtobufCAllocator grpc_pb_allocator = {pb_alloc, pb_free, NULL};
