/* yaml — one document: libyaml event stream to JSON, strictly, and back (base/yaml.h). */
#include "base/yaml.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define MAX_DEPTH 32

struct ctx {
	yaml_parser_t p;
	struct err *e;
};

static int bad(struct ctx *c, const yaml_mark_t *m, const char *reason)
{
	return err_set(c->e, -EINVAL, "invalid document: %s at line %zu column %zu", reason,
	               m->line + 1, m->column + 1);
}

static int next(struct ctx *c, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&c->p, ev)) {
		const char *why = c->p.problem ? c->p.problem : "syntax error";
		const yaml_mark_t *m = &c->p.problem_mark;
		return err_set(c->e, -EINVAL, "invalid document: %s at line %zu column %zu", why,
		               m->line + 1, m->column + 1);
	}
	return 0;
}

static bool is_int(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static cJSON *scalar(const yaml_event_t *ev)
{
	const char *v = (const char *)ev->data.scalar.value;
	if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    (!strcmp(v, "true") || !strcmp(v, "false") || !strcmp(v, "null") || !strcmp(v, "~") ||
	     is_int(v)))
		return cJSON_CreateRaw(v);
	return cJSON_CreateString(v);
}

static int node(struct ctx *c, yaml_event_t *ev, int depth, cJSON **out);

static int check_props(struct ctx *c, const yaml_event_t *ev)
{
	const unsigned char *anchor = NULL, *tag = NULL;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		/* "\0" in a double-quoted scalar: the string would end there */
		if (memchr(ev->data.scalar.value, '\0', ev->data.scalar.length))
			return bad(c, &ev->start_mark, "a string contains a NUL byte");
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	case YAML_ALIAS_EVENT: return bad(c, &ev->start_mark, "aliases are not allowed");
	default: break;
	}
	if (anchor)
		return bad(c, &ev->start_mark, "anchors are not allowed");
	if (tag)
		return bad(c, &ev->start_mark, "tags are not allowed");
	return 0;
}

/* The items of a sequence whose start event was consumed. */
static int sequence(struct ctx *c, int depth, cJSON **out)
{
	cJSON *arr = cJSON_CreateArray();
	int r;
	if (!arr)
		return -ENOMEM;
	for (;;) {
		yaml_event_t x;
		cJSON *item;
		if ((r = next(c, &x)) < 0)
			break;
		if (x.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&x);
			*out = arr;
			return 0;
		}
		if ((r = node(c, &x, depth + 1, &item)) < 0)
			break;
		if (!cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			r = -ENOMEM;
			break;
		}
	}
	cJSON_Delete(arr);
	return r;
}

/* One key of a mapping (k, consumed here) into key; duplicates and non-scalars refused. */
static int map_key(struct ctx *c, const cJSON *obj, yaml_event_t *k, char *key, size_t cap)
{
	int r = check_props(c, k);
	if (r >= 0 && k->type != YAML_SCALAR_EVENT)
		r = bad(c, &k->start_mark, "mapping keys must be scalars");
	if (r >= 0) {
		if (k->data.scalar.length >= cap) {
			r = bad(c, &k->start_mark, "mapping key too long");
		} else if (snprintf(key, cap, "%s", (const char *)k->data.scalar.value),
		           cJSON_GetObjectItemCaseSensitive(obj, key)) {
			char why[320];
			snprintf(why, sizeof(why), "duplicate key \"%s\"", key);
			r = bad(c, &k->start_mark, why);
		}
	}
	yaml_event_delete(k);
	return r;
}

