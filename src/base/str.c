/* str — bounded string copy and the check of a string's bytes. */
#include "base/str.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool str_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap);
	bool whole = n < cap;
	if (!whole)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return whole;
}

/* Length of the well-formed UTF-8 sequence at p (at most n bytes), or 0 (RFC 3629 §4). */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

/* Whether the eight bytes at p are all ASCII and none is NUL (each a whole UTF-8 sequence). */
static bool ascii_word(const unsigned char *p)
{
	uint64_t x;
	memcpy(&x, p, sizeof(x));
	return !(x & 0x8080808080808080ull) &&
	       !((x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull);
}

enum str_fault str_check(const char *s, size_t n, size_t *at)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	enum str_fault f = STR_OK;
	while (i < n) {
		if (n - i >= 8 && ascii_word(p + i)) {
			i += 8;
			continue;
		}
		size_t len = p[i] ? utf8_seq(p + i, n - i) : 0;
		if (!len) {
			f = p[i] ? STR_UTF8 : STR_NUL;
			break;
		}
		i += len;
	}
	if (at)
		*at = i;
	return f;
}

const char *str_fault_text(enum str_fault f)
{
	switch (f) {
	case STR_OK: return "";
	case STR_NUL: return "contains a NUL byte";
	case STR_UTF8: return "is not valid UTF-8";
	case STR_CONTROL: return "contains a control character";
	case STR_ESCAPE: return "contains an escape \\u without four hex digits";
	case STR_INVALID_ESCAPE: return "contains an invalid escape";
	}
	return "";
}

bool str_has_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return true;
	return false;
}

const char *str_quote(char *buf, size_t cap, const char *s, size_t max)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = 0, n = 0;
	char esc[5];
	if (cap < 6) {
		if (cap)
			buf[0] = '\0';
		return buf;
	}
	buf[len++] = '"';
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && n < max;
	     p++, n++) {
		const char *e = esc;
		if (*p == '"' || *p == '\\')
			esc[0] = '\\', esc[1] = (char)*p, esc[2] = 0;
		else if (*p == '\n' || *p == '\t' || *p == '\r')
			esc[0] = '\\',
			esc[1] = *p == '\n'   ? 'n'
			         : *p == '\t' ? 't'
			                      : 'r',
			esc[2] = 0;
		else if (*p < 0x20 || *p >= 0x7f)
			esc[0] = '\\', esc[1] = 'x', esc[2] = hex[*p >> 4], esc[3] = hex[*p & 15],
			esc[4] = 0;
		else
			esc[0] = (char)*p, esc[1] = 0;
		size_t w = strlen(e);
		if (len + w + 5 > cap)
			break; /* room for the closing quote, "..." and the NUL */
		memcpy(buf + len, e, w);
		len += w;
	}
	bool cut = s && s[n];
	snprintf(buf + len, cap - len, "\"%s", cut ? "..." : "");
	return buf;
}
