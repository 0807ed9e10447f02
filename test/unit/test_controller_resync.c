/* The file backend through the controller (agent-api.md §14: BACKEND_TYPE_FILE with
 * FileVolumeParams{pool, preallocate}, preallocate from the store, overridden by the
 * PillarStorageClass and by the PVC backend document) and the per-volume export resync
 * (agent-api.md §12.3, §12.4): which volumes are sent, one-item and per-agent requests with
 * complete=false, and every row of the ExportReconciled mapping. */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "controller/reconcile.h"
#include "ctl_fixture.h"

static const PillarCsi__Agent__V1__CreateVolumeRequest *last_create(void)
{
	const struct fake_call *c = NULL;
	for (size_t i = 0; i < fake_agent_ncalls(fx_fa); i++)
		if (!strcmp(fake_agent_call(fx_fa, i)->method, "CreateVolume"))
			c = fake_agent_call(fx_fa, i);
	ck_assert_ptr_nonnull(c);
	return (const void *)c->req;
}

START_TEST(test_file_backend_params)
{
	struct grpc_status gs = {0};
	char vid[300];
	fx_objects(false);
	fx_put("PillarStore", NULL, "files", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"file\":{\"pool\":\"scratch\"}}}", NULL);
	fx_put("PillarStorageClass", NULL, "plain", NULL,
	       "{\"storeRef\":\"files\",\"protocolRef\":\"tcp\"}", NULL);
	fx_put("PillarStorageClass", NULL, "thick", NULL,
	       "{\"storeRef\":\"files\",\"protocolRef\":\"tcp\",\"overrides\":{\"backend\":{"
	       "\"file\":{\"preallocate\":true}}}}",
	       NULL);
	static const char *const plain[] = {"pillar-csi.bhyoo.com/storage-class", "plain", NULL};
	ck_assert_msg(fx_create("f1", plain, false, vid, sizeof(vid), &gs) == 0, "%s", gs.msg);
	ck_assert_str_eq(vid, "storage-1/nvmeof-tcp/file/scratch/f1");
	const PillarCsi__Agent__V1__CreateVolumeRequest *q = last_create();
	ck_assert_int_eq(q->backend_type, PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE);
	ck_assert_ptr_nonnull(q->backend_params);
	ck_assert_int_eq(q->backend_params->params_case,
	                 PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE);
	ck_assert_str_eq(q->backend_params->file->pool, "scratch");
	ck_assert(!q->backend_params->file->preallocate);
	static const char *const thick[] = {"pillar-csi.bhyoo.com/storage-class", "thick", NULL};
	ck_assert_msg(fx_create("f2", thick, false, vid, sizeof(vid), &gs) == 0, "%s", gs.msg);
	ck_assert(last_create()->backend_params->file->preallocate);
	/* the PVC document wins over the class */
	fx_put("PersistentVolumeClaim", "default", "claim-3",
	       "\"annotations\":{\"pillar-csi.bhyoo.com/backend\":\"file: {preallocate: false}\"}",
	       "{}", NULL);
	static const char *const pvc[] = {"pillar-csi.bhyoo.com/storage-class",
	                                  "thick",
	                                  "csi.storage.k8s.io/pvc/name",
	                                  "claim-3",
	                                  "csi.storage.k8s.io/pvc/namespace",
	                                  "default",
	                                  NULL};
	ck_assert_msg(fx_create("f3", pvc, false, vid, sizeof(vid), &gs) == 0, "%s", gs.msg);
	ck_assert(!last_create()->backend_params->file->preallocate);
	cJSON *o = fx_get("PillarVolumeState", "f3");
	const cJSON *fb = cJSON_GetObjectItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "resolved"),
	                        "backend"),
	    "file");
	ck_assert_str_eq(json_get_str(fb, "pool"), "scratch");
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(fb, "preallocate")));
	cJSON_Delete(o);
	/* the store sets preallocate: without overrides it travels as true */
	fx_put("PillarStore", NULL, "files2", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"file\":{\"pool\":\"scratch\","
	       "\"preallocate\":true}}}",
	       NULL);
	static const char *const refs[] = {"pillar-csi.bhyoo.com/store-ref", "files2",
	                                   "pillar-csi.bhyoo.com/protocol-ref", "tcp", NULL};
	ck_assert_msg(fx_create("f4", refs, true, vid, sizeof(vid), &gs) == 0, "%s", gs.msg);
	ck_assert(last_create()->backend_params->file->preallocate);
}
END_TEST

