/* kube/lease on injected clocks against an in-process HTTPS/HTTP/2 server (kube_fake.h) that
 * keeps one Lease as kube-apiserver does (create 201, get 404 when missing, PUT with a stale
 * resourceVersion 409 Conflict, a new resourceVersion per write): acquire, renew, a second
 * candidate waiting out the lease duration measured on its own clock, the renew deadline before
 * the lease duration, another holder seen, release on free, a server failing the renewals,
 * two candidates racing for an expired lease, and the checks of the durations. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cluster/lease.h"
#include "kube_fake.h"
#include "testutil.h"

#define NS   "kube-system"
#define PATH "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases"
#define OBJ  PATH "/" KUBE_LEASE_NAME

static struct kf_certs certs;
static struct kf_server *srv;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static cJSON *stored; /* the Lease, NULL when none */
static int rv = 100;
static int fail_writes;             /* > 0: answer the next writes 500 */
static const char *steal_after_get; /* this client's next GET is followed by another's write */
static int kf_last_status;          /* of the last answer */

static void answer(struct kf_resp *resp, int status, const char *body)
{
	resp->status = status;
	kf_resp_add(resp, body, strlen(body));
}

static void answer_obj(struct kf_resp *resp, int status, const cJSON *o)
{
	char *t = json_dump(o);
	answer(resp, status, t);
	free(t);
}

static void stamp(cJSON *o)
{
	char v[16];
	cJSON *md = cJSON_GetObjectItem(o, "metadata");
	snprintf(v, sizeof(v), "%d", ++rv);
	cJSON_DeleteItemFromObject(md, "resourceVersion");
	cJSON_AddStringToObject(md, "resourceVersion", v);
}

static void handler(void *arg, const struct kf_req *rq, struct kf_resp *resp)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	cJSON *body = rq->body_len ? cJSON_Parse(rq->body) : NULL;
	if (strcmp(rq->method, "GET") == 0 && strcmp(rq->path, OBJ) == 0) {
		if (!stored) {
			answer(
			    resp, 404,
			    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
			    "\"Failure\",\"message\":\"leases.coordination.k8s.io "
			    "\\\"pillar-csi-controller\\\" not found\",\"reason\":\"NotFound\","
			    "\"details\":{\"name\":\"pillar-csi-controller\",\"group\":"
			    "\"coordination.k8s.io\",\"kind\":\"leases\"},\"code\":404}");
		} else {
			answer_obj(resp, 200, stored);
		}
		if (stored && steal_after_get && strcmp(rq->auth, steal_after_get) == 0) {
			cJSON *sp = cJSON_GetObjectItem(stored, "spec");
			cJSON_ReplaceItemInObject(sp, "holderIdentity",
			                          cJSON_CreateString("ctl-c_3"));
			stamp(stored);
			steal_after_get = NULL;
		}
	} else if (fail_writes > 0 && strcmp(rq->method, "GET")) {
		fail_writes--;
		answer(resp, 500,
		       "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
		       "\"Failure\",\"message\":\"etcdserver: request timed out\",\"reason\":"
		       "\"InternalError\",\"code\":500}");
	} else if (strcmp(rq->method, "POST") == 0 && strcmp(rq->path, PATH) == 0 && !stored) {
		stored = cJSON_Duplicate(body, 1);
		cJSON_AddStringToObject(cJSON_GetObjectItem(stored, "metadata"), "uid", "u-1");
		stamp(stored);
		answer_obj(resp, 201, stored);
	} else if (strcmp(rq->method, "PUT") == 0 && strcmp(rq->path, OBJ) == 0 && stored) {
		const char *want =
		    json_get_str(cJSON_GetObjectItem(stored, "metadata"), "resourceVersion");
		const char *got =
		    json_get_str(cJSON_GetObjectItem(body, "metadata"), "resourceVersion");
		if (!got || strcmp(got, want)) {
			answer(
			    resp, 409,
			    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
			    "\"Failure\",\"message\":\"Operation cannot be fulfilled on "
			    "leases.coordination.k8s.io \\\"pillar-csi-controller\\\": the object "
			    "has been modified; please apply your changes to the latest version "
			    "and "
			    "try again\",\"reason\":\"Conflict\",\"details\":{\"name\":"
			    "\"pillar-csi-controller\",\"group\":\"coordination.k8s.io\",\"kind\":"
			    "\"leases\"},\"code\":409}");
		} else {
			cJSON_Delete(stored);
			stored = cJSON_Duplicate(body, 1);
			stamp(stored);
			answer_obj(resp, 200, stored);
		}
	} else {
		answer(resp, 418, "unexpected");
	}
	kf_last_status = resp->status;
	cJSON_Delete(body);
	pthread_mutex_unlock(&mu);
}

