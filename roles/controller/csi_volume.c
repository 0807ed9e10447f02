/* csi_volume — CreateVolume, DeleteVolume and ControllerExpandVolume (csi.md §4.1, §4.2, §4.5)
 * with the PillarVolumeState write sequence of crds.md §7.5. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/csi.h"
#include "controller/resolve.h"

#define MiB (1024LL * 1024LL)
#define GiB (1024LL * MiB)

static const char *spec_str(const cJSON *obj, const char *k)
{
	return json_get_str(cJSON_GetObjectItemCaseSensitive(obj, "spec"), k) ?: "";
}

static const char *status_str(const cJSON *obj, const char *k)
{
	return json_get_str(cJSON_GetObjectItemCaseSensitive(obj, "status"), k);
}

static void put_str(cJSON *o, const char *k, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, k);
	if (v)
		cJSON_AddStringToObject(o, k, v);
}

static void fence_of(PillarCsi__Agent__V1__FencingToken *t, const cJSON *pvst, uint64_t gen)
{
	pillar_csi__agent__v1__fencing_token__init(t);
	t->volume_uid = (char *)(store_meta_str(pvst, "uid") ?: "");
	t->generation = gen;
}

/* ---- CAS mutations ------------------------------------------------------------------------------ */

struct claim {
	const char *name;
	uint64_t gen;      /* out: the committed generation */
	bool set_deleting; /* DeleteVolume step 4 */
	const char *volume_id;
};

static int m_claim(cJSON *obj, cJSON *status, void *arg, struct grpc_status *gs)
{
	struct claim *cl = arg;
	if (cl->set_deleting) {
		const cJSON *pn = cJSON_GetObjectItemCaseSensitive(status, "publishedNodes");
		if (cJSON_GetArraySize(pn) > 0)
			return gstatus(
			    gs, GRPC_FAILED_PRECONDITION,
			    "volume \"%s\" is still published; unpublish it before deleting",
			    cl->volume_id);
		cJSON_DeleteItemFromObjectCaseSensitive(status, "deleting");
		cJSON_AddBoolToObject(status, "deleting", true);
		int64_t og = 0;
		json_get_int64(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "generation",
		               &og);
		cond_set(status, "Ready", "False", "Deleting", "volume is being deleted", og);
	} else if (pvst_deleting(obj)) {
		return gstatus(gs, GRPC_ABORTED, "volume \"%s\" is being deleted", cl->name);
	}
	cl->gen = pvst_generation(obj) + 1;
	pvst_set_generation(status, cl->gen);
	return 0;
}

struct provisioning {
	int64_t og;
};

static int m_provisioning(cJSON *obj, cJSON *status, void *arg, struct grpc_status *gs)
{
	(void)obj;
	(void)gs;
	struct provisioning *p = arg;
	if (status_str(obj, "phase"))
		return CAS_SKIP;
	put_str(status, "phase", "Provisioning");
	pvst_set_generation(status, 0);
	cond_set(status, "Ready", "False", "Provisioning", "volume is being provisioned", p->og);
	return 0;
}

struct step_result {
	bool ok;
	const char *op, *reason;
	bool backend_created;
	const struct grpc_status *ast;
	const char *device_path;
	const cJSON *export_spec;
	const PillarCsi__Agent__V1__ExportInfo *ei;
};

