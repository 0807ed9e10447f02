/* What only the embedded directory store has (spec/standalone.md): watches that see other
 * processes' writes, the owner lock, refusal of corrupt files, a resourceVersion counter that
 * survives restarts; and the kinds table and --store parsing.  The store contract both stores
 * share is test_store_contract.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "store/blob.h"
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
	return tu_store_obj(kind, name, spec_json);
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
	tu_expect_event(w, STORE_ADDED, "worker-1", NULL);
	ck_assert_int_eq(store_delete(other, K("csinode"), NULL, "worker-1", NULL, NULL, &e), 0);
	tu_expect_event(w, STORE_DELETED, "worker-1", NULL);
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
	/* a list leaves it out (reported: store.h), as it is that object's own error */
	ck_assert_int_eq(store_list(st, K("pa"), NULL, NULL, &items, NULL, &e), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 0);
	cJSON_Delete(items);
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
	/* no --store: kube in a cluster (here without a service account: its error), else none */
	unsetenv("KUBERNETES_SERVICE_HOST");
	ck_assert_int_eq(store_open(NULL, false, NULL, &s2, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "--store is required outside a cluster"));
	setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "1", 1);
	ck_assert_int_lt(store_open("", false, NULL, &s2, &e), 0);
	ck_assert_ptr_null(s2);
	ck_assert_msg(!strncmp(e.msg, "--store=kube: ", 14), "%s", e.msg);
	unsetenv("KUBERNETES_SERVICE_HOST");
}
END_TEST

/* A list passes over objects on the text of their labels (blob.h): the answer on cJSON's compact
 * text of a labels value is the answer on its tree, whatever the value holds. */
START_TEST(test_selector_on_label_text)
{
	static const char *const labels[] = {"{}",
	                                     "{\"a\":\"1\"}",
	                                     "{\"a\":1}",
	                                     "{\"a\":{\"b\":\"1\"}}",
	                                     "{\"x\":{\"a\":\"2\"},\"a\":\"1\"}",
	                                     "{\"a\\\"b\":\"1\",\"b\":\"2\"}",
	                                     "{\"a\":\"1\\n\"}",
	                                     "{\"b\":\",\\\"a\\\":\\\"1\"}",
	                                     "{\"a\":null,\"b\":\"2\"}",
	                                     "{\"a\":[1,\"a\",{\"a\":\"1\"}],\"b\":\"2\"}",
	                                     "{\"a\":\"1\",\"a\":\"2\"}",
	                                     "{\"a\":\"\",\"b.c/d\":\"e_f-g\"}",
	                                     "\"a\"",
	                                     "[\"a\",{\"a\":\"1\"}]",
	                                     "7",
	                                     NULL};
	static const char *const selectors[] = {
	    "a",  "!a",     "a=1",  "a==1",        "a!=1",    "a=",  "b=2",  "a=1,b=2", "a=2",
	    "!b", "a=1,!b", "b!=2", "b.c/d=e_f-g", " a = 1 ", "a b", "a=1,", ",",       NULL};
	for (const char *const *l = labels; *l; l++) {
		char text[512];
		cJSON *o = NULL, *meta;
		snprintf(text, sizeof(text), "{\"metadata\":{\"labels\":%s}}", *l);
		ck_assert_int_eq(json_parse_strict(text, strlen(text), &o, NULL), 0);
		meta = cJSON_GetObjectItem(o, "metadata");
		char *printed = json_dump(cJSON_GetObjectItem(meta, "labels"));
		for (const char *const *sel = selectors; *sel; sel++) {
			int tree = store_selector_match(*sel, o, NULL);
			int got = store_selector_match_text(*sel, printed, strlen(printed), NULL);
			ck_assert_msg(got == tree,
			              "labels %s, selector \"%s\": %d on the text, %d on the tree",
			              printed, *sel, got, tree);
		}
		cJSON_Delete(o);
		free(printed);
	}
	/* no labels at all */
	ck_assert_int_eq(store_selector_match_text("!a", NULL, 0, NULL), 1);
	ck_assert_int_eq(store_selector_match_text("a", NULL, 0, NULL), 0);
	ck_assert_int_eq(store_selector_match_text("a!=1", NULL, 0, NULL), 1);
}
END_TEST

