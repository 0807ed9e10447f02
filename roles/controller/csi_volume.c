/* csi_volume — CreateVolume (csi.md §4.1) with the PillarVolumeState write sequence of
 * crds.md §7.5: create the object, claim, create the backend, claim, export, record Ready.
 * Each claim rides on the write before it, and Ready on the write of the success-recorded
 * annotation; on the embedded store a write with status is one write (store.h
 * store_*_with_status).  A pass that creates the backend and exports it at once records
 * neither CreatePartial nor a second claim (crds.md §7.5, "Deviation"): both agent calls carry
 * the generation of the one claim, and the backend's record (device, exportSpec) rides on the
 * write of the export's outcome — Ready, or CreatePartial with the failure.  A CreateVolume is
 * thus two writes: the object with phase Provisioning and the claim, Ready with the
 * annotation.  A crash between them leaves Provisioning, which a retry provisions again under
 * a new claim (both agent calls are idempotent).
 *
 * The first is durable before the agent's CreateVolume (the claim and the fencing UID must be,
 * before a backend exists); the Ready write is lazy (store.h store_write_lazy): on the embedded
 * store it is acknowledged with the call, durable with the controller's next durable write or
 * at most STORE_LAZY_MS later, so a create waits for one flush of the controller, not two.  A
 * power cut in between (or the controller killed: store.h store_dir_lazy_lost) leaves the object at its intent (Provisioning or CreatePartial, the
 * claim recorded) while the agent holds the volume durably, created and exported, and the CO
 * may hold the answer.  What then holds, whichever:
 *   - a CreateVolume retry provisions again under a new claim and answers with the same volume
 *     (its ID, capacity and context: the agent calls are idempotent, the target the same);
 *   - the store notes the cut (store_dir_lazy_lost); the controller's recovery
 *     (reconcile_unfinished) first marks every unfinished object success-recorded, which keeps
 *     the abandoned-attempt reaper away from it for good, then provisions each again until it
 *     is Ready;
 *   - meanwhile ControllerPublish/Unpublish and DeleteVolume work in any phase; CreateSnapshot,
 *     a clone from it and an expansion answer UNAVAILABLE ("retry once CreateVolume has
 *     succeeded"), which the sidecars retry until the recovery made it Ready.
 * On the API server's store the Ready write is durable when it returns, as before. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agents.h"
#include "controller/csi.h"
#include "controller/csi_source.h"
#include "controller/dhchap.h"
#include "controller/pvst.h"
#include "controller/resolve.h"
#include "rules/conditions.h"
#include "rules/mkfs.h"
#include "rules/size.h"

#define GiB (1024LL * RULES_SIZE_MIB)

static const char *str(const char *s)
{
	return s ? s : "";
}

/* ---- CAS mutations ------------------------------------------------------------------------------ */

int csi_claim(struct model_pvst *v, void *arg, struct grpc_status *gs)
{
	struct csi_claim *cl = arg;
	if (cl->set_deleting) {
		if (v->status.n_published > 0)
			return grpc_status_set(
			    gs, GRPC_FAILED_PRECONDITION,
			    "volume \"%s\" is still published; unpublish it before deleting",
			    cl->volume_id);
		v->status.has_deleting = v->status.deleting = true;
		if (model_cond_set(&v->status.conditions, RULES_COND_READY, "False",
		                   RULES_REASON_DELETING, "volume is being deleted",
		                   v->meta.generation) < 0)
			return grpc_status_oom(gs);
	} else if (pvst_deleting(v)) {
		return grpc_status_set(gs, GRPC_ABORTED, "volume \"%s\" is being deleted",
		                       cl->name);
	}
	cl->gen = pvst_gen(v) + 1;
	pvst_gen_set(v, cl->gen);
	return 0;
}

/* The claim before the agent's CreateVolume (crds.md §7.5), in one write with the first status
 * of a new object (phase Provisioning, generation 0, then the claim's +1): a crash after it
 * leaves what a crash after a separate claim would. */
static int m_claim_backend(struct model_pvst *v, void *arg, struct grpc_status *gs)
{
	if (!v->status.phase) {
		if (model_str_set(&v->status.phase, "Provisioning") < 0 ||
		    model_cond_set(&v->status.conditions, RULES_COND_READY, "False",
		                   RULES_REASON_PROVISIONING, "volume is being provisioned", 1) < 0)
			return grpc_status_oom(gs);
		pvst_gen_set(v, 0);
	}
	return csi_claim(v, arg, gs);
}

