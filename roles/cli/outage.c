/* outage: the outage-plan / outage-status document from the store (cli/outage.h). */
#include "cli/outage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/kube.h"
#include "rules/conditions.h"

struct gather {
	store *s;
	const struct outage_query *q;
	struct model_outage *o;
	struct model_outage_workload *owners; /* every owner met (plan), the doc keeps the used */
	size_t n_owners;
	bool agent_unavailable; /* model_pa_exports_unavailable of the agent */
	struct err *e;
};

static int oom(struct err *e)
{
	return err_set(e, -ENOMEM, "out of memory");
}

/* ---- volumes ------------------------------------------------------------------------------- */

/* PV name, claim, size and tunables of one PillarVolumeState; the PV (when the store has it)
 * gives the current size and, for a record without a resolved protocol, the tunables. */
static int volume_of(struct gather *g, const struct model_pvst *v, struct model_outage_volume *out)
{
	struct model_pv pv = {0};
	struct model_nvmeof_tcp from_pv;
	const struct model_nvmeof_tcp *n = model_pvst_nvmeof_tcp(v);
	char q[32];
	int r = model_get(g->s, &model_pv_kind, NULL, v->meta.name, &pv, g->e);
	if (r < 0 && r != STORE_NOT_FOUND)
		return r;
	bool have_pv = r == 0;
	r = model_str_set(&out->pv, v->meta.name);
	if (have_pv && pv.spec.capacity.storage)
		r |= model_str_set(&out->capacity, pv.spec.capacity.storage);
	else if (v->spec.has_capacity_bytes)
		model_quantity_format(v->spec.capacity_bytes, q, sizeof(q)),
		    r |= model_str_set(&out->capacity, q);
	if (v->spec.has_claim_ref && v->spec.claim_ref.name) {
		out->has_claim = true;
		r |= model_str_set(&out->claim.ns, v->spec.claim_ref.ns);
		r |= model_str_set(&out->claim.name, v->spec.claim_ref.name);
	} else if (have_pv && pv.spec.has_claim_ref && pv.spec.claim_ref.name) {
		out->has_claim = true;
		r |= model_str_set(&out->claim.ns, pv.spec.claim_ref.ns);
		r |= model_str_set(&out->claim.name, pv.spec.claim_ref.name);
	}
	if (!n && have_pv && pv.spec.has_csi &&
	    model_nvmeof_tcp_from_attributes(&pv.spec.csi.volume_attributes, &from_pv) == 0)
		n = &from_pv;
	model_clear(&model_pv_kind, &pv);
	out->ctrl_loss_tmo = model_ctrl_loss_tmo(n, &out->ctrl_loss_tmo_default);
	out->reconnect_delay = model_reconnect_delay(n, &out->reconnect_delay_default);
	out->has_ctrl_loss_tmo = out->has_ctrl_loss_tmo_default = true;
	out->has_reconnect_delay = out->has_reconnect_delay_default = true;
	out->has_published_nodes = true;
	for (size_t i = 0; i < v->status.n_published; i++)
		if (v->status.published[i].node_id)
			r |= model_strs_add(&out->published_nodes, v->status.published[i].node_id);
	const char *status, *reason;
	model_pvst_export_reconciled(v, g->agent_unavailable, &status, &reason);
	if (*reason)
		r |= model_str_set(&out->export_reconciled, reason);
	out->has_pods = !g->q->status;
	return r ? oom(g->e) : 0;
}

/* The budget and the counts of the volumes (model/outage.h). */
static int count(struct gather *g, const struct model_pvst *all, size_t n)
{
	struct model_agent_counts c = {0};
	struct model_outage *o = g->o;
	for (size_t i = 0, k = 0; i < n; i++) {
		if (!all[i].spec.agent_ref || strcmp(all[i].spec.agent_ref, g->q->agent))
			continue;
		struct model_nvmeof_tcp t = {0};
		t.has_ctrl_loss_tmo = !o->volumes[k].ctrl_loss_tmo_default;
		t.ctrl_loss_tmo = o->volumes[k++].ctrl_loss_tmo;
		if (model_agent_counts_add(&c, &all[i], &t) < 0) {
			model_agent_counts_clear(&c);
			return oom(g->e);
		}
	}
	o->has_volume_count = o->has_published_volumes = o->has_connected_hosts = true;
	o->volume_count = c.volumes;
	o->published_volumes = c.published;
	o->connected_hosts = (int64_t)c.hosts.n;
	o->has_budget = c.has_budget;
	o->budget = c.budget;
	model_agent_counts_clear(&c);
	return 0;
}

