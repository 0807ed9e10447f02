/* src/kube against an in-process HTTPS/HTTP/2 server (kube_fake.h) that answers with a real
 * kube-apiserver's recorded responses: every operation's request line, headers and body, the
 * typed errors, list pagination, watch streams with bookmarks and a 410 ERROR event → relist,
 * resume from the last resourceVersion, token file rotation, client certificates, the rate
 * limiter on an injected clock, the User-Agent, and one connection for everything. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "cluster/events.h"
#include "kube/client.h"
#include "kube/watch.h"
#include "kube_fake.h"
#include "testutil.h"

static const struct kube_resource PA = {"pillar-csi.bhyoo.com", "v1alpha1", "pillaragents", false};
#define BASE "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents"

/* Routes: an exact "METHOD path" answered by transcripts in turn (the last one repeats). */
struct route {
	const char *method;
	char path[2048];
	const char *files[4];
	int hits;
};

static struct kf_certs certs;
static struct route routes[16];
static size_t n_routes;
static pthread_mutex_t routes_mu = PTHREAD_MUTEX_INITIALIZER;

static void handler(void *arg, const struct kf_req *rq, struct kf_resp *resp)
{
	(void)arg;
	pthread_mutex_lock(&routes_mu);
	for (size_t i = 0; i < n_routes; i++) {
		struct route *r = &routes[i];
		int k = r->hits++;
		if (strcmp(r->method, rq->method) || strcmp(r->path, rq->path)) {
			r->hits--;
			continue;
		}
		while (k > 0 && (k >= 4 || !r->files[k]))
			k--;
		if (strcmp(r->files[k], "HOLD") == 0) {
			resp->status = 200;
			resp->hold = true;
		} else if (strcmp(r->files[k], "429") == 0) {
			/* kube-apiserver's max-in-flight and priority-and-fairness filters */
			static const char txt[] = "Too many requests, please try again later.\n";
			resp->status = 429;
			resp->retry_after = "1";
			resp->ctype = "text/plain; charset=utf-8";
			kf_resp_add(resp, txt, strlen(txt));
		} else if (strcmp(r->files[k], "NUL") == 0) {
			/* what a server holding "storage-1\u0000x" would answer */
			static const char obj[] =
			    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\","
			    "\"kind\":\"PillarAgent\",\"metadata\":{\"name\":"
			    "\"storage-1\\u0000x\"}}";
			resp->status = 200;
			resp->ctype = "application/json";
			kf_resp_add(resp, obj, strlen(obj));
		} else {
			kf_resp_transcript(resp, r->files[k]);
		}
		pthread_mutex_unlock(&routes_mu);
		return;
	}
	pthread_mutex_unlock(&routes_mu);
	resp->status = 418;
	kf_resp_add(resp, rq->path, strlen(rq->path));
}

static void route(const char *method, const char *path, const char *f0, const char *f1)
{
	struct route *r = &routes[n_routes++];

	r->method = method;
	snprintf(r->path, sizeof(r->path), "%s", path);
	r->files[0] = f0;
	r->files[1] = f1;
	r->hits = 0;
}

/* A route whose path is the one the transcript recorded. */
static void route_recorded(const char *method, const char *file)
{
	char *p = kf_transcript_request(file, "path");
	route(method, p, file, NULL);
	free(p);
}

static struct kf_server *srv;

static void setup(void)
{
	kf_certs_make(&certs);
	n_routes = 0;
	srv = NULL;
}

static void teardown(void)
{
	kf_stop(srv);
	kf_certs_remove(&certs);
}

/* A kubeconfig for the fake server with the given user block. */
static struct kube_config *config(const char *user)
{
	char y[2048];
	struct kube_config *c = NULL;
	struct err e = {0};

