/* reconcile_common — helpers shared by the reconcilers: finalizers, dependents and the
 * "Deletion blocked: ..." message of crds.md §14, status writes without churn. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/reconcile.h"

bool reconcile_has_finalizer(const cJSON *obj, const char *fin)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(
	                           cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "finalizers"))
	{
		if (cJSON_IsString(it) && !strcmp(it->valuestring, fin))
			return true;
	}
	return false;
}

int reconcile_finalizer(struct ctl *c, cJSON *obj, const char *fin, bool present, struct err *e)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	cJSON *f = cJSON_GetObjectItemCaseSensitive(meta, "finalizers");
	int idx = -1, i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, f)
	{
		if (cJSON_IsString(it) && !strcmp(it->valuestring, fin))
			idx = i;
		i++;
	}
	if (present == (idx >= 0))
		return 0;
	if (present) {
		if (!cJSON_IsArray(f)) {
			cJSON_DeleteItemFromObjectCaseSensitive(meta, "finalizers");
			f = cJSON_AddArrayToObject(meta, "finalizers");
		}
		cJSON_AddItemToArray(f, cJSON_CreateString(fin));
	} else {
		cJSON_DeleteItemFromArray(f, idx);
	}
	cJSON *out = NULL;
	int r = store_update(c->st, obj, &out, e);
	if (r == 0 && out) {
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "metadata");
		cJSON_AddItemToObject(
		    obj, "metadata",
		    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(out, "metadata"), true));
	}
	cJSON_Delete(out);
	return r;
}

cJSON *reconcile_names_where(struct ctl *c, const char *kind, const char *field, const char *value)
{
	cJSON *items = NULL, *names = cJSON_CreateArray();
	const cJSON *it;
	if (!names)
		return NULL;
	if (store_list(c->st, kind_of(kind), NULL, NULL, &items, NULL, NULL) < 0)
		return names;
	cJSON_ArrayForEach(it, items)
	{
		const char *v = json_get_str(cJSON_GetObjectItemCaseSensitive(it, "spec"), field);
		if (v && !strcmp(v, value))
			cJSON_AddItemToArray(names, cJSON_CreateString(store_meta_str(it, "name")));
	}
	cJSON_Delete(items);
	return names;
}

cJSON *reconcile_names_labeled(struct ctl *c, const char *kind, const char *label,
                               const char *value)
{
	char sel[600];
	cJSON *items = NULL, *names = cJSON_CreateArray();
	const cJSON *it;
	if (!names)
		return NULL;
	snprintf(sel, sizeof(sel), "%s=%s", label, value);
	if (store_list(c->st, kind_of(kind), NULL, sel, &items, NULL, NULL) < 0)
		return names;
	cJSON_ArrayForEach(it, items)
	    cJSON_AddItemToArray(names, cJSON_CreateString(store_meta_str(it, "name")));
	cJSON_Delete(items);
	return names;
}

static void put(struct deps *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct deps *d, const char *fmt, ...)
{
	va_list ap;
	size_t cap = sizeof(d->msg);
	va_start(ap, fmt);
	int n =
	    vsnprintf(d->msg + (d->o < cap ? d->o : cap - 1), d->o < cap ? cap - d->o : 1, fmt, ap);
	va_end(ap);
	if (n > 0)
		d->o += (size_t)n;
}

static void lead(struct deps *d)
{
	put(d, "%s", d->o ? "; " : "Deletion blocked: ");
}

void deps_objects(struct deps *d, const char *kind, const cJSON *names)
{
	int n = cJSON_GetArraySize(names), k = 0;
	const cJSON *it;
	if (n <= 0)
		return;
	lead(d);
	put(d, "%s ", kind);
	cJSON_ArrayForEach(it, names)
	{
		if (k == DEPS_MAX_NAMES)
			break;
		put(d, "%s\"%s\"", k++ ? ", " : "", cJSON_GetStringValue(it) ?: "");
	}
	if (n > DEPS_MAX_NAMES)
		put(d, " and %d more", n - DEPS_MAX_NAMES);
}

void deps_volumes(struct deps *d, const cJSON *names)
{
	int n = cJSON_GetArraySize(names), k = 0;
	const cJSON *it;
	if (n <= 0)
		return;
	lead(d);
	put(d, "%d volume%s (", n, n == 1 ? "" : "s");
	cJSON_ArrayForEach(it, names)
	{
		if (k == DEPS_MAX_NAMES)
			break;
		put(d, "%s%s", k++ ? ", " : "", cJSON_GetStringValue(it) ?: "");
	}
	if (n > DEPS_MAX_NAMES)
		put(d, " and %d more", n - DEPS_MAX_NAMES);
	put(d, ")");
}

cJSON *reconcile_status_of(cJSON *obj)
{
	cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
	if (!cJSON_IsObject(status)) {
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
		status = cJSON_AddObjectToObject(obj, "status");
	}
	return status;
}

int64_t reconcile_generation(const cJSON *obj)
{
	int64_t og = 0;
	json_get_int64(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "generation", &og);
	return og;
}

int reconcile_write_status(struct ctl *c, cJSON *obj, const cJSON *before, struct err *e)
{
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
	if (cJSON_Compare(before, status, true))
		return 0;
	return store_update_status(c->st, obj, NULL, e);
}

void reconcile_set_str(cJSON *o, const char *key, const char *value)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	if (value)
		cJSON_AddStringToObject(o, key, value);
}

/* Ready from the conditions: DeletionBlocked first, then the first failing type. */
void reconcile_ready(cJSON *status, const char *const *types, const char *ok_reason,
                     const char *blocked, int64_t og)
{
	if (blocked) {
		cond_set(status, "Ready", "False", "DeletionBlocked", blocked, og);
		return;
	}
	const cJSON *bad = NULL;
	bool any = false;
	for (size_t i = 0; types[i]; i++) {
		const cJSON *cd = cond_get(status, types[i]);
		const char *s = cd ? json_get_str(cd, "status") : NULL;
		if (!s || strcmp(s, "True")) {
			bad = cd;
			any = true;
			break;
		}
	}
	if (!any)
		cond_set(status, "Ready", "True", ok_reason, "", og);
	else
		cond_set(status, "Ready", "False",
		         bad ? json_get_str(bad, "reason") ?: "Unknown" : "Unknown",
		         bad ? json_get_str(bad, "message") ?: "" : "", og);
}
