/* AgentService: construction, shared helpers, read-only RPCs and backend RPCs
 * (agent-api.md §5.1–§5.6, §9). */
#include "agent/service_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/identity.h"
#include "agent/marklog.h"
#include "base/exec.h"
#include "base/file.h"
#include "base/time.h"
#include "rules/volid.h"

#define PB(x) PillarCsi__Agent__V1__##x

int svc_ok(struct grpc_status *st)
{
	if (st) {
		st->code = GRPC_OK;
		st->msg[0] = '\0';
	}
	return GRPC_OK;
}

char *svc_strdup(const char *s)
{
	return strdup(s ? s : "");
}

static char *opt_dup(const char *s, const char *def)
{
	return strdup(s && *s ? s : def);
}

/* The `file` pools' directories for the marks' journal (marklog.h): a new image's name is
 * durable by the checkpoint that syncs them, and made again from its mark after a power cut. */
static int marks_images(agent_service *a, struct err *e)
{
	const char **dirs = calloc(a->n_backends ? a->n_backends : 1, sizeof(*dirs));
	size_t n = 0;
	if (!dirs)
		return err_set(e, -ENOMEM, "agent: out of memory");
	for (size_t i = 0; i < a->n_backends; i++)
		if (a->backends[i]->cfg.kind == BACKEND_FILE)
			dirs[n++] = a->backends[i]->cfg.directory;
	int r = agent_marklog_images(dirs, n, svc_restore_image, a, e);
	free(dirs);
	return r;
}

/* A mark's temporary file: the journal's slots (FILE_SPARE.<slot>, marklog.c) and
 * file_temp_create's names. */
static bool mark_temp_name(const char *name)
{
	return file_temp_name(name) || file_spare_name(name);
}

int agent_service_new(const struct agent_config *cfg, const struct agent_service_opts *o,
                      agent_service **out, struct err *e)
{
	char dir[PATH_MAX];
	int r;
	agent_service *a = calloc(1, sizeof(*a));
	*out = NULL;
	if (!a)
		return err_set(e, -ENOMEM, "agent: out of memory");
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	keylock_init(&a->locks);
	pthread_mutex_init(&a->nv_mu, NULL);
	pthread_mutex_init(&a->reconcile_mu, NULL);
	pthread_mutex_init(&a->health_mu, NULL);
	a->health_cache_ms = o->health_cache_ms > 0 ? o->health_cache_ms : AGENT_HEALTH_CACHE_MS;
	a->state_dir = opt_dup(o->state_dir, "/var/lib/pillar-csi/agent");
	a->version = opt_dup(o->version, "unknown");
	a->host_root = opt_dup(o->host_root, "");
	a->device_wait_ms = o->device_wait_ms > 0 ? o->device_wait_ms : 30000;
	a->create_wait_ms = o->create_wait_ms > 0 ? o->create_wait_ms : 10000;
	a->addr_wait_ms = o->addr_wait_ms > 0 ? o->addr_wait_ms : 30000;
	a->busy_retry_ms = o->busy_retry_ms > 0 ? o->busy_retry_ms : 1000;
	a->drain_wait_ms = o->drain_wait_ms > 0 ? o->drain_wait_ms : 30000;
	a->between_phases = o->between_phases;
	a->hook_arg = o->hook_arg;
	if (!a->state_dir || !a->version || !a->host_root) {
		r = err_set(e, -ENOMEM, "agent: out of memory");
		goto fail;
	}
	a->backends = calloc(cfg->n ? cfg->n : 1, sizeof(*a->backends));
	if (!a->backends) {
		r = err_set(e, -ENOMEM, "agent: out of memory");
		goto fail;
	}
	for (; a->n_backends < cfg->n; a->n_backends++) {
		if ((r = backend_new(&cfg->backends[a->n_backends], &a->backends[a->n_backends],
		                     e)) < 0)
			goto fail;
		if (o->dev_root)
			backend_set_dev_root(a->backends[a->n_backends], o->dev_root);
		if (o->copy_wait_ms)
			a->backends[a->n_backends]->copy_wait_ms =
			    o->copy_wait_ms < 0 ? 0 : o->copy_wait_ms;
	}
	if ((r = nvmet_open(o->configfs_root ? o->configfs_root : "/sys/kernel/config", &a->nv,
	                    e)) < 0)
		goto fail;
	/* the temporary files of writes a killed agent never finished, before any write runs */
	file_remove_temps(a->state_dir, NULL);
	snprintf(dir, sizeof(dir), "%s/generations", a->state_dir);
	if ((r = file_mkdir_p(dir, 0750, e)) < 0)
		goto fail;
	file_remove_temps(dir, mark_temp_name);
	snprintf(dir, sizeof(dir), "%s/nvmet-identity", a->state_dir);
	if ((r = file_mkdir_p(dir, 0750, e)) < 0)
		goto fail;
	file_remove_temps(dir, NULL);
	/* the marks as the acknowledged calls left them, before anything reads one, and the
	 * images they record */
	if ((r = marks_images(a, e)) < 0 || (r = agent_marklog_open(a->state_dir, e)) < 0)
		goto fail;
	svc_complete_images(a);
	*out = a;
	return 0;
fail:
	agent_service_free(a);
	return r;
}