	snprintf(y, sizeof(y),
	         "current-context: t\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\n"
	         "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:%d\n"
	         "    certificate-authority: %s\nusers:\n- name: u\n  user:\n%s",
	         kf_port(srv), certs.ca, user);
	ck_assert_msg(kube_config_from_yaml(&c, y, strlen(y), certs.dir, NULL, &e) == 0, "%s",
	              e.msg);
	return c;
}

static struct kube_client *client_with(const char *user, double qps,
                                       void (*tweak)(struct kube_client_opts *))
{
	struct kube_config *c = config(user);
	struct kube_client_opts o;
	struct kube_client *kc = NULL;
	struct err e = {0};

	kube_client_opts_init(&o);
	o.component = "pillar-csi-controller";
	o.qps = qps;
	if (tweak)
		tweak(&o);
	ck_assert_msg(kube_client_new(&kc, c, &o, &e) == 0, "%s", e.msg);
	kube_config_free(c);
	return kc;
}

static struct kube_client *client(void)
{
	return client_with("    token: tok-1\n", -1, NULL);
}

START_TEST(test_get_and_errors)
{
	struct kube_client *kc;
	struct kube_status st;
	cJSON *o = NULL;
	const struct kf_req *rq;

	srv = kf_start(&certs, false, handler, NULL);
	route_recorded("GET", "02c-pa-get-200.json");
	route_recorded("GET", "02d-pa-get-missing-404.json");
	kc = client();
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", &o, &st), 0);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(o, "metadata"), "name"), "storage-1");
	cJSON_Delete(o);
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "does-not-exist", &o, &st), -ENOENT);
	ck_assert_ptr_null(o);
	ck_assert_int_eq(st.kind, KUBE_NOT_FOUND);
	ck_assert_str_eq(st.name, "does-not-exist");
	/* a bad name never reaches the server */
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "../../secrets", &o, &st), -EINVAL);
	ck_assert_int_eq(st.code, 0);
	ck_assert_uint_eq(kf_requests(srv), 2);
	rq = kf_request(srv, 0);
	ck_assert_str_eq(rq->method, "GET");
	ck_assert_str_eq(rq->path, BASE "/storage-1");
	ck_assert_str_eq(rq->accept, "application/json");
	ck_assert_str_eq(rq->auth, "Bearer tok-1");
	/* client-go's shape: <component>/<version> (<os>/<arch>) <project>/<commit> */
	ck_assert_ptr_eq(strstr(rq->ua, "pillar-csi-controller/v"), rq->ua);
	ck_assert_ptr_nonnull(strstr(rq->ua, " (linux/amd64) pillar-csi/"));
	ck_assert_str_eq(rq->ua, kube_client_user_agent(kc));
	/* an object whose name holds a NUL byte is never read as "storage-1": the answer is
	 * taken, the NUL marked (json_parse_marked), and the model refuses that one object */
	route("GET", BASE "/odd", "NUL", NULL);
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "odd", &o, &st), 0);
	char path[64] = "";
	ck_assert(json_marked(o, path, sizeof(path)));
	ck_assert_str_eq(path, "metadata.name");
	ck_assert_str_ne(json_get_str(cJSON_GetObjectItem(o, "metadata"), "name"), "storage-1");
	cJSON_Delete(o);
	kube_client_free(kc);
}
END_TEST

/* The request body the client sent must equal the recorded one as JSON. */
static void assert_body(const struct kf_req *rq, const char *file)
{
	char *want = kf_transcript_request(file, "body");
	cJSON *a = NULL, *b = NULL;

	ck_assert_int_eq(json_parse_strict(rq->body, rq->body_len, &a, NULL), 0);
	ck_assert_int_eq(json_parse_strict(want, strlen(want), &b, NULL), 0);
	ck_assert_msg(cJSON_Compare(a, b, true), "body %s, recorded %s", rq->body, want);
	cJSON_Delete(a);
	cJSON_Delete(b);
	free(want);
}

