/* model outage: effective tunables, the budget and the outage documents (model/outage.h). */
#include "model/outage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/yaml.h"
#include "model/codec.h"
#include "model/kpath.h"
#include "rules/conditions.h"
#include "rules/keys.h"

int64_t model_ctrl_loss_tmo(const struct model_nvmeof_tcp *n, bool *kernel_default)
{
	bool set = n && n->has_ctrl_loss_tmo;
	if (kernel_default)
		*kernel_default = !set;
	return set ? n->ctrl_loss_tmo : MODEL_KERNEL_CTRL_LOSS_TMO;
}

int64_t model_reconnect_delay(const struct model_nvmeof_tcp *n, bool *kernel_default)
{
	bool set = n && n->has_reconnect_delay;
	if (kernel_default)
		*kernel_default = !set;
	return set ? n->reconnect_delay : MODEL_KERNEL_RECONNECT_DELAY;
}

const struct model_nvmeof_tcp *model_pvst_nvmeof_tcp(const struct model_pvst *v)
{
	const struct model_resolved *r = &v->spec.resolved;
	return v->spec.has_resolved && r->has_protocol && r->protocol.has_nvmeof_tcp
	           ? &r->protocol.nvmeof_tcp
	           : NULL;
}

static int attribute(const struct model_map *attrs, const char *key, bool *has, int64_t *v)
{
	const char *s = model_map_get(attrs, key);
	char *end;
	if (!s)
		return 0;
	long long x = strtoll(s, &end, 10);
	if (!*s || *end || x < -1 || x > INT32_MAX)
		return -EINVAL;
	*has = true;
	*v = x;
	return 0;
}

int model_nvmeof_tcp_from_attributes(const struct model_map *attrs, struct model_nvmeof_tcp *out)
{
	memset(out, 0, sizeof(*out));
	int r =
	    attribute(attrs, RULES_CTX_CTRL_LOSS_TMO, &out->has_ctrl_loss_tmo, &out->ctrl_loss_tmo);
	if (r == 0)
		r = attribute(attrs, RULES_CTX_RECONNECT_DELAY, &out->has_reconnect_delay,
		              &out->reconnect_delay);
	return r;
}

int model_agent_counts_add(struct model_agent_counts *c, const struct model_pvst *v,
                           const struct model_nvmeof_tcp *n)
{
	c->volumes++;
	if (v->status.n_published == 0)
		return 0;
	c->published++;
	for (size_t i = 0; i < v->status.n_published; i++) {
		const char *node = v->status.published[i].node_id;
		if (node && !model_strs_has(&c->hosts, node) && model_strs_add(&c->hosts, node) < 0)
			return -ENOMEM;
	}
	int64_t t = model_ctrl_loss_tmo(n, NULL);
	if (t >= 0 && (!c->has_budget || t < c->budget)) {
		c->has_budget = true;
		c->budget = t;
	}
	return 0;
}

void model_agent_counts_clear(struct model_agent_counts *c)
{
	model_strs_clear(&c->hosts);
	memset(c, 0, sizeof(*c));
}

/* ---- the documents ---------------------------------------------------------------------------- */

#define T struct model_outage_ref
static const struct model_field ref_fields[] = {
    MODEL_F_STR("kind", kind),
    MODEL_F_STR("namespace", ns),
    MODEL_F_STR("name", name),
};
#undef T
static MODEL_TYPE(ref_type, struct model_outage_ref, ref_fields);

#define T struct model_outage_pod
static const struct model_field pod_fields[] = {
    MODEL_F_STR("namespace", ns),
    MODEL_F_STR("name", name),
    MODEL_F_STR("node", node),
    MODEL_F_OBJ_HAS("owner", owner, &ref_type),
};
#undef T
static MODEL_TYPE(pod_type, struct model_outage_pod, pod_fields);

