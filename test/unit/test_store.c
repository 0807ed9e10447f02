/* The object store's Kubernetes semantics on the embedded directory implementation
 * (spec/standalone.md): create/get/list/update/status/delete, resourceVersion preconditions,
 * generation, finalizers, label selectors, watches (in process and across handles), the owner
 * lock and refusal of corrupt files. */
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

static void setup(void)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s", tu_mkdtemp());
	dir = path;
	ck_assert_int_eq(store_dir_open(dir, true, 50, &st, NULL), 0);
}

static void teardown(void)
{
	store_close(st);
	st = NULL;
	tu_rmtree(dir);
}

static cJSON *obj(const char *kind, const char *name, const char *spec_json)
{
	const struct store_kind *k = store_kind_lookup(kind);
	char buf[2048];
	cJSON *o;
	snprintf(
	    buf, sizeof(buf),
	    "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"name\":\"%s\"},\"spec\":%s}",
	    k->api_version, k->kind, name, spec_json);
	ck_assert_int_eq(json_parse_strict(buf, strlen(buf), &o, NULL), 0);
	return o;
}

static const struct store_kind *K(const char *n)
{
	return store_kind_lookup(n);
}

START_TEST(test_kinds)
{
	ck_assert_str_eq(K("pvst")->kind, "PillarVolumeState");
	ck_assert_str_eq(K("PillarAgents")->kind, "PillarAgent");
	ck_assert_str_eq(K("pillarstorageclass")->plural, "pillarstorageclasses");
	ck_assert_str_eq(K("pstr")->kind, "PillarProtocol");
	ck_assert_str_eq(K("pst")->kind, "PillarStore");
	ck_assert_str_eq(K("psc")->kind, "PillarStorageClass");
	ck_assert_str_eq(K("pa")->kind, "PillarAgent");
	ck_assert_str_eq(K("csinode")->api_version, "storage.k8s.io/v1");
	ck_assert_ptr_null(K("widgets"));
}
END_TEST

START_TEST(test_create_get_and_errors)
{
	cJSON *o = obj("PillarAgent", "storage-1", "{\"nodeRef\":{\"name\":\"storage-1\"}}"), *out,
	      *got;
	struct err e = {0};
	cJSON_AddObjectToObject(o, "status"); /* status is ignored on create (status subresource) */
	ck_assert_int_eq(store_create(st, o, &out, &e), 0);
	ck_assert_ptr_nonnull(store_meta_str(out, "uid"));
	ck_assert_int_eq(strlen(store_meta_str(out, "uid")), 36);
	ck_assert_ptr_nonnull(store_meta_str(out, "creationTimestamp"));
	ck_assert_uint_eq(store_meta_rv(out), 1);
	int64_t gen = 0;
	ck_assert_int_eq(json_get_int64(cJSON_GetObjectItem(out, "metadata"), "generation", &gen),
	                 0);
	ck_assert_int_eq(gen, 1);
	ck_assert_ptr_null(cJSON_GetObjectItem(out, "status"));
	ck_assert_int_eq(store_get(st, K("pa"), NULL, "storage-1", &got, &e), 0);
	ck_assert(cJSON_Compare(got, out, 1));
	cJSON_Delete(got);
	cJSON_Delete(out);

	ck_assert_int_eq(store_create(st, o, NULL, &e), STORE_ALREADY_EXISTS);
	ck_assert_str_eq(e.msg, "pillaragents \"storage-1\" already exists");
	ck_assert_str_eq(store_reason(STORE_ALREADY_EXISTS), "AlreadyExists");
	ck_assert_int_eq(store_get(st, K("pa"), NULL, "nope", &got, &e), STORE_NOT_FOUND);
	ck_assert_str_eq(e.msg, "pillaragents \"nope\" not found");
	ck_assert_ptr_null(got);
	cJSON_Delete(o);

	/* names are validated before they touch a path */
	o = obj("PillarAgent", "../etc", "{}");
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
	o = obj("PillarAgent", "x", "{}");
	cJSON_AddStringToObject(cJSON_GetObjectItem(o, "metadata"), "resourceVersion", "5");
	ck_assert_int_eq(store_create(st, o, NULL, &e), STORE_INVALID);
	cJSON_Delete(o);
}
END_TEST

