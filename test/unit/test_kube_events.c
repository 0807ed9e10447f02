/* kube/events against an in-process HTTPS/HTTP/2 server (kube_fake.h) that keeps Events as
 * kube-apiserver does (create 201, strategic merge patch 200, 404 for a missing one): the Event's
 * shape, a repeated event patched with count and lastTimestamp instead of created again, the
 * aggregation of 10 similar events, the spam filter's burst of 25 per object and its refill, a
 * patch of an expired Event creating it again, and cluster-scoped objects in "default". */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "cluster/events.h"
#include "cluster/lru.h"
#include "kube_fake.h"
#include "testutil.h"

static struct kf_certs certs;
static struct kf_server *srv;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static cJSON *events; /* array of the stored Events */
static int rv = 200;
static bool keep = true; /* false: Events are answered but not stored */
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_closed; /* the server holds each request until it opens */
static size_t held;      /* requests that waited at the closed gate */

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
	for (bool counted = false; gate_closed; counted = true) {
		held += !counted;
		pthread_cond_broadcast(&gate_cv);
		pthread_cond_wait(&gate_cv, &mu);
	}
	cJSON *body = cJSON_Parse(rq->body ? rq->body : "");
	sscanf(rq->path, "/api/v1/namespaces/%253[^/]/events/%299s", ns, name);
	if (!strcmp(rq->method, "POST") && ns[0] && !name[0]) {
		char v[16];
		snprintf(v, sizeof(v), "%d", ++rv);
		cJSON_AddStringToObject(cJSON_GetObjectItem(body, "metadata"), "resourceVersion",
		                        v);
		if (keep)
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

	keep = true;
	gate_closed = false;
	held = 0;
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

/* The recorder's write counters (kube_events_counts): Events created, patched, dropped. */
static void expect_counts(struct kube_events *rec, unsigned long created, unsigned long patched,
                          unsigned long dropped)
{
	unsigned long c, p, d;
	kube_events_counts(rec, &c, &p, &d);
	ck_assert_msg(c == created && p == patched && d == dropped,
	              "created %lu patched %lu dropped %lu, want %lu %lu %lu", c, p, d, created,
	              patched, dropped);
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
	ck_assert(kube_events_flush(ev, 5000)); /* written one by one: two patches */
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
	expect_counts(ev, 2, 2, 0);
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
	expect_counts(ev, 26, 0, 1);
	mono += 300000000; /* one token per 5 minutes */
	kube_events_record(ev, &PVST, KUBE_EVENT_NORMAL, "Later1", "m");
	kube_events_record(ev, &PVST, KUBE_EVENT_NORMAL, "Later2", "m");
	ck_assert(kube_events_flush(ev, 5000));
	ck_assert_int_eq(n_events(), 27);
	expect_counts(ev, 27, 0, 2);
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

static void gate_close(void)
{
	pthread_mutex_lock(&mu);
	gate_closed = true;
	pthread_mutex_unlock(&mu);
}

/* Waits (generously) until n requests are held at the closed gate. */
static void gate_wait_held(size_t n)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60;
	pthread_mutex_lock(&mu);
	while (held < n && pthread_cond_timedwait(&gate_cv, &mu, &ts) == 0)
		;
	size_t got = held;
	pthread_mutex_unlock(&mu);
	ck_assert_uint_ge(got, n);
}

static void gate_open(void)
{
	pthread_mutex_lock(&mu);
	gate_closed = false;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&mu);
}

/* Identical events recorded while the first is being written wait as one: one create, then one
 * patch that carries all their count. */
START_TEST(test_identical_queued_events_fold)
{
	size_t n0 = kf_requests(srv);
	gate_close();
	kube_events_record(ev, &PVC, KUBE_EVENT_WARNING, "ProvisioningFailed", "pool full");
	gate_wait_held(1);
	for (int i = 0; i < 99; i++)
		kube_events_record(ev, &PVC, KUBE_EVENT_WARNING, "ProvisioningFailed", "pool full");
	gate_open();
	ck_assert(kube_events_flush(ev, 30000));
	ck_assert_int_eq(n_events(), 1);
	ck_assert_int_eq(cJSON_GetObjectItem(event_at(0), "count")->valueint, 100);
	ck_assert_uint_eq(kf_requests(srv) - n0, 2);
	ck_assert_str_eq(kf_request(srv, n0)->method, "POST");
	ck_assert_str_eq(kf_request(srv, n0 + 1)->method, "PATCH");
	expect_counts(ev, 1, 1, 0);
}
END_TEST

