/* PillarAgent reconcile and the full export restore (crds.md §3.3/§3.5, agent-api.md §12.2,
 * §12.4): an agent reporting export_restore_pending gets exactly one
 * ReconcileState{complete=true} carrying every export of that agent (in-capsule exports first,
 * revoking initiators left out, deleting volumes skipped), then ExportsReady moves to
 * ExportsServing and a volume without exportSpec ends at ExportSpecMissing; a failed restore
 * gives ExportRestoreFailed with a 5 s retry; status is written only when it changed; the work
 * queue de-duplicates and backs off. */
#include <sys/stat.h>
#include <unistd.h>

#include "controller/metrics.h"
#include "controller/reconcile.h"
#include "ctl_fixture.h"
#include "model/outage.h"

static void setup(void)
{
	fx_setup();
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", NULL);
}

static void vol(const char *name, const char *status)
{
	char meta[300], spec[600];
	snprintf(meta, sizeof(meta), "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"storage-1\"}");
	snprintf(
	    spec, sizeof(spec),
	    "{\"volumeID\":\"storage-1/nvmeof-tcp/zfs-zvol/tank/%s\",\"agentVolumeID\":\"tank/%s\","
	    "\"agentRef\":\"storage-1\",\"backendType\":\"zfs-zvol\",\"protocolType\":\"nvmeof-"
	    "tcp\","
	    "\"capacityBytes\":1048576,\"resolved\":{\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}}",
	    name, name);
	fx_put("PillarVolumeState", NULL, name, meta, spec, status);
}

static void volumes(void)
{
	vol("vol-a",
	    "{\"phase\":\"Ready\",\"publicationGeneration\":4,\"exportSpec\":{\"bindAddress\":"
	    "\"10.0.0.5\",\"port\":4420,\"aclEnabled\":true},\"publishedNodes\":[{\"nodeID\":"
	    "\"node-a\",\"initiatorID\":\"nqn.a\",\"accessMode\":\"MULTI_NODE_READER_ONLY\","
	    "\"readonly\":true,\"revoking\":false},{\"nodeID\":\"node-b\",\"initiatorID\":"
	    "\"nqn.b\",\"accessMode\":\"MULTI_NODE_READER_ONLY\",\"readonly\":true,"
	    "\"revoking\":true}]}");
	vol("vol-b",
	    "{\"phase\":\"Ready\",\"publicationGeneration\":2,\"exportSpec\":{\"bindAddress\":"
	    "\"10.0.0.5\",\"port\":0,\"aclEnabled\":false,\"inCapsuleDataSize\":16384}}");
	vol("vol-c", "{\"phase\":\"Ready\",\"publicationGeneration\":2}");
	vol("vol-d",
	    "{\"phase\":\"Ready\",\"publicationGeneration\":3,\"deleting\":true,"
	    "\"exportSpec\":{\"bindAddress\":\"10.0.0.5\",\"port\":4420,\"aclEnabled\":false}}");
	/* another agent's volume never travels with this restore */
	fx_put("PillarVolumeState", NULL, "vol-x",
	       "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"storage-2\"}",
	       "{\"agentVolumeID\":\"tank/vol-x\"}",
	       "{\"phase\":\"Ready\",\"exportSpec\":{\"bindAddress\":\"10.0.0.6\",\"port\":4420,"
	       "\"aclEnabled\":false}}");
}

/* The PillarAgent's ExportsReady and Ready (status/reason) as stored when the agent is called. */
static char *pa_snap(void *arg, const char *method)
{
	(void)arg;
	if (strcmp(method, "ReconcileState"))
		return NULL;
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	char *out = NULL;
	if (asprintf(&out, "%s/%s %s/%s", cond_status(pa, "ExportsReady"),
	             cond_reason(pa, "ExportsReady"), cond_status(pa, "Ready"),
	             cond_reason(pa, "Ready")) < 0)
		out = NULL;
	cJSON_Delete(pa);
	return out;
}

/* pillar_csi_volumes_export_unreconciled of agent at a scrape now. */
static int unreconciled(const char *agent)
{
	struct metrics_text t = {0};
	char key[160];
	int n = -1;
	ctl_metrics_register();
	ctl_metrics_collect(&fx_c, &t);
	snprintf(key, sizeof(key), "\npillar_csi_volumes_export_unreconciled{agent=\"%s\"} ",
	         agent);
	const char *at = t.buf ? strstr(t.buf, key) : NULL;
	if (at)
		n = atoi(at + strlen(key));
	metrics_text_free(&t);
	return n;
}

