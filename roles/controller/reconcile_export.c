/* reconcile_export — ReconcileState requests built from PillarVolumeStates: the full restore
 * (agent-api.md §12.2), the per-volume and per-agent resyncs (§12.3) and the mapping of the
 * results to ExportReconciled (§12.4). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agents.h"
#include "controller/pvst.h"
#include "controller/reconcile.h"
#include "rules/conditions.h"

struct rvol {
	struct model_pvst v;
	bool ics;
	PillarCsi__Agent__V1__VolumeDesiredState vds;
	PillarCsi__Agent__V1__ExportDesiredState eds, *edsp;
	PillarCsi__Agent__V1__ExportParams ep;
	PillarCsi__Agent__V1__NvmeofTcpExportParams np;
	PillarCsi__Agent__V1__FencingToken tok;
	struct pvst_backend_buf bb;
	char **inits;
};

struct recon_set {
	const char *reason, *message;
};

static int m_exportcond(struct model_pvst *v, void *arg, struct grpc_status *gs)
{
	(void)gs;
	struct recon_set *s = arg;
	bool ok = !strcmp(s->reason, RULES_REASON_RECONCILED);
	int r = model_cond_set(&v->status.conditions, RULES_COND_EXPORT_RECONCILED,
	                       ok ? "True" : "False", s->reason, s->message, v->meta.generation);
	return r > 0 ? 0 : r == 0 ? PVST_SKIP : grpc_status_oom(gs);
}

void reconcile_set_export_cond(struct ctl *c, const struct model_pvst *v, const char *reason,
                               const char *msg)
{
	struct recon_set s = {reason, msg ? msg : ""};
	struct grpc_status gs = {0};
	pvst_update(c, v->meta.name, v->meta.uid, m_exportcond, &s, NULL, &gs);
}

/* ExportReconciled of a volume read under its lock: a write only when the condition differs
 * from that copy (which follows the change), so an unchanged outcome costs no store access, and
 * a changed one is written from that copy (conditional on its resourceVersion) without reading
 * it again; only a conflict re-reads. */
static void set_cond_if_changed(struct ctl *c, struct model_pvst *v, const char *reason,
                                const char *msg)
{
	struct recon_set s = {reason, msg ? msg : ""};
	struct grpc_status gs = {0};
	if (m_exportcond(v, &s, &gs) == PVST_SKIP)
		return;
	if (model_update_status(c->st, &model_pvst_kind, v, NULL, NULL) != STORE_CONFLICT)
		return; /* written, or gone / unwritable: as pvst_update would leave it */
	reconcile_set_export_cond(c, v, reason, msg);
}

static int cmp_rvol(const void *a, const void *b)
{
	const struct rvol *x = *(struct rvol *const *)a, *y = *(struct rvol *const *)b;
	if (x->ics != y->ics)
		return x->ics ? -1 : 1;
	return strcmp(x->v.meta.name, y->v.meta.name);
}

/* The hosts a volume's export admits: publishedNodes that are not being revoked. */
/* 0 or -ENOMEM. */
static int initiators(struct rvol *x)
{
	const struct model_pvst *v = &x->v;
	x->inits = calloc(v->status.n_published + 1, sizeof(char *));
	if (!x->inits)
		return -ENOMEM;
	for (size_t i = 0; i < v->status.n_published; i++) {
		const struct model_pvst_published *p = &v->status.published[i];
		if (!(p->has_revoking && p->revoking) && p->initiator_id)
			x->inits[x->eds.n_allowed_initiators++] = p->initiator_id;
	}
	x->eds.allowed_initiators = x->inits;
	return 0;
}

/* Fills x from the PillarVolumeState in x->v, which has an exportSpec (agent-api.md §12.2
 * step 3); 0 or -ENOMEM. */
static int build(struct rvol *x)
{
	const struct model_pvst *v = &x->v;
	const struct model_pvst_export_spec *es = &v->status.export_spec;
	x->ics = es->has_in_capsule_data_size && es->in_capsule_data_size > 0;
	pillar_csi__agent__v1__volume_desired_state__init(&x->vds);
	pillar_csi__agent__v1__export_desired_state__init(&x->eds);
	pillar_csi__agent__v1__export_params__init(&x->ep);
	pillar_csi__agent__v1__nvmeof_tcp_export_params__init(&x->np);
	pillar_csi__agent__v1__fencing_token__init(&x->tok);
	x->vds.volume_id = v->spec.agent_volume_id ?: "";
	x->vds.backend_type = agents_backend_enum(v->spec.backend_type ?: "");
	if (pvst_backend_params(&x->bb, v, &x->vds.backend_params) < 0)
		return -ENOMEM;
	x->vds.device_path = v->status.backend_device_path ?: "";
	x->tok.volume_uid = v->meta.uid ?: "";
	x->tok.generation = pvst_gen(v);
	x->vds.fence = &x->tok;
	x->np.bind_address = es->bind_address ?: "";
	x->np.port = es->has_port ? (int32_t)es->port : 0;
	x->np.in_capsule_data_size =
	    es->has_in_capsule_data_size ? (int32_t)es->in_capsule_data_size : 0;
	x->ep.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	x->ep.nvmeof_tcp = &x->np;
	x->eds.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	x->eds.export_params = &x->ep;
	x->eds.acl_enabled = es->has_acl_enabled && es->acl_enabled;
	if (initiators(x) < 0)
		return -ENOMEM;
	x->edsp = &x->eds;
	x->vds.n_exports = 1;
	x->vds.exports = &x->edsp;
	return 0;
}

