/* store/cache (store.h: store_cache_open): reads on a caching thread come from memory — a list
 * and a get of every object cost the backing store nothing after the first list —, changes made
 * elsewhere arrive through the watch, writes are visible at once, other threads read through,
 * and a get of an unknown name gets the backing store's NotFound. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "store/store.h"
#include "testutil.h"

/* A pass-through store that counts the reads reaching the store underneath.  Its lists wait
 * while lists_held (an API server slow to answer a large list) and fail while fail_lists. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool lists_held, fail_lists;
/* Its lists and watch events carry metadata.managedFields, as the API server's do. */
static bool add_managed;

static void with_managed(cJSON *o)
{
	cJSON *md = cJSON_GetObjectItem(o, "metadata");
	if (!add_managed || !md || cJSON_GetObjectItem(md, "managedFields"))
		return;
	cJSON *wrap = NULL;
	static const char text[] =
	    "{\"managedFields\":[{\"manager\":\"pillar-csi\",\"operation\":\"Update\","
	    "\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"fieldsType\":\"FieldsV1\","
	    "\"fieldsV1\":{\"f:spec\":{\"f:agentRef\":{}}}}]}";
	ck_assert_int_eq(json_parse_strict(text, strlen(text), &wrap, NULL), 0);
	cJSON *mf = cJSON_DetachItemFromObjectCaseSensitive(wrap, "managedFields");
	cJSON_Delete(wrap);
	cJSON_AddItemToObject(md, "managedFields", mf);
	/* and something after it: the cache puts it back in its place when it leaves it out */
	cJSON *labels = cJSON_DetachItemFromObjectCaseSensitive(md, "labels");
	if (labels)
		cJSON_AddItemToObject(md, "labels", labels);
}

