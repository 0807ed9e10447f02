/* reconcile_agent — PillarAgent reconcile (crds.md §3.5) and the full export restore
 * (agent-api.md §12.2, §12.4). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/reconcile.h"
#include "controller/resolve.h"

/* ---- restore ------------------------------------------------------------------------------------ */

struct rvol {
	cJSON *obj;
	bool ics;
	PillarCsi__Agent__V1__VolumeDesiredState vds;
	PillarCsi__Agent__V1__VolumeDesiredState *vdsp;
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

static void set_export_cond(struct ctl *c, const cJSON *obj, const char *reason, const char *msg)
{
	struct recon_set s = {reason, msg};
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

int reconcile_agent_restore(struct ctl *c, const char *agent, const char *addr,
                            struct grpc_status *gs)
{
	char sel[400];
	cJSON *items = NULL;
	struct err e = {0};
	struct rvol *v = NULL;
	size_t n = 0;
	int r;

	snprintf(sel, sizeof(sel), PVST_LABEL_AGENT "=%s", agent);
	if (store_list(c->st, kind_of("PillarVolumeState"), NULL, sel, &items, NULL, &e) < 0)
		return gstatus(gs, GRPC_UNAVAILABLE, "listing volumes of agent \"%s\": %s", agent,
		               e.msg);
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
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
		const char *phase = json_get_str(st, "phase") ?: "";
		if (pvst_deleting(obj) || !strcmp(phase, "Provisioning") || !phase[0]) {
			cJSON_Delete(obj);
			continue;
		}
		const cJSON *es = cJSON_GetObjectItemCaseSensitive(st, "exportSpec");
		if (!es) {
			set_export_cond(
			    c, obj, "ExportSpecMissing",
			    "status.exportSpec is missing; the controller will not guess it "
			    "(see operations.md §9)");
			cJSON_Delete(obj);
			continue;
		}
		struct rvol *x = &v[n++];
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
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
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
		x->eds.protocol_type =
		    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
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
	/* sort pointers: the structs hold pointers into themselves */
	struct rvol **order = calloc(n ? n : 1, sizeof(*order));
	PillarCsi__Agent__V1__VolumeDesiredState **vols = calloc(n ? n : 1, sizeof(*vols));
	for (size_t i = 0; order && i < n; i++)
		order[i] = &v[i];
	if (order)
		qsort(order, n, sizeof(*order), cmp_rvol);
	for (size_t i = 0; vols && order && i < n; i++)
		vols[i] = &order[i]->vds;
	PillarCsi__Agent__V1__ReconcileStateRequest q =
	    PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PillarCsi__Agent__V1__ReconcileStateResponse *resp = NULL;
	struct grpc_status ast = {0};
	q.volumes = vols;
	q.n_volumes = vols && order ? n : 0;
	q.complete = true;
	r = agentclient_reconcile_state(c->ac, addr, &q, &resp, &ast);
	for (size_t i = 0; i < n; i++) {
		const char *reason = "AgentUnavailable", *msg = ast.msg;
		if (r == GRPC_OK) {
			reason = "ReconcileFailed";
			msg = "the agent returned no result for this volume";
			for (size_t k = 0; resp && k < resp->n_results; k++) {
				const PillarCsi__Agent__V1__VolumeReconcileResult *res =
				    resp->results[k];
				if (strcmp(res->volume_id, v[i].vds.volume_id))
					continue;
				if (res->success) {
					reason = "Reconciled";
					msg = "";
				} else {
					msg = res->error_message;
					reason =
					    !strncmp(msg,
					             "FAILED_PRECONDITION: stale fencing token", 40)
					        ? "StaleGeneration"
					        : "ReconcileFailed";
				}
				break;
			}
		} else if (r != GRPC_UNAVAILABLE && r != GRPC_DEADLINE_EXCEEDED) {
			reason = "ReconcileFailed";
		}
		set_export_cond(c, v[i].obj, reason, msg);
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
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
	gs->code = r;
	snprintf(gs->msg, sizeof(gs->msg), "%s", ast.msg);
	return r;
}

/* ---- PillarAgent reconcile ---------------------------------------------------------------------- */

static bool cidr_contains(const char *cidr, const char *ip)
{
	char net[64];
	const char *slash = strchr(cidr, '/');
	if (!slash || (size_t)(slash - cidr) >= sizeof(net))
		return false;
	snprintf(net, sizeof(net), "%.*s", (int)(slash - cidr), cidr);
	int bits = atoi(slash + 1);
	unsigned char a[16], b[16];
	int fam = strchr(net, ':') ? AF_INET6 : AF_INET, len = fam == AF_INET6 ? 16 : 4;
	if (inet_pton(fam, net, a) != 1 || inet_pton(fam, ip, b) != 1 || bits < 0 || bits > len * 8)
		return false;
	for (int i = 0; i < bits; i++)
		if ((a[i / 8] ^ b[i / 8]) & (0x80 >> (i % 8)))
			return false;
	return true;
}

/* Resolves the address; sets NodeExists.  Returns true with addr "ip:port" when resolved. */
static bool resolve_address(struct ctl *c, const cJSON *pa, cJSON *status, int64_t og, char *addr,
                            size_t cap)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pa, "spec");
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(spec, "external");
	const cJSON *nr = cJSON_GetObjectItemCaseSensitive(spec, "nodeRef");
	long long port = 0;
	if (ext) {
		const char *a = json_get_str(ext, "address") ?: "";
		resolve_get_int(ext, "port", &port);
		snprintf(addr, cap, strchr(a, ':') ? "[%s]:%lld" : "%s:%lld", a, port);
		cond_set(status, "NodeExists", "True", "ExternalMode", "", og);
		return true;
	}
	if (!nr) {
		cond_set(status, "NodeExists", "False", "MissingSpec",
		         "exactly one of spec.nodeRef or spec.external must be set", og);
		return false;
	}
	const char *node = json_get_str(nr, "name") ?: "";
	const char *type = json_get_str(nr, "addressType") ?: "InternalIP";
	const char *selector = json_get_str(nr, "addressSelector");
	if (resolve_get_int(nr, "port", &port) != 0)
		port = c->agent_default_port;
	cJSON *n = NULL;
	struct err e = {0};
	int r = store_get(c->st, kind_of("Node"), NULL, node, &n, &e);
	if (r == STORE_NOT_FOUND || r == STORE_INVALID) {
		char m[300];
		snprintf(m, sizeof(m), "Node \"%s\" not found", node);
		cond_set(status, "NodeExists", "False", "NodeNotFound", m, og);
		return false;
	}
	if (r < 0) {
		cond_set(status, "NodeExists", "False", "NodeLookupError", e.msg, og);
		return false;
	}
	const cJSON *it;
	const char *found = NULL;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(
	                           cJSON_GetObjectItemCaseSensitive(n, "status"), "addresses"))
	{
		const char *t = json_get_str(it, "type"), *a = json_get_str(it, "address");
		if (!t || !a || strcmp(t, type) || (selector && !cidr_contains(selector, a)))
			continue;
		found = a;
		break;
	}
	if (!found) {
		char m[400];
		snprintf(m, sizeof(m), "Node \"%s\" has no %s address%s%s", node, type,
		         selector ? " inside " : "", selector ? selector : "");
		cond_set(status, "NodeExists", "False", "AddressNotResolved", m, og);
		cJSON_Delete(n);
		return false;
	}
	snprintf(addr, cap, strchr(found, ':') ? "[%s]:%lld" : "%s:%lld", found, port);
	cJSON_Delete(n);
	cond_set(status, "NodeExists", "True", "NodeFound", "", og);
	return true;
}

