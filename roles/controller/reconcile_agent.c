/* reconcile_agent — PillarAgent reconcile (crds.md §3.5); the restore itself is in
 * reconcile_export.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "controller/reconcile.h"
#include "controller/resolve.h"

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
	       : b == PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE   ? "file"
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

/* "Deletion blocked: ..." or "" when nothing depends on the agent (crds.md §3.6). */
static void agent_dependents(struct ctl *c, const char *name, char *out, size_t cap)
{
	struct deps d = {0};
	cJSON *stores = reconcile_names_where(c, "PillarStore", "agentRef", name);
	cJSON *vols = reconcile_names_labeled(c, "PillarVolumeState", RULES_LABEL_AGENT, name);
	deps_objects(&d, "PillarStore", stores);
	deps_volumes(&d, vols);
	cJSON_Delete(stores);
	cJSON_Delete(vols);
	snprintf(out, cap, "%s", d.msg);
}

static const char *node_ref(const cJSON *pa)
{
	return json_get_str(cJSON_GetObjectItemCaseSensitive(
	                        cJSON_GetObjectItemCaseSensitive(pa, "spec"), "nodeRef"),
	                    "name");
}

/* crds.md §3.5 step 3 and §3.6: the agent DaemonSet's node selector label on the referenced
 * Node; removed (present=false) only when no other PillarAgent references the same Node.  A
 * missing Node is not an error (NodeExists reports it). */
static int node_label(struct ctl *c, const cJSON *pa, bool present, struct err *e)
{
	const char *node = node_ref(pa);
	cJSON *n = NULL;
	if (!node || !*node)
		return 0;
	if (!present) {
		cJSON *all = NULL;
		const cJSON *it;
		bool shared = false;
		int lr = store_list(c->st, kind_of("PillarAgent"), NULL, NULL, &all, NULL, e);
		if (lr < 0)
			return lr;
		cJSON_ArrayForEach(it, all)
		{
			const char *o = node_ref(it);
			if (o && !strcmp(o, node) &&
			    strcmp(store_meta_str(it, "name"), store_meta_str(pa, "name")))
				shared = true;
		}
		cJSON_Delete(all);
		if (shared)
			return 0;
	}
	int r = store_get(c->st, kind_of("Node"), NULL, node, &n, NULL);
	if (r < 0)
		return 0;
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(n, "metadata");
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
	const char *v = json_get_str(labels, RULES_LABEL_AGENT_NODE);
	bool has = v && !strcmp(v, "true");
	if (has == present) {
		cJSON_Delete(n);
		return 0;
	}
	if (!cJSON_IsObject(labels)) {
		cJSON_DeleteItemFromObjectCaseSensitive(meta, "labels");
		labels = cJSON_AddObjectToObject(meta, "labels");
	}
	cJSON_DeleteItemFromObjectCaseSensitive(labels, RULES_LABEL_AGENT_NODE);
	if (present)
		cJSON_AddStringToObject(labels, RULES_LABEL_AGENT_NODE, "true");
	r = store_update(c->st, n, NULL, e);
	cJSON_Delete(n);
	return r == STORE_NOT_FOUND ? 0 : r;
}

static int set_finalizer(struct ctl *c, cJSON *pa, bool present, struct err *e)
{
	return reconcile_finalizer(c, pa, RULES_FINALIZER_AGENT, present, e);
}

/* Ready from the other conditions, in the precedence of crds.md §3.3: DeletionBlocked
 * (blocked non-NULL), AgentNotConnected, AgentDegraded, then the ExportsReady reason. */
static void set_ready(cJSON *status, const char *blocked, bool connected, const char *conn_reason,
                      const char *exports_reason, int64_t og)
{
	if (blocked)
		cond_set(status, "Ready", "False", "DeletionBlocked", blocked, og);
	else if (!connected)
		cond_set(status, "Ready", "False", "AgentNotConnected", "", og);
	else if (!strcmp(conn_reason, "AgentDegraded"))
		cond_set(status, "Ready", "False", "AgentDegraded", "", og);
	else if (strcmp(exports_reason, "ExportsServing"))
		cond_set(status, "Ready", "False", exports_reason, "", og);
	else
		cond_set(status, "Ready", "True", "AgentConnected", "", og);
}

/* Writes the status of pa when it differs from before; pa's resourceVersion follows the write
 * so that a later write stays conditional on it.  Returns 0 or the store error. */
static int write_status(struct ctl *c, cJSON *pa, const cJSON *before, struct err *e)
{
	cJSON *out = NULL;
	if (cJSON_Compare(before, cJSON_GetObjectItemCaseSensitive(pa, "status"), true))
		return 0;
	int r = store_update_status(c->st, pa, &out, e);
	if (r == 0 && out) {
		cJSON *meta = cJSON_GetObjectItemCaseSensitive(pa, "metadata");
		cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
		cJSON_AddStringToObject(meta, "resourceVersion",
		                        store_meta_str(out, "resourceVersion") ?: "");
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
			if ((r = node_label(c, pa, false, e)) < 0) {
				cJSON_Delete(pa);
				return r;
			}
			r = set_finalizer(c, pa, false, e);
			cJSON_Delete(pa);
			return r == STORE_NOT_FOUND ? 0 : r;
		}
	} else if ((r = set_finalizer(c, pa, true, e)) < 0 ||
	           (r = node_label(c, pa, true, e)) < 0) {
		cJSON_Delete(pa);
		return r == STORE_NOT_FOUND ? 0 : r;
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
		/* crds.md §3.3: ExportRestorePending while the restore is not yet sent or in flight.
		 * It is recorded before the request goes out, so that the state is visible for the
		 * whole restore; a retry after ExportRestoreFailed keeps the failure visible. */
		if (strcmp(cond_reason(pa, "ExportsReady"), "ExportRestoreFailed")) {
			cond_set(status, "ExportsReady", "False", "ExportRestorePending",
			         "the agent reports export_restore_pending; sending the complete "
			         "export list",
			         og);
			set_ready(status, deleting ? blocked : NULL, true, conn_reason,
			          "ExportRestorePending", og);
			if ((r = write_status(c, pa, before, e)) < 0) {
				cJSON_Delete(before);
				cJSON_Delete(pa);
				return r == STORE_CONFLICT ? (*requeue_ms = 0, 0) : r;
			}
			cJSON_Delete(before);
			before = cJSON_Duplicate(status, true);
		}
		log_info("restoring the exports of an agent", "agent", name, "address", addr);
		if (reconcile_agent_restore(c, name, addr, &rs) == GRPC_OK) {
			log_info("exports restored", "agent", name);
			exports_reason = "ExportsServing";
			cond_set(status, "ExportsReady", "True", "ExportsServing", "", og);
		} else {
			exports_reason = "ExportRestoreFailed";
			log_warnf("export restore of agent %s failed: %s", name, rs.msg);
			cond_set(status, "ExportsReady", "False", "ExportRestoreFailed", rs.msg,
			         og);
			*requeue_ms = RECONCILE_RESTORE_RETRY_MS;
		}
	}
	set_ready(status, deleting ? blocked : NULL, connected, conn_reason, exports_reason, og);
	r = write_status(c, pa, before, e);
	cJSON_Delete(before);
	cJSON_Delete(pa);
	return r == STORE_CONFLICT ? (*requeue_ms = 0, 0) : r;
}
