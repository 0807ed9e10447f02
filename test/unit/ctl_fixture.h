/* Shared fixture of the controller tests: an embedded store in a temp dir, a fake agent and a
 * struct ctl, with helpers to write objects and build CSI requests.  Header-only (static
 * functions) so that no extra object is linked into every unit test. */
#ifndef PILLAR_TEST_UNIT_CTL_FIXTURE_H
#define PILLAR_TEST_UNIT_CTL_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/csi.h"
#include "controller/ctl.h"
#include "controller/resolve.h"
#include "fake_agent.h"
#include "model/pillar.h"
#include "sidecar.h"
#include "testutil.h"
#include "version/version.h"

static char fx_dir[512];
static store *fx_st;
static fake_agent *fx_fa;
static struct ctl fx_c;

/* A response as the transport (roles/glue.h) hands it to a handler: on the heap, initialised. */
static inline void *fx_resp_new(const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m = malloc(d->sizeof_message);
	ck_assert_ptr_nonnull(m);
	d->message_init(m);
	return m;
}

/* After a handler: on a failure the transport frees the response and sends none (*pp NULL). */
static inline int fx_resp_done(int code, void *pp)
{
	ProtobufCMessage **m = pp;
	if (code != 0) {
		protobuf_c_message_free_unpacked(*m, NULL);
		*m = NULL;
	}
	return code;
}

/* Calls controller handler fn (csi.h, the one handler shape) on req the way the transport does;
 * *out is the response (caller frees) on OK, NULL otherwise. */
#define FX_CALL(fn, req, out, desc, gs) \
	((*(out) = fx_resp_new(desc)), fx_resp_done(fn(&fx_c, (req), *(out), (gs)), (out)))

static inline cJSON *fx_parse(const char *json)
{
	cJSON *o = NULL;
	struct err e = {0};
	if (json_parse_strict(json, strlen(json), &o, &e) < 0)
		ck_abort_msg("bad test JSON: %s: %s", e.msg, json);
	return o;
}

/* Creates kind/name with spec (JSON text) and, when non-NULL, status; metadata_extra is
 * inserted into metadata (e.g. "\"annotations\":{...}") or NULL. */
static inline void fx_put(const char *kind, const char *ns, const char *name,
                          const char *metadata_extra, const char *spec, const char *status)
{
	const struct store_kind *k = store_kind_lookup(kind);
	char buf[8192];
	char nsbuf[300] = "";
	if (ns)
		snprintf(nsbuf, sizeof(nsbuf), ",\"namespace\":\"%s\"", ns);
	snprintf(buf, sizeof(buf),
	         "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"name\":\"%s\"%s%s%s}%s%s}",
	         k->api_version, k->kind, name, nsbuf, metadata_extra ? "," : "",
	         metadata_extra ? metadata_extra : "", spec ? ",\"spec\":" : "", spec ? spec : "");
	cJSON *o = fx_parse(buf), *out = NULL;
	struct err e = {0};
	ck_assert_msg(store_create(fx_st, o, &out, &e) == 0, "create %s: %s", name, e.msg);
	cJSON_Delete(o);
	if (status) {
		cJSON_DeleteItemFromObject(out, "status");
		cJSON_AddItemToObject(out, "status", fx_parse(status));
		ck_assert_int_eq(store_update_status(fx_st, out, NULL, &e), 0);
	}
	cJSON_Delete(out);
}

/* Readers of stored objects as the tests see them (JSON, as an API client would). */
static inline const cJSON *cond_get(const cJSON *status, const char *type)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(status, "conditions"))
	{
		const char *t = json_get_str(it, "type");
		if (t && !strcmp(t, type))
			return it;
	}
	return NULL;
}

static inline const char *cond_status(const cJSON *obj, const char *type)
{
	const cJSON *c = cond_get(cJSON_GetObjectItemCaseSensitive(obj, "status"), type);
	return c ? (json_get_str(c, "status") ?: "") : "";
}

