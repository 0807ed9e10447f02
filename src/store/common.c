/* store: kinds, wrappers and helpers shared by every implementation. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/log.h"
#include "base/str.h"
#include "rules/keys.h"
#include "rules/volid.h"
#include "store/store.h"

static _Thread_local struct store_unreadable unreadable_receiver;

void store_unreadable_catch(const struct store_unreadable *set, struct store_unreadable *prev)
{
	if (prev)
		*prev = unreadable_receiver;
	unreadable_receiver = set ? *set : (struct store_unreadable){0};
}

static _Thread_local bool write_lazy;

bool store_write_lazy(bool on)
{
	bool was = write_lazy;
	write_lazy = on;
	return was;
}

void store_unreadable_report(const struct store_kind *k, const char *ns, const char *name,
                             const char *error)
{
	if (unreadable_receiver.fn)
		unreadable_receiver.fn(unreadable_receiver.arg, k, ns, name, error);
	else
		log_warnf("%s %s%s\"%s\" left out of a list: %s", k->kind, ns ? ns : "",
		          ns ? "/" : "", name, error);
}

static const struct store_kind kinds[] = {
    {"PillarAgent", RULES_API_VERSION, "pillaragents", "pillaragent", "pa", false, true},
    {"PillarStore", RULES_API_VERSION, "pillarstores", "pillarstore", "pst", false, true},
    {"PillarProtocol", RULES_API_VERSION, "pillarprotocols", "pillarprotocol", "pstr", false, true},
    {"PillarStorageClass", RULES_API_VERSION, "pillarstorageclasses", "pillarstorageclass", "psc",
     false, true},
    {"PillarVolumeState", RULES_API_VERSION, "pillarvolumestates", "pillarvolumestate", "pvst",
     false, true},
    {"PillarSnapshot", RULES_API_VERSION, "pillarsnapshots", "pillarsnapshot", "psnap", false,
     true},
    {"CSINode", "storage.k8s.io/v1", "csinodes", "csinode", NULL, false, false},
    {"StorageClass", "storage.k8s.io/v1", "storageclasses", "storageclass", "sc", false, false},
    {"PersistentVolumeClaim", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "pvc", true,
     true},
    {"PersistentVolume", "v1", "persistentvolumes", "persistentvolume", "pv", false, true},
    {"Node", "v1", "nodes", "node", "no", false, true},
    {"Pod", "v1", "pods", "pod", "po", true, true},
    {"VolumeAttachment", "storage.k8s.io/v1", "volumeattachments", "volumeattachment", NULL, false,
     true},
    /* the workers' DH-HMAC-CHAP keys only (docs/authentication.md "Keys"); written 0600 */
    {"Secret", "v1", "secrets", "secret", NULL, true, false},
    /* read by outage-plan only (roles/cli/outage.c) */
    {"Deployment", "apps/v1", "deployments", "deployment", "deploy", true, true},
    {"StatefulSet", "apps/v1", "statefulsets", "statefulset", "sts", true, true},
    {"ReplicaSet", "apps/v1", "replicasets", "replicaset", "rs", true, true},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

const struct store_kind *const *store_kinds(void)
{
	static const struct store_kind *list[N_KINDS + 1];
	if (!list[0])
		for (size_t i = 0; i < N_KINDS; i++)
			list[i] = &kinds[i];
	return list;
}

const struct store_kind *store_kind_lookup(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < N_KINDS; i++) {
		const struct store_kind *k = &kinds[i];
		if (strcasecmp(name, k->kind) == 0 || strcasecmp(name, k->plural) == 0 ||
		    strcasecmp(name, k->singular) == 0 ||
		    (k->short_name && strcasecmp(name, k->short_name) == 0))
			return k;
	}
	return NULL;
}

const char *store_reason(int code)
{
	switch (code) {
	case 0: return "";
	case STORE_NOT_FOUND: return "NotFound";
	case STORE_ALREADY_EXISTS: return "AlreadyExists";
	case STORE_CONFLICT: return "Conflict";
	case STORE_INVALID: return "Invalid";
	case STORE_EXPIRED: return "Expired";
	default: return "InternalError";
	}
}

