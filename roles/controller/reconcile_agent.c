/* reconcile_agent — PillarAgent reconcile (crds.md §3.5); the restore itself is in
 * reconcile_export.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "controller/agents.h"
#include "controller/dhchap.h"
#include "controller/reconcile.h"
#include "controller/reconcile_batch.h"
#include "kube/client.h"
#include "model/kube.h"
#include "rules/conditions.h"

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

static void host_port(char *addr, size_t cap, const char *ip, int64_t port)
{
	snprintf(addr, cap, strchr(ip, ':') ? "[%s]:%lld" : "%s:%lld", ip, (long long)port);
}

/* The first address of the Node of type `type` inside selector (when set), or NULL. */
static const char *node_address(const struct model_node *n, const char *type, const char *selector)
{
	for (size_t i = 0; i < n->status.n_addresses; i++) {
		const struct model_node_address *a = &n->status.addresses[i];
		if (a->type && a->address && !strcmp(a->type, type) &&
		    (!selector || cidr_contains(selector, a->address)))
			return a->address;
	}
	return NULL;
}

/* Resolves the address; sets NodeExists.  Returns true with addr "ip:port" when resolved. */
static bool resolve_address(struct ctl *c, struct model_pa *pa, int64_t og, char *addr, size_t cap)
{
	struct model_conds *cs = &pa->status.conditions;
	const struct model_pa_node_ref *nr = &pa->spec.node_ref;
	if (pa->spec.has_external) {
		host_port(addr, cap, pa->spec.external.address ?: "", pa->spec.external.port);
		model_cond_set(cs, RULES_COND_NODE_EXISTS, "True", RULES_REASON_EXTERNAL_MODE, "",
		               og);
		return true;
	}
	if (!pa->spec.has_node_ref) {
		model_cond_set(cs, RULES_COND_NODE_EXISTS, "False", RULES_REASON_MISSING_SPEC,
		               "exactly one of spec.nodeRef or spec.external must be set", og);
		return false;
	}
	const char *node = nr->name ?: "", *type = model_pa_address_type(pa);
	int64_t port = model_pa_node_port(pa, c->agent_default_port);
	struct model_node n;
	struct err e = {0};
	char m[400];
	int r = model_get(c->st, &model_node_kind, NULL, node, &n, &e);
	if (r == STORE_NOT_FOUND || r == STORE_INVALID) {
		snprintf(m, sizeof(m), "Node \"%s\" not found", node);
		model_cond_set(cs, RULES_COND_NODE_EXISTS, "False", RULES_REASON_NODE_NOT_FOUND, m,
		               og);
		return false;
	}
	if (r < 0) {
		model_cond_set(cs, RULES_COND_NODE_EXISTS, "False", RULES_REASON_NODE_LOOKUP_ERROR,
		               e.msg, og);
		return false;
	}
	const char *found = node_address(&n, type, nr->address_selector);
	if (found)
		host_port(addr, cap, found, port);
	model_clear(&model_node_kind, &n);
	if (!found) {
		const char *sel = nr->address_selector;
		snprintf(m, sizeof(m), "Node \"%s\" has no %s address%s%s", node, type,
		         sel ? " inside " : "", sel ? sel : "");
		model_cond_set(cs, RULES_COND_NODE_EXISTS, "False",
		               RULES_REASON_ADDRESS_NOT_RESOLVED, m, og);
		return false;
	}
	model_cond_set(cs, RULES_COND_NODE_EXISTS, "True", RULES_REASON_NODE_FOUND, "", og);
	return true;
}

static const char *backend_token(int b)
{
	return b == PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL ? "zfs-zvol"
	       : b == PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_LVM    ? "lvm-lv"
	       : b == PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE   ? "file"
	                                                                       : NULL;
}