static inline const char *cond_reason(const cJSON *obj, const char *type)
{
	const cJSON *c = cond_get(cJSON_GetObjectItemCaseSensitive(obj, "status"), type);
	return c ? (json_get_str(c, "reason") ?: "") : "";
}

static inline const char *cond_message(const cJSON *obj, const char *type)
{
	const cJSON *c = cond_get(cJSON_GetObjectItemCaseSensitive(obj, "status"), type);
	return c ? (json_get_str(c, "message") ?: "") : "";
}

static inline uint64_t pvst_generation(const cJSON *obj)
{
	int64_t g = 0;
	if (json_get_int64(cJSON_GetObjectItemCaseSensitive(obj, "status"), "publicationGeneration",
	                   &g) < 0 ||
	    g < 0)
		return 0;
	return (uint64_t)g;
}

static inline bool fx_deleting(const cJSON *obj)
{
	bool d = false;
	json_get_bool(cJSON_GetObjectItemCaseSensitive(obj, "status"), "deleting", &d);
	return d;
}

static inline cJSON *fx_get(const char *kind, const char *name)
{
	cJSON *o = NULL;
	if (store_get(fx_st, store_kind_lookup(kind), NULL, name, &o, NULL) < 0)
		return NULL;
	return o;
}

static inline void fx_setup(void)
{
	snprintf(fx_dir, sizeof(fx_dir), "%s", tu_mkdtemp());
	ck_assert_int_eq(store_dir_open(fx_dir, true, 50, &fx_st, NULL), 0);
	fx_fa = fake_agent_new();
	ctl_init(&fx_c, fx_st, fake_agent_client(fx_fa));
}

static inline void fx_teardown(void)
{
	ctl_fini(&fx_c);
	fake_agent_free(fx_fa);
	store_close(fx_st);
	tu_rmtree(fx_dir);
}

/* The standard objects: agent storage-1 (10.0.0.5:9500), store tank (zfs pool tank),
 * protocol tcp (acl as given), PSC fast, CSINodes node-a and node-b. */
static inline void fx_objects(bool acl)
{
	char proto[200];
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}",
	       "{\"resolvedAddress\":\"10.0.0.5:9500\"}");
	fx_put("PillarStore", NULL, "tank", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}", NULL);
	snprintf(proto, sizeof(proto), "{\"protocol\":{\"nvmeofTcp\":{\"port\":4420,\"acl\":%s}}}",
	         acl ? "true" : "false");
	fx_put("PillarProtocol", NULL, "tcp", NULL, proto, NULL);
	fx_put("PillarStorageClass", NULL, "fast", NULL,
	       "{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\"}", NULL);
	fx_put("CSINode", NULL, "node-a",
	       "\"annotations\":{\"pillar-csi.bhyoo.com/"
	       "nvmeof-host-nqn\":\"nqn.2014-08.org.nvmexpress:uuid:aaaa\"}",
	       NULL, NULL);
	fx_put("CSINode", NULL, "node-b",
	       "\"annotations\":{\"pillar-csi.bhyoo.com/"
	       "nvmeof-host-nqn\":\"nqn.2014-08.org.nvmexpress:uuid:bbbb\"}",
	       NULL, NULL);
}

/* ---- CSI request builders (stack storage owned by the caller's struct) ------------------------ */

struct fx_cap {
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__AccessMode mode;
	Csi__V1__VolumeCapability__MountVolume mount;
	Csi__V1__VolumeCapability__BlockVolume block;
	Csi__V1__VolumeCapability *capp[1];
};

static inline void fx_cap_init(struct fx_cap *f, int mode, bool block)
{
	Csi__V1__VolumeCapability c = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__AccessMode m = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability__MountVolume mv = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability__BlockVolume bv = CSI__V1__VOLUME_CAPABILITY__BLOCK_VOLUME__INIT;
	f->cap = c;
	f->mode = m;
	f->mount = mv;
	f->block = bv;
	f->mode.mode = mode;
	f->cap.access_mode = &f->mode;
	if (block) {
		f->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		f->cap.block = &f->block;
	} else {
		f->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		f->cap.mount = &f->mount;
	}
	f->capp[0] = &f->cap;
}