static cJSON *recorded_body(const char *file)
{
	char *s = kf_transcript_request(file, "body");
	cJSON *o = NULL;

	ck_assert_int_eq(json_parse_strict(s, strlen(s), &o, NULL), 0);
	free(s);
	return o;
}

START_TEST(test_writes)
{
	struct kube_client *kc;
	struct kube_status st;
	cJSON *obj, *o = NULL;
	const char *files[] = {"02a-pa-create-201.json", "02b-pa-create-again-409.json"};

	srv = kf_start(&certs, false, handler, NULL);
	route("POST", BASE, files[0], files[1]);
	route_recorded("PUT", "05a-pa-update-stale-rv-409.json");
	route_recorded("PUT", "05d-pa-update-status-subresource.json");
	kc = client();

	obj = recorded_body(files[0]);
	ck_assert_int_eq(kube_create(kc, &PA, NULL, obj, &o, &st), 0);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(o, "metadata"), "name"), "storage-1");
	ck_assert_ptr_nonnull(json_get_str(cJSON_GetObjectItem(o, "metadata"), "uid"));
	cJSON_Delete(o);
	ck_assert_int_eq(kube_create(kc, &PA, NULL, obj, &o, &st), -EEXIST);
	ck_assert_int_eq(st.kind, KUBE_ALREADY_EXISTS);
	assert_body(kf_request(srv, 0), files[0]);
	ck_assert_str_eq(kf_request(srv, 0)->ctype, "application/json");
	cJSON_Delete(obj);

	obj = recorded_body("05a-pa-update-stale-rv-409.json");
	ck_assert_int_eq(kube_update(kc, &PA, NULL, obj, NULL, &st), -ESTALE);
	ck_assert_int_eq(st.kind, KUBE_CONFLICT);
	assert_body(kf_request(srv, 2), "05a-pa-update-stale-rv-409.json");
	cJSON_Delete(obj);

	obj = recorded_body("05d-pa-update-status-subresource.json");
	ck_assert_int_eq(kube_update_status(kc, &PA, NULL, obj, &o, &st), 0);
	ck_assert_str_eq(kf_request(srv, 3)->path, BASE "/storage-2/status");
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(o, "status"));
	cJSON_Delete(o);
	cJSON_Delete(obj);
	kube_client_free(kc);
}
END_TEST

START_TEST(test_patch_and_delete)
{
	struct kube_client *kc;
	struct kube_status st;
	cJSON *o = NULL;
	char *merge = kf_transcript_request("05g-pa-merge-patch.json", "body");
	char *jfail = kf_transcript_request("05j-pa-json-patch-test-fails-422.json", "body");
	char *jok = kf_transcript_request("05k-pa-json-patch-test-passes.json", "body");

	srv = kf_start(&certs, false, handler, NULL);
	route("PATCH", BASE "/storage-2", "05g-pa-merge-patch.json",
	      "05j-pa-json-patch-test-fails-422.json");
	routes[0].files[2] = "05k-pa-json-patch-test-passes.json";
	route("DELETE", BASE "/storage-3", "06a-pa-delete-wrong-uid-409.json",
	      "06c-pa-delete-right-preconditions-200.json");
	kc = client();

	ck_assert_int_eq(
	    kube_patch(kc, &PA, NULL, "storage-2", KUBE_PATCH_MERGE, false, merge, &o, &st), 0);
	cJSON_Delete(o);
	ck_assert_str_eq(kf_request(srv, 0)->ctype, "application/merge-patch+json");
	ck_assert_str_eq(kf_request(srv, 0)->body, merge);
	ck_assert_int_eq(
	    kube_patch(kc, &PA, NULL, "storage-2", KUBE_PATCH_JSON, false, jfail, &o, &st),
	    -EINVAL);
	ck_assert_int_eq(st.kind, KUBE_INVALID);
	ck_assert_str_eq(kf_request(srv, 1)->ctype, "application/json-patch+json");
	ck_assert_str_eq(kf_request(srv, 1)->body, jfail);
	ck_assert_int_eq(
	    kube_patch(kc, &PA, NULL, "storage-2", KUBE_PATCH_JSON, false, jok, &o, &st), 0);
	ck_assert_int_eq(cJSON_GetObjectItem(
	                     cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "nodeRef"), "port")
	                     ->valueint,
	                 9700);
	cJSON_Delete(o);

	ck_assert_int_eq(kube_delete(kc, &PA, NULL, "storage-3",
	                             "00000000-0000-0000-0000-000000000000", NULL, NULL, &st),
	                 -ESTALE);
	assert_body(kf_request(srv, 3), "06a-pa-delete-wrong-uid-409.json");
	ck_assert_int_eq(kube_delete(kc, &PA, NULL, "storage-3",
	                             "af72ea49-0854-448c-ad43-23cf208bbe4e", "248", &o, &st),
	                 0);
	assert_body(kf_request(srv, 4), "06c-pa-delete-right-preconditions-200.json");
	ck_assert_str_eq(json_get_str(o, "status"), "Success");
	cJSON_Delete(o);
	free(merge);
	free(jfail);
	free(jok);
	kube_client_free(kc);
}
END_TEST