static void vol(const char *name, const char *agent, const char *status)
{
	char meta[200], spec[700];
	snprintf(meta, sizeof(meta), "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"%s\"}", agent);
	snprintf(spec, sizeof(spec),
	         "{\"volumeID\":\"%s/nvmeof-tcp/zfs-zvol/tank/%s\",\"agentVolumeID\":\"tank/%s\","
	         "\"agentRef\":\"%s\",\"backendType\":\"zfs-zvol\",\"resolved\":{\"backend\":{"
	         "\"zfs\":{\"pool\":\"tank\"}}}}",
	         agent, name, name, agent);
	fx_put("PillarVolumeState", NULL, name, meta, spec, status);
}

#define ES "\"exportSpec\":{\"bindAddress\":\"10.0.0.5\",\"port\":4420,\"aclEnabled\":true}"

static void expect_export(const char *name, const char *status, const char *reason,
                          const char *message)
{
	cJSON *o = fx_get("PillarVolumeState", name);
	ck_assert_msg(!strcmp(cond_status(o, "ExportReconciled"), status) &&
	                  !strcmp(cond_reason(o, "ExportReconciled"), reason),
	              "%s: %s/%s, want %s/%s", name, cond_status(o, "ExportReconciled"),
	              cond_reason(o, "ExportReconciled"), status, reason);
	if (message)
		ck_assert_str_eq(
		    json_get_str(cond_get(cJSON_GetObjectItem(o, "status"), "ExportReconciled"),
		                 "message"),
		    message);
	cJSON_Delete(o);
}

static char kicked[64];
static void on_kick(void *arg, const char *agent)
{
	(void)arg;
	snprintf(kicked, sizeof(kicked), "%s", agent);
}

