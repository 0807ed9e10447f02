/* csi_misc — Identity service, ValidateVolumeCapabilities, GetCapacity,
 * ControllerGetCapabilities and the helpers the handlers share (csi.md §1.1, §3, §4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/csi.h"
#include "controller/csi_source.h"
#include "controller/pvst.h"
#include "controller/resolve.h"
#include "glue.h"
#include "version/version.h"

const char *csi_mode_name(int m)
{
	switch (m) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER:
		return "SINGLE_NODE_WRITER";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY:
		return "SINGLE_NODE_READER_ONLY";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY:
		return "MULTI_NODE_READER_ONLY";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER:
		return "MULTI_NODE_SINGLE_WRITER";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER:
		return "MULTI_NODE_MULTI_WRITER";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER:
		return "SINGLE_NODE_SINGLE_WRITER";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER:
		return "SINGLE_NODE_MULTI_WRITER";
	default: return "UNKNOWN";
	}
}

static bool mode_ok(int m)
{
	return m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER;
}

int csi_check_capability(const Csi__V1__VolumeCapability *cap, struct grpc_status *gs)
{
	if (!cap->access_mode)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "volume capability has no access mode");
	if (!mode_ok(cap->access_mode->mode))
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "access mode %s is not supported",
		                       csi_mode_name(cap->access_mode->mode));
	if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK)
		return 0;
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "volume capability has neither block nor mount access type");
	const char *fs = cap->mount->fs_type ? cap->mount->fs_type : "";
	if (*fs && strcmp(fs, "ext4") && strcmp(fs, "xfs"))
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "fs_type \"%s\" is not supported",
		                       fs);
	return 0;
}

static char *dup(const char *s)
{
	return strdup(s ? s : "");
}

/* The topology of every volume: the nodes where nvme_tcp is loaded (csi.md §3).  0, or -1 when
 * out of memory (what was allocated hangs off v, freed with it). */
static int add_topology(Csi__V1__Volume *v)
{
	v->accessible_topology = calloc(1, sizeof(*v->accessible_topology));
	Csi__V1__Topology *t = malloc(sizeof(*t));
	Csi__V1__Topology__SegmentsEntry *seg = malloc(sizeof(*seg));
	if (!v->accessible_topology || !t || !seg) {
		free(t);
		free(seg);
		return -1;
	}
	csi__v1__topology__init(t);
	csi__v1__topology__segments_entry__init(seg);
	v->accessible_topology[0] = t;
	v->n_accessible_topology = 1;
	t->segments = calloc(1, sizeof(*t->segments));
	if (!t->segments) {
		free(seg);
		return -1;
	}
	t->segments[0] = seg;
	t->n_segments = 1;
	seg->key = dup(RULES_TOPOLOGY_KEY);
	seg->value = dup("true");
	return seg->key && seg->value ? 0 : -1;
}

Csi__V1__Volume *csi_volume_of(const struct model_pvst *pvst)
{
	Csi__V1__Volume *v = calloc(1, sizeof(*v));
	struct model_map ctx = {0};
	if (!v || resolve_volume_context(pvst, &ctx) < 0)
		goto fail;
	csi__v1__volume__init(v);
	v->capacity_bytes = pvst->spec.capacity_bytes;
	v->volume_id = dup(pvst->spec.volume_id);
	v->volume_context = calloc(ctx.n ? ctx.n : 1, sizeof(*v->volume_context));
	if (!v->volume_id || !v->volume_context)
		goto fail;
	for (size_t i = 0; i < ctx.n; i++) {
		Csi__V1__Volume__VolumeContextEntry *e = malloc(sizeof(*e));
		if (!e)
			goto fail;
		csi__v1__volume__volume_context_entry__init(e);
		v->volume_context[v->n_volume_context++] = e;
		e->key = dup(ctx.kv[i].key);
		e->value = dup(ctx.kv[i].value);
		if (!e->key || !e->value)
			goto fail;
	}
	if (add_topology(v) < 0)
		goto fail;
	if (pvst->spec.has_content_source && !(v->content_source = csi_source_csi(pvst)))
		goto fail;
	model_map_clear(&ctx);
	return v;
fail:
	model_map_clear(&ctx);
	if (v && v->base.descriptor)
		protobuf_c_message_free_unpacked(&v->base, NULL);
	else
		free(v);
	return NULL;
}

