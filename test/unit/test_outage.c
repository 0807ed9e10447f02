/* outage-plan / outage-status (roles/cli/outage.c) and the numbers behind them
 * (model/outage.h): effective tunables with the kernel's defaults, the budget, the owners of the
 * pods and the commands to stop them, and the countdown of an ongoing outage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/yaml.h"
#include "cli/outage.h"
#include "model/kube.h"
#include "model/outage.h"
#include "testutil.h"

START_TEST(test_effective_tunables)
{
	struct model_nvmeof_tcp n = {0};
	bool def = false;
	ck_assert_int_eq(model_ctrl_loss_tmo(NULL, &def), 600);
	ck_assert(def);
	ck_assert_int_eq(model_reconnect_delay(NULL, &def), 10);
	ck_assert(def);
	n.has_ctrl_loss_tmo = true;
	n.ctrl_loss_tmo = -1;
	ck_assert_int_eq(model_ctrl_loss_tmo(&n, &def), -1);
	ck_assert(!def);
	ck_assert_int_eq(model_reconnect_delay(&n, &def), 10);
	ck_assert(def);

	struct model_map attrs = {0};
	ck_assert_int_eq(model_nvmeof_tcp_from_attributes(&attrs, &n), 0);
	ck_assert(!n.has_ctrl_loss_tmo && !n.has_reconnect_delay);
	model_map_set(&attrs, "pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "1800");
	model_map_set(&attrs, "pillar-csi.bhyoo.com/nvmeof-reconnect-delay", "5");
	ck_assert_int_eq(model_nvmeof_tcp_from_attributes(&attrs, &n), 0);
	ck_assert_int_eq(model_ctrl_loss_tmo(&n, NULL), 1800);
	ck_assert_int_eq(model_reconnect_delay(&n, NULL), 5);
	model_map_set(&attrs, "pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "10m");
	ck_assert_int_eq(model_nvmeof_tcp_from_attributes(&attrs, &n), -EINVAL);
	model_map_set(&attrs, "pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "");
	ck_assert_int_eq(model_nvmeof_tcp_from_attributes(&attrs, &n), -EINVAL);
	model_map_clear(&attrs);
}
END_TEST

/* One volume for the counts: published to the nodes given (NULL-terminated). */
static void add(struct model_agent_counts *c, bool set, int64_t tmo, const char *const *nodes)
{
	struct model_pvst v = {0};
	struct model_nvmeof_tcp n = {.has_ctrl_loss_tmo = set, .ctrl_loss_tmo = tmo};
	struct model_pvst_published p[4] = {0};
	for (; nodes && nodes[v.status.n_published]; v.status.n_published++)
		p[v.status.n_published].node_id = (char *)nodes[v.status.n_published];
	v.status.published = p;
	ck_assert_int_eq(model_agent_counts_add(c, &v, &n), 0);
}

START_TEST(test_budget)
{
	struct model_agent_counts c = {0};
	add(&c, true, 30, NULL);                         /* not published: no kernel waits on it */
	add(&c, true, -1, (const char *[]){"w1", NULL}); /* retries for ever */
	ck_assert(!c.has_budget);
	add(&c, true, 1800, (const char *[]){"w1", "w2", NULL});
	ck_assert(c.has_budget);
	ck_assert_int_eq(c.budget, 1800);
	add(&c, false, 0, (const char *[]){"w2", NULL}); /* kernel default 600 */
	ck_assert_int_eq(c.budget, 600);
	add(&c, true, 120, (const char *[]){"w3", NULL});
	add(&c, true, 900, (const char *[]){"w1", NULL});
	ck_assert_int_eq(c.budget, 120);
	ck_assert_int_eq(c.volumes, 6);
	ck_assert_int_eq(c.published, 5);
	ck_assert_int_eq(c.hosts.n, 3);
	model_agent_counts_clear(&c);
	ck_assert_int_eq(c.volumes, 0);
}
END_TEST

#define G "\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\","
#define APPS(kind, ns, name, replicas, owner)                                              \
	"{\"apiVersion\":\"apps/v1\",\"kind\":\"" kind "\",\"metadata\":{\"name\":\"" name \
	"\",\"namespace\":\"" ns "\"" owner "},\"spec\":{\"replicas\":" replicas "}}"
#define OWNER(kind, name)                                                                          \
	",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"" kind "\",\"name\":\"" name \
	"\",\"uid\":\"u-" name "\",\"controller\":true}]"
#define POD(name, claim, owner, phase)                                                   \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name         \
	"\",\"namespace\":\"ns1\"" owner "},\"spec\":{\"nodeName\":\"w1\",\"volumes\":[" \
	"{\"name\":\"d\",\"persistentVolumeClaim\":{\"claimName\":\"" claim "\"}}]},"    \
	"\"status\":{\"phase\":\"" phase "\"}}"
