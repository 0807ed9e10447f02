/* store/kube — the store contract (store.h, spec/standalone.md) over the Kubernetes API
 * (src/kube): every operation is one API request (list: one per page), watches are API watches
 * that resume from the last resourceVersion seen when the server ends a stream. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/client.h"
#include "kube/list.h"
#include "kube/watch.h"
#include "store/kube_int.h"
#include "store/store.h"

#define LIST_PAGE       500
#define WATCH_SECS      300
#define UPDATE_ATTEMPTS 5 /* unconditional updates: get, put, retry on Conflict */

struct kube_store {
	store base;
	struct kube_client *kc;
	int page, watch_secs;
};

/* ---- errors ---------------------------------------------------------------------------------- */

int kube_store_fail(int rc, const struct kube_status *st, struct err *e)
{
	if (rc == -ERANGE || st->kind == KUBE_GONE || st->kind == KUBE_EXPIRED)
		rc = STORE_EXPIRED;
	return err_set(e, rc, "%s", st->message[0] ? st->message : kube_reason_name(st->kind));
}

void kube_store_resource(const struct store_kind *k, struct kube_store_res *out)
{
	const char *slash = strchr(k->api_version, '/');
	memset(out, 0, sizeof(*out));
	if (slash) {
		snprintf(out->group, sizeof(out->group), "%.*s", (int)(slash - k->api_version),
		         k->api_version);
		snprintf(out->version, sizeof(out->version), "%s", slash + 1);
	} else {
		snprintf(out->version, sizeof(out->version), "%s", k->api_version);
	}
	out->r.group = out->group;
	out->r.version = out->version;
	out->r.plural = k->plural;
	out->r.namespaced = k->namespaced;
}

/* Checks what the dir store checks before any request, so both give the same answer. */
static int check_target(const struct store_kind *k, const char *ns, const char *name, struct err *e)
{
	if (name && store_validate_name(k->plural, name, e) < 0)
		return STORE_INVALID;
	if (k->namespaced && name && (!ns || !*ns))
		return err_set(e, STORE_INVALID, "%s \"%s\": a namespace is required", k->plural,
		               name);
	if (!k->namespaced && ns && *ns)
		return err_set(e, STORE_INVALID, "%s are not namespaced", k->plural);
	if (ns && *ns && store_validate_name("namespace", ns, e) < 0)
		return STORE_INVALID;
	return 0;
}

/* check_target, then the kind's REST address into res. */
static int target(const struct store_kind *k, const char *ns, const char *name,
                  struct kube_store_res *res, struct err *e)
{
	if (check_target(k, ns, name, e) < 0)
		return STORE_INVALID;
	kube_store_resource(k, res);
	return 0;
}

/* Items of a list answer lack apiVersion and kind for built-in kinds: give them back. */
void kube_store_typed(cJSON *obj, const struct store_kind *k)
{
	if (!cJSON_GetObjectItemCaseSensitive(obj, "kind"))
		cJSON_AddStringToObject(obj, "kind", k->kind);
	if (!cJSON_GetObjectItemCaseSensitive(obj, "apiVersion"))
		cJSON_AddStringToObject(obj, "apiVersion", k->api_version);
}

/* ---- reads ----------------------------------------------------------------------------------- */

static int k_get(store *st, const struct store_kind *k, const char *ns, const char *name,
                 cJSON **out, struct err *e)
{
	struct kube_store_res res;
	struct kube_status ks;
	*out = NULL;
	if (target(k, ns, name, &res, e) < 0)
		return STORE_INVALID;
	int rc = kube_get(((struct kube_store *)st)->kc, &res.r, ns, name, out, &ks);
	if (rc < 0)
		return kube_store_fail(rc, &ks, e);
	kube_store_typed(*out, k);
	return 0;
}

struct page_walk {
	const struct store_kind *k;
	store_each_fn fn;
	store_kept_fn kept; /* instead of fn: store_list_each_kept */
	void *arg;
	int rc; /* what fn returned when it stopped the list */
};

/* One item of a page as it is read: typed, handed to the caller's fn (kept: with its text,
 * unless typing added to the item what its text lacks). */
