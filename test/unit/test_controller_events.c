/* controller/events: condition changes of the pillar-csi objects as the Events the recorder
 * (cluster/events.h) writes to an in-process API server (kube_fake.h): the first version seen is the
 * baseline, a changed status or reason is one Event (Warning when not True and not a step of
 * progress), an unchanged one none, a message-only change none, a PillarVolumeState's Warning
 * also on its PVC and PV (with the PV's watched uid), a new partialFailure a Warning on all
 * three, a deleted object forgotten; a normal provisioning (the real CreateVolume, its versions
 * as the store's watch delivers them) records exactly its Normal Events; a storage-node outage
 * one Warning and its end one Normal on each claim of the agent's published volumes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/events.h"
#include "ctl_fixture.h"
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

/* The outage of many claims: writes held until the gate opens, and per claim "data-<i>" the
 * Warnings and Normals posted, and the Normals posted before their claim's Warning. */
enum { MANY = 10000 };
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_closed;
static int claim_warnings[MANY], claim_normals[MANY], normal_first;

static void count_claim(cJSON *b, cJSON *io)
{
	int i;
	const char *name = json_get_str(io, "name"), *type = json_get_str(b, "type");
	if (!name || !type || sscanf(name, "data-%d", &i) != 1 || i < 0 || i >= MANY)
		return;
	if (strcmp(type, "Warning") == 0)
		claim_warnings[i]++;
	else if (claim_normals[i]++ == 0 && claim_warnings[i] == 0)
		normal_first++;
}

