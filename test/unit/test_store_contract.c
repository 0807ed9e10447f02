/* The store contract (spec/standalone.md, store.h), one suite for both implementations:
 * create/get/list (selectors, pages)/update/status/delete, resourceVersion and UID
 * preconditions, generation, finalizers, namespaced kinds and watches (from 0, from a list's
 * version, across the end of a server's watch stream).
 *
 * Without PILLAR_TEST_STORE (make unit) it runs on the embedded store, a fresh directory per
 * test.  With PILLAR_TEST_STORE=kube it runs unchanged on the kube store against the API server
 * of $KUBECONFIG (test/interop/kube-store: the test API server on a real etcd); every object of
 * the store's kinds is removed before each test.  Objects are valid under the CRDs' schemas and
 * CEL rules, since the API server enforces them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "store/store.h"
#include "testutil.h"

static const char *dir;
static store *st;
static bool on_kube;

/* The kube store with small pages and short watch streams, so paging and stream resumption
 * are exercised by a few objects in a few seconds. */
static const struct store_open_opts kube_opts = {
    .component = "pillar-csi-contract", .qps = -1, .list_page = 2, .watch_secs = 1};

static void reset_kube(void)
{
	for (const struct store_kind *const *k = store_kinds(); *k; k++) {
		cJSON *items = NULL, *it;
		ck_assert_int_eq(store_list(st, *k, NULL, NULL, &items, NULL, NULL), 0);
		cJSON_ArrayForEach(it, items)
		{
			const char *ns = store_meta_str(it, "namespace"),
			           *n = store_meta_str(it, "name");
			cJSON_DeleteItemFromObject(cJSON_GetObjectItem(it, "metadata"),
			                           "finalizers");
			store_update(st, it, NULL, NULL);
			store_delete(st, *k, ns, n, NULL, NULL, NULL);
		}
		cJSON_Delete(items);
	}
}

static void setup(void)
{
	static char path[512];
	struct err e = {0};
	const char *which = getenv("PILLAR_TEST_STORE");
	on_kube = which && !strcmp(which, "kube");
	if (on_kube) {
		struct store_open_opts o = kube_opts;
		o.kubeconfig = getenv("KUBECONFIG");
		ck_assert_msg(store_kube_open(&o, &st, &e) == 0, "%s", e.msg);
		reset_kube();
		return;
	}
	snprintf(path, sizeof(path), "%s", tu_mkdtemp());
	dir = path;
	ck_assert_int_eq(store_dir_open(dir, true, 50, &st, NULL), 0);
}

static void teardown(void)
{
	store_close(st);
	st = NULL;
	if (!on_kube)
		tu_rmtree(dir);
}

static const struct store_kind *K(const char *n)
{
	return store_kind_lookup(n);
}

static cJSON *obj(const char *kind, const char *name, const char *spec_json)
{
	return tu_store_obj(kind, name, spec_json);
}

/* Valid specs (the API server checks them against the CRDs). */
#define AGENT_SPEC "{\"nodeRef\":{\"name\":\"storage-1\"}}"
#define STORE_SPEC "{\"agentRef\":\"a\",\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}"
#define PROTO_SPEC "{\"protocol\":{\"nvmeofTcp\":{}}}"
#define PVST_SPEC                                                                          \
	"{\"volumeID\":\"a/zfs-zvol/nvmeof-tcp/tank/%s\",\"agentVolumeID\":\"tank/%s\","   \
	"\"agentRef\":\"a\",\"backendType\":\"zfs-zvol\",\"protocolType\":\"nvmeof-tcp\"," \
	"\"capacityBytes\":1073741824}"

static cJSON *pvst(const char *name)
{
	char spec[512];
	snprintf(spec, sizeof(spec), PVST_SPEC, name, name);
	return obj("PillarVolumeState", name, spec);
}

static int64_t generation(const cJSON *o)
{
	int64_t g = 0;
	json_get_int64(cJSON_GetObjectItem(o, "metadata"), "generation", &g);
	return g;
}

