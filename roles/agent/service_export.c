/* AgentService: ExportVolume, UnexportVolume, AllowInitiator, DenyInitiator, ReconcileState
 * (two phases), Drain, and the restore gate (agent-api.md §5.7–§5.8, §7, §10; nvmet.md §5, §10). */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/identity.h"
#include "agent/metrics.h"
#include "agent/service_int.h"
#include "base/file.h"
#include "base/log.h"
#include "google/protobuf/timestamp.pb-c.h"

#define PB(x) PillarCsi__Agent__V1__##x

Google__Protobuf__Timestamp *agent_svc_now_ts(void);

struct item {
	size_t idx;
	struct volref v;
	backend *b;
	const PB(FencingToken) * fence;
	bool has_export;
	struct nvmet_export_spec spec;
	const PB(HostAuth) *const *auth; /* the request's host_auth (borrowed) */
	size_t n_auth;
	char nqn[RULES_NQN_MAX + 1];
	char dev[PATH_MAX];
	struct nvmet_prepared prep;
	bool prepared;
	bool failed;
	bool locked;
	struct keylock_hold hold; /* while locked */
	int code;
	char msg[ERR_MSG_MAX];
};

static void fail_item(struct item *it, const struct grpc_status *st)
{
	it->failed = true;
	it->code = st->code;
	snprintf(it->msg, sizeof(it->msg), "%s", st->msg);
}

static int check_export_params(int protocol, const PB(ExportParams) * p, struct item *it,
                               struct grpc_status *st)
{
	unsigned char buf[sizeof(struct in6_addr)];
	if (protocol != PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported protocol type %d",
		                       protocol);
	if (!p || p->params_case != PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP ||
	    !p->nvmeof_tcp)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "export_params.nvmeof_tcp is required");
	const PB(NvmeofTcpExportParams) *t = p->nvmeof_tcp;
	const char *addr = t->bind_address ? t->bind_address : "";
	if (inet_pton(AF_INET, addr, buf) != 1 && inet_pton(AF_INET6, addr, buf) != 1)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "bind_address \"%s\" is not an IP literal", addr);
	if (t->port < 0 || t->port > 65535)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "port %d is out of range",
		                       t->port);
	if (t->in_capsule_data_size != 0 && t->in_capsule_data_size < 1024)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "in_capsule_data_size %d is below 1024",
		                       t->in_capsule_data_size);
	it->spec.bind_address = addr;
	it->spec.port = t->port ? (uint32_t)t->port : 4420;
	it->spec.icds = t->in_capsule_data_size;
	return GRPC_OK;
}

/* Common item setup once the volume is routed: NQN, device path, spec. */
static int setup_item(struct item *it, const char *device_path, bool acl, struct grpc_status *st)
{
	struct err e = {0};
	if (rules_nqn_of_volume(it->v.id, it->nqn, sizeof(it->nqn), &e) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s", e.msg);
	if (device_path && *device_path) {
		if (device_path[0] != '/' || strlen(device_path) >= sizeof(it->dev))
			return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
			                       "device_path \"%s\" is not an absolute path",
			                       device_path);
		snprintf(it->dev, sizeof(it->dev), "%s", device_path);
	} else if (it->b->ops->device_path(it->b, it->v.name, it->dev, sizeof(it->dev)) < 0) {
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "invalid volume id \"%s\"",
		                       it->v.id);
	}
	it->spec.nqn = it->nqn;
	it->spec.device_path = it->dev;
	it->spec.acl = acl;
	it->has_export = true;
	return GRPC_OK;
}

