/* reconcile_export — ReconcileState requests built from PillarVolumeStates: the full restore
 * (agent-api.md §12.2), the per-volume and per-agent resyncs (§12.3) and the mapping of the
 * results to ExportReconciled (§12.4). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/reconcile.h"
#include "controller/resolve.h"

struct rvol {
	cJSON *obj;
	bool ics;
	PillarCsi__Agent__V1__VolumeDesiredState vds;
	PillarCsi__Agent__V1__ExportDesiredState eds, *edsp;
	PillarCsi__Agent__V1__ExportParams ep;
	PillarCsi__Agent__V1__NvmeofTcpExportParams np;
	PillarCsi__Agent__V1__FencingToken tok;
	struct backend_params_buf bb;
	char **inits;
};

struct recon_set {
	const char *reason, *message;
};

static int m_exportcond(cJSON *obj, cJSON *status, void *arg, struct grpc_status *gs)
{
	(void)gs;
	struct recon_set *s = arg;
	int64_t og = 0;
	json_get_int64(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "generation", &og);
	bool ok = !strcmp(s->reason, "Reconciled");
	return cond_set(status, "ExportReconciled", ok ? "True" : "False", s->reason, s->message,
	                og)
	           ? 0
	           : CAS_SKIP;
}

void reconcile_set_export_cond(struct ctl *c, const cJSON *obj, const char *reason, const char *msg)
{
	struct recon_set s = {reason, msg ? msg : ""};
	struct grpc_status gs = {0};
	pvst_cas(c, store_meta_str(obj, "name"), store_meta_str(obj, "uid"), m_exportcond, &s, NULL,
	         &gs);
}

static int cmp_rvol(const void *a, const void *b)
{
	const struct rvol *x = *(struct rvol *const *)a, *y = *(struct rvol *const *)b;
	if (x->ics != y->ics)
		return x->ics ? -1 : 1;
	return strcmp(store_meta_str(x->obj, "name"), store_meta_str(y->obj, "name"));
}

/* Fills x from a PillarVolumeState that has an exportSpec (agent-api.md §12.2 step 3). */
static void build(struct rvol *x, cJSON *obj)
{
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
	const cJSON *es = cJSON_GetObjectItemCaseSensitive(st, "exportSpec");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	long long port = 0, ics = 0;
	bool acl = false;
	x->obj = obj;
	resolve_get_int(es, "port", &port);
	x->ics = resolve_get_int(es, "inCapsuleDataSize", &ics) == 0 && ics > 0;
	resolve_get_bool(es, "aclEnabled", &acl);
	pillar_csi__agent__v1__volume_desired_state__init(&x->vds);
	pillar_csi__agent__v1__export_desired_state__init(&x->eds);
	pillar_csi__agent__v1__export_params__init(&x->ep);
	pillar_csi__agent__v1__nvmeof_tcp_export_params__init(&x->np);
	pillar_csi__agent__v1__fencing_token__init(&x->tok);
	x->vds.volume_id = (char *)(json_get_str(spec, "agentVolumeID") ?: "");
	x->vds.backend_type = backend_enum(json_get_str(spec, "backendType") ?: "");
	x->vds.backend_params = backend_params_fill(&x->bb, obj);
	x->vds.device_path = (char *)(json_get_str(st, "backendDevicePath") ?: "");
	x->tok.volume_uid = (char *)(store_meta_str(obj, "uid") ?: "");
	x->tok.generation = pvst_generation(obj);
	x->vds.fence = &x->tok;
	x->np.bind_address = (char *)(json_get_str(es, "bindAddress") ?: "");
	x->np.port = (int32_t)port;
	x->np.in_capsule_data_size = (int32_t)ics;
	x->ep.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	x->ep.nvmeof_tcp = &x->np;
	x->eds.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	x->eds.export_params = &x->ep;
	x->eds.acl_enabled = acl;
	const cJSON *pn = cJSON_GetObjectItemCaseSensitive(st, "publishedNodes"), *p;
	x->inits = calloc((size_t)cJSON_GetArraySize(pn) + 1, sizeof(char *));
	cJSON_ArrayForEach(p, pn)
	{
		bool revoking = false;
		json_get_bool(p, "revoking", &revoking);
		const char *ini = json_get_str(p, "initiatorID");
		if (!revoking && ini && x->inits)
			x->inits[x->eds.n_allowed_initiators++] = (char *)ini;
	}
	x->eds.allowed_initiators = x->inits;
	x->edsp = &x->eds;
	x->vds.n_exports = 1;
	x->vds.exports = &x->edsp;
}

