/* model codec engine: JSON object <-> struct, driven by the field tables of each kind. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/str.h"
#include "model/model.h"

#define AT(obj, off, T)  ((T *)((char *)(obj) + (off)))
#define CAT(obj, off, T) ((const T *)((const char *)(obj) + (off)))

/* How a decode reads (model.h): lax (model_decode: null is absent, members the type does not
 * know are kept) or strict (model_type_decode_strict); by_rule tells a type's rules' error. */
struct reading {
	struct err *e;
	bool strict, by_rule;
};

static int decode_type(const struct model_type *t, const cJSON *o, void *obj, const char *path,
                       struct reading *rd, const void *earlier, size_t index);
static cJSON *encode_type(const struct model_type *t, const void *obj);

/* ---- scalars ------------------------------------------------------------------------------ */

enum want { WANT_STRING, WANT_QTY, WANT_INT, WANT_BOOL, WANT_MAP, WANT_STRS, WANT_LIST, WANT_OBJ };

static int type_err(struct reading *rd, const char *path, enum want w)
{
	static const char *const lax[] = {"a string",
	                                  "a quantity",
	                                  "an integer",
	                                  "true or false",
	                                  "a mapping of strings",
	                                  "a list of strings",
	                                  "a list",
	                                  "a mapping"};
	static const char *const strict[] = {
	    "string", "string or integer", "integer", "boolean", "object", "array", "array",
	    "object"};
	if (rd->strict)
		return err_set(rd->e, -EINVAL, "%s: expected %s", path[0] ? path : "(root)",
		               strict[w]);
	return err_set(rd->e, -EINVAL, "%s must be %s", path, lax[w]);
}

static int dec_bool(const cJSON *v, bool *out)
{
	if (cJSON_IsBool(v)) {
		*out = cJSON_IsTrue(v);
		return 0;
	}
	if (cJSON_IsRaw(v) && v->valuestring &&
	    (!strcmp(v->valuestring, "true") || !strcmp(v->valuestring, "false"))) {
		*out = v->valuestring[0] == 't';
		return 0;
	}
	return -EINVAL;
}

/* Literal text of a scalar: strings, YAML plain scalars, integers, booleans. */
static int dec_text(const cJSON *v, char **out)
{
	char buf[32];
	int64_t i;
	const char *s = NULL;
	if (cJSON_IsString(v) || (cJSON_IsRaw(v) && v->valuestring))
		s = v->valuestring;
	else if (cJSON_IsNumber(v) && json_int64_of(v, &i) == 0)
		snprintf(buf, sizeof(buf), "%lld", (long long)i), s = buf;
	else if (cJSON_IsBool(v))
		s = cJSON_IsTrue(v) ? "true" : "false";
	if (!s)
		return -EINVAL;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

/* path.key (a path too long is shortened, never cut unseen) */
static void member_path(char *p, size_t cap, const char *path, const char *key)
{
	if (snprintf(p, cap, "%s%s%s", path, path[0] ? "." : "", key) >= (int)cap)
		p[cap - 2] = '~';
}

static int dec_map(const cJSON *v, struct model_map *m, bool text, const char *path,
                   struct reading *rd)
{
	const cJSON *it;
	if (!cJSON_IsObject(v))
		return type_err(rd, path, WANT_MAP);
	cJSON_ArrayForEach(it, v)
	{
		char *s = NULL, p[512];
		int r = text ? dec_text(it, &s)
		             : (cJSON_IsString(it) ? ((s = strdup(it->valuestring)) ? 0 : -ENOMEM)
		                                   : -EINVAL);
		if (r == -EINVAL) {
			member_path(p, sizeof(p), path, it->string);
			return type_err(rd, p, WANT_STRING);
		}
		if (r == 0)
			r = model_map_set(m, it->string, s);
		free(s);
		if (r < 0)
			return r;
	}
	return 0;
}

static int dec_strs(const cJSON *v, struct model_strs *l, const char *path, struct reading *rd)
{
	const cJSON *it;
	size_t i = 0;
	if (!cJSON_IsArray(v))
		return type_err(rd, path, WANT_STRS);
	cJSON_ArrayForEach(it, v)
	{
		char p[512];
		if (!cJSON_IsString(it) && !rd->strict)
			return type_err(rd, path, WANT_STRS);
		if (!cJSON_IsString(it)) {
			if (snprintf(p, sizeof(p), "%s[%zu]", path, i) >= (int)sizeof(p))
				p[sizeof(p) - 2] = '~';
			return type_err(rd, p, WANT_STRING);
		}
		if (model_strs_add(l, it->valuestring) < 0)
			return -ENOMEM;
		i++;
	}
	return 0;
}

static int dec_list(const struct model_field *f, const cJSON *v, void *obj, const char *path,
                    struct reading *rd)
{
	if (!cJSON_IsArray(v))
		return type_err(rd, path, WANT_LIST);
	size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
	if (n == 0)
		return 0;
	char *arr = calloc(n, f->sub->size);
	if (!arr)
		return -ENOMEM;
	*AT(obj, f->off, void *) = arr;
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		char p[512];
		if (snprintf(p, sizeof(p), "%s[%zu]", path, i) >= (int)sizeof(p))
			p[sizeof(p) - 2] =
			    '~'; /* a path that long is shortened, never cut unseen */
		int r = decode_type(f->sub, it, arr + i * f->sub->size, p, rd, arr, i);
		*AT(obj, f->n_off, size_t) = ++i; /* cleared by the caller on error */
		if (r < 0)
			return r;
	}
	return 0;
}

