/* kube/events against an in-process HTTPS/HTTP/2 server (kube_fake.h) that keeps Events as
 * kube-apiserver does (create 201, strategic merge patch 200, 404 for a missing one): the Event's
 * shape, a repeated event patched with count and lastTimestamp instead of created again, the
 * aggregation of 10 similar events, the spam filter's burst of 25 per object and its refill, a
 * patch of an expired Event creating it again, and cluster-scoped objects in "default". */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cluster/events.h"
#include "kube_fake.h"
#include "testutil.h"

static struct kf_certs certs;
static struct kf_server *srv;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static cJSON *events; /* array of the stored Events */
static int rv = 200;

static void answer(struct kf_resp *resp, int status, const char *body)
{
	resp->status = status;
	kf_resp_add(resp, body, strlen(body));
}

static cJSON *find(const char *ns, const char *name)
{
	cJSON *x;
	cJSON_ArrayForEach(x, events)
	{
		cJSON *md = cJSON_GetObjectItem(x, "metadata");
		if (!strcmp(json_get_str(md, "name"), name) &&
		    !strcmp(json_get_str(md, "namespace"), ns))
			return x;
	}
	return NULL;
}

static void handler(void *arg, const struct kf_req *rq, struct kf_resp *resp)
{
	char ns[254] = "", name[300] = "";
	(void)arg;
	pthread_mutex_lock(&mu);
	cJSON *body = cJSON_Parse(rq->body ? rq->body : "");
	sscanf(rq->path, "/api/v1/namespaces/%253[^/]/events/%299s", ns, name);
	if (!strcmp(rq->method, "POST") && ns[0] && !name[0]) {
		char v[16];
		snprintf(v, sizeof(v), "%d", ++rv);
		cJSON_AddStringToObject(cJSON_GetObjectItem(body, "metadata"), "resourceVersion",
		                        v);
		cJSON_AddItemToArray(events, cJSON_Duplicate(body, 1));
		char *t = json_dump(body);
		answer(resp, 201, t);
		free(t);
	} else if (!strcmp(rq->method, "PATCH") && name[0]) {
		cJSON *x = find(ns, name), *f;
		if (!x) {
			answer(
			    resp, 404,
			    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
			    "\"Failure\",\"message\":\"events \\\"x\\\" not found\",\"reason\":"
			    "\"NotFound\",\"details\":{\"kind\":\"events\"},\"code\":404}");
		} else {
			cJSON_ArrayForEach(f, body)
			{
				cJSON_DeleteItemFromObject(x, f->string);
				cJSON_AddItemToObject(x, f->string, cJSON_Duplicate(f, 1));
			}
			char *t = json_dump(x);
			answer(resp, 200, t);
			free(t);
		}
	} else {
		answer(resp, 418, "unexpected");
	}
	cJSON_Delete(body);
	pthread_mutex_unlock(&mu);
}

static uint64_t mono = 5000000;
static int64_t wall = 1796248200000000LL; /* 2026-12-02T21:50:00Z */
static uint64_t c_mono(void *arg)
{
	(void)arg;
	return mono;
}
static int64_t c_wall(void *arg)
{
	(void)arg;
	return wall;
}

static struct kube_client *kc;
static struct kube_events *ev;

static void setup(void)
{
	struct kube_events_opts o = {
	    .component = "pillar-csi-controller", .now_us = c_mono, .wall_us = c_wall};
	struct err e = {0};

	kf_certs_make(&certs);
	srv = kf_start(&certs, false, handler, NULL);
	events = cJSON_CreateArray();
	kc = kf_client(srv, &certs, "t");
	ck_assert_msg(kube_events_new(&ev, kc, &o, &e) == 0, "%s", e.msg);
}

static void teardown(void)
{
	kube_events_free(ev);
	kube_client_free(kc);
	kf_stop(srv);
	kf_certs_remove(&certs);
	cJSON_Delete(events);
}

static const struct kube_event_ref PVST = {"pillar-csi.bhyoo.com/v1alpha1", "PillarVolumeState",
                                           NULL, "pvc-1", "uid-1"};