static const char *backend_token(int b)
{
	return b == PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL ? "zfs-zvol"
	       : b == PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_LVM    ? "lvm-lv"
	       : b == 6                                                        ? "file"
	                                                                       : NULL;
}

static void apply_caps(cJSON *status, const PillarCsi__Agent__V1__GetCapabilitiesResponse *r)
{
	char q[32];
	cJSON_DeleteItemFromObjectCaseSensitive(status, "agentVersion");
	cJSON_AddStringToObject(status, "agentVersion", r->agent_version);
	cJSON *caps = cJSON_CreateObject(), *bk = cJSON_AddArrayToObject(caps, "backends"),
	      *pr = cJSON_AddArrayToObject(caps, "protocols");
	for (size_t i = 0; i < r->n_supported_backends; i++)
		if (backend_token(r->supported_backends[i]))
			cJSON_AddItemToArray(
			    bk, cJSON_CreateString(backend_token(r->supported_backends[i])));
	for (size_t i = 0; i < r->n_supported_protocols; i++)
		if (r->supported_protocols[i] ==
		    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP)
			cJSON_AddItemToArray(pr, cJSON_CreateString("nvmeof-tcp"));
	cJSON_DeleteItemFromObjectCaseSensitive(status, "capabilities");
	cJSON_AddItemToObject(status, "capabilities", caps);
	cJSON *pools = cJSON_CreateArray();
	for (size_t i = 0; i < r->n_discovered_pools; i++) {
		const PillarCsi__Agent__V1__PoolInfo *p = r->discovered_pools[i];
		const char *t = backend_token(p->backend_type);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", p->name);
		cJSON_AddStringToObject(o, "type",
		                        !t                       ? "unknown"
		                        : !strcmp(t, "zfs-zvol") ? "zfs"
		                        : !strcmp(t, "lvm-lv")   ? "lvm"
		                                                 : "file");
		quantity_format(p->total_bytes, q, sizeof(q));
		cJSON_AddStringToObject(o, "total", q);
		quantity_format(p->available_bytes, q, sizeof(q));
		cJSON_AddStringToObject(o, "available", q);
		if (p->parent_dataset && *p->parent_dataset)
			cJSON_AddStringToObject(o, "parentDataset", p->parent_dataset);
		if (p->thin_pool && *p->thin_pool)
			cJSON_AddStringToObject(o, "thinPool", p->thin_pool);
		cJSON_AddItemToArray(pools, o);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(status, "discoveredPools");
	cJSON_AddItemToObject(status, "discoveredPools", pools);
}

/* "Deletion blocked: ..." or "" when nothing depends on the agent. */
static void agent_dependents(struct ctl *c, const char *name, char *out, size_t cap)
{
	cJSON *stores = NULL, *vols = NULL;
	char sel[400];
	size_t o = 0, ns = 0;
	out[0] = 0;
	store_list(c->st, kind_of("PillarStore"), NULL, NULL, &stores, NULL, NULL);
	snprintf(sel, sizeof(sel), PVST_LABEL_AGENT "=%s", name);
	store_list(c->st, kind_of("PillarVolumeState"), NULL, sel, &vols, NULL, NULL);
	const cJSON *it;
	cJSON_ArrayForEach(it, stores)
	{
		const char *ref =
		    json_get_str(cJSON_GetObjectItemCaseSensitive(it, "spec"), "agentRef");
		if (!ref || strcmp(ref, name))
			continue;
		if (ns++ < 10)
			o += (size_t)snprintf(
			    out + o, o < cap ? cap - o : 0, "%sPillarStore \"%s\"",
			    o ? "; " : "Deletion blocked: ", store_meta_str(it, "name"));
	}
	if (ns > 10)
		o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, " and %zu more", ns - 10);
	int nv = cJSON_GetArraySize(vols);
	if (nv > 0) {
		o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s%d volume%s (",
		                      o ? "; " : "Deletion blocked: ", nv, nv == 1 ? "" : "s");
		int k = 0;
		cJSON_ArrayForEach(it, vols)
		{
			if (k == 10)
				break;
			o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s%s",
			                      k++ ? ", " : "", store_meta_str(it, "name"));
		}
		if (nv > 10)
			o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, " and %d more",
			                      nv - 10);
		snprintf(out + o, o < cap ? cap - o : 0, ")");
	}
	cJSON_Delete(stores);
	cJSON_Delete(vols);
}

