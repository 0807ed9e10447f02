/* model docs: configuration documents (crds.md §8) — a YAML/JSON document string decoded into
 * one of the axis structs — and the JSON text of a string list (the volume context's option
 * lists, csi.md §3). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/yaml.h"
#include "model/codec.h"
#include "model/docs.h"

int model_doc_decode(const struct model_type *t, const char *key, const char *text, void *obj,
                     struct err *e)
{
	cJSON *j = NULL;
	struct err de = {0};
	int r = yaml_doc_parse(text, strlen(text), &j, &de);
	memset(obj, 0, t->size);
	if (r == 0)
		r = model_type_decode(t, j, obj, &de);
	cJSON_Delete(j);
	if (r < 0)
		return err_set(e, r, "%s: %s", key, de.msg);
	return 0;
}

char *model_strs_json(const struct model_strs *l)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && i < l->n; i++) {
		cJSON *s = cJSON_CreateString(l->v[i]);
		if (!s || !cJSON_AddItemToArray(a, s))
			cJSON_Delete(s), cJSON_Delete(a), a = NULL;
	}
	char *text = a ? json_dump(a) : NULL;
	cJSON_Delete(a);
	return text;
}

#define T struct model_version
static const struct model_field version_fields[] = {
    MODEL_F_STR("version", version),
    MODEL_F_STR("gitCommit", git_commit),
    MODEL_F_STR("buildDate", build_date),
    MODEL_F_MAP("libraries", libraries),
};
#undef T
MODEL_TYPE(model_version_type, struct model_version, version_fields);