static const struct kube_event_ref PVC = {"v1", "PersistentVolumeClaim", "apps", "data", "uid-2"};

static int n_events(void)
{
	pthread_mutex_lock(&mu);
	int n = cJSON_GetArraySize(events);
	pthread_mutex_unlock(&mu);
	return n;
}

static cJSON *event_at(int i)
{
	return cJSON_GetArrayItem(events, i);
}

START_TEST(test_event_shape)
{
	kube_events_record(ev, &PVST, KUBE_EVENT_WARNING, "AgentUnavailable",
	                   "agent \"%s\" is not reachable", "storage-1");
	kube_events_record(ev, &PVC, KUBE_EVENT_NORMAL, "ExportReconciled", "ok");
	ck_assert(kube_events_flush(ev, 5000));
	ck_assert_int_eq(n_events(), 2);
	cJSON *x = event_at(0), *md = cJSON_GetObjectItem(x, "metadata");
	ck_assert_str_eq(json_get_str(md, "namespace"), "default"); /* cluster-scoped object */
	ck_assert_str_eq(json_get_str(md, "name"), "pvc-1.18ed8e38916f5000");
	cJSON *io = cJSON_GetObjectItem(x, "involvedObject");
	ck_assert_str_eq(json_get_str(io, "kind"), "PillarVolumeState");
	ck_assert_str_eq(json_get_str(io, "apiVersion"), "pillar-csi.bhyoo.com/v1alpha1");
	ck_assert_str_eq(json_get_str(io, "uid"), "uid-1");
	ck_assert_ptr_null(cJSON_GetObjectItem(io, "namespace"));
	ck_assert_str_eq(json_get_str(x, "reason"), "AgentUnavailable");
	ck_assert_str_eq(json_get_str(x, "message"), "agent \"storage-1\" is not reachable");
	ck_assert_str_eq(json_get_str(x, "type"), "Warning");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(x, "source"), "component"),
	                 "pillar-csi-controller");
	ck_assert_str_eq(json_get_str(x, "firstTimestamp"), "2026-12-02T21:50:00Z");
	ck_assert_str_eq(json_get_str(x, "lastTimestamp"), "2026-12-02T21:50:00Z");
	ck_assert_int_eq(cJSON_GetObjectItem(x, "count")->valueint, 1);
	x = event_at(1);
	md = cJSON_GetObjectItem(x, "metadata");
	ck_assert_str_eq(json_get_str(md, "namespace"), "apps");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(x, "involvedObject"), "namespace"),
	                 "apps");
	ck_assert_str_eq(json_get_str(x, "type"), "Normal");
}
END_TEST

START_TEST(test_repeat_patches_count)
{
	kube_events_record(ev, &PVC, KUBE_EVENT_WARNING, "ProvisioningFailed", "pool full");
	ck_assert(kube_events_flush(ev, 5000));
	mono += 30000000;
	wall += 30000000;
	kube_events_record(ev, &PVC, KUBE_EVENT_WARNING, "ProvisioningFailed", "pool full");
	kube_events_record(ev, &PVC, KUBE_EVENT_WARNING, "ProvisioningFailed", "pool full");
	ck_assert(kube_events_flush(ev, 5000));
	ck_assert_int_eq(n_events(), 1);
	cJSON *x = event_at(0);
	ck_assert_int_eq(cJSON_GetObjectItem(x, "count")->valueint, 3);
	ck_assert_str_eq(json_get_str(x, "firstTimestamp"), "2026-12-02T21:50:00Z");
	ck_assert_str_eq(json_get_str(x, "lastTimestamp"), "2026-12-02T21:50:30Z");
	size_t n = kf_requests(srv);
	const struct kf_req *rq = kf_request(srv, n - 1);
	ck_assert_str_eq(rq->method, "PATCH");
	ck_assert_str_eq(rq->ctype, "application/strategic-merge-patch+json");
	ck_assert_str_eq(
	    rq->body, "{\"count\":3,\"lastTimestamp\":\"2026-12-02T21:50:30Z\",\"message\":\"pool "
	              "full\"}");
	/* another message is another Event */
	kube_events_record(ev, &PVC, KUBE_EVENT_WARNING, "ProvisioningFailed", "other");
	ck_assert(kube_events_flush(ev, 5000));
	ck_assert_int_eq(n_events(), 2);
	unsigned long c, p, d;
	kube_events_counts(ev, &c, &p, &d);
	ck_assert_uint_eq(c, 2);
	ck_assert_uint_eq(p, 2);
	ck_assert_uint_eq(d, 0);
}
END_TEST