START_TEST(test_restore_once_then_serving)
{
	struct err e = {0};
	int requeue;
	volumes();
	fake_agent_set_health(fx_fa, true, true, NULL, NULL);
	fake_agent_set_caps(fx_fa, "0.1.0", true, false, true, "tank",
	                    PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL, "", "",
	                    100LL << 30, 60LL << 30);
	fake_agent_set_hook(fx_fa, pa_snap, NULL);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "HealthCheck,GetCapabilities,ReconcileState");
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ReconcileState"), 1);
	const struct fake_call *rc = fake_agent_call(fx_fa, 2);
	/* crds.md §3.3: while the restore is in flight the stored PillarAgent says so */
	ck_assert_str_eq(rc->snapshot, "False/ExportRestorePending False/ExportRestorePending");
	ck_assert_str_eq(rc->address, "10.0.0.5:9500");
	ck_assert_int_eq(rc->deadline_ms, 30000 + 2 * 10000);
	const PillarCsi__Agent__V1__ReconcileStateRequest *q = (const void *)rc->req;
	ck_assert(q->complete);
	ck_assert_int_eq(q->n_volumes, 2);
	/* in-capsule exports first */
	ck_assert_str_eq(q->volumes[0]->volume_id, "tank/vol-b");
	ck_assert_int_eq(q->volumes[0]->exports[0]->export_params->nvmeof_tcp->in_capsule_data_size,
	                 16384);
	ck_assert_int_eq(q->volumes[0]->fence->generation, 2);
	ck_assert_str_eq(q->volumes[1]->volume_id, "tank/vol-a");
	const PillarCsi__Agent__V1__ExportDesiredState *ea = q->volumes[1]->exports[0];
	ck_assert(ea->acl_enabled);
	ck_assert_int_eq(ea->n_allowed_initiators, 1); /* the revoking entry is left out */
	ck_assert_str_eq(ea->allowed_initiators[0], "nqn.a");
	ck_assert_str_eq(ea->export_params->nvmeof_tcp->bind_address, "10.0.0.5");
	ck_assert_int_eq(q->volumes[1]->fence->generation, 4);
	ck_assert_str_eq(q->volumes[1]->backend_params->zfs->pool, "tank");
	ck_assert_int_eq(requeue, RECONCILE_INTERVAL_MS);
	/* the restore's size and duration, and the scrape-time families of the store */
	struct metrics_text t = {0};
	ctl_metrics_register();
	metrics_write(&t);
	ctl_metrics_collect(&fx_c, &t);
	if (getenv("SHOW_METRICS"))
		fputs(t.buf, stderr);
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\npillar_csi_restore_last_volumes{agent=\"storage-1\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(t.buf, "\npillar_csi_restore_duration_seconds_count 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\npillar_csi_agent_connected{agent=\"storage-1\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(
	    t.buf,
	    "\npillar_csi_agent_exports_ready{agent=\"storage-1\",reason=\"ExportsServing\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t.buf, "\npillar_csi_volumes{phase=\"Ready\"} 5\n"));
	/* vol-a, vol-b, vol-d have an exportSpec and no ExportReconciled True yet */
	ck_assert_msg(
	    strstr(t.buf, "\npillar_csi_volumes_export_unreconciled{agent=\"storage-1\"} "),
	    "no unreconciled gauge");
	metrics_text_free(&t);

	cJSON *pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_status(pa, "ExportsReady"), "True");
	ck_assert_str_eq(cond_reason(pa, "ExportsReady"), "ExportsServing");
	ck_assert_str_eq(cond_reason(pa, "AgentConnected"), "Dialed");
	ck_assert_str_eq(cond_reason(pa, "NodeExists"), "ExternalMode");
	ck_assert_str_eq(cond_reason(pa, "Ready"), "AgentConnected");
	cJSON *st = cJSON_GetObjectItem(pa, "status");
	ck_assert_str_eq(json_get_str(st, "resolvedAddress"), "10.0.0.5:9500");
	ck_assert_str_eq(json_get_str(st, "agentVersion"), "0.1.0");
	/* the counts: vol-a..d are storage-1's, vol-a is published (to node-a and node-b), and
	 * nothing sets its ctrlLossTmo (the kernel's 600 s) */
	int64_t x = -1;
	ck_assert(json_get_int64(st, "volumes", &x) == 0 && x == 4);
	ck_assert(json_get_int64(st, "publishedVolumes", &x) == 0 && x == 1);
	ck_assert(json_get_int64(st, "connectedHosts", &x) == 0 && x == 2);
	ck_assert(json_get_int64(st, "outageBudgetSeconds", &x) == 0 && x == 600);
	ck_assert_str_eq(
	    json_get_str(cJSON_GetArrayItem(cJSON_GetObjectItem(st, "discoveredPools"), 0),
	                 "available"),
	    "60Gi");
	ck_assert_str_eq(
	    cJSON_GetArrayItem(
	        cJSON_GetObjectItem(cJSON_GetObjectItem(st, "capabilities"), "backends"), 0)
	        ->valuestring,
	    "zfs-zvol");
	ck_assert_str_eq(
	    cJSON_GetArrayItem(
	        cJSON_GetObjectItem(cJSON_GetObjectItem(pa, "metadata"), "finalizers"), 0)
	        ->valuestring,
	    RULES_FINALIZER_AGENT);
	uint64_t rv = store_meta_rv(pa);
	cJSON_Delete(pa);
	static const char *const want[][2] = {{"vol-a", "Reconciled"},
	                                      {"vol-b", "Reconciled"},
	                                      {"vol-c", "ExportSpecMissing"},
	                                      {"vol-d", ""},
	                                      {"vol-x", ""}};
	for (size_t i = 0; i < 5; i++) {
		cJSON *o = fx_get("PillarVolumeState", want[i][0]);
		ck_assert_msg(!strcmp(cond_reason(o, "ExportReconciled"), want[i][1]), "%s: %s",
		              want[i][0], cond_reason(o, "ExportReconciled"));
		if (!strcmp(want[i][1], "ExportSpecMissing"))
			ck_assert_str_eq(cond_status(o, "ExportReconciled"), "False");
		cJSON_Delete(o);
	}
	/* next pass: the gate is open, nothing is re-sent and nothing is rewritten */
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "HealthCheck,GetCapabilities");
	pa = fx_get("PillarAgent", "storage-1");
	ck_assert_uint_eq(store_meta_rv(pa), rv);
	cJSON_Delete(pa);
	ck_assert_int_eq(unreconciled("storage-1"), 1); /* vol-d: deleting, never reconciled */
	/* the agent stops answering: no volume is written, the gauge counts every exported volume
	 * of the agent as its PillarAgent says (model/outage.h) */
	fake_agent_fail(fx_fa, "HealthCheck", GRPC_UNAVAILABLE, "connection refused");
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_status(pa, "AgentConnected"), "False");
	cJSON_Delete(pa);
	ck_assert_int_eq(unreconciled("storage-1"), 3);
}
END_TEST

