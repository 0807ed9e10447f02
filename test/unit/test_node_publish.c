/* The node's host identity on its CSINode in the embedded store, and the duplicate check
 * (csi.md §10.3, standalone.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "node/publish.h"
#include "testutil.h"

static const struct nvme_host_identity id1 = {
    "nqn.2014-08.org.nvmexpress:uuid:6f1c1d2e-0b7a-4c43-9d4e-2b6a1f0c3a11",
    "6f1c1d2e-0b7a-4c43-9d4e-2b6a1f0c3a11"};
static const struct nvme_host_identity id2 = {
    "nqn.2014-08.org.nvmexpress:uuid:0d3b7e5a-9a43-4f0e-8f3b-5b1e2c7d9e22",
    "0d3b7e5a-9a43-4f0e-8f3b-5b1e2c7d9e22"};

static const char *ann(store *s, const char *node, const char *key)
{
	static char buf[256];
	cJSON *o;
	buf[0] = '\0';
	if (store_get(s, store_kind_lookup("csinode"), NULL, node, &o, NULL) < 0)
		return buf;
	const char *v = json_get_str(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations"), key);
	snprintf(buf, sizeof(buf), "%s", v ? v : "");
	cJSON_Delete(o);
	return buf;
}

START_TEST(test_publish_and_duplicates)
{
	char d[256];
	store *s;
	struct err e = {0};
	snprintf(d, sizeof(d), "%s", tu_mkdtemp());
	ck_assert_int_eq(store_dir_open(d, false, 50, &s, NULL), 0);

	ck_assert_int_eq(node_publish_identity_store(s, "worker-1", &id1, &e), 0);
	ck_assert_str_eq(ann(s, "worker-1", RULES_ANN_HOST_NQN), id1.hostnqn);
	ck_assert_str_eq(ann(s, "worker-1", RULES_ANN_HOST_ID), id1.hostid);
	{ /* created with an (empty) spec, as the kubelet's CSINode has one */
		cJSON *o = NULL;
		ck_assert_int_eq(
		    store_get(s, store_kind_lookup("csinode"), NULL, "worker-1", &o, NULL), 0);
		ck_assert(cJSON_IsObject(cJSON_GetObjectItem(o, "spec")));
		cJSON_Delete(o);
	}
	/* again: idempotent */
	ck_assert_int_eq(node_publish_identity_store(s, "worker-1", &id1, &e), 0);
	/* a changed identity updates the annotations */
	ck_assert_int_eq(node_publish_identity_store(s, "worker-1", &id2, &e), 0);
	ck_assert_str_eq(ann(s, "worker-1", RULES_ANN_HOST_NQN), id2.hostnqn);
	/* a cloned worker with the same identity is reported, with the spec's message */
	ck_assert_int_eq(node_publish_identity_store(s, "worker-2", &id2, &e), -ENOTUNIQ);
	char want[400];
	snprintf(want, sizeof(want),
	         "host NQN \"%s\" is also used by node \"worker-1\"; give every worker a unique "
	         "/etc/nvme/hostnqn and /etc/nvme/hostid",
	         id2.hostnqn);
	ck_assert_str_eq(e.msg, want);
	/* ...but its annotations are still published, so the controller can refuse grants */
	ck_assert_str_eq(ann(s, "worker-2", RULES_ANN_HOST_NQN), id2.hostnqn);
	/* a bad node name never reaches a path */
	ck_assert_int_eq(node_publish_identity_store(s, "../x", &id1, &e), STORE_INVALID);
	store_close(s);
	tu_rmtree(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_publish");
	TCase *t = tcase_create("store");
	tcase_add_test(t, test_publish_and_duplicates);
	suite_add_tcase(s, t);
	return tu_run(s);
}