static void hold_lists(bool held)
{
	pthread_mutex_lock(&gate_mu);
	lists_held = held;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

struct counting {
	store base;
	store *b;
	int gets, lists, watches;
	int lists_any; /* of them, lists where any freshness would do (store_list_each_any) */
};

static int n_get(store *st, const struct store_kind *k, const char *ns, const char *name,
                 cJSON **out, struct err *e)
{
	struct counting *c = (struct counting *)st;
	__atomic_add_fetch(&c->gets, 1, __ATOMIC_SEQ_CST);
	return store_get(c->b, k, ns, name, out, e);
}

static int n_list(store *st, const struct store_kind *k, const char *ns, const char *sel,
                  cJSON **items, uint64_t *rv, struct err *e)
{
	struct counting *c = (struct counting *)st;
	__atomic_add_fetch(&c->lists, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&gate_mu);
	while (lists_held)
		pthread_cond_wait(&gate_cv, &gate_mu);
	bool fail = fail_lists;
	pthread_mutex_unlock(&gate_mu);
	if (fail)
		return err_set(e, -EIO, "the list failed");
	int r = store_list(c->b, k, ns, sel, items, rv, e);
	for (cJSON *it = r == 0 ? (*items)->child : NULL; it; it = it->next)
		with_managed(it);
	return r;
}

/* Set: a list of any freshness stops after its first object until it is cleared (an answer
 * still arriving); walked counts the objects such lists handed out. */
static bool hold_walk;
static int walked;

/* The API server's resourceVersion=0 list, as a dir store answers it: the list, counted. */
static int n_list_each_any(store *st, const struct store_kind *k, const char *ns, const char *sel,
                           store_each_fn fn, void *arg, uint64_t *rv, struct err *e)
{
	cJSON *items = NULL;
	__atomic_add_fetch(&((struct counting *)st)->lists_any, 1, __ATOMIC_SEQ_CST);
	int r = n_list(st, k, ns, sel, &items, rv, e);
	for (cJSON *it = r == 0 ? items->child : NULL; it && r == 0; it = it->next) {
		r = fn(it, arg);
		if (__atomic_add_fetch(&walked, 1, __ATOMIC_SEQ_CST) != 1)
			continue;
		pthread_mutex_lock(&gate_mu);
		while (hold_walk)
			pthread_cond_wait(&gate_cv, &gate_mu);
		pthread_mutex_unlock(&gate_mu);
	}
	cJSON_Delete(items);
	return r;
}

static int n_create(store *st, const cJSON *o, cJSON **out, struct err *e)
{
	return store_create(((struct counting *)st)->b, o, out, e);
}

static int n_update(store *st, const cJSON *o, cJSON **out, struct err *e)
{
	int r = store_update(((struct counting *)st)->b, o, out, e);
	if (r == 0 && out && *out)
		with_managed(*out);
	return r;
}

static int n_update_status(store *st, const cJSON *o, cJSON **out, struct err *e)
{
	return store_update_status(((struct counting *)st)->b, o, out, e);
}

static int n_remove(store *st, const struct store_kind *k, const char *ns, const char *name,
                    const char *uid, const char *rv, struct err *e)
{
	return store_delete(((struct counting *)st)->b, k, ns, name, uid, rv, e);
}

/* The watches of the counting store: the store's own, except that the next event of a watch
 * of expire_kind is STORE_EXPIRED once expire_kind is set (the API server's 410 Gone). */
static const struct store_kind *expire_kind;

struct counted_watch {
	store_watch base;
	const struct store_kind *k;
	store_watch *w;
};

static const struct store_ops counting_ops;

static int n_watch(store *st, const struct store_kind *k, uint64_t from, store_watch **w,
                   struct err *e)
{
	struct counting *c = (struct counting *)st;
	struct counted_watch *x = calloc(1, sizeof(*x));
	ck_assert_ptr_nonnull(x);
	__atomic_add_fetch(&c->watches, 1, __ATOMIC_SEQ_CST);
	int r = store_watch_open(c->b, k, from, &x->w, e);
	if (r < 0) {
		free(x);
		return r;
	}
	x->base.ops = &counting_ops;
	x->k = k;
	*w = &x->base;
	return 0;
}

static int n_watch_next(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
                        struct err *e)
{
	struct counted_watch *x = (struct counted_watch *)w;
	const struct store_kind *k = x->k;
	if (__atomic_compare_exchange_n(&expire_kind, &k, NULL, false, __ATOMIC_SEQ_CST,
	                                __ATOMIC_SEQ_CST))
		return err_set(e, STORE_EXPIRED, "too old resource version");
	int r = store_watch_next(x->w, timeout_ms, type, obj, e);
	if (r == 1)
		with_managed(*obj);
	return r;
}

static void n_watch_close(store_watch *w)
{
	store_watch_close(((struct counted_watch *)w)->w);
	free(w);
}

static void n_close(store *st)
{
	struct counting *c = (struct counting *)st;
	store_close(c->b);
	free(c);
}

static const struct store_ops counting_ops = {
    .get = n_get,
    .list = n_list,
    .list_each_any = n_list_each_any,
    .create = n_create,
    .update = n_update,
    .update_status = n_update_status,
    .remove = n_remove,
    .watch = n_watch,
    .watch_next = n_watch_next,
    .watch_close = n_watch_close,
    .close = n_close,
};

static const char *dir;
static struct counting *cnt;
static store *cache, *other;

static void setup(void)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s", tu_mkdtemp());
	dir = path;
	cnt = calloc(1, sizeof(*cnt));
	cnt->base.ops = &counting_ops;
	ck_assert_int_eq(store_dir_open(dir, true, 50, &cnt->b, NULL), 0);
	/* another handle on the directory: another process writing (the CLI, an operator) */
	ck_assert_int_eq(store_dir_open(dir, false, 50, &other, NULL), 0);
}

static void teardown(void)
{
	add_managed = false;
	hold_walk = false;
	walked = 0;
	store_close(cache);
	cache = NULL;
	store_close(other);
	tu_rmtree(dir);
}