struct step_result {
	bool ok;
	const char *op, *reason;
	bool backend_created;
	const struct grpc_status *ast;
	const char *device_path;
	const struct model_pvst_export_spec *export_spec;
	const PillarCsi__Agent__V1__ExportInfo *ei;
	/* the backend was created in this pass and not yet recorded: its record (CreatePartial,
	 * device_path, export_spec) rides on this write of the export's outcome */
	bool backend_unrecorded;
};

/* status.partialFailure and the pending conditions of a failed step. */
static int step_failed(struct model_pvst *v, const struct step_result *s, int64_t og)
{
	__typeof__(v->status.partial_failure) *pf = &v->status.partial_failure;
	char ts[32];
	store_timestamp(ts, sizeof(ts));
	model_type_clear(&model_pvst_partial_failure_type, pf);
	v->status.has_partial_failure = true;
	pf->has_backend_created = pf->has_export_created = true;
	pf->backend_created = s->backend_created;
	int r = model_str_set(&pf->failed_operation, s->op) | model_str_set(&pf->failed_at, ts) |
	        model_str_set(&pf->reason, s->reason) | model_str_set(&pf->message, s->ast->msg);
	if (!s->backend_created)
		r |= model_cond_set(&v->status.conditions, RULES_COND_BACKEND_CREATED, "False",
		                    RULES_REASON_BACKEND_PENDING, s->ast->msg, og) < 0;
	else
		r |= model_cond_set(&v->status.conditions, RULES_COND_EXPORT_CREATED, "False",
		                    RULES_REASON_EXPORT_PENDING, s->ast->msg, og) < 0;
	return r ? -ENOMEM : 0;
}

/* phase CreatePartial: the backend exists, its device and the export to build are recorded. */
static int step_backend(struct model_pvst *v, const struct step_result *s, int64_t og)
{
	struct model_conds *cs = &v->status.conditions;
	int r = model_str_set(&v->status.phase, "CreatePartial") |
	        model_str_set(&v->status.backend_device_path, s->device_path);
	model_type_clear(&model_pvst_export_spec_type, &v->status.export_spec);
	v->status.has_export_spec = true;
	r |= model_type_copy(&model_pvst_export_spec_type, &v->status.export_spec, s->export_spec);
	r |= model_cond_set(cs, RULES_COND_BACKEND_CREATED, "True", RULES_REASON_BACKEND_CREATED,
	                    "", og) < 0;
	r |= model_cond_set(cs, RULES_COND_EXPORT_CREATED, "False", RULES_REASON_EXPORT_PENDING,
	                    "backend exists, export not yet created", og) < 0;
	r |= model_cond_set(cs, RULES_COND_READY, "False", RULES_REASON_CREATE_PARTIAL,
	                    "export not yet created", og) < 0;
	return r ? -ENOMEM : 0;
}

/* phase Ready: the live endpoint recorded, the partial state cleared. */
static int step_ready(struct model_pvst *v, const struct step_result *s, int64_t og)
{
	struct model_conds *cs = &v->status.conditions;
	__typeof__(v->status.export_info) *ei = &v->status.export_info;
	model_type_clear(&model_pvst_export_info_type, ei);
	v->status.has_export_info = ei->has_port = true;
	ei->port = s->ei->port;
	int r = model_str_set(&v->status.phase, "Ready") |
	        model_str_set(&ei->target_id, str(s->ei->target_id)) |
	        model_str_set(&ei->address, str(s->ei->address)) |
	        model_str_set(&ei->volume_ref, str(s->ei->volume_ref)) |
	        model_str_set(&v->status.backend_device_path, NULL);
	model_type_clear(&model_pvst_partial_failure_type, &v->status.partial_failure);
	v->status.has_partial_failure = false;
	r |= model_cond_set(cs, RULES_COND_BACKEND_CREATED, "True", RULES_REASON_BACKEND_CREATED,
	                    "", og) < 0;
	r |= model_cond_set(cs, RULES_COND_EXPORT_CREATED, "True", RULES_REASON_EXPORT_CREATED, "",
	                    og) < 0;
	r |= model_cond_set(cs, RULES_COND_READY, "True", RULES_REASON_VOLUME_READY, "", og) < 0;
	/* the export was just built from exportSpec, and a volume being created has no
	 * publications: the kernel matches both (crds.md §7.3), as a resync would now record */
	r |= model_cond_set(cs, RULES_COND_EXPORT_RECONCILED, "True", RULES_REASON_RECONCILED, "",
	                    og) < 0;
	/* crds.md §7.4: in the update that records Ready (pvst_update_all) */
	r |= model_map_set(&v->meta.annotations, RULES_ANN_SUCCESS, "true");
	return r ? -ENOMEM : 0;
}

