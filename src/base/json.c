#include "base/json.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/file.h"
#include "base/str.h"

#define JSON_EXACT_MAX 9007199254740992.0 /* 2^53 */
/* cJSON prints a number with 15 significant digits when that reads back within its relative
 * epsilon: integers from 10^15 up would be stored changed, so they are printed here. */
#define JSON_PRINT_EXACT_MIN 1e15
#define JSON_INT64_LIMIT     9223372036854775808.0 /* 2^63 */

/* ---- exact integers --------------------------------------------------------------------------
 * A double holds integers exactly only up to 2^53, so a number item whose integer text has more
 * than 15 digits keeps that text in valuestring (cJSON frees and duplicates it with the item and
 * otherwise ignores it for numbers): json_int64_of reads it, json_print prints it. */

struct numscan {
	const char *p, *end;
};

/* Just past the quote that ends the string whose text starts at p (end when none does): the
 * first quote not escaped by an odd run of backslashes before it (memchr finds the candidates;
 * a run cannot reach back past p, which follows a quote). */
static const char *string_end(const char *p, const char *end)
{
	for (const char *q; p < end && (q = memchr(p, '"', (size_t)(end - p)));) {
		const char *k = q;
		while (k > p && k[-1] == '\\')
			k--;
		p = q + 1;
		if (((q - k) & 1) == 0)
			return p;
	}
	return end;
}

/* The next number token after s->p (strings skipped), its length in *n and whether it is an
 * integer (no fraction, no exponent); NULL when there is none.  The text is valid JSON. */
static const char *next_number(struct numscan *s, size_t *n, bool *integral)
{
	const char *p = s->p;
	while (p < s->end && *p != '-' && (*p < '0' || *p > '9')) {
		if (*p++ != '"')
			continue;
		p = string_end(p, s->end);
	}
	if (p >= s->end)
		return NULL;
	const char *t = p;
	*integral = true;
	for (p++; p < s->end; p++) {
		bool digit = *p >= '0' && *p <= '9';
		if (!digit && *p != '.' && *p != 'e' && *p != 'E' && *p != '+' && *p != '-')
			break;
		*integral &= digit;
	}
	s->p = p;
	*n = (size_t)(p - t);
	return t;
}

static bool long_integer(const char *t, size_t n, bool integral)
{
	return integral && n - (*t == '-') > 15;
}