static cJSON *pvst(const char *name, const char *agent)
{
	char buf[1024];
	cJSON *o;
	snprintf(
	    buf, sizeof(buf),
	    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\","
	    "\"metadata\":{\"name\":\"%s\",\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"%s\"}},"
	    "\"spec\":{\"volumeID\":\"%s/zfs-zvol/nvmeof-tcp/tank/%s\",\"agentVolumeID\":"
	    "\"tank/%s\",\"agentRef\":\"%s\",\"backendType\":\"zfs-zvol\",\"protocolType\":"
	    "\"nvmeof-tcp\",\"capacityBytes\":1073741824}}",
	    name, agent, agent, name, name, agent);
	ck_assert_int_eq(json_parse_strict(buf, strlen(buf), &o, NULL), 0);
	return o;
}

static void open_cache(void)
{
	static const struct store_kind *kinds[3];
	kinds[0] = store_kind_lookup("pvst");
	kinds[1] = store_kind_lookup("pa");
	ck_assert_int_eq(store_cache_open(&cnt->base, kinds, &cache, NULL), 0);
}

/* Waits until every cached kind has its first list (each kind lists on its own thread: a read
 * of one kind waits for that kind only, so a count taken after it may still see the other
 * kind's first list arrive). */
static void wait_first_lists(void)
{
	struct store_cache_stats cs;
	store_cache_stats(cache, &cs);
	for (int t = 0; t < 30000 && cs.lists < 2; t += 10) {
		usleep(10000);
		store_cache_stats(cache, &cs);
	}
	ck_assert_uint_eq(cs.lists, 2);
}

/* Waits until a cached get of name shows the agentRef want ("" = gone). */
static bool eventually(const char *name, const char *want)
{
	for (int i = 0; i < 300; i++) {
		cJSON *o = NULL;
		int r = store_get(cache, store_kind_lookup("pvst"), NULL, name, &o, NULL);
		const char *a =
		    r == 0 ? json_get_str(cJSON_GetObjectItem(o, "spec"), "agentRef") : "";
		bool ok = a && !strcmp(a, want);
		cJSON_Delete(o);
		if (ok)
			return true;
		usleep(10000);
	}
	return false;
}

START_TEST(test_reads_from_memory)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	char name[32];
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "pvc-%03d", i);
		cJSON *o = pvst(name, i % 2 ? "a" : "b");
		ck_assert_int_eq(store_create(other, o, NULL, NULL), 0);
		cJSON_Delete(o);
	}
	open_cache();
	store_cache_thread_reads(true);
	cJSON *items = NULL;
	uint64_t rv = 0;
	ck_assert_int_eq(store_list(cache, k, NULL, NULL, &items, &rv, NULL), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 100);
	ck_assert_str_eq(store_meta_str(cJSON_GetArrayItem(items, 0), "name"), "pvc-000");
	ck_assert_str_eq(store_meta_str(cJSON_GetArrayItem(items, 99), "name"), "pvc-099");
	ck_assert_uint_gt(rv, 0);
	cJSON_Delete(items);
	wait_first_lists();
	int lists = __atomic_load_n(&cnt->lists, __ATOMIC_SEQ_CST);
	/* a resync pass: a list by label and a get of every object */
	for (int pass = 0; pass < 3; pass++) {
		ck_assert_int_eq(
		    store_list(cache, k, NULL, "pillar-csi.bhyoo.com/agent=a", &items, NULL, NULL),
		    0);
		ck_assert_int_eq(cJSON_GetArraySize(items), 50);
		cJSON_Delete(items);
		for (int i = 0; i < 100; i++) {
			cJSON *o = NULL;
			snprintf(name, sizeof(name), "pvc-%03d", i);
			ck_assert_int_eq(store_get(cache, k, NULL, name, &o, NULL), 0);
			ck_assert_str_eq(store_meta_str(o, "name"), name);
			cJSON_Delete(o);
		}
	}
	ck_assert_int_eq(__atomic_load_n(&cnt->gets, __ATOMIC_SEQ_CST), 0);
	ck_assert_int_eq(__atomic_load_n(&cnt->lists, __ATOMIC_SEQ_CST), lists);
	struct store_cache_stats cs;
	store_cache_stats(cache, &cs);
	ck_assert_uint_eq(cs.lists, 2); /* one per cached kind */
	ck_assert_uint_ge(cs.hits, 303);
	/* a bad selector is refused as by the store */
	struct err e = {0};
	ck_assert_int_eq(store_list(cache, k, NULL, "a=b=c", &items, NULL, &e), STORE_INVALID);
	store_cache_thread_reads(false);
}
END_TEST