void agent_service_free(agent_service *a)
{
	if (!a)
		return;
	agent_marklog_close(true);
	agent_marklog_images(NULL, 0, NULL, NULL, NULL);
	for (size_t i = 0; i < a->n_backends; i++)
		backend_free(a->backends[i]);
	free(a->backends);
	nvmet_free(a->nv);
	keylock_fini(&a->locks);
	free(a->state_dir);
	free(a->version);
	free(a->host_root);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	svc_auth_uses_free(a);
	pthread_mutex_destroy(&a->nv_mu);
	pthread_mutex_destroy(&a->reconcile_mu);
	pthread_mutex_destroy(&a->health_mu);
	free(a);
}

bool agent_service_restore_pending(agent_service *a)
{
	pthread_mutex_lock(&a->mu);
	bool pending = !a->gate_open;
	pthread_mutex_unlock(&a->mu);
	return pending;
}

struct nvmet *agent_service_nvmet(agent_service *a)
{
	return a->nv;
}

bool agent_service_draining(agent_service *a)
{
	pthread_mutex_lock(&a->mu);
	bool d = a->draining;
	pthread_mutex_unlock(&a->mu);
	return d;
}

/* ---- doors and locks ------------------------------------------------------------------------ */

int svc_enter(agent_service *a, struct grpc_status *st)
{
	pthread_mutex_lock(&a->mu);
	if (a->draining) {
		pthread_mutex_unlock(&a->mu);
		return grpc_status_set(st, GRPC_UNAVAILABLE, "agent is draining");
	}
	a->inflight++;
	pthread_mutex_unlock(&a->mu);
	return GRPC_OK;
}

void svc_leave(agent_service *a)
{
	pthread_mutex_lock(&a->mu);
	a->inflight--;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

int svc_gate(agent_service *a, const char *rpc, struct grpc_status *st)
{
	if (!agent_service_restore_pending(a))
		return GRPC_OK;
	return grpc_status_set(
	    st, GRPC_UNAVAILABLE,
	    "export restore pending: %s: awaiting a complete ReconcileState from "
	    "the controller before exporting",
	    rpc);
}

/* ---- validation and routing ----------------------------------------------------------------- */

int svc_parse_volume_id(const char *id, struct volref *v, struct grpc_status *st)
{
	if (!id || strlen(id) >= sizeof(v->id) ||
	    rules_agent_volid_parse(id, v->pool, sizeof(v->pool), v->name, sizeof(v->name)) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "invalid volume id \"%s\"",
		                       id ? id : "");
	snprintf(v->id, sizeof(v->id), "%s", id);
	return GRPC_OK;
}

backend *svc_find_pool(agent_service *a, const char *pool)
{
	for (size_t i = 0; i < a->n_backends; i++)
		if (strcmp(a->backends[i]->cfg.pool, pool) == 0)
			return a->backends[i];
	return NULL;
}

void svc_backend_kinds(const agent_service *a, bool *zfs, bool *lvm, bool *file)
{
	*zfs = *lvm = *file = false;
	for (size_t i = 0; i < a->n_backends; i++) {
		*zfs |= a->backends[i]->cfg.kind == BACKEND_ZFS;
		*lvm |= a->backends[i]->cfg.kind == BACKEND_LVM;
		*file |= a->backends[i]->cfg.kind == BACKEND_FILE;
	}
}

static bool type_supported(int t)
{
	return t == BACKEND_ZFS || t == BACKEND_LVM || t == BACKEND_FILE;
}

int svc_route(agent_service *a, const struct volref *v, int backend_type, backend **out,
              struct grpc_status *st)
{
	if (!type_supported(backend_type))
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported backend type %d",
		                       backend_type);
	backend *b = svc_find_pool(a, v->pool);
	if (!b)
		return grpc_status_set(st, GRPC_FAILED_PRECONDITION,
		                       "pool \"%s\" is not configured on this agent", v->pool);
	if ((int)b->cfg.kind != backend_type)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "pool \"%s\" is a %s backend",
		                       v->pool, backend_kind_name(b->cfg.kind));
	*out = b;
	return GRPC_OK;
}

