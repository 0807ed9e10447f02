/* kube/codec — the documents the Kubernetes client reads and writes itself (kube/codec.h). */
#include "kube/codec.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"

/* ---- Status ---------------------------------------------------------------------------------- */

static void copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

static void decode_causes(struct kube_status *st, const cJSON *details)
{
	const cJSON *causes = cJSON_GetObjectItemCaseSensitive(details, "causes");
	const cJSON *list = cJSON_IsArray(causes) ? causes : NULL;
	const cJSON *c;

	cJSON_ArrayForEach(c, list)
	{
		struct kube_cause *k;
		if (st->n_causes == KUBE_CAUSES_MAX || !cJSON_IsObject(c))
			continue;
		k = &st->causes[st->n_causes++];
		copy(k->reason, sizeof(k->reason), json_get_str(c, "reason"));
		copy(k->field, sizeof(k->field), json_get_str(c, "field"));
		copy(k->message, sizeof(k->message), json_get_str(c, "message"));
	}
}

int kube_status_from_json(struct kube_status *st, int http_status, const cJSON *obj)
{
	const cJSON *details = cJSON_GetObjectItemCaseSensitive(obj, "details");
	const char *status = json_get_str(obj, "status");
	int64_t v;

	kube_status_clear(st);
	st->code = http_status;
	if (json_get_int64(obj, "code", &v) == 0 && v > 0 && v < 1000)
		st->code = (int)v;
	copy(st->reason, sizeof(st->reason), json_get_str(obj, "reason"));
	copy(st->message, sizeof(st->message), json_get_str(obj, "message"));
	copy(st->name, sizeof(st->name), json_get_str(details, "name"));
	copy(st->group, sizeof(st->group), json_get_str(details, "group"));
	copy(st->resource, sizeof(st->resource), json_get_str(details, "kind"));
	if (json_get_int64(details, "retryAfterSeconds", &v) == 0 && v > 0 && v < 86400)
		st->retry_after = (int)v;
	decode_causes(st, details);
	st->kind = kube_reason_from_code(st->code);
	if (st->reason[0]) {
		st->kind = kube_reason_from_name(st->reason);
		if (st->kind == KUBE_UNKNOWN && st->code >= 300)
			st->kind =
			    kube_reason_from_code(st->code); /* a new reason: the code's meaning */
	} else if (st->kind == KUBE_OK && status && strcmp(status, "Failure") == 0) {
		st->kind = KUBE_UNKNOWN;
	}
	return kube_status_errno(st);
}

int kube_status_decode(struct kube_status *st, int http_status, const char *body, size_t len)
{
	cJSON *obj = NULL;
	const char *kind;
	size_t n;
	int rc;

	if (body && len && json_parse_strict(body, len, &obj, NULL) == 0 &&
	    (kind = json_get_str(obj, "kind")) && strcmp(kind, "Status") == 0) {
		rc = kube_status_from_json(st, http_status, obj);
		cJSON_Delete(obj);
		return rc;
	}
	cJSON_Delete(obj);
	kube_status_clear(st);
	st->code = http_status;
	st->kind = kube_reason_from_code(http_status);
	for (n = 0; body && n < len && body[n] != '\n' && n < sizeof(st->message) - 1; n++)
		st->message[n] = body[n] >= 0x20 && body[n] < 0x7f ? body[n] : '?';
	st->message[n] = '\0';
	if (!n)
		snprintf(st->message, sizeof(st->message), "HTTP status %d", http_status);
	return kube_status_errno(st);
}

/* ---- watch events, lists, metadata ----------------------------------------------------------- */

static const char *const type_names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

int kube_codec_event_decode(const char *line, size_t len, enum kube_event_type *type, cJSON **obj,
                            struct err *e)
{
	cJSON *ev = NULL, *o;
	const char *t;
	int rc = json_parse_marked(line, len, &ev, e); /* a NUL byte is its object's problem */

	if (rc < 0)
		return -EBADMSG;
	t = json_get_str(ev, "type");
	o = cJSON_GetObjectItemCaseSensitive(ev, "object");
	rc = err_set(e, -EBADMSG, "watch event without a known type and an object");
	for (size_t i = 0; t && cJSON_IsObject(o) && i < sizeof(type_names) / sizeof(*type_names);
	     i++) {
		if (strcmp(t, type_names[i]) == 0) {
			*type = (enum kube_event_type)i;
			*obj = cJSON_DetachItemViaPointer(ev, o);
			err_clear(e);
			rc = 1;
			break;
		}
	}
	cJSON_Delete(ev);
	return rc;
}

const char *kube_codec_meta_str(const cJSON *obj, const char *key)
{
	return json_get_str(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), key);
}

int kube_codec_list_move_items(cJSON *list, cJSON **all)
{
	cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items"), *it;

	if (!*all && !(*all = cJSON_CreateArray()))
		return -ENOMEM;
	while (cJSON_IsArray(items) && (it = items->child)) /* move, not copy */
		cJSON_AddItemToArray(*all, cJSON_DetachItemViaPointer(items, it));
	return 0;
}

/* ---- DeleteOptions --------------------------------------------------------------------------- */

char *kube_codec_delete_options_encode(const char *uid, const char *resource_version)
{
	cJSON *opts = cJSON_CreateObject(), *pre;
	char *body = NULL;

	if (opts && cJSON_AddStringToObject(opts, "kind", "DeleteOptions") &&
	    cJSON_AddStringToObject(opts, "apiVersion", "v1") &&
	    (pre = cJSON_AddObjectToObject(opts, "preconditions")) &&
	    (!uid || cJSON_AddStringToObject(pre, "uid", uid)) &&
	    (!resource_version ||
	     cJSON_AddStringToObject(pre, "resourceVersion", resource_version)))
		body = json_dump(opts);
	cJSON_Delete(opts);
	return body;
}