#define PVST(name, agent, claim, nvme, published)                                               \
	"{" G "\"kind\":\"PillarVolumeState\",\"metadata\":{\"name\":\"" name "\"},\"spec\":{"  \
	"\"volumeID\":\"" agent "/nvmeof-tcp/zfs-zvol/t/" name "\",\"agentRef\":\"" agent "\"," \
	"\"backendType\":\"zfs-zvol\",\"protocolType\":\"nvmeof-tcp\",\"capacityBytes\":"       \
	"1073741824,\"claimRef\":{\"uid\":\"u\",\"namespace\":\"ns1\",\"name\":\"" claim "\"}," \
	"\"resolved\":{\"protocol\":{\"nvmeofTcp\":{" nvme "}}}},\"status\":{\"phase\":"        \
	"\"Ready\",\"publishedNodes\":[" published "]}}"
#define W1 "{\"nodeID\":\"w1\",\"accessMode\":\"SINGLE_NODE_WRITER\"}"

static const char *const fixture[] = {
    "{" G "\"kind\":\"PillarAgent\",\"metadata\":{\"name\":\"s1\"},\"spec\":{\"external\":"
    "{\"address\":\"10.0.0.1\",\"port\":9500}},\"status\":{\"conditions\":[{\"type\":"
    "\"AgentConnected\",\"status\":\"False\",\"reason\":\"HealthCheckFailed\",\"message\":"
    "\"m\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}",
    PVST("v1", "s1", "c1", "\"ctrlLossTmo\":120", W1),
    PVST("v2", "s1", "c2", "", W1),
    PVST("v3", "s1", "c3", "\"ctrlLossTmo\":1800", ""),
    PVST("v4", "s2", "c1", "\"ctrlLossTmo\":5", W1),
    APPS("Deployment", "ns1", "d1", "4", ""),
    APPS("ReplicaSet", "ns1", "rs1", "4", OWNER("Deployment", "d1")),
    POD("p1", "c1", OWNER("ReplicaSet", "rs1"), "Running"),
    POD("p2", "c2", "", "Pending"),
    POD("p3", "c2", OWNER("DaemonSet", "ds"), "Running"),
    POD("p4", "c1", OWNER("StatefulSet", "gone"), "Running"),
    POD("p5", "c2", "", "Succeeded"),
};

static store *load(const char *dir)
{
	struct model_any *objs = NULL;
	size_t n = 0;
	char url[600];
	struct err e = {0};
	store *s = NULL;
	snprintf(url, sizeof(url), "dir:%s", dir);
	ck_assert_int_eq(store_open_url(url, false, &s, &e), 0);
	for (size_t f = 0; f < sizeof(fixture) / sizeof(fixture[0]); f++) {
		ck_assert_msg(model_decode_file(fixture[f], strlen(fixture[f]), &objs, &n, &e) == 0,
		              "%s", e.msg);
		ck_assert_msg(n == 1 && objs[0].k, "%s: %s", fixture[f], objs[0].err);
		ck_assert_msg(model_create_with_status(s, objs[0].k, objs[0].obj, NULL, &e) == 0,
		              "%s", e.msg);
		model_any_free(objs, n);
	}
	return s;
}

static const struct model_outage_workload *workload(const struct model_outage *o, size_t i)
{
	ck_assert_uint_gt(o->n_workloads, i);
	return &o->workloads[i];
}