/* Phase 1 for one item (caller holds the volume lock). */
static int prepare_item(agent_service *a, struct item *it, int64_t deadline, struct grpc_status *st)
{
	struct err e = {0};
	int code;
	if ((code = svc_wait_backing(a, it->b, &it->v, it->dev, deadline, st)) != GRPC_OK)
		return code;
	if (it->b->ops->serve && it->b->ops->serve(it->b, it->dev, &e) < 0)
		return svc_state_failed(st, &e);
	const char *uid = it->fence ? it->fence->volume_uid : NULL;
	struct rules_ns_identity derived;
	if (agent_identity_start(a->state_dir, it->v.id, uid, it->nqn, &it->spec.identity, &e) < 0)
		return svc_state_failed(st, &e);
	/* the derived identity from start: no record pins another (start removed another
	 * lifecycle's), so a derived result has none to remove */
	rules_ns_identity_derive(it->nqn, &derived);
	bool unpinned = rules_ns_identity_equal(&derived, &it->spec.identity);
	pthread_mutex_lock(&a->nv_mu);
	int r = nvmet_export_prepare(a->nv, &it->spec, &it->prep, &e);
	pthread_mutex_unlock(&a->nv_mu);
	if (r < 0)
		return grpc_status_from_err(st, &e);
	if (!(unpinned && rules_ns_identity_equal(&derived, &it->prep.identity)) &&
	    agent_identity_settle(a->state_dir, it->v.id, uid, it->nqn, &it->prep.identity, &e) < 0)
		return svc_state_failed(st, &e);
	it->prepared = true;
	return GRPC_OK;
}