#define FX_MAXP 8
struct fx_create {
	Csi__V1__CreateVolumeRequest req;
	Csi__V1__CapacityRange cr;
	Csi__V1__CreateVolumeRequest__ParametersEntry pe[FX_MAXP];
	Csi__V1__CreateVolumeRequest__ParametersEntry *pp[FX_MAXP];
	struct fx_cap cap;
};

/* params: NULL-terminated key, value list. */
static inline void fx_create_init(struct fx_create *f, const char *name, long long bytes,
                                  bool block, const char *const *params)
{
	Csi__V1__CreateVolumeRequest r = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	f->req = r;
	f->cr = cr;
	f->cr.required_bytes = bytes;
	f->req.name = (char *)name;
	f->req.capacity_range = &f->cr;
	fx_cap_init(&f->cap, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER,
	            block);
	f->req.n_volume_capabilities = 1;
	f->req.volume_capabilities = f->cap.capp;
	size_t n = 0;
	for (; params && params[2 * n] && n < FX_MAXP; n++) {
		Csi__V1__CreateVolumeRequest__ParametersEntry e =
		    CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
		f->pe[n] = e;
		f->pe[n].key = (char *)params[2 * n];
		f->pe[n].value = (char *)params[2 * n + 1];
		f->pp[n] = &f->pe[n];
	}
	f->req.n_parameters = n;
	f->req.parameters = f->pp;
}

/* The workers as the sidecars see them: Nodes labelled with our topology key and CSINodes with
 * kubelet's registration of the driver (node ID = node name). */
#define FX_NODE(n) \
	"{\"metadata\":{\"name\":\"" n "\",\"labels\":{\"" RULES_TOPOLOGY_KEY "\":\"true\"}}}"
#define FX_CSINODE(n)                                                                              \
	"{\"metadata\":{\"name\":\"" n "\"},\"spec\":{\"drivers\":[{\"name\":\"" RULES_DRIVER_NAME \
	"\",\"nodeID\":\"" n "\",\"topologyKeys\":[\"" RULES_TOPOLOGY_KEY "\"]}]}}"
#define FX_CLUSTER                                                                            \
	"{\"nodes\":[" FX_NODE("node-a") "," FX_NODE("node-b") "],\"csinodes\":[" FX_CSINODE( \
	    "node-a") "," FX_CSINODE("node-b") "," FX_CSINODE("node-c") "," FX_CSINODE("node-x") "]}"

/* CreateVolume as csi-provisioner sends it (test/unit/sidecar.h) for a ReadWriteOnce claim of
 * 1 GiB whose uid makes the volume name `name` ("pvc-<uid>"), of a StorageClass with parameters
 * params; `csi.storage.k8s.io/pvc/name` and `/pvc/namespace` in params name the claim (the
 * provisioner adds them itself), else the claim is default/claim-<name>.  A name the
 * provisioner never produces (not "pvc-…") is sent as a plain CSI request, as another CO
 * could.  fx_create returns the code and copies the volume ID (on OK) into vid;
 * fx_provision_req returns the request (free with protobuf_c_message_free_unpacked) for a claim
 * of `storage` (a quantity). */