/* An int64 beyond 2^53 (capacityBytes, crds.md) is kept digit for digit by the embedded store
 * and by the cache's compact texts (base/json.h; a cJSON print changed 8 PiB + 1). */
START_TEST(test_integers_exact)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	cJSON *o = pvst("pvc-big", "a"), *got = NULL;
	int64_t cap = 0;
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(o, "spec"), "capacityBytes",
	                          json_int64(9007199254740993LL));
	ck_assert_int_eq(store_create(other, o, NULL, NULL), 0);
	cJSON_Delete(o);
	ck_assert_int_eq(store_get(other, k, NULL, "pvc-big", &got, NULL), 0);
	ck_assert_int_eq(json_get_int64(cJSON_GetObjectItem(got, "spec"), "capacityBytes", &cap),
	                 0);
	ck_assert_int_eq(cap, 9007199254740993LL);
	cJSON_Delete(got);
	open_cache();
	store_cache_thread_reads(true);
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-big", &got, NULL), 0);
	ck_assert_int_eq(json_get_int64(cJSON_GetObjectItem(got, "spec"), "capacityBytes", &cap),
	                 0);
	ck_assert_int_eq(cap, 9007199254740993LL);
	cJSON_Delete(got);
	store_cache_thread_reads(false);
}
END_TEST

START_TEST(test_changes_elsewhere_arrive_by_watch)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	cJSON *o = pvst("pvc-1", "a"), *v = NULL;
	open_cache();
	store_cache_thread_reads(true);
	ck_assert(eventually("pvc-1", "")); /* not there yet */
	ck_assert_int_eq(store_create(other, o, &v, NULL), 0);
	ck_assert(eventually("pvc-1", "a"));
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(v, "spec"), "agentRef",
	                          cJSON_CreateString("b"));
	ck_assert_int_eq(store_update(other, v, NULL, NULL), 0);
	ck_assert(eventually("pvc-1", "b"));
	ck_assert_int_eq(store_delete(other, k, NULL, "pvc-1", NULL, NULL, NULL), 0);
	ck_assert(eventually("pvc-1", ""));
	/* the unknown name: the store's own answer */
	struct err e = {0};
	cJSON *got = NULL;
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, &e), STORE_NOT_FOUND);
	ck_assert_ptr_nonnull(strstr(e.msg, "\"pvc-1\" not found"));
	store_cache_thread_reads(false);
	cJSON_Delete(o);
	cJSON_Delete(v);
}
END_TEST

START_TEST(test_writes_visible_at_once_and_other_threads_read_through)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	cJSON *o = pvst("pvc-1", "a"), *v = NULL, *got = NULL;
	open_cache();
	store_cache_thread_reads(true);
	ck_assert_int_eq(store_create(cache, o, &v, NULL), 0);
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, NULL), 0);
	ck_assert_uint_eq(store_meta_rv(got), store_meta_rv(v));
	cJSON_Delete(got);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(v, "spec"), "agentRef",
	                          cJSON_CreateString("c"));
	ck_assert_int_eq(store_update(cache, v, NULL, NULL), 0);
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, NULL), 0);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(got, "spec"), "agentRef"), "c");
	cJSON_Delete(got);
	int gets = __atomic_load_n(&cnt->gets, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(gets, 0);
	/* a thread that does not read cached (a CSI handler) asks the store */
	store_cache_thread_reads(false);
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, NULL), 0);
	cJSON_Delete(got);
	ck_assert_int_eq(__atomic_load_n(&cnt->gets, __ATOMIC_SEQ_CST), 1);
	cJSON_Delete(o);
	cJSON_Delete(v);
}
END_TEST

struct cached_get {
	const char *name;
	int rc;
	bool done;
	cJSON *obj;
};