START_TEST(test_volume_resync_and_mapping)
{
	struct err e = {0};
	fx_put("PillarAgent", NULL, "storage-1", NULL, "{}",
	       "{\"resolvedAddress\":\"10.0.0.5:9500\"}");
	fx_put("PillarAgent", NULL, "storage-2", NULL, "{}", "{}");
	vol("v-ok", "storage-1",
	    "{\"phase\":\"Ready\",\"publicationGeneration\":3," ES ",\"publishedNodes\":[{"
	    "\"nodeID\":\"a\",\"initiatorID\":\"nqn.a\",\"revoking\":false},{\"nodeID\":\"b\","
	    "\"initiatorID\":\"nqn.b\",\"revoking\":true}]}");
	vol("v-prov", "storage-1", "{\"phase\":\"Provisioning\"," ES "}");
	vol("v-del", "storage-1", "{\"phase\":\"Ready\",\"deleting\":true," ES "}");
	vol("v-nospec", "storage-1", "{\"phase\":\"Ready\"}");
	vol("v-partial", "storage-1",
	    "{\"phase\":\"CreatePartial\",\"backendDevicePath\":\"/dev/zvol/tank/v-partial\"," ES
	    "}");
	vol("v-noaddr", "storage-2", "{\"phase\":\"Ready\"," ES "}");
	vol("v-noagent", "storage-9", "{\"phase\":\"Ready\"," ES "}");

	/* skipped volumes: no RPC, no condition */
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-prov", &e), 0);
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-del", &e), 0);
	ck_assert_int_eq(reconcile_volume(&fx_c, "missing", &e), 0);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	expect_export("v-prov", "", "", NULL);
	expect_export("v-del", "", "", NULL);
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-nospec", &e), 0);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	expect_export("v-nospec", "False", "ExportSpecMissing", NULL);
	/* an agent without an address, or none: AgentUnavailable is the PillarAgent's to say
	 * (readers derive it, model/outage.h); nothing is written on the volume */
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-noaddr", &e), 0);
	expect_export("v-noaddr", "", "", NULL);
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-noagent", &e), 0);
	expect_export("v-noagent", "", "", NULL);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);

	/* one-item request */
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-ok", &e), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "ReconcileState");
	const struct fake_call *c = fake_agent_call(fx_fa, 0);
	const PillarCsi__Agent__V1__ReconcileStateRequest *q = (const void *)c->req;
	ck_assert(!q->complete);
	ck_assert_int_eq(c->deadline_ms, 30000);
	ck_assert_uint_eq(q->n_volumes, 1);
	ck_assert_str_eq(q->volumes[0]->volume_id, "tank/v-ok");
	ck_assert_int_eq(q->volumes[0]->fence->generation, 3);
	ck_assert_uint_eq(q->volumes[0]->exports[0]->n_allowed_initiators, 1);
	expect_export("v-ok", "True", "Reconciled", "");

	/* the periodic pass: one request with the eligible volumes of the agent */
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "ReconcileState");
	q = (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert(!q->complete);
	ck_assert_uint_eq(q->n_volumes, 2);
	ck_assert_str_eq(q->volumes[0]->volume_id, "tank/v-ok");
	ck_assert_str_eq(q->volumes[1]->volume_id, "tank/v-partial");
	ck_assert_str_eq(q->volumes[1]->device_path, "/dev/zvol/tank/v-partial");
	expect_export("v-partial", "True", "Reconciled", NULL);

	/* §12.4 rows */
	fake_agent_item_error(fx_fa, "tank/v-ok",
	                      "FAILED_PRECONDITION: stale fencing token (uid \"u\", generation 3)");
	fake_agent_item_error(fx_fa, "tank/v-partial",
	                      "FAILED_PRECONDITION: backing device /dev/zvol/tank/v-partial is not "
	                      "available");
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	expect_export("v-ok", "False", "StaleGeneration", NULL);
	expect_export("v-partial", "False", "ReconcileFailed",
	              "FAILED_PRECONDITION: backing device /dev/zvol/tank/v-partial is not "
	              "available");
	fake_agent_fail(fx_fa, "ReconcileState", GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-partial", &e), 0);
	expect_export("v-partial", "False", "ReconcileFailed",
	              "FAILED_PRECONDITION: backing device /dev/zvol/tank/v-partial is not "
	              "available"); /* a deadline is AgentUnavailable: not written */
	fake_agent_fail(fx_fa, "ReconcileState", GRPC_INVALID_ARGUMENT, "bad request");
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-partial", &e), 0);
	expect_export("v-partial", "False", "ReconcileFailed", "bad request");
	/* the gate is closed: AgentUnavailable (not written), and the restore is kicked */
	fx_c.restore_kick = on_kick;
	fake_agent_fail(fx_fa, "ReconcileState", GRPC_UNAVAILABLE,
	                "export restore pending: ReconcileState: awaiting a complete "
	                "ReconcileState from the controller before exporting");
	ck_assert_int_eq(reconcile_volume(&fx_c, "v-ok", &e), 0);
	expect_export("v-ok", "False", "StaleGeneration", NULL);
	ck_assert_str_eq(kicked, "storage-1");
	fx_c.restore_kick = NULL;
}
END_TEST

/* CreateVolume records ExportReconciled=True/Reconciled with Ready, and the change-triggered
 * resync that its exportSpec record queues sends nothing while the volume is as CreateVolume
 * left it (ctl.h ctl_export_take): the agent's ExportVolume had just built that export.  The
 * record is used once; a later change resyncs as before. */
START_TEST(test_created_export_not_resynced)
{
	struct grpc_status gs = {0};
	struct err e = {0};
	char vid[300];
	static const char *const fast[] = {"pillar-csi.bhyoo.com/storage-class", "fast", NULL};
	fx_objects(false);
	ck_assert_msg(fx_create("c1", fast, false, vid, sizeof(vid), &gs) == 0, "%s", gs.msg);
	ck_assert_str_eq(fake_agent_log(fx_fa), "CreateVolume,ExportVolume");
	expect_export("c1", "True", "Reconciled", "");
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_volume(&fx_c, "c1", &e), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "");
	/* once: the next change-triggered resync is sent */
	ck_assert_int_eq(reconcile_volume(&fx_c, "c1", &e), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "ReconcileState");
	expect_export("c1", "True", "Reconciled", "");
	/* a change after the create (here a publish) is resynced */
	ck_assert_msg(fx_create("c2", fast, false, vid, sizeof(vid), &gs) == 0, "%s", gs.msg);
	ck_assert_msg(fx_attach(vid, "node-a", &gs) == 0, "%s", gs.msg);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_volume(&fx_c, "c2", &e), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "ReconcileState");
	/* gone: its record goes with it */
	ck_assert_msg(fx_create("c3", fast, false, vid, sizeof(vid), &gs) == 0, "%s", gs.msg);
	ck_assert_uint_eq(fx_c.n_est, 1);
	ctl_export_forget(&fx_c, "c3");
	ck_assert_uint_eq(fx_c.n_est, 0);
}
END_TEST