START_TEST(test_update_conflict_generation_status)
{
	cJSON *o = obj("PillarVolumeState", "pvc-1", "{\"agentRef\":\"a\"}"), *v1, *v2, *v3, *stale;
	struct err e = {0};
	int64_t gen;
	ck_assert_int_eq(store_create(st, o, &v1, &e), 0);
	cJSON_Delete(o);
	stale = cJSON_Duplicate(v1, 1);

	/* label change: rv bumps, generation stays */
	cJSON *labels = cJSON_AddObjectToObject(cJSON_GetObjectItem(v1, "metadata"), "labels");
	cJSON_AddStringToObject(labels, "pillar-csi.bhyoo.com/agent", "a");
	ck_assert_int_eq(store_update(st, v1, &v2, &e), 0);
	ck_assert_uint_gt(store_meta_rv(v2), store_meta_rv(v1));
	json_get_int64(cJSON_GetObjectItem(v2, "metadata"), "generation", &gen);
	ck_assert_int_eq(gen, 1);

	/* the stale copy conflicts, with the Kubernetes message */
	ck_assert_int_eq(store_update(st, stale, NULL, &e), STORE_CONFLICT);
	ck_assert_str_eq(e.msg,
	                 "Operation cannot be fulfilled on pillarvolumestates \"pvc-1\": the "
	                 "object has been modified; please apply your changes to the latest "
	                 "version and try again");
	ck_assert_int_eq(store_update_status(st, stale, NULL, &e), STORE_CONFLICT);

	/* status update touches only status */
	cJSON *s = cJSON_Duplicate(v2, 1);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(s, "status"), "phase", "Ready");
	cJSON_ReplaceItemInObject(s, "spec", cJSON_Parse("{\"agentRef\":\"evil\"}"));
	ck_assert_int_eq(store_update_status(st, s, &v3, &e), 0);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(v3, "status"), "phase"), "Ready");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(v3, "spec"), "agentRef"), "a");
	cJSON_Delete(s);

	/* a spec change bumps generation; status cannot be changed through update */
	cJSON *u = cJSON_Duplicate(v3, 1), *v4;
	cJSON_ReplaceItemInObject(u, "spec", cJSON_Parse("{\"agentRef\":\"b\"}"));
	cJSON_ReplaceItemInObject(u, "status", cJSON_Parse("{\"phase\":\"Gone\"}"));
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(u, "metadata"), "uid",
	                          cJSON_CreateString(store_meta_str(v3, "uid")));
	ck_assert_int_eq(store_update(st, u, &v4, &e), 0);
	json_get_int64(cJSON_GetObjectItem(v4, "metadata"), "generation", &gen);
	ck_assert_int_eq(gen, 2);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(v4, "status"), "phase"), "Ready");
	ck_assert_str_eq(store_meta_str(v4, "uid"), store_meta_str(v1, "uid"));
	ck_assert_str_eq(store_meta_str(v4, "creationTimestamp"),
	                 store_meta_str(v1, "creationTimestamp"));

	/* update of a missing object */
	cJSON *m = obj("PillarVolumeState", "pvc-missing", "{}");
	ck_assert_int_eq(store_update(st, m, NULL, &e), STORE_NOT_FOUND);
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
	cJSON *o = obj("PillarStore", "tank", "{}"), *v1, *v2, *got;
	struct err e = {0};
	cJSON *fin = cJSON_AddArrayToObject(cJSON_GetObjectItem(o, "metadata"), "finalizers");
	cJSON_AddItemToArray(fin, cJSON_CreateString("pillar-csi.bhyoo.com/store-protection"));
	ck_assert_int_eq(store_create(st, o, &v1, &e), 0);
	cJSON_Delete(o);

	ck_assert_int_eq(store_delete(st, K("pst"), NULL, "tank", "wrong-uid", NULL, &e),
	                 STORE_CONFLICT);
	ck_assert_ptr_nonnull(strstr(e.msg, "Precondition failed: UID in precondition: wrong-uid"));
	ck_assert_int_eq(store_delete(st, K("pst"), NULL, "tank", NULL, "999", &e), STORE_CONFLICT);
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
	ck_assert_int_eq(store_update(st, u, &v3, &e), 0);
	ck_assert_ptr_nonnull(store_meta_str(v3, "deletionTimestamp"));
	cJSON_Delete(u);
	/* removing the last finalizer removes the object */
	u = cJSON_Duplicate(v3, 1);
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(u, "metadata"), "finalizers");
	ck_assert_int_eq(store_update(st, u, NULL, &e), 0);
	ck_assert_int_eq(store_get(st, K("pst"), NULL, "tank", &got, &e), STORE_NOT_FOUND);
	ck_assert_int_eq(store_delete(st, K("pst"), NULL, "tank", NULL, NULL, &e), STORE_NOT_FOUND);
	cJSON_Delete(u);
	cJSON_Delete(v1);
	cJSON_Delete(v2);
	cJSON_Delete(v3);

	/* without finalizers delete removes at once */
	o = obj("PillarProtocol", "tcp", "{}");
	ck_assert_int_eq(store_create(st, o, NULL, &e), 0);
	ck_assert_int_eq(store_delete(st, K("pstr"), NULL, "tcp", NULL, NULL, &e), 0);
	ck_assert_int_eq(store_get(st, K("pstr"), NULL, "tcp", &got, &e), STORE_NOT_FOUND);
	cJSON_Delete(o);
}
END_TEST