/* The message of a store error ends with the Kubernetes message after the resource name (the
 * API server names CRDs' resources with their group: pillaragents.pillar-csi.bhyoo.com). */
#define ck_assert_msg_ends(msg, tail)                                        \
	ck_assert_msg(strlen(msg) >= strlen(tail) &&                         \
	                  !strcmp((msg) + strlen(msg) - strlen(tail), tail), \
	              "message \"%s\" does not end with \"%s\"", msg, tail)

START_TEST(test_create_get_and_errors)
{
	cJSON *o = obj("PillarAgent", "storage-1", AGENT_SPEC), *out, *got;
	struct err e = {0};
	cJSON_AddObjectToObject(o, "status"); /* status is ignored on create (status subresource) */
	ck_assert_msg(store_create(st, o, &out, &e) == 0, "%s", e.msg);
	ck_assert_ptr_nonnull(store_meta_str(out, "uid"));
	ck_assert_int_eq(strlen(store_meta_str(out, "uid")), 36);
	ck_assert_ptr_nonnull(store_meta_str(out, "creationTimestamp"));
	ck_assert_uint_gt(store_meta_rv(out), 0);
	ck_assert_int_eq(generation(out), 1);
	ck_assert_ptr_null(cJSON_GetObjectItem(out, "status"));
	ck_assert_str_eq(json_get_str(out, "kind"), "PillarAgent");
	ck_assert_int_eq(store_get(st, K("pa"), NULL, "storage-1", &got, &e), 0);
	ck_assert(cJSON_Compare(got, out, 1));
	cJSON_Delete(got);
	cJSON_Delete(out);

	ck_assert_int_eq(store_create(st, o, NULL, &e), STORE_ALREADY_EXISTS);
	ck_assert_str_eq(e.msg, "pillaragents.pillar-csi.bhyoo.com \"storage-1\" already exists");
	ck_assert_str_eq(store_reason(STORE_ALREADY_EXISTS), "AlreadyExists");
	ck_assert_int_eq(store_get(st, K("pa"), NULL, "nope", &got, &e), STORE_NOT_FOUND);
	/* the API server's words (transcript 02d): the qualified resource, plural.group */
	ck_assert_str_eq(e.msg, "pillaragents.pillar-csi.bhyoo.com \"nope\" not found");
	ck_assert_ptr_null(got);
	cJSON_Delete(o);

	/* names are validated before they touch a path or a request */
	o = obj("PillarAgent", "../etc", AGENT_SPEC);
	ck_assert_int_eq(store_create(st, o, NULL, &e), STORE_INVALID);
	ck_assert_ptr_nonnull(strstr(e.msg, "lower case alphanumeric"));
	cJSON_Delete(o);
	ck_assert_int_eq(store_get(st, K("pa"), NULL, "a/b", &got, &e), STORE_INVALID);
	ck_assert_int_eq(store_get(st, K("pa"), NULL, "", &got, &e), STORE_INVALID);
	/* unknown kind and wrong apiVersion */
	const char *bad =
	    "{\"apiVersion\":\"v9\",\"kind\":\"PillarAgent\",\"metadata\":{\"name\":\"x\"}}";
	json_parse_strict(bad, strlen(bad), &o, NULL);
	ck_assert_int_eq(store_create(st, o, NULL, &e), STORE_INVALID);
	ck_assert_str_eq(e.msg,
	                 "PillarAgent: apiVersion must be \"pillar-csi.bhyoo.com/v1alpha1\"");
	cJSON_Delete(o);
	/* resourceVersion must not be set on create */
	o = obj("PillarAgent", "x", AGENT_SPEC);
	cJSON_AddStringToObject(cJSON_GetObjectItem(o, "metadata"), "resourceVersion", "5");
	ck_assert_int_eq(store_create(st, o, NULL, &e), STORE_INVALID);
	cJSON_Delete(o);
}
END_TEST

