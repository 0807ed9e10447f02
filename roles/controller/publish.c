/* publish — ControllerPublishVolume / ControllerUnpublishVolume (csi.md §4.3, §4.4).
 *
 * Publications fail closed (agent-api.md §6.4): the entry is recorded (generation +1) before
 * AllowInitiator, marked `revoking` (generation +1) before DenyInitiator, and removed only
 * after the revoke succeeded and only if the generation did not change meanwhile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "controller/agents.h"
#include "controller/csi.h"
#include "controller/dhchap.h"
#include "controller/pvst.h"
#include "model/kube.h"
#include <errno.h>

static bool single_node(const char *mode)
{
	return !strncmp(mode, "SINGLE_NODE_", 12);
}

/* The export admits only published hosts: exportSpec.aclEnabled, else the protocol's acl. */
static bool acl_enabled(const struct model_pvst *v)
{
	if (v->status.has_export_spec)
		return v->status.export_spec.has_acl_enabled && v->status.export_spec.acl_enabled;
	const struct model_nvmeof_tcp *n = &v->spec.resolved.protocol.nvmeof_tcp;
	return n->has_acl && n->acl;
}

static const char *str(const char *s)
{
	return s ? s : "";
}

/* ---- publish ----------------------------------------------------------------------------------- */

struct pub {
	const char *id, *node, *nqn, *mode;
	bool ro;
	uint64_t gen;
};

/* An existing entry against the requested publication: 0 (the same), else the refusal. */
static int check_entry(const struct pub *p, const struct model_pvst_published *it,
                       struct grpc_status *gs)
{
	const char *node = str(it->node_id), *mode = str(it->access_mode);
	const char *nqn = str(it->initiator_id);
	bool ro = it->has_readonly && it->readonly;
	if (strcmp(node, p->node)) {
		if (single_node(mode) ||
		    (!strcmp(mode, "MULTI_NODE_READER_ONLY") && single_node(p->mode)))
			return grpc_status_set(
			    gs, GRPC_FAILED_PRECONDITION,
			    "volume \"%s\" is published to another node \"%s\" (access mode "
			    "%s, readonly=%s); cannot publish to node \"%s\" with access "
			    "mode %s",
			    p->id, node, mode, ro ? "true" : "false", p->node, p->mode);
		return 0;
	}
	if (it->has_revoking && it->revoking)
		return grpc_status_set(
		    gs, GRPC_ABORTED,
		    "volume \"%s\" is being unpublished from node \"%s\"; retry later", p->id,
		    node);
	if (strcmp(nqn, p->nqn))
		return grpc_status_set(
		    gs, GRPC_FAILED_PRECONDITION,
		    "volume \"%s\" is published to node \"%s\" with host NQN \"%s\" but "
		    "the node now reports \"%s\"; unpublish it first",
		    p->id, node, nqn, p->nqn);
	if (strcmp(mode, p->mode) || ro != p->ro)
		return grpc_status_set(
		    gs, GRPC_ALREADY_EXISTS,
		    "volume \"%s\" is already published to node \"%s\" with access mode "
		    "%s, readonly=%s; requested access mode %s, readonly=%s",
		    p->id, node, mode, ro ? "true" : "false", p->mode, p->ro ? "true" : "false");
	return 0;
}