/* One candidate: its own clocks and callback counters. */
struct cand {
	uint64_t mono;
	int64_t wall;
	int started, stopped;
	struct kube_client *kc;
	struct kube_lease *l;
};

static uint64_t c_mono(void *arg)
{
	return ((struct cand *)arg)->mono;
}
static int64_t c_wall(void *arg)
{
	return ((struct cand *)arg)->wall;
}
static void c_started(void *arg)
{
	((struct cand *)arg)->started++;
}
static void c_stopped(void *arg)
{
	((struct cand *)arg)->stopped++;
}

static void advance(struct cand *c, int64_t ms)
{
	c->mono += (uint64_t)ms * 1000;
	c->wall += ms * 1000;
}

static void cand_init(struct cand *c, const char *id, uint64_t mono)
{
	struct kube_lease_opts o = {.ns = NS, .name = KUBE_LEASE_NAME, .identity = id};
	struct err e = {0};

	memset(c, 0, sizeof(*c));
	c->mono = mono;
	c->wall = 1796248200000000LL + (int64_t)mono; /* 2026-12-02T21:50:00Z */
	c->kc = kf_client(srv, &certs, id);
	o.started = c_started;
	o.stopped = c_stopped;
	o.arg = c;
	o.now_us = c_mono;
	o.wall_us = c_wall;
	o.clock_arg = c;
	ck_assert_msg(kube_lease_new(&c->l, c->kc, &o, &e) == 0, "%s", e.msg);
}

static void cand_fini(struct cand *c)
{
	kube_lease_free(c->l);
	kube_client_free(c->kc);
}

static int tick(struct cand *c)
{
	struct err e = {0};
	return kube_lease_tick(c->l, &e);
}

/* A field of the stored Lease's spec. */
static const char *spec_str(const char *key)
{
	return json_get_str(cJSON_GetObjectItem(stored, "spec"), key);
}
static int64_t spec_int(const char *key)
{
	int64_t v = -1;
	json_get_int64(cJSON_GetObjectItem(stored, "spec"), key, &v);
	return v;
}

static void setup(void)
{
	kf_certs_make(&certs);
	srv = kf_start(&certs, false, handler, NULL);
	stored = NULL;
	fail_writes = 0;
	steal_after_get = NULL;
}

static void teardown(void)
{
	kf_stop(srv);
	kf_certs_remove(&certs);
	cJSON_Delete(stored);
	stored = NULL;
}

START_TEST(test_acquire_and_renew)
{
	struct cand a;
	cand_init(&a, "ctl-a_1", 1000000);
	ck_assert(!kube_lease_held(a.l));
	ck_assert_int_eq(tick(&a), 1);
	ck_assert_int_eq(a.started, 1);
	ck_assert(kube_lease_held(a.l));
	const struct kf_req *rq = kf_request(srv, 1);
	ck_assert_str_eq(rq->method, "POST");
	ck_assert_str_eq(rq->path, PATH);
	ck_assert_str_eq(spec_str("holderIdentity"), "ctl-a_1");
	ck_assert_int_eq(spec_int("leaseDurationSeconds"), 15);
	ck_assert_int_eq(spec_int("leaseTransitions"), 0);
	ck_assert_str_eq(spec_str("acquireTime"), "2026-12-02T21:50:01.000000Z");
	ck_assert_str_eq(spec_str("renewTime"), "2026-12-02T21:50:01.000000Z");
	advance(&a, 2000);
	a.wall += 123456;
	ck_assert_int_eq(tick(&a), 1);
	rq = kf_request(srv, 3);
	ck_assert_str_eq(rq->method, "PUT");
	ck_assert_ptr_nonnull(strstr(rq->body, "\"resourceVersion\":\"101\""));
	ck_assert_str_eq(spec_str("acquireTime"), "2026-12-02T21:50:01.000000Z");
	ck_assert_str_eq(spec_str("renewTime"), "2026-12-02T21:50:03.123456Z");
	ck_assert_int_eq(spec_int("leaseTransitions"), 0);
	ck_assert_int_eq(a.started, 1);
	ck_assert_int_eq(a.stopped, 0);
	cand_fini(&a);
	/* free released it: empty holder, duration 1, both times now */
	ck_assert_int_eq(a.stopped, 1);
	ck_assert_str_eq(spec_str("holderIdentity"), "");
	ck_assert_int_eq(spec_int("leaseDurationSeconds"), 1);
	ck_assert_str_eq(spec_str("acquireTime"), spec_str("renewTime"));
	ck_assert_int_eq(spec_int("leaseTransitions"), 0);
}
END_TEST