int store_validate_name(const char *what, const char *name, struct err *e)
{
	char q[1100]; /* the name as the message echoes it: no raw control byte */
	switch (rules_objname_check(name)) {
	case RULES_OBJNAME_OK: return 0;
	case RULES_OBJNAME_EMPTY: return err_set(e, STORE_INVALID, "%s: name is required", what);
	case RULES_OBJNAME_TOO_LONG:
		return err_set(e, STORE_INVALID, "%s %s: name is longer than 253 characters", what,
		               str_quote(q, sizeof(q), name, 40));
	case RULES_OBJNAME_BAD_CHAR:
		return err_set(e, STORE_INVALID,
		               "%s %s: a name must consist of lower case alphanumeric characters, "
		               "'-' or '.', and must start and end with an alphanumeric character",
		               what, str_quote(q, sizeof(q), name, 253));
	case RULES_OBJNAME_DOT_DOT:
		return err_set(e, STORE_INVALID, "%s %s: a name must not contain \"..\"", what,
		               str_quote(q, sizeof(q), name, 253));
	}
	return STORE_INVALID;
}

const char *store_meta_str(const cJSON *obj, const char *field)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, field);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

uint64_t store_meta_rv(const cJSON *obj)
{
	const char *s = store_meta_str(obj, "resourceVersion");
	char *end;
	if (!s || !*s)
		return 0;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	return (*end || errno) ? 0 : (uint64_t)v;
}

const struct store_kind *store_kind_of(const cJSON *obj, struct err *e)
{
	const cJSON *kv = cJSON_GetObjectItemCaseSensitive(obj, "kind");
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(obj, "apiVersion");
	const struct store_kind *k;

	if (!cJSON_IsObject(obj)) {
		err_set(e, STORE_INVALID, "an object must be a JSON object");
		return NULL;
	}
	if (!cJSON_IsString(kv)) {
		err_set(e, STORE_INVALID, "object has no kind");
		return NULL;
	}
	k = store_kind_lookup(kv->valuestring);
	if (!k || strcmp(k->kind, kv->valuestring) != 0) {
		err_set(e, STORE_INVALID, "unknown kind \"%s\"", kv->valuestring);
		return NULL;
	}
	if (!cJSON_IsString(av) || strcmp(av->valuestring, k->api_version) != 0) {
		err_set(e, STORE_INVALID, "%s: apiVersion must be \"%s\"", k->kind, k->api_version);
		return NULL;
	}
	return k;
}

void store_timestamp(char *buf, size_t cap)
{
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- label selectors --------------------------------------------------------------------------- */

static int valid_label_part(const char *s, size_t n)
{
	if (n == 0 || n > 316)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.' ||
		      s[i] == '/'))
			return 0;
	return 1;
}

/* A label's value: its text and length, NULL when the object has no such label (or it is not a
 * string). */
typedef const char *(*label_lookup_fn)(const void *labels, const char *key, size_t *len);

static const char *tree_lookup(const void *labels, const char *key, size_t *len)
{
	const cJSON *lv = cJSON_GetObjectItemCaseSensitive(labels, key);
	const char *v = cJSON_IsString(lv) ? lv->valuestring : NULL;
	*len = v ? strlen(v) : 0;
	return v;
}

struct text_span {
	const char *p, *end;
};

/* The closing quote of the string whose opening quote is at p, or NULL. */
static const char *string_end(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p;
	}
	return NULL;
}

/* One past the compact JSON value at p, or NULL when the text ends inside it. */
static const char *value_end(const char *p, const char *end)
{
	int depth = 0;
	if (p < end && *p == '"')
		return (p = string_end(p, end)) ? p + 1 : NULL;
	if (p < end && *p != '{' && *p != '[') {
		while (p < end && *p != ',' && *p != '}' && *p != ']')
			p++;
		return p;
	}
	for (; p < end; p++) {
		if (*p == '"' && !(p = string_end(p, end)))
			return NULL;
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
	}
	return NULL;
}

/* The labels as cJSON prints them compact: keys and string values stand as their bytes, and a
 * byte that needs an escape (a quote, a backslash, a control character) is none a selector's
 * key or value may hold, so comparing the printed bytes is comparing the strings. */
static const char *text_lookup(const void *labels, const char *key, size_t *len)
{
	const struct text_span *t = labels;
	const char *p = t->p, *end = t->end;
	size_t klen = strlen(key);
	if (!p || p >= end || *p != '{')
		return NULL;
	for (p++; p < end && *p == '"';) {
		const char *ke = string_end(p, end), *v, *ve;
		if (!ke || ke + 1 >= end || ke[1] != ':' || !(ve = value_end(v = ke + 2, end)))
			return NULL;
		if ((size_t)(ke - p - 1) == klen && !memcmp(p + 1, key, klen)) {
			if (*v != '"' || ve - v < 2)
				return NULL; /* not a string */
			*len = (size_t)(ve - v - 2);
			return v + 1;
		}
		p = ve < end && *ve == ',' ? ve + 1 : ve;
	}
	return NULL;
}

