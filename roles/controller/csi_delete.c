/* csi_delete — DeleteVolume and ControllerExpandVolume (csi.md §4.2, §4.5) with the
 * PillarVolumeState write sequence of crds.md §7.5 (deleting, then the object). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agents.h"
#include "controller/csi.h"
#include "controller/pvst.h"
#include "rules/size.h"

static const char *str(const char *s)
{
	return s ? s : "";
}

/* Deletes the object, pinned to its UID; a missing object is fine. */
static int delete_object(struct ctl *c, const char *pname, const char *uid, int conflict_code,
                         struct grpc_status *gs)
{
	struct err e = {0};
	int d = store_delete(c->st, model_store_kind(&model_pvst_kind), NULL, pname, uid, NULL, &e);
	if (d == 0 || d == STORE_NOT_FOUND)
		return GRPC_OK;
	return grpc_status_set(gs, d == STORE_CONFLICT ? conflict_code : ctl_store_code(d),
	                       "deleting PillarVolumeState \"%s\": %s", pname, e.msg);
}

/* FAILED_PRECONDITION naming the nodes a volume is still published to. */
static int still_published(const struct model_pvst *v, const char *volume_id,
                           struct grpc_status *gs)
{
	char list[400] = "";
	size_t o = 0;
	for (size_t i = 0; i < v->status.n_published; i++)
		o += (size_t)snprintf(list + o, o < sizeof(list) ? sizeof(list) - o : 0, "%s%s",
		                      o ? ", " : "", str(v->status.published[i].node_id));
	return grpc_status_set(
	    gs, GRPC_FAILED_PRECONDITION,
	    "volume \"%s\" is still published to nodes [%s]; unpublish it before "
	    "deleting",
	    volume_id, list);
}

/* The agent's UnexportVolume and DeleteVolume under generation gen. */
static int agent_delete(struct ctl *c, const struct rules_volid *v, const struct model_pvst *obj,
                        uint64_t gen, const char *volume_id, struct grpc_status *gs)
{
	char addr[300];
	int r = agents_address(c, v->agent, addr, sizeof(addr), gs);
	if (r == GRPC_NOT_FOUND)
		return grpc_status_set(
		    gs, GRPC_FAILED_PRECONDITION,
		    "PillarAgent \"%s\" not found; cannot confirm that volume \"%s\" was "
		    "removed",
		    v->agent, volume_id);
	if (r)
		return r;
	PillarCsi__Agent__V1__FencingToken tok;
	struct grpc_status ast = {0};
	pvst_fence(&tok, obj, gen);
	PillarCsi__Agent__V1__UnexportVolumeRequest uq =
	    PILLAR_CSI__AGENT__V1__UNEXPORT_VOLUME_REQUEST__INIT;
	uq.volume_id = (char *)str(obj->spec.agent_volume_id);
	uq.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	uq.fence = &tok;
	int ar = agentclient_unexport_volume(c->ac, addr, &uq, &ast);
	if (ar != GRPC_OK && ar != GRPC_NOT_FOUND)
		return agents_error(c, v->agent, &ast, gs);
	PillarCsi__Agent__V1__DeleteVolumeRequest dq =
	    PILLAR_CSI__AGENT__V1__DELETE_VOLUME_REQUEST__INIT;
	dq.volume_id = uq.volume_id;
	dq.backend_type = agents_backend_enum(str(obj->spec.backend_type));
	dq.fence = &tok;
	if (agentclient_delete_volume(c->ac, addr, &dq, &ast) != GRPC_OK)
		return agents_error(c, v->agent, &ast, gs);
	return GRPC_OK;
}

/* Steps under the volume lock (csi.md §4.2). */
static int delete_locked(struct ctl *c, const struct rules_volid *v, const char *pname, void *arg,
                         struct grpc_status *gs)
{
	const char *volume_id = arg;
	struct model_pvst obj;
	int r = pvst_find(c, volume_id, &obj, gs);
	if (r)
		return r == GRPC_NOT_FOUND ? GRPC_OK : r;
	const char *uid = str(obj.meta.uid);
	uint64_t gen = pvst_gen(&obj);
	if (obj.status.n_published > 0) {
		r = still_published(&obj, volume_id, gs);
	} else if (gen == 0 && !pvst_deleting(&obj)) {
		r = delete_object(c, pname, uid, GRPC_ABORTED, gs); /* nothing on an agent */
	} else {
		struct csi_claim cl = {.name = pname, .set_deleting = true, .volume_id = volume_id};
		if (!pvst_deleting(&obj) &&
		    (r = pvst_update(c, pname, uid, csi_claim, &cl, NULL, gs)) == 0)
			gen = cl.gen;
		if (r == 0 && (r = agent_delete(c, v, &obj, gen, volume_id, gs)) == 0)
			r = delete_object(c, pname, uid, GRPC_UNAVAILABLE, gs);
	}
	model_clear(&model_pvst_kind, &obj);
	return r;
}