static int walk_item(cJSON *it, char *text, size_t len, void *arg)
{
	struct page_walk *w = arg;
	if (w->kept && !(cJSON_GetObjectItemCaseSensitive(it, "kind") &&
	                 cJSON_GetObjectItemCaseSensitive(it, "apiVersion")))
		text = NULL;
	kube_store_typed(it, w->k);
	w->rc = w->kept ? w->kept(it, text, len, w->arg) : w->fn(it, w->arg);
	return w->rc;
}

/* Every page of a list, each object handed to fn as it is read (kube/list.h): neither a page's
 * text nor its tree is ever held whole.  The list's version is the first page's (the later
 * pages continue it).  A continue token that expired (410 Expired: the version was compacted
 * while the list was taken) cannot be continued consistently, and what fn was already given
 * cannot be taken back: STORE_EXPIRED, and the caller lists again (as client-go's reflector
 * relists).  any: the first page asks for resourceVersion=0 (store_list_each_any), which
 * kube-apiserver's watch cache answers whole, ignoring limit; a server without one pages it,
 * and later pages carry only the continue token (as client-go's pager sends them). */
static int each_page(struct kube_store *s, const char *ns, const char *selector, bool any,
                     struct page_walk *w, uint64_t *list_rv, struct err *e)
{
	struct kube_store_res res;
	struct kube_status ks;
	char cont[4096] = "", rv[64];
	uint64_t first_rv = 0;
	kube_store_resource(w->k, &res);
	for (bool first = true;; first = false) {
		struct kube_list_opts lo = {.label_selector =
		                                selector && *selector ? selector : NULL,
		                            .resource_version = any && first ? "0" : NULL,
		                            .limit = s->page,
		                            .continue_token = cont[0] ? cont : NULL,
		                            .drop_managed_fields = w->kept != NULL};
		int rc = kube_list_each(s->kc, &res.r, ns, &lo, walk_item, w, rv, sizeof(rv), cont,
		                        sizeof(cont), &ks);
		if (rc != 0 && w->rc != 0)
			return w->rc; /* fn's own error, worded by fn */
		if (rc < 0) {
			bool continued = lo.continue_token != NULL;
			rc = kube_store_fail(rc, &ks, e);
			if (rc == STORE_EXPIRED && continued)
				err_prefix(e, "listing %s: list again", w->k->plural);
			return rc;
		}
		if (first)
			first_rv = strtoull(rv, NULL, 10);
		if (!cont[0])
			break;
	}
	if (list_rv)
		*list_rv = first_rv;
	return 0;
}

static int add_item(cJSON *obj, void *arr)
{
	cJSON *d = cJSON_Duplicate(obj, 1);
	return d && cJSON_AddItemToArray(arr, d) ? 0 : (cJSON_Delete(d), -ENOMEM);
}

/* Every page of a list into one array; a continue token that expired restarts the list (as
 * client-go's pager falls back to a full list). */
static int list_pages(struct kube_store *s, const struct store_kind *k, const char *ns,
                      const char *selector, cJSON **out, uint64_t *rv, struct err *e)
{
	for (int restarts = 0;; restarts++) {
		if (!(*out = cJSON_CreateArray()))
			return err_set(e, -ENOMEM, "out of memory");
		struct page_walk w = {.k = k, .fn = add_item, .arg = *out};
		int rc = each_page(s, ns, selector, false, &w, rv, e);
		if (rc == 0)
			return 0;
		cJSON_Delete(*out);
		*out = NULL;
		if (rc == -ENOMEM)
			return err_set(e, rc, "out of memory");
		if (rc != STORE_EXPIRED || restarts >= 3)
			return rc;
	}
}

/* The checks every list makes before a request: target, and the selector with the dir
 * store's rules and messages. */
static int check_list(const struct store_kind *k, const char *ns, const char *selector,
                      struct err *e)
{
	if (check_target(k, ns, NULL, e) < 0)
		return STORE_INVALID;
	if (selector && store_selector_match(selector, NULL, e) < 0)
		return STORE_INVALID;
	return 0;
}

static int list_each(store *st, const struct store_kind *k, const char *ns, const char *selector,
                     bool any, store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	struct err local = {0};
	struct page_walk w = {.k = k, .fn = fn, .arg = arg};
	if (check_list(k, ns, selector, e ? e : &local) < 0)
		return STORE_INVALID;
	return each_page((struct kube_store *)st, ns, selector, any, &w, list_rv, e ? e : &local);
}