/* Truncates PillarVolumeState name's file to its first 40 bytes (a torn write, a bad disk). */
static void truncate_record(const char *name, char *path, size_t cap)
{
	snprintf(path, cap, "%s/pillarvolumestates/%s.json", fx_dir, name);
	ck_assert_int_eq(truncate(path, 40), 0);
}

/* The controller restarts on its store (the index is built from the files again). */
static void restart_controller(void)
{
	ctl_fini(&fx_c);
	store_close(fx_st);
	ck_assert_int_eq(store_dir_open(fx_dir, true, 50, &fx_st, NULL), 0);
	ctl_init(&fx_c, fx_st, fake_agent_client(fx_fa));
}

/* One truncated record: the restore still sends every readable volume (the agent keeps an
 * export the complete list leaves out, agent-api.md §7.2), opens the gate, and the PillarAgent
 * names the record's file and its repair; the record itself is left as it is. */
START_TEST(test_restore_with_unreadable_record)
{
	struct err e = {0};
	char path[1024];
	int requeue;
	volumes();
	truncate_record("vol-a", path, sizeof(path));
	restart_controller();
	fake_agent_set_health(fx_fa, true, true, NULL, NULL);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ReconcileState"), 1);
	const PillarCsi__Agent__V1__ReconcileStateRequest *q =
	    (const void *)fake_agent_call(fx_fa, 2)->req;
	ck_assert(q->complete);
	ck_assert_int_eq(q->n_volumes, 1);
	ck_assert_str_eq(q->volumes[0]->volume_id, "tank/vol-b");
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_reason(pa, "ExportsReady"), "ExportsServing");
	ck_assert_str_eq(cond_status(pa, "VolumeStatesReadable"), "False");
	ck_assert_str_eq(cond_reason(pa, "VolumeStatesReadable"), "UnreadableVolumeState");
	const char *msg = cond_message(pa, "VolumeStatesReadable");
	char want[1200];
	snprintf(want, sizeof(want), "PillarVolumeState \"vol-a\": %s is corrupt", path);
	ck_assert_msg(strstr(msg, want) && strstr(msg, "pillar-csi get pvst"), "%s", msg);
	cJSON_Delete(pa);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 40);
	cJSON *b = fx_get("PillarVolumeState", "vol-b");
	ck_assert_str_eq(cond_reason(b, "ExportReconciled"), "Reconciled");
	cJSON_Delete(b);
}
END_TEST

/* Volume `name` of storage-1 with ctrlLossTmo tmo (< 0: unset) published to node (or none). */
static void counted(const char *name, int tmo, const char *node)
{
	char spec[600], status[300], nvme[64] = "";
	if (tmo >= 0)
		snprintf(nvme, sizeof(nvme), "\"ctrlLossTmo\":%d", tmo);
	snprintf(spec, sizeof(spec),
	         "{\"volumeID\":\"storage-1/nvmeof-tcp/zfs-zvol/tank/%s\",\"agentRef\":"
	         "\"storage-1\",\"backendType\":\"zfs-zvol\",\"protocolType\":\"nvmeof-tcp\","
	         "\"resolved\":{\"protocol\":{\"nvmeofTcp\":{%s}}}}",
	         name, nvme);
	snprintf(status, sizeof(status), "{\"phase\":\"Ready\",\"publishedNodes\":[%s%s%s]}",
	         node ? "{\"nodeID\":\"" : "", node ? node : "",
	         node ? "\",\"accessMode\":\"SINGLE_NODE_WRITER\"}" : "");
	fx_put("PillarVolumeState", NULL, name,
	       "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"storage-1\"}", spec, status);
}