static int selector_match(const char *selector, label_lookup_fn lookup, const void *labels,
                          struct err *e)
{
	const char *p = selector;
	int match = 1;

	if (!selector)
		return 1;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p), hl = 0;
		char term[512], *op, *key, *val = NULL;
		int neg = 0, exists_only = 0, not_exists = 0;

		if (n == 0 || n >= sizeof(term))
			return err_set(e, STORE_INVALID, "invalid label selector \"%s\"", selector);
		memcpy(term, p, n);
		term[n] = '\0';
		key = term;
		while (*key == ' ')
			key++;
		if ((op = strstr(key, "!=")) != NULL) {
			*op = '\0';
			val = op + 2;
			neg = 1;
		} else if ((op = strstr(key, "==")) != NULL) {
			*op = '\0';
			val = op + 2;
		} else if ((op = strchr(key, '=')) != NULL) {
			*op = '\0';
			val = op + 1;
		} else if (key[0] == '!') {
			key++;
			not_exists = 1;
		} else {
			exists_only = 1;
		}
		for (char *t = key + strlen(key); t > key && t[-1] == ' '; t--)
			t[-1] = '\0';
		if (val)
			while (*val == ' ')
				val++;
		if (!valid_label_part(key, strlen(key)) ||
		    (val && *val && !valid_label_part(val, strlen(val))))
			return err_set(e, STORE_INVALID, "invalid label selector \"%s\"", selector);
		const char *have = labels ? lookup(labels, key, &hl) : NULL;
		bool same = have && val && hl == strlen(val) && memcmp(have, val, hl) == 0;
		if (exists_only)
			match &= have != NULL;
		else if (not_exists)
			match &= have == NULL;
		else if (neg)
			match &= !same;
		else
			match &= same;
		p += n;
		if (*p == ',')
			p++;
	}
	return match;
}

int store_selector_match(const char *selector, const cJSON *obj, struct err *e)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
	return selector_match(selector, tree_lookup, labels, e);
}

int store_selector_match_text(const char *selector, const char *labels, size_t len, struct err *e)
{
	struct text_span t = {labels, labels ? labels + len : NULL};
	return selector_match(selector, text_lookup, labels ? &t : NULL, e);
}

/* ---- wrappers ---------------------------------------------------------------------------------- */

int store_get(store *s, const struct store_kind *k, const char *ns, const char *name, cJSON **out,
              struct err *e)
{
	return s->ops->get(s, k, ns, name, out, e);
}

int store_list(store *s, const struct store_kind *k, const char *ns, const char *selector,
               cJSON **items, uint64_t *list_rv, struct err *e)
{
	return s->ops->list(s, k, ns, selector, items, list_rv, e);
}

int store_list_each(store *s, const struct store_kind *k, const char *ns, const char *selector,
                    store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	if (s->ops->list_each)
		return s->ops->list_each(s, k, ns, selector, fn, arg, list_rv, e);
	return store_list_walk(s, k, ns, selector, fn, arg, list_rv, e);
}

int store_list_each_any(store *s, const struct store_kind *k, const char *ns, const char *selector,
                        store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	if (s->ops->list_each_any)
		return s->ops->list_each_any(s, k, ns, selector, fn, arg, list_rv, e);
	return store_list_each(s, k, ns, selector, fn, arg, list_rv, e);
}

struct keeping {
	store_kept_fn fn;
	void *arg;
};

static int keep_then(cJSON *obj, void *arg)
{
	struct keeping *x = arg;
	return x->fn(obj, NULL, 0, x->arg);
}

int store_list_each_kept(store *s, const struct store_kind *k, bool any, store_kept_fn fn,
                         void *arg, uint64_t *list_rv, struct err *e)
{
	struct keeping x = {fn, arg};
	if (s->ops->list_each_kept)
		return s->ops->list_each_kept(s, k, any, fn, arg, list_rv, e);
	return (any ? store_list_each_any : store_list_each)(s, k, NULL, NULL, keep_then, &x,
	                                                     list_rv, e);
}

struct skipping {
	store_skip_fn skip;
	store_each_fn fn;
	void *arg;
};

static int skip_then(cJSON *obj, void *arg)
{
	struct skipping *x = arg;
	if (x->skip(store_meta_str(obj, "namespace"), store_meta_str(obj, "name") ?: "",
	            store_meta_rv(obj), x->arg))
		return 0;
	return x->fn(obj, x->arg);
}

