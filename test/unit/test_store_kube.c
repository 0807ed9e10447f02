/* The kube store's watches (store/kube_watch.c) against an in-process HTTPS/HTTP/2 server
 * (kube_fake.h) that is slow to answer a watch: neither a watch still opening nor one reopening
 * after the server ended its stream may hold store_watch_open, store_watch_next past its
 * timeout, or store_watch_close (a stopping controller waited up to the 30 s request timeout).
 * Its lists: one page at a time, each page's objects handed out as the page arrives, a page cut
 * short, and a continue token that expired (recorded answers). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/time.h"
#include "kube_fake.h"
#include "model/pillar.h"
#include "store/store.h"
#include "testutil.h"

#define WATCH_PATH                                                                    \
	"/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents?resourceVersion=7&watch=1&" \
	"allowWatchBookmarks=true&timeoutSeconds=300"

static struct kf_certs certs;
static struct kf_server *srv;
static store *st;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool first_ends; /* the first watch answer ends at once (as after timeoutSeconds) */
static int watches;     /* watch requests seen */

#define PVST_LIST "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarvolumestates"

/* A list of two PillarVolumeStates as the API server holds them; pvc-bad's capacityBytes is a
 * string (the CRD's schema did not hold it, or an older one did), which the codec refuses. */
static const char pvst_list[] =
    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeStateList\","
    "\"metadata\":{\"resourceVersion\":\"12\"},\"items\":["
    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\","
    "\"metadata\":{\"name\":\"pvc-bad\",\"resourceVersion\":\"10\"},"
    "\"spec\":{\"capacityBytes\":\"lots\"}},"
    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\","
    "\"metadata\":{\"name\":\"pvc-good\",\"resourceVersion\":\"11\"},"
    "\"spec\":{\"capacityBytes\":1048576}}]}";

/* How the list of PillarVolumeStates is answered: whole; its first item, then nothing more
 * while the stream stays open; or its first item and the end of the stream (cut short). */
static enum { PVST_WHOLE, PVST_HELD, PVST_CUT } pvst_answer;

#define PA_LIST "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents?limit=1"

/* The recorded pages of a list of four PillarAgents, one per page (03a-03d), each page's
 * continue token naming the next; with expire_next set the next continue is answered as after
 * a compaction (07l: 410 Expired with an inconsistent continue token), once. */
static const char *const pa_pages[] = {
    "03a-pa-list-limit1-page1.json", "03b-pa-list-limit1-page2.json",
    "03c-pa-list-limit1-page3.json", "03d-pa-list-limit1-page4.json"};
static bool expire_next;

/* How a list with resourceVersion=0 is answered: from the watch cache, whole (03i, ignoring
 * limit), or as a server without one pages it (03a's first page, then the continue pages). */
#define PA_LIST_ANY "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents?resourceVersion=0&limit=1"
static bool no_watch_cache;

static bool paged_list(const struct kf_req *rq, struct kf_resp *resp)
{
	if (!strcmp(rq->method, "GET") && !strcmp(rq->path, PA_LIST_ANY)) {
		kf_resp_transcript(resp,
		                   no_watch_cache ? pa_pages[0] : "03i-pa-list-rv0-limit1.json");
		return true;
	}
	if (strcmp(rq->method, "GET") || strncmp(rq->path, PA_LIST, strlen(PA_LIST)))
		return false;
	for (size_t i = 0; i < sizeof(pa_pages) / sizeof(pa_pages[0]); i++) {
		char *path = kf_transcript_request(pa_pages[i], "path");
		bool same = !strcmp(path, rq->path);
		free(path);
		if (!same)
			continue;
		pthread_mutex_lock(&mu);
		bool expire = i > 0 && expire_next;
		expire_next = expire_next && !expire;
		pthread_mutex_unlock(&mu);
		kf_resp_transcript(resp, expire ? "07l-pa-list-continue-after-compaction.json"
		                                : pa_pages[i]);
		return true;
	}
	resp->status = 404;
	return true;
}