/* The ExportReconciled reason and message of one volume after the RPC (§12.4). */
static void map_result(int r, const struct grpc_status *ast,
                       const PillarCsi__Agent__V1__ReconcileStateResponse *resp,
                       const char *volume_id, const char **reason, const char **msg)
{
	*reason = "AgentUnavailable";
	*msg = ast->msg;
	if (r == GRPC_OK) {
		*reason = "ReconcileFailed";
		*msg = "the agent returned no result for this volume";
		for (size_t k = 0; resp && k < resp->n_results; k++) {
			const PillarCsi__Agent__V1__VolumeReconcileResult *res = resp->results[k];
			if (!res->volume_id || strcmp(res->volume_id, volume_id))
				continue;
			if (res->success) {
				*reason = "Reconciled";
				*msg = "";
			} else {
				static const char stale[] =
				    "FAILED_PRECONDITION: stale fencing token";
				*msg = res->error_message ? res->error_message : "";
				*reason = !strncmp(*msg, stale, sizeof(stale) - 1)
				              ? "StaleGeneration"
				              : "ReconcileFailed";
			}
			break;
		}
	} else if (r != GRPC_UNAVAILABLE && r != GRPC_DEADLINE_EXCEEDED) {
		*reason = "ReconcileFailed";
	}
}

/* A volume the resync looks at: not deleting, past Provisioning (§12.3). */
static bool eligible(const cJSON *obj)
{
	const char *phase =
	    json_get_str(cJSON_GetObjectItemCaseSensitive(obj, "status"), "phase") ?: "";
	return !pvst_deleting(obj) && phase[0] && strcmp(phase, "Provisioning");
}