static int64_t pa_status_int(const char *field)
{
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	int64_t x = -1;
	if (json_get_int64(cJSON_GetObjectItem(pa, "status"), field, &x) < 0)
		x = -1;
	cJSON_Delete(pa);
	return x;
}

/* The status counts follow the volumes: a volume changed since the last pass is read again, a
 * deleted one leaves the counts; an unchanged pass writes nothing. */
START_TEST(test_agent_counts)
{
	struct err e = {0};
	int requeue;
	fake_agent_set_health(fx_fa, true, false, NULL, NULL);
	counted("v120", 120, "node-a");
	counted("v1800", 1800, "node-b");
	counted("vunset", -1, "node-a");
	counted("vidle", 30, NULL); /* not published: no kernel gives it up */
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_int_eq(pa_status_int("volumes"), 4);
	ck_assert_int_eq(pa_status_int("publishedVolumes"), 3);
	ck_assert_int_eq(pa_status_int("connectedHosts"), 2);
	ck_assert_int_eq(pa_status_int("outageBudgetSeconds"), 120);
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	uint64_t rv = store_meta_rv(pa);
	cJSON_Delete(pa);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	pa = fx_get("PillarAgent", "storage-1");
	ck_assert_uint_eq(store_meta_rv(pa), rv); /* nothing changed: no write */
	cJSON_Delete(pa);

	/* v120 loses its node and vidle gains one: read again although the others are carried */
	cJSON *v = fx_get("PillarVolumeState", "v120");
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(v, "status"), "publishedNodes",
	                          cJSON_CreateArray());
	ck_assert_int_eq(store_update_status(fx_st, v, NULL, &e), 0);
	cJSON_Delete(v);
	v = fx_get("PillarVolumeState", "vidle");
	cJSON_ReplaceItemInObject(
	    cJSON_GetObjectItem(v, "status"), "publishedNodes",
	    fx_parse("[{\"nodeID\":\"node-c\",\"accessMode\":\"SINGLE_NODE_WRITER\"}]"));
	ck_assert_int_eq(store_update_status(fx_st, v, NULL, &e), 0);
	cJSON_Delete(v);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_int_eq(pa_status_int("publishedVolumes"), 3);
	ck_assert_int_eq(pa_status_int("connectedHosts"), 3);
	ck_assert_int_eq(pa_status_int("outageBudgetSeconds"), 30);

	/* deleted volumes leave the counts */
	const struct store_kind *k = store_kind_lookup("pvst");
	ck_assert_int_eq(store_delete(fx_st, k, NULL, "vidle", NULL, NULL, &e), 0);
	ck_assert_int_eq(store_delete(fx_st, k, NULL, "vunset", NULL, NULL, &e), 0);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_int_eq(pa_status_int("volumes"), 2);
	ck_assert_int_eq(pa_status_int("publishedVolumes"), 1);
	ck_assert_int_eq(pa_status_int("connectedHosts"), 1);
	ck_assert_int_eq(pa_status_int("outageBudgetSeconds"), 1800);
	ck_assert_int_eq(store_delete(fx_st, k, NULL, "v1800", NULL, NULL, &e), 0);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_int_eq(pa_status_int("publishedVolumes"), 0);
	ck_assert_int_eq(pa_status_int("outageBudgetSeconds"), -1); /* absent: no budget */
}
END_TEST

static int seed_one(void *obj, void *arg)
{
	struct model_pvst *v = obj;
	/* what the seed says of v120 differs from the store (node-b, as v1800's, not node-a): a
	 * count that uses the seed shows it */
	if (!strcmp(v->meta.name, "v120") && v->status.n_published == 1) {
		free(v->status.published[0].node_id);
		v->status.published[0].node_id = strdup("node-b");
	}
	reconcile_agent_counts_seed_add(arg, v);
	return 0;
}

/* The loop's first list of the volumes seeds the agents' counts (reconcile_agent_counts_seeded):
 * an agent's first count takes each volume listed at the same resourceVersion from the seed
 * instead of decoding it, and reads a volume changed since. */