static int add_entry(struct model_pvst *v, const struct pub *p)
{
	size_t n = v->status.n_published;
	struct model_pvst_published *a = realloc(v->status.published, (n + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	v->status.published = a;
	memset(&a[n], 0, sizeof(a[n]));
	v->status.n_published = n + 1;
	v->status.has_published = true;
	a[n].has_readonly = a[n].has_revoking = true;
	a[n].readonly = p->ro;
	if (model_str_set(&a[n].node_id, p->node) < 0 ||
	    model_str_set(&a[n].initiator_id, p->nqn) < 0 ||
	    model_str_set(&a[n].access_mode, p->mode) < 0)
		return -ENOMEM;
	return 0;
}

static int m_publish(struct model_pvst *v, void *arg, struct grpc_status *gs)
{
	struct pub *p = arg;
	bool mine = false;
	int r;
	if (pvst_deleting(v))
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION,
		                       "volume \"%s\" is being deleted", p->id);
	for (size_t i = 0; i < v->status.n_published; i++) {
		if ((r = check_entry(p, &v->status.published[i], gs)) != 0)
			return r;
		mine |= !strcmp(str(v->status.published[i].node_id), p->node);
	}
	if (!mine && add_entry(v, p) < 0)
		return grpc_status_oom(gs);
	p->gen = pvst_gen(v) + 1;
	pvst_gen_set(v, p->gen);
	return 0;
}

/* FAILED_PRECONDITION when another CSINode reports the same host NQN (csi.md §10.3). */
static int duplicate_nqn(struct ctl *c, const char *node, const char *nqn, bool acl,
                         struct grpc_status *gs)
{
	struct model_csinode *items = NULL;
	size_t cnt = 0;
	int r = 0;
	if (model_list(c->st, &model_csinode_kind, NULL, NULL, (void **)&items, &cnt, NULL, NULL) <
	    0)
		return 0;
	for (size_t i = 0; i < cnt; i++) {
		const char *n = str(items[i].meta.name);
		const char *a = model_map_get(&items[i].meta.annotations, RULES_ANN_HOST_NQN);
		if (!a || strcmp(a, nqn) || !strcmp(n, node))
			continue;
		if (acl)
			r = grpc_status_set(
			    gs, GRPC_FAILED_PRECONDITION,
			    "host NQN \"%s\" is also used by node \"%s\"; give every worker a "
			    "unique /etc/nvme/hostnqn and /etc/nvme/hostid",
			    nqn, n);
		else
			log_warnf("host NQN \"%s\" of node \"%s\" is also used by node \"%s\"", nqn,
			          node, n);
		break;
	}
	model_list_free(&model_csinode_kind, items, cnt);
	return r;
}

/* The host NQN the node's CSINode reports (crds.md §15). */
static int host_nqn(struct ctl *c, const char *node, char *nqn, size_t cap, struct grpc_status *gs)
{
	struct model_csinode cn;
	struct err e = {0};
	int g = model_get(c->st, &model_csinode_kind, NULL, node, &cn, &e);
	if (g == STORE_NOT_FOUND || g == STORE_INVALID)
		return grpc_status_set(gs, GRPC_NOT_FOUND, "CSINode \"%s\" not found", node);
	if (g < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "reading CSINode \"%s\": %s", node,
		                       e.msg);
	const char *a = model_map_get(&cn.meta.annotations, RULES_ANN_HOST_NQN);
	int r = 0;
	if (!a || !*a)
		r = grpc_status_set(
		    gs, GRPC_FAILED_PRECONDITION,
		    "CSINode \"%s\" is missing annotation \"" RULES_ANN_HOST_NQN "\"", node);
	else
		snprintf(nqn, cap, "%s", a);
	model_clear(&model_csinode_kind, &cn);
	return r;
}

/* AllowInitiator (allow) or DenyInitiator of initiator on obj's NVMe-oF/TCP export, with obj's
 * fencing token at generation gen: the RPC's code, the agent's status in ast. */
static int initiator_rpc(struct ctl *c, const char *addr, bool allow, const struct model_pvst *obj,
                         uint64_t gen, const char *initiator,
                         const PillarCsi__Agent__V1__HostAuth *auth, struct grpc_status *ast)
{
	PillarCsi__Agent__V1__AllowInitiatorRequest aq =
	    PILLAR_CSI__AGENT__V1__ALLOW_INITIATOR_REQUEST__INIT;
	PillarCsi__Agent__V1__DenyInitiatorRequest dq =
	    PILLAR_CSI__AGENT__V1__DENY_INITIATOR_REQUEST__INIT;
	PillarCsi__Agent__V1__FencingToken tok;
	pvst_fence(&tok, obj, gen);
	char *volume_id = (char *)str(obj->spec.agent_volume_id);
	const PillarCsi__Agent__V1__ProtocolType proto =
	    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	if (allow) {
		aq.volume_id = volume_id;
		aq.protocol_type = proto;
		aq.initiator_id = (char *)initiator;
		aq.fence = &tok;
		aq.auth = (PillarCsi__Agent__V1__HostAuth *)auth;
		return agentclient_allow_initiator(c->ac, addr, &aq, ast);
	}
	dq.volume_id = volume_id;
	dq.protocol_type = proto;
	dq.initiator_id = (char *)initiator;
	dq.fence = &tok;
	return agentclient_deny_initiator(c->ac, addr, &dq, ast);
}

/* AllowInitiator for a recorded publication (ACL exports only), with the node's DH-HMAC-CHAP
 * keys when the volume asks for authentication (docs/authentication.md "Keys"). */
static int allow(struct ctl *c, const struct rules_volid *v, const struct model_pvst *obj,
                 const struct pub *p, struct grpc_status *gs)
{
	char addr[300];
	struct dhchap_grant g;
	int r = agents_address_of_volume(c, v->agent, addr, sizeof(addr), gs);
	if (r == 0)
		r = dhchap_grant_for(c, v->agent, &obj->spec.resolved, p->node, p->nqn, &g, gs);
	if (r) /* the entry stays: fail closed */
		return r;
	struct grpc_status ast = {0};
	if (initiator_rpc(c, addr, true, obj, p->gen, p->nqn, g.on ? &g.auth : NULL, &ast) !=
	    GRPC_OK)
		r = agents_error(c, v->agent, &ast, gs); /* the entry stays: fail closed */
	dhchap_grant_clear(&g);
	return r;
}

static int publish_args(const Csi__V1__ControllerPublishVolumeRequest *req, struct grpc_status *gs)
{
	if (!req->volume_id || !*req->volume_id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	if (!req->node_id || !*req->node_id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "node_id is required");
	if (!req->volume_capability)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "volume_capability is required");
	return csi_check_capability(req->volume_capability, gs);
}

/* Steps under the volume lock: the volume, the node's host NQN, the record, the grant. */
static int publish_locked(struct ctl *c, const struct rules_volid *v, const char *pname, void *arg,
                          struct grpc_status *gs)
{
	const Csi__V1__ControllerPublishVolumeRequest *req = arg;
	struct model_pvst obj;
	char nqn[256];
	int r = pvst_find_existing(c, req->volume_id, &obj, gs);
	if (r)
		return r;
	if (pvst_deleting(&obj))
		r = grpc_status_set(gs, GRPC_FAILED_PRECONDITION, "volume \"%s\" is being deleted",
		                    req->volume_id);
	bool acl = acl_enabled(&obj);
	struct pub p = {.id = req->volume_id,
	                .node = req->node_id,
	                .nqn = nqn,
	                .mode = csi_mode_name(req->volume_capability->access_mode->mode),
	                .ro = req->readonly};
	if (r == 0 && (r = host_nqn(c, req->node_id, nqn, sizeof(nqn), gs)) == 0 &&
	    (r = duplicate_nqn(c, req->node_id, nqn, acl, gs)) == 0 &&
	    (r = pvst_update(c, pname, obj.meta.uid, m_publish, &p, NULL, gs)) == 0 && acl)
		r = allow(c, v, &obj, &p, gs);
	model_clear(&model_pvst_kind, &obj);
	return r;
}

int csi_controller_publish(struct ctl *c, const Csi__V1__ControllerPublishVolumeRequest *req,
                           Csi__V1__ControllerPublishVolumeResponse *resp, struct grpc_status *gs)
{
	int r;

	(void)resp; /* the answer carries no publish_context */
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if ((r = publish_args(req, gs)))
		return r;
	return pvst_locked(c, req->volume_id, false, publish_locked, (void *)req, gs);
}

/* ---- unpublish --------------------------------------------------------------------------------- */

struct unpub {
	const char *id, *node; /* node "" = every node */
	uint64_t gen;
	bool any;
};

static bool targeted(const struct unpub *u, const struct model_pvst_published *e)
{
	return !*u->node || !strcmp(str(e->node_id), u->node);
}

static int m_fence(struct model_pvst *v, void *arg, struct grpc_status *gs)
{
	(void)gs;
	struct unpub *u = arg;
	u->any = false;
	for (size_t i = 0; i < v->status.n_published; i++) {
		struct model_pvst_published *it = &v->status.published[i];
		if (!targeted(u, it))
			continue;
		u->any = true;
		it->has_revoking = it->revoking = true;
	}
	if (!u->any)
		return PVST_SKIP;
	u->gen = pvst_gen(v) + 1;
	pvst_gen_set(v, u->gen);
	return 0;
}

static int m_release(struct model_pvst *v, void *arg, struct grpc_status *gs)
{
	struct unpub *u = arg;
	size_t w = 0;
	if (pvst_gen(v) != u->gen)
		return grpc_status_set(
		    gs, GRPC_ABORTED,
		    "publication of volume \"%s\" changed during unpublish; retry", u->id);
	for (size_t i = 0; i < v->status.n_published; i++) {
		struct model_pvst_published *it = &v->status.published[i];
		if (targeted(u, it) && it->has_revoking && it->revoking) {
			model_type_clear(&model_pvst_published_type, it);
			continue;
		}
		v->status.published[w++] = *it;
	}
	v->status.n_published = w;
	return 0;
}

/* DenyInitiator for every targeted entry of the fenced object (ACL exports only). */
static int deny(struct ctl *c, const struct rules_volid *v, const struct model_pvst *fenced,
                const struct unpub *u, const char *addr, struct grpc_status *gs)
{
	for (size_t i = 0; i < fenced->status.n_published; i++) {
		const struct model_pvst_published *e = &fenced->status.published[i];
		if (!targeted(u, e))
			continue;
		struct grpc_status ast = {0};
		int ar =
		    initiator_rpc(c, addr, false, fenced, u->gen, str(e->initiator_id), NULL, &ast);
		if (ar != GRPC_OK && ar != GRPC_NOT_FOUND)
			return agents_error(c, v->agent, &ast, gs); /* stays revoking */
	}
	return 0;
}

/* Steps under the volume lock: fence (revoking), revoke, release. */
static int unpublish_locked(struct ctl *c, const struct rules_volid *v, const char *pname,
                            void *arg, struct grpc_status *gs)
{
	const Csi__V1__ControllerUnpublishVolumeRequest *req = arg;
	const char *volume_id = req->volume_id, *node = req->node_id ? req->node_id : "";
	struct model_pvst obj, fenced = {0};
	char addr[300];
	struct unpub u = {.id = volume_id, .node = node};
	bool found = false;
	int r = pvst_find(c, volume_id, &obj, gs);
	if (r)
		return r == GRPC_NOT_FOUND ? GRPC_OK : r;
	for (size_t i = 0; i < obj.status.n_published; i++)
		found |= targeted(&u, &obj.status.published[i]);
	bool acl = found && acl_enabled(&obj);
	if (acl) {
		r = agents_address(c, v->agent, addr, sizeof(addr), gs);
		if (r == GRPC_NOT_FOUND)
			r = grpc_status_set(
			    gs, GRPC_FAILED_PRECONDITION,
			    "PillarAgent \"%s\" not found; keeping the publication of volume "
			    "\"%s\" on node \"%s\"",
			    v->agent, volume_id, node);
	}
	if (found && r == 0 &&
	    (r = pvst_update(c, pname, obj.meta.uid, m_fence, &u, &fenced, gs)) == 0 && u.any &&
	    (!acl || (r = deny(c, v, &fenced, &u, addr, gs)) == 0))
		r = pvst_update(c, pname, obj.meta.uid, m_release, &u, NULL, gs);
	model_clear(&model_pvst_kind, &fenced);
	model_clear(&model_pvst_kind, &obj);
	return r;
}

int csi_controller_unpublish(struct ctl *c, const Csi__V1__ControllerUnpublishVolumeRequest *req,
                             Csi__V1__ControllerUnpublishVolumeResponse *resp,
                             struct grpc_status *gs)
{
	(void)resp;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->volume_id || !*req->volume_id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	return pvst_locked(c, req->volume_id, true, unpublish_locked, (void *)req, gs);
}