static void add_labeled(const char *name, const char *agent)
{
	cJSON *o = obj("PillarVolumeState", name, "{}");
	if (agent)
		cJSON_AddStringToObject(
		    cJSON_AddObjectToObject(cJSON_GetObjectItem(o, "metadata"), "labels"),
		    "pillar-csi.bhyoo.com/agent", agent);
	ck_assert_int_eq(store_create(st, o, NULL, NULL), 0);
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
	names[0] = '\0';
	cJSON_ArrayForEach(it, items)
	{
		strncat(names, store_meta_str(it, "name"), cap - strlen(names) - 2);
		strcat(names, " ");
	}
	int n = cJSON_GetArraySize(items);
	cJSON_Delete(items);
	return n;
}

START_TEST(test_list_selectors)
{
	char names[256];
	add_labeled("pvc-c", "a");
	add_labeled("pvc-a", "a");
	add_labeled("pvc-b", "b");
	add_labeled("pvc-d", NULL);
	ck_assert_int_eq(list_count(NULL, names, sizeof(names)), 4);
	ck_assert_str_eq(names, "pvc-a pvc-b pvc-c pvc-d ");
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent=a", names, sizeof(names)), 2);
	ck_assert_str_eq(names, "pvc-a pvc-c ");
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent==b", names, sizeof(names)), 1);
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent!=a", names, sizeof(names)), 2);
	ck_assert_str_eq(names, "pvc-b pvc-d ");
	ck_assert_int_eq(list_count("pillar-csi.bhyoo.com/agent", names, sizeof(names)), 3);
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
	    "{\"name\":\"data\",\"namespace\":\"apps\",\"annotations\":{\"x\":\"y\"}}}";
	cJSON *o, *got, *items;
	struct err e = {0};
	json_parse_strict(pvc, strlen(pvc), &o, NULL);
	ck_assert_int_eq(store_create(st, o, NULL, &e), 0);
	ck_assert_int_eq(store_get(st, K("pvc"), "apps", "data", &got, &e), 0);
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "metadata"), "annotations"),
	                 "x"),
	    "y");
	cJSON_Delete(got);
	ck_assert_int_eq(store_get(st, K("pvc"), "other", "data", &got, &e), STORE_NOT_FOUND);
	ck_assert_int_eq(store_get(st, K("pvc"), NULL, "data", &got, &e), STORE_INVALID);
	ck_assert_int_eq(store_list(st, K("pvc"), NULL, NULL, &items, NULL, &e), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 1);
	cJSON_Delete(items);
	cJSON_Delete(o);
}
END_TEST