START_TEST(test_update_conflict_generation_status)
{
	cJSON *o = obj("PillarStore", "tank", STORE_SPEC), *v1, *v2, *v3, *stale;
	struct err e = {0};
	ck_assert_msg(store_create(st, o, &v1, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
	stale = cJSON_Duplicate(v1, 1);

	/* label change: rv bumps, generation stays */
	cJSON *labels = cJSON_AddObjectToObject(cJSON_GetObjectItem(v1, "metadata"), "labels");
	cJSON_AddStringToObject(labels, "pillar-csi.bhyoo.com/agent", "a");
	ck_assert_int_eq(store_update(st, v1, &v2, &e), 0);
	ck_assert_uint_gt(store_meta_rv(v2), store_meta_rv(v1));
	ck_assert_int_eq(generation(v2), 1);

	/* the stale copy conflicts, with the Kubernetes message */
	ck_assert_int_eq(store_update(st, stale, NULL, &e), STORE_CONFLICT);
	ck_assert_str_eq(e.msg,
	                 "Operation cannot be fulfilled on pillarstores.pillar-csi.bhyoo.com "
	                 "\"tank\": the object has been modified; please apply your "
	                 "changes to the latest version and try again");
	ck_assert_int_eq(store_update_status(st, stale, NULL, &e), STORE_CONFLICT);

	/* status update touches only status */
	cJSON *s = cJSON_Duplicate(v2, 1);
	cJSON_AddStringToObject(
	    cJSON_AddObjectToObject(cJSON_AddObjectToObject(s, "status"), "capacity"), "total",
	    "1Gi");
	cJSON_ReplaceItemInObject(s, "spec",
	                          cJSON_Parse("{\"agentRef\":\"evil\",\"backend\":{\"zfs\":{"
	                                      "\"pool\":\"tank\"}}}"));
	ck_assert_msg(store_update_status(st, s, &v3, &e) == 0, "%s", e.msg);
	cJSON *cap = cJSON_GetObjectItem(cJSON_GetObjectItem(v3, "status"), "capacity");
	ck_assert_str_eq(json_get_str(cap, "total"), "1Gi");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(v3, "spec"), "agentRef"), "a");
	ck_assert_int_eq(generation(v3), 1);
	cJSON_Delete(s);

	/* a spec change bumps generation; status cannot be changed through update */
	cJSON *u = cJSON_Duplicate(v3, 1), *v4;
	cJSON_ReplaceItemInObject(
	    u, "spec",
	    cJSON_Parse("{\"agentRef\":\"a\",\"backend\":{\"zfs\":{\"pool\":"
	                "\"tank\",\"properties\":{\"compression\":\"lz4\"}}}}"));
	cJSON_ReplaceItemInObject(u, "status", cJSON_Parse("{\"capacity\":{\"total\":\"2Gi\"}}"));
	ck_assert_msg(store_update(st, u, &v4, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(generation(v4), 2);
	cap = cJSON_GetObjectItem(cJSON_GetObjectItem(v4, "status"), "capacity");
	ck_assert_str_eq(json_get_str(cap, "total"), "1Gi");
	ck_assert_str_eq(store_meta_str(v4, "uid"), store_meta_str(v1, "uid"));
	ck_assert_str_eq(store_meta_str(v4, "creationTimestamp"),
	                 store_meta_str(v1, "creationTimestamp"));

	/* without a resourceVersion an update is unconditional */
	cJSON *nv = cJSON_Duplicate(v1, 1), *v5;
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(nv, "metadata"), "resourceVersion");
	cJSON_ReplaceItemInObject(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(nv, "metadata"), "labels"),
	    "pillar-csi.bhyoo.com/agent", cJSON_CreateString("b"));
	ck_assert_msg(store_update(st, nv, &v5, &e) == 0, "%s", e.msg);
	ck_assert_uint_gt(store_meta_rv(v5), store_meta_rv(v4));
	cJSON_Delete(nv);
	cJSON_Delete(v5);

	/* update of a missing object */
	cJSON *m = obj("PillarStore", "missing", STORE_SPEC);
	ck_assert_int_eq(store_update(st, m, NULL, &e), STORE_NOT_FOUND);
	ck_assert_int_eq(store_update_status(st, m, NULL, &e), STORE_NOT_FOUND);
	cJSON_Delete(m);
	cJSON_Delete(u);
	cJSON_Delete(stale);
	cJSON_Delete(v1);
	cJSON_Delete(v2);
	cJSON_Delete(v3);
	cJSON_Delete(v4);
}
END_TEST