static int volumes(struct gather *g)
{
	struct model_pvst *all = NULL;
	size_t n = 0, k = 0;
	int r = model_list(g->s, &model_pvst_kind, NULL, NULL, (void **)&all, &n, NULL, g->e);
	if (r < 0)
		return r;
	g->o->has_volumes = true;
	g->o->volumes = calloc(n + 1, sizeof(*g->o->volumes));
	if (!g->o->volumes)
		r = oom(g->e);
	for (size_t i = 0; i < n && r == 0; i++)
		if (all[i].spec.agent_ref && !strcmp(all[i].spec.agent_ref, g->q->agent)) {
			g->o->n_volumes = ++k;
			r = volume_of(g, &all[i], &g->o->volumes[k - 1]);
		}
	if (r == 0)
		r = count(g, all, n);
	model_list_free(&model_pvst_kind, all, n);
	return r;
}

/* ---- pods and their owners ------------------------------------------------------------------- */

static const struct model_owner_ref *controller_of(const struct model_meta *m)
{
	for (size_t i = 0; i < m->n_owner_refs; i++)
		if (m->owner_refs[i].has_controller && m->owner_refs[i].controller)
			return &m->owner_refs[i];
	return m->n_owner_refs ? &m->owner_refs[0] : NULL;
}

/* The scale commands of a workload kubectl can scale, or what to do instead. */
static int advise(struct model_outage_workload *w)
{
	static const struct {
		const char *kind, *resource;
	} scalable[] = {{"Deployment", "deployment"},
	                {"StatefulSet", "statefulset"},
	                {"ReplicaSet", "replicaset"}};
	char buf[600];
	for (size_t i = 0; i < sizeof(scalable) / sizeof(scalable[0]); i++) {
		if (strcmp(w->kind, scalable[i].kind) || !w->has_replicas)
			continue;
		snprintf(buf, sizeof(buf), "kubectl scale %s/%s -n %s --replicas=0",
		         scalable[i].resource, w->name, w->ns);
		int r = model_str_set(&w->stop, buf);
		snprintf(buf, sizeof(buf), "kubectl scale %s/%s -n %s --replicas=%lld",
		         scalable[i].resource, w->name, w->ns, (long long)w->replicas);
		return r | model_str_set(&w->start, buf);
	}
	if (!strcmp(w->kind, "Pod"))
		snprintf(buf, sizeof(buf),
		         "a pod without a controller cannot be scaled: delete it before the "
		         "maintenance (kubectl delete pod %s -n %s) and create it again from its "
		         "manifest afterwards",
		         w->name, w->ns);
	else if (!strcmp(w->kind, "DaemonSet"))
		snprintf(buf, sizeof(buf),
		         "a DaemonSet cannot be scaled to zero: delete it before the maintenance "
		         "(kubectl delete daemonset %s -n %s) and apply its manifest again "
		         "afterwards, or accept that its pods' volumes fail",
		         w->name, w->ns);
	else if (!strcmp(w->kind, "Job"))
		snprintf(buf, sizeof(buf),
		         "a Job cannot be scaled: let it finish before the maintenance, or suspend "
		         "it (kubectl patch job %s -n %s --type=merge -p "
		         "'{\"spec\":{\"suspend\":true}}') and resume it afterwards with "
		         "\"suspend\":false",
		         w->name, w->ns);
	else if (!w->has_replicas && strcmp(w->kind, "ReplicaSet") &&
	         strcmp(w->kind, "Deployment") && strcmp(w->kind, "StatefulSet"))
		snprintf(buf, sizeof(buf),
		         "outage-plan does not know how to stop a %s: stop it by that controller's "
		         "own means",
		         w->kind);
	else
		snprintf(buf, sizeof(buf), "%s %s/%s was not found; stop its pods by hand", w->kind,
		         w->ns, w->name);
	return model_str_set(&w->note, buf);
}

