/* The controller loop (loop.h) on the embedded store with the fake agent, without calling any
 * reconcile function directly: a PillarAgent whose agent reports export_restore_pending gets
 * exactly one ReconcileState{complete=true} and ExportsReady=True/ExportsServing; a volume's
 * status change triggers a one-item resync (agent-api.md §12.3); the periodic pass sends one
 * non-complete batch per agent; a volume changed while no controller ran is resynced by the
 * first pass, an unchanged one is not; an `export restore pending` failure kicks the restore at once;
 * deleting objects releases their finalizers; stop joins everything (ASan: no leaks); the
 * PILLAR_RECONCILE_INTERVAL and PILLAR_CAPACITY_INTERVAL duration syntax. */
#include <time.h>
#include <unistd.h>

#include "base/time.h"
#include "controller/loop.h"
#include "controller/reconcile.h"
#include "ctl_fixture.h"

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* How long a test waits for something the loop does soon: generous, because a loaded machine
 * runs the loop's threads late (a test checks what happens, not how fast). */
#define WAIT_MS 30000

/* Polls until the condition of kind/name has the reason (or the object is gone when reason is
 * NULL), up to WAIT_MS. */
static bool wait_reason(const char *kind, const char *name, const char *type, const char *reason)
{
	for (int64_t t0 = time_mono_ms(); time_mono_ms() - t0 < WAIT_MS;) {
		cJSON *o = fx_get(kind, name);
		bool ok = reason ? o && !strcmp(cond_reason(o, type), reason) : !o;
		cJSON_Delete(o);
		if (ok)
			return true;
		msleep(20);
	}
	return false;
}

/* Waits until no agent call happened for 400 ms (the loop is idle). */
static void quiesce(void)
{
	size_t n = fake_agent_ncalls(fx_fa);
	for (int quiet = 0, t = 0; quiet < 400 && t < 10000; t += 20) {
		msleep(20);
		size_t m = fake_agent_ncalls(fx_fa);
		quiet = m == n ? quiet + 20 : 0;
		n = m;
	}
}

static void vol(const char *name, const char *status)
{
	char spec[700];
	snprintf(spec, sizeof(spec),
	         "{\"volumeID\":\"storage-1/nvmeof-tcp/file/files/%s\",\"agentVolumeID\":"
	         "\"files/%s\",\"agentRef\":\"storage-1\",\"backendType\":\"file\","
	         "\"protocolType\":\"nvmeof-tcp\",\"capacityBytes\":1048576,\"resolved\":{"
	         "\"backend\":{\"file\":{\"pool\":\"files\",\"preallocate\":true}}}}",
	         name, name);
	fx_put("PillarVolumeState", NULL, name,
	       "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"storage-1\","
	       "\"pillar-csi.bhyoo.com/store\":\"files\"}",
	       spec, status);
}

static const char ready_status[] =
    "{\"phase\":\"Ready\",\"publicationGeneration\":2,\"exportSpec\":{\"bindAddress\":"
    "\"10.0.0.5\",\"port\":4420,\"aclEnabled\":false}}";

static struct controller_loop *start(int interval_ms)
{
	struct controller_loop *l = NULL;
	struct controller_loop_opts o = {
	    .interval_ms = interval_ms, .workers = 2, .backoff_base_ms = 50};
	struct err e = {0};
	ck_assert_msg(controller_loop_start(&fx_c, &o, &l, &e) == 0, "%s", e.msg);
	return l;
}

