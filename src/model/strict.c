/* model strict: the fields of an object file that the API server's strict field validation
 * refuses (model.h: model_strict_fields). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "model/codec.h"
#include "rules/keys.h"

/* Members of ObjectMeta the API server knows and the model does not type. */
static const char *const meta_extra[] = {"generateName", "selfLink", "deletionGracePeriodSeconds",
                                         "managedFields", NULL};
/* Members of every object beside the kind's type (TypeMeta). */
static const char *const top_extra[] = {"apiVersion", "kind", NULL};

struct findings {
	char *out;
	size_t cap, len;
	int n;
	bool prune;
};

static void note(struct findings *f, const char *what, const char *path)
{
	f->n++;
	if (f->len + 1 >= f->cap)
		return;
	int w = snprintf(f->out + f->len, f->cap - f->len, "%s%s field \"%s\"", f->len ? "\n" : "",
	                 what, path);
	f->len = w < 0 || (size_t)w >= f->cap - f->len ? f->cap - 1 : f->len + (size_t)w;
}

static const struct model_field *field_of(const struct model_type *t, const char *key)
{
	for (size_t i = 0; t && i < t->n_fields; i++)
		if (!strcmp(t->fields[i].key, key))
			return &t->fields[i];
	return NULL;
}

static bool listed(const char *const *names, const char *key)
{
	for (; names && *names; names++)
		if (!strcmp(*names, key))
			return true;
	return false;
}

static bool given_after(const cJSON *it, const char *key)
{
	for (it = it->next; it; it = it->next)
		if (!strcmp(it->string, key))
			return true;
	return false;
}

static bool given_before(const cJSON *o, const cJSON *it)
{
	for (const cJSON *p = o->child; p != it; p = p->next)
		if (!strcmp(p->string, it->string))
			return true;
	return false;
}

/* How the members of an object are checked: against a type (every member must be one of its
 * fields or of extra), or only for duplicates (any (NULL): maps and kinds the model does not
 * type whole). */
struct shape {
	const struct model_type *type;
	const char *const *extra;
	bool any;
};

static void walk(const struct shape *s, cJSON *o, const char *path, struct findings *f);

static void walk_value(const struct shape *s, cJSON *v, const char *path, struct findings *f)
{
	if (cJSON_IsObject(v)) {
		walk(s, v, path, f);
	} else if (cJSON_IsArray(v)) {
		size_t i = 0;
		for (cJSON *it = v->child; it; it = it->next, i++) {
			char p[512];
			snprintf(p, sizeof(p), "%s[%zu]", path, i);
			walk_value(s, it, p, f);
		}
	}
}

/* The shape of the value of member key, or NULL when its members are not checked (a scalar, a
 * list of strings, managedFields). */
static bool member_shape(const struct shape *s, const char *key, struct shape *out)
{
	const struct model_field *fd = s->any ? NULL : field_of(s->type, key);
	*out = (struct shape){.any = true};
	if (s->any)
		return true;
	if (!fd)
		return false;
	switch (fd->type) {
	case MODEL_OBJ:
	case MODEL_LIST:
		out->type = fd->sub;
		out->any = false;
		out->extra = fd->sub == &model_meta_type ? meta_extra : NULL;
		return true;
	case MODEL_MAP:
	case MODEL_TEXTMAP: return true;
	default: return false;
	}
}

static bool known(const struct shape *s, const char *key)
{
	return s->any || field_of(s->type, key) || listed(s->extra, key);
}

/* The object's own findings first (a key given more than once is reported once), then the
 * members that stay — with prune the others are removed — each checked in turn. */
static void walk(const struct shape *s, cJSON *o, const char *path, struct findings *f)
{
	char p[512];
	cJSON *it, *next;
	for (it = o->child; it; it = it->next) {
		snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", it->string);
		if (given_before(o, it))
			continue;
		if (given_after(it, it->string))
			note(f, "duplicate", p);
		if (!known(s, it->string))
			note(f, "unknown", p);
	}
	for (it = o->child; it; it = next) {
		next = it->next;
		if (!known(s, it->string) || given_after(it, it->string)) { /* a later one wins */
			if (f->prune)
				cJSON_Delete(cJSON_DetachItemViaPointer(o, it));
			continue;
		}
		struct shape sub;
		snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", it->string);
		if (member_shape(s, it->string, &sub))
			walk_value(&sub, it, p, f);
	}
}

int model_strict_fields(const struct model_kind *k, void *json, bool prune, char *out, size_t cap)
{
	struct findings f = {out, cap, 0, 0, prune};
	/* the pillar-csi kinds are typed whole (their CRDs' schemas); Kubernetes' own kinds only
	 * in part, so their members are checked for duplicates only */
	struct shape s = {k->type, top_extra, strcmp(k->api_version, RULES_API_VERSION) != 0};
	if (cap)
		out[0] = '\0';
	if (cJSON_IsObject((cJSON *)json))
		walk(&s, json, "", &f);
	return f.n;
}
