/* model values: string maps and lists, metadata, conditions and the typed store operations. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "model/codec.h"
#include "model/kube.h"
#include "model/model.h"
#include "model/pillar.h"
#include "model/snapshot.h"

/* ---- strings, maps, lists ------------------------------------------------------------------ */

int model_str_set(char **dst, const char *s)
{
	char *c = NULL;
	if (s && !(c = strdup(s)))
		return -ENOMEM;
	free(*dst);
	*dst = c;
	return 0;
}

const char *model_map_get(const struct model_map *m, const char *key)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (!strcmp(m->kv[i].key, key))
			return m->kv[i].value;
	return NULL;
}

int model_map_set(struct model_map *m, const char *key, const char *value)
{
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->kv[i].key, key))
			continue;
		if (value)
			return model_str_set(&m->kv[i].value, value);
		free(m->kv[i].key);
		free(m->kv[i].value);
		memmove(&m->kv[i], &m->kv[i + 1], (m->n - i - 1) * sizeof(m->kv[0]));
		m->n--;
		return 0;
	}
	if (!value)
		return 0;
	struct model_kv *kv = realloc(m->kv, (m->n + 1) * sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	m->kv = kv;
	kv[m->n].key = strdup(key);
	kv[m->n].value = strdup(value);
	if (!kv[m->n].key || !kv[m->n].value) {
		free(kv[m->n].key);
		free(kv[m->n].value);
		return -ENOMEM;
	}
	m->n++;
	return 0;
}

void model_map_clear(struct model_map *m)
{
	for (size_t i = 0; m && i < m->n; i++) {
		free(m->kv[i].key);
		free(m->kv[i].value);
	}
	if (m) {
		free(m->kv);
		m->kv = NULL;
		m->n = 0;
	}
}

int model_map_copy(struct model_map *dst, const struct model_map *src)
{
	model_map_clear(dst);
	for (size_t i = 0; i < src->n; i++)
		if (model_map_set(dst, src->kv[i].key, src->kv[i].value) < 0) {
			model_map_clear(dst);
			return -ENOMEM;
		}
	return 0;
}

