/* publish — ControllerPublishVolume / ControllerUnpublishVolume (csi.md §4.3, §4.4).
 *
 * Publications fail closed (agent-api.md §6.4): the entry is recorded (generation +1) before
 * AllowInitiator, marked `revoking` (generation +1) before DenyInitiator, and removed only
 * after the revoke succeeded and only if the generation did not change meanwhile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "controller/csi.h"
#include "controller/resolve.h"

static bool single_node(const char *mode)
{
	return !strncmp(mode, "SINGLE_NODE_", 12);
}

static bool acl_enabled(const cJSON *pvst)
{
	bool acl = false;
	const cJSON *es = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(pvst, "status"), "exportSpec");
	if (es) {
		json_get_bool(es, "aclEnabled", &acl);
		return acl;
	}
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pvst, "spec"),
	                                         "resolved"),
	        "protocol"),
	    "nvmeofTcp");
	resolve_get_bool(n, "acl", &acl);
	return acl;
}

static const char *spec_str(const cJSON *obj, const char *k)
{
	return json_get_str(cJSON_GetObjectItemCaseSensitive(obj, "spec"), k) ?: "";
}

static cJSON *published(cJSON *status)
{
	cJSON *pn = cJSON_GetObjectItemCaseSensitive(status, "publishedNodes");
	if (!cJSON_IsArray(pn)) {
		cJSON_DeleteItemFromObjectCaseSensitive(status, "publishedNodes");
		pn = cJSON_AddArrayToObject(status, "publishedNodes");
	}
	return pn;
}

static bool entry_bool(const cJSON *e, const char *k)
{
	bool b = false;
	json_get_bool(e, k, &b);
	return b;
}

/* ---- publish ----------------------------------------------------------------------------------- */

struct pub {
	const char *id, *node, *nqn, *mode;
	bool ro;
	uint64_t gen;
};

static int m_publish(cJSON *obj, cJSON *status, void *arg, struct grpc_status *gs)
{
	struct pub *p = arg;
	if (pvst_deleting(obj))
		return gstatus(gs, GRPC_FAILED_PRECONDITION, "volume \"%s\" is being deleted",
		               p->id);
	cJSON *pn = published(status), *it, *mine = NULL;
	cJSON_ArrayForEach(it, pn)
	{
		const char *node = json_get_str(it, "nodeID") ?: "";
		const char *mode = json_get_str(it, "accessMode") ?: "";
		const char *nqn = json_get_str(it, "initiatorID") ?: "";
		bool ro = entry_bool(it, "readonly");
		if (!strcmp(node, p->node)) {
			if (entry_bool(it, "revoking"))
				return gstatus(
				    gs, GRPC_ABORTED,
				    "volume \"%s\" is being unpublished from node \"%s\"; "
				    "retry later",
				    p->id, node);
			if (strcmp(nqn, p->nqn))
				return gstatus(
				    gs, GRPC_FAILED_PRECONDITION,
				    "volume \"%s\" is published to node \"%s\" with host NQN "
				    "\"%s\" but the node now reports \"%s\"; unpublish it "
				    "first",
				    p->id, node, nqn, p->nqn);
			if (strcmp(mode, p->mode) || ro != p->ro)
				return gstatus(
				    gs, GRPC_ALREADY_EXISTS,
				    "volume \"%s\" is already published to node \"%s\" with "
				    "access mode %s, readonly=%s; requested access mode %s, "
				    "readonly=%s",
				    p->id, node, mode, ro ? "true" : "false", p->mode,
				    p->ro ? "true" : "false");
			mine = it;
			continue;
		}
		if (single_node(mode) ||
		    (!strcmp(mode, "MULTI_NODE_READER_ONLY") && single_node(p->mode)))
			return gstatus(
			    gs, GRPC_FAILED_PRECONDITION,
			    "volume \"%s\" is published to another node \"%s\" (access mode "
			    "%s, readonly=%s); cannot publish to node \"%s\" with access "
			    "mode %s",
			    p->id, node, mode, ro ? "true" : "false", p->node, p->mode);
	}
	if (!mine) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "nodeID", p->node);
		cJSON_AddStringToObject(e, "initiatorID", p->nqn);
		cJSON_AddStringToObject(e, "accessMode", p->mode);
		cJSON_AddBoolToObject(e, "readonly", p->ro);
		cJSON_AddBoolToObject(e, "revoking", false);
		cJSON_AddItemToArray(pn, e);
	}
	p->gen = pvst_generation(obj) + 1;
	pvst_set_generation(status, p->gen);
	return 0;
}

