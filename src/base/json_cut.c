/* json_cut — a member cut from an object's JSON text before cJSON parses it (json.h:
 * json_cut_member).  cJSON parses a value into a tree whole and has no way to skip a member, so a
 * member its reader drops would be allocated item by item only to be freed: its text goes first.
 *
 * The text is validated on the way, no less strictly than json_parse_strict and cJSON together
 * (RFC 8259's grammar, strings by json_check_strings' own scanner json_string_scan, nesting as
 * deep as cJSON allows): the cut never makes text valid that the parse would have refused, so a
 * reader sees the same errors with and without it. */
#include <stdbool.h>
#include <string.h>

#include "base/json.h"
#include "base/str.h"

#define DEPTH_MAX 1000 /* cJSON's CJSON_NESTING_LIMIT */

struct cutter {
	const char *p, *end;
	const char *object, *member; /* the path to cut: object.member */
	bool in_object;              /* the first member named object was an object: walked */
	const char *key, *value_end; /* the member found: its key's quote, the end of its value */
	const char *before, *after;  /* the commas around it (NULL: none) */
};

static void skip_space(struct cutter *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static bool at(const struct cutter *c, char ch)
{
	return c->p < c->end && *c->p == ch;
}

/* A string token at c->p, past its closing quote. */
static bool string_token(struct cutter *c)
{
	const char *end;
	if (!at(c, '"') || json_string_scan(c->p + 1, c->end, &end) != STR_OK || end == c->end)
		return false;
	c->p = end + 1;
	return true;
}

static bool digits(struct cutter *c)
{
	const char *s = c->p;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
		c->p++;
	return c->p > s;
}

static bool number(struct cutter *c)
{
	if (at(c, '-'))
		c->p++;
	if (at(c, '0'))
		c->p++;
	else if (!digits(c))
		return false;
	if (at(c, '.') && (c->p++, !digits(c)))
		return false;
	if (at(c, 'e') || at(c, 'E')) {
		c->p++;
		if (at(c, '+') || at(c, '-'))
			c->p++;
		if (!digits(c))
			return false;
	}
	return true;
}

static bool literal(struct cutter *c, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n))
		return false;
	c->p += n;
	return true;
}

static bool members(struct cutter *c, unsigned depth, const char *want);

static bool value(struct cutter *c, unsigned depth)
{
	if (depth > DEPTH_MAX || c->p >= c->end)
		return false;
	switch (*c->p) {
	case '{': return members(c, depth, NULL);
	case '"': return string_token(c);
	case 't': return literal(c, "true");
	case 'f': return literal(c, "false");
	case 'n': return literal(c, "null");
	case '[': break;
	default: return number(c);
	}
	c->p++;
	skip_space(c);
	if (at(c, ']'))
		return c->p++, true;
	for (;;) {
		if (!value(c, depth + 1))
			return false;
		skip_space(c);
		if (at(c, ']'))
			return c->p++, true;
		if (!at(c, ','))
			return false;
		c->p++;
		skip_space(c);
	}
}

static bool named(const char *key, const char *end, const char *want)
{
	size_t n = want ? strlen(want) : 0;
	return want && (size_t)(end - key) == n + 2 && !memcmp(key + 1, want, n);
}

/* The object at c->p; want: the name of the member to look into (c->object, at the top) or to
 * cut (c->member, inside it). */
static bool members(struct cutter *c, unsigned depth, const char *want)
{
	const char *comma = NULL;
	c->p++;
	skip_space(c);
	if (at(c, '}'))
		return c->p++, true;
	for (;;) {
		const char *key = c->p;
		if (!string_token(c))
			return false;
		bool found = named(key, c->p, want);
		skip_space(c);
		if (!at(c, ':'))
			return false;
		c->p++;
		skip_space(c);
		bool cut = found && want == c->member && !c->key;
		if (found && want == c->object && !c->in_object && at(c, '{')) {
			c->in_object = true;
			if (!members(c, depth + 1, c->member))
				return false;
		} else if (!value(c, depth + 1)) {
			return false;
		}
		if (cut)
			c->key = key, c->value_end = c->p, c->before = comma;
		skip_space(c);
		if (at(c, '}'))
			return c->p++, true;
		if (!at(c, ','))
			return false;
		if (cut)
			c->after = c->p;
		comma = c->p++;
		skip_space(c);
	}
}

size_t json_cut_member(char *text, size_t len, const char *object, const char *member)
{
	struct cutter c = {.p = text, .end = text + len, .object = object, .member = member};
	skip_space(&c);
	if (!at(&c, '{') || !members(&c, 1, object))
		return len;
	skip_space(&c);
	if (c.p != c.end || !c.key)
		return len;
	/* the member and one comma beside it, so that the rest stays one valid object */
	char *from = (char *)(c.after ? c.key : c.before ? c.before : c.key);
	const char *to = c.after ? c.after + 1 : c.value_end;
	memmove(from, to, (size_t)(text + len - to));
	return len - (size_t)(to - from);
}