static void handler(void *arg, const struct kf_req *rq, struct kf_resp *resp)
{
	(void)arg;
	if (paged_list(rq, resp))
		return;
	if (!strcmp(rq->method, "GET") && !strncmp(rq->path, PVST_LIST, strlen(PVST_LIST)) &&
	    !strstr(rq->path, "watch=")) {
		size_t cut = strstr(pvst_list, "},{") + 2 - pvst_list; /* after the first item */
		resp->status = 200;
		kf_resp_add(resp, pvst_list, pvst_answer == PVST_WHOLE ? strlen(pvst_list) : cut);
		resp->hold = pvst_answer == PVST_HELD;
		return;
	}
	if (strcmp(rq->method, "GET") || strcmp(rq->path, WATCH_PATH)) {
		resp->status = 404;
		return;
	}
	pthread_mutex_lock(&mu);
	int n = watches++;
	pthread_mutex_unlock(&mu);
	if (n == 0 && first_ends) {
		resp->status = 200; /* headers, then the end of the stream: no event */
		return;
	}
	resp->silent = true; /* no headers at all */
}

static int watch_requests(void)
{
	pthread_mutex_lock(&mu);
	int n = watches;
	pthread_mutex_unlock(&mu);
	return n;
}

static void open_paged(bool ends, int page)
{
	char path[400];
	struct store_open_opts o = {.qps = -1, .list_page = page};
	struct err e = {0};
	first_ends = ends;
	watches = 0;
	kf_certs_make(&certs);
	srv = kf_start(&certs, false, handler, NULL);
	snprintf(path, sizeof(path), "%s/kubeconfig", certs.dir);
	kf_kubeconfig(srv, &certs, "t0ken", path);
	o.kubeconfig = path;
	ck_assert_msg(store_kube_open(&o, &st, &e) == 0, "%s", e.msg);
}

static void open_store(bool ends)
{
	open_paged(ends, 0);
}

static void close_store(void)
{
	store_close(st);
	kf_stop(srv);
	kf_certs_remove(&certs);
}

/* store_watch_next(w, ms): its result, and the time it took into *took_ms. */
static int next_timed(store_watch *w, int ms, int64_t *took_ms)
{
	enum store_event_type t;
	cJSON *obj = NULL;
	struct err e = {0};
	int64_t t0 = time_mono_ms();
	int rc = store_watch_next(w, ms, &t, &obj, &e);
	*took_ms = time_mono_ms() - t0;
	cJSON_Delete(obj);
	return rc;
}

/* A call that waited for the silent server's headers would take the open timeout (30 s); one
 * that does not wait returns at once. The bound sits far between the two so that a loaded
 * machine's scheduling delay cannot decide the verdict. */
#define QUICK_MS 5000

START_TEST(test_watch_opening_does_not_block)
{
	store_watch *w = NULL;
	struct err e = {0};
	int64_t took;
	open_store(false);
	int64_t t0 = time_mono_ms();
	ck_assert_msg(store_watch_open(st, store_kind_lookup("pa"), 7, &w, &e) == 0, "%s", e.msg);
	took = time_mono_ms() - t0;
	ck_assert_msg(took < QUICK_MS, "store_watch_open waited %lld ms for headers",
	              (long long)took);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(next_timed(w, 200, &took), 0);
		ck_assert_msg(took < QUICK_MS, "store_watch_next(200 ms) took %lld ms",
		              (long long)took);
	}
	/* the request reaches the server in its own time (the open does not wait for it); once it
	 * has, it is still the one: the watch waits for its answer, it does not send another */
	for (int64_t t = time_mono_ms(); watch_requests() < 1 && time_mono_ms() - t < 30000;)
		usleep(20000);
	ck_assert_int_eq(next_timed(w, 200, &took), 0);
	ck_assert_int_eq(watch_requests(), 1);
	t0 = time_mono_ms();
	store_watch_close(w);
	took = time_mono_ms() - t0;
	ck_assert_msg(took < QUICK_MS, "store_watch_close took %lld ms", (long long)took);
	close_store();
}
END_TEST