/* A stalled leader (no more ticks: SIGSTOP) stops holding at its renew deadline, before the
 * other candidate may take the lease at the lease duration after it first saw that record. */
START_TEST(test_takeover_after_lease_duration)
{
	struct cand a, b;
	cand_init(&a, "ctl-a_1", 1000000);
	cand_init(&b, "ctl-b_2", 50000000); /* another machine: another clock */
	ck_assert_int_eq(tick(&a), 1);
	ck_assert_int_eq(tick(&b), 0); /* b sees a's record now */
	advance(&a, 9999);
	ck_assert(kube_lease_held(a.l));
	advance(&a, 1);
	ck_assert(!kube_lease_held(a.l)); /* renew deadline: a stops acting */
	advance(&b, 14999);
	ck_assert_int_eq(tick(&b), 0);
	ck_assert_int_eq(b.started, 0);
	advance(&b, 1);
	ck_assert_int_eq(tick(&b), 1);
	ck_assert_int_eq(b.started, 1);
	ck_assert_str_eq(spec_str("holderIdentity"), "ctl-b_2");
	ck_assert_int_eq(spec_int("leaseTransitions"), 1);
	ck_assert_str_eq(spec_str("acquireTime"), spec_str("renewTime"));
	/* a resumes (SIGCONT): its attempt sees b and it ends leading without writing */
	size_t before = kf_requests(srv);
	ck_assert_int_eq(tick(&a), 0);
	ck_assert_int_eq(a.stopped, 1);
	ck_assert_uint_eq(kf_requests(srv), before + 1); /* one GET, no PUT */
	ck_assert_str_eq(spec_str("holderIdentity"), "ctl-b_2");
	cand_fini(&a); /* not leading: no release */
	ck_assert_str_eq(spec_str("holderIdentity"), "ctl-b_2");
	ck_assert_int_eq(a.stopped, 1);
	cand_fini(&b);
}
END_TEST

/* A record that keeps changing (the leader renews) is never taken over. */
START_TEST(test_renewing_leader_keeps_it)
{
	struct cand a, b;
	cand_init(&a, "ctl-a_1", 1000000);
	cand_init(&b, "ctl-b_2", 7000000);
	ck_assert_int_eq(tick(&a), 1);
	for (int i = 0; i < 20; i++) {
		advance(&a, 2000);
		advance(&b, 2000);
		ck_assert_int_eq(tick(&a), 1);
		ck_assert_int_eq(tick(&b), 0);
	}
	ck_assert_int_eq(b.started, 0);
	ck_assert_str_eq(spec_str("holderIdentity"), "ctl-a_1");
	cand_fini(&b);
	cand_fini(&a);
}
END_TEST

START_TEST(test_release_hands_over_at_once)
{
	struct cand a, b;
	cand_init(&a, "ctl-a_1", 1000000);
	cand_init(&b, "ctl-b_2", 7000000);
	ck_assert_int_eq(tick(&a), 1);
	ck_assert_int_eq(tick(&b), 0);
	cand_fini(&a);
	advance(&b, 2000);
	ck_assert_int_eq(tick(&b), 1); /* empty holder: no waiting for the lease duration */
	ck_assert_int_eq(spec_int("leaseTransitions"), 1);
	ck_assert_int_eq(spec_int("leaseDurationSeconds"), 15);
	cand_fini(&b);
}
END_TEST