static int m_step(struct model_pvst *v, void *arg, struct grpc_status *gs)
{
	struct step_result *s = arg;
	int64_t og = v->meta.generation;
	int r = s->backend_unrecorded ? step_backend(v, s, og) : 0;
	r = r ? r : !s->ok ? step_failed(v, s, og) : step_ready(v, s, og);
	return r < 0 ? grpc_status_oom(gs) : 0;
}

/* The success-recorded annotation (a metadata update: the status subresource cannot carry it). */
static int record_success(struct ctl *c, const char *name, const char *uid, struct grpc_status *gs)
{
	for (int i = 0; i < 8; i++) {
		struct model_pvst v;
		struct err e = {0};
		/* first from the cache: the update is conditional on its resourceVersion, and the
		 * annotation, once set, is never removed (pvst.h) */
		int r = pvst_read(c, name, i == 0, &v, &e);
		if (i == 0 && (r < 0 || strcmp(str(v.meta.uid), uid))) {
			model_clear(&model_pvst_kind, &v);
			continue;
		}
		if (r < 0 || strcmp(str(v.meta.uid), uid)) {
			model_clear(&model_pvst_kind, &v);
			return grpc_status_set(
			    gs, GRPC_ABORTED,
			    "volume lifecycle of PillarVolumeState \"%s\" changed; retry", name);
		}
		if (model_map_get(&v.meta.annotations, RULES_ANN_SUCCESS)) {
			model_clear(&model_pvst_kind, &v);
			return GRPC_OK;
		}
		r = model_map_set(&v.meta.annotations, RULES_ANN_SUCCESS, "true");
		if (r == 0)
			r = model_update(c->st, &model_pvst_kind, &v, NULL, &e);
		model_clear(&model_pvst_kind, &v);
		if (r == 0)
			return GRPC_OK;
		if (r != STORE_CONFLICT)
			return grpc_status_set(gs, ctl_store_code(r),
			                       "annotating PillarVolumeState \"%s\": %s", name,
			                       e.msg);
	}
	return grpc_status_set(gs, GRPC_ABORTED, "PillarVolumeState \"%s\" keeps changing; retry",
	                       name);
}

/* ---- CreateVolume ------------------------------------------------------------------------------ */

/* The first non-empty mount fs_type among the capabilities (the StorageClass's fstype, as
 * csi-provisioner sends it), NULL when none carries one. */
static const char *create_fstype(const Csi__V1__CreateVolumeRequest *req)
{
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		const Csi__V1__VolumeCapability *cap = req->volume_capabilities[i];
		if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT &&
		    cap->mount->fs_type && *cap->mount->fs_type)
			return cap->mount->fs_type;
	}
	return NULL;
}

static int validate_caps(const Csi__V1__CreateVolumeRequest *req, bool *block,
                         struct grpc_status *gs)
{
	const char *fstype = create_fstype(req);
	bool any_block = false, any_mount = false;
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		const Csi__V1__VolumeCapability *cap = req->volume_capabilities[i];
		int r = csi_check_capability(cap, gs);
		if (r)
			return r;
		any_block |= cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		any_mount |= cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT &&
		    cap->mount->fs_type && *cap->mount->fs_type &&
		    strcmp(cap->mount->fs_type, fstype))
			return grpc_status_set(
			    gs, GRPC_INVALID_ARGUMENT,
			    "volume_capabilities carry different fs_type values \"%s\" and "
			    "\"%s\"",
			    fstype, cap->mount->fs_type);
	}
	if (any_block && any_mount)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "volume_capabilities mix block and mount access types");
	*block = any_block;
	return 0;
}

static int validate_create(const Csi__V1__CreateVolumeRequest *req, bool *block,
                           struct grpc_status *gs)
{
	if (!req->name || !rules_volname_valid(req->name))
		return csi_name_refused(gs, "volume name", req->name ? req->name : "",
		                        "[A-Za-z0-9][A-Za-z0-9_-]{0,127}");
	if (req->n_volume_capabilities == 0)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "volume_capabilities is required");
	int r = validate_caps(req, block, gs);
	if (r)
		return r;
	if (req->n_mutable_parameters)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "mutable_parameters are not supported");
	return 0;
}