/* store_list_each_kept: every object of the kind, each with its text, managedFields cut from
 * the text before it is parsed (kube/list.h). */
static int k_list_each_kept(store *st, const struct store_kind *k, bool any, store_kept_fn fn,
                            void *arg, uint64_t *list_rv, struct err *e)
{
	struct err local = {0};
	struct page_walk w = {.k = k, .kept = fn, .arg = arg};
	return each_page((struct kube_store *)st, NULL, NULL, any, &w, list_rv, e ? e : &local);
}

static int k_list_each(store *st, const struct store_kind *k, const char *ns, const char *selector,
                       store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	return list_each(st, k, ns, selector, false, fn, arg, list_rv, e);
}

static int k_list_each_any(store *st, const struct store_kind *k, const char *ns,
                           const char *selector, store_each_fn fn, void *arg, uint64_t *list_rv,
                           struct err *e)
{
	return list_each(st, k, ns, selector, true, fn, arg, list_rv, e);
}

static int k_list(store *st, const struct store_kind *k, const char *ns, const char *selector,
                  cJSON **items, uint64_t *list_rv, struct err *e)
{
	uint64_t rv = 0;
	struct err local = {0};
	*items = NULL;
	if (!e)
		e = &local;
	if (check_list(k, ns, selector, e) < 0)
		return STORE_INVALID;
	int rc = list_pages((struct kube_store *)st, k, ns, selector, items, &rv, e);
	if (rc == 0 && list_rv)
		*list_rv = rv;
	return rc;
}

/* ---- writes ---------------------------------------------------------------------------------- */

/* The kind, namespace and name of an object to write; 0 or STORE_INVALID. */
static int write_target(const cJSON *obj, const struct store_kind **k, const char **ns,
                        const char **name, struct err *e)
{
	if (!(*k = store_kind_of(obj, e)))
		return STORE_INVALID;
	*ns = store_meta_str(obj, "namespace");
	*name = store_meta_str(obj, "name");
	if (!*name)
		return err_set(e, STORE_INVALID, "%s: metadata.name is required", (*k)->kind);
	return check_target(*k, *ns, *name, e);
}

static int k_create(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	struct kube_store *s = (struct kube_store *)st;
	const struct store_kind *k;
	const char *ns, *name;
	struct kube_store_res res;
	struct kube_status ks;
	cJSON *got = NULL;
	if (out)
		*out = NULL;
	if (write_target(obj, &k, &ns, &name, e) < 0)
		return STORE_INVALID;
	if (store_meta_str(obj, "resourceVersion"))
		return err_set(
		    e, STORE_INVALID,
		    "%s \"%s\": resourceVersion should not be set on objects to be created",
		    k->plural, name);
	kube_store_resource(k, &res);
	int rc = kube_create(s->kc, &res.r, ns, obj, &got, &ks);
	if (rc < 0)
		return kube_store_fail(rc, &ks, e);
	kube_store_typed(got, k);
	if (out)
		*out = got;
	else
		cJSON_Delete(got);
	return 0;
}

/* PUT of obj (status: to the status subresource).  Without metadata.resourceVersion the
 * update is unconditional, as in the dir store: the current version is read and the PUT
 * retried on Conflict. */
static int put(struct kube_store *s, const cJSON *obj, bool status, cJSON **out, struct err *e)
{
	const struct store_kind *k;
	const char *ns, *name;
	struct kube_store_res res;
	struct kube_status ks;
	cJSON *got = NULL;
	int rc;
	if (out)
		*out = NULL;
	if (write_target(obj, &k, &ns, &name, e) < 0)
		return STORE_INVALID;
	kube_store_resource(k, &res);
	bool pinned = store_meta_str(obj, "resourceVersion") != NULL;
	for (int attempt = 0;; attempt++) {
		cJSON *send = (cJSON *)obj, *cur = NULL;
		if (!pinned) {
			if ((rc = kube_get(s->kc, &res.r, ns, name, &cur, &ks)) < 0)
				return kube_store_fail(rc, &ks, e);
			send = cJSON_Duplicate(obj, 1);
			cJSON *md =
			    send ? cJSON_GetObjectItemCaseSensitive(send, "metadata") : NULL;
			if (!md || !cJSON_AddStringToObject(md, "resourceVersion",
			                                    store_meta_str(cur, "resourceVersion")
			                                        ?: "")) {
				cJSON_Delete(cur);
				cJSON_Delete(send);
				return err_set(e, -ENOMEM, "out of memory");
			}
			cJSON_Delete(cur);
		}
		rc = status ? kube_update_status(s->kc, &res.r, ns, send, &got, &ks)
		            : kube_update(s->kc, &res.r, ns, send, &got, &ks);
		if (send != obj)
			cJSON_Delete(send);
		if (rc == STORE_CONFLICT && !pinned && attempt + 1 < UPDATE_ATTEMPTS)
			continue;
		if (rc < 0)
			return kube_store_fail(rc, &ks, e);
		break;
	}
	kube_store_typed(got, k);
	if (out)
		*out = got;
	else
		cJSON_Delete(got);
	return 0;
}