static void handler(void *arg, const struct kf_req *rq, struct kf_resp *resp)
{
	(void)arg;
	cJSON *b = cJSON_Parse(rq->body ? rq->body : "");
	cJSON *io = cJSON_GetObjectItem(b, "involvedObject");
	pthread_mutex_lock(&mu);
	while (gate_closed)
		pthread_cond_wait(&gate_cv, &mu);
	if (strcmp(rq->method, "POST") == 0 && io)
		count_claim(b, io);
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
	gate_closed = false;
	normal_first = 0;
	memset(claim_warnings, 0, sizeof(claim_warnings));
	memset(claim_normals, 0, sizeof(claim_normals));
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

/* obj (of kind k) observed changed: then n Events were posted in all, the last one want (NULL:
 * not checked). */
static void expect_events(const struct model_kind *k, void *obj, int n, const char *want)
{
	ctl_events_observe(x, k, STORE_MODIFIED, obj);
	ck_assert_int_eq(flushed(), n);
	if (want)
		ck_assert_str_eq(posted[n - 1], want);
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
	expect_events(&model_pa_kind, &a, 1,
	              "default PillarAgent/storage-1 Warning HealthCheckFailed: "
	              "agent at 10.0.0.1:9500: refused");
	model_cond_set(&a.status.conditions, RULES_COND_AGENT_CONNECTED, "False",
	               RULES_REASON_HEALTH_CHECK_FAILED, "another message", 1);
	expect_events(&model_pa_kind, &a, 1, NULL); /* same status and reason: no Event */
	model_cond_set(&a.status.conditions, RULES_COND_AGENT_CONNECTED, "True",
	               RULES_REASON_DIALED, "", 1);
	expect_events(&model_pa_kind, &a, 2,
	              "default PillarAgent/storage-1 Normal Dialed: AgentConnected is True");
	ctl_events_observe(x, &model_pa_kind, STORE_DELETED, &a);
	ctl_events_observe(x, &model_pa_kind, STORE_ADDED, &a); /* a new baseline */
	ck_assert_int_eq(flushed(), 2);
	model_clear(&model_pa_kind, &a);
}
END_TEST

/* A PillarStore applied with its PillarAgent waits for the agent's first contact: start-up order,
 * a Normal Event.  An agent that fails tells it by its own Warning (HealthCheckFailed). */
START_TEST(test_store_waiting_for_its_agent_is_normal)
{
	struct model_pst st = {0};
	model_str_set(&st.meta.name, "files");
	model_str_set(&st.meta.uid, "u-2");
	ctl_events_observe(x, &model_pst_kind, STORE_ADDED, &st); /* created without a status */
	model_cond_set(&st.status.conditions, RULES_COND_AGENT_READY, "False",
	               RULES_REASON_AGENT_NOT_READY, "PillarAgent \"storage-1\" is not Ready yet",
	               1);
	expect_events(&model_pst_kind, &st, 1,
	              "default PillarStore/files Normal AgentNotReady: PillarAgent "
	              "\"storage-1\" is not Ready yet");
	model_cond_set(&st.status.conditions, RULES_COND_AGENT_READY, "True",
	               RULES_REASON_AGENT_READY, "", 1);
	expect_events(&model_pst_kind, &st, 2,
	              "default PillarStore/files Normal AgentReady: AgentReady is True");
	model_clear(&model_pst_kind, &st);
}
END_TEST

/* A PillarStorageClass applied with its PillarStore waits for the store to be Ready: start-up
 * order, a Normal Event.  A store that fails tells it by its own Warning. */
START_TEST(test_class_waiting_for_its_store_is_normal)
{
	struct model_psc psc = {0};
	model_str_set(&psc.meta.name, "plain");
	model_str_set(&psc.meta.uid, "u-3");
	ctl_events_observe(x, &model_psc_kind, STORE_ADDED, &psc);
	model_cond_set(&psc.status.conditions, RULES_COND_STORE_READY, "False",
	               RULES_REASON_POOL_NOT_READY, "PillarStore \"files\" is not Ready yet", 1);
	expect_events(&model_psc_kind, &psc, 1,
	              "default PillarStorageClass/plain Normal PoolNotReady: "
	              "PillarStore \"files\" is not Ready yet");
	model_cond_set(&psc.status.conditions, RULES_COND_STORE_READY, "False",
	               RULES_REASON_POOL_NOT_FOUND, "PillarStore \"files\" not found", 1);
	expect_events(&model_psc_kind, &psc, 2,
	              "default PillarStorageClass/plain Warning PoolNotFound: "
	              "PillarStore \"files\" not found");
	model_clear(&model_psc_kind, &psc);
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
	               RULES_REASON_RECONCILE_FAILED, "backing device is not available", 1);
	expect_events(&model_pvst_kind, &v, 3, NULL);
	ck_assert_str_eq(posted[0], "default PillarVolumeState/pvc-1 Warning ReconcileFailed: "
	                            "backing device is not available");
	ck_assert_str_eq(posted[1], "apps PersistentVolumeClaim/data Warning ReconcileFailed: "
	                            "backing device is not available");
	ck_assert_str_eq(posted[2], "default PersistentVolume/pvc-1 Warning ReconcileFailed: "
	                            "backing device is not available");
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
	expect_events(&model_pvst_kind, &v, 8, NULL);
	/* an unreachable agent: on the volume only (the outage Events tell the claim) */
	model_cond_set(&v.status.conditions, RULES_COND_EXPORT_RECONCILED, "False",
	               RULES_REASON_AGENT_UNAVAILABLE, "agent \"storage-1\" is not reachable", 1);
	expect_events(&model_pvst_kind, &v, 9,
	              "default PillarVolumeState/pvc-1 Warning AgentUnavailable: "
	              "agent \"storage-1\" is not reachable");
	model_clear(&model_pv_kind, &pv);
	model_clear(&model_pvst_kind, &v);
}
END_TEST

/* The real CreateVolume on the embedded store, each version of its PillarVolumeState as the
 * store's watch delivers it to the loop: the exact Events, none of them a Warning. */
