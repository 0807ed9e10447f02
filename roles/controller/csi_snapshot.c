/* csi_snapshot — CreateSnapshot, DeleteSnapshot and ListSnapshots (docs/snapshots.md) with the
 * PillarSnapshot write sequence: the object is created with phase Creating and the claim of the
 * agent call in one write, before the agent's CreateSnapshot; what the agent answered is
 * recorded in one more write.  A retried call on a Creating object claims again and calls the
 * agent again (the agent's CreateSnapshot is idempotent by snapshot ID), so a controller killed
 * at any step leaves an object that owns whatever the agent made, and the sidecar's retry
 * finishes it.  DeleteSnapshot sets deleting with the claim, calls the agent, then deletes the
 * object pinned to its UID. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "controller/agents.h"
#include "controller/csi.h"
#include "controller/psnap.h"
#include "rules/conditions.h"
#include "rules/keys.h"

#define REASON_SNAPSHOT_READY "SnapshotReady"
#define REASON_CREATING       "Creating"
#define REASON_CREATE_FAILED  "CreateFailed"
#define REASON_DELETING       "Deleting"

/* csi-snapshotter's --extra-create-metadata keys (recorded in spec.snapshotRef). */
#define META_SNAP_NAME    "csi.storage.k8s.io/volumesnapshot/name"
#define META_SNAP_NS      "csi.storage.k8s.io/volumesnapshot/namespace"
#define META_CONTENT_NAME "csi.storage.k8s.io/volumesnapshotcontent/name"

static const char *str(const char *s)
{
	return s ? s : "";
}

/* ---- status steps ----------------------------------------------------------------------------- */

/* The claim before an agent call: +1 on the fencing generation. */
struct snap_claim {
	uint64_t gen;
	bool set_deleting;
};

static int m_claim(struct model_psnap *s, void *arg, struct grpc_status *gs)
{
	struct snap_claim *cl = arg;
	if (!cl->set_deleting && psnap_deleting(s))
		return grpc_status_set(gs, GRPC_ABORTED, "snapshot \"%s\" is being deleted",
		                       str(s->spec.snapshot_id));
	if (cl->set_deleting) {
		s->status.has_deleting = s->status.deleting = true;
		if (model_cond_set(&s->status.conditions, RULES_COND_READY, "False",
		                   REASON_DELETING, "snapshot is being deleted", 1) < 0)
			return grpc_status_oom(gs);
	}
	cl->gen = psnap_gen(s) + 1;
	psnap_gen_set(s, cl->gen);
	return 0;
}

/* What the agent answered (info) or why it failed (ast). */
struct snap_result {
	const PillarCsi__Agent__V1__SnapshotInfo *info;
	const struct grpc_status *ast;
};

static int m_result(struct model_psnap *s, void *arg, struct grpc_status *gs)
{
	struct snap_result *res = arg;
	struct model_conds *cs = &s->status.conditions;
	int r = 0;
	if (!res->info) {
		r = model_cond_set(cs, RULES_COND_READY, "False", REASON_CREATE_FAILED,
		                   res->ast->msg, 1) < 0;
		return r ? grpc_status_oom(gs) : 0;
	}
	const PillarCsi__Agent__V1__SnapshotInfo *i = res->info;
	char ts[64];
	const Google__Protobuf__Timestamp *t = i->creation_time;
	if (t && (t->seconds || t->nanos))
		psnap_time_format(t->seconds, t->nanos, ts, sizeof(ts));
	else
		psnap_time_format(time_real_us() / 1000000, 0, ts, sizeof(ts));
	s->status.has_size_bytes = s->status.has_ready_to_use = true;
	s->status.size_bytes = i->size_bytes;
	s->status.ready_to_use = i->ready_to_use;
	r |= model_str_set(&s->status.creation_time, ts) < 0;
	r |= model_str_set(&s->status.phase, i->ready_to_use ? "Ready" : "Creating") < 0;
	r |= model_cond_set(cs, RULES_COND_READY, i->ready_to_use ? "True" : "False",
	                    i->ready_to_use ? REASON_SNAPSHOT_READY : REASON_CREATING, "", 1) < 0;
	return r ? grpc_status_oom(gs) : 0;
}