static int m_step(cJSON *obj, cJSON *status, void *arg, struct grpc_status *gs)
{
	(void)gs;
	struct step_result *s = arg;
	int64_t og = 0;
	char ts[32];
	json_get_int64(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "generation", &og);
	if (!s->ok) {
		store_timestamp(ts, sizeof(ts));
		cJSON *pf = cJSON_CreateObject();
		cJSON_AddStringToObject(pf, "failedOperation", s->op);
		cJSON_AddStringToObject(pf, "failedAt", ts);
		cJSON_AddStringToObject(pf, "reason", s->reason);
		cJSON_AddStringToObject(pf, "message", s->ast->msg);
		cJSON_AddBoolToObject(pf, "backendCreated", s->backend_created);
		cJSON_AddBoolToObject(pf, "exportCreated", false);
		cJSON_DeleteItemFromObjectCaseSensitive(status, "partialFailure");
		cJSON_AddItemToObject(status, "partialFailure", pf);
		if (!s->backend_created)
			cond_set(status, "BackendCreated", "False", "BackendPending", s->ast->msg,
			         og);
		else
			cond_set(status, "ExportCreated", "False", "ExportPending", s->ast->msg,
			         og);
		return 0;
	}
	if (!s->ei) { /* backend created */
		put_str(status, "phase", "CreatePartial");
		put_str(status, "backendDevicePath", s->device_path);
		cJSON_DeleteItemFromObjectCaseSensitive(status, "exportSpec");
		cJSON_AddItemToObject(status, "exportSpec", cJSON_Duplicate(s->export_spec, true));
		cond_set(status, "BackendCreated", "True", "BackendCreated", "", og);
		cond_set(status, "ExportCreated", "False", "ExportPending",
		         "backend exists, export not yet created", og);
		cond_set(status, "Ready", "False", "CreatePartial", "export not yet created", og);
		return 0;
	}
	put_str(status, "phase", "Ready");
	cJSON *ei = cJSON_CreateObject();
	cJSON_AddStringToObject(ei, "targetID", s->ei->target_id);
	cJSON_AddStringToObject(ei, "address", s->ei->address);
	cJSON_AddNumberToObject(ei, "port", s->ei->port);
	cJSON_AddStringToObject(ei, "volumeRef", s->ei->volume_ref);
	cJSON_DeleteItemFromObjectCaseSensitive(status, "exportInfo");
	cJSON_AddItemToObject(status, "exportInfo", ei);
	cJSON_DeleteItemFromObjectCaseSensitive(status, "backendDevicePath");
	cJSON_DeleteItemFromObjectCaseSensitive(status, "partialFailure");
	cond_set(status, "BackendCreated", "True", "BackendCreated", "", og);
	cond_set(status, "ExportCreated", "True", "ExportCreated", "", og);
	cond_set(status, "Ready", "True", "VolumeReady", "", og);
	return 0;
}

/* The success-recorded annotation (a metadata update: the status subresource cannot carry it). */
static int record_success(struct ctl *c, const char *name, const char *uid, struct grpc_status *gs)
{
	for (int i = 0; i < 8; i++) {
		cJSON *obj = NULL;
		struct err e = {0};
		if (store_get(c->st, kind_of("PillarVolumeState"), NULL, name, &obj, &e) < 0 ||
		    strcmp(store_meta_str(obj, "uid") ?: "", uid)) {
			cJSON_Delete(obj);
			return gstatus(
			    gs, GRPC_ABORTED,
			    "volume lifecycle of PillarVolumeState \"%s\" changed; retry", name);
		}
		cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
		cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
		if (!cJSON_IsObject(ann)) {
			cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
			ann = cJSON_AddObjectToObject(meta, "annotations");
		}
		if (json_get_str(ann, RULES_ANN_SUCCESS)) {
			cJSON_Delete(obj);
			return GRPC_OK;
		}
		cJSON_AddStringToObject(ann, RULES_ANN_SUCCESS, "true");
		int r = store_update(c->st, obj, NULL, &e);
		cJSON_Delete(obj);
		if (r == 0)
			return GRPC_OK;
		if (r != STORE_CONFLICT)
			return gstatus(gs, GRPC_UNAVAILABLE,
			               "annotating PillarVolumeState \"%s\": %s", name, e.msg);
	}
	return gstatus(gs, GRPC_ABORTED, "PillarVolumeState \"%s\" keeps changing; retry", name);
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

static int validate_create(const Csi__V1__CreateVolumeRequest *req, bool *block,
                           struct grpc_status *gs)
{
	const char *fstype = create_fstype(req);
	if (!req->name || !rules_volname_valid(req->name))
		return gstatus(gs, GRPC_INVALID_ARGUMENT,
		               "volume name \"%s\" must match [A-Za-z0-9][A-Za-z0-9_-]{0,127}",
		               req->name ? req->name : "");
	if (req->n_volume_capabilities == 0)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "volume_capabilities is required");
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
			return gstatus(
			    gs, GRPC_INVALID_ARGUMENT,
			    "volume_capabilities carry different fs_type values \"%s\" and "
			    "\"%s\"",
			    fstype, cap->mount->fs_type);
	}
	if (any_block && any_mount)
		return gstatus(gs, GRPC_INVALID_ARGUMENT,
		               "volume_capabilities mix block and mount access types");
	if (req->volume_content_source)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "volume_content_source is not supported");
	if (req->n_mutable_parameters)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "mutable_parameters are not supported");
	*block = any_block;
	return 0;
}