/* The ExportReconciled reason and message of one volume after the RPC (§12.4). */
static void map_result(int r, const struct grpc_status *ast,
                       const PillarCsi__Agent__V1__ReconcileStateResponse *resp,
                       const char *volume_id, const char **reason, const char **msg)
{
	*reason = RULES_REASON_AGENT_UNAVAILABLE;
	*msg = ast->msg;
	if (r == GRPC_OK) {
		*reason = RULES_REASON_RECONCILE_FAILED;
		*msg = "the agent returned no result for this volume";
		for (size_t k = 0; resp && k < resp->n_results; k++) {
			const PillarCsi__Agent__V1__VolumeReconcileResult *res = resp->results[k];
			if (!res->volume_id || strcmp(res->volume_id, volume_id))
				continue;
			if (res->success) {
				*reason = RULES_REASON_RECONCILED;
				*msg = "";
			} else {
				static const char stale[] =
				    "FAILED_PRECONDITION: stale fencing token";
				*msg = res->error_message ? res->error_message : "";
				*reason = !strncmp(*msg, stale, sizeof(stale) - 1)
				              ? RULES_REASON_STALE_GENERATION
				              : RULES_REASON_RECONCILE_FAILED;
			}
			break;
		}
	} else if (r != GRPC_UNAVAILABLE && r != GRPC_DEADLINE_EXCEEDED) {
		*reason = RULES_REASON_RECONCILE_FAILED;
	}
}

/* A volume the resync looks at: not deleting, past Provisioning (§12.3). */
static bool eligible(const struct model_pvst *v)
{
	const char *phase = v->status.phase ?: "";
	return !(v->status.has_deleting && v->status.deleting) && phase[0] &&
	       strcmp(phase, "Provisioning");
}

/* The volumes to look at: PillarVolumeState `only`, or every volume of the agent, whose listed
 * objects then stay in *items (*m of them; the caller frees them). */
