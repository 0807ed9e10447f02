/* str — bounded string copy, and the check of the bytes a string was sent as.
 *
 * str_copy copies src into dst of cap bytes (cap >= 1), cutting it to cap-1 bytes, and always
 * NUL-terminates.  It returns true when src fitted whole, so a caller that must not cut can
 * refuse.
 *
 * A string that crosses a boundary (a gRPC request, a JSON or YAML document) is the bytes that
 * were sent: str_check tells whether those bytes are a string the program can hold — no NUL
 * byte (a C string would end there and name another object) and well-formed UTF-8 (RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF), as proto3 requires of `string`
 * fields and RFC 8259 of JSON text.
 */
#ifndef PILLAR_BASE_STR_H
#define PILLAR_BASE_STR_H

#include <stdbool.h>
#include <stddef.h>

bool str_copy(char *dst, size_t cap, const char *src);

enum str_fault {
	STR_OK = 0,
	STR_NUL,     /* holds a NUL byte */
	STR_UTF8,    /* not well-formed UTF-8 */
	STR_CONTROL, /* holds a control character where text cannot (a name, a JSON string) */
	STR_ESCAPE,  /* a JSON escape \u without four hex digits (cJSON decodes it as a NUL byte) */
	STR_INVALID_ESCAPE, /* a JSON escape RFC 8259 does not have, or a surrogate unpaired */
};

/* The first fault of the n bytes at s, and its byte offset in *at (when not NULL; n when
 * STR_OK). */
enum str_fault str_check(const char *s, size_t n, size_t *at);
/* "contains a NUL byte" / "is not valid UTF-8" / "contains a control character" /
 * "contains an escape \\u without four hex digits" / "contains an invalid escape" ("" for STR_OK): the end of a message that names the string ("field volume_id contains a NUL byte"). */
const char *str_fault_text(enum str_fault f);

/* Whether the C string s holds a control character (U+0001 to U+001F, U+007F): a name, an ID
 * or a path never does (str_check lets them through, as proto3 and JSON strings may hold
 * them).  false for NULL. */
bool str_has_control(const char *s);

/* s in double quotes as Go's %q writes ASCII (\" \\ \n \t \r, \xNN for any other byte below
 * 0x20 or from 0x7f), at most max bytes of s, into buf of cap bytes; "..." after the closing
 * quote when s was cut (to max or to fit): text from a command line or a request that a message
 * echoes, so that a control byte never reaches a terminal or a log raw.  Returns buf; "\"\"" for
 * NULL, "" when cap is below 6. */
const char *str_quote(char *buf, size_t cap, const char *s, size_t max);

#endif