START_TEST(test_delete_finalizers_and_preconditions)
{
	cJSON *o = obj("PillarStore", "tank", STORE_SPEC), *v1, *v2, *got;
	struct err e = {0};
	cJSON *fin = cJSON_AddArrayToObject(cJSON_GetObjectItem(o, "metadata"), "finalizers");
	cJSON_AddItemToArray(fin, cJSON_CreateString("pillar-csi.bhyoo.com/store-protection"));
	ck_assert_int_eq(store_create(st, o, &v1, &e), 0);
	cJSON_Delete(o);

	ck_assert_int_eq(store_delete(st, K("pst"), NULL, "tank", "wrong-uid", NULL, &e),
	                 STORE_CONFLICT);
	char want[512];
	snprintf(want, sizeof(want),
	         "Operation cannot be fulfilled on PillarStore.pillar-csi.bhyoo.com \"tank\": the "
	         "UID in the precondition (wrong-uid) does not match the UID in record (%s). The "
	         "object might have been deleted and then recreated",
	         store_meta_str(v1, "uid"));
	ck_assert_str_eq(e.msg, want);
	ck_assert_int_eq(store_delete(st, K("pst"), NULL, "tank", NULL, "999999999", &e),
	                 STORE_CONFLICT);
	snprintf(want, sizeof(want),
	         "Operation cannot be fulfilled on PillarStore.pillar-csi.bhyoo.com \"tank\": the "
	         "ResourceVersion in the precondition (999999999) does not match the "
	         "ResourceVersion in record (%s). The object might have been modified",
	         store_meta_str(v1, "resourceVersion"));
	ck_assert_str_eq(e.msg, want);
	/* with a finalizer: only deletionTimestamp is set */
	ck_assert_int_eq(
	    store_delete(st, K("pst"), NULL, "tank", store_meta_str(v1, "uid"), NULL, &e), 0);
	ck_assert_int_eq(store_get(st, K("pst"), NULL, "tank", &v2, &e), 0);
	ck_assert_ptr_nonnull(store_meta_str(v2, "deletionTimestamp"));
	/* deletionTimestamp cannot be cleared by an update */
	cJSON *u = cJSON_Duplicate(v2, 1);
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(u, "metadata"), "deletionTimestamp");
	cJSON_AddStringToObject(
	    cJSON_AddObjectToObject(cJSON_GetObjectItem(u, "metadata"), "labels"), "a", "b");
	cJSON *v3;
	ck_assert_msg(store_update(st, u, &v3, &e) == 0, "%s", e.msg);
	ck_assert_ptr_nonnull(store_meta_str(v3, "deletionTimestamp"));
	cJSON_Delete(u);
	/* removing the last finalizer removes the object */
	u = cJSON_Duplicate(v3, 1);
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(u, "metadata"), "finalizers");
	ck_assert_msg(store_update(st, u, NULL, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(store_get(st, K("pst"), NULL, "tank", &got, &e), STORE_NOT_FOUND);
	ck_assert_int_eq(store_delete(st, K("pst"), NULL, "tank", NULL, NULL, &e), STORE_NOT_FOUND);
	cJSON_Delete(u);
	cJSON_Delete(v1);
	cJSON_Delete(v2);
	cJSON_Delete(v3);

	/* without finalizers delete removes at once; a matching UID precondition is accepted */
	o = obj("PillarProtocol", "tcp", PROTO_SPEC);
	ck_assert_msg(store_create(st, o, &v1, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(
	    store_delete(st, K("pstr"), NULL, "tcp", store_meta_str(v1, "uid"), NULL, &e), 0);
	ck_assert_int_eq(store_get(st, K("pstr"), NULL, "tcp", &got, &e), STORE_NOT_FOUND);
	cJSON_Delete(o);
	cJSON_Delete(v1);
}
END_TEST

static void add_labeled(const char *name, const char *agent)
{
	cJSON *o = pvst(name);
	struct err e = {0};
	if (agent)
		cJSON_AddStringToObject(
		    cJSON_AddObjectToObject(cJSON_GetObjectItem(o, "metadata"), "labels"),
		    "pillar-csi.bhyoo.com/agent", agent);
	ck_assert_msg(store_create(st, o, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
}

static int list_count(const char *sel, char *names, size_t cap)
{
	cJSON *items, *it;
	uint64_t rv = 0;
	struct err e = {0};
	int r = store_list(st, K("pvst"), NULL, sel, &items, &rv, &e);
	if (r < 0)
		return r;
	ck_assert_uint_gt(rv, 0);
	names[0] = '\0';
	cJSON_ArrayForEach(it, items)
	{
		ck_assert_str_eq(json_get_str(it, "kind"), "PillarVolumeState");
		strncat(names, store_meta_str(it, "name"), cap - strlen(names) - 2);
		strcat(names, " ");
	}
	int n = cJSON_GetArraySize(items);
	cJSON_Delete(items);
	return n;
}

static int append_name(cJSON *obj, void *arg)
{
	strcat(arg, store_meta_str(obj, "name"));
	strcat(arg, " ");
	return 0;
}

START_TEST(test_list_selectors_and_pages)
{
	char names[256];
	add_labeled("pvc-c", "a");
	add_labeled("pvc-a", "a");
	add_labeled("pvc-b", "b");
	add_labeled("pvc-d", NULL);
	add_labeled("pvc-e", "a");
	/* the kube store of this suite lists 2 objects per request: 3 pages */
	ck_assert_int_eq(list_count(NULL, names, sizeof(names)), 5);
	ck_assert_str_eq(names, "pvc-a pvc-b pvc-c pvc-d pvc-e ");
	/* the same list one object at a time (on the kube store: one page at a time) */
	uint64_t each_rv = 0, list_rv = 0;
	names[0] = '\0';
	ck_assert_int_eq(
	    store_list_each(st, K("pvst"), NULL, NULL, append_name, names, &each_rv, NULL), 0);
	ck_assert_str_eq(names, "pvc-a pvc-b pvc-c pvc-d pvc-e ");
	names[0] = '\0';
	ck_assert_int_eq(store_list_each(st, K("pvst"), NULL, "pillar-csi.bhyoo.com/agent=a",
	                                 append_name, names, NULL, NULL),
	                 0);
	ck_assert_str_eq(names, "pvc-a pvc-c pvc-e ");
	cJSON *all = NULL;
	ck_assert_int_eq(store_list(st, K("pvst"), NULL, NULL, &all, &list_rv, NULL), 0);
	cJSON_Delete(all);
	ck_assert_uint_eq(each_rv, list_rv);
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent=a", names, sizeof(names)), 3);
	ck_assert_str_eq(names, "pvc-a pvc-c pvc-e ");
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent==b", names, sizeof(names)), 1);
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent!=a", names, sizeof(names)), 2);
	ck_assert_str_eq(names, "pvc-b pvc-d ");
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent", names, sizeof(names)), 4);
	ck_assert_int_eq(list_count("!pillar-csi.bhyoo.com/agent", names, sizeof(names)), 1);
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent=a,pillar-csi.bhyoo.com/agent!=a",
	                            names, sizeof(names)),
	                 0);
	ck_assert_int_eq(list_count("a=b=c", names, sizeof(names)), STORE_INVALID);
	ck_assert_int_eq(list_count(",", names, sizeof(names)), STORE_INVALID);
	/* an empty kind lists nothing */
	cJSON *items;
	ck_assert_int_eq(store_list(st, K("pa"), NULL, NULL, &items, NULL, NULL), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 0);
	cJSON_Delete(items);
}
END_TEST

START_TEST(test_namespaced_kind)
{
	const char *pvc =
	    "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\",\"metadata\":"
	    "{\"name\":\"data\",\"namespace\":\"default\",\"annotations\":{\"x\":\"y\"}},"
	    "\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":"
	    "{\"storage\":\"1Gi\"}}}}";
	cJSON *o, *got, *items;
	struct err e = {0};
	json_parse_strict(pvc, strlen(pvc), &o, NULL);
	ck_assert_msg(store_create(st, o, NULL, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(store_get(st, K("pvc"), "default", "data", &got, &e), 0);
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "metadata"), "annotations"),
	                 "x"),
	    "y");
	ck_assert_str_eq(json_get_str(got, "kind"), "PersistentVolumeClaim");
	cJSON_Delete(got);
	ck_assert_int_eq(store_get(st, K("pvc"), "other", "data", &got, &e), STORE_NOT_FOUND);
	/* a core kind has no group in the qualified resource */
	ck_assert_str_eq(e.msg, "persistentvolumeclaims \"data\" not found");
	ck_assert_int_eq(store_get(st, K("pvc"), NULL, "data", &got, &e), STORE_INVALID);
	ck_assert_int_eq(store_list(st, K("pvc"), NULL, NULL, &items, NULL, &e), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 1);
	ck_assert_str_eq(json_get_str(items->child, "kind"), "PersistentVolumeClaim");
	cJSON_Delete(items);
	cJSON_Delete(o);
}
END_TEST

static void expect_quiet(store_watch *w, int ms)
{
	enum store_event_type t;
	cJSON *o = NULL;
	ck_assert_int_eq(store_watch_next(w, ms, &t, &o, NULL), 0);
	ck_assert_ptr_null(o);
}

/* store_create_with_status / store_update_with_status: the object and its status both written
 * (the embedded store in one write: one event; the API server in two requests), a stale
 * version conflicts with nothing written. */
START_TEST(test_writes_with_status)
{
	cJSON *o = obj("PillarStore", "tank", STORE_SPEC), *v1, *v2, *items;
	struct err e = {0};
	store_watch *w;
	uint64_t rv;
	ck_assert_int_eq(store_list(st, K("pst"), NULL, NULL, &items, &rv, NULL), 0);
	cJSON_Delete(items);
	ck_assert_int_eq(store_watch_open(st, K("pst"), rv, &w, NULL), 0);
	cJSON_AddStringToObject(
	    cJSON_AddObjectToObject(cJSON_AddObjectToObject(o, "status"), "capacity"), "total",
	    "1Gi");
	ck_assert_msg(store_create_with_status(st, o, &v1, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
	cJSON *cap = cJSON_GetObjectItem(cJSON_GetObjectItem(v1, "status"), "capacity");
	ck_assert_str_eq(json_get_str(cap, "total"), "1Gi");
	ck_assert_int_eq(generation(v1), 1);
	tu_expect_event(w, STORE_ADDED, "tank", on_kube ? NULL : "status");
	if (on_kube)
		tu_expect_event(w, STORE_MODIFIED, "tank", "status");
	expect_quiet(w, 100);

	cJSON *u = cJSON_Duplicate(v1, 1), *stale = cJSON_Duplicate(v1, 1);
	cJSON_AddStringToObject(
	    cJSON_AddObjectToObject(cJSON_GetObjectItem(u, "metadata"), "annotations"),
	    "pillar-csi.bhyoo.com/success-recorded", "true");
	cJSON_ReplaceItemInObject(u, "status", cJSON_Parse("{\"capacity\":{\"total\":\"2Gi\"}}"));
	ck_assert_msg(store_update_with_status(st, u, &v2, &e) == 0, "%s", e.msg);
	cap = cJSON_GetObjectItem(cJSON_GetObjectItem(v2, "status"), "capacity");
	ck_assert_str_eq(json_get_str(cap, "total"), "2Gi");
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(v2, "metadata"), "annotations"),
	                 "pillar-csi.bhyoo.com/success-recorded"),
	    "true");
	ck_assert_int_eq(generation(v2), 1);
	tu_expect_event(w, STORE_MODIFIED, "tank", "status");
	if (on_kube)
		tu_expect_event(w, STORE_MODIFIED, "tank", "status");
	expect_quiet(w, 100);
	/* the stale copy conflicts and writes nothing */
	ck_assert_int_eq(store_update_with_status(st, stale, NULL, &e), STORE_CONFLICT);
	expect_quiet(w, 100);
	store_watch_close(w);
	cJSON_Delete(u);
	cJSON_Delete(stale);
	cJSON_Delete(v1);
	cJSON_Delete(v2);
}
END_TEST