static int pool_of(struct model_pa_pool *o, const PillarCsi__Agent__V1__PoolInfo *p)
{
	const char *t = backend_token(p->backend_type);
	char q[32];
	int r = model_str_set(&o->name, p->name);
	r |= model_str_set(&o->type, !t                       ? "unknown"
	                             : !strcmp(t, "zfs-zvol") ? "zfs"
	                             : !strcmp(t, "lvm-lv")   ? "lvm"
	                                                      : "file");
	model_quantity_format(p->total_bytes, q, sizeof(q));
	r |= model_str_set(&o->total, q);
	model_quantity_format(p->available_bytes, q, sizeof(q));
	r |= model_str_set(&o->available, q);
	if (p->parent_dataset && *p->parent_dataset)
		r |= model_str_set(&o->parent_dataset, p->parent_dataset);
	if (p->thin_pool && *p->thin_pool)
		r |= model_str_set(&o->thin_pool, p->thin_pool);
	return r ? -ENOMEM : 0;
}

/* agentVersion, capabilities and discoveredPools from GetCapabilities (crds.md §3.2). */
static int apply_caps(struct model_pa *pa, const PillarCsi__Agent__V1__GetCapabilitiesResponse *r)
{
	__typeof__(pa->status) *st = &pa->status;
	struct model_pa_caps *caps = &st->capabilities;
	int x = model_str_set(&st->agent_version, r->agent_version);
	st->has_capabilities = true;
	model_strs_clear(&caps->backends);
	model_strs_clear(&caps->protocols);
	for (size_t i = 0; i < r->n_supported_backends; i++)
		if (backend_token(r->supported_backends[i]))
			x |= model_strs_add(&caps->backends,
			                    backend_token(r->supported_backends[i]));
	for (size_t i = 0; i < r->n_supported_protocols; i++)
		if (r->supported_protocols[i] ==
		    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP)
			x |= model_strs_add(&caps->protocols, "nvmeof-tcp");
	caps->has_nvme_target_auth = true;
	caps->nvme_target_auth = r->nvme_target_auth;
	struct model_pa_pool *pools = calloc(r->n_discovered_pools + 1, sizeof(*pools));
	if (!pools)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_discovered_pools; i++)
		x |= pool_of(&pools[i], r->discovered_pools[i]);
	/* the old list goes with a struct that owns it */
	struct model_pa old = {0};
	old.status.pools = st->pools;
	old.status.n_pools = st->n_pools;
	model_clear(&model_pa_kind, &old);
	st->pools = pools;
	st->n_pools = r->n_discovered_pools;
	return x ? -ENOMEM : 0;
}

/* "Deletion blocked: ..." or "" when nothing depends on the agent (crds.md §3.6). */
static void agent_dependents(struct ctl *c, const char *name, char *out, size_t cap)
{
	struct reconcile_deps d = {0};
	struct model_strs stores = {0}, vols = {0};
	reconcile_names_where(c, REF_PST_AGENT, name, &stores);
	reconcile_names_labeled(c, &model_pvst_kind, RULES_LABEL_AGENT, name, &vols);
	reconcile_deps_objects(&d, "PillarStore", &stores);
	reconcile_deps_volumes(&d, &vols);
	model_strs_clear(&stores);
	model_strs_clear(&vols);
	snprintf(out, cap, "%s", d.msg);
}

/* true when another PillarAgent than pa references node (or the list fails: err set). */
static int node_shared(struct ctl *c, const struct model_pa *pa, const char *node, struct err *e)
{
	struct model_pa *all = NULL;
	size_t n = 0;
	int shared = 0;
	int r = model_list(c->st, &model_pa_kind, NULL, NULL, (void **)&all, &n, NULL, e);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const char *o = all[i].spec.node_ref.name;
		if (o && !strcmp(o, node) && strcmp(all[i].meta.name, pa->meta.name))
			shared = 1;
	}
	model_list_free(&model_pa_kind, all, n);
	return shared;
}

/* On the API server the label is set or removed with a JSON merge patch of the Node's labels
 * alone (deploy.md §10 grants `patch` on nodes, not `update`), as `kubectl label` does: it
 * cannot conflict with the Node's other writers.  A Node gone meanwhile is no error. */
