/* model jsonpath: the JSONPath subset of CRD printer columns over an object's JSON. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "model/model.h"

static const cJSON *filter(const cJSON *arr, const char *key, const char *val)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, key);
		if (cJSON_IsString(f) && strcmp(f->valuestring, val) == 0)
			return it;
	}
	return NULL;
}

void model_jsonpath_json(const void *json, const char *path, char *buf, size_t cap)
{
	const cJSON *cur = json;
	const char *p = path;
	buf[0] = '\0';
	while (cur && *p) {
		if (*p == '.') {
			char key[128];
			size_t n = strcspn(p + 1, ".[");
			if (n >= sizeof(key))
				return;
			memcpy(key, p + 1, n);
			key[n] = '\0';
			cur = cJSON_GetObjectItemCaseSensitive(cur, key);
			p += 1 + n;
		} else if (strncmp(p, "[?(@.", 5) == 0) {
			/* [?(@.type=="Ready")] */
			char key[64], val[128];
			if (sscanf(p, "[?(@.%63[^=]==\"%127[^\"]\")]", key, val) != 2)
				return;
			cur = cJSON_IsArray(cur) ? filter(cur, key, val) : NULL;
			const char *end = strstr(p, ")]");
			if (!end)
				return;
			p = end + 2;
		} else if (*p == '[') {
			int idx;
			if (sscanf(p, "[%d]", &idx) != 1)
				return;
			cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, idx) : NULL;
			p = strchr(p, ']') ? strchr(p, ']') + 1 : "";
		} else {
			return;
		}
	}
	if (!cur || *p)
		return;
	if (cJSON_IsString(cur))
		snprintf(buf, cap, "%s", cur->valuestring);
	else if (cJSON_IsBool(cur))
		snprintf(buf, cap, "%s", cJSON_IsTrue(cur) ? "true" : "false");
	else if (cJSON_IsNumber(cur) && cur->valuestring) /* an exact integer (base/json.h) */
		snprintf(buf, cap, "%s", cur->valuestring);
	else if (cJSON_IsNumber(cur))
		snprintf(buf, cap, "%.0f", cur->valuedouble);
	else if (!cJSON_IsNull(cur)) {
		char *s = json_dump(cur);
		snprintf(buf, cap, "%s", s ? s : "");
		cJSON_free(s);
	}
}

void model_jsonpath(const struct model_kind *k, const void *obj, const char *path, char *buf,
                    size_t cap)
{
	cJSON *j = model_encode(k, obj);
	buf[0] = '\0';
	if (j)
		model_jsonpath_json(j, path, buf, cap);
	cJSON_Delete(j);
}