static int set_finalizer(struct ctl *c, cJSON *pa, bool present, struct err *e)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(pa, "metadata");
	cJSON *f = cJSON_GetObjectItemCaseSensitive(meta, "finalizers");
	int idx = -1, i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, f)
	{
		if (cJSON_IsString(it) && !strcmp(it->valuestring, AGENT_FINALIZER))
			idx = i;
		i++;
	}
	if (present == (idx >= 0))
		return 0;
	if (present) {
		if (!cJSON_IsArray(f)) {
			cJSON_DeleteItemFromObjectCaseSensitive(meta, "finalizers");
			f = cJSON_AddArrayToObject(meta, "finalizers");
		}
		cJSON_AddItemToArray(f, cJSON_CreateString(AGENT_FINALIZER));
	} else {
		cJSON_DeleteItemFromArray(f, idx);
	}
	cJSON *out = NULL;
	int r = store_update(c->st, pa, &out, e);
	if (r == 0 && out) {
		cJSON_DeleteItemFromObjectCaseSensitive(pa, "metadata");
		cJSON_AddItemToObject(
		    pa, "metadata",
		    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(out, "metadata"), true));
	}
	cJSON_Delete(out);
	return r;
}

int reconcile_agent(struct ctl *c, const char *name, int *requeue_ms, struct err *e)
{
	cJSON *pa = NULL, *before = NULL;
	char addr[300] = "", blocked[1024] = "";
	int r;

	*requeue_ms = RECONCILE_INTERVAL_MS;
	r = store_get(c->st, kind_of("PillarAgent"), NULL, name, &pa, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	bool deleting = store_meta_str(pa, "deletionTimestamp") != NULL;
	if (deleting) {
		agent_dependents(c, name, blocked, sizeof(blocked));
		if (!blocked[0]) {
			r = set_finalizer(c, pa, false, e);
			cJSON_Delete(pa);
			return r == STORE_NOT_FOUND ? 0 : r;
		}
	} else if ((r = set_finalizer(c, pa, true, e)) < 0) {
		cJSON_Delete(pa);
		return r;
	}
	int64_t og = 0;
	json_get_int64(cJSON_GetObjectItemCaseSensitive(pa, "metadata"), "generation", &og);
	cJSON *status = cJSON_GetObjectItemCaseSensitive(pa, "status");
	if (!cJSON_IsObject(status)) {
		cJSON_DeleteItemFromObjectCaseSensitive(pa, "status");
		status = cJSON_AddObjectToObject(pa, "status");
	}
	before = cJSON_Duplicate(status, true);
	bool have_addr = resolve_address(c, pa, status, og, addr, sizeof(addr));
	cJSON_DeleteItemFromObjectCaseSensitive(status, "resolvedAddress");
	if (have_addr)
		cJSON_AddStringToObject(status, "resolvedAddress", addr);
	const char *conn_reason = "AgentNotConnected";
	bool connected = false, pending = false;
	if (!have_addr) {
		const char *nr = cond_reason(pa, "NodeExists");
		cond_set(status, "AgentConnected", "False", nr, "no address to dial", og);
	} else if (!c->ac) {
		cond_set(status, "AgentConnected", "False", "DialerNotConfigured",
		         "the controller runs without an agent client", og);
	} else {
		PillarCsi__Agent__V1__HealthCheckResponse *h = NULL;
		struct grpc_status ast = {0};
		if (agentclient_health_check(c->ac, addr, &h, &ast) != GRPC_OK) {
			char m[900];
			snprintf(m, sizeof(m), "HealthCheck to agent at \"%s\" failed: %s", addr,
			         ast.msg);
			cond_set(status, "AgentConnected", "False", "HealthCheckFailed", m, og);
		} else {
			connected = true;
			pending = h->export_restore_pending;
			if (h->healthy) {
				conn_reason = "Dialed";
				cond_set(status, "AgentConnected", "True", "Dialed", "", og);
			} else {
				char m[1024] = "";
				size_t o = 0;
				for (size_t i = 0; i < h->n_subsystems; i++)
					if (!h->subsystems[i]->healthy)
						o += (size_t)snprintf(
						    m + o, o < sizeof(m) ? sizeof(m) - o : 0,
						    "%s%s: %s", o ? "; " : "",
						    h->subsystems[i]->name,
						    h->subsystems[i]->message);
				conn_reason = "AgentDegraded";
				cond_set(status, "AgentConnected", "True", "AgentDegraded", m, og);
			}
			protobuf_c_message_free_unpacked(&h->base, NULL);
			PillarCsi__Agent__V1__GetCapabilitiesResponse *cr = NULL;
			if (agentclient_get_capabilities(c->ac, addr, &cr, &ast) == GRPC_OK) {
				apply_caps(status, cr);
				protobuf_c_message_free_unpacked(&cr->base, NULL);
			}
		}
	}
	const char *exports_reason = "AgentNotConnected";
	if (!connected) {
		cond_set(status, "ExportsReady", "Unknown", "AgentNotConnected",
		         "AgentConnected is not True", og);
	} else if (!pending) {
		exports_reason = "ExportsServing";
		cond_set(status, "ExportsReady", "True", "ExportsServing", "", og);
	} else {
		struct grpc_status rs = {0};
		if (reconcile_agent_restore(c, name, addr, &rs) == GRPC_OK) {
			exports_reason = "ExportsServing";
			cond_set(status, "ExportsReady", "True", "ExportsServing", "", og);
		} else {
			exports_reason = "ExportRestoreFailed";
			cond_set(status, "ExportsReady", "False", "ExportRestoreFailed", rs.msg,
			         og);
			*requeue_ms = RECONCILE_RESTORE_RETRY_MS;
		}
	}
	if (deleting)
		cond_set(status, "Ready", "False", "DeletionBlocked", blocked, og);
	else if (!connected)
		cond_set(status, "Ready", "False", "AgentNotConnected", "", og);
	else if (!strcmp(conn_reason, "AgentDegraded"))
		cond_set(status, "Ready", "False", "AgentDegraded", "", og);
	else if (strcmp(exports_reason, "ExportsServing"))
		cond_set(status, "Ready", "False", exports_reason, "", og);
	else
		cond_set(status, "Ready", "True", "AgentConnected", "", og);
	r = 0;
	if (!cJSON_Compare(before, status, true))
		r = store_update_status(c->st, pa, NULL, e);
	cJSON_Delete(before);
	cJSON_Delete(pa);
	return r == STORE_CONFLICT ? (*requeue_ms = 0, 0) : r;
}