static int node_label_patch(struct kube_client *kc, const char *node, bool present, struct err *e)
{
	static const struct kube_resource nodes = {"", "v1", "nodes", false};
	struct kube_status st = {0};
	char body[160];
	snprintf(body, sizeof(body), "{\"metadata\":{\"labels\":{\"%s\":%s}}}",
	         RULES_LABEL_AGENT_NODE, present ? "\"true\"" : "null");
	int r = kube_patch(kc, &nodes, NULL, node, KUBE_PATCH_MERGE, false, body, NULL, &st);
	if (r < 0 && st.kind != KUBE_NOT_FOUND)
		return err_set(e, r, "label Node \"%s\": %s", node,
		               st.message[0] ? st.message : kube_reason_name(st.kind));
	return 0;
}

/* crds.md §3.5 step 3 and §3.6: the agent DaemonSet's node selector label on the referenced
 * Node; removed (present=false) only when no other PillarAgent references the same Node.  A
 * missing Node is not an error (NodeExists reports it). */
static int node_label(struct ctl *c, const struct model_pa *pa, bool present, struct err *e)
{
	const char *node = pa->spec.node_ref.name;
	struct model_node n;
	if (!node || !*node)
		return 0;
	if (!present) {
		int sh = node_shared(c, pa, node, e);
		if (sh != 0)
			return sh < 0 ? sh : 0;
	}
	if (model_get(c->st, &model_node_kind, NULL, node, &n, NULL) < 0)
		return 0;
	const char *v = model_map_get(&n.meta.labels, RULES_LABEL_AGENT_NODE);
	int r = 0;
	if ((v && !strcmp(v, "true")) != present) {
		if (c->kc) {
			r = node_label_patch(c->kc, node, present, e);
		} else {
			r = model_map_set(&n.meta.labels, RULES_LABEL_AGENT_NODE,
			                  present ? "true" : NULL);
			if (r == 0)
				r = model_update(c->st, &model_node_kind, &n, NULL, e);
		}
	}
	model_clear(&model_node_kind, &n);
	return r == STORE_NOT_FOUND ? 0 : r;
}

/* Ready from the other conditions, in the precedence of crds.md §3.3: DeletionBlocked
 * (blocked non-NULL), AgentNotConnected, AgentDegraded, then the ExportsReady reason. */
static void set_ready(struct model_conds *cs, const char *blocked, bool connected,
                      const char *conn_reason, const char *exports_reason, int64_t og)
{
	if (blocked)
		model_cond_set(cs, RULES_COND_READY, "False", RULES_REASON_DELETION_BLOCKED,
		               blocked, og);
	else if (!connected)
		model_cond_set(cs, RULES_COND_READY, "False", RULES_REASON_AGENT_NOT_CONNECTED, "",
		               og);
	else if (!strcmp(conn_reason, RULES_REASON_AGENT_DEGRADED))
		model_cond_set(cs, RULES_COND_READY, "False", RULES_REASON_AGENT_DEGRADED, "", og);
	else if (strcmp(exports_reason, RULES_REASON_EXPORTS_SERVING))
		model_cond_set(cs, RULES_COND_READY, "False", exports_reason, "", og);
	else
		model_cond_set(cs, RULES_COND_READY, "True", RULES_REASON_AGENT_CONNECTED, "", og);
}

/* One pass in progress. */
struct agent_pass {
	struct ctl *c;
	struct model_pa pa;
	const char *name;
	char addr[300], blocked[1024];
	bool deleting, connected, pending;
	const char *conn_reason, *exports_reason;
	int64_t og;
	char *before;          /* the object as last written (no write when unchanged) */
	int restored_r;        /* the status write after the restore RPC */
	struct err restored_e; /* its message */
};