bool model_strs_has(const struct model_strs *l, const char *s)
{
	for (size_t i = 0; l && i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return true;
	return false;
}

int model_strs_add(struct model_strs *l, const char *s)
{
	char **v = realloc(l->v, (l->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->v = v;
	if (!(v[l->n] = strdup(s)))
		return -ENOMEM;
	l->n++;
	return 0;
}

int model_strs_decode_text(const char *text, struct model_strs *out)
{
	cJSON *arr = NULL, *it;
	model_strs_clear(out);
	if (json_parse_strict(text, strlen(text), &arr, NULL) < 0 || !cJSON_IsArray(arr)) {
		cJSON_Delete(arr);
		return -EINVAL;
	}
	cJSON_ArrayForEach(it, arr)
	{
		int r = cJSON_IsString(it) ? model_strs_add(out, it->valuestring) : -EINVAL;
		if (r < 0) {
			cJSON_Delete(arr);
			model_strs_clear(out);
			return r;
		}
	}
	cJSON_Delete(arr);
	return 0;
}

size_t model_strs_remove(struct model_strs *l, const char *s)
{
	size_t w = 0, removed = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (!strcmp(l->v[i], s)) {
			free(l->v[i]);
			removed++;
		} else {
			l->v[w++] = l->v[i];
		}
	}
	l->n = w;
	return removed;
}

void model_strs_clear(struct model_strs *l)
{
	for (size_t i = 0; l && i < l->n; i++)
		free(l->v[i]);
	if (l) {
		free(l->v);
		l->v = NULL;
		l->n = 0;
	}
}

int model_strs_copy(struct model_strs *dst, const struct model_strs *src)
{
	model_strs_clear(dst);
	for (size_t i = 0; i < src->n; i++)
		if (model_strs_add(dst, src->v[i]) < 0) {
			model_strs_clear(dst);
			return -ENOMEM;
		}
	return 0;
}

/* ---- quantities (crds.md §1) ------------------------------------------------------------------ */

void model_quantity_format(long long b, char *out, size_t cap)
{
	static const char *const sfx[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
	for (int i = 0; i < 6 && b != 0; i++) {
		long long unit = 1LL << (10 * (6 - i));
		if (b % unit == 0) {
			snprintf(out, cap, "%lld%s", b / unit, sfx[i]);
			return;
		}
	}
	snprintf(out, cap, "%lld", b);
}

int model_quantity_parse(const char *q, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(q, &end, 10);
	if (errno || end == q || v < 0)
		return -EINVAL;
	static const struct {
		const char *s;
		long long m;
	} u[] = {{"", 1},
	         {"Ki", 1LL << 10},
	         {"Mi", 1LL << 20},
	         {"Gi", 1LL << 30},
	         {"Ti", 1LL << 40},
	         {"Pi", 1LL << 50},
	         {"Ei", 1LL << 60},
	         {"k", 1000LL},
	         {"M", 1000000LL},
	         {"G", 1000000000LL},
	         {"T", 1000000000000LL},
	         {"P", 1000000000000000LL},
	         {"E", 1000000000000000000LL}};
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		if (!strcmp(end, u[i].s)) {
			if (v > LLONG_MAX / u[i].m)
				return -EINVAL;
			*out = v * u[i].m;
			return 0;
		}
	return -EINVAL;
}

/* ---- metadata and conditions --------------------------------------------------------------- */

#define T struct model_owner_ref
static const struct model_field owner_fields[] = {
    MODEL_F_STR("apiVersion", api_version),
    MODEL_F_STR("kind", kind),
    MODEL_F_STR("name", name),
    MODEL_F_STR("uid", uid),
    MODEL_F_BOOL("controller", controller),
    MODEL_F_BOOL("blockOwnerDeletion", block_owner_deletion),
};
#undef T
MODEL_TYPE(model_owner_ref_type, struct model_owner_ref, owner_fields);

#define T struct model_meta
static const struct model_field meta_fields[] = {
    MODEL_F_STR("name", name),
    MODEL_F_STR("namespace", ns),
    MODEL_F_STR("uid", uid),
    MODEL_F_STR("resourceVersion", resource_version),
    MODEL_F_INT("generation", generation),
    MODEL_F_STR("creationTimestamp", creation_timestamp),
    MODEL_F_STR("deletionTimestamp", deletion_timestamp),
    MODEL_F_MAP("labels", labels),
    MODEL_F_MAP("annotations", annotations),
    MODEL_F_STRS_HAS("finalizers", finalizers),
    MODEL_F_LIST("ownerReferences", owner_refs, n_owner_refs, &model_owner_ref_type),
};
#undef T
MODEL_TYPE(model_meta_type, struct model_meta, meta_fields);

#define T struct model_cond
static const struct model_field cond_fields[] = {
    MODEL_F_STR("type", type),
    MODEL_F_STR("status", status),
    MODEL_F_STR("reason", reason),
    MODEL_F_STR("message", message),
    MODEL_F_STR("lastTransitionTime", last_transition_time),
    MODEL_F_INT("observedGeneration", observed_generation),
};
#undef T
MODEL_TYPE(model_cond_type, struct model_cond, cond_fields);

uint64_t model_meta_rv(const struct model_meta *m)
{
	const char *s = m->resource_version;
	uint64_t v = 0;
	if (!s || !*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	return v;
}

const struct model_cond *model_cond_get(const struct model_conds *c, const char *type)
{
	for (size_t i = 0; c && i < c->n; i++)
		if (c->v[i].type && !strcmp(c->v[i].type, type))
			return &c->v[i];
	return NULL;
}

const char *model_cond_status(const struct model_conds *c, const char *type)
{
	const struct model_cond *x = model_cond_get(c, type);
	return x && x->status ? x->status : "";
}

const char *model_cond_reason(const struct model_conds *c, const char *type)
{
	const struct model_cond *x = model_cond_get(c, type);
	return x && x->reason ? x->reason : "";
}

static bool differs(const char *a, const char *b)
{
	return !a || strcmp(a, b);
}

int model_cond_set(struct model_conds *c, const char *type, const char *status, const char *reason,
                   const char *message, int64_t og)
{
	struct model_cond *x = (struct model_cond *)model_cond_get(c, type);
	char ts[32];
	int changed = 0;
	message = message ? message : "";
	store_timestamp(ts, sizeof(ts));
	if (!x) {
		struct model_cond *v = realloc(c->v, (c->n + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->v = v;
		x = &v[c->n++];
		memset(x, 0, sizeof(*x));
		if (model_str_set(&x->type, type) < 0)
			return -ENOMEM;
	}
	if (differs(x->status, status)) {
		if (model_str_set(&x->status, status) < 0 ||
		    model_str_set(&x->last_transition_time, ts) < 0)
			return -ENOMEM;
		changed = 1;
	}
	if (differs(x->reason, reason)) {
		if (model_str_set(&x->reason, reason) < 0)
			return -ENOMEM;
		changed = 1;
	}
	if (differs(x->message, message)) {
		if (model_str_set(&x->message, message) < 0)
			return -ENOMEM;
		changed = 1;
	}
	if (!x->has_observed_generation || x->observed_generation != og) {
		x->has_observed_generation = true;
		x->observed_generation = og;
		changed = 1;
	}
	return changed;
}

/* ---- typed store operations ---------------------------------------------------------------- */

const struct store_kind *model_store_kind(const struct model_kind *k)
{
	return store_kind_lookup(k->kind);
}

static int unknown_kind(const struct model_kind *k, struct err *e)
{
	return err_set(e, STORE_INVALID, "the store does not hold %s objects", k->kind);
}

int model_get_base(store *s, const struct model_kind *k, const char *ns, const char *name,
                   void *out, void **base, struct err *e)
{
	const struct store_kind *sk = model_store_kind(k);
	cJSON *j = NULL;
	memset(out, 0, k->type->size);
	if (base)
		*base = NULL;
	if (!sk)
		return unknown_kind(k, e);
	int r = store_get(s, sk, ns, name, &j, e);
	if (r == 0)
		r = model_decode(k, j, out, e);
	if (r == 0 && base)
		*base = j;
	else
		cJSON_Delete(j);
	return r;
}

void model_base_free(void *base)
{
	cJSON_Delete(base);
}

int model_get(store *s, const struct model_kind *k, const char *ns, const char *name, void *out,
              struct err *e)
{
	return model_get_base(s, k, ns, name, out, NULL, e);
}

int model_get_cached(store *s, const struct model_kind *k, const char *ns, const char *name,
                     void *out, struct err *e)
{
	bool was = store_cache_thread_reads(true);
	int r = model_get(s, k, ns, name, out, e);
	store_cache_thread_reads(was);
	return r;
}

void model_list_free(const struct model_kind *k, void *items, size_t n)
{
	for (size_t i = 0; items && i < n; i++)
		model_clear(k, (char *)items + i * k->type->size);
	free(items);
}

struct listing {
	const struct model_kind *k;
	char *v;
	size_t n, cap;
	struct err *e;
};

/* Decodes one listed object into the growing array (store_each_fn). */
static int list_one(cJSON *it, void *arg)
{
	struct listing *l = arg;
	size_t sz = l->k->type->size;
	struct err de = {0};
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char *v = realloc(l->v, cap * sz);
		if (!v)
			return err_set(l->e, -ENOMEM, "out of memory");
		l->v = v;
		l->cap = cap;
	}
	memset(l->v + l->n * sz, 0, sz);
	int d = model_decode(l->k, it, l->v + l->n * sz, &de);
	if (d == -ENOMEM)
		return err_set(l->e, d, "out of memory");
	if (d < 0)
		store_unreadable_report(model_store_kind(l->k), store_meta_str(it, "namespace"),
		                        store_meta_str(it, "name") ?: "", de.msg);
	else
		l->n++;
	return 0;
}

int model_list(store *s, const struct model_kind *k, const char *ns, const char *selector,
               void **items, size_t *n, uint64_t *list_rv, struct err *e)
{
	const struct store_kind *sk = model_store_kind(k);
	struct listing l = {.k = k, .e = e};
	*items = NULL;
	*n = 0;
	if (!sk)
		return unknown_kind(k, e);
	int r = store_list_each(s, sk, ns, selector, list_one, &l, list_rv, e);
	for (int again = 0; r == STORE_EXPIRED && again < 3; again++) {
		model_list_free(k, l.v, l.n); /* expired while it was taken: take it again */
		l.v = NULL;
		l.n = l.cap = 0;
		r = store_list_each(s, sk, ns, selector, list_one, &l, list_rv, e);
	}
	if (r < 0) {
		model_list_free(k, l.v, l.n);
		return r;
	}
	*items = l.v;
	*n = l.n;
	return 0;
}

struct each {
	const struct model_kind *k;
	store_skip_fn skip;
	model_each_fn fn;
	void *arg, *obj;
	struct err *e;
};

/* Decodes one listed object into the one scratch struct, hands it on, clears it. */
static int each_one(cJSON *it, void *arg)
{
	struct each *x = arg;
	struct err de = {0};
	int d = model_decode(x->k, it, x->obj, &de);
	if (d == -ENOMEM)
		return err_set(x->e, d, "out of memory");
	if (d < 0) {
		store_unreadable_report(model_store_kind(x->k), store_meta_str(it, "namespace"),
		                        store_meta_str(it, "name") ?: "", de.msg);
		return 0;
	}
	d = x->fn(x->obj, x->arg);
	model_clear(x->k, x->obj);
	return d;
}

static bool each_skip(const char *ns, const char *name, uint64_t rv, void *arg)
{
	struct each *x = arg;
	return x->skip(ns, name, rv, x->arg);
}

static int each_list(store *s, const struct model_kind *k, const char *ns, const char *selector,
                     store_skip_fn skip, model_each_fn fn, void *arg, uint64_t *list_rv,
                     struct err *e)
{
	const struct store_kind *sk = model_store_kind(k);
	struct each x = {.k = k, .skip = skip, .fn = fn, .arg = arg, .e = e};
	if (!sk)
		return unknown_kind(k, e);
	if (!(x.obj = calloc(1, k->type->size)))
		return err_set(e, -ENOMEM, "out of memory");
	int r = skip
	            ? store_list_each_skip(s, sk, ns, selector, each_skip, each_one, &x, list_rv, e)
	            : store_list_each(s, sk, ns, selector, each_one, &x, list_rv, e);
	free(x.obj);
	return r;
}

int model_list_each(store *s, const struct model_kind *k, const char *ns, const char *selector,
                    model_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	return each_list(s, k, ns, selector, NULL, fn, arg, list_rv, e);
}

int model_list_each_skip(store *s, const struct model_kind *k, const char *ns, const char *selector,
                         store_skip_fn skip, model_each_fn fn, void *arg, uint64_t *list_rv,
                         struct err *e)
{
	return each_list(s, k, ns, selector, skip, fn, arg, list_rv, e);
}

typedef int (*write_fn)(store *s, const cJSON *obj, cJSON **out, struct err *e);

/* The kind's transition rules on obj (j its encoding) against the version the update is
 * conditional on: base when it is that version (model_get_base), else the stored object (none
 * stored: nothing to check).  0, 1 (refused: ve says why), or a negative error. */
static int validate_update(store *s, const struct model_kind *k, const void *obj, const cJSON *j,
                           const cJSON *base, struct err *ve, struct err *e)
{
	const struct model_meta *m = MODEL_META(obj);
	void *cur = calloc(1, k->type->size);
	int r = STORE_CONFLICT;

	if (!cur)
		return err_set(e, -ENOMEM, "out of memory");
	if (base && m->resource_version &&
	    !strcmp(store_meta_str(base, "resourceVersion") ?: "", m->resource_version)) {
		if (k->immutable &&
		    cJSON_Compare(cJSON_GetObjectItemCaseSensitive(base, k->immutable),
		                  cJSON_GetObjectItemCaseSensitive(j, k->immutable), true)) {
			free(cur);
			return 0;
		}
		r = model_decode(k, base, cur, e);
	}
	/* the rules compare with the version the update is conditional on: a watch-fed cache
	 * holding exactly that version answers without a request (store_cache_open) */
	if (r == STORE_CONFLICT && m->resource_version)
		r = model_get_cached(s, k, m->ns, m->name, cur, e);
	if (r != 0 || strcmp(MODEL_META(cur)->resource_version ?: "", m->resource_version ?: "")) {
		model_clear(k, cur);
		memset(cur, 0, k->type->size);
		r = model_get(s, k, m->ns, m->name, cur, e);
	}
	if (r == 0)
		r = k->validate_update(cur, obj, ve) < 0 ? 1 : 0;
	else if (r == STORE_NOT_FOUND)
		r = 0; /* the update itself answers NotFound */
	model_clear(k, cur);
	free(cur);
	return r;
}

/* The kind's validation (crds.md), refused as the API server refuses an object its CRD's
 * schema or CEL rules reject: Invalid, `<Kind> "<name>" is invalid: <the spec's message>`;
 * with update, the transition rules too (j: obj's encoding, base: model_update_on's). */
static int validate(store *s, const struct model_kind *k, const void *obj, const cJSON *j,
                    bool update, const cJSON *base, struct err *e)
{
	struct err ve = {0};
	const char *name = MODEL_META(obj)->name;
	int r = 0;

	if (k->validate && k->validate(obj, &ve) < 0)
		r = 1;
	if (r == 0 && update && k->validate_update)
		r = validate_update(s, k, obj, j, base, &ve, e);
	if (r <= 0)
		return r;
	if (ve.code == -ENOMEM)
		return err_set(e, -ENOMEM, "out of memory");
	return err_set(e, STORE_INVALID, "%s \"%s\" is invalid: %s", k->kind, name ? name : "",
	               ve.msg);
}

static int write_obj(store *s, write_fn fn, const struct model_kind *k, const void *obj,
                     const cJSON *base, void *out, struct err *e)
{
	cJSON *res = NULL;
	if (out)
		memset(out, 0, k->type->size);
	cJSON *j = model_encode(k, obj);
	if (!j)
		return err_set(e, -ENOMEM, "out of memory");
	int r =
	    validate(s, k, obj, j, fn == store_update || fn == store_update_with_status, base, e);
	if (r == 0)
		r = fn(s, j, out ? &res : NULL, e);
	cJSON_Delete(j);
	if (r == 0 && out)
		r = model_decode(k, res, out, e);
	cJSON_Delete(res);
	return r;
}

int model_create(store *s, const struct model_kind *k, const void *obj, void *out, struct err *e)
{
	return write_obj(s, store_create, k, obj, NULL, out, e);
}

int model_update(store *s, const struct model_kind *k, const void *obj, void *out, struct err *e)
{
	return write_obj(s, store_update, k, obj, NULL, out, e);
}

int model_update_status(store *s, const struct model_kind *k, const void *obj, void *out,
                        struct err *e)
{
	return write_obj(s, store_update_status, k, obj, NULL, out, e);
}

int model_create_with_status(store *s, const struct model_kind *k, const void *obj, void *out,
                             struct err *e)
{
	return write_obj(s, store_create_with_status, k, obj, NULL, out, e);
}

int model_update_with_status(store *s, const struct model_kind *k, const void *obj, void *out,
                             struct err *e)
{
	return write_obj(s, store_update_with_status, k, obj, NULL, out, e);
}

int model_update_on(store *s, const struct model_kind *k, const void *base, const void *obj,
                    bool with_status, void *out, struct err *e)
{
	return write_obj(s, with_status ? store_update_with_status : store_update_status, k, obj,
	                 base, out, e);
}

int model_watch_next(store_watch *w, int timeout_ms, const struct model_kind *k,
                     enum store_event_type *type, void *obj, struct err *e)
{
	cJSON *j = NULL;
	memset(obj, 0, k->type->size);
	int r = store_watch_next(w, timeout_ms, type, &j, e);
	if (r == 1) {
		struct err de = {0};
		int d = model_decode(k, j, obj, &de);
		if (d == -ENOMEM)
			r = err_set(e, d, "out of memory");
		else if (d < 0)
			log_warnf("%s \"%s\" event skipped: %s", k->kind,
			          store_meta_str(j, "name") ?: "", de.msg),
			    r = 0;
	}
	cJSON_Delete(j);
	return r;
}

const struct model_kind *model_kind_find(const char *kind)
{
	static const struct model_kind *const all[] = {
	    &model_pa_kind,          &model_pst_kind,        &model_pstr_kind,
	    &model_psc_kind,         &model_pvst_kind,       &model_sc_kind,
	    &model_pv_kind,          &model_pvc_kind,        &model_node_kind,
	    &model_csinode_kind,     &model_va_kind,         &model_lease_kind,
	    &model_event_kind,       &model_pod_kind,        &model_deployment_kind,
	    &model_statefulset_kind, &model_replicaset_kind, &model_psnap_kind};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->kind, kind))
			return all[i];
	return NULL;
}