static int create_object(struct ctl *c, const Csi__V1__CreateVolumeRequest *req, bool block,
                         int64_t size, const char *pname, struct grpc_status *gs)
{
	struct resolve_out ro;
	cJSON *params = cJSON_CreateObject(), *obj = NULL, *out = NULL;
	int r;
	for (size_t i = 0; i < req->n_parameters; i++)
		cJSON_AddStringToObject(params, req->parameters[i]->key, req->parameters[i]->value);
	r = resolve_volume(c->st, params, block, create_fstype(req), &ro, gs);
	cJSON_Delete(params);
	if (r)
		return r;
	char vid[800], avid[400];
	snprintf(avid, sizeof(avid), "%s/%s", ro.pool, req->name);
	snprintf(vid, sizeof(vid), "%s/nvmeof-tcp/%s/%s", ro.agent, ro.backend_type, avid);
	struct rules_volid chk;
	if (rules_volid_parse(vid, &chk) < 0) {
		resolve_out_clear(&ro);
		return gstatus(gs, GRPC_INVALID_ARGUMENT,
		               "volume ID \"%s\" would be malformed (agent or pool name)", vid);
	}
	obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "apiVersion", kind_of("PillarVolumeState")->api_version);
	cJSON_AddStringToObject(obj, "kind", "PillarVolumeState");
	cJSON *meta = cJSON_AddObjectToObject(obj, "metadata");
	cJSON_AddStringToObject(meta, "name", pname);
	cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
	cJSON_AddStringToObject(labels, RULES_LABEL_AGENT, ro.agent);
	cJSON_AddStringToObject(labels, RULES_LABEL_STORE, ro.store);
	if (ro.psc[0])
		cJSON_AddStringToObject(labels, RULES_LABEL_PSC, ro.psc);
	cJSON *spec = cJSON_AddObjectToObject(obj, "spec");
	cJSON_AddStringToObject(spec, "volumeID", vid);
	cJSON_AddStringToObject(spec, "agentVolumeID", avid);
	cJSON_AddStringToObject(spec, "agentRef", ro.agent);
	cJSON_AddStringToObject(spec, "backendType", ro.backend_type);
	cJSON_AddStringToObject(spec, "protocolType", "nvmeof-tcp");
	cJSON_AddNumberToObject(spec, "capacityBytes", (double)size);
	const char *uid = ro.pvc_uid[0] ? ro.pvc_uid : NULL;
	if (!uid && !strncmp(req->name, "pvc-", 4) && strlen(req->name) == 40)
		uid = req->name + 4;
	if (uid) {
		cJSON *cr = cJSON_AddObjectToObject(spec, "claimRef");
		cJSON_AddStringToObject(cr, "uid", uid);
		if (ro.pvc_ns[0])
			cJSON_AddStringToObject(cr, "namespace", ro.pvc_ns);
		if (ro.pvc_name[0])
			cJSON_AddStringToObject(cr, "name", ro.pvc_name);
	}
	cJSON_AddItemToObject(spec, "resolved", ro.resolved);
	ro.resolved = NULL;
	struct err e = {0};
	r = store_create(c->st, obj, &out, &e);
	cJSON_Delete(obj);
	if (r == STORE_ALREADY_EXISTS)
		return GRPC_ALREADY_EXISTS; /* concurrent replica: re-read (gs untouched) */
	if (r < 0)
		return gstatus(gs, GRPC_UNAVAILABLE, "creating PillarVolumeState \"%s\": %s", pname,
		               e.msg);
	struct provisioning pv = {1};
	r = pvst_cas(c, pname, store_meta_str(out, "uid"), m_provisioning, &pv, NULL, gs);
	cJSON_Delete(out);
	return r;
}