#define T struct model_outage_volume
static const struct model_field volume_fields[] = {
    MODEL_F_STR("pv", pv),
    MODEL_F_OBJ_HAS("claim", claim, &ref_type),
    MODEL_F_STR("capacity", capacity),
    MODEL_F_INT("ctrlLossTmoSeconds", ctrl_loss_tmo),
    MODEL_F_BOOL("ctrlLossTmoKernelDefault", ctrl_loss_tmo_default),
    MODEL_F_INT("reconnectDelaySeconds", reconnect_delay),
    MODEL_F_BOOL("reconnectDelayKernelDefault", reconnect_delay_default),
    MODEL_F_STRS_HAS("publishedNodes", published_nodes),
    MODEL_F_LIST_HAS("pods", pods, n_pods, &pod_type),
    MODEL_F_BOOL("atRisk", at_risk),
    MODEL_F_STR("exportReconciled", export_reconciled),
    MODEL_F_INT("secondsLeft", seconds_left),
    MODEL_F_BOOL("givenUp", given_up),
};
#undef T
static MODEL_TYPE(volume_type, struct model_outage_volume, volume_fields);

#define T struct model_outage_workload
static const struct model_field workload_fields[] = {
    MODEL_F_STR("kind", kind),         MODEL_F_STR("namespace", ns), MODEL_F_STR("name", name),
    MODEL_F_INT("replicas", replicas), MODEL_F_STRS("pods", pods),   MODEL_F_STR("stop", stop),
    MODEL_F_STR("start", start),       MODEL_F_STR("note", note),
};
#undef T
MODEL_TYPE(model_outage_workload_type, struct model_outage_workload, workload_fields);

#define T struct model_outage_cond
static const struct model_field cond_fields[] = {
    MODEL_F_STR("status", status),
    MODEL_F_STR("reason", reason),
    MODEL_F_STR("message", message),
    MODEL_F_STR("since", since),
};
#undef T
static MODEL_TYPE(cond_type, struct model_outage_cond, cond_fields);

#define T struct model_outage
static const struct model_field outage_fields[] = {
    MODEL_F_STR("kind", kind),
    MODEL_F_STR("agent", agent),
    MODEL_F_INT("volumeCount", volume_count),
    MODEL_F_INT("publishedVolumes", published_volumes),
    MODEL_F_INT("connectedHosts", connected_hosts),
    MODEL_F_INT("outageBudgetSeconds", budget),
    MODEL_F_INT("durationSeconds", duration),
    MODEL_F_BOOL("reachable", reachable),
    MODEL_F_STR("unreachableSince", unreachable_since),
    MODEL_F_OBJ_HAS("agentConnected", agent_connected, &cond_type),
    MODEL_F_OBJ_HAS("exportsReady", exports_ready, &cond_type),
    MODEL_F_LIST_HAS("volumes", volumes, n_volumes, &volume_type),
    MODEL_F_LIST_HAS("workloads", workloads, n_workloads, &model_outage_workload_type),
};
#undef T
MODEL_TYPE(model_outage_type, struct model_outage, outage_fields);

char *model_outage_print(const struct model_outage *o, bool yaml)
{
	char *text = model_type_encode_text(&model_outage_type, o), *out = NULL;
	cJSON *doc = NULL;
	if (text && json_parse_strict(text, strlen(text), &doc, NULL) == 0) {
		if (yaml)
			out = yaml_emit(doc);
		else if (model_kpath_json(doc, &out) < 0)
			out = NULL;
	}
	cJSON_Delete(doc);
	free(text);
	return out;
}

bool model_pa_exports_unavailable(const struct model_pa *pa)
{
	const struct model_conds *cs = &pa->status.conditions;
	return strcmp(model_cond_status(cs, RULES_COND_AGENT_CONNECTED), "True") != 0 ||
	       strcmp(model_cond_status(cs, RULES_COND_EXPORTS_READY), "True") != 0;
}

void model_pvst_export_reconciled(const struct model_pvst *v, bool agent_unavailable,
                                  const char **status, const char **reason)
{
	const struct model_conds *cs = &v->status.conditions;
	*status = model_cond_status(cs, RULES_COND_EXPORT_RECONCILED);
	*reason = model_cond_reason(cs, RULES_COND_EXPORT_RECONCILED);
	bool eligible = v->status.has_export_spec &&
	                !(v->status.has_deleting && v->status.deleting) &&
	                strcmp(v->status.phase ? v->status.phase : "", "Provisioning") != 0;
	if (agent_unavailable && eligible && strcmp(*reason, RULES_REASON_EXPORT_SPEC_MISSING)) {
		*status = "False";
		*reason = RULES_REASON_AGENT_UNAVAILABLE;
	}
}