/* Walks the items from it on in document order beside the text; 0 or -ENOMEM. */
static int keep_texts(cJSON *it, struct numscan *s)
{
	for (; it; it = it->next) {
		if (cJSON_IsNumber(it)) {
			size_t n;
			bool integral;
			const char *t = next_number(s, &n, &integral);
			if (t && long_integer(t, n, integral) && !(it->valuestring = strndup(t, n)))
				return -ENOMEM;
		} else if (cJSON_IsArray(it) || cJSON_IsObject(it)) {
			if (keep_texts(it->child, s) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

static bool has_long_integer(const char *buf, size_t len)
{
	struct numscan s = {buf, buf + len};
	size_t n;
	bool integral;
	for (const char *t; (t = next_number(&s, &n, &integral));)
		if (long_integer(t, n, integral))
			return true;
	return false;
}

int json_int64_of(const cJSON *v, int64_t *out)
{
	const char *text = cJSON_IsRaw(v) || cJSON_IsNumber(v) ? v->valuestring : NULL;
	if (text) {
		char *end;
		errno = 0;
		long long x = strtoll(text, &end, 10);
		if (errno || *end || end == text)
			return -EINVAL;
		*out = x;
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return -EINVAL;
	double d = v->valuedouble;
	/* the range first: converting a double beyond int64_t is undefined */
	if (!(d >= -JSON_EXACT_MAX && d <= JSON_EXACT_MAX) || d != floor(d))
		return -EINVAL;
	*out = (int64_t)d;
	return 0;
}

cJSON *json_int64(int64_t x)
{
	cJSON *v = cJSON_CreateNumber((double)x);
	char buf[24];
	snprintf(buf, sizeof(buf), "%lld", (long long)x);
	if (v && long_integer(buf, strlen(buf), true) && !(v->valuestring = strdup(buf))) {
		cJSON_Delete(v);
		return NULL;
	}
	return v;
}

static bool print_exact(const cJSON *v)
{
	double d = fabs(v->valuedouble);
	return v->valuestring ||
	       (d >= JSON_PRINT_EXACT_MIN && d < JSON_INT64_LIMIT && d == floor(d));
}

static bool needs_exact(const cJSON *it)
{
	for (; it; it = it->next)
		if ((cJSON_IsNumber(it) && print_exact(it)) || needs_exact(it->child))
			return true;
	return false;
}

bool json_long_integers(const cJSON *v)
{
	return v && (cJSON_IsNumber(v) ? print_exact(v) : needs_exact(v->child));
}

/* Turns the numbers print_exact selects into raw items carrying their digits; 0 or -ENOMEM. */
static int to_raw(cJSON *it)
{
	for (; it; it = it->next) {
		if (cJSON_IsNumber(it) && print_exact(it)) {
			if (!it->valuestring) {
				char buf[32];
				snprintf(buf, sizeof(buf), "%.0f", it->valuedouble);
				if (!(it->valuestring = strdup(buf)))
					return -ENOMEM;
			}
			it->type = cJSON_Raw;
		} else if (to_raw(it->child) < 0) {
			return -ENOMEM;
		}
	}
	return 0;
}

char *json_print(const cJSON *v, bool pretty)
{
	cJSON *copy = NULL;
	if (v && cJSON_IsNumber(v) ? print_exact(v) : needs_exact(v ? v->child : NULL)) {
		if (!(copy = cJSON_Duplicate(v, true)) || to_raw(copy) < 0) {
			cJSON_Delete(copy);
			return NULL;
		}
		v = copy;
	}
	char *text = pretty ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
	cJSON_Delete(copy);
	return text;
}

/* cJSON answers a failed allocation like a syntax error; its allocations go through here so
 * that a parse can tell them apart (an unreadable record is not a corrupt one). */
static _Thread_local bool alloc_failed;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void *json_alloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		alloc_failed = true;
	return p;
}

static void hooks_init(void)
{
	cJSON_Hooks h = {json_alloc, free};
	cJSON_InitHooks(&h);
}

/* ---- strings as sent -------------------------------------------------------------------------
 * cJSON decodes the escape \u0000 into a NUL byte (the C string then ends there) and copies
 * bytes that are not UTF-8 as they are: the text is checked beside the parsed value. */

#define PATH_DEPTH 64 /* levels named in a message; deeper ones are left out */

struct jframe {
	bool object;
	const char *key; /* the member's raw text (escapes as written) */
	size_t key_len, index;
};

struct jscan {
	struct jframe f[PATH_DEPTH];
	size_t depth; /* may exceed PATH_DEPTH */
	bool want_key;
};

/* The path of the value being scanned: "spec.pools[0].name", "(root)" for the document itself;
 * bytes of a key that are not printable ASCII show as '?'. */
static void scan_path(const struct jscan *s, char *buf, size_t cap)
{
	size_t n = 0, levels = s->depth < PATH_DEPTH ? s->depth : PATH_DEPTH;
	buf[0] = '\0';
	for (size_t i = 0; i < levels && n + 1 < cap; i++) {
		const struct jframe *f = &s->f[i];
		const char *k = f->key;
		size_t kn = f->key_len;
		if (!f->object) {
			n += (size_t)snprintf(buf + n, cap - n, "[%zu]", f->index);
			continue;
		}
		if (!k)
			break;
		if (n && n + 1 < cap)
			buf[n++] = '.';
		for (size_t j = 0; j < kn && n + 1 < cap; j++)
			buf[n++] = k[j] > 0x20 && k[j] < 0x7f ? k[j] : '?';
		buf[n < cap ? n : cap - 1] = '\0';
	}
	if (n >= cap)
		buf[cap - 1] = '\0';
	if (!buf[0])
		snprintf(buf, cap, "(root)");
}

/* The escape \u at q (a backslash, limit the text's end): STR_NUL for \u0000 and STR_ESCAPE
 * without four hex digits (cJSON decodes both into a NUL byte: the C string would end there),
 * else STR_OK with the escaped UTF-16 code unit in *unit. */
static enum str_fault u_escape_fault(const char *q, const char *limit, unsigned *unit)
{
	if (limit - q < 6)
		return STR_ESCAPE;
	unsigned v = 0;
	for (int i = 2; i < 6; i++) {
		unsigned h = (unsigned char)q[i], l = h | 0x20;
		unsigned d = h >= '0' && h <= '9' ? h - '0' : l >= 'a' && l <= 'f' ? l - 'a' + 10 : 16;
		if (d > 15)
			return STR_ESCAPE;
		v = v * 16 + d;
	}
	*unit = v;
	return v ? STR_OK : STR_NUL;
}

static bool low_surrogate(unsigned unit)
{
	return unit >= 0xdc00 && unit <= 0xdfff;
}

/* The escape at q (a backslash): its length in *n and its fault — u_escape_fault's, or
 * STR_INVALID_ESCAPE for one RFC 8259 §7 does not have or a surrogate not paired as cJSON
 * decodes it (a high one, then an escaped low one). */
static enum str_fault escape_fault(const char *q, const char *limit, size_t *n)
{
	unsigned unit = 0, low = 0;
	*n = 2;
	if (limit - q < 2)
		return STR_INVALID_ESCAPE;
	if (q[1] != 'u')
		return q[1] && strchr("\"\\/bfnrt", q[1]) ? STR_OK : STR_INVALID_ESCAPE;
	enum str_fault f = u_escape_fault(q, limit, &unit);
	if (f)
		return f;
	*n = 6;
	if (low_surrogate(unit))
		return STR_INVALID_ESCAPE;
	if (unit < 0xd800 || unit > 0xdbff)
		return STR_OK;
	*n = 12;
	return limit - q >= 12 && q[6] == '\\' && q[7] == 'u' && !u_escape_fault(q + 6, limit, &low) &&
	               low_surrogate(low)
	           ? STR_OK
	           : STR_INVALID_ESCAPE;
}

/* Whether some escape of buf is one escape_fault refuses (a quick test of text cJSON parsed:
 * valid JSON holds a backslash only in a string, so its escapes follow one another from the
 * first backslash on). */
static bool any_escape_fault(const char *buf, size_t len)
{
	const char *limit = buf + len;
	size_t n;
	for (const char *q = buf; (q = memchr(q, '\\', (size_t)(limit - q))); q += n)
		if (escape_fault(q, limit, &n))
			return true;
	return false;
}

enum str_fault json_string_scan(const char *p, const char *limit, const char **end)
{
	const char *q = p;
	enum str_fault f = STR_OK;
	for (size_t n = 1; q < limit && *q != '"'; q += n) {
		unsigned char c = (unsigned char)*q;
		n = 1;
		if (c == '\\')
			f = escape_fault(q, limit, &n);
		else if (c < 0x20)
			f = c ? STR_CONTROL : STR_NUL;
		if (f)
			break;
	}
	size_t bad;
	if (str_check(p, (size_t)(q - p), &bad) != STR_OK) /* before the fault: the first */
		f = STR_UTF8, q = p + bad;
	*end = q;
	return f;
}

/* Whether some byte of buf is below 0x20, eight bytes at a time: a byte below 0x20 borrows
 * from no byte below it that is not, so its word's test sets its top bit; none is missed. */
static bool any_control(const char *buf, size_t len)
{
	size_t i = 0;
	for (; len - i >= 8; i += 8) {
		uint64_t x;
		memcpy(&x, buf + i, sizeof(x));
		if ((x - 0x2020202020202020ull) & ~x & 0x8080808080808080ull)
			return true;
	}
	for (; i < len; i++)
		if ((unsigned char)buf[i] < 0x20)
			return true;
	return false;
}

/* The offset of the first byte JSON does not allow where it stands (RFC 8259 §2, §7): a control
 * character inside a string, or one other than tab, LF and CR between tokens — cJSON takes
 * them for text and whitespace, a NUL byte included.  len when there is none. */
static size_t first_control(const char *buf, size_t len)
{
	if (!any_control(buf, len))
		return len;
	bool in_string = false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c < 0x20 && (in_string || (c != '\t' && c != '\n' && c != '\r')))
			return i;
		if (in_string && c == '\\')
			i++;
		else if (c == '"')
			in_string = !in_string;
	}
	return len;
}

static void scan_open(struct jscan *s, bool object)
{
	if (s->depth < PATH_DEPTH)
		s->f[s->depth] = (struct jframe){object, NULL, 0, 0};
	s->depth++;
	s->want_key = object;
}

int json_check_strings(const char *buf, size_t len, struct err *e)
{
	const char *p = buf, *limit = buf + len;
	size_t control = first_control(buf, len);
	if (control == len && str_check(buf, len, NULL) == STR_OK && !any_escape_fault(buf, len))
		return 0;
	struct jscan s = {.depth = 0};
	for (; p < limit; p++) {
		if (p == buf + control) /* between tokens: strings are skipped whole */
			return err_set(e, -EBADMSG,
			               "invalid JSON: control character 0x%02x at byte %zu",
			               (unsigned char)*p, control);
		struct jframe *top = s.depth && s.depth <= PATH_DEPTH ? &s.f[s.depth - 1] : NULL;
		switch (*p) {
		case '{': scan_open(&s, true); break;
		case '[': scan_open(&s, false); break;
		case '}':
		case ']': s.depth -= s.depth > 0; break;
		case ',':
			if (top && !top->object)
				top->index++;
			s.want_key = top && top->object;
			break;
		case ':': s.want_key = false; break;
		case '"': {
			const char *end;
			bool key = s.want_key && top && top->object;
			enum str_fault f = json_string_scan(p + 1, limit, &end);
			if (key) /* a faulty key: named by the object that holds it */
				top->key = f ? NULL : p + 1, top->key_len = (size_t)(end - p - 1);
			if (f) {
				char path[256];
				scan_path(&s, path, sizeof(path));
				return err_set(e, -EBADMSG, "%s %s %s (byte %zu)",
				               key ? "a key of" : "field", path, str_fault_text(f),
				               (size_t)(end - buf));
			}
			p = end;
			break;
		}
		default: break;
		}
	}
	return 0;
}

/* The one JSON value of buf (its long integers kept when long_integers).  0 with *out;
 * -EBADMSG with *at the offset where the text stops being that value and *trailing when a value
 * ended before it; -ENOMEM. */
static int parse_with(const char *buf, size_t len, bool long_integers, cJSON **out, size_t *at,
                      bool *trailing)
{
	const char *end = NULL;
	cJSON *v;

	*out = NULL;
	*trailing = false;
	pthread_once(&hooks_once, hooks_init);
	alloc_failed = false;
	v = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (!v && alloc_failed)
		return -ENOMEM;
	if (!v) {
		*at = end && end >= buf ? (size_t)(end - buf) : 0;
		return -EBADMSG;
	}
	for (const char *p = end; p < buf + len; p++) {
		if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
			cJSON_Delete(v);
			*at = (size_t)(p - buf);
			*trailing = true;
			return -EBADMSG;
		}
	}
	if (long_integers) {
		struct numscan s = {buf, buf + len};
		if (cJSON_IsNumber(v) ? keep_texts(v, &s) : keep_texts(v->child, &s)) {
			cJSON_Delete(v);
			return -ENOMEM;
		}
	}
	*out = v;
	return 0;
}

static int parse_value(const char *buf, size_t len, cJSON **out, size_t *at, bool *trailing)
{
	return parse_with(buf, len, has_long_integer(buf, len), out, at, trailing);
}

bool json_text_long_integers(const char *buf, size_t len)
{
	return has_long_integer(buf, len);
}

bool json_text_checked(const char *buf, size_t len)
{
	return !memchr(buf, '\0', len) && first_control(buf, len) == len &&
	       str_check(buf, len, NULL) == STR_OK && !any_escape_fault(buf, len);
}

int json_parse_checked(const char *buf, size_t len, bool long_integers, cJSON **out, struct err *e)
{
	size_t at = 0;
	bool trailing;
	int r = parse_with(buf, len, long_integers, out, &at, &trailing);
	if (r == -ENOMEM)
		return err_set(e, -ENOMEM, "out of memory");
	if (r < 0)
		return err_set(e, -EBADMSG, "invalid JSON at byte %zu", at);
	return 0;
}

int json_parse_value(const char *buf, size_t len, cJSON **out, size_t *at)
{
	bool trailing;
	size_t bad = first_control(buf, len);
	*at = 0;
	int r = parse_value(buf, len, out, at, &trailing);
	if (bad < len && (r == 0 || (r == -EBADMSG && bad < *at))) {
		cJSON_Delete(*out);
		*out = NULL;
		*at = bad;
		return -EBADMSG;
	}
	return r;
}

int json_parse_strict(const char *buf, size_t len, cJSON **out, struct err *e)
{
	size_t at = 0;
	bool trailing;

	*out = NULL;
	if (memchr(buf, '\0', len))
		return err_set(e, -EBADMSG, "invalid JSON: contains a NUL byte");
	int r = parse_value(buf, len, out, &at, &trailing);
	if (r == -ENOMEM)
		return err_set(e, -ENOMEM, "out of memory");
	if (r < 0 && trailing)
		return err_set(e, -EBADMSG, "invalid JSON: trailing data at byte %zu", at);
	if (r < 0 && at >= len)
		return err_set(e, -EBADMSG, "invalid JSON: unexpected end of input at byte %zu",
		               len);
	if (r < 0)
		return err_set(e, -EBADMSG, "invalid JSON at byte %zu", at);
	r = json_check_strings(buf, len, e);
	if (r < 0) {
		cJSON_Delete(*out);
		*out = NULL;
	}
	return r;
}

/* ---- the API server's answers ---------------------------------------------------------------- */

#define MARK_UTF8 "\xef\xbf\xbf" /* JSON_NUL_MARK in UTF-8 */

/* Whether the text may already hold U+FFFF (raw, or escaped in either case; an escaped
 * backslash before "uffff" counts too: such text is only refused as a whole). */
static bool holds_mark(const char *buf, size_t len)
{
	if (memmem(buf, len, MARK_UTF8, 3))
		return true;
	for (const char *p = buf; (p = memchr(p, '\\', (size_t)(buf + len - p))); p++)
		if (buf + len - p >= 6 && p[1] == 'u' && !strncasecmp(p + 2, "ffff", 4))
			return true;
	return false;
}

/* A copy of the text with every escape \u0000 inside a string turned into \uffff. */
static char *mark_nuls(const char *buf, size_t len)
{
	char *t = malloc(len ? len : 1);
	bool in_string = false;
	if (!t)
		return NULL;
	memcpy(t, buf, len);
	for (size_t i = 0; i < len; i++) {
		if (!in_string) {
			in_string = t[i] == '"';
		} else if (t[i] == '"') {
			in_string = false;
		} else if (t[i] == '\\' && i + 1 < len) {
			if (len - i >= 6 && !memcmp(t + i + 1, "u0000", 5))
				memcpy(t + i + 2, "ffff", 4);
			i++;
		}
	}
	return t;
}

int json_parse_marked(const char *buf, size_t len, cJSON **out, struct err *e)
{
	*out = NULL;
	if (memchr(buf, '\0', len) || !memmem(buf, len, "\\u0000", 6) ||
	    str_check(buf, len, NULL) != STR_OK || holds_mark(buf, len))
		return json_parse_strict(buf, len, out, e);
	char *t = mark_nuls(buf, len);
	if (!t)
		return err_set(e, -ENOMEM, "out of memory");
	int r = json_parse_strict(t, len, out, e);
	free(t);
	return r;
}

/* Whether an item under v holds the mark in its key or string value (no path built). */
static bool holds_marked(const cJSON *v)
{
	for (const cJSON *it = v ? v->child : NULL; it; it = it->next)
		if ((it->string && strstr(it->string, MARK_UTF8)) ||
		    (cJSON_IsString(it) && strstr(it->valuestring, MARK_UTF8)) || holds_marked(it))
			return true;
	return false;
}

bool json_marked(const cJSON *v, char *path, size_t cap)
{
	size_t i = 0;
	if (!holds_marked(v))
		return false; /* the common case: no path to build */
	for (const cJSON *it = v ? v->child : NULL; it; it = it->next, i++) {
		char p[512];
		if (cJSON_IsArray(v))
			snprintf(p, sizeof(p), "%s[%zu]", path, i);
		else
			snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "",
			         it->string && !strstr(it->string, MARK_UTF8) ? it->string : "?");
		if ((it->string && strstr(it->string, MARK_UTF8)) ||
		    (cJSON_IsString(it) && strstr(it->valuestring, MARK_UTF8)) ||
		    json_marked(it, p, sizeof(p))) {
			snprintf(path, cap, "%s", p);
			return true;
		}
	}
	return false;
}