START_TEST(test_watch)
{
	store_watch *w, *w2;
	cJSON *o = obj("PillarAgent", "a1", AGENT_SPEC), *v, *items;
	uint64_t rv;
	ck_assert_int_eq(store_create(st, o, &v, NULL), 0);
	cJSON_Delete(o);
	/* from 0: the current objects as ADDED */
	ck_assert_int_eq(store_watch_open(st, K("pa"), 0, &w, NULL), 0);
	tu_expect_event(w, STORE_ADDED, "a1", NULL);
	/* list + watch from the list's version: nothing missed, nothing repeated */
	ck_assert_int_eq(store_list(st, K("pa"), NULL, NULL, &items, &rv, NULL), 0);
	cJSON_Delete(items);
	ck_assert_int_eq(store_watch_open(st, K("pa"), rv, &w2, NULL), 0);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(v, "status"), "agentVersion", "1");
	ck_assert_int_eq(store_update_status(st, v, NULL, NULL), 0);
	o = obj("PillarStore", "other-kind", STORE_SPEC);
	ck_assert_int_eq(store_create(st, o, NULL, NULL), 0); /* filtered out by kind */
	cJSON_Delete(o);
	ck_assert_int_eq(store_delete(st, K("pa"), NULL, "a1", NULL, NULL, NULL), 0);
	tu_expect_event(w, STORE_MODIFIED, "a1", "status");
	tu_expect_event(w, STORE_DELETED, "a1", "status");
	tu_expect_event(w2, STORE_MODIFIED, "a1", "status");
	tu_expect_event(w2, STORE_DELETED, "a1", NULL);
	expect_quiet(w, 100);
	store_watch_close(w);
	store_watch_close(w2);
	store_watch_close(NULL);
	cJSON_Delete(v);
}
END_TEST