static void *cached_get_main(void *arg)
{
	struct cached_get *g = arg;
	store_cache_thread_reads(true);
	g->rc = store_get(cache, store_kind_lookup("pvst"), NULL, g->name, &g->obj, NULL);
	__atomic_store_n(&g->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

/* A kind's first list that takes long (a large kind on a slow API server) is waited for, however
 * long: a reconciler reading through meanwhile would send the server a second list of the
 * kind just when it is slow.  Once the list is in, the read is answered from memory. */
START_TEST(test_reads_wait_for_a_slow_first_list)
{
	cJSON *o = pvst("pvc-1", "a");
	ck_assert_int_eq(store_create(cnt->b, o, NULL, NULL), 0);
	cJSON_Delete(o);
	hold_lists(true);
	open_cache();
	struct cached_get g = {.name = "pvc-1"};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, cached_get_main, &g), 0);
	sleep(12); /* longer than the read used to wait before reading through */
	ck_assert(!__atomic_load_n(&g.done, __ATOMIC_SEQ_CST));
	ck_assert_int_eq(__atomic_load_n(&cnt->gets, __ATOMIC_SEQ_CST), 0);
	hold_lists(false);
	pthread_join(th, NULL);
	ck_assert_int_eq(g.rc, 0);
	ck_assert_str_eq(store_meta_str(g.obj, "name"), "pvc-1");
	ck_assert_int_eq(__atomic_load_n(&cnt->gets, __ATOMIC_SEQ_CST), 0);
	cJSON_Delete(g.obj);
}
END_TEST

/* While the kind cannot be listed, a cached read does not wait for it: it reads through. */
START_TEST(test_reads_go_through_while_lists_fail)
{
	cJSON *o = pvst("pvc-1", "a"), *got = NULL;
	ck_assert_int_eq(store_create(cnt->b, o, NULL, NULL), 0);
	cJSON_Delete(o);
	fail_lists = true;
	open_cache();
	store_cache_thread_reads(true);
	ck_assert_int_eq(store_get(cache, store_kind_lookup("pvst"), NULL, "pvc-1", &got, NULL), 0);
	ck_assert_str_eq(store_meta_str(got, "name"), "pvc-1");
	ck_assert_int_eq(__atomic_load_n(&cnt->gets, __ATOMIC_SEQ_CST), 1);
	cJSON_Delete(got);
	/* a first list of any freshness that failed (an answer too large to buffer) is taken
	 * again page by page: once the lists work, each kind lists consistently */
	fail_lists = false;
	wait_first_lists();
	ck_assert_int_eq(__atomic_load_n(&cnt->lists_any, __ATOMIC_SEQ_CST), 2);
}
END_TEST

/* A reader that joins the list (store_cache_thread_joins): what its fn saw, where. */
struct joiner {
	pthread_t self;
	char names[256];
	bool elsewhere, receiver; /* on another thread; with the reader's receiver */
	uint64_t rv;
	int rc;
};

static void ignore_unreadable(void *arg, const struct store_kind *k, const char *ns,
                              const char *name, const char *error)
{
	(void)arg, (void)k, (void)ns, (void)name, (void)error;
}

static int joined_one(cJSON *obj, void *arg)
{
	struct joiner *j = arg;
	struct store_unreadable now;
	store_unreadable_catch(NULL, &now);
	store_unreadable_catch(&now, NULL);
	j->receiver = now.arg == j;
	j->elsewhere = !pthread_equal(pthread_self(), j->self);
	strcat(j->names, store_meta_str(obj, "name"));
	strcat(j->names, " ");
	return 0;
}

static int count_one(cJSON *obj, void *arg)
{
	(void)obj;
	++*(int *)arg;
	return 0;
}

static void *joining_main(void *arg)
{
	struct joiner *j = arg;
	struct store_unreadable receiver = {ignore_unreadable, j};
	j->self = pthread_self();
	store_unreadable_catch(&receiver, NULL);
	store_cache_thread_reads(true);
	store_cache_thread_joins(true);
	j->rc = store_list_each(cache, store_kind_lookup("pvst"), NULL, NULL, joined_one, j, &j->rv,
	                        NULL);
	return NULL;
}