/* The replica count of a scalable workload (has_replicas stays false when it is not found). */
static int read_replicas(struct gather *g, struct model_outage_workload *w)
{
	const struct model_kind *k = !strcmp(w->kind, "Deployment")    ? &model_deployment_kind
	                             : !strcmp(w->kind, "StatefulSet") ? &model_statefulset_kind
	                             : !strcmp(w->kind, "ReplicaSet")  ? &model_replicaset_kind
	                                                               : NULL;
	struct model_workload obj = {0};
	if (!k)
		return 0;
	int r = model_get(g->s, k, w->ns, w->name, &obj, g->e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	w->has_replicas = true;
	w->replicas = model_workload_replicas(&obj);
	model_clear(k, &obj);
	return 0;
}

/* The workload of kind/ns/name in g->owners (added, with its replicas and advice, when new). */
static int owner_entry(struct gather *g, const char *kind, const char *ns, const char *name,
                       size_t *idx)
{
	for (size_t i = 0; i < g->n_owners; i++)
		if (!strcmp(g->owners[i].kind, kind) && !strcmp(g->owners[i].ns, ns) &&
		    !strcmp(g->owners[i].name, name)) {
			*idx = i;
			return 0;
		}
	struct model_outage_workload *grown =
	    realloc(g->owners, (g->n_owners + 1) * sizeof(*g->owners));
	if (!grown)
		return oom(g->e);
	g->owners = grown;
	struct model_outage_workload *w = &g->owners[g->n_owners++];
	memset(w, 0, sizeof(*w));
	*idx = g->n_owners - 1;
	if (model_str_set(&w->kind, kind) | model_str_set(&w->ns, ns) |
	    model_str_set(&w->name, name))
		return oom(g->e);
	int r = read_replicas(g, w);
	return r < 0 ? r : advise(w) < 0 ? oom(g->e) : 0;
}

/* The workload that owns pod p: its controller, following a ReplicaSet to its Deployment. */
static int owner_of(struct gather *g, const struct model_pod *p, size_t *idx)
{
	const struct model_owner_ref *o = controller_of(&p->meta);
	const char *ns = p->meta.ns ? p->meta.ns : "";
	if (!o || !o->kind || !o->name)
		return owner_entry(g, "Pod", ns, p->meta.name ? p->meta.name : "", idx);
	if (!strcmp(o->kind, "ReplicaSet")) {
		struct model_workload rs = {0};
		int r = model_get(g->s, &model_replicaset_kind, ns, o->name, &rs, g->e);
		if (r < 0 && r != STORE_NOT_FOUND)
			return r;
		const struct model_owner_ref *d = r == 0 ? controller_of(&rs.meta) : NULL;
		if (d && d->kind && d->name && !strcmp(d->kind, "Deployment")) {
			r = owner_entry(g, "Deployment", ns, d->name, idx);
			model_clear(&model_replicaset_kind, &rs);
			return r;
		}
		model_clear(&model_replicaset_kind, &rs);
	}
	return owner_entry(g, o->kind, ns, o->name, idx);
}

static struct model_outage_volume *volume_of_claim(struct gather *g, const char *ns,
                                                   const char *claim)
{
	for (size_t i = 0; i < g->o->n_volumes; i++) {
		struct model_outage_volume *v = &g->o->volumes[i];
		if (v->has_claim && v->claim.ns && v->claim.name && !strcmp(v->claim.ns, ns) &&
		    !strcmp(v->claim.name, claim))
			return v;
	}
	return NULL;
}

/* Adds pod p to volume v's pods, with its owner. */
static int add_pod(struct gather *g, struct model_outage_volume *v, const struct model_pod *p)
{
	size_t idx;
	int r = owner_of(g, p, &idx);
	if (r < 0)
		return r;
	struct model_outage_pod *grown = realloc(v->pods, (v->n_pods + 1) * sizeof(*v->pods));
	if (!grown)
		return oom(g->e);
	v->pods = grown;
	struct model_outage_pod *op = &v->pods[v->n_pods++];
	memset(op, 0, sizeof(*op));
	const struct model_outage_workload *w = &g->owners[idx];
	r = model_str_set(&op->ns, p->meta.ns) | model_str_set(&op->name, p->meta.name) |
	    model_str_set(&op->node, p->spec.node_name);
	if (strcmp(w->kind, "Pod")) {
		op->has_owner = true;
		r |= model_str_set(&op->owner.kind, w->kind) |
		     model_str_set(&op->owner.name, w->name);
	}
	return r ? oom(g->e) : 0;
}

/* Every pod of the namespace ns that is not over and names a claim of the volumes. */
static int pods_in(struct gather *g, const char *ns)
{
	struct model_pod *pods = NULL;
	size_t n = 0;
	int r = model_list(g->s, &model_pod_kind, ns, NULL, (void **)&pods, &n, NULL, g->e);
	for (size_t i = 0; i < n && r == 0; i++) {
		const struct model_pod *p = &pods[i];
		const char *phase = p->status.phase ? p->status.phase : "";
		if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))
			continue; /* its containers are gone: it holds no volume */
		for (size_t j = 0; j < p->spec.n_volumes && r == 0; j++) {
			const struct model_pod_volume *pv = &p->spec.volumes[j];
			struct model_outage_volume *v =
			    pv->has_pvc && pv->pvc.claim_name
			        ? volume_of_claim(g, ns, pv->pvc.claim_name)
			        : NULL;
			if (v)
				r = add_pod(g, v, p);
		}
	}
	model_list_free(&model_pod_kind, pods, n);
	return r;
}