/* Failing renewals: still leading until the renew deadline, then stopped() once. */
START_TEST(test_renew_deadline)
{
	struct cand a;
	cand_init(&a, "ctl-a_1", 1000000);
	ck_assert_int_eq(tick(&a), 1);
	fail_writes = 100;
	for (int i = 1; i <= 4; i++) {
		advance(&a, 2000);
		ck_assert_int_eq(tick(&a), 1);
		ck_assert(kube_lease_held(a.l));
	}
	advance(&a, 2000); /* 10 s after the last success */
	ck_assert_int_eq(tick(&a), 0);
	ck_assert_int_eq(a.stopped, 1);
	ck_assert(!kube_lease_held(a.l));
	fail_writes = 0;
	advance(&a, 2000);
	ck_assert_int_eq(tick(&a), 1); /* its own record: renewed, a new term */
	ck_assert_int_eq(a.started, 2);
	cand_fini(&a);
}
END_TEST

/* Two candidates find the same expired record: c writes between b's read and b's write, so b's
 * PUT carries a stale resourceVersion and loses on Conflict. */
START_TEST(test_race_one_winner)
{
	struct cand a, b;
	cand_init(&a, "ctl-a_1", 1000000);
	cand_init(&b, "ctl-b_2", 2000000);
	ck_assert_int_eq(tick(&a), 1);
	ck_assert_int_eq(tick(&b), 0);
	advance(&b, 15000);
	steal_after_get = "Bearer ctl-b_2";
	size_t before = kf_requests(srv);
	ck_assert_int_eq(tick(&b), 0);
	ck_assert_uint_eq(kf_requests(srv), before + 2);
	ck_assert_int_eq(kf_last_status, 409);
	ck_assert_int_eq(b.started, 0);
	ck_assert(!kube_lease_held(b.l));
	ck_assert_str_eq(spec_str("holderIdentity"), "ctl-c_3");
	cand_fini(&a);
	cand_fini(&b);
}
END_TEST

START_TEST(test_options_checked)
{
	struct kube_lease *l = NULL;
	struct err e = {0};
	struct kube_lease_opts o = {.ns = NS, .name = KUBE_LEASE_NAME, .identity = "x"};
	o.lease_ms = 10000;
	o.renew_deadline_ms = 10000;
	ck_assert_int_eq(kube_lease_new(&l, NULL, &o, &e), -EINVAL);
	o.lease_ms = 15000;
	o.retry_ms = 9000; /* 1.2 × 9 s > 10 s */
	ck_assert_int_eq(kube_lease_new(&l, NULL, &o, &e), -EINVAL);
	o.retry_ms = 2000;
	o.ns = "";
	ck_assert_int_eq(kube_lease_new(&l, NULL, &o, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "POD_NAMESPACE"));
	o.ns = NS;
	ck_assert_int_eq(kube_lease_new(&l, NULL, &o, &e), 0);
	kube_lease_free(l);
	kube_lease_free(NULL);
}
END_TEST

START_TEST(test_identity_and_microtime)
{
	char id[300], t[40];
	setenv("POD_NAME", "pillar-csi-controller-7d9f8c-abcde", 1);
	ck_assert_int_eq(kube_lease_identity_make(id, sizeof(id)), 0);
	ck_assert_uint_eq(strlen(id), strlen("pillar-csi-controller-7d9f8c-abcde_") + 36);
	ck_assert_int_eq(id[strlen("pillar-csi-controller-7d9f8c-abcde_") + 14], '4');
	kube_microtime(1796248205123456LL, t, sizeof(t));
	ck_assert_str_eq(t, "2026-12-02T21:50:05.123456Z");
	kube_microtime(1796248200000007LL, t, sizeof(t));
	ck_assert_str_eq(t, "2026-12-02T21:50:00.000007Z");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kube_lease");
	TCase *t = tcase_create("lease");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_acquire_and_renew);
	tcase_add_test(t, test_takeover_after_lease_duration);
	tcase_add_test(t, test_renewing_leader_keeps_it);
	tcase_add_test(t, test_release_hands_over_at_once);
	tcase_add_test(t, test_renew_deadline);
	tcase_add_test(t, test_race_one_winner);
	tcase_add_test(t, test_options_checked);
	tcase_add_test(t, test_identity_and_microtime);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