static const char *const pages[] = {
    "03a-pa-list-limit1-page1.json", "03b-pa-list-limit1-page2.json",
    "03c-pa-list-limit1-page3.json", "03d-pa-list-limit1-page4.json"};

START_TEST(test_list_pages)
{
	struct kube_client *kc;
	struct kube_status st;
	struct kube_list_opts lo = {.limit = 1};
	char cont[512] = "";
	int n = 0;

	srv = kf_start(&certs, false, handler, NULL);
	for (int i = 0; i < 4; i++)
		route_recorded("GET", pages[i]);
	kc = client();
	do {
		cJSON *l = NULL;
		lo.continue_token = cont;
		ck_assert_int_eq(kube_list(kc, &PA, NULL, &lo, &l, &st), 0);
		ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(l, "items")), 1);
		ck_assert_str_eq(
		    json_get_str(cJSON_GetObjectItem(l, "metadata"), "resourceVersion"), "249");
		snprintf(cont, sizeof(cont), "%s",
		         json_get_str(cJSON_GetObjectItem(l, "metadata"), "continue"));
		cJSON_Delete(l);
		n++;
	} while (cont[0] && n < 10);
	ck_assert_int_eq(n, 4);
	for (int i = 0; i < 4; i++) /* the recorded paths, continue tokens included */
		ck_assert_int_eq(routes[i].hits, 1);
	kube_client_free(kc);
}
END_TEST

/* Reflector consumer: counts what it is told. */
struct sink {
	int replaces, items, events[5];
	char rv[32];
};

static int on_replace(void *arg, const cJSON *items, const char *rv)
{
	struct sink *s = arg;
	s->replaces++;
	s->items = cJSON_GetArraySize(items);
	snprintf(s->rv, sizeof(s->rv), "%s", rv);
	return 0;
}

static int on_event(void *arg, enum kube_event_type t, const cJSON *obj)
{
	struct sink *s = arg;
	(void)obj;
	s->events[t]++;
	return 0;
}

static const struct kube_reflector_ops sink_ops = {on_replace, on_event};

/* The server with the four recorded pages and a watch from their resourceVersion answered by
 * w0 then w1; a client and a reflector (pages of 1, 20 s watches) feeding s. */
static struct kube_reflector *reflector_on(const char *w0, const char *w1, int64_t idle_ms,
                                           struct kube_client **kc, struct sink *s)
{
	struct kube_reflector_opts ro = {.page = 1, .watch_secs = 20, .idle_ms = idle_ms};
	struct kube_reflector *rf = NULL;

