/* model kpath: kubectl's `-o jsonpath=` templates and `-o custom-columns=` tables (kpath.h). */
#include "model/kpath.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 4096

struct nodes {
	const cJSON *v[MAX_NODES];
	size_t n;
};

static void push(struct nodes *ns, const cJSON *v)
{
	if (v && ns->n < MAX_NODES)
		ns->v[ns->n++] = v;
}

/* ---- values as kubectl prints them ---------------------------------------------------------- */

static void put_number(FILE *f, const cJSON *v)
{
	double d = v->valuedouble;
	if (v->valuestring) /* an exact integer (base/json.h) */
		fputs(v->valuestring, f);
	else if (d == floor(d) && fabs(d) < 1e18)
		fprintf(f, "%lld", (long long)d);
	else
		fprintf(f, "%g", d);
}

/* A JSON string as Go's encoding/json writes it (<, > and & escaped). */
static void put_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\r')
			fputs("\\r", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&')
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static int cmp_keys(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* The members of an object sorted by key (Go marshals and prints maps so); NULL when empty. */
static const cJSON **sorted_members(const cJSON *obj, size_t *n)
{
	const cJSON *c;
	*n = 0;
	cJSON_ArrayForEach(c, obj)(*n)++;
	const cJSON **v = *n ? malloc(*n * sizeof(*v)) : NULL;
	size_t i = 0;
	if (!v) {
		*n = 0;
		return NULL;
	}
	cJSON_ArrayForEach(c, obj) v[i++] = c;
	qsort(v, *n, sizeof(*v), cmp_keys);
	return v;
}

/* Compact JSON with sorted keys (json.Marshal). */
static void put_json(FILE *f, const cJSON *v)
{
	if (cJSON_IsString(v)) {
		put_json_string(f, v->valuestring);
	} else if (cJSON_IsNumber(v)) {
		put_number(f, v);
	} else if (cJSON_IsBool(v)) {
		fputs(cJSON_IsTrue(v) ? "true" : "false", f);
	} else if (cJSON_IsArray(v)) {
		const cJSON *c;
		fputc('[', f);
		cJSON_ArrayForEach(c, v)
		{
			put_json(f, c);
			if (c->next)
				fputc(',', f);
		}
		fputc(']', f);
	} else if (cJSON_IsObject(v)) {
		size_t n;
		const cJSON **m = sorted_members(v, &n);
		fputc('{', f);
		for (size_t i = 0; i < n; i++) {
			put_json_string(f, m[i]->string);
			fputc(':', f);
			put_json(f, m[i]);
			if (i + 1 < n)
				fputc(',', f);
		}
		fputc('}', f);
		free(m);
	} else {
		fputs("null", f);
	}
}

static void put_indent(FILE *f, int depth)
{
	fputc('\n', f);
	for (int i = 0; i < depth; i++)
		fputs("    ", f);
}

/* JSON with sorted keys, indented by four spaces (json.MarshalIndent(v, "", "    "): kubectl's
 * -o json); empty arrays and objects stay [] and {}. */
static void put_json_indented(FILE *f, const cJSON *v, int depth)
{
	size_t n = 0;
	if (cJSON_IsArray(v) && v->child) {
		const cJSON *c;
		fputc('[', f);
		cJSON_ArrayForEach(c, v)
		{
			put_indent(f, depth + 1);
			put_json_indented(f, c, depth + 1);
			if (c->next)
				fputc(',', f);
		}
		put_indent(f, depth);
		fputc(']', f);
	} else if (cJSON_IsObject(v) && v->child) {
		const cJSON **m = sorted_members(v, &n);
		fputc('{', f);
		for (size_t i = 0; i < n; i++) {
			put_indent(f, depth + 1);
			put_json_string(f, m[i]->string);
			fputs(": ", f);
			put_json_indented(f, m[i], depth + 1);
			if (i + 1 < n)
				fputc(',', f);
		}
		put_indent(f, depth);
		fputc('}', f);
		free(m);
	} else {
		put_json(f, v);
	}
}

/* Go's %v of a decoded JSON value (custom-columns cells): map[k:v ...], [a b], <nil>. */
static void put_go(FILE *f, const cJSON *v)
{
	if (cJSON_IsString(v)) {
		fputs(v->valuestring, f);
	} else if (cJSON_IsArray(v)) {
		const cJSON *c;
		fputc('[', f);
		cJSON_ArrayForEach(c, v)
		{
			put_go(f, c);
			if (c->next)
				fputc(' ', f);
		}
		fputc(']', f);
	} else if (cJSON_IsObject(v)) {
		size_t n;
		const cJSON **m = sorted_members(v, &n);
		fputs("map[", f);
		for (size_t i = 0; i < n; i++) {
			fprintf(f, "%s%s:", i ? " " : "", m[i]->string);
			put_go(f, m[i]);
		}
		fputc(']', f);
		free(m);
	} else if (cJSON_IsNull(v)) {
		fputs("<nil>", f);
	} else {
		put_json(f, v);
	}
}

/* jsonpath's printing of one result: strings as they are, the rest as JSON. */
static void put_result(FILE *f, const cJSON *v)
{
	if (cJSON_IsString(v))
		fputs(v->valuestring, f);
	else
		put_json(f, v);
}

/* ---- evaluation ------------------------------------------------------------------------------ */

static int eval(const char *p, const char *end, const struct nodes *in, struct nodes *out,
                struct err *e);

static void all_children(const struct nodes *in, struct nodes *out)
{
	for (size_t i = 0; i < in->n; i++) {
		const cJSON *c;
		if (cJSON_IsArray(in->v[i]))
			cJSON_ArrayForEach(c, in->v[i]) push(out, c);
		else if (cJSON_IsObject(in->v[i])) {
			size_t n;
			const cJSON **m = sorted_members(in->v[i], &n);
			for (size_t j = 0; j < n; j++)
				push(out, m[j]);
			free(m);
		}
	}
}

static void field(const struct nodes *in, const char *key, size_t len, struct nodes *out)
{
	char k[256];
	snprintf(k, sizeof(k), "%.*s", (int)(len < sizeof(k) ? len : sizeof(k) - 1), key);
	for (size_t i = 0; i < in->n; i++)
		push(out, cJSON_GetObjectItemCaseSensitive(in->v[i], k));
}

/* Compares v with the literal lit (a quoted string, a number, true or false) by op. */
static bool compare(const cJSON *v, const char *op, const char *lit, size_t litlen)
{
	int c;
	if (litlen >= 2 && (lit[0] == '"' || lit[0] == '\'')) {
		if (!cJSON_IsString(v))
			return false;
		size_t n = strlen(v->valuestring), m = litlen - 2;
		c = strncmp(v->valuestring, lit + 1, n < m ? n : m);
		if (c == 0)
			c = n < m ? -1 : n > m;
	} else if (litlen && (isdigit((unsigned char)lit[0]) || lit[0] == '-')) {
		if (!cJSON_IsNumber(v))
			return false;
		double d = strtod(lit, NULL);
		c = v->valuedouble < d ? -1 : v->valuedouble > d;
	} else {
		bool want = litlen == 4 && !strncmp(lit, "true", 4);
		if (!cJSON_IsBool(v))
			return false;
		c = cJSON_IsTrue(v) == want ? 0 : 1;
	}
	if (!strcmp(op, "=="))
		return c == 0;
	if (!strcmp(op, "!="))
		return c != 0;
	if (!strcmp(op, "<"))
		return c < 0;
	if (!strcmp(op, ">"))
		return c > 0;
	if (!strcmp(op, "<="))
		return c <= 0;
	return c >= 0;
}

/* [?(@.path OP literal)] or [?(@.path)] over the elements of every array in in. */
static int filter(const char *p, const char *end, const struct nodes *in, struct nodes *out,
                  struct err *e)
{
	static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
	const char *opp = NULL, *op = NULL;
	for (const char *q = p; q < end && !opp; q++)
		for (size_t i = 0; i < 6 && !opp; i++)
			if (!strncmp(q, ops[i], strlen(ops[i]))) {
				opp = q;
				op = ops[i];
			}
	const char *pend = opp ? opp : end;
	while (pend > p && pend[-1] == ' ')
		pend--;
	const char *lit = opp ? opp + strlen(op) : end;
	while (lit < end && *lit == ' ')
		lit++;
	size_t litlen = (size_t)(end - lit);
	while (litlen && lit[litlen - 1] == ' ')
		litlen--;
	struct nodes *el = malloc(sizeof(*el)), *r = malloc(sizeof(*r));
	int rc = el && r ? 0 : err_set(e, -ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		const cJSON *c, *arr = cJSON_IsArray(in->v[i]) ? in->v[i] : NULL;
		cJSON_ArrayForEach(c, arr)
		{
			el->n = 0;
			r->n = 0;
			push(el, c);
			if ((rc = eval(p, pend, el, r, e)) < 0)
				break;
			bool keep = !opp ? r->n > 0 : r->n > 0 && compare(r->v[0], op, lit, litlen);
			if (keep)
				push(out, c);
		}
	}
	free(el);
	free(r);
	return rc;
}

/* One [ ... ] step starting at p (after '['); *next after the ']'. */
static int bracket(const char *p, const char *end, const struct nodes *in, struct nodes *out,
                   const char **next, struct err *e)
{
	const char *close;
	if (*p == '?') { /* ?( ... )] */
		close = strstr(p, ")]");
		if (!close || close > end || p[1] != '(')
			return err_set(e, -EINVAL, "unterminated filter");
		*next = close + 2;
		return filter(p + 2, close, in, out, e);
	}
	close = memchr(p, ']', (size_t)(end - p));
	if (!close)
		return err_set(e, -EINVAL, "unterminated array");
	*next = close + 1;
	if (*p == '\'' || *p == '"') {
		field(in, p + 1, (size_t)(close - p - 2), out);
		return 0;
	}
	if (*p == '*') {
		all_children(in, out);
		return 0;
	}
	char *num_end;
	long a = strtol(p, &num_end, 10), b = 0;
	bool slice = *num_end == ':';
	if (slice)
		b = num_end[1] == ']' ? 1L << 30 : strtol(num_end + 1, &num_end, 10);
	if (!slice && num_end != close)
		return err_set(e, -EINVAL, "invalid array index %.*s", (int)(close - p), p);
	for (size_t i = 0; i < in->n; i++) {
		long len = cJSON_IsArray(in->v[i]) ? cJSON_GetArraySize(in->v[i]) : 0;
		long lo = a < 0 ? a + len : a, hi = slice ? (b < 0 ? b + len : b) : lo + 1;
		for (long j = lo < 0 ? 0 : lo; j < hi && j < len; j++)
			push(out, cJSON_GetArrayItem(in->v[i], (int)j));
	}
	return 0;
}

/* Evaluates the path p..end (".a.b[0]['c'][?(@.x=="y")][*]", a leading @ or $ allowed). */
static int eval(const char *p, const char *end, const struct nodes *in, struct nodes *out,
                struct err *e)
{
	struct nodes *cur = malloc(sizeof(*cur)), *nx = malloc(sizeof(*nx));
	int rc = cur && nx ? 0 : err_set(e, -ENOMEM, "out of memory");
	if (rc == 0)
		*cur = *in;
	if (p < end && (*p == '@' || *p == '$'))
		p++;
	while (rc == 0 && p < end) {
		nx->n = 0;
		if (*p == '.' && p + 1 < end && p[1] == '.') {
			rc = err_set(e, -EINVAL, "recursive descent (..) is not supported");
		} else if (*p == '.' && p + 1 < end && p[1] == '*') {
			all_children(cur, nx);
			p += 2;
		} else if (*p == '.') {
			size_t n = strcspn(p + 1, ".[");
			if (p + 1 + n > end)
				n = (size_t)(end - p - 1);
			if (n)
				field(cur, p + 1, n, nx);
			else
				*nx = *cur; /* "{.}": the object itself */
			p += 1 + n;
		} else if (*p == '[') {
			rc = bracket(p + 1, end, cur, nx, &p, e);
		} else {
			rc = err_set(e, -EINVAL, "unrecognized character in action: %c", *p);
		}
		if (rc == 0)
			*cur = *nx;
	}
	if (rc == 0)
		for (size_t i = 0; i < cur->n; i++)
			push(out, cur->v[i]);
	free(cur);
	free(nx);
	return rc;
}

/* ---- templates ----------------------------------------------------------------------------- */

/* The end of the action that starts at p ('{'), honouring quoted strings; NULL if none. */
static const char *action_end(const char *p, const char *end)
{
	char q = 0;
	for (p++; p < end; p++) {
		if (q && *p == '\\')
			p++;
		else if (q && *p == q)
			q = 0;
		else if (!q && (*p == '"' || *p == '\''))
			q = *p;
		else if (!q && *p == '}')
			return p;
	}
	return NULL;
}

static void put_literal(FILE *f, const char *p, const char *end)
{
	for (p++, end--; p < end; p++) {
		if (*p == '\\' && p + 1 < end) {
			p++;
			fputc(*p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p, f);
		} else {
			fputc(*p, f);
		}
	}
}

static int run(FILE *f, const cJSON *root, const char *p, const char *end, struct err *e);

/* {range PATH}BODY{end}: BODY once per result, with that result as its root. */
static int run_range(FILE *f, const cJSON *root, const char *path, const char *pend, const char **p,
                     const char *end, struct err *e)
{
	const char *body = *p, *q = body;
	int depth = 1;
	while (q < end && depth) {
		const char *o = memchr(q, '{', (size_t)(end - q)), *c;
		if (!o || !(c = action_end(o, end)))
			return err_set(e, -EINVAL, "unterminated range");
		if (!strncmp(o + 1, "range ", 6))
			depth++;
		else if (c - o == 4 && !strncmp(o + 1, "end", 3) && --depth == 0) {
			struct nodes in = {.n = 0}, *out = malloc(sizeof(*out));
			int rc = out ? 0 : err_set(e, -ENOMEM, "out of memory");
			push(&in, root);
			if (out)
				out->n = 0;
			if (rc == 0)
				rc = eval(path, pend, &in, out, e);
			for (size_t i = 0; rc == 0 && out && i < out->n; i++)
				rc = run(f, out->v[i], body, o, e);
			free(out);
			*p = c + 1;
			return rc;
		}
		q = c + 1;
	}
	return err_set(e, -EINVAL, "unterminated range");
}

static int action(FILE *f, const cJSON *root, const char *a, const char *aend, const char **p,
                  const char *end, struct err *e)
{
	while (a < aend && *a == ' ')
		a++;
	while (aend > a && aend[-1] == ' ')
		aend--;
	if (a < aend && (*a == '"' || *a == '\'')) {
		put_literal(f, a, aend);
		return 0;
	}
	if (!strncmp(a, "range ", 6))
		return run_range(f, root, a + 6, aend, p, end, e);
	if (aend - a == 3 && !strncmp(a, "end", 3))
		return err_set(e, -EINVAL, "not in range, nothing to end");
	struct nodes in = {.n = 0}, *out = malloc(sizeof(*out));
	if (!out)
		return err_set(e, -ENOMEM, "out of memory");
	out->n = 0;
	push(&in, root);
	int rc = eval(a, aend, &in, out, e);
	for (size_t i = 0; rc == 0 && i < out->n; i++) {
		if (i)
			fputc(' ', f);
		put_result(f, out->v[i]);
	}
	free(out);
	return rc;
}

static int run(FILE *f, const cJSON *root, const char *p, const char *end, struct err *e)
{
	while (p < end) {
		const char *o = memchr(p, '{', (size_t)(end - p)), *c;
		if (!o) {
			fwrite(p, 1, (size_t)(end - p), f);
			return 0;
		}
		fwrite(p, 1, (size_t)(o - p), f);
		if (!(c = action_end(o, end)))
			return err_set(e, -EINVAL, "unclosed action");
		p = c + 1;
		int rc = action(f, root, o + 1, c, &p, end, e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int model_kpath_template(const void *json, const char *tmpl, char **out, struct err *e)
{
	size_t len = 0;
	FILE *f = open_memstream(out, &len);
	if (!f)
		return err_set(e, -ENOMEM, "out of memory");
	int rc = run(f, json, tmpl, tmpl + strlen(tmpl), e);
	fclose(f);
	if (rc < 0) {
		err_prefix(e, "error parsing jsonpath %s", tmpl);
		free(*out);
		*out = NULL;
	}
	return rc;
}

int model_kpath_cell(const void *json, const char *path, char **out, struct err *e)
{
	size_t len = 0, n = strlen(path);
	const char *p = path, *end = path + n;
	if (n >= 2 && path[0] == '{' && path[n - 1] == '}') { /* {.a.b} as .a.b */
		p++;
		end--;
	}
	struct nodes in = {.n = 0}, *res = malloc(sizeof(*res));
	if (!res)
		return err_set(e, -ENOMEM, "out of memory");
	res->n = 0;
	push(&in, json);
	char rel[1024];
	if (isalpha((unsigned char)*p) && (size_t)(end - p) < sizeof(rel) - 1) { /* a.b as .a.b */
		snprintf(rel, sizeof(rel), ".%.*s", (int)(end - p), p);
		p = rel;
		end = rel + strlen(rel);
	}
	int rc = *p == '.' || *p == '[' || *p == '@' || *p == '$'
	             ? eval(p, end, &in, res, e)
	             : err_set(e, -EINVAL,
	                       "unexpected path string, expected a 'name1.name2' or "
	                       "'.name1.name2' or '{name1.name2}' or '{.name1.name2}'");
	FILE *f = rc == 0 ? open_memstream(out, &len) : NULL;
	if (rc == 0 && !f)
		rc = err_set(e, -ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < res->n; i++) {
		if (i)
			fputc(',', f);
		put_go(f, res->v[i]);
	}
	if (f) {
		if (res->n == 0)
			fputs("<none>", f);
		fclose(f);
	}
	free(res);
	return rc;
}

/* ---- documents and custom columns ---------------------------------------------------------- */

void *model_kpath_doc(const struct model_kind *k, const void *items, size_t n, bool single)
{
	if (single)
		return n == 1 ? model_encode(k, items) : NULL;
	cJSON *list = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *md = cJSON_CreateObject();
	cJSON_AddStringToObject(list, "apiVersion", "v1");
	cJSON_AddItemToObject(list, "items", arr);
	cJSON_AddStringToObject(list, "kind", "List");
	cJSON_AddStringToObject(md, "resourceVersion", "");
	cJSON_AddItemToObject(list, "metadata", md);
	for (size_t i = 0; i < n; i++) {
		cJSON *o = model_encode(k, (const char *)items + i * k->type->size);
		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(list);
			return NULL;
		}
	}
	return list;
}

int model_kpath_doc_add(void *doc, const struct model_kind *k, const void *obj)
{
	cJSON *o = model_encode(k, obj);
	if (o && cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(doc, "items"), o))
		return 0;
	cJSON_Delete(o);
	return -ENOMEM;
}

void model_kpath_doc_free(void *doc)
{
	cJSON_Delete(doc);
}

static void omit_managed_fields(cJSON *obj)
{
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
	                                        "managedFields");
}

int model_kpath_json(void *doc, char **out)
{
	cJSON *d = doc, *it;
	size_t len = 0;
	if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(d, "items")))
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(d, "items"))
		    omit_managed_fields(it);
	else
		omit_managed_fields(d);
	FILE *f = open_memstream(out, &len);
	if (!f)
		return -ENOMEM;
	put_json_indented(f, d, 0);
	fputc('\n', f);
	if (fclose(f) == 0)
		return 0;
	free(*out);
	*out = NULL;
	return -ENOMEM;
}