/* ---- CreateSnapshot ----------------------------------------------------------------------------- */

static int respond(const struct model_psnap *s, Csi__V1__CreateSnapshotResponse *resp,
                   struct grpc_status *gs)
{
	resp->snapshot = psnap_csi(s);
	return resp->snapshot ? GRPC_OK : grpc_status_oom(gs);
}

/* The agent's CreateSnapshot under generation gen; records the outcome into *out. */
static int take(struct ctl *c, const struct model_psnap *s, uint64_t gen, const char *name,
                struct model_psnap *out, struct grpc_status *gs)
{
	char addr[300];
	struct rules_volid src;
	const char *agent = str(s->spec.agent_ref);
	int r = agents_address_of_volume(c, agent, addr, sizeof(addr), gs);
	if (r)
		return r;
	if (rules_volid_parse(str(s->spec.source_volume_id), &src) < 0)
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION,
		                       "PillarSnapshot \"%s\" names a malformed source volume ID",
		                       name);
	PillarCsi__Agent__V1__CreateSnapshotRequest q =
	    PILLAR_CSI__AGENT__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	PillarCsi__Agent__V1__CreateSnapshotResponse *cr = NULL;
	struct psnap_target t;
	struct grpc_status ast = {0};
	if (psnap_target(&t, s, gen) < 0)
		return grpc_status_oom(gs);
	q.backend_params = t.params;
	q.fence = &t.fence;
	q.snapshot_id = t.snapshot_id;
	q.backend_type = t.backend_type;
	q.source_volume_id = src.agent_volume_id;
	int ar = agentclient_create_snapshot(c->ac, addr, &q, &cr, &ast);
	psnap_target_free(&t);
	PillarCsi__Agent__V1__SnapshotInfo none = PILLAR_CSI__AGENT__V1__SNAPSHOT_INFO__INIT;
	struct snap_result res = {.ast = &ast};
	if (ar == GRPC_OK)
		res.info = cr->snapshot ? cr->snapshot : &none;
	struct grpc_status ws = {0};
	int w = psnap_update(c, name, str(s->meta.uid), m_result, &res, out, &ws);
	if (cr)
		protobuf_c_message_free_unpacked(&cr->base, NULL);
	if (ar != GRPC_OK)
		return agents_error(c, agent, &ast, gs);
	if (w)
		*gs = ws;
	return w;
}

/* spec.snapshotRef from the sidecar's extra metadata; other parameters are refused. */
static int snapshot_params(const Csi__V1__CreateSnapshotRequest *req, struct model_psnap *s,
                           struct grpc_status *gs)
{
	int r = 0;
	for (size_t i = 0; i < req->n_parameters; i++) {
		const char *k = str(req->parameters[i]->key), *v = req->parameters[i]->value;
		char **dst = !strcmp(k, META_SNAP_NAME)      ? &s->spec.snapshot_ref.name
		             : !strcmp(k, META_SNAP_NS)      ? &s->spec.snapshot_ref.ns
		             : !strcmp(k, META_CONTENT_NAME) ? &s->spec.snapshot_ref.content_name
		                                             : NULL;
		if (!dst)
			return grpc_status_set(
			    gs, GRPC_INVALID_ARGUMENT,
			    "parameter \"%s\" is not known: a VolumeSnapshotClass of "
			    "pillar-csi.bhyoo.com takes no parameters",
			    k);
		s->spec.has_snapshot_ref = true;
		r |= model_str_set(dst, v);
	}
	return r ? grpc_status_oom(gs) : 0;
}