START_TEST(test_agent_counts_seeded)
{
	struct err e = {0};
	struct agent_counts_seed seed = {0};
	int requeue;
	fake_agent_set_health(fx_fa, true, false, NULL, NULL);
	counted("v120", 120, "node-a");
	counted("v1800", 1800, "node-b");
	counted("vidle", 30, NULL);
	ck_assert_int_eq(
	    model_list_each(fx_st, &model_pvst_kind, NULL, NULL, seed_one, &seed, NULL, &e), 0);
	reconcile_agent_counts_seeded(&fx_c, &seed);
	ck_assert_ptr_null(seed.agents);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_int_eq(pa_status_int("volumes"), 3);
	ck_assert_int_eq(pa_status_int("publishedVolumes"), 2);
	ck_assert_int_eq(pa_status_int("connectedHosts"), 1); /* node-b: v120's as seeded */
	ck_assert_int_eq(pa_status_int("outageBudgetSeconds"), 120);
	/* v120 written again: its new version is read, not the seed's */
	cJSON *v = fx_get("PillarVolumeState", "v120");
	cJSON_AddItemToObject(cJSON_GetObjectItem(v, "metadata"), "annotations",
	                      fx_parse("{\"touched\":\"yes\"}"));
	ck_assert_int_eq(store_update(fx_st, v, NULL, &e), 0);
	cJSON_Delete(v);
	/* a seed that comes after the agent's own count is not kept: its entries stay */
	ck_assert_int_eq(
	    model_list_each(fx_st, &model_pvst_kind, NULL, NULL, seed_one, &seed, NULL, &e), 0);
	reconcile_agent_counts_seeded(&fx_c, &seed);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_int_eq(pa_status_int("connectedHosts"), 2); /* node-a and node-b */
	v = fx_get("PillarVolumeState", "vidle");
	cJSON_ReplaceItemInObject(
	    cJSON_GetObjectItem(v, "status"), "publishedNodes",
	    fx_parse("[{\"nodeID\":\"node-c\",\"accessMode\":\"SINGLE_NODE_WRITER\"}]"));
	ck_assert_int_eq(store_update_status(fx_st, v, NULL, &e), 0);
	cJSON_Delete(v);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_int_eq(pa_status_int("connectedHosts"), 3);
}
END_TEST

/* The scrape's volume families follow changes, deletions and additions, and a scrape decodes
 * only the PillarVolumeStates whose resourceVersion changed since the scrape before. */
static char *scrape(void)
{
	struct metrics_text t = {0};
	ctl_metrics_collect(&fx_c, &t);
	ck_assert(!t.failed);
	return t.buf;
}

/* Sets storage-1's AgentConnected and ExportsReady to status. */
static void agent_available(const char *status)
{
	char conds[600];
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	snprintf(conds, sizeof(conds),
	         "{\"conditions\":[{\"type\":\"AgentConnected\",\"status\":\"%s\",\"reason\":"
	         "\"Dialed\",\"message\":\"\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"},"
	         "{\"type\":\"ExportsReady\",\"status\":\"%s\",\"reason\":\"ExportsServing\","
	         "\"message\":\"\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}",
	         status, status);
	cJSON_DeleteItemFromObject(pa, "status");
	cJSON_AddItemToObject(pa, "status", fx_parse(conds));
	ck_assert_int_eq(store_update_status(fx_st, pa, NULL, NULL), 0);
	cJSON_Delete(pa);
}

