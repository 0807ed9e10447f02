/* controller/events: condition changes of the pillar-csi objects as the Events the recorder
 * (cluster/events.h) writes to an in-process API server (kube_fake.h): the first version seen is the
 * baseline, a changed status or reason is one Event (Warning when not True), an unchanged one
 * none, a message-only change none, a PillarVolumeState's Warning also on its PVC and PV (with
 * the PV's watched uid), a new partialFailure a Warning on all three, a deleted object
 * forgotten. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/events.h"
#include "kube_fake.h"
#include "model/kube.h"
#include "model/pillar.h"
#include "rules/conditions.h"
#include "testutil.h"

static struct kf_certs certs;
static struct kf_server *srv;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char posted[32][512]; /* "<ns> <kind>/<name> <type> <reason>: <message>" */
static char uids[32][64];    /* involvedObject.uid */
static int n_posted;

static void handler(void *arg, const struct kf_req *rq, struct kf_resp *resp)
{
	(void)arg;
	cJSON *b = cJSON_Parse(rq->body ? rq->body : "");
	cJSON *io = cJSON_GetObjectItem(b, "involvedObject");
	pthread_mutex_lock(&mu);
	if (strcmp(rq->method, "POST") == 0 && io && n_posted < 32)
		snprintf(uids[n_posted], sizeof(uids[0]), "%s",
		         json_get_str(io, "uid") ? json_get_str(io, "uid") : "");
	if (strcmp(rq->method, "POST") == 0 && io && n_posted < 32)
		snprintf(posted[n_posted++], sizeof(posted[0]), "%s %s/%s %s %s: %s",
		         json_get_str(cJSON_GetObjectItem(b, "metadata"), "namespace"),
		         json_get_str(io, "kind"), json_get_str(io, "name"),
		         json_get_str(b, "type"), json_get_str(b, "reason"),
		         json_get_str(b, "message"));
	pthread_mutex_unlock(&mu);
	resp->status = 201;
	kf_resp_add(resp, rq->body, rq->body_len);
	cJSON_Delete(b);
}

static struct kube_client *kc;
static struct kube_events *rec;
static struct ctl_events *x;

static void setup(void)
{
	struct kube_events_opts eo = {.component = "pillar-csi-controller"};
	struct err e = {0};

	kf_certs_make(&certs);
	srv = kf_start(&certs, false, handler, NULL);
	n_posted = 0;
	kc = kf_client(srv, &certs, "t");
	ck_assert_msg(kube_events_new(&rec, kc, &eo, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(ctl_events_new(rec, &x, &e), 0);
}

static void teardown(void)
{
	ctl_events_free(x);
	kube_events_free(rec);
	kube_client_free(kc);
	kf_stop(srv);
	kf_certs_remove(&certs);
}

static int flushed(void)
{
	ck_assert(kube_events_flush(rec, 5000));
	pthread_mutex_lock(&mu);
	int n = n_posted;
	pthread_mutex_unlock(&mu);
	return n;
}

START_TEST(test_agent_condition_changes)
{
	struct model_pa a = {0};
	model_str_set(&a.meta.name, "storage-1");
	model_str_set(&a.meta.uid, "u-1");
	model_cond_set(&a.status.conditions, RULES_COND_AGENT_CONNECTED, "True",
	               RULES_REASON_DIALED, "", 1);
	ctl_events_observe(x, &model_pa_kind, STORE_ADDED, &a);
	ck_assert_int_eq(flushed(), 0); /* baseline */
	model_cond_set(&a.status.conditions, RULES_COND_AGENT_CONNECTED, "False",
	               RULES_REASON_HEALTH_CHECK_FAILED, "agent at 10.0.0.1:9500: refused", 1);
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a);
	ck_assert_int_eq(flushed(), 1);
	ck_assert_str_eq(posted[0], "default PillarAgent/storage-1 Warning HealthCheckFailed: "
	                            "agent at 10.0.0.1:9500: refused");
	model_cond_set(&a.status.conditions, RULES_COND_AGENT_CONNECTED, "False",
	               RULES_REASON_HEALTH_CHECK_FAILED, "another message", 1);
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a);
	ck_assert_int_eq(flushed(), 1); /* same status and reason: no Event */
	model_cond_set(&a.status.conditions, RULES_COND_AGENT_CONNECTED, "True",
	               RULES_REASON_DIALED, "", 1);
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a);
	ck_assert_int_eq(flushed(), 2);
	ck_assert_str_eq(posted[1],
	                 "default PillarAgent/storage-1 Normal Dialed: AgentConnected is True");
	ctl_events_observe(x, &model_pa_kind, STORE_DELETED, &a);
	ctl_events_observe(x, &model_pa_kind, STORE_ADDED, &a); /* a new baseline */
	ck_assert_int_eq(flushed(), 2);
	model_clear(&model_pa_kind, &a);
}
END_TEST