static int respond(const cJSON *pvst, Csi__V1__CreateVolumeResponse **resp, struct grpc_status *gs)
{
	Csi__V1__CreateVolumeResponse *r = malloc(sizeof(*r));
	Csi__V1__Volume *v = csi_volume_of(pvst);
	if (!r || !v) {
		free(r);
		if (v)
			protobuf_c_message_free_unpacked(&v->base, NULL);
		return gstatus(gs, GRPC_INTERNAL, "out of memory");
	}
	csi__v1__create_volume_response__init(r);
	r->volume = v;
	*resp = r;
	return GRPC_OK;
}

/* Steps 6–9 on a recorded object. */
static int provision(struct ctl *c, cJSON *pvst, const char *pname,
                     Csi__V1__CreateVolumeResponse **resp, struct grpc_status *gs)
{
	const char *agent = spec_str(pvst, "agentRef"), *uid = store_meta_str(pvst, "uid");
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(pvst, "metadata"), "labels");
	const char *store_name = json_get_str(labels, RULES_LABEL_STORE) ?: "";
	char addr[300], bind[300], uidbuf[64];
	struct grpc_status ast = {0};
	cJSON *es = NULL, *cur = NULL;
	int r;

	snprintf(uidbuf, sizeof(uidbuf), "%s", uid ? uid : "");
	uid = uidbuf;
	r = ctl_agent_address(c, agent, addr, sizeof(addr), gs);
	if (r == GRPC_NOT_FOUND)
		return gstatus(gs, GRPC_NOT_FOUND,
		               "PillarAgent \"%s\" (named via PillarStore \"%s\") not found", agent,
		               store_name);
	if (r)
		return r;
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(pvst, "status");
	const cJSON *rec = cJSON_GetObjectItemCaseSensitive(status, "exportSpec");
	if (rec) {
		es = cJSON_Duplicate(rec, true);
	} else {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(
		            cJSON_GetObjectItemCaseSensitive(pvst, "spec"), "resolved"),
		        "protocol"),
		    "nvmeofTcp");
		long long port = 4420, ics;
		bool acl = false;
		resolve_get_int(n, "port", &port);
		resolve_get_bool(n, "acl", &acl);
		addr_ip_part(addr, bind, sizeof(bind));
		es = cJSON_CreateObject();
		cJSON_AddStringToObject(es, "bindAddress", bind);
		cJSON_AddNumberToObject(es, "port", (double)port);
		cJSON_AddBoolToObject(es, "aclEnabled", acl);
		if (resolve_get_int(n, "inCapsuleDataSize", &ics) == 0)
			cJSON_AddNumberToObject(es, "inCapsuleDataSize", (double)ics);
	}
	const char *phase = json_get_str(status, "phase") ?: "";
	const char *dev = json_get_str(status, "backendDevicePath");
	char devbuf[512] = "";
	const char *avid = spec_str(pvst, "agentVolumeID");
	int btype = backend_enum(spec_str(pvst, "backendType"));
	if (dev)
		snprintf(devbuf, sizeof(devbuf), "%s", dev);
	/* step 7: backend */
	if (strcmp(phase, "CreatePartial") || !devbuf[0]) {
		struct claim cl = {.name = pname};
		if ((r = pvst_cas(c, pname, uid, m_claim, &cl, NULL, gs)))
			goto out;
		PillarCsi__Agent__V1__CreateVolumeRequest q =
		    PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
		PillarCsi__Agent__V1__FencingToken tok;
		PillarCsi__Agent__V1__CreateVolumeResponse *cr = NULL;
		struct backend_params_buf bb;
		fence_of(&tok, pvst, cl.gen);
		q.volume_id = (char *)avid;
		q.capacity_bytes = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(pvst, "spec"), "capacityBytes"));
		q.backend_type = btype;
		q.backend_params = backend_params_fill(&bb, pvst);
		q.access_type =
		    cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(
		            cJSON_GetObjectItemCaseSensitive(pvst, "spec"), "resolved"),
		        "filesystem")
		        ? PILLAR_CSI__AGENT__V1__VOLUME_ACCESS_TYPE__VOLUME_ACCESS_TYPE_MOUNT
		        : PILLAR_CSI__AGENT__V1__VOLUME_ACCESS_TYPE__VOLUME_ACCESS_TYPE_BLOCK;
		q.fence = &tok;
		int ar = agentclient_create_volume(c->ac, addr, &q, &cr, &ast);
		backend_params_free(&bb);
		struct step_result sr = {.ok = ar == GRPC_OK,
		                         .op = "CreateVolume",
		                         .reason = "BackendCreateFailed",
		                         .ast = &ast,
		                         .export_spec = es};
		if (ar == GRPC_OK) {
			snprintf(devbuf, sizeof(devbuf), "%s", cr->device_path);
			sr.device_path = devbuf;
			protobuf_c_message_free_unpacked(&cr->base, NULL);
		}
		struct grpc_status ws = {0};
		int w = pvst_cas(c, pname, uid, m_step, &sr, NULL, &ws);
		if (ar != GRPC_OK) {
			r = ctl_agent_error(c, agent, &ast, gs);
			goto out;
		}
		if (w) {
			*gs = ws;
			r = w;
			goto out;
		}
	}
	/* step 8: export */
	{
		struct claim cl = {.name = pname};
		if ((r = pvst_cas(c, pname, uid, m_claim, &cl, NULL, gs)))
			goto out;
		PillarCsi__Agent__V1__ExportVolumeRequest q =
		    PILLAR_CSI__AGENT__V1__EXPORT_VOLUME_REQUEST__INIT;
		PillarCsi__Agent__V1__ExportParams ep = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
		PillarCsi__Agent__V1__NvmeofTcpExportParams np =
		    PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
		PillarCsi__Agent__V1__FencingToken tok;
		PillarCsi__Agent__V1__ExportVolumeResponse *er = NULL;
		long long port = 0, ics = 0;
		bool acl = false;
		resolve_get_int(es, "port", &port);
		resolve_get_int(es, "inCapsuleDataSize", &ics);
		resolve_get_bool(es, "aclEnabled", &acl);
		np.bind_address = (char *)(json_get_str(es, "bindAddress") ?: "");
		np.port = (int32_t)port;
		np.in_capsule_data_size = (int32_t)ics;
		ep.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
		ep.nvmeof_tcp = &np;
		fence_of(&tok, pvst, cl.gen);
		q.volume_id = (char *)avid;
		q.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
		q.export_params = &ep;
		q.device_path = devbuf;
		q.acl_enabled = acl;
		q.fence = &tok;
		int ar = agentclient_export_volume(c->ac, addr, &q, &er, &ast);
		struct step_result sr = {.ok = ar == GRPC_OK,
		                         .op = "ExportVolume",
		                         .reason = "ExportPending",
		                         .backend_created = true,
		                         .ast = &ast,
		                         .ei = er ? er->export_info : NULL};
		PillarCsi__Agent__V1__ExportInfo none = PILLAR_CSI__AGENT__V1__EXPORT_INFO__INIT;
		if (ar == GRPC_OK && !sr.ei)
			sr.ei = &none;
		struct grpc_status ws = {0};
		int w = pvst_cas(c, pname, uid, m_step, &sr, &cur, &ws);
		if (er)
			protobuf_c_message_free_unpacked(&er->base, NULL);
		if (ar != GRPC_OK) {
			r = ctl_agent_error(c, agent, &ast, gs);
			goto out;
		}
		if (w) {
			*gs = ws;
			r = w;
			goto out;
		}
	}
	if ((r = record_success(c, pname, uid, gs)))
		goto out;
	r = respond(cur, resp, gs);