START_TEST(test_volume_metrics_decode_changed)
{
	struct err e = {0};
	volumes();
	agent_available("True");
	char *t = scrape();
	ck_assert_ptr_nonnull(strstr(t, "\npillar_csi_volumes{phase=\"Ready\"} 5\n"));
	/* vol-a, vol-b and vol-d are exported without ExportReconciled True */
	ck_assert_ptr_nonnull(
	    strstr(t, "\npillar_csi_volumes_export_unreconciled{agent=\"storage-1\"} 3\n"));
	ck_assert_uint_eq(ctl_metrics_volumes_decoded(&fx_c), 5);
	free(t);
	t = scrape();
	ck_assert_ptr_nonnull(strstr(t, "\npillar_csi_volumes{phase=\"Ready\"} 5\n"));
	ck_assert_uint_eq(ctl_metrics_volumes_decoded(&fx_c), 0);
	free(t);

	/* vol-b changes phase and gets ExportReconciled, vol-c goes, vol-e comes */
	cJSON *v = fx_get("PillarVolumeState", "vol-b");
	cJSON *st = cJSON_GetObjectItem(v, "status");
	cJSON_ReplaceItemInObject(st, "phase", cJSON_CreateString("Deleting"));
	cJSON_AddItemToObject(st, "conditions",
	                      fx_parse("[{\"type\":\"ExportReconciled\",\"status\":\"True\","
	                               "\"reason\":\"Reconciled\",\"message\":\"\","
	                               "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]"));
	ck_assert_int_eq(store_update_status(fx_st, v, NULL, &e), 0);
	cJSON_Delete(v);
	ck_assert_int_eq(
	    store_delete(fx_st, store_kind_lookup("pvst"), NULL, "vol-c", NULL, NULL, &e), 0);
	vol("vol-e", "{\"phase\":\"Provisioning\"}");
	t = scrape();
	ck_assert_uint_eq(ctl_metrics_volumes_decoded(&fx_c), 2);
	ck_assert_ptr_nonnull(strstr(t, "\npillar_csi_volumes{phase=\"Ready\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(t, "\npillar_csi_volumes{phase=\"Deleting\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t, "\npillar_csi_volumes{phase=\"Provisioning\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(t, "\npillar_csi_volumes_export_unreconciled{agent=\"storage-1\"} 2\n"));
	free(t);

	/* the agent becomes unreachable: no volume changes, vol-b counts again (derived
	 * AgentUnavailable) without any volume decoded */
	agent_available("False");
	t = scrape();
	ck_assert_uint_eq(ctl_metrics_volumes_decoded(&fx_c), 0);
	ck_assert_ptr_nonnull(
	    strstr(t, "\npillar_csi_volumes_export_unreconciled{agent=\"storage-1\"} 3\n"));
	free(t);
}
END_TEST

START_TEST(test_restore_failure_and_item_results)
{
	struct err e = {0};
	int requeue;
	volumes();
	fake_agent_set_health(fx_fa, true, true, NULL, NULL);
	fake_agent_fail(fx_fa, "ReconcileState", GRPC_UNAVAILABLE, "agent is draining");
	fake_agent_set_hook(fx_fa, pa_snap, NULL);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_str_eq(fake_agent_call(fx_fa, 2)->snapshot,
	                 "False/ExportRestorePending False/ExportRestorePending");
	ck_assert_int_eq(requeue, RECONCILE_RESTORE_RETRY_MS);
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_status(pa, "ExportsReady"), "False");
	ck_assert_str_eq(cond_reason(pa, "ExportsReady"), "ExportRestoreFailed");
	ck_assert_str_eq(
	    json_get_str(cond_get(cJSON_GetObjectItem(pa, "status"), "ExportsReady"), "message"),
	    "agent is draining");
	ck_assert_str_eq(cond_reason(pa, "Ready"), "ExportRestoreFailed");
	const char *t1 = json_get_str(cond_get(cJSON_GetObjectItem(pa, "status"), "Ready"),
	                              "lastTransitionTime");
	char t1c[40];
	snprintf(t1c, sizeof(t1c), "%s", t1);
	cJSON_Delete(pa);
	/* the volume's ExportReconciled is derived from the PillarAgent's ExportsReady (nothing
	 * written on the volume) */
	struct model_pvst v;
	struct model_pa mpa;
	const char *vs, *vr;
	ck_assert_int_eq(model_get(fx_st, &model_pvst_kind, NULL, "vol-a", &v, NULL), 0);
	ck_assert_int_eq(model_get(fx_st, &model_pa_kind, NULL, "storage-1", &mpa, NULL), 0);
	model_pvst_export_reconciled(&v, model_pa_exports_unavailable(&mpa), &vs, &vr);
	ck_assert_str_eq(vr, "AgentUnavailable");
	model_clear(&model_pvst_kind, &v);
	model_clear(&model_pa_kind, &mpa);
	cJSON *o;
	/* retry: one item stale, one failing */
	fake_agent_item_error(
	    fx_fa, "tank/vol-a",
	    "FAILED_PRECONDITION: stale fencing token (uid \"u\", generation 4) for "
	    "volume \"tank/vol-a\": generation is older than the mark (mark uid "
	    "\"u\", generation 5, ended false)");
	fake_agent_item_error(fx_fa, "tank/vol-b",
	                      "UNAVAILABLE: bind address 10.0.0.5 is not configured on this node");
	sleep(1); /* a transition would show a new second */
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	/* the retry keeps the failure visible while it is in flight */
	ck_assert_str_eq(fake_agent_call(fx_fa, 2)->method, "ReconcileState");
	ck_assert_str_eq(fake_agent_call(fx_fa, 2)->snapshot,
	                 "False/ExportRestoreFailed False/ExportRestoreFailed");
	ck_assert_int_eq(requeue, RECONCILE_INTERVAL_MS);
	pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_reason(pa, "ExportsReady"), "ExportsServing");
	ck_assert_str_eq(cond_reason(pa, "Ready"), "AgentConnected");
	ck_assert_str_ne(json_get_str(cond_get(cJSON_GetObjectItem(pa, "status"), "Ready"),
	                              "lastTransitionTime"),
	                 t1c);
	cJSON_Delete(pa);
	o = fx_get("PillarVolumeState", "vol-a");
	ck_assert_str_eq(cond_reason(o, "ExportReconciled"), "StaleGeneration");
	cJSON_Delete(o);
	o = fx_get("PillarVolumeState", "vol-b");
	ck_assert_str_eq(cond_reason(o, "ExportReconciled"), "ReconcileFailed");
	ck_assert_str_eq(
	    json_get_str(cond_get(cJSON_GetObjectItem(o, "status"), "ExportReconciled"), "message"),
	    "UNAVAILABLE: bind address 10.0.0.5 is not configured on this node");
	cJSON_Delete(o);
}
END_TEST

/* deploy.md §9.3, crds.md §3.3: over mTLS a healthy agent is Authenticated; a failed handshake
 * is TLSHandshakeFailed with the spec's message and the handshake's reason. */
START_TEST(test_agent_mtls_reasons)
{
	struct err e = {0};
	int requeue;
	fake_agent_set_mtls(fx_fa, true);
	fake_agent_fail(
	    fx_fa, "HealthCheck", GRPC_UNAVAILABLE,
	    "10.0.0.5:9500: TLS handshake: peer certificate refused: The certificate is "
	    "not correctly signed by the trusted CA (retrying in 200 ms)");
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_status(pa, "AgentConnected"), "False");
	ck_assert_str_eq(cond_reason(pa, "AgentConnected"), "TLSHandshakeFailed");
	ck_assert_str_eq(
	    json_get_str(cond_get(cJSON_GetObjectItem(pa, "status"), "AgentConnected"), "message"),
	    "mTLS handshake to agent at \"10.0.0.5:9500\" failed; verify certificate chain and CA: "
	    "peer certificate refused: The certificate is not correctly signed by the trusted CA "
	    "(retrying in 200 ms)");
	ck_assert_str_eq(cond_reason(pa, "Ready"), "AgentNotConnected");
	cJSON_Delete(pa);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_status(pa, "AgentConnected"), "True");
	ck_assert_str_eq(cond_reason(pa, "AgentConnected"), "Authenticated");
	cJSON_Delete(pa);
}
END_TEST