/* Why a source volume cannot be snapshotted now (0 when it can). */
static int source_usable(const struct model_pvst *v, const char *id, struct grpc_status *gs)
{
	const struct model_backend *b = &v->spec.resolved.backend;
	if (pvst_deleting(v))
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION,
		                       "source volume \"%s\" is being deleted", id);
	/* a create being completed, e.g. after its lazy Ready was lost (csi_volume.c) with the
	 * answer already at the CO: retryable, as for an expansion or a clone */
	if (!v->status.phase || strcmp(v->status.phase, "Ready"))
		return grpc_status_set(gs, GRPC_UNAVAILABLE,
		                       "source volume \"%s\" is not ready yet (phase %s); retry "
		                       "once CreateVolume has succeeded",
		                       id, v->status.phase ? v->status.phase : "unset");
	if (b->has_lvm && strcmp(model_lvm_mode(&b->lvm), "thin"))
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION,
		                       "source volume \"%s\" is an LVM linear volume: snapshots "
		                       "need a thin pool",
		                       id);
	return 0;
}

/* The new object: spec from the source volume v, whose volume ID (the request's) parses to src;
 * status Creating with the first claim. */
static int new_snapshot(const Csi__V1__CreateSnapshotRequest *req, const struct rules_volid *src,
                        const struct model_pvst *v, const char *pname, struct model_psnap *s,
                        struct grpc_status *gs)
{
	struct rules_volid id;
	char sid[RULES_VOLID_CAP];
	if (rules_snapid_make(src->agent, src->backend, src->pool, req->name, sid, sizeof(sid),
	                      &id) < 0) /* sid holds the ID as far as it was written */
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "snapshot ID \"%s\" would be malformed", sid);
	int r = snapshot_params(req, s, gs);
	if (r)
		return r;
	r = model_str_set(&s->meta.name, pname) |
	    model_map_set(&s->meta.labels, RULES_LABEL_AGENT, src->agent) |
	    model_str_set(&s->spec.snapshot_id, sid) |
	    model_str_set(&s->spec.agent_snapshot_id, id.agent_volume_id) |
	    model_str_set(&s->spec.snapshot_name, req->name) |
	    model_str_set(&s->spec.agent_ref, src->agent) |
	    model_str_set(&s->spec.backend_type, src->backend) |
	    model_str_set(&s->spec.source_volume_id, v->spec.volume_id) |
	    model_str_set(&s->spec.source_volume_state, v->meta.name) |
	    model_str_set(&s->status.phase, "Creating");
	const char *pst = model_map_get(&v->meta.labels, RULES_LABEL_STORE);
	if (pst) /* a restore from it lands in the same store (csi_source.h) */
		r |= model_map_set(&s->meta.labels, RULES_LABEL_STORE, pst);
	s->spec.has_backend = true;
	r |= model_type_copy(&model_backend_type, &s->spec.backend, &v->spec.resolved.backend);
	r |= model_cond_set(&s->status.conditions, RULES_COND_READY, "False", REASON_CREATING,
	                    "snapshot is being taken", 1) < 0;
	psnap_gen_set(s, 1);
	return r ? grpc_status_oom(gs) : 0;
}

/* First attempt: the source, then the object (phase Creating, generation 1) in one write. */
static int create_object(struct ctl *c, const Csi__V1__CreateSnapshotRequest *req,
                         const char *pname, struct model_psnap *out, struct grpc_status *gs)
{
	struct model_pvst v;
	struct model_psnap s = {0};
	struct rules_volid src;
	struct err e = {0};
	/* an ID that does not parse names no volume; one that does is the found record's own */
	int r = rules_volid_parse(req->source_volume_id, &src) < 0
	            ? GRPC_NOT_FOUND
	            : pvst_find(c, req->source_volume_id, &v, gs);
	if (r == GRPC_NOT_FOUND)
		return grpc_status_set(gs, GRPC_NOT_FOUND, "source volume \"%s\" not found",
		                       req->source_volume_id);
	if (r)
		return r;
	if (!(r = source_usable(&v, req->source_volume_id, gs)) &&
	    !(r = new_snapshot(req, &src, &v, pname, &s, gs))) {
		r = model_create_with_status(c->st, &model_psnap_kind, &s, out, &e);
		if (r == STORE_ALREADY_EXISTS)
			r = GRPC_ALREADY_EXISTS; /* a concurrent replica: re-read (gs untouched) */
		else if (r < 0)
			r = grpc_status_set(gs, ctl_store_code(r),
			                    "creating PillarSnapshot \"%s\": %s", pname, e.msg);
	}
	model_clear(&model_psnap_kind, &s);
	model_clear(&model_pvst_kind, &v);
	return r;
}