out:
	cJSON_Delete(es);
	cJSON_Delete(cur);
	return r;
}

int csi_create_volume(struct ctl *c, const Csi__V1__CreateVolumeRequest *req,
                      Csi__V1__CreateVolumeResponse **resp, struct grpc_status *gs)
{
	bool block = false;
	char pname[RULES_PVST_NAME_CAP];
	int r;

	*resp = NULL;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if ((r = validate_create(req, &block, gs)))
		return r;
	int64_t R = req->capacity_range ? req->capacity_range->required_bytes : 0;
	int64_t L = req->capacity_range ? req->capacity_range->limit_bytes : 0;
	if (R < 0 || L < 0)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "capacity_range must not be negative");
	int64_t size = R > 0 ? R : GiB;
	if (R == 0 && L > 0 && size > L)
		size = L;
	size = (size + MiB - 1) / MiB * MiB;
	if (L > 0 && size > L)
		return gstatus(gs, GRPC_OUT_OF_RANGE,
		               "capacity %lld bytes exceeds limit_bytes %lld", (long long)size,
		               (long long)L);
	rules_pvst_name(req->name, pname, sizeof(pname));
	struct keylock_hold hold;
	keylock_wait(&c->locks, &hold, pname);
	for (int attempt = 0; attempt < 4; attempt++) {
		cJSON *obj = NULL;
		struct err e = {0};
		r = store_get(c->st, kind_of("PillarVolumeState"), NULL, pname, &obj, &e);
		if (r == STORE_NOT_FOUND) {
			r = create_object(c, req, block, size, pname, gs);
			if (r == GRPC_ALREADY_EXISTS && !gs->msg[0])
				continue;
			if (r)
				break;
			continue; /* re-read and go on at step 3 */
		}
		if (r < 0) {
			r = gstatus(gs, GRPC_UNAVAILABLE, "reading PillarVolumeState \"%s\": %s",
			            pname, e.msg);
			break;
		}
		int64_t cap = 0;
		json_get_int64(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "capacityBytes",
		               &cap);
		const char *phase = status_str(obj, "phase") ?: "";
		if (pvst_deleting(obj))
			r = gstatus(gs, GRPC_ABORTED, "volume \"%s\" is being deleted", req->name);
		else if (cap != size)
			r = gstatus(
			    gs, GRPC_ALREADY_EXISTS,
			    "volume \"%s\" already exists with capacity %lld bytes; requested "
			    "%lld",
			    req->name, (long long)cap, (long long)size);
		else if (strcmp(phase, "Provisioning") && strcmp(phase, "CreatePartial") &&
		         phase[0])
			r = respond(obj, resp, gs); /* Ready (and later phases): fast path */
		else
			r = provision(c, obj, pname, resp, gs);
		cJSON_Delete(obj);
		break;
	}
	if (r == GRPC_OK && !*resp)
		r = gstatus(gs, GRPC_ABORTED, "volume \"%s\" keeps changing; retry", req->name);
	keylock_release(&c->locks, &hold);
	return r;
}