/* "<subsystem>: <message>" of every unhealthy subsystem, "; "-separated. */
static void degraded_msg(const PillarCsi__Agent__V1__HealthCheckResponse *h, char *m, size_t cap)
{
	size_t o = 0;
	m[0] = 0;
	for (size_t i = 0; i < h->n_subsystems; i++)
		if (!h->subsystems[i]->healthy)
			o += (size_t)snprintf(m + o, o < cap ? cap - o : 0, "%s%s: %s",
			                      o ? "; " : "", h->subsystems[i]->name,
			                      h->subsystems[i]->message);
}

/* crds.md §3.5 steps 4–5: HealthCheck → AgentConnected, GetCapabilities → status. */
static void dial(struct agent_pass *p)
{
	struct model_conds *cs = &p->pa.status.conditions;
	PillarCsi__Agent__V1__HealthCheckResponse *h = NULL;
	struct grpc_status ast = {0};
	char m[1024];
	if (agentclient_health_check(p->c->ac, p->addr, &h, &ast) != GRPC_OK) {
		const char *tls = agentclient_tls_failure(&ast);
		if (tls)
			snprintf(
			    m, sizeof(m),
			    "mTLS handshake to agent at \"%s\" failed; verify certificate chain "
			    "and CA: %s",
			    p->addr, tls);
		else
			snprintf(m, sizeof(m), "HealthCheck to agent at \"%s\" failed: %s", p->addr,
			         ast.msg);
		model_cond_set(cs, RULES_COND_AGENT_CONNECTED, "False",
		               tls ? RULES_REASON_TLS_HANDSHAKE_FAILED
		                   : RULES_REASON_HEALTH_CHECK_FAILED,
		               m, p->og);
		return;
	}
	p->connected = true;
	p->pending = h->export_restore_pending;
	if (h->healthy) {
		p->conn_reason =
		    agentclient_mtls(p->c->ac) ? RULES_REASON_AUTHENTICATED : RULES_REASON_DIALED;
		model_cond_set(cs, RULES_COND_AGENT_CONNECTED, "True", p->conn_reason, "", p->og);
	} else {
		degraded_msg(h, m, sizeof(m));
		p->conn_reason = RULES_REASON_AGENT_DEGRADED;
		model_cond_set(cs, RULES_COND_AGENT_CONNECTED, "True", RULES_REASON_AGENT_DEGRADED,
		               m, p->og);
	}
	protobuf_c_message_free_unpacked(&h->base, NULL);
	PillarCsi__Agent__V1__GetCapabilitiesResponse *cr = NULL;
	if (agentclient_get_capabilities(p->c->ac, p->addr, &cr, &ast) == GRPC_OK) {
		if (apply_caps(&p->pa, cr) < 0)
			log_warnf("PillarAgent %s: out of memory recording capabilities", p->name);
		protobuf_c_message_free_unpacked(&cr->base, NULL);
	}
}

/* Writes the status when it changed since p->before, which then follows. */
static int write_status(struct agent_pass *p, struct err *e)
{
	uint64_t rv = model_meta_rv(&p->pa.meta);
	if (dhchap_status_fill(p->c, &p->pa) < 0)
		return err_set(e, -ENOMEM, "out of memory");
	ctl_own_begin(p->c, p->name);
	int r = reconcile_write_status(p->c, &model_pa_kind, &p->pa, p->before, e);
	bool wrote = r == 0 && model_meta_rv(&p->pa.meta) != rv; /* its event is ours */
	ctl_own_end(p->c, p->name, wrote ? model_meta_rv(&p->pa.meta) : 0);
	if (r == 0) {
		free(p->before);
		p->before = model_encode_text(&model_pa_kind, &p->pa);
	}
	return r;
}

/* VolumeStatesReadable from the last whole-agent pass: False naming each record that could not
 * be read and its repair; True again (once it was set) when every record reads. */