int json_read_file(const char *path, cJSON **out, struct err *e)
{
	char *buf;
	size_t len;
	int r;

	*out = NULL;
	r = file_read_all(path, JSON_FILE_MAX, &buf, &len, e);
	if (r < 0)
		return r;
	r = json_parse_strict(buf, len, out, e);
	free(buf);
	if (r == -EBADMSG)
		err_prefix(e, "%s is corrupt", path);
	else if (r < 0)
		err_prefix(e, "read %s", path);
	return r;
}

int json_write_file(const char *path, const cJSON *v, mode_t mode, struct err *e)
{
	char *text = json_print(v, true);
	size_t n;
	int r;

	if (!text)
		return err_set(e, -ENOMEM, "encode %s: out of memory", path);
	n = strlen(text);
	{
		char *t2 = realloc(text, n + 2);
		if (!t2) {
			free(text);
			return err_set(e, -ENOMEM, "encode %s: out of memory", path);
		}
		text = t2;
	}
	text[n++] = '\n';
	text[n] = '\0';
	r = file_write_atomic(path, text, n, mode, e);
	free(text);
	return r;
}

const char *json_get_str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int json_get_int64(const cJSON *obj, const char *key, int64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	return cJSON_IsNumber(v) ? json_int64_of(v, out) : -EINVAL;
}