/* crds.md §7.1: claimRef from the provisioner's metadata, or the UID of a pvc-<uid> name. */
static int claim_ref(struct model_pvst *v, const struct resolve_out *ro, const char *name)
{
	const char *uid = ro->pvc_uid[0] ? ro->pvc_uid : NULL;
	if (!uid && !strncmp(name, "pvc-", 4) && strlen(name) == 40)
		uid = name + 4;
	if (!uid)
		return 0;
	v->spec.has_claim_ref = true;
	return model_str_set(&v->spec.claim_ref.uid, uid) |
	       model_str_set(&v->spec.claim_ref.ns, ro->pvc_ns[0] ? ro->pvc_ns : NULL) |
	       model_str_set(&v->spec.claim_ref.name, ro->pvc_name[0] ? ro->pvc_name : NULL);
}

/* The new object: labels, spec (crds.md §7.1 and §7.4); ro->resolved moves into it. */
static int new_pvst(struct model_pvst *v, struct resolve_out *ro, const char *vid,
                    const struct rules_volid *id, int64_t size, const char *pname)
{
	int r = model_str_set(&v->meta.name, pname) |
	        model_map_set(&v->meta.labels, RULES_LABEL_AGENT, ro->agent) |
	        model_map_set(&v->meta.labels, RULES_LABEL_STORE, ro->store) |
	        (ro->psc[0] ? model_map_set(&v->meta.labels, RULES_LABEL_PSC, ro->psc) : 0) |
	        model_str_set(&v->spec.volume_id, vid) |
	        model_str_set(&v->spec.agent_volume_id, id->agent_volume_id) |
	        model_str_set(&v->spec.agent_ref, ro->agent) |
	        model_str_set(&v->spec.backend_type, ro->backend_type) |
	        model_str_set(&v->spec.protocol_type, RULES_PROTOCOL_NVMEOF_TCP) |
	        claim_ref(v, ro, id->name);
	v->spec.has_capacity_bytes = true;
	v->spec.capacity_bytes = size;
	v->spec.has_resolved = true;
	v->spec.resolved = ro->resolved;
	memset(&ro->resolved, 0, sizeof(ro->resolved));
	return r ? -ENOMEM : 0;
}

/* A volume made from a source lives where the source lives (csi_source.h): its agent, store,
 * pool and backend settings replace what the StorageClass resolved to. */
static int source_place(struct resolve_out *ro, const struct csi_source *src,
                        struct grpc_status *gs)
{
	snprintf(ro->agent, sizeof(ro->agent), "%s", src->where.agent);
	snprintf(ro->backend_type, sizeof(ro->backend_type), "%.15s", src->where.backend);
	snprintf(ro->pool, sizeof(ro->pool), "%s", src->where.pool);
	if (src->store[0])
		snprintf(ro->store, sizeof(ro->store), "%s", src->store);
	model_type_clear(&model_backend_type, &ro->resolved.backend);
	ro->resolved.has_backend = true;
	if (model_type_copy(&model_backend_type, &ro->resolved.backend, &src->backend) < 0)
		return grpc_status_oom(gs);
	return 0;
}

/* Steps 1–2: resolve, create the PillarVolumeState with its first status, phase Provisioning,
 * and the claim before the agent's CreateVolume (m_claim_backend); *out the created object. */

/* A volume that asks for NVMe in-band authentication is created only where every grant can
 * carry its keys (docs/authentication.md): the storage node's kernel has target
 * authentication, the controller reads the workers' key Secrets (--dhchap) and reaches the
 * agent over mTLS (or may send keys in plaintext). Refused before anything is created, so
 * that no volume waits for a publication that can never succeed. */