/* An existing object: refused, answered, or finished. */
static int create_existing(struct ctl *c, const Csi__V1__CreateSnapshotRequest *req,
                           const struct model_psnap *s, const char *pname,
                           Csi__V1__CreateSnapshotResponse *resp, struct grpc_status *gs)
{
	if (strcmp(str(s->spec.source_volume_id), req->source_volume_id))
		return grpc_status_set(gs, GRPC_ALREADY_EXISTS,
		                       "snapshot \"%s\" already exists for source volume \"%s\"; "
		                       "requested for \"%s\"",
		                       req->name, str(s->spec.source_volume_id),
		                       req->source_volume_id);
	if (psnap_deleting(s))
		return grpc_status_set(gs, GRPC_ABORTED, "snapshot \"%s\" is being deleted",
		                       req->name);
	if (s->status.has_ready_to_use && s->status.ready_to_use)
		return respond(s, resp, gs);
	struct snap_claim cl = {0};
	struct model_psnap cur = {0};
	int r = psnap_update(c, pname, str(s->meta.uid), m_claim, &cl, NULL, gs);
	if (r == 0 && (r = take(c, s, cl.gen, pname, &cur, gs)) == 0)
		r = respond(&cur, resp, gs);
	model_clear(&model_psnap_kind, &cur);
	return r;
}

static int validate_create(const Csi__V1__CreateSnapshotRequest *req, struct grpc_status *gs)
{
	if (!req->name || !*req->name)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "name is required");
	if (!rules_volname_valid(req->name))
		return csi_name_refused(gs, "name", req->name, "^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$");
	if (!req->source_volume_id || !*req->source_volume_id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "source_volume_id is required");
	return 0;
}

int csi_create_snapshot(struct ctl *c, const Csi__V1__CreateSnapshotRequest *req,
                        Csi__V1__CreateSnapshotResponse *resp, struct grpc_status *gs)
{
	char pname[RULES_PVST_NAME_CAP], key[RULES_PVST_NAME_CAP + 16];
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	int r = validate_create(req, gs);
	if (r)
		return r;
	rules_pvst_name(req->name, pname, sizeof(pname));
	snprintf(key, sizeof(key), "snapshot/%s", pname);
	struct keylock_hold hold;
	keylock_wait(&c->locks, &hold, key);
	for (int attempt = 0; attempt < 4; attempt++) {
		struct model_psnap s;
		struct err e = {0};
		r = model_get(c->st, &model_psnap_kind, NULL, pname, &s, &e);
		if (r == STORE_NOT_FOUND) {
			r = create_object(c, req, pname, &s, gs);
			if (r == GRPC_ALREADY_EXISTS && !gs->msg[0])
				continue;
			struct model_psnap cur = {0};
			if (r == 0 && (r = take(c, &s, psnap_gen(&s), pname, &cur, gs)) == 0)
				r = respond(&cur, resp, gs);
			model_clear(&model_psnap_kind, &cur);
			model_clear(&model_psnap_kind, &s);
			break;
		}
		if (r < 0) {
			r = grpc_status_set(gs, GRPC_UNAVAILABLE,
			                    "reading PillarSnapshot \"%s\": %s", pname, e.msg);
			break;
		}
		r = create_existing(c, req, &s, pname, resp, gs);
		model_clear(&model_psnap_kind, &s);
		break;
	}
	if (r == GRPC_OK && !resp->snapshot)
		r = grpc_status_set(gs, GRPC_ABORTED, "snapshot \"%s\" keeps changing; retry",
		                    req->name);
	keylock_release(&c->locks, &hold);
	return r;
}