static void expect_event(store_watch *w, enum store_event_type t, const char *name,
                         const char *field)
{
	enum store_event_type got;
	cJSON *o = NULL;
	struct err e = {0};
	int r = store_watch_next(w, 3000, &got, &o, &e);
	ck_assert_msg(r == 1, "no event (r=%d %s) while waiting for %d %s", r, e.msg, t, name);
	ck_assert_int_eq(got, t);
	ck_assert_str_eq(store_meta_str(o, "name"), name);
	if (field)
		ck_assert_ptr_nonnull(cJSON_GetObjectItem(o, field));
	cJSON_Delete(o);
}

START_TEST(test_watch_in_process)
{
	store_watch *w, *w2;
	cJSON *o = obj("PillarAgent", "a1", "{}"), *v, *items;
	uint64_t rv;
	ck_assert_int_eq(store_create(st, o, &v, NULL), 0);
	cJSON_Delete(o);
	/* from 0: the current objects as ADDED */
	ck_assert_int_eq(store_watch_open(st, K("pa"), 0, &w, NULL), 0);
	expect_event(w, STORE_ADDED, "a1", NULL);
	/* list + watch from the list's version: nothing missed, nothing repeated */
	ck_assert_int_eq(store_list(st, K("pa"), NULL, NULL, &items, &rv, NULL), 0);
	cJSON_Delete(items);
	ck_assert_int_eq(store_watch_open(st, K("pa"), rv, &w2, NULL), 0);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(v, "status"), "agentVersion", "1");
	ck_assert_int_eq(store_update_status(st, v, NULL, NULL), 0);
	o = obj("PillarStore", "other-kind", "{}");
	ck_assert_int_eq(store_create(st, o, NULL, NULL), 0); /* filtered out by kind */
	cJSON_Delete(o);
	ck_assert_int_eq(store_delete(st, K("pa"), NULL, "a1", NULL, NULL, NULL), 0);
	expect_event(w, STORE_MODIFIED, "a1", "status");
	expect_event(w, STORE_DELETED, "a1", "status");
	expect_event(w2, STORE_MODIFIED, "a1", "status");
	expect_event(w2, STORE_DELETED, "a1", NULL);
	enum store_event_type t;
	ck_assert_int_eq(store_watch_next(w, 100, &t, &o, NULL), 0); /* timeout, no event */
	store_watch_close(w);
	store_watch_close(w2);
	store_watch_close(NULL);
	cJSON_Delete(v);
}
END_TEST

START_TEST(test_watch_sees_other_process_and_expires)
{
	store *other;
	store_watch *w;
	struct err e = {0};
	cJSON *o;
	/* a second, non-owner handle stands for another process (the CLI or the node role) */
	ck_assert_int_eq(store_dir_open(dir, false, 50, &other, &e), 0);
	ck_assert_int_eq(store_watch_open(st, K("csinode"), 0, &w, NULL), 0);
	const char *cs = "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":"
	                 "{\"name\":\"worker-1\",\"annotations\":{\"pillar-csi.bhyoo.com/"
	                 "nvmeof-host-nqn\":\"nqn.x\"}}}";
	json_parse_strict(cs, strlen(cs), &o, NULL);
	ck_assert_int_eq(store_create(other, o, NULL, &e), 0);
	expect_event(w, STORE_ADDED, "worker-1", NULL);
	ck_assert_int_eq(store_delete(other, K("csinode"), NULL, "worker-1", NULL, NULL, &e), 0);
	expect_event(w, STORE_DELETED, "worker-1", NULL);
	store_watch_close(w);
	cJSON_Delete(o);

	/* a second owner is refused with the spec's message */
	store *second;
	ck_assert_int_eq(store_dir_open(dir, true, 50, &second, &e), -EBUSY);
	char want[600];
	snprintf(want, sizeof(want), "store %s is in use by another controller (pid %d)", dir,
	         (int)getpid());
	ck_assert_str_eq(e.msg, want);
	store_close(other);

	/* a new owner that starts after changes cannot resume from an older version: Expired */
	store_close(st);
	ck_assert_int_eq(store_dir_open(dir, true, 50, &st, &e), 0);
	ck_assert_int_eq(store_watch_open(st, K("csinode"), 1, &w, &e), STORE_EXPIRED);
	ck_assert_str_eq(store_reason(STORE_EXPIRED), "Expired");
}
END_TEST