static int mismatch(struct grpc_status *st, const char *pool, const char *field, const char *a,
                    const char *b)
{
	return grpc_status_set(
	    st, GRPC_FAILED_PRECONDITION,
	    "layout mismatch for pool \"%s\": request %s \"%s\", agent config \"%s\"", pool, field,
	    a ? a : "", b ? b : "");
}

static const char *nz(const char *s)
{
	return s ? s : "";
}

int svc_layout(agent_service *a, backend *b, const struct volref *v, const PB(BackendParams) * p,
               struct backend_create_opts *o, struct grpc_status *st)
{
	(void)a;
	memset(o, 0, sizeof(*o));
	o->thin = b->cfg.kind == BACKEND_LVM && b->cfg.thin_default;
	o->preallocate = b->cfg.preallocate;
	if (!p || p->params_case == PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS__NOT_SET)
		return GRPC_OK; /* nothing to compare: the agent config decides */
	if (p->params_case == PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_ZFS) {
		const PB(ZfsVolumeParams) *z = p->zfs;
		if (b->cfg.kind != BACKEND_ZFS)
			return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
			                       "pool \"%s\" is a %s backend", v->pool,
			                       backend_kind_name(b->cfg.kind));
		if (*nz(z->pool) && strcmp(z->pool, v->pool) != 0)
			return mismatch(st, v->pool, "pool", z->pool, v->pool);
		if (strcmp(nz(z->parent_dataset), nz(b->cfg.parent_dataset)) != 0)
			return mismatch(st, v->pool, "parent_dataset", z->parent_dataset,
			                b->cfg.parent_dataset);
		for (size_t i = 0; i < z->n_properties; i++) {
			const char *k = nz(z->properties[i]->key);
			if (!*k || strchr(k, '='))
				return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
				                       "invalid ZFS property name \"%s\"", k);
		}
		return GRPC_OK;
	}
	if (p->params_case == PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_LVM) {
		const PB(LvmVolumeParams) *l = p->lvm;
		if (b->cfg.kind != BACKEND_LVM)
			return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
			                       "pool \"%s\" is a %s backend", v->pool,
			                       backend_kind_name(b->cfg.kind));
		if (l->n_extra_flags)
			return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
			                       "lvm extra_flags are not supported");
		if (*nz(l->volume_group) && strcmp(l->volume_group, v->pool) != 0)
			return mismatch(st, v->pool, "volume_group", l->volume_group, v->pool);
		if (*nz(l->thin_pool) && strcmp(l->thin_pool, nz(b->cfg.thin_pool)) != 0)
			return mismatch(st, v->pool, "thin_pool", l->thin_pool, b->cfg.thin_pool);
		const char *m = nz(l->provision_mode);
		if (*m && strcmp(m, "linear") != 0 && strcmp(m, "thin") != 0)
			return grpc_status_set(
			    st, GRPC_INVALID_ARGUMENT,
			    "provision_mode \"%s\": must be \"linear\" or \"thin\"", m);
		if (*m)
			o->thin = strcmp(m, "thin") == 0;
		if (o->thin && !*nz(b->cfg.thin_pool))
			return grpc_status_set(
			    st, GRPC_INVALID_ARGUMENT,
			    "provision_mode thin requires a thin pool, and pool \"%s\" has "
			    "none configured",
			    v->pool);
		return GRPC_OK;
	}
	if (p->params_case == PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE) {
		const PB(FileVolumeParams) *f = p->file;
		if (b->cfg.kind != BACKEND_FILE)
			return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
			                       "pool \"%s\" is a %s backend", v->pool,
			                       backend_kind_name(b->cfg.kind));
		if (*nz(f->pool) && strcmp(f->pool, v->pool) != 0)
			return mismatch(st, v->pool, "pool", f->pool, v->pool);
		o->preallocate = b->cfg.preallocate || f->preallocate;
		return GRPC_OK;
	}
	return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported backend params");
}