static int dec_field(const struct model_field *f, const cJSON *v, void *obj, const char *path,
                     struct reading *rd)
{
	if (f->has_off != MODEL_NONE)
		*AT(obj, f->has_off, bool) = true;
	switch (f->type) {
	case MODEL_STR:
		if (!cJSON_IsString(v))
			return type_err(rd, path, WANT_STRING);
		return model_str_set(AT(obj, f->off, char *), v->valuestring);
	case MODEL_QTY: {
		int64_t i;
		char buf[32];
		if (cJSON_IsString(v))
			return model_str_set(AT(obj, f->off, char *), v->valuestring);
		if (json_int64_of(v, &i) < 0 || !cJSON_IsNumber(v))
			return type_err(rd, path, WANT_QTY);
		snprintf(buf, sizeof(buf), "%lld", (long long)i);
		return model_str_set(AT(obj, f->off, char *), buf);
	}
	case MODEL_INT:
		return json_int64_of(v, AT(obj, f->off, int64_t)) < 0 ? type_err(rd, path, WANT_INT)
		                                                      : 0;
	case MODEL_BOOL:
		return dec_bool(v, AT(obj, f->off, bool)) < 0 ? type_err(rd, path, WANT_BOOL) : 0;
	case MODEL_MAP:
	case MODEL_TEXTMAP:
		return dec_map(v, AT(obj, f->off, struct model_map), f->type == MODEL_TEXTMAP, path,
		               rd);
	case MODEL_STRS: return dec_strs(v, AT(obj, f->off, struct model_strs), path, rd);
	case MODEL_OBJ: return decode_type(f->sub, v, AT(obj, f->off, char), path, rd, NULL, 0);
	case MODEL_LIST: return dec_list(f, v, obj, path, rd);
	case MODEL_ANY: return 0;
	}
	return -EINVAL;
}

static const struct model_field *field_of(const struct model_type *t, const char *key)
{
	for (size_t i = 0; i < t->n_fields; i++)
		if (!strcmp(t->fields[i].key, key))
			return &t->fields[i];
	return NULL;
}

static bool typed(const struct model_type *t, const char *key)
{
	return field_of(t, key) != NULL;
}

/* What `rest` keeps of o: the members t does not type (or types as MODEL_ANY), whole; a typed
 * member only as its place (false), or as it is when encoding looks at it (null stays null, an
 * empty collection stays) — its value lives in the struct. */
