#include "kube/list.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/time.h"
#include "kube/client_int.h"

#define READ_CHUNK (16u << 10)

/* Where the scanner is in the List: before '{', before a member name (FIRST: '}' may come),
 * in a name, before ':', before a value, in a value, after a value; in `items` the same for
 * its elements; after '}'. */
enum scan_state {
	S_OPEN,
	S_NAME_FIRST,
	S_NAME,
	S_NAME_SCAN,
	S_COLON,
	S_VALUE,
	S_VALUE_SCAN,
	S_MEMBER_END,
	S_ITEM_FIRST,
	S_ITEM,
	S_ITEM_SCAN,
	S_ITEM_END,
	S_DONE,
	S_FAILED,
};

enum member { M_OTHER, M_ITEMS, M_METADATA };

void kube_list_scan_init(struct kube_list_scan *s, size_t max_value, kube_item_fn fn, void *arg)
{
	memset(s, 0, sizeof(*s));
	s->fn = fn;
	s->arg = arg;
	s->max_value = max_value ? max_value : KUBE_LIST_VALUE_MAX;
}

void kube_list_scan_free(struct kube_list_scan *s)
{
	free(s->buf);
	free(s->rv);
	free(s->cont);
	memset(s, 0, sizeof(*s));
}

static int fail(struct kube_list_scan *s, struct err *e, int rc, const char *what)
{
	s->state = S_FAILED;
	s->error = rc;
	return err_set(e, rc, "list answer: %s at byte %llu", what,
	               (unsigned long long)(s->base + s->pos));
}

static bool space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Starts scanning the value whose first byte is at pos. */
static void value_begin(struct kube_list_scan *s)
{
	char c = s->buf[s->pos];
	s->start = s->pos;
	s->depth = c == '{' || c == '[';
	s->in_string = c == '"';
	s->scalar = !s->depth && !s->in_string;
	s->escape = false;
	s->pos++;
}

/* Scans on in the value begun: true once it is complete (pos just past it). */
static bool value_scan(struct kube_list_scan *s)
{
	const char *b = s->buf;
	size_t i = s->pos, n = s->len;
	bool done = false;
	while (i < n && !done) {
		char c = b[i];
		if (s->in_string) {
			/* the next quote ends the string unless an odd run of backslashes (counted
			 * with the escape carried from the last read) stands before it */
			const char *q = memchr(b + i, '"', n - i);
			size_t stop = q ? (size_t)(q - b) : n, k = stop;
			while (k > i && b[k - 1] == '\\')
				k--;
			bool escaped = ((k == i && s->escape) ^ ((stop - k) & 1)) != 0;
			i = stop;
			if (i == n) {
				s->escape = escaped;
				break;
			}
			s->escape = false;
			if (!escaped) {
				s->in_string = false;
				done = s->depth == 0;
			}
		} else if (s->scalar) {
			if (space(c) || c == ',' || c == '}' || c == ']')
				break; /* the delimiter is the next token's */
		} else if (c == '"') {
			s->in_string = true;
		} else if (c == '{' || c == '[') {
			s->depth++;
		} else if (c == '}' || c == ']') {
			done = --s->depth == 0;
		}
		i++;
	}
	if (s->scalar && i < n)
		done = true;
	s->pos = i;
	return done;
}

/* The member name just scanned: which member's value follows. */
static int name_done(struct kube_list_scan *s, struct err *e)
{
	cJSON *name = NULL;
	struct err pe = {0};
	if (json_parse_strict(s->buf + s->start, s->pos - s->start, &name, &pe) < 0 ||
	    !cJSON_IsString(name)) {
		cJSON_Delete(name);
		return fail(s, e, pe.code == -ENOMEM ? -ENOMEM : -EBADMSG, "invalid member name");
	}
	s->member = strcmp(name->valuestring, "items") == 0      ? M_ITEMS
	            : strcmp(name->valuestring, "metadata") == 0 ? M_METADATA
	                                                         : M_OTHER;
	cJSON_Delete(name);
	if ((s->member == M_ITEMS && s->seen_items) || (s->member == M_METADATA && s->seen_meta))
		return fail(s, e, -EBADMSG, "a second items or metadata member");
	s->seen_items |= s->member == M_ITEMS;
	s->seen_meta |= s->member == M_METADATA;
	s->state = S_COLON;
	return 0;
}

/* A copy of the string member key of obj into *out (left NULL when absent). */
static int keep_str(const cJSON *obj, const char *key, char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!cJSON_IsString(v))
		return 0;
	free(*out);
	*out = strdup(v->valuestring);
	return *out ? 0 : -ENOMEM;
}