/* FAILED_PRECONDITION when another CSINode reports the same host NQN (csi.md §10.3). */
static int duplicate_nqn(struct ctl *c, const char *node, const char *nqn, bool acl,
                         struct grpc_status *gs)
{
	cJSON *items = NULL;
	int r = 0;
	if (store_list(c->st, kind_of("CSINode"), NULL, NULL, &items, NULL, NULL) < 0)
		return 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, items)
	{
		const char *n = store_meta_str(it, "name") ?: "";
		const char *a = json_get_str(
		    cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(it, "metadata"), "annotations"),
		    RULES_ANN_HOST_NQN);
		if (!a || strcmp(a, nqn) || !strcmp(n, node))
			continue;
		if (acl)
			r = gstatus(
			    gs, GRPC_FAILED_PRECONDITION,
			    "host NQN \"%s\" is also used by node \"%s\"; give every worker a "
			    "unique /etc/nvme/hostnqn and /etc/nvme/hostid",
			    nqn, n);
		else
			log_warnf("host NQN \"%s\" of node \"%s\" is also used by node \"%s\"", nqn,
			          node, n);
		break;
	}
	cJSON_Delete(items);
	return r;
}

int csi_controller_publish(struct ctl *c, const Csi__V1__ControllerPublishVolumeRequest *req,
                           Csi__V1__ControllerPublishVolumeResponse **resp, struct grpc_status *gs)
{
	struct rules_volid v;
	char pname[RULES_PVST_NAME_CAP], addr[300], nqn[256], uid[64];
	cJSON *obj = NULL, *csinode = NULL;
	int r;

	*resp = NULL;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->volume_id || !*req->volume_id)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	if (!req->node_id || !*req->node_id)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "node_id is required");
	if (!req->volume_capability)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "volume_capability is required");
	if ((r = csi_check_capability(req->volume_capability, gs)))
		return r;
	if (rules_volid_parse(req->volume_id, &v) < 0)
		return gstatus(gs, GRPC_NOT_FOUND, "volume \"%s\" not found", req->volume_id);
	rules_pvst_name(v.name, pname, sizeof(pname));
	struct keylock_hold hold;
	keylock_wait(&c->locks, &hold, pname);
	r = pvst_get_by_id(c, req->volume_id, &obj, gs);
	if (r == GRPC_NOT_FOUND)
		r = gstatus(gs, GRPC_NOT_FOUND, "volume \"%s\" not found", req->volume_id);
	if (r)
		goto out;
	if (pvst_deleting(obj)) {
		r = gstatus(gs, GRPC_FAILED_PRECONDITION, "volume \"%s\" is being deleted",
		            req->volume_id);
		goto out;
	}
	snprintf(uid, sizeof(uid), "%s", store_meta_str(obj, "uid") ?: "");
	struct err e = {0};
	int g = store_get(c->st, kind_of("CSINode"), NULL, req->node_id, &csinode, &e);
	if (g == STORE_NOT_FOUND || g == STORE_INVALID) {
		r = gstatus(gs, GRPC_NOT_FOUND, "CSINode \"%s\" not found", req->node_id);
		goto out;
	}
	if (g < 0) {
		r = gstatus(gs, GRPC_UNAVAILABLE, "reading CSINode \"%s\": %s", req->node_id,
		            e.msg);
		goto out;
	}
	const char *a =
	    json_get_str(cJSON_GetObjectItemCaseSensitive(
	                     cJSON_GetObjectItemCaseSensitive(csinode, "metadata"), "annotations"),
	                 RULES_ANN_HOST_NQN);
	if (!a || !*a) {
		r = gstatus(gs, GRPC_FAILED_PRECONDITION,
		            "CSINode \"%s\" is missing annotation \"" RULES_ANN_HOST_NQN "\"",
		            req->node_id);
		goto out;
	}
	snprintf(nqn, sizeof(nqn), "%s", a);
	bool acl = acl_enabled(obj);
	if ((r = duplicate_nqn(c, req->node_id, nqn, acl, gs)))
		goto out;
	struct pub p = {.id = req->volume_id,
	                .node = req->node_id,
	                .nqn = nqn,
	                .mode = csi_mode_name(req->volume_capability->access_mode->mode),
	                .ro = req->readonly};
	if ((r = pvst_cas(c, pname, uid, m_publish, &p, NULL, gs)))
		goto out;
	if (acl) {
		r = ctl_agent_address(c, v.agent, addr, sizeof(addr), gs);
		if (r == GRPC_NOT_FOUND)
			r = gstatus(gs, GRPC_FAILED_PRECONDITION, "PillarAgent \"%s\" not found",
			            v.agent);
		if (r)
			goto out;
		PillarCsi__Agent__V1__AllowInitiatorRequest q =
		    PILLAR_CSI__AGENT__V1__ALLOW_INITIATOR_REQUEST__INIT;
		PillarCsi__Agent__V1__FencingToken tok = PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
		struct grpc_status ast = {0};
		tok.volume_uid = uid;
		tok.generation = p.gen;
		q.volume_id = (char *)spec_str(obj, "agentVolumeID");
		q.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
		q.initiator_id = nqn;
		q.fence = &tok;
		if (agentclient_allow_initiator(c->ac, addr, &q, &ast) != GRPC_OK) {
			r = ctl_agent_error(c, v.agent, &ast,
			                    gs); /* the entry stays: fail closed */
			goto out;
		}
	}
	*resp = malloc(sizeof(**resp));
	if (!*resp) {
		r = gstatus(gs, GRPC_INTERNAL, "out of memory");
		goto out;
	}
	csi__v1__controller_publish_volume_response__init(*resp);
