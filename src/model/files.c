/* model files: object files (`pillar-csi apply -f`) in, formatted objects and Lists out. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "model/model.h"

/* One item of the file into a (o is pruned of what strict field validation refuses). */
static int decode_one(cJSON *o, struct model_any *a)
{
	struct err e = {0};
	const struct store_kind *sk = store_kind_of(o, &e);
	const struct model_kind *k = sk ? model_kind_find(sk->kind) : NULL;
	if (!k) {
		snprintf(a->err, sizeof(a->err), "%s", e.msg[0] ? e.msg : "unknown kind");
		return 0;
	}
	model_strict_fields(k, o, true, a->fields, sizeof(a->fields));
	if (!(a->obj = calloc(1, k->type->size)))
		return -ENOMEM;
	int r = model_decode(k, o, a->obj, &e);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (snprintf(a->err, sizeof(a->err), "%s: %s", k->kind, e.msg) >=
		    (int)sizeof(a->err))
			a->err[sizeof(a->err) - 2] = '~'; /* shortened, never cut unseen */
		free(a->obj);
		a->obj = NULL;
		return 0;
	}
	a->k = k;
	a->has_status = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "status"));
	return 0;
}

int model_decode_file(const char *text, size_t len, struct model_any **out, size_t *n,
                      struct err *e)
{
	cJSON *doc = NULL;
	*out = NULL;
	*n = 0;
	int r = json_parse_strict(text, len, &doc, e);
	if (r < 0)
		return r;
	cJSON *items = doc, *it;
	if (cJSON_IsObject(doc)) {
		const char *kind = json_get_str(doc, "kind");
		items = kind && !strcmp(kind, "List")
		            ? cJSON_GetObjectItemCaseSensitive(doc, "items")
		            : NULL;
	}
	bool many = items && cJSON_IsArray(items);
	size_t cnt = many ? (size_t)cJSON_GetArraySize(items) : 1;
	struct model_any *a = calloc(cnt ? cnt : 1, sizeof(*a));
	if (!a) {
		cJSON_Delete(doc);
		return err_set(e, -ENOMEM, "out of memory");
	}
	if (many) {
		cJSON_ArrayForEach(it, items) if (r == 0) r = decode_one(it, &a[(*n)++]);
	} else {
		r = decode_one(doc, &a[(*n)++]);
	}
	cJSON_Delete(doc);
	if (r < 0) {
		model_any_free(a, *n);
		*n = 0;
		return err_set(e, r, "out of memory");
	}
	*out = a;
	return 0;
}

void model_any_free(struct model_any *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++) {
		if (a[i].k)
			model_clear(a[i].k, a[i].obj);
		free(a[i].obj);
	}
	free(a);
}