static inline Csi__V1__CreateVolumeRequest *
fx_provision_req(const char *name, const char *const *params, bool block, const char *storage)
{
	cJSON *sc = cJSON_CreateObject(), *pv = cJSON_CreateObject();
	cJSON *sp = cJSON_AddObjectToObject(sc, "parameters");
	char cname[300], cns[64] = "default", err[256] = "";
	snprintf(cname, sizeof(cname), "claim-%s", name);
	for (; params && params[0]; params += 2)
		if (!strcmp(params[0], "csi.storage.k8s.io/pvc/name"))
			snprintf(cname, sizeof(cname), "%s", params[1]);
		else if (!strcmp(params[0], "csi.storage.k8s.io/pvc/namespace"))
			snprintf(cns, sizeof(cns), "%s", params[1]);
		else
			cJSON_AddStringToObject(sp, params[0], params[1]);
	cJSON *m = cJSON_AddObjectToObject(pv, "metadata");
	cJSON_AddStringToObject(m, "name", cname);
	cJSON_AddStringToObject(m, "namespace", cns);
	cJSON_AddStringToObject(m, "uid", name + 4);
	cJSON *spec = cJSON_AddObjectToObject(pv, "spec");
	cJSON_AddItemToObject(spec, "accessModes",
	                      cJSON_CreateStringArray((const char *[]){"ReadWriteOnce"}, 1));
	cJSON_AddStringToObject(spec, "volumeMode", block ? "Block" : "Filesystem");
	cJSON_AddStringToObject(
	    cJSON_AddObjectToObject(cJSON_AddObjectToObject(spec, "resources"), "requests"),
	    "storage", storage);
	char *sct = cJSON_PrintUnformatted(sc), *pvt = cJSON_PrintUnformatted(pv);
	Csi__V1__CreateVolumeRequest *q =
	    sidecar_create_volume(&sidecar_deployed, sct, pvt, FX_CLUSTER, NULL, err, sizeof(err));
	ck_assert_msg(q, "provisioner refused: %s", err);
	free(sct);
	free(pvt);
	cJSON_Delete(sc);
	cJSON_Delete(pv);
	return q;
}

static inline int fx_create(const char *name, const char *const *params, bool block, char *vid,
                            size_t cap, struct grpc_status *gs)
{
	struct fx_create f;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	Csi__V1__CreateVolumeRequest *q = NULL;
	if (!strncmp(name, "pvc-", 4))
		q = fx_provision_req(name, params, block, "1Gi");
	else
		fx_create_init(&f, name, 1LL << 30, block, params);
	int r = FX_CALL(csi_create_volume, q ? q : &f.req, &resp,
	                &csi__v1__create_volume_response__descriptor, gs);
	if (q)
		protobuf_c_message_free_unpacked(&q->base, NULL);
	if (r == 0) {
		if (vid)
			snprintf(vid, cap, "%s", resp->volume->volume_id);
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	} else {
		ck_assert_ptr_null(resp);
	}
	return r;
}

/* The PersistentVolume csi-provisioner wrote for volume vid (a ReadWriteOnce claim): its
 * volume attributes are the volume context CreateVolume returned, rebuilt from the
 * PillarVolumeState.  Caller frees. */
static inline cJSON *fx_pv(const char *vid)
{
	const char *slash = strrchr(vid, '/');
	struct model_pvst pvst;
	struct model_map ctx = {0};
	bool found =
	    model_get(fx_st, &model_pvst_kind, NULL, slash ? slash + 1 : vid, &pvst, NULL) == 0;
	if (found)
		ck_assert_int_eq(resolve_volume_context(&pvst, &ctx), 0);
	cJSON *pv = cJSON_CreateObject(), *spec = cJSON_AddObjectToObject(pv, "spec");
	cJSON_AddItemToObject(spec, "accessModes",
	                      cJSON_CreateStringArray((const char *[]){"ReadWriteOnce"}, 1));
	cJSON *csi = cJSON_AddObjectToObject(spec, "csi");
	cJSON_AddStringToObject(csi, "driver", RULES_DRIVER_NAME);
	cJSON_AddStringToObject(csi, "volumeHandle", vid);
	cJSON *attrs = cJSON_AddObjectToObject(csi, "volumeAttributes");
	const char *fs = NULL;
	for (size_t i = 0; i < ctx.n; i++) {
		cJSON_AddStringToObject(attrs, ctx.kv[i].key, ctx.kv[i].value);
		if (!strcmp(ctx.kv[i].key, RULES_KEY_PREFIX "fs-type"))
			fs = ctx.kv[i].value;
	}
	if (fs)
		cJSON_AddStringToObject(csi, "fsType", fs);
	cJSON_AddStringToObject(spec, "volumeMode", found && !fs ? "Block" : "Filesystem");
	model_map_clear(&ctx);
	if (found)
		model_clear(&model_pvst_kind, &pvst);
	return pv;
}