static void readable_cond(struct agent_pass *p)
{
	struct model_conds *cs = &p->pa.status.conditions;
	char text[2048], msg[2600];
	reconcile_batch_unreadable(p->c, text, sizeof(text));
	if (text[0]) {
		snprintf(
		    msg, sizeof(msg),
		    "%s; left out of the export restore, any export of theirs is left as it is. "
		    "Repair each record: restore its file from a backup or rewrite it "
		    "(`pillar-csi get pvst NAME` reads it again; on a cluster `kubectl edit "
		    "pvst NAME`), see docs/troubleshooting.md",
		    text);
		model_cond_set(cs, RULES_COND_VOLUME_STATES_READABLE, "False",
		               RULES_REASON_UNREADABLE_VOLUME_STATE, msg, p->og);
	} else if (model_cond_get(cs, RULES_COND_VOLUME_STATES_READABLE)) {
		model_cond_set(cs, RULES_COND_VOLUME_STATES_READABLE, "True",
		               RULES_REASON_VOLUME_STATES_READABLE, "", p->og);
	}
}

/* The restore RPC returned: ExportsReady and Ready are written at once, before the volumes'
 * outcomes (which may be many writes). */
static void restored(void *arg, int code, const struct grpc_status *rs)
{
	struct agent_pass *p = arg;
	struct model_conds *cs = &p->pa.status.conditions;
	if (code == GRPC_OK) {
		log_info("exports restored", "agent", p->name);
		p->exports_reason = RULES_REASON_EXPORTS_SERVING;
		model_cond_set(cs, RULES_COND_EXPORTS_READY, "True", RULES_REASON_EXPORTS_SERVING,
		               "", p->og);
	} else {
		p->exports_reason = RULES_REASON_EXPORT_RESTORE_FAILED;
		log_warnf("export restore of agent %s failed: %s", p->name, rs->msg);
		model_cond_set(cs, RULES_COND_EXPORTS_READY, "False",
		               RULES_REASON_EXPORT_RESTORE_FAILED, rs->msg, p->og);
	}
	set_ready(cs, p->deleting ? p->blocked : NULL, true, p->conn_reason, p->exports_reason,
	          p->og);
	readable_cond(p);
	p->restored_r = write_status(p, &p->restored_e);
}

/* crds.md §3.5 step 6: the full restore; *requeue_ms shortened after a failure. */
static int restore(struct agent_pass *p, int *requeue_ms, struct err *e)
{
	struct model_conds *cs = &p->pa.status.conditions;
	struct grpc_status rs = {0};
	/* crds.md §3.3: ExportRestorePending while the restore is not yet sent or in flight.
	 * It is recorded before the request goes out, so that the state is visible for the
	 * whole restore; a retry after ExportRestoreFailed keeps the failure visible. */
	if (strcmp(model_cond_reason(cs, RULES_COND_EXPORTS_READY),
	           RULES_REASON_EXPORT_RESTORE_FAILED)) {
		model_cond_set(cs, RULES_COND_EXPORTS_READY, "False",
		               RULES_REASON_EXPORT_RESTORE_PENDING,
		               "the agent reports export_restore_pending; sending the complete "
		               "export list",
		               p->og);
		set_ready(cs, p->deleting ? p->blocked : NULL, true, p->conn_reason,
		          RULES_REASON_EXPORT_RESTORE_PENDING, p->og);
		int r = write_status(p, e);
		if (r < 0)
			return r;
	}
	log_info("restoring the exports of an agent", "agent", p->name, "address", p->addr);
	struct reconcile_sent sent = {restored, p};
	reconcile_agent_restore(p->c, p->name, p->addr, &sent, &rs);
	if (!strcmp(p->exports_reason, RULES_REASON_EXPORT_RESTORE_FAILED))
		*requeue_ms = RECONCILE_RESTORE_RETRY_MS;
	if (p->restored_r < 0)
		*e = p->restored_e;
	return p->restored_r;
}