int svc_state_failed(struct grpc_status *st, const struct err *e)
{
	int code = grpc_code_from_errno(e->code);
	return grpc_status_set(st, code == GRPC_RESOURCE_EXHAUSTED ? code : GRPC_INTERNAL, "%s",
	                       e->msg[0] ? e->msg : "internal error");
}

static int fence_status(int r, const struct err *e, struct grpc_status *st)
{
	if (r == 0)
		return GRPC_OK;
	if (r == -EBADMSG)
		return svc_state_failed(st, e);
	return grpc_status_from_err(st, e);
}

int svc_fence(agent_service *a, const char *volume_id, const PB(FencingToken) * t,
              enum fence_class cls, struct grpc_status *st)
{
	struct err e = {0};
	int r = agent_fence_check(a->state_dir, volume_id, t ? t->volume_uid : NULL,
	                          t ? t->generation : 0, cls, &e);
	return fence_status(r, &e, st);
}

int svc_fence_create(agent_service *a, const char *volume_id, const PB(FencingToken) * t,
                     int64_t image_bytes, bool *recorded, bool *written, struct grpc_status *st)
{
	struct err e = {0};
	int r = agent_fence_check_create(a->state_dir, volume_id, t ? t->volume_uid : NULL,
	                                 t ? t->generation : 0, image_bytes, recorded, written, &e);
	return fence_status(r, &e, st);
}

int svc_wait_backing(agent_service *a, backend *b, const struct volref *v, const char *path,
                     int64_t deadline_ms, struct grpc_status *st)
{
	bool regular = backend_regular_devices(b);
	int64_t left = deadline_ms - time_mono_ms();
	if (backend_device_wait(path, regular, 0, 1) == 0)
		return GRPC_OK;
	if (b->ops->activate) {
		int64_t sz;
		if (b->ops->size(b, v->name, &sz, NULL) == 0)
			b->ops->activate(b, v->name,
			                 NULL); /* LV exists but its node is missing: once */
		left = deadline_ms - time_mono_ms();
	}
	if (left > 0 && backend_device_wait(path, regular, (int)left, 250) == 0)
		return GRPC_OK;
	(void)a;
	return grpc_status_set(
	    st, GRPC_UNAVAILABLE,
	    "backing device %s of volume \"%s\" is not available (pool not imported "
	    "or volume group not active)",
	    path, v->id);
}

/* ---- read-only RPCs --------------------------------------------------------------------------- */

static bool host_path_exists(agent_service *a, const char *path)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s%s", a->host_root, path);
	return stat(p, &st) == 0;
}

static bool tool_ok(const char *const argv[])
{
	struct exec_opts o = {.timeout_ms = 10000};
	struct exec_result res;
	int r = exec_run(argv, &o, &res, NULL);
	bool ok = r == 0 && res.exit_code == 0;
	exec_result_free(&res);
	return ok;
}

/* The pool's entry in *out (NULL when its capacity cannot be read); 0, or -ENOMEM (a partly
 * built entry is still stored in *out for the response's free). */