static cJSON *rest_of(const struct model_type *t, const cJSON *o)
{
	cJSON *rest = cJSON_CreateObject();
	const cJSON *it;
	cJSON_ArrayForEach(it, o)
	{
		const struct model_field *f = field_of(t, it->string);
		bool keep = !f || f->type == MODEL_ANY || cJSON_IsNull(it) ||
		            ((cJSON_IsArray(it) || cJSON_IsObject(it)) && !it->child);
		cJSON *v = keep ? cJSON_Duplicate(it, true) : cJSON_CreateFalse();
		if (!rest || !v || !cJSON_AddItemToObject(rest, it->string, v)) {
			cJSON_Delete(v);
			cJSON_Delete(rest);
			return NULL;
		}
	}
	return rest;
}

/* Strict reading of o's members before their values: each a field of t and given once (in
 * document order, the first fault is the error), each given field's has flag set, then the
 * rules on which are given. */
static int strict_members(const struct model_type *t, const cJSON *o, void *obj, const char *path,
                          struct reading *rd)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, o)
	{
		const struct model_field *f = field_of(t, it->string);
		char p[512];
		member_path(p, sizeof(p), path, it->string);
		if (!f)
			return err_set(rd->e, -EINVAL, "unknown field \"%s\"", p);
		if (cJSON_GetObjectItemCaseSensitive(o, it->string) != it)
			return err_set(rd->e, -EINVAL, "duplicate field \"%s\"", p);
		if (f->has_off != MODEL_NONE)
			*AT(obj, f->has_off, bool) = true;
	}
	if (t->rules && t->rules->given && t->rules->given(obj, path, rd->e) < 0)
		return rd->by_rule = true, -EINVAL;
	return 0;
}

static int decode_type(const struct model_type *t, const cJSON *o, void *obj, const char *path,
                       struct reading *rd, const void *earlier, size_t index)
{
	int r;
	if (!cJSON_IsObject(o))
		return type_err(rd, path[0] || rd->strict ? path : t->name, WANT_OBJ);
	cJSON *rest = rest_of(t, o);
	if (!rest)
		return -ENOMEM;
	*(void **)obj = rest;
	if (rd->strict && (r = strict_members(t, o, obj, path, rd)) < 0)
		return r;
	for (size_t i = 0; i < t->n_fields; i++) {
		const struct model_field *f = &t->fields[i];
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f->key);
		char p[512];
		if (!v || (cJSON_IsNull(v) && !rd->strict))
			continue;
		member_path(p, sizeof(p), path, f->key);
		if ((r = dec_field(f, v, obj, p, rd)) < 0)
			return r == -ENOMEM ? err_set(rd->e, -ENOMEM, "out of memory") : r;
	}
	if (rd->strict && t->rules && t->rules->check &&
	    t->rules->check(obj, path, earlier, index, rd->e) < 0)
		return rd->by_rule = true, -EINVAL;
	return 0;
}

/* ---- encoding ------------------------------------------------------------------------------ */

/* Sets key to item (NULL: removes key), keeping the key's position when it exists. */
/* o[key] = item (NULL removes the member).  false when out of memory (item is then freed or
 * owned by o): cJSON's replace keeps an item whose key it could not copy, keyless, and its add
 * drops the item, so both are checked — a member must never be lost or renamed silently. */
static bool put(cJSON *o, const char *key, cJSON *item)
{
	if (!item) {
		if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, key))) /* null stays null */
			cJSON_DeleteItemFromObjectCaseSensitive(o, key);
		return true;
	}
	if (cJSON_GetObjectItemCaseSensitive(o, key)) {
		if (!cJSON_ReplaceItemInObjectCaseSensitive(o, key, item)) {
			cJSON_Delete(item);
			return false;
		}
		return item->string != NULL;
	}
	if (!cJSON_AddItemToObject(o, key, item)) {
		cJSON_Delete(item);
		return false;
	}
	return true;
}

/* An empty collection stays when the input had it empty (`[]` and `{}` mean something). */
static bool was_empty(const cJSON *o, const char *key, bool array)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return v && (array ? cJSON_IsArray(v) : cJSON_IsObject(v)) && !v->child;
}