START_TEST(test_corrupt_files_are_errors)
{
	cJSON *o = obj("PillarAgent", "a1", "{}"), *got, *items;
	struct err e = {0};
	ck_assert_int_eq(store_create(st, o, NULL, &e), 0);
	cJSON_Delete(o);
	tu_write(dir, "pillaragents/a1.json", "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1al");
	ck_assert_int_eq(store_get(st, K("pa"), NULL, "a1", &got, &e), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(e.msg, "pillaragents/a1.json is corrupt"));
	ck_assert_int_eq(store_list(st, K("pa"), NULL, NULL, &items, NULL, &e), -EBADMSG);
	ck_assert_ptr_null(items);
	/* an update over a corrupt record is refused too: no guessing */
	o = obj("PillarAgent", "a1", "{}");
	ck_assert_int_eq(store_update(st, o, NULL, &e), -EBADMSG);
	cJSON_Delete(o);
	/* a leftover temporary file from a crash is ignored */
	tu_write(dir, "pillaragents/a1.json",
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/"
	         "v1alpha1\",\"kind\":\"PillarAgent\",\"metadata\":{\"name\":\"a1\"}}\n");
	tu_write(dir, "pillaragents/.a1.json.tmp.ab12cd", "{\"trunc");
	ck_assert_int_eq(store_list(st, K("pa"), NULL, NULL, &items, NULL, &e), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 1);
	cJSON_Delete(items);
	/* a corrupt counter stops the store from opening */
	store_close(st);
	tu_write(dir, "resourceversion", "12x\n");
	ck_assert_int_eq(store_dir_open(dir, true, 50, &st, &e), -EBADMSG);
	ck_assert_ptr_null(st);
	ck_assert_ptr_nonnull(strstr(e.msg, "resourceversion is corrupt"));
	tu_write(dir, "resourceversion", "12\n");
	ck_assert_int_eq(store_dir_open(dir, true, 50, &st, &e), 0);
	o = obj("PillarAgent", "a2", "{}");
	cJSON *v;
	ck_assert_int_eq(store_create(st, o, &v, &e), 0);
	ck_assert_uint_eq(store_meta_rv(v), 13); /* monotonic across restarts */
	cJSON_Delete(v);
	cJSON_Delete(o);
}
END_TEST

START_TEST(test_open_url)
{
	store *s2;
	struct err e = {0};
	char url[600];
	snprintf(url, sizeof(url), "dir:%s/sub", dir);
	ck_assert_int_eq(store_open_url(url, false, &s2, &e), 0);
	store_close(s2);
	ck_assert_int_eq(store_open_url("dir:", false, &s2, &e), -EINVAL);
	ck_assert_int_eq(store_open_url("etcd:x", false, &s2, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "unknown --store \"etcd:x\"; accepted: dir:PATH, kube");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store");
	TCase *t = tcase_create("dir");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_kinds);
	tcase_add_test(t, test_create_get_and_errors);
	tcase_add_test(t, test_update_conflict_generation_status);
	tcase_add_test(t, test_delete_finalizers_and_preconditions);
	tcase_add_test(t, test_list_selectors);
	tcase_add_test(t, test_namespaced_kind);
	tcase_add_test(t, test_watch_in_process);
	tcase_add_test(t, test_watch_sees_other_process_and_expires);
	tcase_add_test(t, test_corrupt_files_are_errors);
	tcase_add_test(t, test_open_url);
	suite_add_tcase(s, t);
	return tu_run(s);
}