START_TEST(test_restore_through_watch)
{
	vol("vol-a", ready_status);
	vol("vol-b", "{\"phase\":\"Ready\",\"publicationGeneration\":1}");
	fake_agent_set_health(fx_fa, true, true, NULL, NULL);
	struct controller_loop *l = start(3600000);
	/* the agent appears after the loop started: the watch brings it */
	msleep(100);
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", NULL);
	ck_assert(wait_reason("PillarAgent", "storage-1", "ExportsReady", "ExportsServing"));
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_status(pa, "ExportsReady"), "True");
	ck_assert_str_eq(cond_reason(pa, "Ready"), "AgentConnected");
	cJSON_Delete(pa);
	ck_assert(wait_reason("PillarVolumeState", "vol-a", "ExportReconciled", "Reconciled"));
	ck_assert(
	    wait_reason("PillarVolumeState", "vol-b", "ExportReconciled", "ExportSpecMissing"));
	msleep(500); /* later passes (status events) must not restore again */
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ReconcileState"), 1);
	ck_assert(!fake_agent_restore_pending(fx_fa));
	const struct fake_call *rc = NULL;
	for (size_t i = 0; i < fake_agent_ncalls(fx_fa); i++)
		if (!strcmp(fake_agent_call(fx_fa, i)->method, "ReconcileState"))
			rc = fake_agent_call(fx_fa, i);
	const PillarCsi__Agent__V1__ReconcileStateRequest *q = (const void *)rc->req;
	ck_assert(q->complete);
	ck_assert_uint_eq(q->n_volumes, 1);
	ck_assert_str_eq(q->volumes[0]->volume_id, "files/vol-a");
	ck_assert_int_eq(q->volumes[0]->backend_type,
	                 PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE);
	ck_assert_int_eq(q->volumes[0]->backend_params->params_case,
	                 PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE);
	ck_assert_str_eq(q->volumes[0]->backend_params->file->pool, "files");
	ck_assert(q->volumes[0]->backend_params->file->preallocate);

	/* deleting: the volumes block the agent, then it goes */
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("PillarAgent"), NULL, "storage-1",
	                              NULL, NULL, NULL),
	                 0);
	ck_assert(wait_reason("PillarAgent", "storage-1", "Ready", "DeletionBlocked"));
	cJSON *o = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(
	    json_get_str(cond_get(cJSON_GetObjectItem(o, "status"), "Ready"), "message"),
	    "Deletion blocked: 2 volumes (vol-a, vol-b)");
	cJSON_Delete(o);
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("PillarVolumeState"), NULL, "vol-a",
	                              NULL, NULL, NULL),
	                 0);
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("PillarVolumeState"), NULL, "vol-b",
	                              NULL, NULL, NULL),
	                 0);
	ck_assert(wait_reason("PillarAgent", "storage-1", NULL, NULL));
	controller_loop_stop(l);
	ck_assert_ptr_null(fx_c.restore_kick);
}
END_TEST

/* The first reconcile pass (loop.h) ends once the start's lists are reconciled: the agent that
 * was there before the start is restored and serving by then. */
START_TEST(test_first_pass_ends_after_the_restore)
{
	vol("vol-a", ready_status);
	fake_agent_set_health(fx_fa, true, true, NULL, NULL);
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", NULL);
	struct controller_loop *l = start(3600000);
	long ms = -1;
	for (int t = 0; t < 20000 && (ms = controller_loop_first_pass_ms(l)) < 0; t += 10)
		msleep(10);
	ck_assert_int_ge(ms, 0);
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	ck_assert_str_eq(cond_reason(pa, "ExportsReady"), "ExportsServing");
	cJSON_Delete(pa);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ReconcileState"), 1);
	ck_assert_int_eq(controller_loop_first_pass_ms(l), ms); /* once */
	controller_loop_stop(l);
}
END_TEST