int reconcile_exports(struct ctl *c, const char *agent, const char *addr, const char *only,
                      bool complete, const struct grpc_status *noaddr, struct grpc_status *gs)
{
	char sel[400];
	cJSON *items = NULL;
	struct err e = {0};
	struct rvol *v = NULL;
	size_t n = 0;
	int r = GRPC_OK;

	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (only) {
		cJSON *one = NULL;
		int g = store_get(c->st, kind_of("PillarVolumeState"), NULL, only, &one, &e);
		if (g == STORE_NOT_FOUND)
			return GRPC_OK;
		if (g < 0)
			return gstatus(gs, GRPC_UNAVAILABLE, "reading PillarVolumeState \"%s\": %s",
			               only, e.msg);
		items = cJSON_CreateArray();
		if (!items) {
			cJSON_Delete(one);
			return gstatus(gs, GRPC_INTERNAL, "out of memory");
		}
		cJSON_AddItemToArray(items, one);
	} else {
		snprintf(sel, sizeof(sel), RULES_LABEL_AGENT "=%s", agent);
		if (store_list(c->st, kind_of("PillarVolumeState"), NULL, sel, &items, NULL, &e) <
		    0)
			return gstatus(gs, GRPC_UNAVAILABLE, "listing volumes of agent \"%s\": %s",
			               agent, e.msg);
	}
	size_t total = (size_t)cJSON_GetArraySize(items);
	v = calloc(total ? total : 1, sizeof(*v));
	if (!v) {
		cJSON_Delete(items);
		return gstatus(gs, GRPC_INTERNAL, "out of memory");
	}
	/* the list is sorted by name: take the per-volume locks in name order */
	cJSON *it;
	cJSON_ArrayForEach(it, items) ctl_lock_volume(c, store_meta_str(it, "name"));
	/* re-read under the locks */
	cJSON_ArrayForEach(it, items)
	{
		cJSON *obj = NULL;
		if (store_get(c->st, kind_of("PillarVolumeState"), NULL, store_meta_str(it, "name"),
		              &obj, NULL) < 0)
			continue;
		const char *ref =
		    json_get_str(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "agentRef");
		if (!eligible(obj) || (only && (!ref || strcmp(ref, agent)))) {
			cJSON_Delete(obj);
			continue;
		}
		if (!cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(obj, "status"), "exportSpec")) {
			reconcile_set_export_cond(
			    c, obj, "ExportSpecMissing",
			    "status.exportSpec is missing; the controller will not guess it "
			    "(see operations.md §9)");
			cJSON_Delete(obj);
			continue;
		}
		build(&v[n++], obj);
	}
	/* sort pointers: the structs hold pointers into themselves */
	struct rvol **order = calloc(n ? n : 1, sizeof(*order));
	PillarCsi__Agent__V1__VolumeDesiredState **vols = calloc(n ? n : 1, sizeof(*vols));
	if (!order || !vols) {
		r = gstatus(gs, GRPC_INTERNAL, "out of memory");
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
	if (!addr) {
		/* no address to dial: nothing is sent */
		ast = *noaddr;
		r = GRPC_UNAVAILABLE;
	} else if (n == 0 && !complete) {
		r = GRPC_OK; /* nothing to resync */
	} else {
		r = agentclient_reconcile_state(c->ac, addr, &q, &resp, &ast);
		if (r != GRPC_OK && agentclient_restore_pending(&ast) && c->restore_kick)
			c->restore_kick(c->restore_kick_arg, agent);
	}
	for (size_t i = 0; i < n; i++) {
		const char *reason, *msg;
		map_result(r, &ast, resp, v[i].vds.volume_id, &reason, &msg);
		reconcile_set_export_cond(c, v[i].obj, reason, msg);
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	gs->code = r;
	snprintf(gs->msg, sizeof(gs->msg), "%s", ast.msg);
out:
	for (size_t i = 0; i < n; i++) {
		backend_params_free(&v[i].bb);
		free(v[i].inits);
		cJSON_Delete(v[i].obj);
	}
	cJSON_ArrayForEach(it, items) ctl_unlock_volume(c, store_meta_str(it, "name"));
	free(vols);
	free(order);
	free(v);
	cJSON_Delete(items);
	return r;
}

int reconcile_agent_restore(struct ctl *c, const char *agent, const char *addr,
                            struct grpc_status *gs)
{
	return reconcile_exports(c, agent, addr, NULL, true, NULL, gs);
}

/* The agent's address, or NULL with the reason in *why (UNAVAILABLE). */
static const char *agent_addr(struct ctl *c, const char *agent, char *buf, size_t cap,
                              struct grpc_status *why)
{
	int r = ctl_agent_address(c, agent, buf, cap, why);
	if (r == GRPC_NOT_FOUND)
		gstatus(why, GRPC_UNAVAILABLE, "PillarAgent \"%s\" not found", agent);
	return r == GRPC_OK ? buf : NULL;
}

int reconcile_volume(struct ctl *c, const char *name, struct err *e)
{
	cJSON *obj = NULL;
	char addr[300];
	struct grpc_status why = {0}, gs = {0};
	int r = store_get(c->st, kind_of("PillarVolumeState"), NULL, name, &obj, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	char agent[254];
	snprintf(agent, sizeof(agent), "%s",
	         json_get_str(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "agentRef") ?: "");
	bool ok = eligible(obj) && agent[0];
	cJSON_Delete(obj);
	if (!ok)
		return 0;
	const char *a = agent_addr(c, agent, addr, sizeof(addr), &why);
	reconcile_exports(c, agent, a, name, false, &why, &gs);
	if (gs.code == GRPC_INTERNAL)
		return err_set(e, -ENOMEM, "%s", gs.msg);
	return 0;
}

int reconcile_agent_resync(struct ctl *c, const char *agent, struct err *e)
{
	char addr[300];
	struct grpc_status why = {0}, gs = {0};
	const char *a = agent_addr(c, agent, addr, sizeof(addr), &why);
	reconcile_exports(c, agent, a, NULL, false, &why, &gs);
	if (gs.code == GRPC_INTERNAL)
		return err_set(e, -ENOMEM, "%s", gs.msg);
	return 0;
}