	srv = kf_start(&certs, false, handler, NULL);
	for (int i = 0; i < 4; i++)
		route_recorded("GET", pages[i]);
	route("GET", BASE "?resourceVersion=249&watch=1&allowWatchBookmarks=true&timeoutSeconds=20",
	      w0, w1);
	*kc = client();
	ck_assert_int_eq(kube_reflector_new(&rf, *kc, &PA, NULL, &ro, &sink_ops, s, NULL), 0);
	return rf;
}

START_TEST(test_reflector_relist_and_resume)
{
	struct kube_client *kc;
	struct kube_status st;
	struct sink s = {0};
	/* from the list's rv: first a 410 ERROR event, then the recorded watch */
	struct kube_reflector *rf = reflector_on("07h-pa-watch-too-old-rv-410.json",
	                                         "07a-pa-watch-bookmarks.json", 0, &kc, &s);
	size_t n;

	route("GET", BASE "?resourceVersion=306&watch=1&allowWatchBookmarks=true&timeoutSeconds=20",
	      "07a-pa-watch-bookmarks.json", NULL);

	ck_assert_int_eq(kube_reflector_run_once(rf, &st), -ERANGE);
	ck_assert_int_eq(st.kind, KUBE_EXPIRED);
	ck_assert_str_eq(st.message, "too old resource version: 100 (228)");
	ck_assert_str_eq(kube_reflector_resource_version(rf), "");
	ck_assert_int_eq(s.replaces, 1);
	ck_assert_int_eq(s.items, 4);

	/* relist (4 pages again), then the watch: events and bookmarks, ended by the server */
	ck_assert_int_eq(kube_reflector_run_once(rf, &st), 0);
	ck_assert_uint_eq(kube_reflector_lists(rf), 2);
	ck_assert_int_eq(s.replaces, 2);
	ck_assert_int_eq(s.events[KUBE_ADDED], 1);
	ck_assert_int_eq(s.events[KUBE_MODIFIED], 2);
	ck_assert_int_eq(s.events[KUBE_DELETED], 1);
	ck_assert_int_eq(s.events[KUBE_BOOKMARK], 0); /* bookmarks only move the rv */
	ck_assert_str_eq(kube_reflector_resource_version(rf), "306");

	/* resume: no list, watch from the last rv */
	n = kf_requests(srv);
	ck_assert_int_eq(kube_reflector_run_once(rf, &st), 0);
	ck_assert_uint_eq(kf_requests(srv), n + 1);
	ck_assert_ptr_nonnull(strstr(kf_request(srv, n)->path, "resourceVersion=306&watch=1"));
	ck_assert_uint_eq(kube_reflector_lists(rf), 2);
	/* every page of both lists, every watch: one connection */
	ck_assert_uint_eq(kf_connections(srv), 1);
	ck_assert_uint_eq(kube_client_connections(kc), 1);
	kube_reflector_free(rf);
	kube_client_free(kc);
}
END_TEST

static void *stop_later(void *arg)
{
	usleep(100000);
	kube_reflector_stop(arg);
	return NULL;
}

START_TEST(test_reflector_stop)
{
	struct kube_client *kc;
	struct kube_status st;
	struct sink s = {0};
	struct kube_reflector *rf = reflector_on("HOLD", NULL, 0, &kc, &s);
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, stop_later, rf), 0);
	ck_assert_int_eq(kube_reflector_run_once(rf, &st), -ECANCELED); /* held until stopped */
	pthread_join(t, NULL);
	ck_assert_int_eq(kube_reflector_run_once(rf, &st), -ECANCELED);
	kube_reflector_free(rf);
	kube_client_free(kc);
}
END_TEST