static bool addr_bindable(const char *addr)
{
	struct sockaddr_in s4 = {.sin_family = AF_INET};
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
	int fd, r = -1;
	if (inet_pton(AF_INET, addr, &s4.sin_addr) == 1) {
		if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			return false;
		r = bind(fd, (struct sockaddr *)&s4, sizeof(s4));
	} else if (inet_pton(AF_INET6, addr, &s6.sin6_addr) == 1) {
		if ((fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			return false;
		r = bind(fd, (struct sockaddr *)&s6, sizeof(s6));
	} else {
		return false;
	}
	close(fd);
	return r == 0;
}

/* nvmet.md §10.2: poll every 500 ms up to the budget. */
static int wait_addr(agent_service *a, const char *addr, struct grpc_status *st)
{
	int64_t end = time_mono_ms() + a->addr_wait_ms;
	for (;;) {
		if (addr_bindable(addr))
			return GRPC_OK;
		int64_t left = end - time_mono_ms();
		if (left <= 0)
			return grpc_status_set(st, GRPC_UNAVAILABLE,
			                       "bind address %s is not configured on this node",
			                       addr);
		struct timespec ts = {0, (left < 500 ? left : 500) * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* The port a batch linked its last export to: later exports of the same batch with the same
 * bind address and TCP port go to it without selecting it again (nvmet_export_link_known; the
 * batch holds that export's lock until it ends, so its link keeps the port live). */
struct port_hint {
	const char *addr;
	uint32_t port;
	unsigned id;
	const char *nqn; /* the export linked to it */
};

/* Phase 2 for one item: link (caller holds the volume lock).  hint is NULL outside a batch.
 * ExportVolume and a batch hold the item's lock from before their fence check to the end of
 * phase 2, so no revoke can come between the two (every mark is written under its volume's
 * lock): that decision is the re-check and the mark is not read again. */
static int link_item(agent_service *a, struct item *it, struct port_hint *hint,
                     struct grpc_status *st)
{
	struct err e = {0};
	bool known = hint && hint->addr && hint->port == it->spec.port &&
	             strcmp(hint->addr, it->spec.bind_address) == 0;
	unsigned id = 0;
	pthread_mutex_lock(&a->nv_mu);
	int r = known ? nvmet_export_link_known(a->nv, &it->spec, it->prep.relink, hint->id,
	                                        hint->nqn, &e)
	              : nvmet_export_link(a->nv, &it->spec, it->prep.relink, &id, &e);
	pthread_mutex_unlock(&a->nv_mu);
	if (r == 0 && hint && !known)
		*hint = (struct port_hint){it->spec.bind_address, it->spec.port, id, it->nqn};
	if (r < 0)
		return grpc_status_from_err(st, &e);
	return GRPC_OK;
}

static PB(ExportInfo) * export_info(const struct item *it)
{
	PB(ExportInfo) *info = malloc(sizeof(*info));
	if (!info)
		return NULL;
	pillar_csi__agent__v1__export_info__init(info);
	info->target_id = svc_strdup(it->nqn);
	info->address = svc_strdup(it->spec.bind_address);
	info->port = (int32_t)it->spec.port;
	info->volume_ref = svc_strdup("1");
	if (!info->target_id || !info->address || !info->volume_ref) {
		pillar_csi__agent__v1__export_info__free_unpacked(info, NULL);
		return NULL;
	}
	return info;
}

/* ---- ExportVolume -------------------------------------------------------------------------------- */

int agent_export_volume(agent_service *a, const PB(ExportVolumeRequest) * req,
                        PB(ExportVolumeResponse) * resp, struct grpc_status *st)
{
	struct item it;
	int code;
	memset(&it, 0, sizeof(it));
	if (svc_enter(a, st))
		return st->code;
	if ((code = svc_gate(a, "ExportVolume", st)) != GRPC_OK ||
	    (code = svc_parse_volume_id(req->volume_id, &it.v, st)) != GRPC_OK ||
	    (code = check_export_params((int)req->protocol_type, req->export_params, &it, st)) !=
	        GRPC_OK)
		goto out;
	if (!(it.b = svc_find_pool(a, it.v.pool))) {
		code = grpc_status_set(st, GRPC_FAILED_PRECONDITION,
		                       "pool \"%s\" is not configured on this agent", it.v.pool);
		goto out;
	}
	if ((code = setup_item(&it, req->device_path, req->acl_enabled, st)) != GRPC_OK)
		goto out;
	it.fence = req->fence;
	struct keylock_hold hold;
	keylock_wait(&a->locks, &hold, it.v.id);
	if ((code = svc_fence(a, it.v.id, it.fence, FENCE_GRANT, st)) == GRPC_OK &&
	    (code = prepare_item(a, &it, time_mono_ms() + a->device_wait_ms, st)) == GRPC_OK &&
	    (code = wait_addr(a, it.spec.bind_address, st)) == GRPC_OK &&
	    (code = link_item(a, &it, NULL, st)) == GRPC_OK) {
		resp->export_info = export_info(&it);
		code = resp->export_info ? svc_ok(st) : grpc_status_oom(st);
	}
	keylock_release(&a->locks, &hold);
out:
	svc_leave(a);
	return code;
}

/* ---- UnexportVolume, AllowInitiator, DenyInitiator ------------------------------------------------ */

int agent_unexport_volume(agent_service *a, const PB(UnexportVolumeRequest) * req,
                          PB(UnexportVolumeResponse) * resp, struct grpc_status *st)
{
	struct volref v;
	struct err e = {0};
	char nqn[RULES_NQN_MAX + 1];
	int code;
	(void)resp;
	if (svc_enter(a, st))
		return st->code;
	if ((code = svc_parse_volume_id(req->volume_id, &v, st)) != GRPC_OK)
		goto out;
	if (req->protocol_type != PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP) {
		code = grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported protocol type %d",
		                       (int)req->protocol_type);
		goto out;
	}
	if (rules_nqn_of_volume(v.id, nqn, sizeof(nqn), &e) < 0) {
		code = grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s", e.msg);
		goto out;
	}
	struct keylock_hold hold;
	keylock_wait(&a->locks, &hold, v.id);
	if ((code = svc_fence(a, v.id, req->fence, FENCE_REVOKE, st)) == GRPC_OK) {
		pthread_mutex_lock(&a->nv_mu);
		int r = nvmet_export_remove(a->nv, nqn, &e);
		if (r == 0)
			svc_auth_forget(a, v.id, NULL);
		pthread_mutex_unlock(&a->nv_mu);
		if (r == 0)
			r = agent_identity_forget(a->state_dir, v.id, &e);
		code = r < 0 ? grpc_status_from_err(st, &e) : svc_ok(st);
	}
	keylock_release(&a->locks, &hold);
out:
	svc_leave(a);
	return code;
}

/* AllowInitiator's auth names the initiator it comes with. */
static int check_allow_auth(const PB(HostAuth) * h, const char *initiator, struct grpc_status *st)
{
	int code = h ? svc_auth_check(h, "auth", st) : GRPC_OK;
	if (code == GRPC_OK && h && strcmp(h->host_nqn, initiator) != 0)
		code = grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "auth.host_nqn \"%s\" is not initiator_id \"%s\"",
		                       h->host_nqn, initiator);
	return code;
}

static int initiator_common(agent_service *a, const char *rpc, const char *volume_id, int protocol,
                            const char *initiator, const PB(FencingToken) * fence,
                            const PB(HostAuth) * auth, bool allow, struct grpc_status *st)
{
	struct volref v;
	struct err e = {0};
	char nqn[RULES_NQN_MAX + 1];
	int code;
	if (svc_enter(a, st))
		return st->code;
	if ((allow && (code = svc_gate(a, rpc, st)) != GRPC_OK) ||
	    (code = svc_parse_volume_id(volume_id, &v, st)) != GRPC_OK)
		goto out;
	if (protocol != PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP) {
		code = grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported protocol type %d",
		                       protocol);
		goto out;
	}
	if (rules_hostnqn_check(initiator ? initiator : "", &e) < 0 ||
	    rules_nqn_of_volume(v.id, nqn, sizeof(nqn), &e) < 0) {
		code = grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s", e.msg);
		goto out;
	}
	if ((code = check_allow_auth(allow ? auth : NULL, initiator, st)) != GRPC_OK)
		goto out;
	struct keylock_hold hold;
	keylock_wait(&a->locks, &hold, v.id);
	code = svc_fence(a, v.id, fence, allow ? FENCE_GRANT : FENCE_REVOKE, st);
	/* the key before the admission: the host is never admitted without it */
	if (code == GRPC_OK && allow && auth)
		code = svc_auth_write(a, v.id, auth, st);
	if (code == GRPC_OK) {
		pthread_mutex_lock(&a->nv_mu);
		int r = allow ? nvmet_host_allow(a->nv, nqn, initiator, &e)
		              : nvmet_host_deny(a->nv, nqn, initiator, &e);
		if (!allow && r == 0)
			svc_auth_forget(a, v.id, initiator);
		pthread_mutex_unlock(&a->nv_mu);
		if (allow && r == -ENOENT)
			code = grpc_status_set(st, GRPC_NOT_FOUND, "volume \"%s\" is not exported",
			                       v.id);
		else
			code = r < 0 ? grpc_status_from_err(st, &e) : svc_ok(st);
	}
	keylock_release(&a->locks, &hold);
out:
	svc_leave(a);
	return code;
}

int agent_allow_initiator(agent_service *a, const PB(AllowInitiatorRequest) * req,
                          PB(AllowInitiatorResponse) * resp, struct grpc_status *st)
{
	(void)resp;
	return initiator_common(a, "AllowInitiator", req->volume_id, (int)req->protocol_type,
	                        req->initiator_id, req->fence, req->auth, true, st);
}

int agent_deny_initiator(agent_service *a, const PB(DenyInitiatorRequest) * req,
                         PB(DenyInitiatorResponse) * resp, struct grpc_status *st)
{
	(void)resp;
	return initiator_common(a, "DenyInitiator", req->volume_id, (int)req->protocol_type,
	                        req->initiator_id, req->fence, NULL, false, st);
}

/* ---- ReconcileState ------------------------------------------------------------------------------- */

/* Each host_auth is well-formed, names an allowed initiator, and no host twice. */
static int check_host_auth(const PB(ExportDesiredState) * x, struct grpc_status *st)
{
	char field[48];
	if (x->n_host_auth > 0 && !x->acl_enabled)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "exports[0].host_auth needs acl_enabled (authentication is "
		                       "per allowed host)");
	for (size_t i = 0; i < x->n_host_auth; i++) {
		const PB(HostAuth) *h = x->host_auth[i];
		bool allowed = false;
		int code;
		snprintf(field, sizeof(field), "exports[0].host_auth[%zu]", i);
		if ((code = svc_auth_check(h, field, st)) != GRPC_OK)
			return code;
		for (size_t j = 0; j < x->n_allowed_initiators && !allowed; j++)
			allowed = strcmp(h->host_nqn, x->allowed_initiators[j]) == 0;
		if (!allowed)
			return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
			                       "%s.host_nqn \"%s\" is not in allowed_initiators",
			                       field, h->host_nqn);
		for (size_t j = 0; j < i; j++)
			if (strcmp(h->host_nqn, x->host_auth[j]->host_nqn) == 0)
				return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
				                       "%s.host_nqn \"%s\" appears more than once",
				                       field, h->host_nqn);
	}
	return GRPC_OK;
}