int csi_delete_volume(struct ctl *c, const Csi__V1__DeleteVolumeRequest *req,
                      Csi__V1__DeleteVolumeResponse *resp, struct grpc_status *gs)
{
	(void)resp;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->volume_id || !*req->volume_id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	return pvst_locked(c, req->volume_id, true, delete_locked, req->volume_id, gs);
}

/* ---- ControllerExpandVolume -------------------------------------------------------------------- */

/* The agent's ExpandVolume; *bytes the new capacity. */
static int agent_expand(struct ctl *c, const struct rules_volid *v, const struct model_pvst *obj,
                        int64_t size, int64_t *bytes, struct grpc_status *gs)
{
	char addr[300];
	int r = agents_address_of_volume(c, v->agent, addr, sizeof(addr), gs);
	if (r)
		return r;
	PillarCsi__Agent__V1__ExpandVolumeRequest q =
	    PILLAR_CSI__AGENT__V1__EXPAND_VOLUME_REQUEST__INIT;
	PillarCsi__Agent__V1__ExpandVolumeResponse *er = NULL;
	PillarCsi__Agent__V1__FencingToken tok;
	struct grpc_status ast = {0};
	pvst_fence(&tok, obj, pvst_gen(obj));
	q.volume_id = (char *)str(obj->spec.agent_volume_id);
	q.requested_bytes = size;
	q.backend_type = agents_backend_enum(str(obj->spec.backend_type));
	q.fence = &tok;
	if (agentclient_expand_volume(c->ac, addr, &q, &er, &ast) != GRPC_OK)
		return agents_error(c, v->agent, &ast, gs);
	*bytes = er->capacity_bytes;
	protobuf_c_message_free_unpacked(&er->base, NULL);
	return GRPC_OK;
}

struct expand {
	const char *volume_id;
	int64_t size, bytes;
};

static int expand_locked(struct ctl *c, const struct rules_volid *v, const char *pname, void *arg,
                         struct grpc_status *gs)
{
	struct expand *x = arg;
	const char *volume_id = x->volume_id;
	struct model_pvst obj;
	(void)pname;
	int r = pvst_find_existing(c, volume_id, &obj, gs);
	if (r)
		return r;
	struct err e = {0};
	const char *phase = obj.status.phase ? obj.status.phase : "";
	if (pvst_deleting(&obj))
		r = grpc_status_set(gs, GRPC_FAILED_PRECONDITION, "volume \"%s\" is being deleted",
		                    volume_id);
	/* the agent's size must never outgrow what a create provisions again (csi_volume.c): not
	 * before the create finished, nor before its lazy Ready is durable */
	else if (!*phase || !strcmp(phase, "Provisioning") || !strcmp(phase, "CreatePartial"))
		r = grpc_status_set(gs, GRPC_UNAVAILABLE,
		                    "volume \"%s\" is not ready yet (its create is being "
		                    "completed); retry",
		                    volume_id);
	else if (store_dir_flush(c->st, &e) < 0)
		r = grpc_status_set(gs, GRPC_UNAVAILABLE, "recording volume \"%s\": %s", volume_id,
		                    e.msg);
	else
		r = agent_expand(c, v, &obj, x->size, &x->bytes, gs);
	model_clear(&model_pvst_kind, &obj);
	return r;
}

int csi_controller_expand(struct ctl *c, const Csi__V1__ControllerExpandVolumeRequest *req,
                          Csi__V1__ControllerExpandVolumeResponse *resp, struct grpc_status *gs)
{
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->volume_id || !*req->volume_id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	if (!req->capacity_range)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "capacity_range is required");
	int64_t R = req->capacity_range->required_bytes, L = req->capacity_range->limit_bytes;
	if (R <= 0)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "capacity_range.required_bytes must be positive");
	int64_t size;
	char why[200];
	if (rules_size_round_up(R, RULES_SIZE_MIB, &size) < 0)
		return grpc_status_set(gs, GRPC_OUT_OF_RANGE, "%s",
		                       rules_size_refusal(R, RULES_SIZE_MIB, why, sizeof(why)));
	if (L > 0 && size > L)
		return grpc_status_set(gs, GRPC_OUT_OF_RANGE,
		                       "capacity %lld bytes exceeds limit_bytes %lld",
		                       (long long)size, (long long)L);
	struct expand x = {.volume_id = req->volume_id, .size = size};
	int r = pvst_locked(c, req->volume_id, false, expand_locked, &x, gs);
	if (r)
		return r;
	resp->capacity_bytes = x.bytes;
	resp->node_expansion_required = true;
	return GRPC_OK;
}