/* The List's text around its items, as put_json_indented prints the whole document. */
void model_kpath_json_list_begin(FILE *f)
{
	fputs("{\n    \"apiVersion\": \"v1\",\n    \"items\": [", f);
}

int model_kpath_json_list_item(FILE *f, const struct model_kind *k, const void *obj, size_t i)
{
	cJSON *o = model_encode(k, obj);
	if (!o)
		return -ENOMEM;
	omit_managed_fields(o);
	if (i)
		fputc(',', f);
	put_indent(f, 2);
	put_json_indented(f, o, 2);
	cJSON_Delete(o);
	return 0;
}

void model_kpath_json_list_end(FILE *f, size_t n)
{
	if (n)
		put_indent(f, 1);
	fputs("],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": "
	      "\"\"\n    }\n}\n",
	      f);
}

#define MAX_COLS 32

struct columns {
	size_t n;
	char *name[MAX_COLS], *path[MAX_COLS];
};

static void columns_free(struct columns *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->name[i]);
		free(c->path[i]);
	}
}

/* "NAME:PATH,NAME:PATH" as kubectl splits it. */
static int columns_parse(const char *spec, struct columns *c, struct err *e)
{
	const char *p = spec;
	c->n = 0;
	if (!*spec)
		return err_set(e, -EINVAL,
		               "custom-columns format specified but no custom columns given");
	while (*p) {
		size_t n = strcspn(p, ",");
		const char *colon = memchr(p, ':', n);
		if (!colon || c->n == MAX_COLS)
			return err_set(e, -EINVAL,
			               "unexpected custom-columns spec: %.*s, expected "
			               "<header>:<json-path-expr>",
			               (int)n, p);
		c->name[c->n] = strndup(p, (size_t)(colon - p));
		c->path[c->n] = strndup(colon + 1, n - (size_t)(colon - p) - 1);
		if (!c->name[c->n] || !c->path[c->n]) {
			c->n++;
			return err_set(e, -ENOMEM, "out of memory");
		}
		c->n++;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* A line of cells padded as kubectl's tabwriter does (minimum width 6, padding 3; the last
 * cell unpadded). */
static void put_row(FILE *f, char *const *cells, const size_t *width, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t w = width[i] + 3 < 6 ? 6 : width[i] + 3;
		if (i + 1 < n)
			fprintf(f, "%-*s", (int)w, cells[i]);
		else
			fprintf(f, "%s\n", cells[i]);
	}
}

