/* What a restore or resync holds while it builds its ReconcileState (issue 14: the controller's
 * memory peaked at twice its size at rest on every pass while it held every decoded volume):
 * model_list_each decodes the listed objects one at a time into one scratch struct, in list
 * order, leaving out what does not decode; a batch_item keeps a volume's item (packed) and its
 * ExportReconciled as read, and says when recording an outcome would change nothing. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/reconcile_batch.h"
#include "model/kube.h"
#include "model/pillar.h"
#include "testutil.h"

struct seen {
	void *scratch;
	int calls, stop_at;
	char names[8][32];
};

static int on_each(void *obj, void *arg)
{
	struct seen *s = arg;
	const struct model_pvst *v = obj;
	if (!s->scratch)
		s->scratch = obj;
	ck_assert_ptr_eq(obj, s->scratch); /* one struct, reused: never two decoded at once */
	snprintf(s->names[s->calls], sizeof(s->names[0]), "%s", v->meta.name);
	return ++s->calls == s->stop_at ? -EINTR : 0;
}

static void put(store *st, const char *name, const char *agent, const char *ref)
{
	char text[600];
	cJSON *o = NULL;
	snprintf(
	    text, sizeof(text),
	    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\","
	    "\"metadata\":{\"name\":\"%s\",\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"%s\"}},"
	    "\"spec\":{\"agentRef\":%s}}",
	    name, agent, ref);
	ck_assert_int_eq(json_parse_strict(text, strlen(text), &o, NULL), 0);
	ck_assert_int_eq(store_create(st, o, NULL, NULL), 0);
	cJSON_Delete(o);
}

START_TEST(test_list_each_one_at_a_time)
{
	const char *dir = tu_mkdtemp();
	store *st = NULL;
	struct err e = {0};
	ck_assert_int_eq(store_dir_open(dir, true, 50, &st, NULL), 0);
	put(st, "v-c", "a", "\"a\"");
	put(st, "v-a", "a", "\"a\"");
	put(st, "v-b", "a", "[7]"); /* agentRef must be a string: does not decode, left out */
	put(st, "v-d", "b", "\"b\"");
	put(st, "v-e", "a", "\"a\"");
	struct seen s = {0};
	ck_assert_int_eq(model_list_each(st, &model_pvst_kind, NULL, "pillar-csi.bhyoo.com/agent=a",
	                                 on_each, &s, NULL, &e),
	                 0);
	ck_assert_int_eq(s.calls, 3);
	ck_assert_str_eq(s.names[0], "v-a");
	ck_assert_str_eq(s.names[1], "v-c");
	ck_assert_str_eq(s.names[2], "v-e");
	/* fn's error stops the list and is returned */
	struct seen t = {.stop_at = 2};
	ck_assert_int_eq(model_list_each(st, &model_pvst_kind, NULL, NULL, on_each, &t, NULL, &e),
	                 -EINTR);
	ck_assert_int_eq(t.calls, 2);
	ck_assert_int_eq(model_list_each(st, &model_lease_kind, NULL, NULL, on_each, &t, NULL, &e),
	                 STORE_INVALID);
	store_close(st);
	tu_rmtree(dir);
}
END_TEST

struct skips {
	int asked, parsed;
	uint64_t rv_a;
};

static bool skip_a(const char *ns, const char *name, uint64_t rv, void *arg)
{
	struct skips *k = arg;
	ck_assert_ptr_null(ns); /* cluster-scoped */
	k->asked++;
	if (!strcmp(name, "v-a"))
		k->rv_a = rv;
	return !strcmp(name, "v-a");
}

static int count_parsed(cJSON *obj, void *arg)
{
	struct skips *k = arg;
	ck_assert_str_ne(store_meta_str(obj, "name"), "v-a");
	k->parsed++;
	return 0;
}

/* store_list_each_skip: the cache and the embedded store's index ask about every object before
 * parsing, with its name and version, and parse only what is not skipped; with a label selector
 * every store asks only about the objects it selects (the indexes pass over the others on their
 * labels, unparsed; the embedded store without an index, another process's view, after parsing
 * them). */
START_TEST(test_list_skip)
{
	const char *dir = tu_mkdtemp();
	store *raw = NULL, *st = NULL, *cli = NULL;
	struct err e = {0};
	cJSON *got = NULL;
	ck_assert_int_eq(store_dir_open(dir, true, 50, &raw, NULL), 0);
	put(raw, "v-a", "a", "\"a\"");
	put(raw, "v-b", "a", "\"a\"");
	put(raw, "v-c", "b", "\"b\"");
	ck_assert_int_eq(store_get(raw, store_kind_lookup("pvst"), NULL, "v-a", &got, &e), 0);
	uint64_t rv = store_meta_rv(got);
	cJSON_Delete(got);
	ck_assert_int_eq(store_cache_open(raw, NULL, &st, &e), 0);
	ck_assert_int_eq(store_dir_open(dir, false, 50, &cli, NULL), 0);
	store_cache_thread_reads(true);
	for (int pass = 0; pass < 3; pass++) {
		store *in = pass == 0 ? st : pass == 1 ? raw : cli;
		struct skips k = {0};
		ck_assert_int_eq(store_list_each_skip(in, store_kind_lookup("pvst"), NULL, NULL,
		                                      skip_a, count_parsed, &k, NULL, &e),
		                 0);
		ck_assert_int_eq(k.asked, 3);
		ck_assert_int_eq(k.parsed, 2);
		ck_assert_uint_eq(k.rv_a, rv);
		/* with a selector: v-c (agent b) is neither asked about nor handed on */
		struct skips l = {0};
		ck_assert_int_eq(store_list_each_skip(in, store_kind_lookup("pvst"), NULL,
		                                      "pillar-csi.bhyoo.com/agent=a", skip_a,
		                                      count_parsed, &l, NULL, &e),
		                 0);
		ck_assert_int_eq(l.asked, 2);
		ck_assert_int_eq(l.parsed, 1);
	}
	store_cache_thread_reads(false);
	store_close(cli);
	store_close(st);
	tu_rmtree(dir);
}
END_TEST