/* Steps 2–6 on p->pa's status. */
static int agent_status(struct agent_pass *p, int *requeue_ms, struct err *e)
{
	struct model_conds *cs = &p->pa.status.conditions;
	bool have_addr = resolve_address(p->c, &p->pa, p->og, p->addr, sizeof(p->addr));
	if (model_str_set(&p->pa.status.resolved_address, have_addr ? p->addr : NULL) < 0)
		return err_set(e, -ENOMEM, "out of memory");
	if (!have_addr) {
		char nr[64];
		snprintf(nr, sizeof(nr), "%s", model_cond_reason(cs, RULES_COND_NODE_EXISTS));
		model_cond_set(cs, RULES_COND_AGENT_CONNECTED, "False", nr, "no address to dial",
		               p->og);
	} else if (!p->c->ac) {
		model_cond_set(cs, RULES_COND_AGENT_CONNECTED, "False",
		               RULES_REASON_DIALER_NOT_CONFIGURED,
		               "the controller runs without an agent client", p->og);
	} else {
		dial(p);
	}
	if (!p->connected) {
		model_cond_set(cs, RULES_COND_EXPORTS_READY, "Unknown",
		               RULES_REASON_AGENT_NOT_CONNECTED, "AgentConnected is not True",
		               p->og);
		return 0;
	}
	if (!p->pending) {
		p->exports_reason = RULES_REASON_EXPORTS_SERVING;
		model_cond_set(cs, RULES_COND_EXPORTS_READY, "True", RULES_REASON_EXPORTS_SERVING,
		               "", p->og);
		readable_cond(p);
		return 0;
	}
	return restore(p, requeue_ms, e);
}

/* Step 1 and §3.6; 1 when the pass is over. */
static int agent_finalizer(struct agent_pass *p, struct err *e)
{
	int r;
	if (p->deleting) {
		agent_dependents(p->c, p->name, p->blocked, sizeof(p->blocked));
		if (p->blocked[0])
			return 0;
		if ((r = node_label(p->c, &p->pa, false, e)) < 0)
			return r;
		r = reconcile_finalizer(p->c, &model_pa_kind, &p->pa, RULES_FINALIZER_AGENT, false,
		                        e);
		return r == STORE_NOT_FOUND || r == 0 ? 1 : r;
	}
	if ((r = reconcile_finalizer(p->c, &model_pa_kind, &p->pa, RULES_FINALIZER_AGENT, true,
	                             e)) < 0 ||
	    (r = node_label(p->c, &p->pa, true, e)) < 0)
		return r == STORE_NOT_FOUND ? 1 : r;
	return 0;
}

int reconcile_agent(struct ctl *c, const char *name, int *requeue_ms, struct err *e)
{
	struct agent_pass p = {.c = c, .name = name};
	int r;
	p.conn_reason = p.exports_reason = RULES_REASON_AGENT_NOT_CONNECTED;
	*requeue_ms = RECONCILE_INTERVAL_MS;
	r = model_get(c->st, &model_pa_kind, NULL, name, &p.pa, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	p.deleting = p.pa.meta.deletion_timestamp != NULL;
	if ((r = agent_finalizer(&p, e)) != 0) {
		model_clear(&model_pa_kind, &p.pa);
		return r > 0 ? 0 : r;
	}
	p.og = p.pa.meta.generation;
	p.before = model_encode_text(&model_pa_kind, &p.pa);
	r = agent_status(&p, requeue_ms, e);
	struct err ce = {0};
	if (r == 0 && reconcile_agent_counts(c, &p.pa, &ce) < 0)
		log_warnf("PillarAgent %s: counting its volumes: %s", name, ce.msg);
	if (r == 0) {
		set_ready(&p.pa.status.conditions, p.deleting ? p.blocked : NULL, p.connected,
		          p.conn_reason, p.exports_reason, p.og);
		r = write_status(&p, e);
	}
	free(p.before);
	model_clear(&model_pa_kind, &p.pa);
	return r == STORE_CONFLICT ? (*requeue_ms = 0, 0) : r;
}