START_TEST(test_volume_events_on_the_claim)
{
	struct model_pvst v = {0};
	model_str_set(&v.meta.name, "pvc-1");
	v.spec.has_claim_ref = true;
	model_str_set(&v.spec.claim_ref.ns, "apps");
	model_str_set(&v.spec.claim_ref.name, "data");
	model_str_set(&v.spec.claim_ref.uid, "c-1");
	ctl_events_observe(x, &model_pvst_kind, STORE_ADDED, &v);
	struct model_pv pv = {0};
	model_str_set(&pv.meta.name, "pvc-1");
	model_str_set(&pv.meta.uid, "pv-uid-1");
	ctl_events_observe(x, &model_pv_kind, STORE_ADDED, &pv); /* the loop watches PVs too */
	model_cond_set(&v.status.conditions, RULES_COND_EXPORT_RECONCILED, "False",
	               RULES_REASON_AGENT_UNAVAILABLE, "agent \"storage-1\" is not reachable", 1);
	ctl_events_observe(x, &model_pvst_kind, STORE_MODIFIED, &v);
	ck_assert_int_eq(flushed(), 3);
	ck_assert_str_eq(posted[0], "default PillarVolumeState/pvc-1 Warning AgentUnavailable: "
	                            "agent \"storage-1\" is not reachable");
	ck_assert_str_eq(posted[1], "apps PersistentVolumeClaim/data Warning AgentUnavailable: "
	                            "agent \"storage-1\" is not reachable");
	ck_assert_str_eq(posted[2], "default PersistentVolume/pvc-1 Warning AgentUnavailable: "
	                            "agent \"storage-1\" is not reachable");
	ck_assert_str_eq(uids[2], "pv-uid-1");
	v.status.has_partial_failure = true;
	model_str_set(&v.status.partial_failure.failed_at, "2026-12-03T11:00:00Z");
	model_str_set(&v.status.partial_failure.reason, "BackendCreateFailed");
	model_str_set(&v.status.partial_failure.message, "pool \"tank\" has 1 bytes available");
	ctl_events_observe(x, &model_pvst_kind, STORE_MODIFIED, &v);
	ctl_events_observe(x, &model_pvst_kind, STORE_MODIFIED, &v); /* the same failure */
	ck_assert_int_eq(flushed(), 6);
	ck_assert_str_eq(posted[4], "apps PersistentVolumeClaim/data Warning BackendCreateFailed: "
	                            "pool \"tank\" has 1 bytes available");
	ck_assert_str_eq(posted[5], "default PersistentVolume/pvc-1 Warning BackendCreateFailed: "
	                            "pool \"tank\" has 1 bytes available");
	ctl_events_observe(x, &model_pv_kind, STORE_DELETED, &pv); /* PV gone: the volume only */
	model_cond_set(&v.status.conditions, RULES_COND_EXPORT_RECONCILED, "False", "Other", "m",
	               1);
	ctl_events_observe(x, &model_pvst_kind, STORE_MODIFIED, &v);
	ck_assert_int_eq(flushed(), 8);
	model_clear(&model_pv_kind, &pv);
	model_clear(&model_pvst_kind, &v);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("controller_events");
	TCase *t = tcase_create("events");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_agent_condition_changes);
	tcase_add_test(t, test_volume_events_on_the_claim);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