/* A pass lists the agent's volumes, then waits for their locks.  When an operation that held
 * one ends meanwhile, the pass sends the volume as that operation left it (read again after the
 * locks), not as it was listed; when none ended, it sends what it listed. */
static void *resync_main(void *arg)
{
	struct err e = {0};
	*(int *)arg = reconcile_agent_resync(&fx_c, "storage-1", &e);
	return NULL;
}

static void *volume_main(void *arg)
{
	struct err e = {0};
	*(int *)arg = reconcile_volume(&fx_c, "v-a", &e);
	return NULL;
}

static uint64_t sent_generation(void)
{
	ck_assert_str_eq(fake_agent_log(fx_fa), "ReconcileState");
	const PillarCsi__Agent__V1__ReconcileStateRequest *q =
	    (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_uint_eq(q->n_volumes, 1);
	return q->volumes[0]->fence->generation;
}

/* The operation holding v-a's lock records generation gen and ends; the pass (thread th, result
 * *r) then sends gen. */
static void op_ends(struct keylock_hold *op, pthread_t th, int *r, int gen)
{
	cJSON *o = fx_get("PillarVolumeState", "v-a");
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(o, "status"), "publicationGeneration",
	                          cJSON_CreateNumber(gen));
	ck_assert_int_eq(store_update_status(fx_st, o, NULL, NULL), 0);
	cJSON_Delete(o);
	keylock_release(&fx_c.locks, op);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(*r, 0);
	ck_assert_uint_eq(sent_generation(), (uint64_t)gen);
}

START_TEST(test_resync_reads_after_waiting)
{
	struct keylock_hold op, probe;
	pthread_t th;
	int r = -1;
	fx_put("PillarAgent", NULL, "storage-1", NULL, "{}",
	       "{\"resolvedAddress\":\"10.0.0.5:9500\"}");
	vol("v-a", "storage-1", "{\"phase\":\"Ready\",\"publicationGeneration\":3," ES "}");
	keylock_wait(&fx_c.locks, &op, "v-a"); /* an operation on v-a is running */
	ck_assert_int_eq(pthread_create(&th, NULL, resync_main, &r), 0);
	/* the pass holds its agent's lock (and lists right after taking it) */
	for (int i = 0; i < 1000 && keylock_try(&fx_c.locks, &probe, "PillarAgent/storage-1") == 0;
	     i++) {
		keylock_release(&fx_c.locks, &probe);
		usleep(2000);
	}
	usleep(100000);
	/* the operation records generation 4, then ends */
	op_ends(&op, th, &r, 4);
	/* nothing ended meanwhile: the listed state, the same */
	fake_agent_reset_log(fx_fa);
	resync_main(&r);
	ck_assert_uint_eq(sent_generation(), 4);
	/* the one-volume pass too (what it read first is dropped, not kept: no leak) */
	fake_agent_reset_log(fx_fa);
	keylock_wait(&fx_c.locks, &op, "v-a");
	ck_assert_int_eq(pthread_create(&th, NULL, volume_main, &r), 0);
	usleep(200000); /* it has read v-a and waits for its lock */
	op_ends(&op, th, &r, 5);
}
END_TEST