START_TEST(test_normal_provisioning_has_no_warning)
{
	static const char *const params[] = {"pillar-csi.bhyoo.com/storage-class", "fast", NULL};
	struct grpc_status gs = {0};
	struct err e = {0};
	store_watch *w = NULL;

	fx_setup();
	fx_objects(false);
	ck_assert_int_eq(store_watch_open(fx_st, store_kind_lookup("PillarVolumeState"), 0, &w, &e),
	                 0);
	ck_assert_msg(fx_create("pvc-1", params, false, NULL, 0, &gs) == 0, "%s", gs.msg);
	enum store_event_type type;
	cJSON *obj = NULL;
	int versions = 0;
	while (store_watch_next(w, 200, &type, &obj, &e) == 1) {
		struct model_pvst v;
		if (versions == 0) { /* the API server's create, before the status (store.h) */
			cJSON *bare = cJSON_Duplicate(obj, true);
			cJSON_DeleteItemFromObject(bare, "status");
			ck_assert_msg(model_decode(&model_pvst_kind, bare, &v, &e) == 0, "%s",
			              e.msg);
			ctl_events_observe(x, &model_pvst_kind, type, &v);
			model_clear(&model_pvst_kind, &v);
			cJSON_Delete(bare);
			type = STORE_MODIFIED;
		}
		ck_assert_msg(model_decode(&model_pvst_kind, obj, &v, &e) == 0, "%s", e.msg);
		ctl_events_observe(x, &model_pvst_kind, type, &v);
		model_clear(&model_pvst_kind, &v);
		cJSON_Delete(obj);
		versions++;
	}
	store_watch_close(w);
	ck_assert_int_ge(versions, 2); /* Provisioning, Ready (no CreatePartial: csi_volume.c) */
	ck_assert_int_eq(flushed(), 5);
	static const char *const want[] = {
	    "default PillarVolumeState/pvc-1 Normal Provisioning: volume is being provisioned",
	    "default PillarVolumeState/pvc-1 Normal VolumeReady: Ready is True",
	    "default PillarVolumeState/pvc-1 Normal BackendCreated: BackendCreated is True",
	    "default PillarVolumeState/pvc-1 Normal ExportCreated: ExportCreated is True",
	    "default PillarVolumeState/pvc-1 Normal Reconciled: ExportReconciled is True",
	};
	for (int i = 0; i < 5; i++)
		ck_assert_str_eq(posted[i], want[i]);
	fx_teardown();
}
END_TEST

/* A volume of agent `agent` with a claim apps/<claim>, published when `published`, with
 * ctrlLossTmo tmo (< -1: unset). */
static void outage_volume(struct model_pvst *v, const char *name, const char *agent,
                          const char *claim, bool published, long long tmo)
{
	*v = (struct model_pvst){0};
	model_str_set(&v->meta.name, name);
	model_str_set(&v->spec.agent_ref, agent);
	v->spec.has_claim_ref = true;
	model_str_set(&v->spec.claim_ref.ns, "apps");
	model_str_set(&v->spec.claim_ref.name, claim);
	model_str_set(&v->spec.claim_ref.uid, claim);
	v->spec.has_resolved = v->spec.resolved.has_protocol = true;
	v->spec.resolved.protocol.has_nvmeof_tcp = true;
	if (tmo >= -1) {
		v->spec.resolved.protocol.nvmeof_tcp.has_ctrl_loss_tmo = true;
		v->spec.resolved.protocol.nvmeof_tcp.ctrl_loss_tmo = tmo;
	}
	if (published) {
		v->status.has_published = true;
		v->status.n_published = 1;
		v->status.published = calloc(1, sizeof(*v->status.published));
		model_str_set(&v->status.published[0].node_id, "worker-1");
	}
	ctl_events_observe(x, &model_pvst_kind, STORE_ADDED, v);
}

static void set_cond(struct model_pa *a, const char *type, const char *status, const char *reason,
                     const char *at)
{
	model_cond_set(&a->status.conditions, type, status, reason, "", 1);
	struct model_cond *c = (struct model_cond *)model_cond_get(&a->status.conditions, type);
	model_str_set(&c->last_transition_time, at);
}