/* A blob parses back to its tree: long integers digit for digit, a text that would fail
 * json_parse_strict's checks (a string that is not UTF-8) still fails them. */
START_TEST(test_blob_parses_back)
{
	struct err e = {0};
	cJSON *o = cJSON_CreateObject(), *back = NULL;
	int64_t big = 0;
	cJSON_AddItemToObject(o, "capacityBytes", json_int64(1234567890123456789LL));
	cJSON_AddStringToObject(o, "note", "tab\there");
	struct store_blob *b = store_blob_of(o);
	ck_assert(b->checked && b->long_integers);
	ck_assert_int_eq(store_blob_parse(b, &back, &e), 0);
	ck_assert_int_eq(json_int64_of(cJSON_GetObjectItem(back, "capacityBytes"), &big), 0);
	ck_assert(big == 1234567890123456789LL);
	ck_assert_str_eq(cJSON_GetObjectItem(back, "note")->valuestring, "tab\there");
	cJSON_Delete(back);
	store_blob_put(b);
	cJSON_AddStringToObject(o, "bad", "\xff");
	b = store_blob_of(o);
	ck_assert(!b->checked);
	ck_assert_int_eq(store_blob_parse(b, &back, &e), -EBADMSG);
	ck_assert_ptr_null(back);
	store_blob_put(b);
	cJSON_Delete(o);
}
END_TEST

/* The index keeps a file's text made compact, not printed again: the pretty text cJSON prints
 * becomes exactly the compact text it prints (labels found in it, long integers kept), strings
 * untouched; other valid layouts become compact text of the same value. */
START_TEST(test_blob_of_text_is_the_compact_print)
{
	static const char *src =
	    "{\"metadata\":{\"name\":\"a b\",\"labels\":{\"k\":\"v\"}},\"n\":1234567890123456789,"
	    "\"s\":\" q\\\" \\\\ \\t\\n x\\u00e9 "
	    "\\u0001\",\"e\":{},\"l\":[],\"a\":[1,2.5,true,null,"
	    "{\"x\":[\"\\\"\"]}]}";
	cJSON *o = NULL, *parsed = NULL;
	ck_assert_int_eq(json_parse_strict(src, strlen(src), &o, NULL), 0);
	char *pretty = json_print(o, true);
	struct store_blob *want = store_blob_of(o);
	ck_assert_int_eq(json_parse_strict(pretty, strlen(pretty), &parsed, NULL), 0);
	struct store_blob *b = store_blob_of_text(pretty, strlen(pretty), parsed);
	ck_assert_str_eq(b->text, want->text);
	ck_assert_uint_eq(b->len, want->len);
	ck_assert(b->checked && b->long_integers);
	ck_assert_int_eq(b->labels, BLOB_LABELS_AT);
	ck_assert_int_eq(store_blob_selects(b, "k=v"), 1);
	store_blob_put(b);
	store_blob_put(want);
	cJSON_Delete(parsed);
	free(pretty);
	cJSON_Delete(o);
	char spaced[] = " {\n \"a\" :\t[ 1 , 2 ] ,\r\n \"s\" : \" x  y \" } \n";
	ck_assert_int_eq(json_parse_strict(spaced, strlen(spaced), &parsed, NULL), 0);
	b = store_blob_of_text(spaced, strlen(spaced), parsed);
	ck_assert_str_eq(b->text, "{\"a\":[1,2],\"s\":\" x  y \"}");
	ck_assert_int_eq(b->labels, BLOB_LABELS_NONE);
	store_blob_put(b);
	cJSON_Delete(parsed);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store");
	TCase *t = tcase_create("dir");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_kinds);
	tcase_add_test(t, test_watch_sees_other_process_and_expires);
	tcase_add_test(t, test_corrupt_files_are_errors);
	tcase_add_test(t, test_open_url);
	tcase_add_test(t, test_selector_on_label_text);
	tcase_add_test(t, test_blob_parses_back);
	tcase_add_test(t, test_blob_of_text_is_the_compact_print);
	suite_add_tcase(s, t);
	return tu_run(s);
}