static int pool_info(backend *b, PB(PoolInfo) * *out)
{
	int64_t total, avail;
	*out = NULL;
	if (b->ops->capacity(b, &total, &avail, NULL) < 0)
		return 0;
	PB(PoolInfo) *p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	pillar_csi__agent__v1__pool_info__init(p);
	*out = p;
	p->name = svc_strdup(b->cfg.pool);
	p->backend_type = (PB(BackendType))b->cfg.kind;
	p->total_bytes = total;
	p->available_bytes = avail;
	p->parent_dataset = svc_strdup(b->cfg.parent_dataset);
	p->thin_pool = svc_strdup(b->cfg.thin_pool);
	return p->name && p->parent_dataset && p->thin_pool ? 0 : -ENOMEM;
}

int agent_get_capabilities(agent_service *a, const PB(GetCapabilitiesRequest) * req,
                           PB(GetCapabilitiesResponse) * resp, struct grpc_status *st)
{
	bool zfs = false, lvm = false, file = false;
	(void)req;
	if (svc_enter(a, st))
		return st->code;
	svc_backend_kinds(a, &zfs, &lvm, &file);
	static const char *const zv[] = {"zfs", "version", NULL}, *const lv[] = {"lvm", "version",
	                                                                         NULL};
	zfs = zfs && host_path_exists(a, "/dev/zfs") && tool_ok(zv);
	lvm = lvm && host_path_exists(a, "/dev/mapper/control") && tool_ok(lv);
	resp->agent_version = svc_strdup(a->version);
	resp->supported_backends = calloc(3, sizeof(*resp->supported_backends));
	resp->supported_protocols = calloc(1, sizeof(*resp->supported_protocols));
	resp->discovered_pools = calloc(a->n_backends + 1, sizeof(*resp->discovered_pools));
	if (!resp->agent_version || !resp->supported_backends || !resp->supported_protocols ||
	    !resp->discovered_pools) {
		svc_leave(a);
		return grpc_status_oom(st);
	}
	if (zfs)
		resp->supported_backends[resp->n_supported_backends++] =
		    PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL;
	if (lvm)
		resp->supported_backends[resp->n_supported_backends++] =
		    PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_LVM;
	if (file)
		resp->supported_backends[resp->n_supported_backends++] = (PB(BackendType))
		    BACKEND_FILE; /* 6: ours (agent-api.md §14), not yet in the .proto */
	if (nvmet_available(a->nv) && host_path_exists(a, "/sys/module/nvmet_tcp"))
		resp->supported_protocols[resp->n_supported_protocols++] =
		    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	resp->nvme_target_auth = svc_auth_supported(a);
	int oom = 0;
	for (size_t i = 0; i < a->n_backends; i++) {
		PB(PoolInfo) * p;
		oom |= pool_info(a->backends[i], &p);
		if (p)
			resp->discovered_pools[resp->n_discovered_pools++] = p;
	}
	svc_leave(a);
	return oom ? grpc_status_oom(st) : svc_ok(st);
}

static int pool_for_read(agent_service *a, int type, const char *pool, backend **out,
                         struct grpc_status *st)
{
	if (!type_supported(type))
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported backend type %d",
		                       type);
	backend *b = svc_find_pool(a, pool ? pool : "");
	if (!b)
		return grpc_status_set(st, GRPC_NOT_FOUND,
		                       "pool \"%s\" is not configured on this agent",
		                       pool ? pool : "");
	if ((int)b->cfg.kind != type)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "pool \"%s\" is a %s backend",
		                       pool, backend_kind_name(b->cfg.kind));
	*out = b;
	return GRPC_OK;
}

int agent_get_capacity(agent_service *a, const PB(GetCapacityRequest) * req,
                       PB(GetCapacityResponse) * resp, struct grpc_status *st)
{
	backend *b;
	struct err e = {0};
	int64_t total, avail;
	if (svc_enter(a, st))
		return st->code;
	int code = pool_for_read(a, (int)req->backend_type, req->pool_name, &b, st);
	if (code == GRPC_OK) {
		if (b->ops->capacity(b, &total, &avail, &e) < 0) {
			code = grpc_status_from_err(st, &e);
		} else {
			resp->total_bytes = total;
			resp->available_bytes = avail;
			resp->used_bytes = total - avail;
			code = svc_ok(st);
		}
	}
	svc_leave(a);
	return code;
}