static cJSON *enc_field(const struct model_field *f, const void *obj, const cJSON *rest, bool *oom)
{
	cJSON *v = NULL;
	bool has = f->has_off == MODEL_NONE || *CAT(obj, f->has_off, bool);
	if (!has && f->type == MODEL_STRS) /* a collection with elements is present anyway */
		has = CAT(obj, f->off, struct model_strs)->n > 0;
	else if (!has && f->type == MODEL_LIST)
		has = *CAT(obj, f->n_off, size_t) > 0;
	else if (!has && (f->type == MODEL_MAP || f->type == MODEL_TEXTMAP))
		has = CAT(obj, f->off, struct model_map)->n > 0;
	if (!has)
		return NULL;
	switch (f->type) {
	case MODEL_STR:
	case MODEL_QTY: {
		const char *s = *CAT(obj, f->off, char *);
		if (!s)
			return NULL;
		v = cJSON_CreateString(s);
		break;
	}
	case MODEL_INT: v = json_int64(*CAT(obj, f->off, int64_t)); break;
	case MODEL_BOOL: v = cJSON_CreateBool(*CAT(obj, f->off, bool)); break;
	case MODEL_MAP:
	case MODEL_TEXTMAP: {
		const struct model_map *m = CAT(obj, f->off, struct model_map);
		if (!m->n && f->has_off == MODEL_NONE && !was_empty(rest, f->key, false))
			return NULL;
		v = cJSON_CreateObject();
		for (size_t i = 0; v && i < m->n; i++)
			if (!cJSON_AddStringToObject(v, m->kv[i].key, m->kv[i].value))
				cJSON_Delete(v), v = NULL;
		break;
	}
	case MODEL_STRS: {
		const struct model_strs *l = CAT(obj, f->off, struct model_strs);
		if (!l->n && f->has_off == MODEL_NONE && !was_empty(rest, f->key, true))
			return NULL;
		v = cJSON_CreateArray();
		for (size_t i = 0; v && i < l->n; i++) {
			cJSON *s = cJSON_CreateString(l->v[i]);
			if (!s || !cJSON_AddItemToArray(v, s))
				cJSON_Delete(s), cJSON_Delete(v), v = NULL;
		}
		break;
	}
	case MODEL_OBJ: {
		const void *sub = CAT(obj, f->off, char);
		v = encode_type(f->sub, sub);
		if (v && f->has_off == MODEL_NONE && !v->child && !*(void *const *)sub) {
			cJSON_Delete(v);
			return NULL;
		}
		break;
	}
	case MODEL_LIST: {
		size_t n = *CAT(obj, f->n_off, size_t);
		const char *arr = *CAT(obj, f->off, char *);
		if (!n && f->has_off == MODEL_NONE && !was_empty(rest, f->key, true))
			return NULL;
		v = cJSON_CreateArray();
		for (size_t i = 0; v && i < n; i++) {
			cJSON *it = encode_type(f->sub, arr + i * f->sub->size);
			if (!it || !cJSON_AddItemToArray(v, it))
				cJSON_Delete(it), cJSON_Delete(v), v = NULL;
		}
		break;
	}
	case MODEL_ANY: return NULL;
	}
	if (!v)
		*oom = true;
	return v;
}