/* A member's value other than items' array, just scanned: checked, metadata's strings kept. */
static int value_done(struct kube_list_scan *s, struct err *e)
{
	cJSON *v = NULL;
	struct err pe = {0};
	int rc = json_parse_strict(s->buf + s->start, s->pos - s->start, &v, &pe);
	if (rc == 0 && s->member == M_ITEMS && !cJSON_IsNull(v))
		rc = -EINVAL;
	if (rc == 0 && s->member == M_METADATA && !cJSON_IsObject(v))
		rc = -EINVAL;
	if (rc == 0 && s->member == M_METADATA &&
	    (keep_str(v, "resourceVersion", &s->rv) < 0 || keep_str(v, "continue", &s->cont) < 0))
		rc = -ENOMEM;
	cJSON_Delete(v);
	if (rc == -ENOMEM || pe.code == -ENOMEM)
		return fail(s, e, -ENOMEM, "out of memory");
	if (rc == -EINVAL)
		return fail(s, e, -EBADMSG,
		            s->member == M_ITEMS ? "items is not an array"
		                                 : "metadata is not an object");
	if (rc < 0)
		return fail(s, e, -EBADMSG, "invalid JSON value");
	s->state = S_MEMBER_END;
	return 0;
}

/* An element of items just scanned: parsed on its own and handed on. */
static int item_done(struct kube_list_scan *s, struct err *e)
{
	cJSON *it = NULL;
	struct err pe = {0};
	char *text = s->buf + s->start;
	size_t len = s->pos - s->start;
	if (s->drop_managed_fields) /* never parsed: never allocated */
		len = json_cut_member(text, len, "metadata", "managedFields");
	int rc = json_parse_marked(text, len, &it, &pe);
	if (rc == 0 && !cJSON_IsObject(it)) {
		cJSON_Delete(it);
		rc = err_set(&pe, -EBADMSG, "not an object");
	}
	if (rc < 0) {
		char what[sizeof(pe.msg) + 32];
		snprintf(what, sizeof(what), "item %zu: %s", s->items, pe.msg);
		return fail(s, e, rc == -ENOMEM ? -ENOMEM : -EBADMSG, what);
	}
	s->items++;
	s->state = S_ITEM_END;
	if (memmem(text, len, "\\u0000", 6)) /* parsed from json_parse_marked's copy */
		text = NULL;
	rc = s->fn ? s->fn(it, text, len, s->arg) : 0;
	cJSON_Delete(it);
	if (rc != 0) {
		s->state = S_FAILED;
		s->error = rc;
		s->stopped = true;
	}
	return rc;
}

/* One step between values (whitespace skipped): the byte at pos decides the next state. */
static int punct(struct kube_list_scan *s, struct err *e)
{
	char c = s->buf[s->pos];
	int st = s->state;
	if (space(c)) {
		s->pos++;
		return 0;
	}
	bool value = st == S_VALUE || st == S_ITEM_FIRST || st == S_ITEM;
	if (value && (c == ',' || c == ':' || c == '}' || (c == ']' && st != S_ITEM_FIRST)))
		return fail(s, e, -EBADMSG, "unexpected byte");
	if (st == S_OPEN && c == '{')
		s->state = S_NAME_FIRST;
	else if ((st == S_NAME_FIRST && c == '}') || (st == S_MEMBER_END && c == '}'))
		s->state = S_DONE;
	else if ((st == S_NAME_FIRST || st == S_NAME) && c == '"')
		s->state = S_NAME_SCAN;
	else if (st == S_COLON && c == ':')
		s->state = S_VALUE;
	else if (st == S_VALUE && s->member == M_ITEMS && c == '[')
		s->state = S_ITEM_FIRST;
	else if (st == S_VALUE)
		s->state = S_VALUE_SCAN;
	else if (st == S_MEMBER_END && c == ',')
		s->state = S_NAME;
	else if ((st == S_ITEM_FIRST && c == ']') || (st == S_ITEM_END && c == ']'))
		s->state = S_MEMBER_END;
	else if (st == S_ITEM_FIRST || st == S_ITEM)
		s->state = S_ITEM_SCAN;
	else if (st == S_ITEM_END && c == ',')
		s->state = S_ITEM;
	else
		return fail(s, e, -EBADMSG,
		            st == S_DONE ? "data after the list" : "unexpected byte");
	if (s->state == S_NAME_SCAN || s->state == S_VALUE_SCAN || s->state == S_ITEM_SCAN)
		value_begin(s);
	else
		s->pos++;
	return 0;
}

/* Scans what buf holds from pos; 0 when it needs more bytes. */
static int scan(struct kube_list_scan *s, struct err *e)
{
	int rc = 0;
	while (rc == 0 && s->pos < s->len) {
		int st = s->state;
		if (st != S_NAME_SCAN && st != S_VALUE_SCAN && st != S_ITEM_SCAN)
			rc = punct(s, e);
		else if (!value_scan(s))
			break;
		else if (st == S_NAME_SCAN)
			rc = name_done(s, e);
		else if (st == S_VALUE_SCAN)
			rc = value_done(s, e);
		else
			rc = item_done(s, e);
	}
	return rc;
}

/* Drops the bytes before the value being scanned (all of them between values). */
static void compact(struct kube_list_scan *s)
{
	int st = s->state;
	size_t keep =
	    st == S_NAME_SCAN || st == S_VALUE_SCAN || st == S_ITEM_SCAN ? s->start : s->pos;
	memmove(s->buf, s->buf + keep, s->len - keep);
	s->len -= keep;
	s->pos -= keep;
	s->start = 0;
	s->base += keep;
}