/* ---- Identity ---------------------------------------------------------------------------------- */

int csi_get_plugin_info(struct ctl *c, const Csi__V1__GetPluginInfoRequest *req,
                        Csi__V1__GetPluginInfoResponse *resp, struct grpc_status *gs)
{
	(void)c;
	(void)req;
	resp->name = dup(RULES_DRIVER_NAME);
	resp->vendor_version = dup(version_string());
	if (!resp->name || !resp->vendor_version)
		return grpc_status_oom(gs);
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	return GRPC_OK;
}

int csi_name_refused(struct grpc_status *gs, const char *what, const char *name,
                     const char *pattern)
{
	bool cut = strlen(name) > RULES_VOLNAME_MAX;
	return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "%s \"%.*s%s\" must match %s", what,
	                       cut ? 64 : RULES_VOLNAME_MAX, name, cut ? "..." : "", pattern);
}

static Csi__V1__PluginCapability *svc_cap(int type)
{
	struct glue_pair m = glue_new_pair(&csi__v1__plugin_capability__descriptor,
	                                   &csi__v1__plugin_capability__service__descriptor);
	if (!m.a)
		return NULL;
	Csi__V1__PluginCapability *p = m.a;
	Csi__V1__PluginCapability__Service *s = m.b;
	s->type = type;
	p->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
	p->service = s;
	return p;
}

int csi_get_plugin_capabilities(struct ctl *c, const Csi__V1__GetPluginCapabilitiesRequest *req,
                                Csi__V1__GetPluginCapabilitiesResponse *r, struct grpc_status *gs)
{
	(void)c;
	(void)req;
	r->capabilities = calloc(3, sizeof(*r->capabilities));
	Csi__V1__PluginCapability *a =
	    svc_cap(CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE);
	Csi__V1__PluginCapability *b =
	    svc_cap(CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS);
	Csi__V1__PluginCapability *x = malloc(sizeof(*x));
	Csi__V1__PluginCapability__VolumeExpansion *ve = malloc(sizeof(*ve));
	if (r->capabilities && a)
		r->capabilities[r->n_capabilities++] = a;
	else if (a)
		protobuf_c_message_free_unpacked(&a->base, NULL);
	if (r->capabilities && b)
		r->capabilities[r->n_capabilities++] = b;
	else if (b)
		protobuf_c_message_free_unpacked(&b->base, NULL);
	if (r->capabilities && x && ve) {
		csi__v1__plugin_capability__init(x);
		csi__v1__plugin_capability__volume_expansion__init(ve);
		ve->type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
		x->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
		x->volume_expansion = ve;
		r->capabilities[r->n_capabilities++] = x;
	} else {
		free(x);
		free(ve);
	}
	if (r->n_capabilities != 3)
		return grpc_status_oom(gs);
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	return GRPC_OK;
}

int csi_probe(struct ctl *c, const Csi__V1__ProbeRequest *req, Csi__V1__ProbeResponse *resp,
              struct grpc_status *gs)
{
	bool ready = ctl_store_ready(c);
	Google__Protobuf__BoolValue *b = malloc(sizeof(*b));
	(void)req;
	if (!b)
		return grpc_status_oom(gs);
	google__protobuf__bool_value__init(b);
	b->value = ready;
	resp->ready = b;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	return GRPC_OK;
}

/* ---- Controller: capabilities, capacity, validate ---------------------------------------------- */