/* A list made while the kind's first list is being taken joins it: its fn is handed the
 * objects the cache already took, then each one as it arrives, from the informer's own parse on
 * the informer's thread (with the reader's receiver of unreadable objects), in list order, at
 * the list's version; the store is listed once per kind. */
START_TEST(test_first_list_joined)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	for (int i = 1; i <= 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "pvc-%d", i);
		cJSON *o = pvst(name, "a");
		ck_assert_int_eq(store_create(cnt->b, o, NULL, NULL), 0);
		cJSON_Delete(o);
	}
	hold_walk = true;
	open_cache();
	for (int t = 0; t < 3000 && __atomic_load_n(&walked, __ATOMIC_SEQ_CST) < 1; t++)
		usleep(10000);
	struct joiner j = {.rc = -1};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, joining_main, &j), 0);
	sleep(2); /* it waits in the list */
	pthread_mutex_lock(&gate_mu);
	hold_walk = false;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
	pthread_join(th, NULL);
	ck_assert_int_eq(j.rc, 0);
	ck_assert_str_eq(j.names, "pvc-1 pvc-2 pvc-3 ");
	ck_assert(j.elsewhere);
	ck_assert(j.receiver);
	uint64_t rv = 0;
	int n = 0;
	store_cache_thread_reads(true);
	ck_assert_int_eq(store_list_each(cache, k, NULL, NULL, count_one, &n, &rv, NULL), 0);
	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(j.rv, rv);
	ck_assert_int_eq(__atomic_load_n(&cnt->lists, __ATOMIC_SEQ_CST), 2); /* one per kind */
	store_cache_thread_reads(false);
}
END_TEST

/* The update that removes the last finalizer of a deleted object deletes it: the cache must not
 * keep (or, when the watch's DELETED came first, bring back) the object that update returned. */
START_TEST(test_last_finalizer_removed_is_gone)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	cJSON *o = pvst("pvc-1", "a"), *v = NULL, *got = NULL;
	cJSON *fin = cJSON_CreateArray();
	cJSON_AddItemToArray(fin, cJSON_CreateString("pillar-csi.bhyoo.com/test"));
	cJSON_AddItemToObject(cJSON_GetObjectItem(o, "metadata"), "finalizers", fin);
	open_cache();
	store_cache_thread_reads(true);
	ck_assert_int_eq(store_create(cache, o, NULL, NULL), 0);
	ck_assert_int_eq(store_delete(other, k, NULL, "pvc-1", NULL, NULL, NULL), 0);
	for (int i = 0; i < 300; i++) { /* the watch delivers the deletionTimestamp */
		cJSON_Delete(v);
		v = NULL;
		ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &v, NULL), 0);
		if (store_meta_str(v, "deletionTimestamp"))
			break;
		usleep(10000);
	}
	ck_assert_ptr_nonnull(store_meta_str(v, "deletionTimestamp"));
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(v, "metadata"), "finalizers");
	ck_assert_int_eq(store_update(cache, v, NULL, NULL), 0);
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, NULL), STORE_NOT_FOUND);
	usleep(200000); /* and after the watch's DELETED */
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, NULL), STORE_NOT_FOUND);
	store_cache_thread_reads(false);
	cJSON_Delete(o);
	cJSON_Delete(v);
}
END_TEST

/* Watches of a cached kind come from the informer's own stream: the store underneath sees one
 * watch per kind however many watch through the cache; a watch from the cache's list version
 * resumes after it, from 0 starts with every object, and one older than the cache kept is
 * Expired (the watcher relists). */