struct waiter {
	store_watch *w;
	int rc;
	int64_t took_ms, done_ms; /* done_ms: time_mono_ms() when it returned */
};

static void *wait_main(void *arg)
{
	struct waiter *wt = arg;
	wt->rc = next_timed(wt->w, 20000, &wt->took_ms);
	wt->done_ms = time_mono_ms();
	return NULL;
}

START_TEST(test_watch_reopening_close_wakes_waiter)
{
	store_watch *w = NULL;
	struct err e = {0};
	struct waiter wt = {0};
	pthread_t th;
	open_store(true);
	ck_assert_msg(store_watch_open(st, store_kind_lookup("pa"), 7, &w, &e) == 0, "%s", e.msg);
	wt.w = w;
	ck_assert_int_eq(pthread_create(&th, NULL, wait_main, &wt), 0);
	/* the first stream ends; the watch reopens from version 7 and the server stays silent */
	for (int64_t t = time_mono_ms(); watch_requests() < 2 && time_mono_ms() - t < 30000;)
		usleep(20000);
	ck_assert_int_eq(watch_requests(), 2);
	usleep(200000);
	int64_t t0 = time_mono_ms();
	store_watch_close(w);
	int64_t took = time_mono_ms() - t0;
	pthread_join(th, NULL);
	/* waiting for the reopened watch's headers would take the open timeout (30 s), the
	 * waiter's own timeout is 20 s: QUICK_MS tells either apart from a prompt wake-up */
	ck_assert_msg(took < QUICK_MS, "store_watch_close waited %lld ms for a reopening watch",
	              (long long)took);
	ck_assert_int_eq(wt.rc, -ECANCELED);
	ck_assert_msg(wt.done_ms - t0 < QUICK_MS,
	              "the waiter returned %lld ms after the close (%lld ms after it began)",
	              (long long)(wt.done_ms - t0), (long long)wt.took_ms);
	close_store();
}
END_TEST

static void note_unreadable(void *arg, const struct store_kind *k, const char *ns, const char *name,
                            const char *error)
{
	(void)ns;
	char *seen = arg;
	size_t n = strlen(seen);
	snprintf(seen + n, 512 - n, "%s %s: %s\n", k->kind, name, error);
}

/* The API-server path of issue 24 #5: an object the model's codec cannot decode is left out of
 * the list and reported with its name and the codec's error; the others are listed. */
START_TEST(test_undecodable_object_reported)
{
	struct err e = {0};
	char seen[512] = "";
	void *items = NULL;
	size_t n = 0;
	open_store(false);
	struct store_unreadable catch = {note_unreadable, seen};
	store_unreadable_catch(&catch, NULL);
	int r = model_list(st, &model_pvst_kind, NULL, NULL, &items, &n, NULL, &e);
	store_unreadable_catch(NULL, NULL);
	ck_assert_msg(r == 0, "%s", e.msg);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(((struct model_pvst *)items)[0].meta.name, "pvc-good");
	model_list_free(&model_pvst_kind, items, n);
	ck_assert_msg(!strncmp(seen, "PillarVolumeState pvc-bad: ", 27) &&
	                  strstr(seen, "capacityBytes") && !strchr(strchr(seen, '\n') + 1, '\n'),
	              "%s", seen);
	close_store();
}
END_TEST

struct seen {
	char names[256];
	size_t requests[8]; /* requests served when each object was handed out */
	int n;
};

static int note_object(cJSON *obj, void *arg)
{
	struct seen *x = arg;
	ck_assert_str_eq(cJSON_GetObjectItem(obj, "kind")->valuestring, "PillarAgent");
	strncat(x->names, store_meta_str(obj, "name"), sizeof(x->names) - strlen(x->names) - 2);
	strcat(x->names, " ");
	if (x->n < 8)
		x->requests[x->n] = kf_requests(srv);
	x->n++;
	return 0;
}

static int count_object(cJSON *obj, void *arg)
{
	(void)obj;
	++*(int *)arg;
	return 0;
}