START_TEST(test_change_triggered_and_periodic_resync)
{
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", NULL);
	vol("vol-a", ready_status);
	fake_agent_set_health(fx_fa, true, false, NULL, NULL);
	struct controller_loop *l = start(3600000);
	ck_assert(wait_reason("PillarAgent", "storage-1", "Ready", "AgentConnected"));
	quiesce();
	/* the initial list does not resync each volume */
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ReconcileState"), 0);
	/* a publication appears: one one-item complete=false request carrying the initiator */
	cJSON *o = fx_get("PillarVolumeState", "vol-a");
	cJSON *st = cJSON_GetObjectItem(o, "status");
	cJSON_AddItemToObject(
	    st, "publishedNodes",
	    fx_parse("[{\"nodeID\":\"node-a\",\"initiatorID\":\"nqn.a\",\"accessMode\":"
	             "\"SINGLE_NODE_WRITER\",\"readonly\":false,\"revoking\":false}]"));
	ck_assert_int_eq(store_update_status(fx_st, o, NULL, NULL), 0);
	cJSON_Delete(o);
	ck_assert(wait_reason("PillarVolumeState", "vol-a", "ExportReconciled", "Reconciled"));
	msleep(300);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ReconcileState"), 1);
	const struct fake_call *rc = NULL;
	for (size_t i = 0; i < fake_agent_ncalls(fx_fa); i++)
		if (!strcmp(fake_agent_call(fx_fa, i)->method, "ReconcileState"))
			rc = fake_agent_call(fx_fa, i);
	const PillarCsi__Agent__V1__ReconcileStateRequest *q = (const void *)rc->req;
	ck_assert(!q->complete);
	ck_assert_uint_eq(q->n_volumes, 1);
	ck_assert_uint_eq(q->volumes[0]->exports[0]->n_allowed_initiators, 1);
	ck_assert_str_eq(q->volumes[0]->exports[0]->allowed_initiators[0], "nqn.a");
	controller_loop_stop(l);

	/* periodic pass with a short interval: one batch per agent, complete=false */
	vol("vol-b", ready_status);
	fake_agent_reset_log(fx_fa);
	l = start(300);
	for (int64_t t0 = time_mono_ms();
	     !fake_agent_count(fx_fa, "ReconcileState") && time_mono_ms() - t0 < WAIT_MS;)
		msleep(20);
	controller_loop_stop(l);
	size_t n = fake_agent_ncalls(fx_fa), batches = 0;
	for (size_t i = 0; i < n; i++) {
		const struct fake_call *c = fake_agent_call(fx_fa, i);
		if (strcmp(c->method, "ReconcileState"))
			continue;
		q = (const void *)c->req;
		ck_assert(!q->complete);
		ck_assert_uint_eq(q->n_volumes, 2);
		batches++;
	}
	ck_assert_msg(batches >= 1, "%s", fake_agent_log(fx_fa));
}
END_TEST

/* Sets vol-a's publishedNodes (a JSON array) straight in the store, as another controller or an
 * operator would. */
static void set_published(const char *nodes)
{
	cJSON *o = fx_get("PillarVolumeState", "vol-a");
	cJSON *st = cJSON_GetObjectItem(o, "status");
	cJSON_DeleteItemFromObject(st, "publishedNodes");
	cJSON_AddItemToObject(st, "publishedNodes", fx_parse(nodes));
	ck_assert_int_eq(store_update_status(fx_st, o, NULL, NULL), 0);
	cJSON_Delete(o);
}

/* vol-a's status.reconciledDigest, "" when none. */
static char *recorded_digest(char *buf, size_t cap)
{
	cJSON *o = fx_get("PillarVolumeState", "vol-a");
	snprintf(buf, cap, "%s",
	         json_get_str(cJSON_GetObjectItem(o, "status"), "reconciledDigest") ?: "");
	cJSON_Delete(o);
	return buf;
}

/* Starts the loop, waits for its first reconcile pass to end, and returns the ReconcileStates
 * sent until then. */
static size_t first_pass_resyncs(struct controller_loop **l)
{
	fake_agent_reset_log(fx_fa);
	*l = start(3600000);
	long ms = -1;
	for (int64_t t0 = time_mono_ms();
	     (ms = controller_loop_first_pass_ms(*l)) < 0 && time_mono_ms() - t0 < WAIT_MS;)
		msleep(10);
	ck_assert_int_ge(ms, 0);
	return fake_agent_count(fx_fa, "ReconcileState");
}

