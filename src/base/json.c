#include "base/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

#define JSON_EXACT_MAX 9007199254740992.0 /* 2^53 */

int json_parse_strict(const char *buf, size_t len, cJSON **out, struct err *e)
{
	const char *end = NULL;
	cJSON *v;

	*out = NULL;
	if (memchr(buf, '\0', len))
		return err_set(e, -EBADMSG, "invalid JSON: contains a NUL byte");
	v = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (!v) {
		size_t off = end && end >= buf ? (size_t)(end - buf) : 0;
		if (off >= len)
			return err_set(e, -EBADMSG,
			               "invalid JSON: unexpected end of input at byte %zu", len);
		return err_set(e, -EBADMSG, "invalid JSON at byte %zu", off);
	}
	for (const char *p = end; p < buf + len; p++) {
		if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
			cJSON_Delete(v);
			return err_set(e, -EBADMSG, "invalid JSON: trailing data at byte %zu",
			               (size_t)(p - buf));
		}
	}
	*out = v;
	return 0;
}

int json_read_file(const char *path, cJSON **out, struct err *e)
{
	char *buf;
	size_t len;
	int r;

	*out = NULL;
	r = file_read_all(path, JSON_FILE_MAX, &buf, &len, e);
	if (r < 0)
		return r;
	r = json_parse_strict(buf, len, out, e);
	free(buf);
	if (r < 0)
		err_prefix(e, "%s is corrupt", path);
	return r;
}

int json_write_file(const char *path, const cJSON *v, mode_t mode, struct err *e)
{
	char *text = cJSON_Print(v);
	size_t n;
	int r;

	if (!text)
		return err_set(e, -ENOMEM, "encode %s: out of memory", path);
	n = strlen(text);
	{
		char *t2 = realloc(text, n + 2);
		if (!t2) {
			free(text);
			return err_set(e, -ENOMEM, "encode %s: out of memory", path);
		}
		text = t2;
	}
	text[n++] = '\n';
	text[n] = '\0';
	r = file_write_atomic(path, text, n, mode, e);
	free(text);
	return r;
}

const char *json_get_str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int json_get_int64(const cJSON *obj, const char *key, int64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	double d;

	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	if (!cJSON_IsNumber(v))
		return -EINVAL;
	d = v->valuedouble;
	if (!isfinite(d) || d != floor(d) || fabs(d) > JSON_EXACT_MAX)
		return -EINVAL;
	*out = (int64_t)d;
	return 0;
}

int json_get_bool(const cJSON *obj, const char *key, bool *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	if (!cJSON_IsBool(v))
		return -EINVAL;
	*out = cJSON_IsTrue(v);
	return 0;
}

char *json_dump(const cJSON *v)
{
	return cJSON_PrintUnformatted(v);
}

const char *json_lib_version(void)
{
	return cJSON_Version();
}

int json_file_get_str(const char *path, const char *key, char *buf, size_t cap, struct err *e)
{
	cJSON *o = NULL;
	int r = json_read_file(path, &o, e);
	const char *v = r == 0 ? json_get_str(o, key) : NULL;
	snprintf(buf, cap, "%s", v ? v : "");
	cJSON_Delete(o);
	return r;
}

bool json_add(cJSON *o, const char *key, cJSON *item)
{
	if (o && item &&
	    (key ? cJSON_AddItemToObject(o, key, item) : cJSON_AddItemToArray(o, item)))
		return true;
	cJSON_Delete(item);
	return false;
}