START_TEST(test_aggregation)
{
	for (int i = 0; i < 12; i++)
		kube_events_record(ev, &PVC, KUBE_EVENT_WARNING, "ProvisioningFailed", "attempt %d",
		                   i);
	ck_assert(kube_events_flush(ev, 10000));
	/* 9 distinct events, then the 10th and later are one combined event */
	ck_assert_int_eq(n_events(), 10);
	cJSON *x = event_at(9);
	ck_assert_str_eq(json_get_str(x, "message"), "(combined from similar events): attempt 11");
	ck_assert_int_eq(cJSON_GetObjectItem(x, "count")->valueint, 3);
	/* after the 10-minute window the messages count again from zero */
	mono += 601000000;
	kube_events_record(ev, &PVC, KUBE_EVENT_WARNING, "ProvisioningFailed", "fresh");
	ck_assert(kube_events_flush(ev, 5000));
	ck_assert_str_eq(json_get_str(event_at(10), "message"), "fresh");
}
END_TEST

START_TEST(test_spam_filter)
{
	char reason[32];
	for (int i = 0; i < 26; i++) {
		snprintf(reason, sizeof(reason), "Reason%d", i);
		kube_events_record(ev, &PVST, KUBE_EVENT_NORMAL, reason, "m");
	}
	kube_events_record(ev, &PVC, KUBE_EVENT_NORMAL, "Other", "another object: its own bucket");
	ck_assert(kube_events_flush(ev, 20000));
	ck_assert_int_eq(n_events(), 26);
	unsigned long c, p, d;
	kube_events_counts(ev, &c, &p, &d);
	ck_assert_uint_eq(d, 1);
	mono += 300000000; /* one token per 5 minutes */
	kube_events_record(ev, &PVST, KUBE_EVENT_NORMAL, "Later1", "m");
	kube_events_record(ev, &PVST, KUBE_EVENT_NORMAL, "Later2", "m");
	ck_assert(kube_events_flush(ev, 5000));
	ck_assert_int_eq(n_events(), 27);
	kube_events_counts(ev, &c, &p, &d);
	ck_assert_uint_eq(d, 2);
}
END_TEST

START_TEST(test_expired_event_created_again)
{
	kube_events_record(ev, &PVC, KUBE_EVENT_NORMAL, "Resized", "grown");
	ck_assert(kube_events_flush(ev, 5000));
	pthread_mutex_lock(&mu);
	cJSON_Delete(cJSON_DetachItemFromArray(events, 0)); /* the API server's TTL */
	pthread_mutex_unlock(&mu);
	kube_events_record(ev, &PVC, KUBE_EVENT_NORMAL, "Resized", "grown");
	ck_assert(kube_events_flush(ev, 5000));
	ck_assert_int_eq(n_events(), 1);
	ck_assert_int_eq(cJSON_GetObjectItem(event_at(0), "count")->valueint, 2);
	size_t n = kf_requests(srv);
	ck_assert_str_eq(kf_request(srv, n - 2)->method, "PATCH");
	ck_assert_str_eq(kf_request(srv, n - 1)->method, "POST");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kube_events");
	TCase *t = tcase_create("events");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_event_shape);
	tcase_add_test(t, test_repeat_patches_count);
	tcase_add_test(t, test_aggregation);
	tcase_add_test(t, test_spam_filter);
	tcase_add_test(t, test_expired_event_created_again);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