static cJSON *encode_type(const struct model_type *t, const void *obj)
{
	const cJSON *rest = *(void *const *)obj;
	cJSON *o = rest ? cJSON_Duplicate(rest, true) : cJSON_CreateObject();
	bool oom = false;
	for (size_t i = 0; o && !oom && i < t->n_fields; i++)
		if (t->fields[i].type != MODEL_ANY && /* its value stays in rest */
		    !put(o, t->fields[i].key, enc_field(&t->fields[i], obj, rest, &oom)))
			oom = true;
	if (oom) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* ---- clearing ------------------------------------------------------------------------------ */

void model_type_clear(const struct model_type *t, void *obj)
{
	if (!obj)
		return;
	cJSON_Delete(*(cJSON **)obj);
	for (size_t i = 0; i < t->n_fields; i++) {
		const struct model_field *f = &t->fields[i];
		switch (f->type) {
		case MODEL_STR:
		case MODEL_QTY: free(*AT(obj, f->off, char *)); break;
		case MODEL_MAP:
		case MODEL_TEXTMAP: model_map_clear(AT(obj, f->off, struct model_map)); break;
		case MODEL_STRS: model_strs_clear(AT(obj, f->off, struct model_strs)); break;
		case MODEL_OBJ: model_type_clear(f->sub, AT(obj, f->off, char)); break;
		case MODEL_LIST: {
			char *arr = *AT(obj, f->off, char *);
			size_t n = *AT(obj, f->n_off, size_t);
			for (size_t j = 0; j < n; j++)
				model_type_clear(f->sub, arr + j * f->sub->size);
			free(arr);
			break;
		}
		case MODEL_INT:
		case MODEL_BOOL:
		case MODEL_ANY: break;
		}
	}
	memset(obj, 0, t->size);
}

size_t model_unknown_count(const struct model_type *t, const void *obj)
{
	const cJSON *it;
	size_t n = 0;
	cJSON_ArrayForEach(it, *(cJSON *const *)obj) n += !typed(t, it->string);
	return n;
}

const char *model_unknown_first(const struct model_type *t, const void *obj)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, *(cJSON *const *)obj) if (!typed(t, it->string)) return it->string;
	return NULL;
}

/* ---- kinds --------------------------------------------------------------------------------- */

int model_decode(const struct model_kind *k, const void *json, void *obj, struct err *e)
{
	const cJSON *o = json;
	const char *kind = json_get_str(o, "kind");
	memset(obj, 0, k->type->size);
	if (kind && strcmp(kind, k->kind))
		return err_set(e, -EINVAL, "object is a %s, not a %s", kind, k->kind);
	char path[512] = "";
	if (json_marked(o, path, sizeof(path))) /* a NUL byte in an API server's object */
		return err_set(e, -EINVAL, "field %s contains a NUL byte", path);
	struct reading rd = {.e = e};
	int r = decode_type(k->type, o, obj, "", &rd, NULL, 0);
	if (r < 0)
		model_clear(k, obj);
	return r;
}

void *model_encode(const struct model_kind *k, const void *obj)
{
	cJSON *o = encode_type(k->type, obj);
	if (!o)
		return NULL;
	cJSON *av = cJSON_CreateString(k->api_version), *kd = cJSON_CreateString(k->kind);
	if (!av || !kd) {
		cJSON_Delete(av);
		cJSON_Delete(kd);
		cJSON_Delete(o);
		return NULL;
	}
	if (!put(o, "apiVersion", av)) {
		cJSON_Delete(kd);
		cJSON_Delete(o);
		return NULL;
	}
	if (!put(o, "kind", kd)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

void model_clear(const struct model_kind *k, void *obj)
{
	model_type_clear(k->type, obj);
}

int model_copy(const struct model_kind *k, void *dst, const void *src)
{
	cJSON *j = model_encode(k, src);
	if (!j) {
		memset(dst, 0, k->type->size);
		return -ENOMEM;
	}
	int r = model_decode(k, j, dst, NULL);
	cJSON_Delete(j);
	return r;
}

int model_decode_text(const struct model_kind *k, const char *text, void *obj, struct err *e)
{
	cJSON *j = NULL;
	memset(obj, 0, k->type->size);
	int r = json_parse_strict(text, strlen(text), &j, e);
	if (r < 0)
		return r;
	r = model_decode(k, j, obj, e);
	cJSON_Delete(j);
	return r;
}

/* The compact text of j (NULL when j is NULL or out of memory); j is freed. */
static char *text_of(cJSON *j)
{
	char *s = j ? json_dump(j) : NULL;
	cJSON_Delete(j);
	return s;
}

char *model_encode_text(const struct model_kind *k, const void *obj)
{
	return text_of(model_encode(k, obj));
}

int model_same(const struct model_kind *k, const void *obj, const char *text, const char *part)
{
	cJSON *a = NULL, *b = model_encode(k, obj);
	int same = b && text && json_parse_strict(text, strlen(text), &a, NULL) == 0;
	if (same && part) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, part),
		            *y = cJSON_GetObjectItemCaseSensitive(b, part);
		same = x && y ? cJSON_Compare(x, y, true) : !x && !y;
	} else if (same) {
		same = cJSON_Compare(a, b, true);
	}
	cJSON_Delete(a);
	cJSON_Delete(b);
	return same;
}