out:
	cJSON_Delete(csinode);
	cJSON_Delete(obj);
	keylock_release(&c->locks, &hold);
	return r;
}

/* ---- unpublish --------------------------------------------------------------------------------- */

struct unpub {
	const char *id, *node; /* node "" = every node */
	uint64_t gen;
	bool any;
};

static bool targeted(const struct unpub *u, const cJSON *e)
{
	return !*u->node || !strcmp(json_get_str(e, "nodeID") ?: "", u->node);
}

static int m_fence(cJSON *obj, cJSON *status, void *arg, struct grpc_status *gs)
{
	(void)gs;
	struct unpub *u = arg;
	cJSON *it;
	u->any = false;
	cJSON_ArrayForEach(it, published(status))
	{
		if (!targeted(u, it))
			continue;
		u->any = true;
		cJSON_DeleteItemFromObjectCaseSensitive(it, "revoking");
		cJSON_AddBoolToObject(it, "revoking", true);
	}
	if (!u->any)
		return CAS_SKIP;
	u->gen = pvst_generation(obj) + 1;
	pvst_set_generation(status, u->gen);
	return 0;
}

static int m_release(cJSON *obj, cJSON *status, void *arg, struct grpc_status *gs)
{
	struct unpub *u = arg;
	if (pvst_generation(obj) != u->gen)
		return gstatus(gs, GRPC_ABORTED,
		               "publication of volume \"%s\" changed during unpublish; retry",
		               u->id);
	cJSON *pn = published(status);
	for (int i = cJSON_GetArraySize(pn) - 1; i >= 0; i--) {
		cJSON *it = cJSON_GetArrayItem(pn, i);
		if (targeted(u, it) && entry_bool(it, "revoking"))
			cJSON_DeleteItemFromArray(pn, i);
	}
	return 0;
}