int store_list_each_skip(store *s, const struct store_kind *k, const char *ns, const char *selector,
                         store_skip_fn skip, store_each_fn fn, void *arg, uint64_t *list_rv,
                         struct err *e)
{
	struct skipping x = {skip, fn, arg};
	if (s->ops->list_each_skip)
		return s->ops->list_each_skip(s, k, ns, selector, skip, fn, arg, list_rv, e);
	return store_list_each(s, k, ns, selector, skip_then, &x, list_rv, e);
}

int store_list_walk_skip(store *s, const struct store_kind *k, const char *ns, const char *selector,
                         store_skip_fn skip, store_each_fn fn, void *arg, uint64_t *list_rv,
                         struct err *e)
{
	struct skipping x = {skip, fn, arg};
	return skip ? store_list_walk(s, k, ns, selector, skip_then, &x, list_rv, e)
	            : store_list_walk(s, k, ns, selector, fn, arg, list_rv, e);
}

int store_list_walk(store *s, const struct store_kind *k, const char *ns, const char *selector,
                    store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	cJSON *items = NULL, *it;
	int r = store_list(s, k, ns, selector, &items, list_rv, e);
	for (it = r == 0 ? items->child : NULL; it && r == 0; it = it->next)
		r = fn(it, arg);
	cJSON_Delete(items);
	return r;
}

int store_create(store *s, const cJSON *obj, cJSON **out, struct err *e)
{
	return s->ops->create(s, obj, out, e);
}

int store_update(store *s, const cJSON *obj, cJSON **out, struct err *e)
{
	return s->ops->update(s, obj, out, e);
}

int store_update_status(store *s, const cJSON *obj, cJSON **out, struct err *e)
{
	return s->ops->update_status(s, obj, out, e);
}

/* metadata.<field> of o set to value (replacing it); false when out of memory. */
static bool meta_put(cJSON *o, const char *field, const char *value)
{
	cJSON *m = cJSON_GetObjectItem(o, "metadata");
	if (!m || !value)
		return false;
	cJSON_DeleteItemFromObject(m, field);
	return cJSON_AddStringToObject(m, field, value) != NULL;
}

/* The second call of a two-call write, pinned to the object and version the first wrote. */
static int write_second(store *s, int (*op)(store *, const cJSON *, cJSON **, struct err *),
                        const cJSON *obj, const cJSON *first, cJSON **out, struct err *e)
{
	cJSON *o = cJSON_Duplicate(obj, true);
	int r = o && meta_put(o, "resourceVersion", store_meta_str(first, "resourceVersion")) &&
	                meta_put(o, "uid", store_meta_str(first, "uid"))
	            ? op(s, o, out, e)
	            : err_set(e, -ENOMEM, "out of memory");
	cJSON_Delete(o);
	return r;
}

static int write_two(store *s, const cJSON *obj, bool create, cJSON **out, struct err *e)
{
	cJSON *first = NULL;
	int r = create ? store_create(s, obj, &first, e) : store_update_status(s, obj, &first, e);
	if (r == 0)
		r = write_second(s, create ? store_update_status : store_update, obj, first, out,
		                 e);
	cJSON_Delete(first);
	return r;
}

int store_create_with_status(store *s, const cJSON *obj, cJSON **out, struct err *e)
{
	if (out)
		*out = NULL;
	return s->ops->write_all ? s->ops->write_all(s, obj, true, out, e)
	                         : write_two(s, obj, true, out, e);
}

int store_update_with_status(store *s, const cJSON *obj, cJSON **out, struct err *e)
{
	if (out)
		*out = NULL;
	return s->ops->write_all ? s->ops->write_all(s, obj, false, out, e)
	                         : write_two(s, obj, false, out, e);
}

int store_delete(store *s, const struct store_kind *k, const char *ns, const char *name,
                 const char *uid_precondition, const char *rv_precondition, struct err *e)
{
	return s->ops->remove(s, k, ns, name, uid_precondition, rv_precondition, e);
}

int store_watch_open(store *s, const struct store_kind *k, uint64_t from_rv, store_watch **w,
                     struct err *e)
{
	return s->ops->watch(s, k, from_rv, w, e);
}

int store_watch_next(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
                     struct err *e)
{
	return w->ops->watch_next(w, timeout_ms, type, obj, e);
}

void store_watch_close(store_watch *w)
{
	if (w)
		w->ops->watch_close(w);
}

int store_health(store *s, struct err *e)
{
	return s->ops->health ? s->ops->health(s, e) : 0;
}

void store_close(store *s)
{
	if (s)
		s->ops->close(s);
}