/* Phase 1, before the item's subsystem admits anyone: its hosts' keys. */
static int write_item_auth(agent_service *a, const struct item *it, struct grpc_status *st)
{
	int code = GRPC_OK;
	for (size_t i = 0; i < it->n_auth && code == GRPC_OK; i++)
		code = svc_auth_write(a, it->v.id, it->auth[i], st);
	return code;
}

/* Before phase 1 writes any host entry: what every exported item asks of its hosts (a complete
 * request replaces all), so each entry gets the strongest settings whatever the order. */
static void note_items_auth(agent_service *a, const struct item *items, size_t n, bool complete)
{
	pthread_mutex_lock(&a->nv_mu);
	if (complete)
		svc_auth_forget(a, NULL, NULL);
	for (size_t i = 0; i < n; i++) {
		if (items[i].failed || !items[i].has_export)
			continue;
		svc_auth_forget(a, items[i].v.id, NULL);
		for (size_t j = 0; j < items[i].n_auth; j++)
			if (svc_auth_note(a, items[i].v.id, items[i].auth[j]) < 0)
				break; /* out of memory: svc_auth_write fails that item */
	}
	pthread_mutex_unlock(&a->nv_mu);
}

static int check_item(agent_service *a, const PB(VolumeDesiredState) * d, struct item *it,
                      struct grpc_status *st)
{
	struct backend_create_opts o;
	int code;
	it->fence = d->fence;
	if ((code = svc_parse_volume_id(d->volume_id, &it->v, st)) != GRPC_OK ||
	    (code = svc_route(a, &it->v, (int)d->backend_type, &it->b, st)) != GRPC_OK ||
	    (code = svc_layout(a, it->b, &it->v, d->backend_params, &o, st)) != GRPC_OK)
		return code;
	if (d->n_exports == 0)
		return GRPC_OK; /* fence-checked, otherwise left alone */
	if (d->n_exports > 1)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "volume \"%s\" has %zu exports; at most one is supported",
		                       it->v.id, d->n_exports);
	const PB(ExportDesiredState) *x = d->exports[0];
	if ((code = check_export_params((int)x->protocol_type, x->export_params, it, st)) !=
	        GRPC_OK ||
	    (code = setup_item(it, d->device_path, x->acl_enabled, st)) != GRPC_OK)
		return code;
	for (size_t i = 0; x->acl_enabled && i < x->n_allowed_initiators; i++) {
		struct err e = {0};
		if (rules_hostnqn_check(x->allowed_initiators[i], &e) < 0)
			return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s", e.msg);
	}
	if ((code = check_host_auth(x, st)) != GRPC_OK)
		return code;
	it->auth = (const PB(HostAuth) *const *)x->host_auth;
	it->n_auth = x->n_host_auth;
	it->spec.hosts = x->acl_enabled ? (const char *const *)x->allowed_initiators : NULL;
	it->spec.n_hosts = x->acl_enabled ? x->n_allowed_initiators : 0;
	it->spec.exact_hosts = true;
	return GRPC_OK;
}