int json_get_bool(const cJSON *obj, const char *key, bool *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	if (!cJSON_IsBool(v))
		return -EINVAL;
	*out = cJSON_IsTrue(v);
	return 0;
}

char *json_dump(const cJSON *v)
{
	return json_print(v, false);
}

/* The code point of the UTF-8 sequence at p that json_dump_for_yaml escapes (its length in *n),
 * or -1.  Such a character appears only inside a string: the rest of the text is ASCII. */
static long yaml_unsafe(const unsigned char *p, size_t *n)
{
	if (p[0] == 0x7f)
		return *n = 1, 0x7f;
	if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		return *n = 2, p[1];
	if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
		return *n = 3, 0x2000 + (p[2] - 0x80);
	if (p[0] == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf))
		return *n = 3, 0xffc0 + (p[2] & 0x3f);
	return -1;
}

char *json_dump_for_yaml(const cJSON *v)
{
	char *text = json_dump(v);
	size_t extra = 0, n, len;
	if (!text)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		if (*p >= 0x7f && yaml_unsafe(p, &n) >= 0)
			extra += 6; /* at most 6 bytes more: 1 byte becomes 6 */
	if (!extra)
		return text;
	len = strlen(text);
	char *out = malloc(len + extra + 1), *o = out;
	for (const unsigned char *p = (const unsigned char *)text; out && *p;) {
		long c = *p >= 0x7f ? yaml_unsafe(p, &n) : -1;
		if (c < 0) {
			*o++ = (char)*p++;
			continue;
		}
		o += sprintf(o, "\\u%04lx", (unsigned long)c);
		p += n;
	}
	if (out)
		*o = '\0';
	free(text);
	return out;
}

const char *json_lib_name(void)
{
	return "cJSON";
}

const char *json_lib_version(void)
{
	return cJSON_Version();
}

int json_file_get_str(const char *path, const char *key, char *buf, size_t cap, struct err *e)
{
	cJSON *o = NULL;
	int r = json_read_file(path, &o, e);
	const char *v = r == 0 ? json_get_str(o, key) : NULL;
	snprintf(buf, cap, "%s", v ? v : "");
	cJSON_Delete(o);
	return r;
}

bool json_add(cJSON *o, const char *key, cJSON *item)
{
	if (o && item &&
	    (key ? cJSON_AddItemToObject(o, key, item) : cJSON_AddItemToArray(o, item)))
		return true;
	cJSON_Delete(item);
	return false;
}