int csi_controller_unpublish(struct ctl *c, const Csi__V1__ControllerUnpublishVolumeRequest *req,
                             Csi__V1__ControllerUnpublishVolumeResponse **resp,
                             struct grpc_status *gs)
{
	struct rules_volid v;
	char pname[RULES_PVST_NAME_CAP], addr[300], uid[64];
	cJSON *obj = NULL, *fenced = NULL;
	int r = GRPC_OK;

	*resp = NULL;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->volume_id || !*req->volume_id)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	const char *node = req->node_id ? req->node_id : "";
	if (rules_volid_parse(req->volume_id, &v) < 0)
		goto done;
	rules_pvst_name(v.name, pname, sizeof(pname));
	struct keylock_hold hold;
	keylock_wait(&c->locks, &hold, pname);
	r = pvst_get_by_id(c, req->volume_id, &obj, gs);
	if (r == GRPC_NOT_FOUND) {
		r = GRPC_OK;
		goto out;
	}
	if (r)
		goto out;
	snprintf(uid, sizeof(uid), "%s", store_meta_str(obj, "uid") ?: "");
	struct unpub u = {.id = req->volume_id, .node = node};
	bool found = false;
	const cJSON *it;
	cJSON_ArrayForEach(
	    it, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "status"),
	                                         "publishedNodes")) found |= targeted(&u, it);
	if (!found)
		goto out;
	bool acl = acl_enabled(obj);
	if (acl) {
		r = ctl_agent_address(c, v.agent, addr, sizeof(addr), gs);
		if (r == GRPC_NOT_FOUND)
			r = gstatus(
			    gs, GRPC_FAILED_PRECONDITION,
			    "PillarAgent \"%s\" not found; keeping the publication of volume "
			    "\"%s\" on node \"%s\"",
			    v.agent, req->volume_id, node);
		if (r)
			goto out;
	}
	if ((r = pvst_cas(c, pname, uid, m_fence, &u, &fenced, gs)) || !u.any)
		goto out;
	if (acl) {
		const cJSON *e;
		cJSON_ArrayForEach(
		    e, cJSON_GetObjectItemCaseSensitive(
		           cJSON_GetObjectItemCaseSensitive(fenced, "status"), "publishedNodes"))
		{
			if (!targeted(&u, e))
				continue;
			PillarCsi__Agent__V1__DenyInitiatorRequest q =
			    PILLAR_CSI__AGENT__V1__DENY_INITIATOR_REQUEST__INIT;
			PillarCsi__Agent__V1__FencingToken tok =
			    PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
			struct grpc_status ast = {0};
			tok.volume_uid = uid;
			tok.generation = u.gen;
			q.volume_id = (char *)spec_str(obj, "agentVolumeID");
			q.protocol_type =
			    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
			q.initiator_id = (char *)(json_get_str(e, "initiatorID") ?: "");
			q.fence = &tok;
			int ar = agentclient_deny_initiator(c->ac, addr, &q, &ast);
			if (ar != GRPC_OK && ar != GRPC_NOT_FOUND) {
				r = ctl_agent_error(c, v.agent, &ast, gs); /* stays revoking */
				goto out;
			}
		}
	}
	r = pvst_cas(c, pname, uid, m_release, &u, NULL, gs);
out:
	cJSON_Delete(fenced);
	cJSON_Delete(obj);
	keylock_release(&c->locks, &hold);
	if (r)
		return r;
done:
	*resp = malloc(sizeof(**resp));
	if (!*resp)
		return gstatus(gs, GRPC_INTERNAL, "out of memory");
	csi__v1__controller_unpublish_volume_response__init(*resp);
	return GRPC_OK;
}