static int volume_names(struct ctl *c, const char *agent, const char *only,
                        struct model_strs *names, struct model_pvst **items, size_t *m,
                        struct grpc_status *gs)
{
	char sel[400];
	struct err e = {0};
	size_t n = 0;
	memset(names, 0, sizeof(*names));
	*items = NULL;
	*m = 0;
	if (only) {
		struct model_pvst one;
		int g = model_get(c->st, &model_pvst_kind, NULL, only, &one, &e);
		model_clear(&model_pvst_kind, &one);
		if (g == STORE_NOT_FOUND)
			return GRPC_OK; /* nothing to look at */
		if (g < 0)
			return grpc_status_set(gs, GRPC_UNAVAILABLE,
			                       "reading PillarVolumeState \"%s\": %s", only, e.msg);
		return model_strs_add(names, only) < 0 ? grpc_status_oom(gs) : GRPC_OK;
	}
	snprintf(sel, sizeof(sel), RULES_LABEL_AGENT "=%s", agent);
	if (model_list(c->st, &model_pvst_kind, NULL, sel, (void **)items, &n, NULL, &e) < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "listing volumes of agent \"%s\": %s",
		                       agent, e.msg);
	*m = n;
	for (size_t i = 0; i < n; i++)
		if (model_strs_add(names, (*items)[i].meta.name) < 0)
			return grpc_status_oom(gs);
	return GRPC_OK;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Builds x->v (read under its lock) when it is eligible; 1 when built, 0 when not, -ENOMEM.
 * Volumes without exportSpec get ExportSpecMissing.  x is cleared when not built. */
static int take(struct ctl *c, const char *agent, const char *only, struct rvol *x)
{
	const char *ref = x->v.spec.agent_ref;
	if (!eligible(&x->v) || (only && (!ref || strcmp(ref, agent)))) {
		model_clear(&model_pvst_kind, &x->v);
		return 0;
	}
	if (!x->v.status.has_export_spec) {
		set_cond_if_changed(
		    c, &x->v, RULES_REASON_EXPORT_SPEC_MISSING,
		    "status.exportSpec is missing; the controller will not guess it "
		    "(see operations.md §9)");
		model_clear(&model_pvst_kind, &x->v);
		return 0;
	}
	if (build(x) < 0) {
		pvst_backend_params_free(&x->bb);
		free(x->inits);
		x->inits = NULL;
		model_clear(&model_pvst_kind, &x->v);
		return -ENOMEM;
	}
	return 1;
}

/* Builds the eligible named volumes, read under their locks, into v; *n of them.  A whole
 * agent's volumes are read in one list (names is sorted; a volume created since names was listed
 * is not locked and waits for the next pass) — or are the m objects of that first list (items,
 * freed here), when no lock was released since it was taken: then no operation on any of them
 * ended in between, nor was one running (its lock would have had to be released to us).
 * GRPC_OK, or an error in gs: then no request may go out (one without a volume's initiators
 * would revoke them, a complete one without a volume would leave it unexported). */
static int collect(struct ctl *c, const char *agent, const char *only,
                   const struct model_strs *names, struct rvol *v, size_t *n,
                   struct model_pvst *items, size_t m, struct grpc_status *gs)
{
	struct err e = {0};
	int r = 0;
	*n = 0;
	if (only) {
		if (model_get(c->st, &model_pvst_kind, NULL, only, &v->v, NULL) == 0)
			r = take(c, agent, only, v);
		*n = r > 0;
		return r < 0 ? grpc_status_oom(gs) : GRPC_OK;
	}
	char sel[400];
	snprintf(sel, sizeof(sel), RULES_LABEL_AGENT "=%s", agent);
	if (!items &&
	    model_list(c->st, &model_pvst_kind, NULL, sel, (void **)&items, &m, NULL, &e) < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "listing volumes of agent \"%s\": %s",
		                       agent, e.msg);
	for (size_t i = 0; i < m && r >= 0; i++) {
		const char *key = items[i].meta.name;
		if (!key || !bsearch(&key, names->v, names->n, sizeof(char *), cmp_str))
			continue;
		v[*n].v = items[i];
		memset(&items[i], 0, sizeof(items[i])); /* moved */
		r = take(c, agent, NULL, &v[*n]);
		*n += r > 0;
	}
	model_list_free(&model_pvst_kind, items, m);
	return r < 0 ? grpc_status_oom(gs) : GRPC_OK;
}

/* Sends the request (or not: no address, nothing to resync); returns the RPC's code. */
static int send(struct ctl *c, const char *agent, const char *addr, bool complete,
                const struct grpc_status *noaddr, PillarCsi__Agent__V1__ReconcileStateRequest *q,
                PillarCsi__Agent__V1__ReconcileStateResponse **resp, struct grpc_status *ast)
{
	if (!addr) {
		*ast = *noaddr; /* no address to dial: nothing is sent */
		return GRPC_UNAVAILABLE;
	}
	if (q->n_volumes == 0 && !complete)
		return GRPC_OK; /* nothing to resync */
	int r = agentclient_reconcile_state(c->ac, addr, q, resp, ast);
	if (r != GRPC_OK && agentclient_restore_pending(ast) && c->restore_kick)
		c->restore_kick(c->restore_kick_arg, agent);
	return r;
}

/* One ReconcileState over the built volumes (sorted: in-capsule first, then by name) and
 * ExportReconciled from its results. */
static int reconcile_built(struct ctl *c, const char *agent, const char *addr, bool complete,
                           const struct grpc_status *noaddr, const struct reconcile_sent *sent,
                           struct rvol *v, size_t n, struct grpc_status *gs)
{
	unsigned epoch = atomic_load(&c->agents_epoch);
	/* sort pointers: the structs hold pointers into themselves */
	struct rvol **order = calloc(n ? n : 1, sizeof(*order));
	PillarCsi__Agent__V1__VolumeDesiredState **vols = calloc(n ? n : 1, sizeof(*vols));
	int r;
	if (!order || !vols) {
		r = grpc_status_oom(gs);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = &v[i];
	qsort(order, n, sizeof(*order), cmp_rvol);
	for (size_t i = 0; i < n; i++)
		vols[i] = &order[i]->vds;
	PillarCsi__Agent__V1__ReconcileStateRequest q =
	    PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PillarCsi__Agent__V1__ReconcileStateResponse *resp = NULL;
	struct grpc_status ast = {0};
	q.volumes = vols;
	q.n_volumes = n;
	q.complete = complete;
	r = send(c, agent, addr, complete, noaddr, &q, &resp, &ast);
	if (sent && sent->fn)
		sent->fn(sent->arg, r, &ast);
	for (size_t i = 0; i < n; i++) {
		const char *reason, *msg;
		if (!complete && r != GRPC_OK && atomic_load(&c->agents_epoch) != epoch)
			break; /* the agent changed meanwhile: its restore (or next pass) records them */
		map_result(r, &ast, resp, v[i].vds.volume_id, &reason, &msg);
		set_cond_if_changed(c, &v[i].v, reason, msg);
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	gs->code = r;
	snprintf(gs->msg, sizeof(gs->msg), "%s", ast.msg);
out:
	free(vols);
	free(order);
	return r;
}

int reconcile_exports(struct ctl *c, const char *agent, const char *addr, const char *only,
                      bool complete, const struct grpc_status *noaddr,
                      const struct reconcile_sent *sent, struct grpc_status *gs)
{
	struct model_strs names;
	struct model_pvst *listed = NULL;
	size_t n = 0, nlisted = 0;
	char akey[300];
	struct keylock_hold ahold;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	/* One request per agent at a time: the restore and the resyncs never interleave (volume
	 * names contain no '/', so this key is nobody's volume lock).  Taken before any volume
	 * lock, and no holder of a volume lock waits for it. */
	snprintf(akey, sizeof(akey), "PillarAgent/%s", agent);
	keylock_wait(&c->locks, &ahold, akey);
	unsigned long released = keylock_releases(&c->locks);
	int r = volume_names(c, agent, only, &names, &listed, &nlisted, gs);
	struct rvol *v = r != GRPC_OK ? NULL : calloc(names.n ? names.n : 1, sizeof(*v));
	struct keylock_hold *holds = !v ? NULL : calloc(names.n ? names.n : 1, sizeof(*holds));
	if (!holds) {
		model_list_free(&model_pvst_kind, listed, nlisted);
		free(v);
		model_strs_clear(&names);
		keylock_release(&c->locks, &ahold);
		return r != GRPC_OK ? r : grpc_status_oom(gs);
	}
	/* the per-volume locks in name order */
	qsort(names.v, names.n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < names.n; i++)
		keylock_wait(&c->locks, &holds[i], names.v[i]);
	if (keylock_releases(&c->locks) != released) { /* an operation ended: read again */
		model_list_free(&model_pvst_kind, listed, nlisted);
		listed = NULL;
		nlisted = 0;
	}
	r = collect(c, agent, only, &names, v, &n, listed, nlisted, gs);
	if (r == GRPC_OK)
		r = reconcile_built(c, agent, addr, complete, noaddr, sent, v, n, gs);
	else if (sent && sent->fn)
		sent->fn(sent->arg, r,
		         gs); /* nothing sent: a restore records ExportRestoreFailed */
	for (size_t i = 0; i < n; i++) {
		pvst_backend_params_free(&v[i].bb);
		free(v[i].inits);
		model_clear(&model_pvst_kind, &v[i].v);
	}
	for (size_t i = names.n; i > 0; i--)
		keylock_release(&c->locks, &holds[i - 1]);
	keylock_release(&c->locks, &ahold);
	free(holds);
	model_strs_clear(&names);
	free(v);
	return r;
}

int reconcile_agent_restore(struct ctl *c, const char *agent, const char *addr,
                            const struct reconcile_sent *sent, struct grpc_status *gs)
{
	return reconcile_exports(c, agent, addr, NULL, true, NULL, sent, gs);
}

/* The agent's address, or NULL with the reason in *why (UNAVAILABLE). */
static const char *agent_addr(struct ctl *c, const char *agent, char *buf, size_t cap,
                              struct grpc_status *why)
{
	int r = agents_address(c, agent, buf, cap, why);
	if (r == GRPC_NOT_FOUND)
		grpc_status_set(why, GRPC_UNAVAILABLE, "PillarAgent \"%s\" not found", agent);
	return r == GRPC_OK ? buf : NULL;
}

int reconcile_volume(struct ctl *c, const char *name, struct err *e)
{
	struct model_pvst v;
	char addr[300];
	struct grpc_status why = {0}, gs = {0};
	int r = model_get(c->st, &model_pvst_kind, NULL, name, &v, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	char agent[254];
	snprintf(agent, sizeof(agent), "%s", v.spec.agent_ref ?: "");
	bool ok = eligible(&v) && agent[0];
	model_clear(&model_pvst_kind, &v);
	if (!ok)
		return 0;
	const char *a = agent_addr(c, agent, addr, sizeof(addr), &why);
	reconcile_exports(c, agent, a, name, false, &why, NULL, &gs);
	if (gs.code == GRPC_INTERNAL)
		return err_set(e, -ENOMEM, "%s", gs.msg);
	return 0;
}

int reconcile_agent_resync(struct ctl *c, const char *agent, struct err *e)
{
	char addr[300];
	struct grpc_status why = {0}, gs = {0};
	const char *a = agent_addr(c, agent, addr, sizeof(addr), &why);
	reconcile_exports(c, agent, a, NULL, false, &why, NULL, &gs);
	if (gs.code == GRPC_INTERNAL)
		return err_set(e, -ENOMEM, "%s", gs.msg);
	return 0;
}