/* A watch outlives the server's end of its stream (this suite's kube store asks for 1 s
 * streams): an event before and after the end arrives once each. */
START_TEST(test_watch_across_stream_ends)
{
	store_watch *w;
	cJSON *o = obj("PillarProtocol", "p1", PROTO_SPEC);
	ck_assert_int_eq(store_watch_open(st, K("pstr"), 0, &w, NULL), 0);
	ck_assert_int_eq(store_create(st, o, NULL, NULL), 0);
	cJSON_Delete(o);
	tu_expect_event(w, STORE_ADDED, "p1", NULL);
	expect_quiet(w, 2500);
	o = obj("PillarProtocol", "p2", PROTO_SPEC);
	ck_assert_int_eq(store_create(st, o, NULL, NULL), 0);
	cJSON_Delete(o);
	tu_expect_event(w, STORE_ADDED, "p2", NULL);
	expect_quiet(w, 1500);
	store_watch_close(w);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store contract");
	TCase *t = tcase_create(getenv("PILLAR_TEST_STORE") ?: "dir");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_create_get_and_errors);
	tcase_add_test(t, test_update_conflict_generation_status);
	tcase_add_test(t, test_writes_with_status);
	tcase_add_test(t, test_delete_finalizers_and_preconditions);
	tcase_add_test(t, test_list_selectors_and_pages);
	tcase_add_test(t, test_namespaced_kind);
	tcase_add_test(t, test_watch);
	tcase_add_test(t, test_watch_across_stream_ends);
	suite_add_tcase(s, t);
	return tu_run(s);
}