/* ---- DeleteSnapshot ----------------------------------------------------------------------------- */

static int agent_delete(struct ctl *c, const struct model_psnap *s, uint64_t gen,
                        struct grpc_status *gs)
{
	char addr[300];
	const char *agent = str(s->spec.agent_ref);
	int r = agents_address(c, agent, addr, sizeof(addr), gs);
	if (r == GRPC_NOT_FOUND)
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION,
		                       "PillarAgent \"%s\" not found; cannot confirm that snapshot "
		                       "\"%s\" was removed",
		                       agent, str(s->spec.snapshot_id));
	if (r)
		return r;
	PillarCsi__Agent__V1__DeleteSnapshotRequest q =
	    PILLAR_CSI__AGENT__V1__DELETE_SNAPSHOT_REQUEST__INIT;
	struct psnap_target t;
	struct grpc_status ast = {0};
	if (psnap_target(&t, s, gen) < 0)
		return grpc_status_oom(gs);
	q.backend_params = t.params;
	q.fence = &t.fence;
	q.snapshot_id = t.snapshot_id;
	q.backend_type = t.backend_type;
	int ar = agentclient_delete_snapshot(c->ac, addr, &q, &ast);
	psnap_target_free(&t);
	return ar == GRPC_OK || ar == GRPC_NOT_FOUND ? GRPC_OK : agents_error(c, agent, &ast, gs);
}

int csi_delete_snapshot(struct ctl *c, const Csi__V1__DeleteSnapshotRequest *req,
                        Csi__V1__DeleteSnapshotResponse *resp, struct grpc_status *gs)
{
	(void)resp;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->snapshot_id || !*req->snapshot_id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "snapshot_id is required");
	struct model_psnap s;
	int r = psnap_find(c, req->snapshot_id, &s, gs);
	if (r)
		return r == GRPC_NOT_FOUND ? GRPC_OK : r;
	char key[RULES_PVST_NAME_CAP + 16];
	snprintf(key, sizeof(key), "snapshot/%s", str(s.meta.name));
	model_clear(&model_psnap_kind, &s);
	struct keylock_hold hold;
	keylock_wait(&c->locks, &hold, key);
	if ((r = psnap_find(c, req->snapshot_id, &s, gs)) != 0) { /* again, under the lock */
		keylock_release(&c->locks, &hold);
		return r == GRPC_NOT_FOUND ? GRPC_OK : r;
	}
	const char *pname = str(s.meta.name), *uid = str(s.meta.uid);
	/* A snapshot already deleting keeps its generation: the agent accepts a retry of the final
	 * delete at exactly the mark's generation, also once it has ended the lifecycle
	 * (agent-api.md §6.3 rule 6) - a new claim would be refused as stale after a delete
	 * whose answer was lost. */
	struct snap_claim cl = {.set_deleting = true, .gen = psnap_gen(&s)};
	if (!psnap_deleting(&s))
		r = psnap_update(c, pname, uid, m_claim, &cl, NULL, gs);
	if (r == 0)
		r = agent_delete(c, &s, cl.gen, gs);
	if (r == 0) {
		struct err e = {0};
		int d = store_delete(c->st, model_store_kind(&model_psnap_kind), NULL, pname, uid,
		                     NULL, &e);
		if (d != 0 && d != STORE_NOT_FOUND)
			r = grpc_status_set(gs, ctl_store_code(d),
			                    "deleting PillarSnapshot \"%s\": %s", pname, e.msg);
	}
	keylock_release(&c->locks, &hold);
	model_clear(&model_psnap_kind, &s);
	return r;
}