/* A volume changed while no controller ran is resynced by the first pass, before it ends; one
 * unchanged since its last confirmed resync is not (status.reconciledDigest, vdigest.h). */
START_TEST(test_first_pass_resyncs_changed_while_down)
{
	static const char one[] =
	    "[{\"nodeID\":\"node-a\",\"initiatorID\":\"nqn.a\",\"accessMode\":"
	    "\"SINGLE_NODE_WRITER\",\"readonly\":false,\"revoking\":false}]";
	static const char two[] =
	    "[{\"nodeID\":\"node-a\",\"initiatorID\":\"nqn.a\",\"accessMode\":"
	    "\"SINGLE_NODE_WRITER\",\"readonly\":false,\"revoking\":true},"
	    "{\"nodeID\":\"node-b\",\"initiatorID\":\"nqn.b\",\"accessMode\":"
	    "\"SINGLE_NODE_WRITER\",\"readonly\":false,\"revoking\":false}]";
	char d1[64], d2[64];
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", NULL);
	vol("vol-a", ready_status);
	fake_agent_set_health(fx_fa, true, false, NULL, NULL);
	struct controller_loop *l = start(3600000);
	ck_assert(wait_reason("PillarAgent", "storage-1", "Ready", "AgentConnected"));
	quiesce();
	set_published(one); /* a change-triggered resync confirms it */
	for (int64_t t0 = time_mono_ms();
	     !recorded_digest(d1, sizeof(d1))[0] && time_mono_ms() - t0 < WAIT_MS;)
		msleep(20);
	ck_assert_uint_eq(strlen(d1), 16);
	quiesce();
	controller_loop_stop(l);

	/* unchanged since: the first pass sends nothing */
	ck_assert_uint_eq(first_pass_resyncs(&l), 0);
	quiesce();
	controller_loop_stop(l);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ReconcileState"), 0);

	/* node-a fenced and node-b published while no controller ran: resynced before the first
	 * pass ends, one one-item request admitting nqn.b alone */
	set_published(two);
	ck_assert_uint_eq(first_pass_resyncs(&l), 1);
	const struct fake_call *rc = NULL;
	for (size_t i = 0; i < fake_agent_ncalls(fx_fa); i++)
		if (!strcmp(fake_agent_call(fx_fa, i)->method, "ReconcileState"))
			rc = fake_agent_call(fx_fa, i);
	const PillarCsi__Agent__V1__ReconcileStateRequest *q = (const void *)rc->req;
	ck_assert(!q->complete);
	ck_assert_uint_eq(q->n_volumes, 1);
	ck_assert_uint_eq(q->volumes[0]->exports[0]->n_allowed_initiators, 1);
	ck_assert_str_eq(q->volumes[0]->exports[0]->allowed_initiators[0], "nqn.b");
	ck_assert_str_ne(recorded_digest(d2, sizeof(d2)), d1); /* the new one is confirmed */
	quiesce();
	controller_loop_stop(l);

	/* confirmed: the next start sends nothing again */
	ck_assert_uint_eq(first_pass_resyncs(&l), 0);
	controller_loop_stop(l);
}
END_TEST

START_TEST(test_restore_kick)
{
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", NULL);
	vol("vol-a", ready_status);
	fake_agent_set_health(fx_fa, true, false, NULL, NULL);
	struct controller_loop *l = start(3600000);
	ck_assert(wait_reason("PillarAgent", "storage-1", "Ready", "AgentConnected"));
	quiesce();
	fake_agent_reset_log(fx_fa);
	/* the agent restarted: the next per-volume resync hits the gate and kicks the restore */
	fake_agent_set_health(fx_fa, true, true, NULL, NULL);
	fake_agent_fail(fx_fa, "ReconcileState", GRPC_UNAVAILABLE,
	                "export restore pending: ReconcileState: awaiting a complete "
	                "ReconcileState from the controller before exporting");
	cJSON *o = fx_get("PillarVolumeState", "vol-a");
	cJSON_AddItemToObject(cJSON_GetObjectItem(o, "status"), "publishedNodes", fx_parse("[]"));
	ck_assert_int_eq(store_update_status(fx_st, o, NULL, NULL), 0);
	cJSON_Delete(o);
	for (int64_t t0 = time_mono_ms();
	     fake_agent_restore_pending(fx_fa) && time_mono_ms() - t0 < WAIT_MS;)
		msleep(20);
	ck_assert(!fake_agent_restore_pending(fx_fa));
	ck_assert(wait_reason("PillarVolumeState", "vol-a", "ExportReconciled", "Reconciled"));
	controller_loop_stop(l);
	ck_assert_msg(fake_agent_count(fx_fa, "ReconcileState") == 2, "%s", fake_agent_log(fx_fa));
}
END_TEST