static int column_cells(const struct columns *c, const cJSON *obj, char **row, size_t *width,
                        struct err *e)
{
	for (size_t j = 0; j < c->n; j++) {
		int rc = model_kpath_cell(obj, c->path[j], &row[j], e);
		if (rc < 0)
			return rc;
		if (strlen(row[j]) > width[j])
			width[j] = strlen(row[j]);
	}
	return 0;
}

int model_kpath_columns(const void *doc, const char *spec, char **out, struct err *e)
{
	struct columns c;
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items"), *it;
	size_t nrow = cJSON_IsArray(items) ? (size_t)cJSON_GetArraySize(items) : 1, len = 0, r = 0;
	size_t width[MAX_COLS] = {0};
	int rc = columns_parse(spec, &c, e);
	char **cells = rc == 0 ? calloc((nrow + 1) * MAX_COLS, sizeof(char *)) : NULL;
	if (rc == 0 && !cells)
		rc = err_set(e, -ENOMEM, "out of memory");
	for (size_t j = 0; rc == 0 && j < c.n; j++) {
		if (!(cells[j] = strdup(c.name[j])))
			rc = err_set(e, -ENOMEM, "out of memory");
		width[j] = strlen(c.name[j]);
	}
	if (rc == 0 && !cJSON_IsArray(items))
		rc = column_cells(&c, doc, &cells[MAX_COLS], width, e);
	const cJSON *rows = rc == 0 && cJSON_IsArray(items) ? items : NULL;
	cJSON_ArrayForEach(it, rows)
	{
		if ((rc = column_cells(&c, it, &cells[(++r) * MAX_COLS], width, e)) < 0)
			break;
	}
	FILE *f = rc == 0 ? open_memstream(out, &len) : NULL;
	if (rc == 0 && !f)
		rc = err_set(e, -ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i <= nrow; i++)
		put_row(f, &cells[i * MAX_COLS], width, c.n);
	if (f)
		fclose(f);
	for (size_t i = 0; cells && i < (nrow + 1) * MAX_COLS; i++)
		free(cells[i]);
	free(cells);
	columns_free(&c);
	return rc;
}