/* The entries of a mapping whose start event was consumed. */
static int mapping(struct ctx *c, int depth, cJSON **out)
{
	cJSON *obj = cJSON_CreateObject();
	int r;
	if (!obj)
		return -ENOMEM;
	for (;;) {
		yaml_event_t k, v;
		char key[256];
		cJSON *val;
		if ((r = next(c, &k)) < 0)
			break;
		if (k.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&k);
			*out = obj;
			return 0;
		}
		if ((r = map_key(c, obj, &k, key, sizeof(key))) < 0 || (r = next(c, &v)) < 0 ||
		    (r = node(c, &v, depth + 1, &val)) < 0)
			break;
		if (!cJSON_AddItemToObject(obj, key, val)) { /* the key's copy failed */
			cJSON_Delete(val);
			r = -ENOMEM;
			break;
		}
	}
	cJSON_Delete(obj);
	return r;
}

/* ev is the already-read first event of the node; it is consumed (deleted) here. */
static int node(struct ctx *c, yaml_event_t *ev, int depth, cJSON **out)
{
	int r;
	*out = NULL;
	if ((r = check_props(c, ev)) < 0)
		goto done;
	if (depth > MAX_DEPTH) {
		r = bad(c, &ev->start_mark, "nesting too deep");
		goto done;
	}
	if (ev->type == YAML_SCALAR_EVENT) {
		*out = scalar(ev);
		r = *out ? 0 : -ENOMEM;
		goto done;
	}
	if (ev->type == YAML_SEQUENCE_START_EVENT) {
		yaml_event_delete(ev);
		return sequence(c, depth, out);
	}
	if (ev->type == YAML_MAPPING_START_EVENT) {
		yaml_event_delete(ev);
		return mapping(c, depth, out);
	}
	r = bad(c, &ev->start_mark, "unexpected event");
done:
	yaml_event_delete(ev);
	return r;
}

int yaml_doc_parse(const char *text, size_t len, cJSON **out, struct err *e)
{
	struct ctx c = {.e = e};
	yaml_event_t ev;
	cJSON *root = NULL;
	int r;

	*out = NULL;
	if (!yaml_parser_initialize(&c.p))
		return err_set(e, -ENOMEM, "invalid document: out of memory");
	yaml_parser_set_input_string(&c.p, (const unsigned char *)text, len);
	/* STREAM-START */
	if ((r = next(&c, &ev)) < 0)
		goto out;
	yaml_event_delete(&ev);
	if ((r = next(&c, &ev)) < 0)
		goto out;
	if (ev.type != YAML_DOCUMENT_START_EVENT) {
		yaml_mark_t m = ev.start_mark;
		yaml_event_delete(&ev);
		r = bad(&c, &m, "the document is empty; its root must be a mapping");
		goto out;
	}
	yaml_event_delete(&ev);
	if ((r = next(&c, &ev)) < 0)
		goto out;
	if (ev.type != YAML_MAPPING_START_EVENT && ev.type != YAML_ALIAS_EVENT) {
		yaml_mark_t m = ev.start_mark;
		bool props = check_props(&c, &ev) < 0;
		yaml_event_delete(&ev);
		if (!props)
			r = bad(&c, &m, "the document root must be a mapping");
		else
			r = -EINVAL;
		goto out;
	}
	if ((r = node(&c, &ev, 0, &root)) < 0)
		goto out;
	if ((r = next(&c, &ev)) < 0) /* DOCUMENT-END */
		goto out;
	yaml_event_delete(&ev);
	if ((r = next(&c, &ev)) < 0)
		goto out;
	if (ev.type != YAML_STREAM_END_EVENT) {
		yaml_mark_t m = ev.start_mark;
		yaml_event_delete(&ev);
		r = bad(&c, &m, "multiple documents are not allowed");
		goto out;
	}
	yaml_event_delete(&ev);
	*out = root;
	root = NULL;
	r = 0;
out:
	cJSON_Delete(root);
	yaml_parser_delete(&c.p);
	return r;
}

/* ---- emitting --------------------------------------------------------------------------------- */

/* true when a plain scalar s would read back as something other than a string (YAML 1.1 and
 * 1.2 core: booleans, null, numbers), so it must be quoted. */