/* ---- DeleteVolume ------------------------------------------------------------------------------ */

int csi_delete_volume(struct ctl *c, const Csi__V1__DeleteVolumeRequest *req,
                      Csi__V1__DeleteVolumeResponse **resp, struct grpc_status *gs)
{
	struct rules_volid v;
	char pname[RULES_PVST_NAME_CAP], addr[300], uid[64];
	cJSON *obj = NULL;
	int r;

	*resp = NULL;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->volume_id || !*req->volume_id)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	if (rules_volid_parse(req->volume_id, &v) < 0)
		goto ok;
	rules_pvst_name(v.name, pname, sizeof(pname));
	struct keylock_hold hold;
	keylock_wait(&c->locks, &hold, pname);
	r = pvst_get_by_id(c, req->volume_id, &obj, gs);
	if (r == GRPC_NOT_FOUND) {
		keylock_release(&c->locks, &hold);
		goto ok;
	}
	if (r)
		goto out;
	snprintf(uid, sizeof(uid), "%s", store_meta_str(obj, "uid") ?: "");
	const cJSON *pn = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(obj, "status"), "publishedNodes");
	if (cJSON_GetArraySize(pn) > 0) {
		char list[400] = "";
		size_t o = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, pn) o +=
		    (size_t)snprintf(list + o, o < sizeof(list) ? sizeof(list) - o : 0, "%s%s",
		                     o ? ", " : "", json_get_str(it, "nodeID") ?: "");
		r = gstatus(gs, GRPC_FAILED_PRECONDITION,
		            "volume \"%s\" is still published to nodes [%s]; unpublish it before "
		            "deleting",
		            req->volume_id, list);
		goto out;
	}
	uint64_t gen = pvst_generation(obj);
	if (gen == 0 && !pvst_deleting(obj)) {
		struct err e = {0};
		int d =
		    store_delete(c->st, kind_of("PillarVolumeState"), NULL, pname, uid, NULL, &e);
		r = d == 0 || d == STORE_NOT_FOUND
		        ? GRPC_OK
		        : gstatus(gs, d == STORE_CONFLICT ? GRPC_ABORTED : GRPC_UNAVAILABLE,
		                  "deleting PillarVolumeState \"%s\": %s", pname, e.msg);
		goto out;
	}
	if (!pvst_deleting(obj)) {
		struct claim cl = {
		    .name = pname, .set_deleting = true, .volume_id = req->volume_id};
		if ((r = pvst_cas(c, pname, uid, m_claim, &cl, NULL, gs)))
			goto out;
		gen = cl.gen;
	}
	r = ctl_agent_address(c, v.agent, addr, sizeof(addr), gs);
	if (r == GRPC_NOT_FOUND) {
		r = gstatus(gs, GRPC_FAILED_PRECONDITION,
		            "PillarAgent \"%s\" not found; cannot confirm that volume \"%s\" was "
		            "removed",
		            v.agent, req->volume_id);
		goto out;
	}
	if (r)
		goto out;
	PillarCsi__Agent__V1__FencingToken tok;
	struct grpc_status ast = {0};
	fence_of(&tok, obj, gen);
	PillarCsi__Agent__V1__UnexportVolumeRequest uq =
	    PILLAR_CSI__AGENT__V1__UNEXPORT_VOLUME_REQUEST__INIT;
	uq.volume_id = (char *)spec_str(obj, "agentVolumeID");
	uq.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	uq.fence = &tok;
	int ar = agentclient_unexport_volume(c->ac, addr, &uq, &ast);
	if (ar != GRPC_OK && ar != GRPC_NOT_FOUND) {
		r = ctl_agent_error(c, v.agent, &ast, gs);
		goto out;
	}
	PillarCsi__Agent__V1__DeleteVolumeRequest dq =
	    PILLAR_CSI__AGENT__V1__DELETE_VOLUME_REQUEST__INIT;
	dq.volume_id = uq.volume_id;
	dq.backend_type = backend_enum(spec_str(obj, "backendType"));
	dq.fence = &tok;
	if ((ar = agentclient_delete_volume(c->ac, addr, &dq, &ast)) != GRPC_OK) {
		r = ctl_agent_error(c, v.agent, &ast, gs);
		goto out;
	}
	struct err e = {0};
	int d = store_delete(c->st, kind_of("PillarVolumeState"), NULL, pname, uid, NULL, &e);
	r = d == 0 || d == STORE_NOT_FOUND
	        ? GRPC_OK
	        : gstatus(gs, GRPC_UNAVAILABLE, "deleting PillarVolumeState \"%s\": %s", pname,
	                  e.msg);