START_TEST(test_plan)
{
	char d[512];
	snprintf(d, sizeof(d), "%s", tu_mkdtemp());
	store *s = load(d);
	struct model_outage o;
	struct err e = {0};
	struct outage_query q = {.agent = "s1"};
	ck_assert_msg(outage_gather(s, &q, &o, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(o.n_volumes, 3); /* v4 is s2's */
	ck_assert_int_eq(o.volume_count, 3);
	ck_assert_int_eq(o.published_volumes, 2);
	ck_assert_int_eq(o.connected_hosts, 1);
	ck_assert(o.has_budget);
	ck_assert_int_eq(o.budget, 120);
	ck_assert(!o.has_workloads && !o.volumes[0].has_at_risk);
	ck_assert_str_eq(o.volumes[1].pv, "v2");
	ck_assert(o.volumes[1].ctrl_loss_tmo_default);
	ck_assert_int_eq(o.volumes[1].ctrl_loss_tmo, 600);
	ck_assert_str_eq(o.volumes[0].capacity, "1Gi");
	/* p1 through its ReplicaSet to the Deployment; p5 is over */
	ck_assert_int_eq(o.volumes[0].n_pods, 2);
	ck_assert_str_eq(o.volumes[0].pods[0].owner.kind, "Deployment");
	ck_assert_str_eq(o.volumes[0].pods[0].owner.name, "d1");
	ck_assert_int_eq(o.volumes[1].n_pods, 2);
	ck_assert(!o.volumes[1].pods[0].has_owner);
	model_type_clear(&model_outage_type, &o);

	/* 5 minutes: only v1 (120 s) is at risk */
	q.has_duration = true;
	q.duration_sec = 300;
	ck_assert_int_eq(outage_gather(s, &q, &o, &e), 0);
	ck_assert(o.volumes[0].at_risk && !o.volumes[1].at_risk && !o.volumes[2].at_risk);
	ck_assert_int_eq(o.n_workloads, 2);
	ck_assert_str_eq(workload(&o, 0)->stop, "kubectl scale deployment/d1 -n ns1 --replicas=0");
	ck_assert_str_eq(workload(&o, 0)->start, "kubectl scale deployment/d1 -n ns1 --replicas=4");
	ck_assert_str_eq(workload(&o, 0)->pods.v[0], "ns1/p1");
	ck_assert_str_eq(workload(&o, 1)->kind, "StatefulSet"); /* not in the store */
	ck_assert_ptr_null(workload(&o, 1)->stop);
	ck_assert_str_eq(workload(&o, 1)->note,
	                 "StatefulSet ns1/gone was not found; stop its pods by hand");
	model_type_clear(&model_outage_type, &o);

	/* 10 minutes and 1 s: v2 (the kernel's 600 s) too; never v3, which is not published */
	q.duration_sec = 601;
	ck_assert_int_eq(outage_gather(s, &q, &o, &e), 0);
	ck_assert(o.volumes[0].at_risk && o.volumes[1].at_risk && !o.volumes[2].at_risk);
	ck_assert_int_eq(o.n_workloads, 4);
	/* in the order the pods were met */
	ck_assert_str_eq(workload(&o, 1)->kind, "Pod");
	ck_assert_ptr_null(workload(&o, 1)->stop);
	ck_assert_ptr_nonnull(strstr(workload(&o, 1)->note, "kubectl delete pod p2 -n ns1"));
	ck_assert_str_eq(workload(&o, 2)->kind, "DaemonSet");
	ck_assert_ptr_nonnull(strstr(workload(&o, 2)->note, "cannot be scaled"));
	ck_assert_str_eq(workload(&o, 3)->name, "gone");
	char *json = model_outage_print(&o, false);
	ck_assert_ptr_nonnull(strstr(json, "    \"outageBudgetSeconds\": 120,\n"));
	free(json);
	model_type_clear(&model_outage_type, &o);

	q.agent = "s9";
	ck_assert_int_eq(outage_gather(s, &q, &o, &e), STORE_NOT_FOUND);
	store_close(s);
	tu_rmtree(d);
}
END_TEST

START_TEST(test_status)
{
	char d[512];
	snprintf(d, sizeof(d), "%s", tu_mkdtemp());
	store *s = load(d);
	struct model_outage o;
	struct err e = {0};
	/* 200 s after the agent became unreachable */
	struct outage_query q = {.agent = "s1", .status = true, .now = 1767225600 + 200};
	ck_assert_msg(outage_gather(s, &q, &o, &e) == 0, "%s", e.msg);
	ck_assert(o.has_reachable && !o.reachable);
	ck_assert_str_eq(o.unreachable_since, "2026-01-01T00:00:00Z");
	ck_assert_str_eq(o.agent_connected.reason, "HealthCheckFailed");
	ck_assert(!o.has_exports_ready);
	ck_assert(o.volumes[0].given_up && o.volumes[0].seconds_left == 0);
	ck_assert(!o.volumes[1].given_up);
	ck_assert_int_eq(o.volumes[1].seconds_left, 400);
	ck_assert(!o.volumes[2].has_seconds_left && !o.volumes[2].has_given_up);
	ck_assert_int_eq(o.volumes[0].n_pods, 0);
	model_type_clear(&model_outage_type, &o);
	store_close(s);
	tu_rmtree(d);
}
END_TEST

/* -o yaml: strings that would read back as something else are quoted, and the text parses back
 * to the same JSON. */
START_TEST(test_yaml_emit)
{
	const char *doc = "{\"b\":[\"600\",\"true\",\"\",\"1Gi\",\"a: b\",\"-1\",\"null\","
	                  "\".5\"],\"a\":{\"n\":-1,\"t\":true,\"big\":9007199254740993},\"e\":[]}";
	cJSON *j = NULL, *back = NULL;
	ck_assert_int_eq(json_parse_strict(doc, strlen(doc), &j, NULL), 0);
	char *y = yaml_emit(j);
	ck_assert_str_eq(y, "a:\n  big: 9007199254740993\n  'n': -1\n  t: true\nb:\n- '600'\n- "
	                    "'true'\n- ''\n- 1Gi\n- 'a: b'\n- '-1'\n- 'null'\n- '.5'\ne: []\n");
	ck_assert_int_eq(yaml_doc_parse(y, strlen(y), &back, NULL), 0);
	ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(back, "b"), 0)->valuestring, "600");
	cJSON_Delete(back);
	cJSON_Delete(j);
	free(y);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("outage");
	TCase *t = tcase_create("outage");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_effective_tunables);
	tcase_add_test(t, test_budget);
	tcase_add_test(t, test_plan);
	tcase_add_test(t, test_status);
	tcase_add_test(t, test_yaml_emit);
	suite_add_tcase(s, t);
	return tu_run(s);
}