#define VOL                                                                                        \
	"{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\","        \
	"\"metadata\":{\"name\":\"v-1\",\"uid\":\"u-1\",\"generation\":2,\"resourceVersion\":"     \
	"\"17\"},"                                                                                 \
	"\"spec\":{\"agentVolumeID\":\"tank/"                                                      \
	"v-1\",\"agentRef\":\"s-1\",\"backendType\":\"zfs-zvol\","                                 \
	"\"resolved\":{\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}},"                               \
	"\"status\":{\"phase\":\"Ready\",\"publicationGeneration\":5,"                             \
	"\"exportSpec\":{\"bindAddress\":\"10.0.0.5\",\"port\":4420,\"aclEnabled\":true,"          \
	"\"inCapsuleDataSize\":8192},\"publishedNodes\":[{\"nodeID\":\"a\",\"initiatorID\":\"nqn." \
	"a\"},"                                                                                    \
	"{\"nodeID\":\"b\",\"initiatorID\":\"nqn.b\",\"revoking\":true}],"                         \
	"\"conditions\":[{\"type\":\"ExportReconciled\",\"status\":\"False\",\"reason\":"          \
	"\"AgentUnavailable\",\"message\":\"down\",\"observedGeneration\":2}]}}"

START_TEST(test_batch_item)
{
	struct model_pvst v;
	struct batch_item x;
	struct err e = {0};
	ck_assert_int_eq(model_decode_text(&model_pvst_kind, VOL, &v, &e), 0);
	ck_assert_int_eq(batch_item_of(&x, &v, "s-1"), 0);
	model_clear(&model_pvst_kind, &v); /* the item owns copies */
	ck_assert_int_eq(x.state, BATCH_ITEM_EXPORTED);
	ck_assert(x.in_capsule);
	ck_assert_str_eq(x.name, "v-1");
	ck_assert_str_eq(x.uid, "u-1");
	ck_assert_str_eq(x.volume_id, "tank/v-1");
	ck_assert_uint_eq(x.resource_version, 17);
	PillarCsi__Agent__V1__VolumeDesiredState *d = batch_item_unpack(&x);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d->volume_id, "tank/v-1");
	ck_assert_str_eq(d->fence->volume_uid, "u-1");
	ck_assert_int_eq(d->fence->generation, 5);
	ck_assert_str_eq(d->backend_params->zfs->pool, "tank");
	ck_assert_uint_eq(d->n_exports, 1);
	ck_assert_str_eq(d->exports[0]->export_params->nvmeof_tcp->bind_address, "10.0.0.5");
	ck_assert_int_eq(d->exports[0]->export_params->nvmeof_tcp->in_capsule_data_size, 8192);
	ck_assert(d->exports[0]->acl_enabled);
	ck_assert_uint_eq(d->exports[0]->n_allowed_initiators, 1); /* not the revoking one */
	ck_assert_str_eq(d->exports[0]->allowed_initiators[0], "nqn.a");
	pillar_csi__agent__v1__volume_desired_state__free_unpacked(d, NULL);
	/* the condition as read: same only with status, reason, message and generation */
	ck_assert(batch_item_cond_same(&x, "AgentUnavailable", "down"));
	ck_assert(!batch_item_cond_same(&x, "AgentUnavailable", "up"));
	ck_assert(!batch_item_cond_same(&x, "Reconciled", ""));
	x.generation = 3;
	ck_assert(!batch_item_cond_same(&x, "AgentUnavailable", "down"));
	batch_item_clear(&x);
	batch_item_clear(NULL);
	/* another agent's volume, a deleting one, one without exportSpec */
	ck_assert_int_eq(model_decode_text(&model_pvst_kind, VOL, &v, &e), 0);
	ck_assert_int_eq(batch_item_of(&x, &v, "s-2"), 0);
	ck_assert_int_eq(x.state, BATCH_ITEM_SKIPPED);
	batch_item_clear(&x);
	v.status.has_deleting = v.status.deleting = true;
	ck_assert_int_eq(batch_item_of(&x, &v, NULL), 0);
	ck_assert_int_eq(x.state, BATCH_ITEM_SKIPPED);
	batch_item_clear(&x);
	v.status.deleting = false;
	v.status.has_export_spec = false;
	ck_assert_int_eq(batch_item_of(&x, &v, NULL), 0);
	ck_assert_int_eq(x.state, BATCH_ITEM_NO_SPEC);
	ck_assert_ptr_null(x.packed);
	batch_item_clear(&x);
	model_clear(&model_pvst_kind, &v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("export_items");
	TCase *t = tcase_create("items");
	tcase_add_test(t, test_list_each_one_at_a_time);
	tcase_add_test(t, test_batch_item);
	tcase_add_test(t, test_list_skip);
	suite_add_tcase(s, t);
	return tu_run(s);
}