int csi_controller_capabilities(struct ctl *c, const Csi__V1__ControllerGetCapabilitiesRequest *req,
                                Csi__V1__ControllerGetCapabilitiesResponse *r,
                                struct grpc_status *gs)
{
	(void)c;
	(void)req;
	static const int types[] = {
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_CAPACITY,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_SNAPSHOTS,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME};
	const size_t n = sizeof(types) / sizeof(types[0]);
	r->capabilities = calloc(n, sizeof(*r->capabilities));
	for (size_t i = 0; r->capabilities && i < n; i++) {
		Csi__V1__ControllerServiceCapability *cap = malloc(sizeof(*cap));
		Csi__V1__ControllerServiceCapability__RPC *rpc = malloc(sizeof(*rpc));
		if (!cap || !rpc) {
			free(cap);
			free(rpc);
			break;
		}
		csi__v1__controller_service_capability__init(cap);
		csi__v1__controller_service_capability__rpc__init(rpc);
		rpc->type = types[i];
		cap->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		cap->rpc = rpc;
		r->capabilities[r->n_capabilities++] = cap;
	}
	if (r->n_capabilities != n)
		return grpc_status_oom(gs);
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	return GRPC_OK;
}

/* Reads the object a GetCapacity parameter names: 0, or INVALID_ARGUMENT when it does not exist
 * (the CO asks about a class it believes is ours: an answer of 0 would read as a full pool) and
 * UNAVAILABLE when the store cannot answer. */
static int capacity_lookup(struct ctl *c, const struct model_kind *k, const char *name,
                           const char *key, void *out, struct grpc_status *gs)
{
	struct err e = {0};
	int r = model_get(c->st, k, NULL, name, out, &e);
	if (r == STORE_NOT_FOUND || (r == STORE_INVALID && !*name))
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "%s \"%s\" (named via %s) not found", k->kind, name, key);
	if (r < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "reading %s \"%s\": %s", k->kind, name,
		                       e.msg);
	return 0;
}

/* The available bytes of the store a StorageClass names into *bytes (0 when the class names
 * none, or its store is missing).  0 or a gRPC code. */
static int store_available(struct ctl *c, const char *psc, const char *sref, int64_t *bytes,
                           struct grpc_status *gs)
{
	char store_name[254] = "";
	struct model_psc p;
	struct model_pst st;
	long long b = 0;
	int r;
	*bytes = 0;
	if (psc) {
		if ((r = capacity_lookup(c, &model_psc_kind, psc, RULES_KEY_PREFIX "storage-class",
		                         &p, gs)))
			return r;
		snprintf(store_name, sizeof(store_name), "%s", p.spec.store_ref ?: "");
		model_clear(&model_psc_kind, &p);
		if (!store_name[0] ||
		    model_get(c->st, &model_pst_kind, NULL, store_name, &st, NULL))
			return 0;
	} else if (sref) {
		if ((r = capacity_lookup(c, &model_pst_kind, sref, RULES_KEY_PREFIX "store-ref",
		                         &st, gs)))
			return r;
	} else {
		return 0;
	}
	const char *q = st.status.capacity.available;
	if (!q || model_quantity_parse(q, &b) < 0)
		b = 0;
	model_clear(&model_pst_kind, &st);
	*bytes = b;
	return 0;
}

/* Whether a topology segment includes the nodes that reach our volumes.  No segment asks about
 * the whole cluster; an empty one is the nodes whose plugin reported no topology (no nvme_tcp:
 * csi-provisioner's capacity tracking sends it for them), which reach none. */
static bool topology_reaches(const Csi__V1__Topology *t)
{
	if (!t)
		return true;
	for (size_t i = 0; i < t->n_segments; i++)
		if (!strcmp(t->segments[i]->key, RULES_TOPOLOGY_KEY))
			return !strcmp(t->segments[i]->value, "true");
	return false;
}