int model_type_decode(const struct model_type *t, const void *json, void *obj, struct err *e)
{
	struct reading rd = {.e = e};
	memset(obj, 0, t->size);
	int r = decode_type(t, json, obj, "", &rd, NULL, 0);
	if (r < 0)
		model_type_clear(t, obj);
	return r;
}

int model_type_decode_text(const struct model_type *t, const char *text, void *obj, struct err *e)
{
	cJSON *j = NULL;
	memset(obj, 0, t->size);
	int r = json_parse_strict(text, strlen(text), &j, e);
	if (r == 0)
		r = model_type_decode(t, j, obj, e);
	cJSON_Delete(j);
	return r;
}

char *model_type_encode_text(const struct model_type *t, const void *obj)
{
	cJSON *j = encode_type(t, obj); /* a document model_doc_decode reads back (YAML) */
	char *s = j ? json_dump_for_yaml(j) : NULL;
	cJSON_Delete(j);
	return s;
}

char *model_type_encode_pretty(const struct model_type *t, const void *obj)
{
	cJSON *j = encode_type(t, obj);
	char *p = j ? json_print(j, true) : NULL, *s = p ? strdup(p) : NULL;
	cJSON_free(p);
	cJSON_Delete(j);
	return s;
}

int model_type_copy(const struct model_type *t, void *dst, const void *src)
{
	cJSON *j = encode_type(t, src);
	memset(dst, 0, t->size);
	if (!j)
		return -ENOMEM;
	struct reading rd = {0};
	int r = decode_type(t, j, dst, "", &rd, NULL, 0);
	if (r < 0)
		model_type_clear(t, dst);
	cJSON_Delete(j);
	return r;
}

int model_type_decode_strict(const struct model_type *t, const char *text, size_t len,
                             const char *prefix, void *obj, struct err *e)
{
	struct reading rd = {.e = e, .strict = true};
	cJSON *j = NULL;
	size_t at;
	memset(obj, 0, t->size);
	int r = json_parse_value(text, len, &j, &at);
	if (r == -EBADMSG)
		r = err_set(e, -EINVAL, "invalid JSON near byte %zu", at);
	else if (r < 0)
		r = err_set(e, -ENOMEM, "out of memory");
	else if ((r = json_check_strings(text, len, e)) < 0)
		r = -EINVAL;
	else if ((r = decode_type(t, j, obj, "", &rd, NULL, 0)) == -ENOMEM)
		r = err_set(e, -ENOMEM, "out of memory");
	cJSON_Delete(j);
	if (r < 0 && prefix && !rd.by_rule)
		err_prefix(e, "%s", prefix);
	if (r < 0)
		model_type_clear(t, obj);
	return r;
}

int model_names_plain(const void *obj, const struct model_name_field *f, size_t n, struct err *e)
{
	for (size_t i = 0; i < n; i++)
		if (str_has_control(*(char *const *)((const char *)obj + f[i].off)))
			return err_set(e, -EINVAL, "%s %s", f[i].path, str_fault_text(STR_CONTROL));
	return 0;
}

int model_spec_unchanged(const struct model_kind *k, const void *old, const void *obj,
                         struct err *e)
{
	cJSON *a = model_encode(k, old), *b = model_encode(k, obj);
	int r = 0;

	if (!a || !b)
		r = err_set(e, -ENOMEM, "out of memory");
	else if (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, "spec"),
	                        cJSON_GetObjectItemCaseSensitive(b, "spec"), true))
		r = err_set(e, -EINVAL, "spec is immutable");
	cJSON_Delete(a);
	cJSON_Delete(b);
	return r;
}