/* PillarAgent "storage-1" (of node "stor-a" when node) connected and serving its exports since
 * 10:00, as the loop first sees it. */
static void outage_agent(struct model_pa *a, bool node)
{
	*a = (struct model_pa){0};
	model_str_set(&a->meta.name, "storage-1");
	if (node) {
		a->spec.has_node_ref = true;
		model_str_set(&a->spec.node_ref.name, "stor-a");
	}
	set_cond(a, RULES_COND_AGENT_CONNECTED, "True", RULES_REASON_DIALED,
	         "2026-12-03T10:00:00Z");
	set_cond(a, RULES_COND_EXPORTS_READY, "True", RULES_REASON_EXPORTS_SERVING,
	         "2026-12-03T10:00:00Z");
	ctl_events_observe(x, &model_pa_kind, STORE_ADDED, a);
}

/* The agent's connection lost (its health check failed) or dialed again at `at`, as the loop
 * sees the change. */
static void agent_connected(struct model_pa *a, bool up, const char *at)
{
	set_cond(a, RULES_COND_AGENT_CONNECTED, up ? "True" : "False",
	         up ? RULES_REASON_DIALED : RULES_REASON_HEALTH_CHECK_FAILED, at);
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, a);
}

/* n published volumes "pvc-<i>" of storage-1, i written with `digits` digits, each with its
 * claim apps/data-<i> and ctrlLossTmo tmo_even or tmo_odd by the parity of i. */
static struct model_pvst *outage_volumes(int n, int digits, long long tmo_even, long long tmo_odd)
{
	struct model_pvst *v = calloc((size_t)n, sizeof(*v));
	char name[32], claim[32];
	ck_assert_ptr_nonnull(v);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "pvc-%0*d", digits, i);
		snprintf(claim, sizeof(claim), "data-%0*d", digits, i);
		outage_volume(&v[i], name, "storage-1", claim, true, i % 2 ? tmo_odd : tmo_even);
	}
	return v;
}

static void outage_volumes_free(struct model_pvst *v, int n)
{
	for (int i = 0; i < n; i++)
		model_clear(&model_pvst_kind, &v[i]);
	free(v);
}