int kube_list_scan_push(struct kube_list_scan *s, const void *data, size_t len, struct err *e)
{
	if (s->state == S_FAILED)
		return err_set(e, s->error, "list answer: already failed");
	if (s->len + len + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + len + 1)
			cap *= 2;
		char *b = realloc(s->buf, cap);
		if (!b)
			return fail(s, e, -ENOMEM, "out of memory");
		s->buf = b;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, len);
	s->len += len;
	int rc = scan(s, e);
	if (rc != 0)
		return rc;
	compact(s);
	if (s->len > s->max_value)
		return fail(s, e, -EMSGSIZE, "a value longer than the largest allowed");
	if (s->cap > 2 * READ_CHUNK && s->cap > 4 * (s->len + READ_CHUNK)) {
		char *b = realloc(s->buf, s->len + READ_CHUNK); /* a huge item gone: give it back */
		if (b) {
			s->buf = b;
			s->cap = s->len + READ_CHUNK;
		}
	}
	return 0;
}

int kube_list_scan_finish(struct kube_list_scan *s, struct err *e)
{
	if (s->state == S_FAILED)
		return err_set(e, s->error, "list answer: already failed");
	if (s->state != S_DONE)
		return fail(s, e, -EBADMSG, "the list ends early");
	return 0;
}

/* ---- one page, read as it arrives ------------------------------------------------------------ */

/* Feeds the answer's body to the scanner until it ends: 0 or a negative errno with st (fn's
 * own return as it is). */
static int read_page(struct kube_client *kc, struct h2_stream *hs, struct kube_list_scan *sc,
                     const char *path, struct kube_status *st)
{
	int64_t timeout = kube_client_timeout_ms(kc);
	uint64_t until = time_mono_ms() + (uint64_t)timeout;
	char chunk[READ_CHUNK];
	struct err e = {0};
	int rc;
	for (;;) {
		uint64_t now = time_mono_ms();
		ssize_t n =
		    now < until
		        ? h2_stream_read(hs, chunk, sizeof(chunk), (int64_t)(until - now), &e)
		        : err_set(&e, -ETIMEDOUT, "response incomplete after %lld ms",
		                  (long long)timeout);
		if (n < 0) {
			kube_status_local(st,
			                  n == -ETIMEDOUT ? KUBE_TIMEOUT : KUBE_SERVICE_UNAVAILABLE,
			                  "GET %s: reading the response: %s", path, e.msg);
			return (int)n;
		}
		rc = n ? kube_list_scan_push(sc, chunk, (size_t)n, &e)
		       : kube_list_scan_finish(sc, &e);
		if (rc != 0 && !sc->stopped) /* the answer's fault (fn words its own) */
			kube_status_local(st, rc == -ENOMEM ? KUBE_UNKNOWN : KUBE_INTERNAL_ERROR,
			                  "GET %s: %s", path, e.msg);
		if (rc != 0 || n == 0)
			return rc;
	}
}

/* A copy of the scanner's string (NULL: "") into buf: 0, or -EOVERFLOW with st. */
static int copy_meta(const char *v, char *buf, size_t cap, const char *what, const char *path,
                     struct kube_status *st)
{
	if (!buf)
		return 0;
	if (v && strlen(v) >= cap) {
		kube_status_local(st, KUBE_INTERNAL_ERROR, "GET %s: %s too long", path, what);
		return -EOVERFLOW;
	}
	snprintf(buf, cap, "%s", v ? v : "");
	return 0;
}

int kube_list_each(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                   const struct kube_list_opts *o, kube_item_fn fn, void *arg, char *rv,
                   size_t rv_cap, char *cont, size_t cont_cap, struct kube_status *st)
{
	struct kube_list_scan sc;
	struct h2_stream *hs = NULL;
	char path[4096];
	uint64_t t0;
	int rc = kube_list_path(path, sizeof(path), r, ns, o);
	if (rc < 0) {
		kube_status_local(st, KUBE_BAD_REQUEST, "cannot address %s%s%.253s: %s", r->plural,
		                  ns && *ns ? " in namespace " : "", ns ? ns : "",
		                  rc == -ENAMETOOLONG ? "too long" : "invalid name or namespace");
		return rc;
	}
	rc = kube_request_stream(kc, KUBE_BUDGET_OBJECTS, "GET", path, NULL, NULL, 0, &hs, &t0, st);
	if (rc < 0)
		return rc;
	kube_list_scan_init(&sc, 0, fn, arg);
	sc.drop_managed_fields = o && o->drop_managed_fields;
	rc = read_page(kc, hs, &sc, path, st);
	h2_stream_free(hs);
	kube_request_observe(kc, "GET", t0);
	if (rc == 0)
		rc = copy_meta(sc.rv, rv, rv_cap, "metadata.resourceVersion", path, st);
	if (rc == 0)
		rc = copy_meta(sc.cont, cont, cont_cap, "metadata.continue", path, st);
	kube_list_scan_free(&sc);
	return rc;
}
