/* cli: the JSONPath subset of CRD printer columns, and kubectl's age format. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

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

void cli_jsonpath(const cJSON *obj, const char *path, char *buf, size_t cap)
{
	const cJSON *cur = obj;
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
	else if (cJSON_IsNumber(cur))
		snprintf(buf, cap, "%.0f", cur->valuedouble);
	else if (!cJSON_IsNull(cur)) {
		char *s = cJSON_PrintUnformatted(cur);
		snprintf(buf, cap, "%s", s ? s : "");
		cJSON_free(s);
	}
}

void cli_age(const char *timestamp, long long now, char *buf, size_t cap)
{
	struct tm tm = {0};
	buf[0] = '\0';
	if (!timestamp || !strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
		snprintf(buf, cap, "<unknown>");
		return;
	}
	long long d = now - (long long)timegm(&tm);
	if (d < 0)
		d = 0;
	if (d < 120)
		snprintf(buf, cap, "%llds", d);
	else if (d < 600)
		snprintf(buf, cap, "%lldm%llds", d / 60, d % 60);
	else if (d < 3 * 3600)
		snprintf(buf, cap, "%lldm", d / 60);
	else if (d < 8 * 3600 && d % 3600 >= 60)
		snprintf(buf, cap, "%lldh%lldm", d / 3600, (d % 3600) / 60);
	else if (d < 48 * 3600)
		snprintf(buf, cap, "%lldh", d / 3600);
	else if (d < 8 * 86400 && d % 86400 >= 3600)
		snprintf(buf, cap, "%lldd%lldh", d / 86400, (d % 86400) / 3600);
	else if (d < 2 * 365 * 86400LL)
		snprintf(buf, cap, "%lldd", d / 86400);
	else
		snprintf(buf, cap, "%lldy", d / (365 * 86400LL));
}