START_TEST(test_agent_unreachable_degraded_and_deletion)
{
	struct err e = {0};
	int requeue;
	fake_agent_fail(fx_fa, "HealthCheck", GRPC_UNAVAILABLE, "connection refused");
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_reason(pa, "AgentConnected"), "HealthCheckFailed");
	ck_assert_str_eq(
	    json_get_str(cond_get(cJSON_GetObjectItem(pa, "status"), "AgentConnected"), "message"),
	    "HealthCheck to agent at \"10.0.0.5:9500\" failed: connection refused");
	ck_assert_str_eq(cond_status(pa, "ExportsReady"), "Unknown");
	ck_assert_str_eq(cond_reason(pa, "Ready"), "AgentNotConnected");
	cJSON_Delete(pa);
	fake_agent_set_health(fx_fa, false, false, "nvmet-tcp", "nvmet_tcp module not loaded");
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_reason(pa, "AgentConnected"), "AgentDegraded");
	ck_assert_str_eq(
	    json_get_str(cond_get(cJSON_GetObjectItem(pa, "status"), "AgentConnected"), "message"),
	    "nvmet-tcp: nvmet_tcp module not loaded");
	ck_assert_str_eq(cond_reason(pa, "Ready"), "AgentDegraded");
	cJSON_Delete(pa);
	/* nodeRef: address from the Node, inside the selector */
	fx_put("Node", NULL, "w1", NULL, NULL,
	       "{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"192.168.1.4\"},"
	       "{\"type\":\"InternalIP\",\"address\":\"10.1.2.3\"}]}");
	fx_put("PillarAgent", NULL, "storage-2", NULL,
	       "{\"nodeRef\":{\"name\":\"w1\",\"addressSelector\":\"10.1.0.0/16\"}}", NULL);
	fake_agent_set_health(fx_fa, true, false, NULL, NULL);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-2", &requeue, &e), 0);
	pa = fx_get("PillarAgent", "storage-2");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(pa, "status"), "resolvedAddress"),
	                 "10.1.2.3:9500");
	ck_assert_str_eq(cond_reason(pa, "NodeExists"), "NodeFound");
	cJSON_Delete(pa);
	/* deletion blocked by a store and a volume, then released */
	fx_put("PillarStore", NULL, "tank", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}", NULL);
	vol("vol-a", "{\"phase\":\"Ready\"}");
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("PillarAgent"), NULL, "storage-1",
	                              NULL, NULL, NULL),
	                 0);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	pa = fx_get("PillarAgent", "storage-1");
	ck_assert_ptr_nonnull(pa);
	ck_assert_str_eq(cond_reason(pa, "Ready"), "DeletionBlocked");
	ck_assert_str_eq(
	    json_get_str(cond_get(cJSON_GetObjectItem(pa, "status"), "Ready"), "message"),
	    "Deletion blocked: PillarStore \"tank\"; 1 volume (vol-a)");
	cJSON_Delete(pa);
	ck_assert_int_eq(
	    store_delete(fx_st, store_kind_lookup("PillarStore"), NULL, "tank", NULL, NULL, NULL),
	    0);
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("PillarVolumeState"), NULL, "vol-a",
	                              NULL, NULL, NULL),
	                 0);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_ptr_null(fx_get("PillarAgent", "storage-1"));
}
END_TEST

START_TEST(test_workqueue)
{
	workqueue *q;
	char key[64];
	ck_assert_int_eq(workqueue_new(20, 80, &q), 0);
	workqueue_add(q, "a", 0);
	workqueue_add(q, "a", 0);
	/* due in an hour: whatever the machine's load, b is not due while a is handled */
	workqueue_add(q, "b", 3600000);
	ck_assert_uint_eq(workqueue_len(q), 2);
	ck_assert_int_eq(workqueue_get(q, 10, key, sizeof(key)), 1);
	ck_assert_str_eq(key, "a");
	ck_assert_int_eq(workqueue_get(q, 10, key, sizeof(key)), 0); /* b not due, a active */
	ck_assert_int_eq(workqueue_done(q, "a", false), 20);
	ck_assert_int_eq(workqueue_get(q, 30000, key, sizeof(key)), 1); /* a after its backoff */
	ck_assert_str_eq(key, "a");
	ck_assert_int_eq(workqueue_done(q, "a", false), 40); /* the backoff doubles */
	ck_assert_int_eq(workqueue_get(q, 30000, key, sizeof(key)), 1);
	ck_assert_str_eq(key, "a");
	workqueue_done(q, "a", true);
	workqueue_add(q, "b", 0); /* an earlier add of a waiting key makes it due now */
	ck_assert_int_eq(workqueue_get(q, 30000, key, sizeof(key)), 1);
	ck_assert_str_eq(key, "b");
	workqueue_done(q, key, true);
	ck_assert_int_eq(workqueue_get(q, 10, key, sizeof(key)), 0);
	workqueue_shutdown(q);
	ck_assert_int_eq(workqueue_get(q, 10, key, sizeof(key)), -ESHUTDOWN);
	workqueue_free(q);
}
END_TEST