START_TEST(test_one_watch_per_kind)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	cJSON *o = pvst("pvc-0", "a"), *items = NULL, *first = NULL;
	uint64_t rv = 0;
	store_watch *w = NULL, *w0 = NULL;
	struct err e = {0};
	ck_assert_int_eq(store_create(other, o, &first, NULL), 0);
	uint64_t rv0 = store_meta_rv(first);
	cJSON_Delete(first);
	cJSON_Delete(o);
	o = pvst("pvc-00", "a");
	ck_assert_int_eq(store_create(other, o, NULL, NULL), 0);
	cJSON_Delete(o);
	open_cache();
	store_cache_thread_reads(true);
	ck_assert_int_eq(store_list(cache, k, NULL, NULL, &items, &rv, NULL), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 2);
	cJSON_Delete(items);
	ck_assert_uint_gt(rv, rv0);
	ck_assert_int_eq(store_watch_open(cache, k, rv, &w, &e), 0);
	ck_assert_int_eq(store_watch_open(cache, k, 0, &w0, &e), 0);
	for (int i = 0, seen = 0; i < 2; i++) { /* the objects at the start, in any order */
		enum store_event_type t;
		ck_assert_int_eq(store_watch_next(w0, 5000, &t, &o, &e), 1);
		ck_assert_int_eq(t, STORE_ADDED);
		seen |= !strcmp(store_meta_str(o, "name"), "pvc-0") ? 1 : 2;
		cJSON_Delete(o);
		if (i == 1)
			ck_assert_int_eq(seen, 3);
	}
	for (int i = 1; i <= 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "pvc-%d", i);
		o = pvst(name, "b");
		ck_assert_int_eq(store_create(other, o, NULL, NULL), 0);
		cJSON_Delete(o);
		tu_expect_event(w, STORE_ADDED, name, "spec");
		tu_expect_event(w0, STORE_ADDED, name, "spec");
	}
	ck_assert_int_eq(store_delete(other, k, NULL, "pvc-2", NULL, NULL, NULL), 0);
	tu_expect_event(w, STORE_DELETED, "pvc-2", NULL);
	/* two kinds cached: two watches underneath, none for the two watches above.  A kind counts
	 * as synced once listed, before its informer opens the watch: the other kind's informer
	 * (nothing here waits for it) may open its watch later on a loaded machine */
	for (int t = 0; t < 30000 && __atomic_load_n(&cnt->watches, __ATOMIC_SEQ_CST) < 2; t += 10)
		usleep(10000);
	ck_assert_int_eq(__atomic_load_n(&cnt->watches, __ATOMIC_SEQ_CST), 2);
	store_watch_close(w);
	store_watch_close(w0);
	/* older than anything the cache kept: Expired, as the store would answer */
	ck_assert_int_eq(store_watch_open(cache, k, rv0, &w, &e), STORE_EXPIRED);
	store_cache_thread_reads(false);
}
END_TEST

/* A relist (the watch expired) takes over the texts of the objects that did not change instead
 * of a second copy of the kind, and the cache answers the same after it.  Each kind's first
 * list will take any freshness (the API server's watch cache, as client-go's reflector's first
 * list); the relist after lost events asks for the latest (a consistent list). */
START_TEST(test_relist_keeps_unchanged_texts)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	struct store_cache_stats cs;
	cJSON *items = NULL;
	char name[32];
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "pvc-%02d", i);
		cJSON *o = pvst(name, "a");
		ck_assert_int_eq(store_create(other, o, NULL, NULL), 0);
		cJSON_Delete(o);
	}
	open_cache();
	store_cache_thread_reads(true);
	ck_assert_int_eq(store_list(cache, k, NULL, NULL, &items, NULL, NULL), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 20);
	cJSON_Delete(items);
	wait_first_lists();
	store_cache_stats(cache, &cs);
	unsigned long lists = cs.lists;
	ck_assert_uint_eq(cs.relist_shared, 0); /* the first lists had nothing to take over */
	ck_assert_int_eq(__atomic_load_n(&cnt->lists_any, __ATOMIC_SEQ_CST), 2);
	__atomic_store_n(&expire_kind, k, __ATOMIC_SEQ_CST);
	for (int t = 0; t < 30000 && cs.lists == lists; t += 10) {
		usleep(10000);
		store_cache_stats(cache, &cs);
	}
	ck_assert_uint_eq(cs.lists, lists + 1);
	ck_assert_uint_eq(cs.relist_shared, 20);
	ck_assert_int_eq(__atomic_load_n(&cnt->lists_any, __ATOMIC_SEQ_CST), 2);
	ck_assert_int_eq(
	    store_list(cache, k, NULL, "pillar-csi.bhyoo.com/agent=a", &items, NULL, NULL), 0);
	ck_assert_int_eq(cJSON_GetArraySize(items), 20);
	ck_assert_str_eq(store_meta_str(cJSON_GetArrayItem(items, 19), "name"), "pvc-19");
	cJSON_Delete(items);
	/* a change after the relist arrives as before */
	cJSON *o = pvst("pvc-07", "b"), *got = NULL;
	ck_assert_int_eq(store_update(other, o, NULL, NULL), 0);
	cJSON_Delete(o);
	ck_assert(eventually("pvc-07", "b"));
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-08", &got, NULL), 0);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(got, "spec"), "agentRef"), "a");
	cJSON_Delete(got);
	store_cache_thread_reads(false);
}
END_TEST