static bool plain_ambiguous(const char *s)
{
	static const char *const words[] = {"true", "false", "yes", "no",   "on",
	                                    "off",  "y",     "n",   "null", "~"};
	if (!*s)
		return true;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcasecmp(s, words[i]))
			return true;
	const char *p = s + (*s == '-' || *s == '+');
	bool digit = (*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9');
	return (digit && strspn(p, "0123456789._eExXoObB+-:abcdefABCDEF") == strlen(p)) ||
	       !strcasecmp(p, ".inf") || !strcasecmp(p, ".nan");
}

static int emit_scalar(yaml_emitter_t *em, const char *text, bool string)
{
	yaml_event_t ev;
	bool plain = !string || !plain_ambiguous(text);
	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text),
	                                  plain, 1, YAML_ANY_SCALAR_STYLE))
		return -ENOMEM;
	return yaml_emitter_emit(em, &ev) ? 0 : -ENOMEM;
}

static int cmp_keys(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static int emit_value(yaml_emitter_t *em, const cJSON *v, int depth)
{
	yaml_event_t ev;
	char num[32];
	if (depth > MAX_DEPTH)
		return -EINVAL;
	if (cJSON_IsString(v))
		return emit_scalar(em, v->valuestring, true);
	if (cJSON_IsBool(v))
		return emit_scalar(em, cJSON_IsTrue(v) ? "true" : "false", false);
	if (cJSON_IsNumber(v)) {
		if (v->valuestring) /* an exact integer of base/json.h */
			return emit_scalar(em, v->valuestring, false);
		snprintf(num, sizeof(num), "%.17g", v->valuedouble);
		return emit_scalar(em, num, false);
	}
	if (cJSON_IsRaw(v))
		return emit_scalar(em, v->valuestring, false);
	if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
		return emit_scalar(em, "null", false);
	int n = cJSON_GetArraySize(v), r = 0;
	const cJSON **items = calloc((size_t)n + 1, sizeof(*items)), *c;
	if (!items)
		return -ENOMEM;
	n = 0;
	cJSON_ArrayForEach(c, v) items[n++] = c;
	if (cJSON_IsObject(v)) {
		qsort(items, (size_t)n, sizeof(*items), cmp_keys);
		r = yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
		                                        YAML_ANY_MAPPING_STYLE) &&
		            yaml_emitter_emit(em, &ev)
		        ? 0
		        : -ENOMEM;
		for (int i = 0; i < n && r == 0; i++)
			if ((r = emit_scalar(em, items[i]->string, true)) == 0)
				r = emit_value(em, items[i], depth + 1);
		if (r == 0 &&
		    !(yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev)))
			r = -ENOMEM;
	} else {
		r = yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
		                                         YAML_ANY_SEQUENCE_STYLE) &&
		            yaml_emitter_emit(em, &ev)
		        ? 0
		        : -ENOMEM;
		for (int i = 0; i < n && r == 0; i++)
			r = emit_value(em, items[i], depth + 1);
		if (r == 0 &&
		    !(yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev)))
			r = -ENOMEM;
	}
	free(items);
	return r;
}

static int write_text(void *data, unsigned char *buf, size_t size)
{
	return fwrite(buf, 1, size, data) == size;
}

char *yaml_emit(const cJSON *v)
{
	yaml_emitter_t em;
	yaml_event_t ev;
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem || !yaml_emitter_initialize(&em)) {
		if (mem)
			fclose(mem);
		free(text);
		return NULL;
	}
	yaml_emitter_set_output(&em, write_text, mem);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);
	int r = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
	                yaml_emitter_emit(&em, &ev) &&
	                yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
	                yaml_emitter_emit(&em, &ev)
	            ? emit_value(&em, v, 0)
	            : -ENOMEM;
	if (r == 0 && !(yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
	                yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev)))
		r = -ENOMEM;
	yaml_emitter_delete(&em);
	fclose(mem);
	if (r < 0) {
		free(text);
		return NULL;
	}
	return text;
}