static int by_id(const void *x, const void *y)
{
	return strcmp((*(struct item *const *)x)->v.id, (*(struct item *const *)y)->v.id);
}

static int by_nqn(const void *x, const void *y)
{
	return strcmp((*(struct item *const *)x)->nqn, (*(struct item *const *)y)->nqn);
}

/* Link order: exports that request an in-capsule size first, then NQN order. */
static int by_link_order(const void *x, const void *y)
{
	const struct item *a = *(struct item *const *)x, *b = *(struct item *const *)y;
	if ((a->spec.icds > 0) != (b->spec.icds > 0))
		return a->spec.icds > 0 ? -1 : 1;
	return strcmp(a->nqn, b->nqn);
}

/* The port directories, listed once for the batch's prepares once it holds their locks
 * (nvmet_export_spec.ports); a listing that failed leaves each prepare to list them itself. */
static void list_ports(agent_service *a, struct item *const *ord, size_t k, char ***ports,
                       size_t *n)
{
	struct err e = {0};
	pthread_mutex_lock(&a->nv_mu);
	int r = nvmet_port_names(a->nv, ports, n, &e);
	pthread_mutex_unlock(&a->nv_mu);
	for (size_t i = 0; r == 0 && i < k; i++) {
		ord[i]->spec.ports_listed = true;
		ord[i]->spec.ports = *ports;
		ord[i]->spec.n_ports = *n;
	}
}