START_TEST(test_reflector_silent_watch)
{
	struct kube_client *kc;
	struct kube_status st;
	struct sink s = {0};
	/* a watch that never sends nor ends (a dead connection) is given up after idle_ms */
	struct kube_reflector *rf = reflector_on("HOLD", NULL, 200, &kc, &s);

	ck_assert_int_eq(kube_reflector_run_once(rf, &st), -ETIMEDOUT);
	ck_assert_str_eq(kube_reflector_resource_version(rf), "249"); /* kept: resume, no relist */
	ck_assert_int_eq(kube_reflector_run_once(rf, &st), -ETIMEDOUT);
	ck_assert_uint_eq(kube_reflector_lists(rf), 1);
	ck_assert_uint_eq(kf_requests(srv), 6); /* 4 pages, 2 watches */
	kube_reflector_free(rf);
	kube_client_free(kc);
}
END_TEST

START_TEST(test_token_rotation)
{
	const char *d = tu_mkdtemp();
	char user[600], path[600], tmp[600];
	struct kube_client *kc;
	struct kube_status st;

	srv = kf_start(&certs, false, handler, NULL);
	route_recorded("GET", "02c-pa-get-200.json");
	tu_write(d, "token", "first-token\n");
	snprintf(user, sizeof(user), "    tokenFile: %s/token\n", d);
	kc = client_with(user, -1, NULL);
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_str_eq(kf_request(srv, 0)->auth, "Bearer first-token");
	/* the kubelet swaps the projected token atomically (a rename over it) */
	tu_write(d, "token.new", "second-token");
	snprintf(path, sizeof(path), "%s/token", d);
	snprintf(tmp, sizeof(tmp), "%s/token.new", d);
	ck_assert_int_eq(rename(tmp, path), 0);
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_str_eq(kf_request(srv, 1)->auth, "Bearer second-token");
	/* a token file that vanishes: the last token stays in use */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_str_eq(kf_request(srv, 2)->auth, "Bearer second-token");
	ck_assert_uint_eq(kf_connections(srv), 1);
	kube_client_free(kc);
	tu_rmtree(d);
}
END_TEST