static int dhchap_possible(struct ctl *c, const char *agent, struct grpc_status *gs)
{
	int r = agents_target_auth(c, agent, gs);
	if (r != GRPC_OK)
		return r;
	if (!c->dhchap_enabled)
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION, DHCHAP_DISABLED_MSG);
	if (!agentclient_mtls(c->ac) && !c->dhchap_plaintext)
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION, DHCHAP_PLAINTEXT_FMT, agent);
	return GRPC_OK;
}
static int create_object(struct ctl *c, const Csi__V1__CreateVolumeRequest *req, bool block,
                         int64_t size, const struct csi_source *src, const char *pname,
                         struct model_pvst *out, struct grpc_status *gs)
{
	struct resolve_out ro;
	struct model_map params = {0};
	struct model_pvst v = {0};
	struct rules_volid id;
	char vid[RULES_VOLID_CAP];
	struct err e = {0};
	int r = 0;
	for (size_t i = 0; r == 0 && i < req->n_parameters; i++)
		r = model_map_set(&params, req->parameters[i]->key, req->parameters[i]->value);
	r = r ? grpc_status_oom(gs)
	      : resolve_volume(c->st, &params, block, create_fstype(req), &ro, gs);
	model_map_clear(&params);
	if (r == 0 && src->set)
		r = source_place(&ro, src, gs);
	if (r) {
		resolve_out_clear(&ro);
		return r;
	}
	if (ro.resolved.has_filesystem && ro.resolved.filesystem.fs_type &&
	    !strcmp(ro.resolved.filesystem.fs_type, "xfs") && size < RULES_XFS_MIN_BYTES) {
		resolve_out_clear(&ro);
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, RULES_XFS_MIN_MSG);
	}
	if (ro.resolved.protocol.nvmeof_tcp.has_dhchap && (r = dhchap_possible(c, ro.agent, gs))) {
		resolve_out_clear(&ro);
		return r;
	}
	if (rules_volid_make(ro.agent, ro.backend_type, ro.pool, req->name, vid, sizeof(vid), &id) <
	    0) {
		resolve_out_clear(&ro);
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "volume ID \"%s\" would be malformed (agent or pool name)",
		                       vid);
	}
	struct csi_claim cl = {.name = pname};
	r = new_pvst(&v, &ro, vid, &id, size, pname) | csi_source_record(&v, src);
	resolve_out_clear(&ro);
	if (r == 0 && (r = m_claim_backend(&v, &cl, gs)) != 0) {
		model_clear(&model_pvst_kind, &v);
		return r;
	}
	r = r ? -ENOMEM : model_create_with_status(c->st, &model_pvst_kind, &v, out, &e);
	model_clear(&model_pvst_kind, &v);
	if (r == STORE_ALREADY_EXISTS)
		return GRPC_ALREADY_EXISTS; /* concurrent replica: re-read (gs untouched) */
	if (r < 0)
		return grpc_status_set(gs, ctl_store_code(r),
		                       "creating PillarVolumeState \"%s\": %s", pname,
		                       e.msg[0] ? e.msg : "out of memory");
	return 0;
}

static int respond(const struct model_pvst *v, Csi__V1__CreateVolumeResponse *resp,
                   struct grpc_status *gs)
{
	resp->volume = csi_volume_of(v);
	return resp->volume ? GRPC_OK : grpc_status_oom(gs);
}

/* The requested size (csi.md §4.1): required_bytes (1 GiB when unset, or the limit when
 * smaller) rounded up to a MiB, within limit_bytes and RULES_CAPACITY_MAX.  0 or a gRPC code;
 * checked before anything is recorded. */
static int create_size(const Csi__V1__CreateVolumeRequest *req, const struct csi_source *src,
                       int64_t *size, struct grpc_status *gs)
{
	int64_t R = req->capacity_range ? req->capacity_range->required_bytes : 0;
	int64_t L = req->capacity_range ? req->capacity_range->limit_bytes : 0;
	if (R < 0 || L < 0)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "capacity_range must not be negative");
	int64_t s = R > 0 ? R : GiB;
	char why[200];
	if (R == 0 && L > 0 && s > L)
		s = L;
	/* a restore or clone holds the whole source: unset, it gets the source's size */
	if (src->set && R == 0 && s < src->size)
		s = src->size;
	if (src->set && s < src->size)
		return grpc_status_set(
		    gs, GRPC_OUT_OF_RANGE,
		    "requested capacity %lld bytes is smaller than the %s \"%s\" "
		    "(%lld bytes); request at least its size",
		    (long long)s, src->snapshot ? "snapshot" : "source volume", src->id,
		    (long long)src->size);
	if (rules_size_round_up(s, RULES_SIZE_MIB, &s) < 0)
		return grpc_status_set(gs, GRPC_OUT_OF_RANGE, "%s",
		                       rules_size_refusal(s, RULES_SIZE_MIB, why, sizeof(why)));
	if (L > 0 && s > L)
		return grpc_status_set(gs, GRPC_OUT_OF_RANGE,
		                       "capacity %lld bytes exceeds limit_bytes %lld", (long long)s,
		                       (long long)L);
	*size = s;
	return 0;
}