START_TEST(test_storage_node_outage_on_the_claims)
{
	struct model_pvst v[5];
	struct model_pa a;
	outage_agent(&a, true);
	outage_volume(&v[0], "pvc-a", "storage-1", "short", true, 30);
	outage_volume(&v[1], "pvc-b", "storage-1", "unset", true, -2);
	outage_volume(&v[2], "pvc-c", "storage-1", "idle", false, 30);   /* not published */
	outage_volume(&v[3], "pvc-d", "storage-2", "other", true, 30);   /* another agent */
	outage_volume(&v[4], "pvc-e", "storage-1", "forever", true, -1); /* never gives up */
	ck_assert_int_eq(flushed(), 0);

	set_cond(&a, RULES_COND_AGENT_CONNECTED, "False", RULES_REASON_HEALTH_CHECK_FAILED,
	         "2026-12-03T11:00:00Z");
	set_cond(&a, RULES_COND_EXPORTS_READY, "Unknown", RULES_REASON_AGENT_NOT_CONNECTED,
	         "2026-12-03T11:00:00Z");
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a);
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a); /* still down: nothing more */
	int n = flushed(); /* the agent's own condition Events, then one per published claim */
	ck_assert_int_eq(n, 2 + 3);
	static const char *const down[] = {
	    "apps PersistentVolumeClaim/short Warning StorageNodeUnreachable: storage node "
	    "\"stor-a\" (PillarAgent \"storage-1\") is unreachable since 2026-12-03T11:00:00Z; "
	    "workers' kernels give up on volume \"pvc-a\" at 2026-12-03T11:00:30Z (ctrlLossTmo 30 "
	    "s) unless its exports are restored by then",
	    "apps PersistentVolumeClaim/unset Warning StorageNodeUnreachable: storage node "
	    "\"stor-a\" (PillarAgent \"storage-1\") is unreachable since 2026-12-03T11:00:00Z; "
	    "workers' kernels give up on volume \"pvc-b\" at 2026-12-03T11:10:00Z (ctrlLossTmo 600 "
	    "s, the kernel default) unless its exports are restored by then",
	    "apps PersistentVolumeClaim/forever Warning StorageNodeUnreachable: storage node "
	    "\"stor-a\" (PillarAgent \"storage-1\") is unreachable since 2026-12-03T11:00:00Z; "
	    "workers' kernels retry volume \"pvc-e\" for ever (ctrlLossTmo -1)",
	};
	int found = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < 3; j++)
			found += !strcmp(posted[i], down[j]);
	ck_assert_int_eq(found, 3);
	for (int i = 0; i < n; i++)
		if (strstr(posted[i], "PersistentVolumeClaim/short"))
			ck_assert_str_eq(uids[i], "short");

	/* connected again, exports still being restored: not yet */
	set_cond(&a, RULES_COND_AGENT_CONNECTED, "True", RULES_REASON_DIALED,
	         "2026-12-03T11:05:00Z");
	set_cond(&a, RULES_COND_EXPORTS_READY, "False", RULES_REASON_EXPORT_RESTORE_PENDING,
	         "2026-12-03T11:05:00Z");
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a);
	int m = flushed();
	for (int i = n; i < m; i++)
		ck_assert_ptr_null(strstr(posted[i], "PersistentVolumeClaim"));
	set_cond(&a, RULES_COND_EXPORTS_READY, "True", RULES_REASON_EXPORTS_SERVING,
	         "2026-12-03T11:05:02Z");
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a);
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a);
	int k = flushed();
	found = 0;
	for (int i = m; i < k; i++)
		if (strstr(posted[i], "PersistentVolumeClaim")) {
			ck_assert_msg(strstr(posted[i],
			                     " Normal StorageNodeRestored: the exports of "
			                     "storage node \"stor-a\" (PillarAgent "
			                     "\"storage-1\") are restored; it was "
			                     "unreachable since 2026-12-03T11:00:00Z"),
			              "%s", posted[i]);
			found++;
		}
	ck_assert_int_eq(found, 3);
	for (int i = 0; i < 5; i++)
		model_clear(&model_pvst_kind, &v[i]);
	model_clear(&model_pa_kind, &a);
}
END_TEST

/* A storage-node outage of many published volumes: every claim gets its Warning, and its end
 * its Normal, through the Events budget; none is dropped. */
START_TEST(test_outage_of_many_claims)
{
	enum { N = 2000 };
	struct model_pa a;
	unsigned long created, patched, dropped;

	outage_agent(&a, false);
	struct model_pvst *v = outage_volumes(N, 4, 30, 30);
	agent_connected(&a, false, "2026-12-03T11:00:00Z");
	agent_connected(&a, true, "2026-12-03T11:05:00Z");
	ck_assert(kube_events_flush(rec, 120000));
	kube_events_counts(rec, &created, &patched, &dropped);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_uint_eq(created,
	                  2 + 2 * N); /* the agent's two condition Events, then the claims' */
	outage_volumes_free(v, N);
	model_clear(&model_pa_kind, &a);
}
END_TEST

#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void);
#define ALLOCATED() __sanitizer_get_current_allocated_bytes()
#else
#define ALLOCATED() ((size_t)0)
#endif

static void gate(bool closed)
{
	pthread_mutex_lock(&mu);
	gate_closed = closed;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&mu);
}

/* An outage of 10,000 published claims that begins and ends while the API server has not yet
 * answered the first write: the pass does not hold 10,000 formatted Events (their memory is
 * bounded), none is dropped for lack of queue room, every claim gets exactly one Warning and one
 * Normal, the Warning first. */