START_TEST(test_client_certificate)
{
	char user[1200];
	struct kube_client *kc;
	struct kube_status st;

	srv = kf_start(&certs, true, handler, NULL); /* mTLS: a certificate is required */
	route_recorded("GET", "02c-pa-get-200.json");
	kc = client(); /* token only: the handshake is refused */
	ck_assert_int_lt(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_int_eq(st.code, 0);
	kube_client_free(kc);
	snprintf(user, sizeof(user), "    client-certificate: %s\n    client-key: client.key\n",
	         certs.client_cert);
	kc = client_with(user, -1, NULL);
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_str_eq(kf_request(srv, 0)->auth, ""); /* no token sent */
	kube_client_free(kc);
}
END_TEST

/* Injected limiter clock: time stands still, sleeps are recorded. */
static uint64_t fake_now;
static uint64_t slept[16];
static int n_slept;

static uint64_t clock_now(void *arg)
{
	(void)arg;
	return fake_now;
}

static void clock_sleep(void *arg, uint64_t us)
{
	(void)arg;
	if (n_slept < 16)
		slept[n_slept++] = us;
}

static void limited(struct kube_client_opts *o)
{
	o->burst = 2;
	o->now_us = clock_now;
	o->sleep_us = clock_sleep;
}

START_TEST(test_rate_limited_requests)
{
	struct kube_client *kc;
	struct kube_status st;

	srv = kf_start(&certs, false, handler, NULL);
	route_recorded("GET", "02c-pa-get-200.json");
	fake_now = 5000000;
	n_slept = 0;
	kc = client_with("    token: t\n", 4, limited);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_int_eq(n_slept, 2); /* the burst of 2 went at once */
	ck_assert_uint_eq(slept[0], 250000);
	ck_assert_uint_eq(slept[1], 500000);
	fake_now += 10000000;
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_int_eq(n_slept, 2);
	ck_assert_uint_eq(kf_requests(srv), 5);
	kube_client_free(kc);
}
END_TEST

/* Events take their tokens from a bucket of their own: a burst of Events (a CreateVolume records
 * ten) does not make the next object request wait. */
START_TEST(test_events_own_budget)
{
	static const struct kube_event_ref obj = {"pillar-csi.bhyoo.com/v1alpha1",
	                                          "PillarVolumeState", NULL, "pvc-1", "uid-1"};
	struct kube_events_opts eo = {.component = "pillar-csi-controller"};
	struct kube_events *ev = NULL;
	struct kube_status st;
	struct kube_client *kc;
	struct err e = {0};

	srv = kf_start(&certs, false, handler, NULL);
	route_recorded("GET", "02c-pa-get-200.json");
	route("POST", "/api/v1/namespaces/default/events", "02a-pa-create-201.json", NULL);
	fake_now = 5000000;
	n_slept = 0;
	kc = client_with("    token: t\n", 4, limited); /* 4 qps, burst 2 */
	ck_assert_msg(kube_events_new(&ev, kc, &eo, &e) == 0, "%s", e.msg);
	kube_events_record(ev, &obj, KUBE_EVENT_NORMAL, "Provisioning", "one");
	kube_events_record(ev, &obj, KUBE_EVENT_NORMAL, "BackendCreated", "two");
	kube_events_record(ev, &obj, KUBE_EVENT_NORMAL, "ExportCreated", "three");
	ck_assert(kube_events_flush(ev, 10000));
	ck_assert_uint_eq(kf_requests(srv), 3);
	ck_assert_int_eq(n_slept, 1); /* the third Event waited for its own bucket's token */
	ck_assert_uint_eq(slept[0], 250000);
	for (int i = 0; i < 2; i++) /* the objects' burst is untouched */
		ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_int_eq(n_slept, 1);
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", NULL, &st), 0);
	ck_assert_int_eq(n_slept, 2);
	ck_assert_uint_eq(slept[1], 250000);
	kube_events_free(ev);
	kube_client_free(kc);
}
END_TEST

START_TEST(test_retry_after)
{
	struct kube_client *kc;
	struct kube_status st;
	cJSON *o = NULL;

	srv = kf_start(&certs, false, handler, NULL);
	route("GET", BASE "/storage-1", "429", "02c-pa-get-200.json");
	fake_now = 0;
	n_slept = 0;
	kc = client_with("    token: t\n", -1, limited); /* limiter off, sleeps recorded */
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-1", &o, &st), 0);
	ck_assert_int_eq(n_slept, 1);
	ck_assert_uint_eq(slept[0], 1000000); /* Retry-After: 1 */
	ck_assert_uint_eq(kf_requests(srv), 2);
	cJSON_Delete(o);
	/* always 429: client-go's 10 retries, then the last answer's error */
	route("GET", BASE "/storage-9", "429", NULL);
	n_slept = 0;
	ck_assert_int_eq(kube_get(kc, &PA, NULL, "storage-9", &o, &st), -EBUSY);
	ck_assert_int_eq(st.kind, KUBE_TOO_MANY_REQUESTS);
	ck_assert_str_eq(st.message, "Too many requests, please try again later.");
	ck_assert_int_eq(n_slept, KUBE_RETRIES);
	ck_assert_uint_eq(kf_requests(srv), 2 + KUBE_RETRIES + 1);
	kube_client_free(kc);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kube_client");
	TCase *t = tcase_create("server");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_get_and_errors);
	tcase_add_test(t, test_writes);
	tcase_add_test(t, test_patch_and_delete);
	tcase_add_test(t, test_list_pages);
	tcase_add_test(t, test_reflector_relist_and_resume);
	tcase_add_test(t, test_reflector_stop);
	tcase_add_test(t, test_reflector_silent_watch);
	tcase_add_test(t, test_token_rotation);
	tcase_add_test(t, test_client_certificate);
	tcase_add_test(t, test_rate_limited_requests);
	tcase_add_test(t, test_events_own_budget);
	tcase_add_test(t, test_retry_after);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
