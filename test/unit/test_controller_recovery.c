/* controller/recovery: the opt-in deletion of the pods whose volume's NVMe controller a worker's
 * kernel removed, on the embedded store with the real CreateVolume and ControllerPublishVolume:
 * the node's report on its CSINode makes the controller delete the claim's pods on that node that
 * a ReplicaSet or Job owns and that predate the report — never a bare pod, a pod on another node,
 * a pod of a volume without the opt-in, a replacement created after the report, nor anything for
 * a malformed report. */
#include <stdio.h>
#include <string.h>

#include "controller/recovery.h"
#include "ctl_fixture.h"
#include "model/kube.h"
#include "rules/keys.h"

#define OWNER(kind, name)                                                                         \
	"\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"" kind "\",\"name\":\"" name \
	"\",\"uid\":\"owner-" name "\",\"controller\":true}]"

static void pod(const char *name, const char *owner, const char *node, const char *claim)
{
	char spec[512];
	snprintf(
	    spec, sizeof(spec),
	    "{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"c\",\"image\":\"app\"}],"
	    "\"volumes\":[{\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"%s\"}}]}",
	    node, claim);
	fx_put("Pod", "apps", name, owner, spec, NULL);
}

static bool pod_exists(const char *name)
{
	cJSON *o = NULL;
	int r = store_get(fx_st, store_kind_lookup("Pod"), "apps", name, &o, NULL);
	cJSON_Delete(o);
	return r == 0;
}

static void report(const char *node, const char *json)
{
	struct model_csinode cn = {0};
	struct err e = {0};
	ck_assert_int_eq(model_get(fx_st, &model_csinode_kind, NULL, node, &cn, &e), 0);
	ck_assert_int_eq(model_map_set(&cn.meta.annotations, RULES_ANN_LOST_VOLUMES, json), 0);
	ck_assert_msg(model_update(fx_st, &model_csinode_kind, &cn, NULL, &e) == 0, "%s", e.msg);
	model_clear(&model_csinode_kind, &cn);
}

static void volume(const char *name, const char *psc, const char *claim, char *vid, size_t cap)
{
	const char *params[] = {"pillar-csi.bhyoo.com/storage-class",
	                        psc,
	                        "csi.storage.k8s.io/pvc/name",
	                        claim,
	                        "csi.storage.k8s.io/pvc/namespace",
	                        "apps",
	                        NULL};
	struct grpc_status gs = {0};
	fx_put("PersistentVolumeClaim", "apps", claim, NULL, "{}",
	       NULL); /* its uid: the claimRef */
	ck_assert_msg(fx_create(name, params, false, vid, cap, &gs) == 0, "%s", gs.msg);
	ck_assert_msg(fx_publish(vid, "node-a",
	                         CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER,
	                         false, &gs) == 0,
	              "%s", gs.msg);
}

START_TEST(test_owned_pods_deleted_bare_pods_never)
{
	char on[512], off[512], json[2048];
	struct err e = {0};
	fx_setup();
	fx_objects(false);
	fx_put("PillarProtocol", NULL, "recover", NULL,
	       "{\"protocol\":{\"nvmeofTcp\":{\"port\":4420,\"deletePodsAfterCtrlLoss\":true}}}",
	       NULL);
	fx_put("PillarStorageClass", NULL, "recovering", NULL,
	       "{\"storeRef\":\"tank\",\"protocolRef\":\"recover\"}", NULL);
	volume("pvc-1", "recovering", "data", on, sizeof(on));
	volume("pvc-2", "fast", "other", off, sizeof(off));
	cJSON *pv = fx_get("PillarVolumeState", "pvc-1");
	char *spec = cJSON_PrintUnformatted(cJSON_GetObjectItem(pv, "spec"));
	ck_assert_ptr_nonnull(strstr(spec, "\"deletePodsAfterCtrlLoss\":true"));
	free(spec);
	cJSON_Delete(pv);

	pod("web-1", OWNER("ReplicaSet", "web-5d8"), "node-a", "data");
	pod("job-1", OWNER("Job", "backup"), "node-a", "data");
	pod("bare", NULL, "node-a", "data");
	pod("web-2", OWNER("ReplicaSet", "web-5d8"), "node-b", "data");  /* another node */
	pod("web-3", OWNER("ReplicaSet", "web-5d8"), "node-a", "other"); /* no opt-in */
	pod("cron", OWNER("CronJob", "nightly"), "node-a", "data");      /* no such owner kind */

	report("node-a", "{\"pvc-1\":");
	ck_assert_msg(reconcile_lost(&fx_c, "node-a", &e) == 0, "%s", e.msg); /* malformed */
	ck_assert(pod_exists("web-1"));

	snprintf(json, sizeof(json),
	         "{\"%s\":\"2099-01-01T00:00:00Z\",\"%s\":\"2099-01-01T00:00:00Z\"}", on, off);
	report("node-a", json);
	ck_assert_msg(reconcile_lost(&fx_c, "node-a", &e) == 0, "%s", e.msg);
	ck_assert(!pod_exists("web-1"));
	ck_assert(!pod_exists("job-1"));
	ck_assert(pod_exists("bare"));
	ck_assert(pod_exists("web-2"));
	ck_assert(pod_exists("web-3"));
	ck_assert(pod_exists("cron"));
	ck_assert_msg(reconcile_lost(&fx_c, "node-b", &e) == 0, "%s", e.msg); /* no report */
	ck_assert(pod_exists("web-2"));

	/* the replacement, created after the node saw the controller gone, stays */
	pod("web-4", OWNER("ReplicaSet", "web-5d8"), "node-a", "data");
	snprintf(json, sizeof(json), "{\"%s\":\"2000-01-01T00:00:00Z\"}", on);
	report("node-a", json);
	ck_assert_msg(reconcile_lost(&fx_c, "node-a", &e) == 0, "%s", e.msg);
	ck_assert(pod_exists("web-4"));
	ck_assert(pod_exists("bare"));
	fx_teardown();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("controller_recovery");
	TCase *t = tcase_create("recovery");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_owned_pods_deleted_bare_pods_never);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