out:
	cJSON_Delete(obj);
	keylock_release(&c->locks, &hold);
	if (r)
		return r;
ok:
	*resp = malloc(sizeof(**resp));
	if (!*resp)
		return gstatus(gs, GRPC_INTERNAL, "out of memory");
	csi__v1__delete_volume_response__init(*resp);
	return GRPC_OK;
}

/* ---- ControllerExpandVolume -------------------------------------------------------------------- */

int csi_controller_expand(struct ctl *c, const Csi__V1__ControllerExpandVolumeRequest *req,
                          Csi__V1__ControllerExpandVolumeResponse **resp, struct grpc_status *gs)
{
	struct rules_volid v;
	char pname[RULES_PVST_NAME_CAP], addr[300];
	cJSON *obj = NULL;
	int r;

	*resp = NULL;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->volume_id || !*req->volume_id)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	if (!req->capacity_range)
		return gstatus(gs, GRPC_INVALID_ARGUMENT, "capacity_range is required");
	int64_t R = req->capacity_range->required_bytes, L = req->capacity_range->limit_bytes;
	if (R <= 0)
		return gstatus(gs, GRPC_INVALID_ARGUMENT,
		               "capacity_range.required_bytes must be positive");
	int64_t size = (R + MiB - 1) / MiB * MiB;
	if (L > 0 && size > L)
		return gstatus(gs, GRPC_OUT_OF_RANGE,
		               "capacity %lld bytes exceeds limit_bytes %lld", (long long)size,
		               (long long)L);
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
	r = ctl_agent_address(c, v.agent, addr, sizeof(addr), gs);
	if (r == GRPC_NOT_FOUND)
		r = gstatus(gs, GRPC_FAILED_PRECONDITION, "PillarAgent \"%s\" not found", v.agent);
	if (r)
		goto out;
	PillarCsi__Agent__V1__ExpandVolumeRequest q =
	    PILLAR_CSI__AGENT__V1__EXPAND_VOLUME_REQUEST__INIT;
	PillarCsi__Agent__V1__ExpandVolumeResponse *er = NULL;
	PillarCsi__Agent__V1__FencingToken tok;
	struct grpc_status ast = {0};
	fence_of(&tok, obj, pvst_generation(obj));
	q.volume_id = (char *)spec_str(obj, "agentVolumeID");
	q.requested_bytes = size;
	q.backend_type = backend_enum(spec_str(obj, "backendType"));
	q.fence = &tok;
	if (agentclient_expand_volume(c->ac, addr, &q, &er, &ast) != GRPC_OK) {
		r = ctl_agent_error(c, v.agent, &ast, gs);
		goto out;
	}
	*resp = malloc(sizeof(**resp));
	if (!*resp) {
		protobuf_c_message_free_unpacked(&er->base, NULL);
		r = gstatus(gs, GRPC_INTERNAL, "out of memory");
		goto out;
	}
	csi__v1__controller_expand_volume_response__init(*resp);
	(*resp)->capacity_bytes = er->capacity_bytes;
	(*resp)->node_expansion_required = true;
	protobuf_c_message_free_unpacked(&er->base, NULL);
out:
	cJSON_Delete(obj);
	keylock_release(&c->locks, &hold);
	return r;
}