START_TEST(test_duration_and_env)
{
	int ms = 0;
	ck_assert_int_eq(controller_duration_parse("30s", &ms), 0);
	ck_assert_int_eq(ms, 30000);
	ck_assert_int_eq(controller_duration_parse("1m30s", &ms), 0);
	ck_assert_int_eq(ms, 90000);
	ck_assert_int_eq(controller_duration_parse("250ms", &ms), 0);
	ck_assert_int_eq(ms, 250);
	ck_assert_int_eq(controller_duration_parse("2h", &ms), 0);
	ck_assert_int_eq(ms, 7200000);
	ck_assert_int_eq(controller_duration_parse("45", &ms), 0);
	ck_assert_int_eq(ms, 45000);
	ck_assert_int_eq(controller_duration_parse("", &ms), -EINVAL);
	ck_assert_int_eq(controller_duration_parse("5x", &ms), -EINVAL);
	ck_assert_int_eq(controller_duration_parse("-5s", &ms), -EINVAL);
	ck_assert_int_eq(controller_duration_parse("1.5s", &ms), 0); /* Go's syntax has fractions */
	ck_assert_int_eq(ms, 1500);
	ck_assert_int_eq(controller_duration_parse("99999999h", &ms), -EINVAL);
	struct controller_loop *l = NULL;
	struct err e = {0};
	setenv("PILLAR_RECONCILE_INTERVAL", "soon", 1);
	ck_assert_int_eq(controller_loop_start(&fx_c, NULL, &l, &e), -EINVAL);
	ck_assert_str_eq(
	    e.msg, "PILLAR_RECONCILE_INTERVAL \"soon\" is not a positive duration such as 30s");
	ck_assert_ptr_null(l);
	setenv("PILLAR_RECONCILE_INTERVAL", "1m", 1);
	setenv("PILLAR_CAPACITY_INTERVAL", "0s", 1);
	ck_assert_int_eq(controller_loop_start(&fx_c, NULL, &l, &e), -EINVAL);
	ck_assert_str_eq(e.msg,
	                 "PILLAR_CAPACITY_INTERVAL \"0s\" is not a positive duration such as 60s");
	ck_assert_ptr_null(l);
	setenv("PILLAR_CAPACITY_INTERVAL", "1s", 1);
	ck_assert_int_eq(controller_loop_start(&fx_c, NULL, &l, &e), 0);
	controller_loop_stop(l);
	unsetenv("PILLAR_RECONCILE_INTERVAL");
	unsetenv("PILLAR_CAPACITY_INTERVAL");
	controller_loop_stop(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_loop");
	TCase *t = tcase_create("loop");
	tcase_add_checked_fixture(t, fx_setup, fx_teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_restore_through_watch);
	tcase_add_test(t, test_first_pass_ends_after_the_restore);
	tcase_add_test(t, test_change_triggered_and_periodic_resync);
	tcase_add_test(t, test_first_pass_resyncs_changed_while_down);
	tcase_add_test(t, test_restore_kick);
	tcase_add_test(t, test_duration_and_env);
	suite_add_tcase(s, t);
	return tu_run(s);
}