static void get_is(workqueue *q, const char *want)
{
	char key[64];
	ck_assert_int_eq(workqueue_get(q, 30000, key, sizeof(key)), 1);
	ck_assert_str_eq(key, want);
}

/* workqueue_add_first: ahead of every key queued (a kicked agent's pass before a periodic
 * pass's resyncs), moved to the head when already queued, ahead again after its run when added
 * while running, due at once when waiting; still one run per key. */
START_TEST(test_workqueue_add_first)
{
	workqueue *q;
	char key[64];
	ck_assert_int_eq(workqueue_new(20, 80, &q), 0);
	workqueue_add(q, "a", 0);
	workqueue_add(q, "b", 0);
	workqueue_add_first(q, "c"); /* new: at the head */
	workqueue_add_first(q, "b"); /* queued behind a: moved to the head */
	workqueue_add_first(q, "b"); /* already at the head: once */
	ck_assert_uint_eq(workqueue_len(q), 3);
	get_is(q, "b");
	get_is(q, "c");
	workqueue_add(q, "d", 0);
	workqueue_add_first(q, "b"); /* running: again after its run, ahead of a and d */
	workqueue_done(q, "c", true);
	workqueue_done(q, "b", true);
	get_is(q, "b");
	workqueue_done(q, "b", true);
	get_is(q, "a");
	workqueue_done(q, "a", true);
	workqueue_add(q, "e", 3600000);
	workqueue_add_first(q, "e"); /* waiting an hour: due now, ahead of d */
	get_is(q, "e");
	get_is(q, "d");
	workqueue_done(q, "e", true);
	workqueue_done(q, "d", true);
	ck_assert_int_eq(workqueue_get(q, 10, key, sizeof(key)), 0);
	ck_assert_uint_eq(workqueue_len(q), 0);
	workqueue_free(q);
}
END_TEST

/* client-go's workqueue_* families for one named queue. */
START_TEST(test_workqueue_metrics)
{
	workqueue *q;
	char key[64];
	struct metrics_text t = {0};
	ck_assert_int_eq(workqueue_new(20, 80, &q), 0);
	workqueue_metrics(q, "test-queue");
	workqueue_add(q, "a", 0);
	workqueue_add(q, "a", 0); /* de-duplicated: not an add */
	workqueue_add(q, "b", 0);
	ck_assert_int_eq(workqueue_get(q, 10, key, sizeof(key)), 1);
	metrics_write(&t);
	ck_assert_ptr_nonnull(strstr(t.buf, "\nworkqueue_depth{name=\"test-queue\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t.buf, "\nworkqueue_adds_total{name=\"test-queue\"} 2\n"));
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\nworkqueue_queue_duration_seconds_count{name=\"test-queue\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\nworkqueue_unfinished_work_seconds{name=\"test-queue\"} "));
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\nworkqueue_longest_running_processor_seconds{name=\"test-queue\"} "));
	metrics_text_free(&t);
	ck_assert_int_eq(workqueue_done(q, key, false), 20);
	metrics_write(&t);
	ck_assert_ptr_nonnull(strstr(t.buf, "\nworkqueue_retries_total{name=\"test-queue\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\nworkqueue_work_duration_seconds_count{name=\"test-queue\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\nworkqueue_unfinished_work_seconds{name=\"test-queue\"} 0\n"));
	metrics_text_free(&t);
	workqueue_free(q);
	metrics_write(&t); /* a freed queue is no longer read */
	ck_assert_ptr_null(strstr(t.buf, "\nworkqueue_unfinished_work_seconds{"));
	metrics_text_free(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_reconcile");
	TCase *t = tcase_create("agent");
	tcase_add_checked_fixture(t, setup, fx_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_restore_once_then_serving);
	tcase_add_test(t, test_restore_failure_and_item_results);
	tcase_add_test(t, test_restore_with_unreadable_record);
	tcase_add_test(t, test_agent_unreachable_degraded_and_deletion);
	tcase_add_test(t, test_agent_mtls_reasons);
	tcase_add_test(t, test_workqueue);
	tcase_add_test(t, test_workqueue_add_first);
	tcase_add_test(t, test_workqueue_metrics);
	tcase_add_test(t, test_agent_counts);
	tcase_add_test(t, test_agent_counts_seeded);
	tcase_add_test(t, test_volume_metrics_decode_changed);
	suite_add_tcase(s, t);
	return tu_run(s);
}