/* store_list_each on the kube store hands out each page's objects before it asks for the next
 * page (one page held at a time), in list order, with the list's version. */
START_TEST(test_list_each_streams_pages)
{
	struct seen x = {0};
	struct err e = {0};
	uint64_t rv = 0;
	open_paged(false, 1);
	int r = store_list_each(st, store_kind_lookup("PillarAgent"), NULL, NULL, note_object, &x,
	                        &rv, &e);
	ck_assert_msg(r == 0, "%s", e.msg);
	ck_assert_str_eq(x.names, "external-1 storage-1 storage-2 storage-3 ");
	ck_assert_uint_eq(rv, 249);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(x.requests[i], (size_t)i + 1);
	ck_assert_uint_eq(kf_requests(srv), 4);
	close_store();
}
END_TEST

/* An object of store_list_each_kept: without metadata.managedFields, with a text that parses to
 * it. */
static int kept_object(cJSON *obj, char *text, size_t len, void *arg)
{
	cJSON *again = NULL;
	ck_assert_ptr_null(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "managedFields"));
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(json_parse_strict(text, len, &again, NULL), 0);
	ck_assert(cJSON_Compare(obj, again, true));
	cJSON_Delete(again);
	return note_object(obj, arg);
}

static int has_managed_fields(cJSON *obj, void *arg)
{
	ck_assert_ptr_nonnull(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "managedFields"));
	++*(int *)arg;
	return 0;
}

/* store_list_each_kept (a cache's list) hands out every object with its text, the recorded
 * pages' metadata.managedFields cut before they are parsed; store_list_each keeps them. */
START_TEST(test_list_each_kept)
{
	struct seen x = {0};
	struct err e = {0};
	uint64_t rv = 0;
	int n = 0;
	open_paged(false, 1);
	const struct store_kind *k = store_kind_lookup("PillarAgent");
	int r = store_list_each_kept(st, k, false, kept_object, &x, &rv, &e);
	ck_assert_msg(r == 0, "%s", e.msg);
	ck_assert_str_eq(x.names, "external-1 storage-1 storage-2 storage-3 ");
	ck_assert_uint_eq(rv, 249);
	ck_assert_int_eq(store_list_each(st, k, NULL, NULL, has_managed_fields, &n, NULL, &e), 0);
	ck_assert_int_eq(n, 4);
	close_store();
}
END_TEST

/* store_list_each_any asks for resourceVersion=0, as client-go's reflector's first list does:
 * the watch cache answers it whole in one request, whatever the limit (03i).  A server without
 * a watch cache pages it: the later pages carry the continue token and no resourceVersion (as
 * client-go's pager sends them), and the list's version is the first page's. */
START_TEST(test_list_each_any_from_watch_cache)
{
	struct seen x = {0};
	struct err e = {0};
	uint64_t rv = 0;
	open_paged(false, 1);
	char *want = kf_transcript_request("03i-pa-list-rv0-limit1.json", "path");
	int r = store_list_each_any(st, store_kind_lookup("PillarAgent"), NULL, NULL, note_object,
	                            &x, &rv, &e);
	ck_assert_msg(r == 0, "%s", e.msg);
	ck_assert_str_eq(x.names, "external-1 storage-1 storage-2 storage-3 ");
	ck_assert_uint_eq(rv, 249);
	ck_assert_uint_eq(kf_requests(srv), 1);
	ck_assert_str_eq(kf_request(srv, 0)->path, want);
	free(want);
	no_watch_cache = true;
	memset(&x, 0, sizeof(x));
	r = store_list_each_any(st, store_kind_lookup("PillarAgent"), NULL, NULL, note_object, &x,
	                        &rv, &e);
	no_watch_cache = false;
	ck_assert_msg(r == 0, "%s", e.msg);
	ck_assert_str_eq(x.names, "external-1 storage-1 storage-2 storage-3 ");
	ck_assert_uint_eq(rv, 249);
	ck_assert_uint_eq(kf_requests(srv), 5);
	for (size_t i = 1; i < 4; i++) {
		want = kf_transcript_request(pa_pages[i], "path");
		ck_assert_str_eq(kf_request(srv, i + 1)->path, want);
		free(want);
	}
	/* a list that must see the latest writes stays a consistent read */
	ck_assert_int_eq(store_list_each(st, store_kind_lookup("PillarAgent"), NULL, NULL,
	                                 count_object, &(int){0}, NULL, &e),
	                 0);
	ck_assert_str_eq(kf_request(srv, 5)->path, PA_LIST);
	close_store();
}
END_TEST