/* An existing object: refused, answered (Ready) or provisioned on. */
static int create_existing(struct ctl *c, const Csi__V1__CreateVolumeRequest *req,
                           struct model_pvst *v, int64_t size, const struct csi_source *src,
                           const char *pname, Csi__V1__CreateVolumeResponse *resp,
                           struct grpc_status *gs)
{
	const char *phase = str(v->status.phase);
	int64_t cap = v->spec.capacity_bytes;
	if (pvst_deleting(v))
		return grpc_status_set(gs, GRPC_ABORTED, "volume \"%s\" is being deleted",
		                       req->name);
	if (cap != size)
		return grpc_status_set(
		    gs, GRPC_ALREADY_EXISTS,
		    "volume \"%s\" already exists with capacity %lld bytes; requested "
		    "%lld",
		    req->name, (long long)cap, (long long)size);
	if (!csi_source_same(v, src))
		return grpc_status_set(gs, GRPC_ALREADY_EXISTS,
		                       "volume \"%s\" already exists with another content source",
		                       req->name);
	if (!strcmp(phase, "Provisioning") || !strcmp(phase, "CreatePartial") || !phase[0])
		return csi_provision(c, v, pname, 0, resp, gs);
	/* Ready (and later phases): fast path, after the success-recorded annotation, which a
	 * controller killed right after recording Ready has not written yet */
	int r = model_map_get(&v->meta.annotations, RULES_ANN_SUCCESS)
	            ? GRPC_OK
	            : record_success(c, pname, str(v->meta.uid), gs);
	return r ? r : respond(v, resp, gs);
}

int csi_create_volume(struct ctl *c, const Csi__V1__CreateVolumeRequest *req,
                      Csi__V1__CreateVolumeResponse *resp, struct grpc_status *gs)
{
	bool block = false;
	char pname[RULES_PVST_NAME_CAP];
	int64_t size = 0;
	int r;

	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	struct csi_source src;
	if ((r = validate_create(req, &block, gs)) ||
	    (r = csi_source_resolve(c, req->volume_content_source, &src, gs)))
		return r;
	if ((r = create_size(req, &src, &size, gs))) {
		csi_source_clear(&src);
		return r;
	}
	rules_pvst_name(req->name, pname, sizeof(pname));
	struct keylock_hold hold;
	keylock_wait(&c->locks, &hold, pname);
	for (int attempt = 0; attempt < 4; attempt++) {
		struct model_pvst v;
		struct err e = {0};
		r = model_get(c->st, &model_pvst_kind, NULL, pname, &v, &e);
		if (r == STORE_NOT_FOUND) {
			r = create_object(c, req, block, size, &src, pname, &v, gs);
			if (r == GRPC_ALREADY_EXISTS && !gs->msg[0])
				continue;
			if (r == 0) /* step 3 on, the first claim made */
				r = csi_provision(c, &v, pname, pvst_gen(&v), resp, gs);
			model_clear(&model_pvst_kind, &v);
			break;
		}
		if (r < 0) {
			r = grpc_status_set(gs, GRPC_UNAVAILABLE,
			                    "reading PillarVolumeState \"%s\": %s", pname, e.msg);
			break;
		}
		r = create_existing(c, req, &v, size, &src, pname, resp, gs);
		model_clear(&model_pvst_kind, &v);
		break;
	}
	if (r == GRPC_OK && !resp->volume)
		r = grpc_status_set(gs, GRPC_ABORTED, "volume \"%s\" keeps changing; retry",
		                    req->name);
	keylock_release(&c->locks, &hold);
	csi_source_clear(&src);
	return r;
}

/* ---- provisioning steps (crds.md §7.5) ------------------------------------------------------------ */

/* One provisioning pass in progress. */
struct prov {
	struct ctl *c;
	const struct model_pvst *v;
	const char *pname, *agent, *uid, *avid;
	uint64_t claimed; /* the generation of step 7's claim when the caller made it */
	char addr[300];
	char dev[512];
	struct model_pvst_export_spec es; /* what the export must look like */
	struct csi_claim export_claim;    /* step 8's claim, once made (gen > 0) */
	bool backend_unrecorded; /* step 7 created the backend in this pass, not yet recorded */
	bool spec_recorded;      /* this pass recorded exportSpec (with Ready) */
};