int csi_get_capacity(struct ctl *c, const Csi__V1__GetCapacityRequest *req,
                     Csi__V1__GetCapacityResponse *resp, struct grpc_status *gs)
{
	const char *psc = NULL, *sref = NULL;
	for (size_t i = 0; i < req->n_parameters; i++) {
		if (!strcmp(req->parameters[i]->key, RULES_KEY_PREFIX "storage-class"))
			psc = req->parameters[i]->value;
		else if (!strcmp(req->parameters[i]->key, RULES_KEY_PREFIX "store-ref"))
			sref = req->parameters[i]->value;
	}
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	int r = store_available(c, psc, sref, &resp->available_capacity, gs);
	if (r || (!psc && !sref))
		return r;
	/* A volume lands where its class's store is, reachable from every node with the NVMe/TCP
	 * topology key: a segment without it can hold nothing. */
	if (!topology_reaches(req->accessible_topology))
		resp->available_capacity = 0;
	/* One store per class: the largest volume it can take is what its pool has free (the
	 * scheduler compares a claim with this before it falls back to available_capacity). */
	Google__Protobuf__Int64Value *max = malloc(sizeof(*max));
	if (!max)
		return grpc_status_oom(gs);
	google__protobuf__int64_value__init(max);
	max->value = resp->available_capacity;
	resp->maximum_volume_size = max;
	return GRPC_OK;
}

/* Why the capabilities do not fit the volume ("" when they do). */
static void capabilities_fit(const Csi__V1__ValidateVolumeCapabilitiesRequest *req,
                             const struct model_pvst *obj, char *why, size_t cap_len)
{
	const struct model_resolved *res = &obj->spec.resolved;
	const char *fstype = res->filesystem.fs_type;
	bool fs = res->has_filesystem;
	for (size_t i = 0; i < req->n_volume_capabilities && !why[0]; i++) {
		const Csi__V1__VolumeCapability *cap = req->volume_capabilities[i];
		struct grpc_status tmp = {0};
		if (csi_check_capability(cap, &tmp)) {
			snprintf(why, cap_len, "%s", tmp.msg);
		} else if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT) {
			const char *want = cap->mount->fs_type ? cap->mount->fs_type : "";
			if (!fs)
				snprintf(why, cap_len, "volume \"%s\" is a block volume",
				         req->volume_id);
			else if (*want && fstype && strcmp(want, fstype))
				snprintf(why, cap_len,
				         "fs_type \"%s\" does not match the volume's fsType \"%s\"",
				         want, fstype);
		}
	}
}

/* A deep copy of the request's capabilities, context and parameters (the confirmed answer),
 * or NULL when out of memory. */
static Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *
confirmed_of(const Csi__V1__ValidateVolumeCapabilitiesRequest *req)
{
	Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed cf =
	    CSI__V1__VALIDATE_VOLUME_CAPABILITIES_RESPONSE__CONFIRMED__INIT;
	void *out = NULL;
	cf.n_volume_capabilities = req->n_volume_capabilities;
	cf.volume_capabilities = req->volume_capabilities;
	cf.n_volume_context = req->n_volume_context; /* same layout as the request's entries */
	cf.volume_context = (void *)req->volume_context;
	cf.n_parameters = req->n_parameters;
	cf.parameters = (void *)req->parameters;
	size_t n = protobuf_c_message_get_packed_size(&cf.base);
	uint8_t *buf = malloc(n ? n : 1);
	if (buf) {
		protobuf_c_message_pack(&cf.base, buf);
		out = protobuf_c_message_unpack(
		    &csi__v1__validate_volume_capabilities_response__confirmed__descriptor, NULL, n,
		    buf);
		free(buf);
	}
	return out;
}

int csi_validate_capabilities(struct ctl *c, const Csi__V1__ValidateVolumeCapabilitiesRequest *req,
                              Csi__V1__ValidateVolumeCapabilitiesResponse *resp,
                              struct grpc_status *gs)
{
	struct model_pvst obj;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (!req->volume_id || !*req->volume_id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT, "volume_id is required");
	if (req->n_volume_capabilities == 0)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "volume_capabilities is required");
	int r = pvst_find_existing(c, req->volume_id, &obj, gs);
	if (r)
		return r;
	char why[GRPC_STATUS_MSG_MAX] = "";
	capabilities_fit(req, &obj, why, sizeof(why));
	model_clear(&model_pvst_kind, &obj);
	if (why[0])
		resp->message = dup(why);
	else
		resp->confirmed = confirmed_of(req);
	if (why[0] ? !resp->message : !resp->confirmed)
		return grpc_status_oom(gs);
	return GRPC_OK;
}