/* A continue token that expired between pages: store_list_each cannot take back what it
 * handed out, so it says STORE_EXPIRED (list again); store_list starts the list over. */
START_TEST(test_list_continue_expired)
{
	struct seen x = {0};
	struct err e = {0};
	cJSON *items = NULL;
	uint64_t rv = 0;
	open_paged(false, 1);
	expire_next = true;
	int r = store_list_each(st, store_kind_lookup("PillarAgent"), NULL, NULL, note_object, &x,
	                        &rv, &e);
	ck_assert_int_eq(r, STORE_EXPIRED);
	ck_assert_str_eq(x.names, "external-1 ");
	ck_assert_msg(strstr(e.msg, "listing pillaragents: list again: The provided continue "
	                            "parameter is too old"),
	              "%s", e.msg);
	expire_next = true;
	memset(&e, 0, sizeof(e));
	r = store_list(st, store_kind_lookup("PillarAgent"), NULL, NULL, &items, &rv, &e);
	ck_assert_msg(r == 0, "%s", e.msg);
	ck_assert_int_eq(cJSON_GetArraySize(items), 4);
	ck_assert_uint_eq(rv, 249);
	cJSON_Delete(items);
	/* 2 for the expired list_each, 2 up to the expiry, 4 for the list taken again */
	ck_assert_uint_eq(kf_requests(srv), 8);
	close_store();
}
END_TEST

/* Stops the list at its first object, saying so in e. */
static int stop_at_first(cJSON *obj, void *arg)
{
	snprintf(((struct err *)arg)->msg, sizeof(((struct err *)arg)->msg), "stopped at %s",
	         store_meta_str(obj, "name"));
	return -ECANCELED;
}

/* A page's objects are handed out as the page arrives: the first object of a page whose rest
 * has not come (the stream stays open) is handed out, and the consumer's error ends the list
 * with its own message.  A page cut short is an error that says so, after the objects that
 * came whole. */
START_TEST(test_list_page_read_as_it_arrives)
{
	struct err e = {0}, mine = {0};
	int n = 0;
	open_store(false);
	pvst_answer = PVST_HELD;
	int r = store_list_each(st, store_kind_lookup("PillarVolumeState"), NULL, NULL,
	                        stop_at_first, &mine, NULL, &e);
	ck_assert_int_eq(r, -ECANCELED);
	ck_assert_str_eq(mine.msg, "stopped at pvc-bad");
	pvst_answer = PVST_CUT;
	r = store_list_each(st, store_kind_lookup("PillarVolumeState"), NULL, NULL, count_object,
	                    &n, NULL, &e);
	pvst_answer = PVST_WHOLE;
	ck_assert_int_eq(r, -EBADMSG);
	ck_assert_int_eq(n, 1);
	ck_assert_msg(strstr(e.msg, "GET " PVST_LIST "?limit=500: list answer: the list ends early "
	                            "at byte 281"),
	              "%s", e.msg);
	close_store();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("store kube");
	TCase *t = tcase_create("watch");
	tcase_set_timeout(t, 90);
	tcase_add_test(t, test_watch_opening_does_not_block);
	tcase_add_test(t, test_watch_reopening_close_wakes_waiter);
	tcase_add_test(t, test_undecodable_object_reported);
	tcase_add_test(t, test_list_each_streams_pages);
	tcase_add_test(t, test_list_each_any_from_watch_cache);
	tcase_add_test(t, test_list_continue_expired);
	tcase_add_test(t, test_list_page_read_as_it_arrives);
	tcase_add_test(t, test_list_each_kept);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