/* The pods of every namespace a volume's claim lives in, each namespace listed once. */
static int pods(struct gather *g)
{
	int r = 0;
	for (size_t i = 0; i < g->o->n_volumes && r == 0; i++) {
		const struct model_outage_volume *v = &g->o->volumes[i];
		bool seen = !v->has_claim || !v->claim.ns;
		for (size_t j = 0; j < i && !seen; j++)
			seen = g->o->volumes[j].has_claim && g->o->volumes[j].claim.ns &&
			       !strcmp(g->o->volumes[j].claim.ns, v->claim.ns);
		if (!seen)
			r = pods_in(g, v->claim.ns);
	}
	return r;
}

/* ---- the duration: volumes at risk and the workloads to stop ------------------------------ */

static size_t owner_index(const struct gather *g, const struct model_outage_pod *p)
{
	const char *kind = p->has_owner ? p->owner.kind : "Pod";
	const char *name = p->has_owner ? p->owner.name : p->name;
	for (size_t i = 0; i < g->n_owners; i++)
		if (!strcmp(g->owners[i].kind, kind) && !strcmp(g->owners[i].ns, p->ns) &&
		    !strcmp(g->owners[i].name, name))
			return i;
	return (size_t)-1;
}

/* Moves the owners of the pods of at-risk volumes into the document, in the order met. */
static int at_risk(struct gather *g)
{
	struct model_outage *o = g->o;
	bool *used = calloc(g->n_owners + 1, sizeof(bool));
	int r = used ? 0 : oom(g->e);
	for (size_t i = 0; i < o->n_volumes && r == 0; i++) {
		struct model_outage_volume *v = &o->volumes[i];
		v->has_at_risk = true;
		v->at_risk = v->published_nodes.n > 0 && v->ctrl_loss_tmo >= 0 &&
		             v->ctrl_loss_tmo < g->q->duration_sec;
		for (size_t j = 0; v->at_risk && j < v->n_pods && r == 0; j++) {
			size_t k = owner_index(g, &v->pods[j]);
			char pod[600];
			snprintf(pod, sizeof(pod), "%s/%s", v->pods[j].ns, v->pods[j].name);
			if (k != (size_t)-1 && !model_strs_has(&g->owners[k].pods, pod))
				r = model_strs_add(&g->owners[k].pods, pod) < 0 ? oom(g->e) : 0;
			if (k != (size_t)-1)
				used[k] = true;
		}
	}
	o->has_workloads = true;
	o->workloads = r == 0 ? calloc(g->n_owners + 1, sizeof(*o->workloads)) : NULL;
	if (r == 0 && !o->workloads)
		r = oom(g->e);
	for (size_t k = 0; k < g->n_owners && r == 0; k++)
		if (used[k]) {
			o->workloads[o->n_workloads++] = g->owners[k];
			memset(&g->owners[k], 0, sizeof(g->owners[k]));
		}
	free(used);
	return r;
}