static int count_lines(const char *path, const char *what)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/* A storage-node outage's Warnings (one per claim) wait for the Events budget rather than being
 * dropped; a burst of Normal events beyond the queue's share for them is dropped, counted, and
 * logged twice (when it begins, and its number when the queue has drained), not once per event. */
START_TEST(test_burst_budget)
{
	const char *dir = tu_mkdtemp();
	char path[512], name[32];
	snprintf(path, sizeof(path), "%s/log", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	keep = false;
	log_set_fd(fd);
	gate_close();
	kube_events_record(ev, &PVC, KUBE_EVENT_NORMAL, "First", "held at the server");
	gate_wait_held(1);
	for (int i = 0; i < 8500; i++) {
		struct kube_event_ref r = {"v1", "PersistentVolumeClaim", "apps", name, "u"};
		snprintf(name, sizeof(name), "n-%d", i);
		kube_events_record(ev, &r, KUBE_EVENT_NORMAL, "Provisioning", "volume %d", i);
	}
	for (int i = 0; i < 1500; i++) {
		struct kube_event_ref r = {"v1", "PersistentVolumeClaim", "apps", name, "u"};
		snprintf(name, sizeof(name), "w-%d", i);
		kube_events_record(ev, &r, KUBE_EVENT_WARNING, "StorageNodeUnreachable",
		                   "storage node \"s\" is unreachable; volume \"pvc-%d\"", i);
	}
	expect_counts(ev, 0, 0, 500); /* the first is still held */
	gate_open();
	ck_assert(kube_events_flush(ev, 240000));
	log_set_fd(2);
	expect_counts(ev, 9501, 0, 500);
	ck_assert_int_eq(count_lines(path, "events dropped"), 2);
	ck_assert_int_eq(count_lines(path, "dropped=\"500\""), 1);
	close(fd);
	tu_rmtree(dir);
}
END_TEST

size_t __sanitizer_get_current_allocated_bytes(void);

static uint64_t same_hash(const char *key)
{
	(void)key;
	return 42;
}

/* 20,000 distinct Events through one recorder: its caches stay within their bounds and the
 * whole recorder (caches, queue, thread) within a few MiB. */
START_TEST(test_memory_bound)
{
	struct kube_events_opts o = {.component = "c", .now_us = c_mono, .wall_us = c_wall};
	struct kube_events *rec;
	struct kube_events_stats st;
	struct err e = {0};
	char name[32];

	keep = false;
#if defined(__SANITIZE_ADDRESS__)
	size_t before = __sanitizer_get_current_allocated_bytes(), peak = 0;
#endif
	ck_assert_msg(kube_events_new(&rec, kc, &o, &e) == 0, "%s", e.msg);
	for (int i = 0; i < 20000; i++) {
		struct kube_event_ref r = {"v1", "PersistentVolumeClaim", "apps", name, "uid"};
		snprintf(name, sizeof(name), "claim-%05d", i);
		kube_events_record(rec, &r, KUBE_EVENT_WARNING, "StorageNodeUnreachable",
		                   "storage node \"storage-1\" (PillarAgent \"storage-1\") is "
		                   "unreachable since 2026-12-02T21:50:00Z; volume \"pvc-%05d\"",
		                   i);
		if (i % 2000 == 1999) {
			ck_assert(kube_events_flush(rec, 120000));
#if defined(__SANITIZE_ADDRESS__)
			size_t now = __sanitizer_get_current_allocated_bytes();
			peak = now > peak ? now : peak;
#endif
		}
	}
	kube_events_stats(rec, &st);
	ck_assert_uint_eq(st.created, 20000);
	ck_assert_uint_eq(st.dropped, 0);
	ck_assert_uint_le(st.cache_entries, 3 * 4096);
	ck_assert_uint_le(st.cache_bytes, 4u << 20);
#if defined(__SANITIZE_ADDRESS__)
	ck_assert_msg(peak - before <= (6u << 20), "the recorder grew by %zu bytes", peak - before);
#endif
	kube_events_free(rec);
}
END_TEST

/* Every key in one bucket: lookups still tell the events apart by their whole key. */
START_TEST(test_hash_collisions)
{
	struct kube_events_opts o = {.component = "pillar-csi-controller",
	                             .now_us = c_mono,
	                             .wall_us = c_wall,
	                             .key_hash = same_hash};
	struct kube_events *rec;
	struct err e = {0};
	const char *reasons[] = {"ProvisioningFailed", "Resized"};
	char name[32];

	ck_assert_msg(kube_events_new(&rec, kc, &o, &e) == 0, "%s", e.msg);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 5; i++)
			for (int j = 0; j < 2; j++) {
				struct kube_event_ref r = {"v1", "PersistentVolumeClaim", "apps",
				                           name, "uid"};
				snprintf(name, sizeof(name), "claim-%d", i);
				kube_events_record(rec, &r, KUBE_EVENT_WARNING, reasons[j],
				                   "message %d", j);
			}
		ck_assert(kube_events_flush(rec, 30000));
	}
	ck_assert_int_eq(n_events(), 10);
	for (int i = 0; i < 10; i++) {
		cJSON *x = event_at(i);
		ck_assert_int_eq(cJSON_GetObjectItem(x, "count")->valueint, 2);
		snprintf(name, sizeof(name), "claim-%d", i / 2);
		ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(x, "involvedObject"), "name"),
		                 name);
		ck_assert_str_eq(json_get_str(x, "reason"), reasons[i % 2]);
	}
	expect_counts(rec, 10, 10, 0);
	kube_events_free(rec);
}
END_TEST