START_TEST(test_outage_of_ten_thousand_claims_at_the_budget)
{
	struct model_pa a;
	struct kube_events_stats st;

	outage_agent(&a, true);
	struct model_pvst *v = outage_volumes(MANY, 5, -2, 30);
	gate(true);
	size_t before = ALLOCATED();
	agent_connected(&a, false, "2026-12-03T11:00:00Z");
	size_t grown = ALLOCATED() - before;
	agent_connected(&a, true, "2026-12-03T11:05:00Z");
	kube_events_stats(rec, &st);
	ck_assert_uint_eq(st.dropped, 0);
	/* the recorder's queue holds a few formatted Events, not one per claim (~0.4 KB each) */
	ck_assert_uint_le(st.queue_bytes, 256u << 10);
	ck_assert_msg(grown <= (256u << 10), "the outage pass allocated %zu bytes", grown);
	gate(false);
	ck_assert(kube_events_flush(rec, 600000));
	kube_events_stats(rec, &st);
	ck_assert_uint_eq(st.dropped, 0);
	ck_assert_uint_eq(st.created, 2 + 2 * MANY); /* the agent's two condition Events too */
	pthread_mutex_lock(&mu);
	int one_each = 0;
	for (int i = 0; i < MANY; i++)
		one_each += claim_warnings[i] == 1 && claim_normals[i] == 1;
	ck_assert_int_eq(one_each, MANY);
	ck_assert_int_eq(normal_first, 0);
	pthread_mutex_unlock(&mu);
	outage_volumes_free(v, MANY);
	model_clear(&model_pa_kind, &a);
}
END_TEST

/* A controller that starts during an outage (a new leader) records no Warning for it, and still
 * tells its end. */
START_TEST(test_outage_seen_from_a_baseline)
{
	struct model_pvst v;
	struct model_pa a = {0};
	model_str_set(&a.meta.name, "storage-1");
	set_cond(&a, RULES_COND_AGENT_CONNECTED, "False", RULES_REASON_TLS_HANDSHAKE_FAILED,
	         "2026-12-03T11:00:00Z");
	ctl_events_observe(x, &model_pa_kind, STORE_ADDED, &a);
	outage_volume(&v, "pvc-a", "storage-1", "data", true, 30);
	ck_assert_int_eq(flushed(), 0);
	set_cond(&a, RULES_COND_AGENT_CONNECTED, "True", RULES_REASON_DIALED,
	         "2026-12-03T11:01:00Z");
	set_cond(&a, RULES_COND_EXPORTS_READY, "True", RULES_REASON_EXPORTS_SERVING,
	         "2026-12-03T11:01:00Z");
	ctl_events_observe(x, &model_pa_kind, STORE_MODIFIED, &a);
	int n = flushed(), found = 0;
	for (int i = 0; i < n; i++)
		found +=
		    strstr(posted[i], "apps PersistentVolumeClaim/data Normal StorageNodeRestored: "
		                      "the exports of the storage node of PillarAgent "
		                      "\"storage-1\" (no address) are restored") != NULL;
	ck_assert_int_eq(found, 1);
	model_clear(&model_pvst_kind, &v);
	model_clear(&model_pa_kind, &a);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("controller_events");
	TCase *t = tcase_create("events");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_agent_condition_changes);
	tcase_add_test(t, test_store_waiting_for_its_agent_is_normal);
	tcase_add_test(t, test_class_waiting_for_its_store_is_normal);
	tcase_add_test(t, test_volume_events_on_the_claim);
	tcase_add_test(t, test_normal_provisioning_has_no_warning);
	tcase_add_test(t, test_storage_node_outage_on_the_claims);
	tcase_add_test(t, test_outage_seen_from_a_baseline);
	tcase_add_test(t, test_outage_of_many_claims);
	tcase_add_test(t, test_outage_of_ten_thousand_claims_at_the_budget);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