/* 0, or -ENOMEM before any item is touched. */
static int run_batch(agent_service *a, struct item *items, size_t n)
{
	char **ports = NULL;
	size_t n_ports = 0;
	struct grpc_status st = {0};
	struct item **ord = calloc(n ? n : 1, sizeof(*ord));
	size_t k = 0;
	if (!ord)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!items[i].failed)
			ord[k++] = &items[i];
	/* Volume locks in sorted order (IDs are unique within a request). */
	qsort(ord, k, sizeof(*ord), by_id);
	for (size_t i = 0; i < k; i++) {
		keylock_wait(&a->locks, &ord[i]->hold, ord[i]->v.id);
		ord[i]->locked = true;
	}
	list_ports(a, ord, k, &ports, &n_ports);
	/* Every item is fence-checked (its mark written) before anything changes for it. */
	for (size_t i = 0; i < n; i++)
		if (!items[i].failed &&
		    svc_fence(a, items[i].v.id, items[i].fence, FENCE_GRANT, &st))
			fail_item(&items[i], &st);
	/* Phase 1: prepare every export (NQN order); the device budget is shared by the batch. */
	qsort(ord, k, sizeof(*ord), by_nqn);
	int64_t deadline = time_mono_ms() + a->device_wait_ms;
	for (size_t i = 0; i < k; i++)
		if (!ord[i]->failed && ord[i]->has_export &&
		    (write_item_auth(a, ord[i], &st) || prepare_item(a, ord[i], deadline, &st)))
			fail_item(ord[i], &st);
	if (a->between_phases)
		a->between_phases(a->hook_arg);
	/* Phase 2: address presence once per distinct address, then link in link order. */
	for (size_t i = 0; i < k; i++) {
		if (!ord[i]->prepared || ord[i]->failed)
			continue;
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = ord[j]->prepared &&
			       strcmp(ord[j]->spec.bind_address, ord[i]->spec.bind_address) == 0;
		if (seen)
			continue;
		if (wait_addr(a, ord[i]->spec.bind_address, &st) != GRPC_OK)
			for (size_t j = i; j < k; j++)
				if (ord[j]->prepared && !ord[j]->failed &&
				    strcmp(ord[j]->spec.bind_address, ord[i]->spec.bind_address) ==
				        0)
					fail_item(ord[j], &st);
	}
	qsort(ord, k, sizeof(*ord), by_link_order);
	struct port_hint hint = {0};
	for (size_t i = 0; i < k; i++)
		if (ord[i]->prepared && !ord[i]->failed &&
		    link_item(a, ord[i], &hint, &st) != GRPC_OK)
			fail_item(ord[i], &st);
	for (size_t i = 0; i < k; i++)
		if (ord[i]->locked)
			keylock_release(&a->locks, &ord[i]->hold);
	nvmet_names_free(ports, n_ports);
	free(ord);
	return 0;
}

static int by_volume_id(const void *x, const void *y)
{
	const char *a = *(const char *const *)x, *b = *(const char *const *)y;
	return strcmp(a, b);
}

/* INVALID_ARGUMENT when a volume ID appears twice (sorted, not pairwise: 10,000 items). */
static int check_unique(const PB(ReconcileStateRequest) * req, struct grpc_status *st)
{
	const char **ids = calloc(req->n_volumes ? req->n_volumes : 1, sizeof(*ids));
	size_t k = 0;
	int code = GRPC_OK;
	if (!ids)
		return grpc_status_oom(st);
	for (size_t i = 0; i < req->n_volumes; i++)
		if (req->volumes[i]->volume_id)
			ids[k++] = req->volumes[i]->volume_id;
	qsort(ids, k, sizeof(*ids), by_volume_id);
	for (size_t i = 1; i < k && code == GRPC_OK; i++)
		if (strcmp(ids[i - 1], ids[i]) == 0)
			code = grpc_status_set(
			    st, GRPC_INVALID_ARGUMENT,
			    "volume \"%s\" appears more than once in the request", ids[i]);
	free(ids);
	return code;
}

/* One line per batch: operators (and the scale scenario) read the restore's own duration. */
static void log_batch(const struct item *items, const PB(ReconcileStateRequest) * req, uint64_t us)
{
	char n[24], failed[24], secs[32];
	size_t k = 0;
	for (size_t i = 0; i < req->n_volumes; i++)
		k += items[i].failed;
	snprintf(n, sizeof(n), "%zu", req->n_volumes);
	snprintf(failed, sizeof(failed), "%zu", k);
	snprintf(secs, sizeof(secs), "%.3f", (double)us / 1e6);
	agent_metrics_reconcile(req->complete, (double)us / 1e6);
	log_info("ReconcileState done", "volumes", n, "failed", failed, "complete",
	         req->complete ? "true" : "false", "seconds", secs);
}