/* ---- status ---------------------------------------------------------------------------------- */

static int cond_of(const struct model_conds *cs, const char *type, bool *has,
                   struct model_outage_cond *out)
{
	const struct model_cond *c = model_cond_get(cs, type);
	if (!c)
		return 0;
	*has = true;
	return model_str_set(&out->status, c->status) | model_str_set(&out->reason, c->reason) |
	       model_str_set(&out->message, c->message) |
	       model_str_set(&out->since, c->last_transition_time);
}

/* Seconds since the epoch of an RFC 3339 time in UTC, or -1. */
static long long epoch_of(const char *t)
{
	struct tm tm = {0};
	const char *end = t ? strptime(t, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!end || (*end != 'Z' && *end != '.'))
		return -1;
	return (long long)timegm(&tm);
}

/* Reachability, the conditions and each published volume's countdown. */
static int status_of(struct gather *g, const struct model_pa *pa)
{
	struct model_outage *o = g->o;
	const struct model_conds *cs = &pa->status.conditions;
	int r =
	    cond_of(cs, RULES_COND_AGENT_CONNECTED, &o->has_agent_connected, &o->agent_connected) |
	    cond_of(cs, RULES_COND_EXPORTS_READY, &o->has_exports_ready, &o->exports_ready);
	o->has_reachable = true;
	o->reachable = !strcmp(model_cond_status(cs, RULES_COND_AGENT_CONNECTED), "True");
	long long since = -1;
	if (!o->reachable && o->agent_connected.since) {
		r |= model_str_set(&o->unreachable_since, o->agent_connected.since);
		since = epoch_of(o->agent_connected.since);
	}
	for (size_t i = 0; i < o->n_volumes && since >= 0; i++) {
		struct model_outage_volume *v = &o->volumes[i];
		if (v->published_nodes.n == 0)
			continue;
		v->has_given_up = true;
		if (v->ctrl_loss_tmo < 0)
			continue; /* -1: the kernels retry for ever */
		long long left = since + v->ctrl_loss_tmo - (long long)g->q->now;
		v->has_seconds_left = true;
		v->seconds_left = left > 0 ? left : 0;
		v->given_up = left <= 0;
	}
	return r ? oom(g->e) : 0;
}

int outage_gather(store *s, const struct outage_query *q, struct model_outage *out, struct err *e)
{
	struct gather g = {.s = s, .q = q, .o = out, .e = e};
	struct model_pa pa = {0};
	memset(out, 0, sizeof(*out));
	int r = model_get(s, &model_pa_kind, NULL, q->agent, &pa, e);
	if (r < 0)
		return r;
	g.agent_unavailable = model_pa_exports_unavailable(&pa);
	if (model_str_set(&out->kind, q->status ? "OutageStatus" : "OutagePlan") < 0 ||
	    model_str_set(&out->agent, q->agent) < 0)
		r = oom(e);
	if (r == 0)
		r = volumes(&g);
	if (r == 0 && !q->status)
		r = pods(&g);
	if (r == 0 && !q->status && q->has_duration) {
		out->has_duration = true;
		out->duration = q->duration_sec;
		r = at_risk(&g);
	}
	if (r == 0 && q->status)
		r = status_of(&g, &pa);
	for (size_t i = 0; i < g.n_owners; i++)
		model_type_clear(&model_outage_workload_type, &g.owners[i]);
	free(g.owners);
	model_clear(&model_pa_kind, &pa);
	if (r < 0)
		model_type_clear(&model_outage_type, out);
	return r;
}