/* ControllerPublishVolume as csi-attacher sends it for a VolumeAttachment of vid's PV to node. */
static inline int fx_attach(const char *vid, const char *node, struct grpc_status *gs)
{
	char err[256] = "";
	cJSON *pv = fx_pv(vid);
	Csi__V1__ControllerPublishVolumeRequest *q =
	    sidecar_attach(&sidecar_deployed, pv, node, FX_CLUSTER, err, sizeof(err));
	Csi__V1__ControllerPublishVolumeResponse *resp = NULL;
	cJSON_Delete(pv);
	ck_assert_msg(q, "attacher refused: %s", err);
	int r = FX_CALL(csi_controller_publish, q, &resp,
	                &csi__v1__controller_publish_volume_response__descriptor, gs);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return r;
}

/* A plain ControllerPublishVolume with any mode and readonly, as a CO other than Kubernetes may
 * send (csi-attacher sends what fx_attach sends: never readonly, RWO as SINGLE_NODE_MULTI_WRITER
 * since the driver does not report PUBLISH_READONLY and does report SINGLE_NODE_MULTI_WRITER). */
static inline int fx_publish(const char *vid, const char *node, int mode, bool ro,
                             struct grpc_status *gs)
{
	Csi__V1__ControllerPublishVolumeRequest q =
	    CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerPublishVolumeResponse *resp = NULL;
	struct fx_cap cap;
	fx_cap_init(&cap, mode, false);
	q.volume_id = (char *)vid;
	q.node_id = (char *)node;
	q.volume_capability = &cap.cap;
	q.readonly = ro;
	int r = FX_CALL(csi_controller_publish, &q, &resp,
	                &csi__v1__controller_publish_volume_response__descriptor, gs);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return r;
}

/* ControllerUnpublishVolume as csi-attacher sends it when the VolumeAttachment goes. */
static inline int fx_unpublish(const char *vid, const char *node, struct grpc_status *gs)
{
	char err[256] = "";
	cJSON *pv = fx_pv(vid);
	Csi__V1__ControllerUnpublishVolumeRequest *q =
	    sidecar_detach(pv, node, FX_CLUSTER, err, sizeof(err));
	Csi__V1__ControllerUnpublishVolumeResponse *resp = NULL;
	cJSON_Delete(pv);
	ck_assert_msg(q, "attacher refused: %s", err);
	int r = FX_CALL(csi_controller_unpublish, q, &resp,
	                &csi__v1__controller_unpublish_volume_response__descriptor, gs);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return r;
}

/* ControllerUnpublishVolume without node_id (CSI: from every node), as a CO other than
 * Kubernetes may send it; csi-attacher always names the node. */
static inline int fx_unpublish_all(const char *vid, struct grpc_status *gs)
{
	Csi__V1__ControllerUnpublishVolumeRequest q =
	    CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerUnpublishVolumeResponse *resp = NULL;
	q.volume_id = (char *)vid;
	int r = FX_CALL(csi_controller_unpublish, &q, &resp,
	                &csi__v1__controller_unpublish_volume_response__descriptor, gs);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return r;
}

/* DeleteVolume as csi-provisioner sends it for the PV of vid. */
static inline int fx_delete(const char *vid, struct grpc_status *gs)
{
	cJSON *pv = fx_pv(vid);
	Csi__V1__DeleteVolumeRequest *q = sidecar_delete_volume(pv);
	Csi__V1__DeleteVolumeResponse *resp = NULL;
	cJSON_Delete(pv);
	int r =
	    FX_CALL(csi_delete_volume, q, &resp, &csi__v1__delete_volume_response__descriptor, gs);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return r;
}

#endif