/* The cache keeps its objects without metadata.managedFields (the API server's field owners,
 * which no reader of the cache uses): neither held nor parsed by each cached read, from the
 * list or from the watch; the rest of the object is kept as it was. */
START_TEST(test_managed_fields_left_out)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	cJSON *o = pvst("pvc-1", "a"), *got = NULL;
	add_managed = true;
	ck_assert_int_eq(store_create(other, o, NULL, NULL), 0);
	cJSON_Delete(o);
	open_cache();
	store_cache_thread_reads(true);
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, NULL), 0);
	cJSON *md = cJSON_GetObjectItem(got, "metadata");
	ck_assert_ptr_null(cJSON_GetObjectItem(md, "managedFields"));
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(md, "labels"), "pillar-csi.bhyoo.com/agent"), "a");
	ck_assert_str_eq(store_meta_str(got, "name"), "pvc-1");
	cJSON_Delete(got);
	/* a change made elsewhere, from the watch */
	o = pvst("pvc-1", "b");
	ck_assert_int_eq(store_update(other, o, NULL, NULL), 0);
	cJSON_Delete(o);
	ck_assert(eventually("pvc-1", "b"));
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, NULL), 0);
	ck_assert_ptr_null(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(got, "metadata"), "managedFields"));
	cJSON_Delete(got);
	/* a write through the cache returns the store's object whole, managedFields in their
	 * place (before the labels), and keeps it without them */
	o = pvst("pvc-1", "c");
	ck_assert_int_eq(store_update(cache, o, &got, NULL), 0);
	cJSON_Delete(o);
	md = cJSON_GetObjectItem(got, "metadata");
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(md, "managedFields"));
	ck_assert_ptr_eq(cJSON_GetObjectItem(md, "managedFields")->next,
	                 cJSON_GetObjectItem(md, "labels"));
	ck_assert_int_eq(cJSON_GetArraySize(md), 7);
	cJSON_Delete(got);
	ck_assert_int_eq(store_get(cache, k, NULL, "pvc-1", &got, NULL), 0);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(got, "spec"), "agentRef"), "c");
	ck_assert_ptr_null(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(got, "metadata"), "managedFields"));
	cJSON_Delete(got);
	store_cache_thread_reads(false);
	/* a reader that does not read cached gets the store's object whole */
	ck_assert_int_eq(store_list(cache, k, NULL, NULL, &got, NULL, NULL), 0);
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(got, 0), "metadata"), "managedFields"));
	cJSON_Delete(got);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store cache");
	TCase *t = tcase_create("dir");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_reads_from_memory);
	tcase_add_test(t, test_relist_keeps_unchanged_texts);
	tcase_add_test(t, test_integers_exact);
	tcase_add_test(t, test_managed_fields_left_out);
	tcase_add_test(t, test_changes_elsewhere_arrive_by_watch);
	tcase_add_test(t, test_writes_visible_at_once_and_other_threads_read_through);
	tcase_add_test(t, test_last_finalizer_removed_is_gone);
	tcase_add_test(t, test_one_watch_per_kind);
	tcase_add_test(t, test_reads_wait_for_a_slow_first_list);
	tcase_add_test(t, test_reads_go_through_while_lists_fail);
	tcase_add_test(t, test_first_list_joined);
	suite_add_tcase(s, t);
	return tu_run(s);
}