/* A pass reuses the items of the agent's last pass only for volumes whose version did not move:
 * a volume changed in between (new generation, initiator, no exportSpec, deleted, relabelled)
 * is sent as it is now. */
START_TEST(test_resync_reuses_only_unchanged)
{
	struct err e = {0};
	fx_put("PillarAgent", NULL, "storage-1", NULL, "{}",
	       "{\"resolvedAddress\":\"10.0.0.5:9500\"}");
	vol("v-a", "storage-1", "{\"phase\":\"Ready\",\"publicationGeneration\":3," ES "}");
	vol("v-b", "storage-1", "{\"phase\":\"Ready\",\"publicationGeneration\":1," ES "}");
	vol("v-c", "storage-1", "{\"phase\":\"Ready\",\"publicationGeneration\":1," ES "}");
	vol("v-x", "storage-2", "{\"phase\":\"Ready\"," ES "}");
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	const PillarCsi__Agent__V1__ReconcileStateRequest *q =
	    (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_uint_eq(q->n_volumes, 3);
	/* v-a: generation 4 and an initiator; v-b: exportSpec gone; v-c deleted */
	cJSON *o = fx_get("PillarVolumeState", "v-a");
	cJSON *st = cJSON_GetObjectItem(o, "status");
	cJSON_ReplaceItemInObject(st, "publicationGeneration", cJSON_CreateNumber(4));
	static const char pub[] = "[{\"nodeID\":\"a\",\"initiatorID\":\"nqn.a\"}]";
	cJSON *pn = NULL;
	ck_assert_int_eq(json_parse_strict(pub, strlen(pub), &pn, NULL), 0);
	cJSON_AddItemToObject(st, "publishedNodes", pn);
	ck_assert_int_eq(store_update_status(fx_st, o, NULL, &e), 0);
	cJSON_Delete(o);
	o = fx_get("PillarVolumeState", "v-b");
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(o, "status"), "exportSpec");
	ck_assert_int_eq(store_update_status(fx_st, o, NULL, &e), 0);
	cJSON_Delete(o);
	ck_assert_int_eq(
	    store_delete(fx_st, store_kind_lookup("pvst"), NULL, "v-c", NULL, NULL, &e), 0);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	q = (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_uint_eq(q->n_volumes, 1);
	ck_assert_str_eq(q->volumes[0]->volume_id, "tank/v-a");
	ck_assert_int_eq(q->volumes[0]->fence->generation, 4);
	ck_assert_uint_eq(q->volumes[0]->exports[0]->n_allowed_initiators, 1);
	expect_export("v-b", "False", "ExportSpecMissing", NULL);
	/* nothing changed: the same request again, v-b's condition not written again */
	o = fx_get("PillarVolumeState", "v-b");
	const char *rv = json_get_str(cJSON_GetObjectItem(o, "metadata"), "resourceVersion");
	char before[32];
	snprintf(before, sizeof(before), "%s", rv);
	cJSON_Delete(o);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	q = (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_uint_eq(q->n_volumes, 1);
	ck_assert_int_eq(q->volumes[0]->fence->generation, 4);
	o = fx_get("PillarVolumeState", "v-b");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(o, "metadata"), "resourceVersion"),
	                 before);
	cJSON_Delete(o);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_resync");
	TCase *t = tcase_create("resync");
	tcase_add_checked_fixture(t, fx_setup, fx_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_file_backend_params);
	tcase_add_test(t, test_volume_resync_and_mapping);
	tcase_add_test(t, test_created_export_not_resynced);
	tcase_add_test(t, test_resync_reads_after_waiting);
	tcase_add_test(t, test_resync_reuses_only_unchanged);
	suite_add_tcase(s, t);
	return tu_run(s);
}