/* The recorded exportSpec, or a new one from spec.resolved and the agent's address. */
static int export_spec(struct prov *p)
{
	const struct model_pvst *v = p->v;
	if (v->status.has_export_spec)
		return model_type_copy(&model_pvst_export_spec_type, &p->es,
		                       &v->status.export_spec);
	const struct model_nvmeof_tcp *n = &v->spec.resolved.protocol.nvmeof_tcp;
	char bind[300];
	agents_bind_ip(p->addr, bind, sizeof(bind));
	memset(&p->es, 0, sizeof(p->es));
	p->es.has_port = p->es.has_acl_enabled = true;
	p->es.port = model_nvmeof_tcp_port(n);
	p->es.acl_enabled = n->has_acl && n->acl;
	p->es.has_in_capsule_data_size = n->has_in_capsule_data_size;
	p->es.in_capsule_data_size = n->in_capsule_data_size;
	return model_str_set(&p->es.bind_address, bind);
}

/* Records a step's outcome; the agent's failure wins over a failed record. */
static int record_step(struct prov *p, int ar, const struct grpc_status *ast,
                       struct step_result *sr, struct model_pvst *out, struct grpc_status *gs)
{
	struct grpc_status ws = {0};
	bool ready = sr->ok && sr->ei, lazy = store_write_lazy(ready); /* Ready: see the top */
	int w =
	    (ready ? pvst_update_all : pvst_update)(p->c, p->pname, p->uid, m_step, sr, out, &ws);
	store_write_lazy(lazy);
	if (ar != GRPC_OK)
		return agents_error(p->c, p->agent, ast, gs);
	if (w)
		*gs = ws;
	return w;
}

/* Step 7: claim, agent CreateVolume; its failure is recorded, its success rides on step 8's
 * record with step 8 under the same claim. */
static int step_create_backend(struct prov *p, struct grpc_status *gs)
{
	struct csi_claim cl = {.name = p->pname, .gen = p->claimed};
	PillarCsi__Agent__V1__CreateVolumeRequest q =
	    PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	struct pvst_backend_buf bb;
	int r = pvst_backend_params(&bb, p->v, &q.backend_params) < 0 ? grpc_status_oom(gs)
	        : p->claimed                                          ? 0
	                     : pvst_update(p->c, p->pname, p->uid, m_claim_backend, &cl, NULL, gs);
	if (r) {
		pvst_backend_params_free(&bb);
		return r;
	}
	PillarCsi__Agent__V1__FencingToken tok;
	PillarCsi__Agent__V1__CreateVolumeResponse *cr = NULL;
	struct grpc_status ast = {0};
	pvst_fence(&tok, p->v, cl.gen);
	q.volume_id = (char *)p->avid;
	q.capacity_bytes = p->v->spec.capacity_bytes;
	q.backend_type = agents_backend_enum(str(p->v->spec.backend_type));
	q.access_type = p->v->spec.resolved.has_filesystem
	                    ? PILLAR_CSI__AGENT__V1__VOLUME_ACCESS_TYPE__VOLUME_ACCESS_TYPE_MOUNT
	                    : PILLAR_CSI__AGENT__V1__VOLUME_ACCESS_TYPE__VOLUME_ACCESS_TYPE_BLOCK;
	q.fence = &tok;
	PillarCsi__Agent__V1__VolumeContentSource cs;
	char source_id[RULES_VOLID_CAP];
	if (csi_source_agent(p->v, &cs, source_id, sizeof(source_id)) > 0)
		q.content_source = &cs;
	int ar = agentclient_create_volume(p->c->ac, p->addr, &q, &cr, &ast);
	pvst_backend_params_free(&bb);
	if (ar == GRPC_OK) { /* ExportVolume follows under this claim; it records both */
		snprintf(p->dev, sizeof(p->dev), "%s", cr->device_path);
		protobuf_c_message_free_unpacked(&cr->base, NULL);
		p->export_claim.gen = cl.gen;
		p->backend_unrecorded = true;
		return GRPC_OK;
	}
	struct step_result sr = {
	    .op = "CreateVolume", .reason = "BackendCreateFailed", .ast = &ast};
	p->export_claim.gen = 0;
	return record_step(p, ar, &ast, &sr, NULL, gs);
}

/* Step 8: claim (unless step 7 claimed in this pass), agent ExportVolume, record Ready (or the
 * failure, with CreatePartial when step 7 created the backend in this pass); *cur the
 * result. */