int agent_reconcile_state(agent_service *a, const PB(ReconcileStateRequest) * req,
                          PB(ReconcileStateResponse) * resp, struct grpc_status *st)
{
	struct grpc_status ist;
	int code;
	if (svc_enter(a, st))
		return st->code;
	if (!req->complete && (code = svc_gate(a, "ReconcileState", st)) != GRPC_OK)
		goto out;
	if ((code = check_unique(req, st)) != GRPC_OK)
		goto out;
	struct item *items = calloc(req->n_volumes ? req->n_volumes : 1, sizeof(*items));
	if (!items) {
		code = grpc_status_oom(st);
		goto out;
	}
	pthread_mutex_lock(&a->reconcile_mu);
	uint64_t t0 = time_mono_us();
	for (size_t i = 0; i < req->n_volumes; i++) {
		items[i].idx = i;
		memset(&ist, 0, sizeof(ist));
		if (check_item(a, req->volumes[i], &items[i], &ist) != GRPC_OK)
			fail_item(&items[i], &ist);
	}
	note_items_auth(a, items, req->n_volumes, req->complete);
	int oom = run_batch(a, items, req->n_volumes);
	pthread_mutex_unlock(&a->reconcile_mu);
	log_batch(items, req, time_mono_us() - t0);
	if (oom < 0) {
		free(items);
		code = grpc_status_oom(st);
		goto out;
	}

	resp->results = calloc(req->n_volumes + 1, sizeof(*resp->results));
	for (size_t i = 0; resp->results && !oom && i < req->n_volumes; i++) {
		PB(VolumeReconcileResult) *r = malloc(sizeof(*r));
		char msg[ERR_MSG_MAX + 32];
		if (!r) {
			oom = -ENOMEM;
			break;
		}
		pillar_csi__agent__v1__volume_reconcile_result__init(r);
		r->volume_id = svc_strdup(req->volumes[i]->volume_id);
		r->success = !items[i].failed;
		if (items[i].failed) {
			snprintf(msg, sizeof(msg), "%s: %s", grpc_code_name(items[i].code),
			         items[i].msg);
			r->error_message = svc_strdup(msg);
			oom |= r->error_message ? 0 : -ENOMEM;
		}
		resp->results[resp->n_results++] = r;
		oom |= r->volume_id ? 0 : -ENOMEM;
	}
	free(items);
	resp->reconciled_at = agent_svc_now_ts();
	if (req->complete) {
		pthread_mutex_lock(&a->mu);
		a->gate_open =
		    true; /* even when items failed: the per-volume resync retries them */
		pthread_mutex_unlock(&a->mu);
	}
	/* The batch ran either way; a response that could not be built is RESOURCE_EXHAUSTED. */
	code = !oom && resp->results && resp->reconciled_at ? svc_ok(st) : grpc_status_oom(st);
out:
	svc_leave(a);
	return code;
}

/* ---- Drain ---------------------------------------------------------------------------------------- */

int agent_drain(agent_service *a, const PB(DrainRequest) * req, PB(DrainResponse) * resp,
                struct grpc_status *st)
{
	struct timespec until;
	char path[PATH_MAX], text[96], when[40];
	struct err e = {0};
	time_t now = time(NULL);
	struct tm tm;
	(void)req;
	pthread_mutex_lock(&a->mu);
	if (a->draining) {
		pthread_mutex_unlock(&a->mu);
		resp->was_already_drained = true;
		return svc_ok(st);
	}
	a->draining = true;
	until = time_after(CLOCK_REALTIME, a->drain_wait_ms);
	while (a->inflight > 0 && pthread_cond_timedwait(&a->cv, &a->mu, &until) == 0) {
	}
	pthread_mutex_unlock(&a->mu);
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(text, sizeof(text), "{\"drainedAt\":\"%s\"}\n", when);
	snprintf(path, sizeof(path), "%s/.drained", a->state_dir);
	if (file_write_atomic(path, text, strlen(text), 0600, &e) < 0)
		return svc_state_failed(st, &e);
	resp->was_already_drained = false;
	return svc_ok(st);
}

int agent_unimplemented(const char *rpc, struct grpc_status *st)
{
	return grpc_status_set(st, GRPC_UNIMPLEMENTED, "%s is not implemented by this agent", rpc);
}