static size_t entry(const char *k)
{
	struct lru c = {0};
	size_t n = (lru_init(&c, 1, 1, 8, NULL), lru_entry_bytes(&c, k));
	lru_clear(&c);
	return n;
}

/* The cache evicts the least recently used entry at its count and at its byte bound, and keeps
 * colliding keys apart. */
START_TEST(test_lru)
{
	struct lru c;
	bool fresh;
	ck_assert_int_eq(lru_init(&c, 3, 1 << 20, 8, same_hash), 0);
	*(int *)lru_take(&c, "a", &fresh) = 1;
	ck_assert(fresh);
	*(int *)lru_take(&c, "b", &fresh) = 2;
	*(int *)lru_take(&c, "c", &fresh) = 3;
	ck_assert_int_eq(*(int *)lru_take(&c, "a", &fresh), 1); /* a is used: b is the oldest */
	ck_assert(!fresh);
	ck_assert_int_eq(*(int *)lru_take(&c, "d", &fresh), 0);
	ck_assert(fresh);
	ck_assert_ptr_null(lru_peek(&c, "b"));
	ck_assert_int_eq(*(int *)lru_peek(&c, "c"), 3);
	ck_assert_uint_eq(c.n, 3);
	lru_clear(&c);

	ck_assert_int_eq(lru_init(&c, 100, 2 * entry("k1"), 8, NULL), 0);
	lru_take(&c, "k1", &fresh);
	lru_take(&c, "k2", &fresh);
	lru_take(&c, "k3", &fresh);
	ck_assert_uint_eq(c.n, 2);
	ck_assert_uint_le(c.bytes, 2 * entry("k1"));
	ck_assert_ptr_null(lru_peek(&c, "k1"));
	ck_assert_ptr_nonnull(lru_peek(&c, "k3"));
	ck_assert_ptr_null(
	    lru_take(&c,
	             "a key longer than the whole cache may hold, which is two entries of "
	             "two-letter keys, so it "
	             "has to be long enough to exceed two of their fixed overheads as well",
	             &fresh));
	lru_clear(&c);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kube_events");
	TCase *t = tcase_create("events");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_event_shape);
	tcase_add_test(t, test_repeat_patches_count);
	tcase_add_test(t, test_aggregation);
	tcase_add_test(t, test_spam_filter);
	tcase_add_test(t, test_expired_event_created_again);
	tcase_add_test(t, test_identical_queued_events_fold);
	tcase_add_test(t, test_burst_budget);
	tcase_add_test(t, test_memory_bound);
	tcase_add_test(t, test_hash_collisions);
	suite_add_tcase(s, t);
	TCase *c = tcase_create("lru");
	tcase_add_test(c, test_lru);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
