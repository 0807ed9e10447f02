/* yaml — one document: libyaml event stream to JSON, strictly (base/yaml.h). */
#include "base/yaml.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
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