static int k_update(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	return put((struct kube_store *)st, obj, false, out, e);
}

static int k_update_status(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	return put((struct kube_store *)st, obj, true, out, e);
}

static int k_remove(store *st, const struct store_kind *k, const char *ns, const char *name,
                    const char *uid, const char *rv, struct err *e)
{
	struct kube_store_res res;
	struct kube_status ks;
	if (target(k, ns, name, &res, e) < 0)
		return STORE_INVALID;
	int rc = kube_delete(((struct kube_store *)st)->kc, &res.r, ns, name, uid, rv, NULL, &ks);
	return rc < 0 ? kube_store_fail(rc, &ks, e) : 0;
}

static void k_close(store *st)
{
	struct kube_store *s = (struct kube_store *)st;
	kube_client_free(s->kc);
	free(s);
}

static const struct store_ops kube_ops = {
    .get = k_get,
    .list = k_list,
    .list_each = k_list_each,
    .list_each_any = k_list_each_any,
    .list_each_kept = k_list_each_kept,
    .create = k_create,
    .update = k_update,
    .update_status = k_update_status,
    .remove = k_remove,
    .watch = kube_store_watch,
    .watch_next = kube_store_watch_next,
    .watch_close = kube_store_watch_close,
    .close = k_close,
};

struct kube_client *kube_store_client(store *st, int *watch_secs)
{
	*watch_secs = ((struct kube_store *)st)->watch_secs;
	return ((struct kube_store *)st)->kc;
}

int store_kube_open(const struct store_open_opts *o, store **out, struct err *e)
{
	struct kube_config *cfg = NULL;
	struct kube_client_opts ko;
	struct kube_store *s;
	int rc;
	*out = NULL;
	if (o && o->context && *o->context && !(o->kubeconfig && *o->kubeconfig))
		rc = err_set(e, -EINVAL, "--context needs a kubeconfig file (--kubeconfig)");
	else if (o && o->context && *o->context)
		rc = kube_config_from_file(&cfg, o->kubeconfig, o->context, e);
	else
		rc = kube_config_load(&cfg, o ? o->kubeconfig : NULL, e);
	if (rc < 0) {
		err_prefix(e, "--store=kube");
		return rc;
	}
	kube_client_opts_init(&ko);
	ko.component = o && o->component ? o->component : "pillar-csi";
	if (o && o->qps != 0)
		ko.qps = o->qps;
	if (o && o->burst > 0)
		ko.burst = o->burst;
	s = calloc(1, sizeof(*s));
	if (!s) {
		kube_config_free(cfg);
		return err_set(e, -ENOMEM, "out of memory");
	}
	s->base.ops = &kube_ops;
	s->page = o && o->list_page > 0 ? o->list_page : LIST_PAGE;
	s->watch_secs = o && o->watch_secs > 0 ? o->watch_secs : WATCH_SECS;
	rc = kube_client_new(&s->kc, cfg, &ko, e);
	kube_config_free(cfg);
	if (rc < 0) {
		free(s);
		err_prefix(e, "--store=kube");
		return rc;
	}
	*out = &s->base;
	return 0;
}

bool store_is_kube(const store *st)
{
	return st && st->ops == &kube_ops;
}

struct kube_client *store_kube_client(store *st)
{
	return store_is_kube(st) ? ((struct kube_store *)st)->kc : NULL;
}