int agent_list_volumes(agent_service *a, const PB(ListVolumesRequest) * req,
                       PB(ListVolumesResponse) * resp, struct grpc_status *st)
{
	backend *b;
	struct err e = {0};
	struct backend_vol *v = NULL;
	size_t n = 0;
	if (svc_enter(a, st))
		return st->code;
	int code = pool_for_read(a, (int)req->backend_type, req->pool_name, &b, st);
	if (code == GRPC_OK && b->ops->list(b, &v, &n, &e) < 0)
		code = grpc_status_from_err(st, &e);
	if (code == GRPC_OK) {
		resp->volumes = calloc(n + 1, sizeof(*resp->volumes));
		if (!resp->volumes)
			code = grpc_status_oom(st);
		for (size_t i = 0; code == GRPC_OK && i < n; i++) {
			char id[AGENT_VOLID_MAX + 140], nqn[256], dev[PATH_MAX];
			PB(VolumeInfo) *vi = malloc(sizeof(*vi));
			if (!vi) {
				code = grpc_status_oom(st);
				break;
			}
			pillar_csi__agent__v1__volume_info__init(vi);
			snprintf(id, sizeof(id), "%s/%s", b->cfg.pool, v[i].name);
			vi->volume_id = svc_strdup(id);
			vi->capacity_bytes = v[i].size;
			vi->device_path = svc_strdup(
			    b->ops->device_path(b, v[i].name, dev, sizeof(dev)) == 0 ? dev : "");
			pthread_mutex_lock(&a->nv_mu);
			vi->exported = rules_nqn_of_volume(id, nqn, sizeof(nqn), NULL) == 0 &&
			               nvmet_subsys_exists(a->nv, nqn);
			pthread_mutex_unlock(&a->nv_mu);
			resp->volumes[resp->n_volumes++] = vi;
			if (!vi->volume_id || !vi->device_path)
				code = grpc_status_oom(st);
		}
		if (code == GRPC_OK)
			code = svc_ok(st);
	}
	free(v);
	svc_leave(a);
	return code;
}

int agent_list_exports(agent_service *a, const PB(ListExportsRequest) * req,
                       PB(ListExportsResponse) * resp, struct grpc_status *st)
{
	struct nvmet_export_entry *v = NULL;
	size_t n = 0;
	struct err e = {0};
	int code;
	if (svc_enter(a, st))
		return st->code;
	if (req->protocol_type != PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP) {
		code = grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported protocol type %d",
		                       (int)req->protocol_type);
		goto out;
	}
	pthread_mutex_lock(&a->nv_mu);
	int r = nvmet_export_list(a->nv, &v, &n, &e);
	pthread_mutex_unlock(&a->nv_mu);
	if (r < 0) {
		code = grpc_status_from_err(st, &e);
		goto out;
	}
	resp->exports = calloc(n + 1, sizeof(*resp->exports));
	code = resp->exports ? GRPC_OK : grpc_status_oom(st);
	for (size_t i = 0; code == GRPC_OK && i < n; i++) {
		PB(ListExportsResponse__ExportsEntry) *en = malloc(sizeof(*en));
		PB(ExportInfo) *info = malloc(sizeof(*info));
		if (!en || !info) {
			free(en);
			free(info);
			code = grpc_status_oom(st);
			break;
		}
		pillar_csi__agent__v1__list_exports_response__exports_entry__init(en);
		pillar_csi__agent__v1__export_info__init(info);
		info->target_id = svc_strdup(v[i].nqn);
		info->port = v[i].port;
		info->volume_ref = svc_strdup("1");
		en->key = svc_strdup(v[i].volume_id);
		en->value = info;
		resp->exports[resp->n_exports++] = en;
		if (!info->target_id || !info->volume_ref || !en->key)
			code = grpc_status_oom(st);
	}
	if (code == GRPC_OK)
		code = svc_ok(st);
out:
	free(v);
	svc_leave(a);
	return code;
}