static int step_export(struct prov *p, struct model_pvst *cur, struct grpc_status *gs)
{
	struct csi_claim cl = p->export_claim;
	int r = 0;
	if (cl.gen == 0) {
		cl.name = p->pname;
		r = pvst_update(p->c, p->pname, p->uid, csi_claim, &cl, NULL, gs);
	}
	if (r)
		return r;
	PillarCsi__Agent__V1__ExportVolumeRequest q =
	    PILLAR_CSI__AGENT__V1__EXPORT_VOLUME_REQUEST__INIT;
	PillarCsi__Agent__V1__ExportParams ep = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
	PillarCsi__Agent__V1__NvmeofTcpExportParams np =
	    PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
	PillarCsi__Agent__V1__FencingToken tok;
	PillarCsi__Agent__V1__ExportVolumeResponse *er = NULL;
	struct grpc_status ast = {0};
	np.bind_address = (char *)str(p->es.bind_address);
	np.port = p->es.has_port ? (int32_t)p->es.port : 0;
	np.in_capsule_data_size =
	    p->es.has_in_capsule_data_size ? (int32_t)p->es.in_capsule_data_size : 0;
	ep.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	ep.nvmeof_tcp = &np;
	pvst_fence(&tok, p->v, cl.gen);
	q.volume_id = (char *)p->avid;
	q.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	q.export_params = &ep;
	q.device_path = p->dev;
	q.acl_enabled = p->es.has_acl_enabled && p->es.acl_enabled;
	q.fence = &tok;
	int ar = agentclient_export_volume(p->c->ac, p->addr, &q, &er, &ast);
	PillarCsi__Agent__V1__ExportInfo none = PILLAR_CSI__AGENT__V1__EXPORT_INFO__INIT;
	struct step_result sr = {.ok = ar == GRPC_OK,
	                         .op = "ExportVolume",
	                         .reason = "ExportPending",
	                         .backend_created = true,
	                         .ast = &ast,
	                         .device_path = p->dev,
	                         .export_spec = &p->es,
	                         .ei = er && er->export_info ? er->export_info : NULL,
	                         .backend_unrecorded = p->backend_unrecorded};
	if (ar == GRPC_OK && !sr.ei)
		sr.ei = &none;
	r = record_step(p, ar, &ast, &sr, cur, gs);
	p->spec_recorded = r == GRPC_OK && ar == GRPC_OK && p->backend_unrecorded;
	if (er)
		protobuf_c_message_free_unpacked(&er->base, NULL);
	return r;
}

int csi_provision(struct ctl *c, const struct model_pvst *v, const char *pname, uint64_t claimed,
                  Csi__V1__CreateVolumeResponse *resp, struct grpc_status *gs)
{
	struct prov p = {
	    .c = c, .v = v, .pname = pname, .claimed = claimed, .export_claim = {.name = pname}};
	struct model_pvst cur = {0};
	const char *store_name = model_map_get(&v->meta.labels, RULES_LABEL_STORE);
	p.agent = str(v->spec.agent_ref);
	p.uid = str(v->meta.uid);
	p.avid = str(v->spec.agent_volume_id);
	int r = agents_address(c, p.agent, p.addr, sizeof(p.addr), gs);
	if (r == GRPC_NOT_FOUND)
		return grpc_status_set(
		    gs, GRPC_NOT_FOUND,
		    "PillarAgent \"%s\" (named via PillarStore \"%s\") not found", p.agent,
		    str(store_name));
	if (r)
		return r;
	if (export_spec(&p) < 0) {
		r = grpc_status_oom(gs);
		goto out;
	}
	snprintf(p.dev, sizeof(p.dev), "%s", str(v->status.backend_device_path));
	if ((strcmp(str(v->status.phase), "CreatePartial") || !p.dev[0]) &&
	    (r = step_create_backend(&p, gs)))
		goto out;
	if ((r = step_export(&p, &cur, gs)))
		goto out;
	if (!model_map_get(&cur.meta.annotations, RULES_ANN_SUCCESS)) {
		if ((r = record_success(c, pname, p.uid, gs)))
			goto out;
	} else if (p.spec_recorded) { /* the resync Ready's record queued has nothing to do */
		ctl_export_established(c, pname, model_meta_rv(&cur.meta));
	}
	r = respond(&cur, resp, gs);
out:
	model_type_clear(&model_pvst_export_spec_type, &p.es);
	model_clear(&model_pvst_kind, &cur);
	return r;
}
