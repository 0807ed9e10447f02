/* AgentService: HealthCheck and the backend RPCs CreateVolume, DeleteVolume, ExpandVolume
 * (agent-api.md §5.4–§5.6, §9). */
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
#include "agent/service_int.h"
#include "base/exec.h"
#include "base/log.h"
#include "base/time.h"
#include "google/protobuf/timestamp.pb-c.h"
#include "model/records.h"
#include "rules/size.h"

#define PB(x) PillarCsi__Agent__V1__##x

static Google__Protobuf__Timestamp *now_ts(void)
{
	struct timespec ts;
	Google__Protobuf__Timestamp *t = malloc(sizeof(*t));
	if (!t)
		return NULL;
	google__protobuf__timestamp__init(t);
	clock_gettime(CLOCK_REALTIME, &ts);
	t->seconds = ts.tv_sec;
	t->nanos = (int32_t)ts.tv_nsec;
	return t;
}

/* Exported for service_export.c through this prototype only. */
Google__Protobuf__Timestamp *agent_svc_now_ts(void); /* NULL when out of memory */
Google__Protobuf__Timestamp *agent_svc_now_ts(void)
{
	return now_ts();
}

/* Adds one subsystem's entry (healthy cleared when !ok); 0, or -ENOMEM. */
static int add_sub(PB(HealthCheckResponse) * r, const char *name, bool ok, const char *msg)
{
	PB(SubsystemHealth) *h = malloc(sizeof(*h));
	if (!ok)
		r->healthy = false;
	if (!h)
		return -ENOMEM;
	pillar_csi__agent__v1__subsystem_health__init(h);
	h->name = svc_strdup(name);
	h->healthy = ok;
	h->message = svc_strdup(ok ? "" : msg);
	r->subsystems[r->n_subsystems++] = h;
	return h->name && h->message ? 0 : -ENOMEM;
}

static bool host_exists(agent_service *a, const char *path)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s%s", a->host_root, path);
	return stat(p, &st) == 0;
}

static int run_tool(const char *const argv[], struct exec_result *res)
{
	struct exec_opts o = {.timeout_ms = 10000};
	int r = exec_run(argv, &o, res, NULL);
	return r == 0 && res->exit_code == 0 ? 0 : -EIO;
}

static void check_zfs(agent_service *a, char *msg, size_t cap, bool *ok)
{
	*ok = true;
	if (!host_exists(a, "/dev/zfs")) {
		*ok = false;
		snprintf(msg, cap, "/dev/zfs not found; load the zfs module");
		return;
	}
	for (size_t i = 0; i < a->n_backends && *ok; i++) {
		backend *b = a->backends[i];
		struct exec_result res;
		if (b->cfg.kind != BACKEND_ZFS)
			continue;
		const char *argv[] = {"zpool", "list", "-Ho", "health", b->cfg.pool, NULL};
		if (run_tool(argv, &res) < 0) {
			*ok = false;
			snprintf(msg, cap, "pool \"%s\" not imported", b->cfg.pool);
		} else {
			char *h = res.out;
			h[strcspn(h, " \t\n")] = '\0';
			if (strcmp(h, "ONLINE") != 0 && strcmp(h, "DEGRADED") != 0) {
				*ok = false;
				snprintf(msg, cap, "pool \"%s\" is %s", b->cfg.pool, h);
			}
		}
		exec_result_free(&res);
	}
}

static void check_lvm(agent_service *a, char *msg, size_t cap, bool *ok)
{
	*ok = true;
	if (!host_exists(a, "/dev/mapper/control")) {
		*ok = false;
		snprintf(msg, cap, "/dev/mapper/control not found; load dm-mod");
		return;
	}
	for (size_t i = 0; i < a->n_backends && *ok; i++) {
		backend *b = a->backends[i];
		int64_t t, av;
		if (b->cfg.kind != BACKEND_LVM)
			continue;
		struct backend_config probe = b->cfg;
		probe.thin_default = false;
		backend tmp = *b;
		tmp.cfg = probe;
		if (b->ops->capacity(&tmp, &t, &av, NULL) < 0) {
			*ok = false;
			snprintf(msg, cap, "volume group \"%s\" not found", b->cfg.pool);
		} else if (b->cfg.thin_pool && b->ops->size(b, b->cfg.thin_pool, &t, NULL) < 0) {
			*ok = false;
			snprintf(msg, cap, "thin pool \"%s/%s\" not found", b->cfg.pool,
			         b->cfg.thin_pool);
		}
	}
}

/* Runs check (zpool/lvs execs) at most once per health_cache_ms; otherwise the last result. */
static void cached_check(agent_service *a, struct agent_health_cache *hc,
                         void (*check)(agent_service *, char *, size_t, bool *), char *msg,
                         size_t cap, bool *ok)
{
	pthread_mutex_lock(&a->health_mu);
	int64_t now = time_mono_ms();
	if (hc->at_ms == 0 || now - hc->at_ms >= a->health_cache_ms) {
		hc->msg[0] = '\0';
		check(a, hc->msg, sizeof(hc->msg), &hc->ok);
		hc->at_ms = now;
	}
	*ok = hc->ok;
	snprintf(msg, cap, "%s", hc->msg);
	pthread_mutex_unlock(&a->health_mu);
}

int agent_health_check(agent_service *a, const PB(HealthCheckRequest) * req,
                       PB(HealthCheckResponse) * resp, struct grpc_status *st)
{
	char msg[PATH_MAX + 128], p[PATH_MAX];
	bool zfs = false, lvm = false, file = false, ok;
	int oom = 0;
	(void)req;
	if (svc_enter(a, st))
		return st->code;
	svc_backend_kinds(a, &zfs, &lvm, &file);
	resp->healthy = true;
	resp->subsystems = calloc(6, sizeof(*resp->subsystems));
	if (!resp->subsystems) {
		svc_leave(a);
		return grpc_status_oom(st);
	}
	snprintf(p, sizeof(p), "%s/subsystems", nvmet_dir(a->nv));
	snprintf(msg, sizeof(msg), "%s not found; load nvmet and mount configfs", nvmet_dir(a->nv));
	oom |= add_sub(resp, "nvmet-configfs", access(p, W_OK) == 0, msg);
	oom |= add_sub(resp, "nvmet-tcp", host_exists(a, "/sys/module/nvmet_tcp"),
	               "nvmet_tcp module not loaded");
	if (zfs) {
		cached_check(a, &a->hc_zfs, check_zfs, msg, sizeof(msg), &ok);
		oom |= add_sub(resp, "zfs", ok, msg);
	}
	if (lvm) {
		cached_check(a, &a->hc_lvm, check_lvm, msg, sizeof(msg), &ok);
		oom |= add_sub(resp, "lvm", ok, msg);
	}
	if (file) { /* Decision: the file backend's directories, like pools */
		ok = true;
		for (size_t i = 0; i < a->n_backends && ok; i++)
			if (a->backends[i]->cfg.kind == BACKEND_FILE &&
			    access(a->backends[i]->cfg.directory, W_OK) != 0) {
				ok = false;
				snprintf(msg, sizeof(msg),
				         "directory %s of pool \"%s\" is not writable",
				         a->backends[i]->cfg.directory, a->backends[i]->cfg.pool);
			}
		oom |= add_sub(resp, "file", ok, msg);
	}
	ok = true;
	static const char *const subs[] = {"", "/generations", "/nvmet-identity"};
	for (int i = 0; i < 3 && ok; i++) {
		snprintf(p, sizeof(p), "%s%s", a->state_dir, subs[i]);
		if (access(p, W_OK) != 0) {
			ok = false;
			snprintf(msg, sizeof(msg), "cannot write %s: %s", p,
			         errno == EROFS ? "EROFS" : strerror(errno));
		}
	}
	oom |= add_sub(resp, "state-dir", ok, msg);
	resp->agent_version = svc_strdup(a->version);
	resp->checked_at = now_ts();
	resp->export_restore_pending = agent_service_restore_pending(a);
	svc_leave(a);
	return oom || !resp->agent_version || !resp->checked_at ? grpc_status_oom(st) : svc_ok(st);
}

/* ---- CreateVolume ------------------------------------------------------------------------------ */

/* OUT_OF_RANGE for a size above RULES_CAPACITY_MAX: no backend's granule rounds it within
 * int64_t, so it is refused before any arithmetic or any backend call. */
static int size_refused(int64_t bytes, struct grpc_status *st)
{
	char why[200];
	return grpc_status_set(st, GRPC_OUT_OF_RANGE, "%s",
	                       rules_size_refusal(bytes, 0, why, sizeof(why)));
}

/* LVM rounds sizes up to whole extents: an LV up to one (4 MiB default) extent larger than
 * requested is "the same size" for an idempotent retry.  The zfs tool rounds a zvol's size up
 * to its volblocksize (a PVC of 1G, 10^9 bytes, is no multiple of 8 KiB): up to one block
 * larger is the same size. */
static bool same_size(backend *b, const char *name, int64_t have, int64_t want)
{
	int64_t g;
	if (have == want)
		return true;
	if (b->cfg.kind == BACKEND_LVM)
		return have > want && have - want < (4 << 20);
	return have > want && b->ops->granule && b->ops->granule(b, name, &g, NULL) == 0 &&
	       have - want < g;
}

static void props_free(char **props, size_t n)
{
	for (size_t i = 0; props && i < n; i++)
		free(props[i]);
	free(props);
}

/* The ZFS properties of params as "k=v" strings in o (*props owns them): 0 or -ENOMEM. */
static int zfs_props(const PB(BackendParams) * bp, struct backend_create_opts *o, char ***props)
{
	*props = NULL;
	if (!bp || bp->params_case != PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_ZFS ||
	    !bp->zfs->n_properties)
		return 0;
	*props = calloc(bp->zfs->n_properties, sizeof(char *));
	if (!*props)
		return -ENOMEM;
	for (size_t i = 0; i < bp->zfs->n_properties; i++)
		if (asprintf(&(*props)[i], "%s=%s", bp->zfs->properties[i]->key,
		             bp->zfs->properties[i]->value ? bp->zfs->properties[i]->value : "") <
		    0) {
			props_free(*props, i);
			*props = NULL;
			return -ENOMEM;
		}
	o->props = (const char *const *)*props;
	o->n_props = bp->zfs->n_properties;
	return 0;
}

/* CreateVolume from the fencing decision on (image: the size of a new sparse `file` image,
 * else 0). */
static int create_from_fence(agent_service *a, backend *b, const struct volref *v,
                             const PB(CreateVolumeRequest) * req, PB(CreateVolumeResponse) * resp,
                             struct backend_create_opts o, int64_t image, struct grpc_status *st)
{
	struct err e = {0};
	char dev[PATH_MAX];
	int64_t have, total, avail;
	int code, r;
	char **props = NULL;

	if ((code = svc_fence_create(a, v->id, req->fence, image, &o.size_recorded,
	                             &o.name_journaled, st)) != GRPC_OK)
		return code;
	if (b->ops->device_path(b, v->name, dev, sizeof(dev)) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "invalid volume id \"%s\"",
		                       v->id);
	/* image: do_create saw no image under the volume's lock, which it still holds */
	r = image > 0 ? -ENOENT : b->ops->size(b, v->name, &have, &e);
	if (r == 0) {
		if (!same_size(b, v->name, have, req->capacity_bytes))
			return grpc_status_set(st, GRPC_ALREADY_EXISTS,
			                       "volume \"%s\" exists with %" PRId64
			                       " bytes; requested %" PRId64,
			                       v->id, have, (int64_t)req->capacity_bytes);
		goto wait;
	}
	if (r != -ENOENT)
		return grpc_status_from_err(st, &e);
	if (req->content_source) { /* a restore or clone: docs/snapshots.md */
		if (zfs_props(req->backend_params, &o, &props) < 0)
			return grpc_status_oom(st);
		code = svc_clone_volume(a, b, v, req, &o, st);
		props_free(props, o.n_props);
		if (code != GRPC_OK)
			return code;
		/* LVM: an LV a killed call left inactive is activated once here */
		if (svc_wait_backing(a, b, v, dev, time_mono_ms() + a->create_wait_ms, st) !=
		    GRPC_OK)
			return grpc_status_set(st, GRPC_UNAVAILABLE, "device %s did not appear",
			                       dev);
		goto ready;
	}
	if (b->cfg.kind == BACKEND_ZFS || (b->cfg.kind == BACKEND_LVM && !o.thin)) {
		if (b->ops->capacity(b, &total, &avail, &e) < 0)
			return grpc_status_from_err(st, &e);
		if (avail < req->capacity_bytes)
			return grpc_status_set(st, GRPC_RESOURCE_EXHAUSTED,
			                       "pool \"%s\" has %" PRId64
			                       " bytes available; %" PRId64 " requested",
			                       v->pool, avail, (int64_t)req->capacity_bytes);
	}
	if (zfs_props(req->backend_params, &o, &props) < 0)
		return grpc_status_oom(st);
	r = b->ops->create(b, v->name, req->capacity_bytes, &o, &e);
	props_free(props, o.n_props);
	if (r == -ENOSPC)
		return grpc_status_set(st, GRPC_RESOURCE_EXHAUSTED, "%s", e.msg);
	if (r == -EINVAL) /* a name or option the backend refuses (LVM's reserved names) */
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s", e.msg);
	if (r < 0)
		return grpc_status_set(st, r == -ETIMEDOUT ? GRPC_UNAVAILABLE : GRPC_INTERNAL, "%s",
		                       e.msg);
	if (b->cfg.kind == BACKEND_FILE) { /* the regular file just made, of exactly that size */
		have = (int64_t)req->capacity_bytes;
		goto done;
	}
wait:
	if (backend_device_wait(dev, backend_regular_devices(b), a->create_wait_ms, 100) < 0)
		return grpc_status_set(st, GRPC_UNAVAILABLE, "device %s did not appear", dev);
ready:
	if (b->ops->size(b, v->name, &have, &e) < 0)
		return grpc_status_from_err(st, &e);
done:
	resp->device_path = svc_strdup(dev);
	resp->capacity_bytes = have;
	return resp->device_path ? svc_ok(st) : grpc_status_oom(st);
}

static int do_create(agent_service *a, backend *b, const struct volref *v,
                     const PB(CreateVolumeRequest) * req, PB(CreateVolumeResponse) * resp,
                     struct grpc_status *st)
{
	struct backend_create_opts o;
	struct err e = {0};
	int64_t have;
	int code;
	if ((code = svc_layout(a, b, v, req->backend_params, &o, st)) != GRPC_OK)
		return code;
	/* a new sparse file image: its size goes into the mark, one durable write for both,
	 * and the mark's journal makes its name durable (the journal held until it is made) */
	int64_t image = b->cfg.kind == BACKEND_FILE && !req->content_source && !o.preallocate &&
	                        b->ops->size(b, v->name, &have, NULL) == -ENOENT
	                    ? (int64_t)req->capacity_bytes
	                    : 0;
	if (image > 0 && agent_marklog_hold(a->state_dir, &e) < 0)
		return svc_state_failed(st, &e);
	code = create_from_fence(a, b, v, req, resp, o, image, st);
	if (image > 0)
		agent_marklog_release();
	return code;
}

/* A step of CreateVolume or ExpandVolume under the volume's lock (req and resp are the RPC's). */
typedef int (*sized_step)(agent_service *a, backend *b, const struct volref *v, const void *req,
                          void *resp, struct grpc_status *st);

/* The common frame of CreateVolume and ExpandVolume: the volume ID, its backend, the size the
 * request names (`what`, `bytes`: positive and at most RULES_CAPACITY_MAX), then step under the
 * volume's lock.  Returns the gRPC code (st filled). */
static int sized_call(agent_service *a, const char *volume_id, int backend_type, const char *what,
                      int64_t bytes, sized_step step, const void *req, void *resp,
                      struct grpc_status *st)
{
	struct volref v;
	backend *b;
	int code;
	if (svc_enter(a, st))
		return st->code;
	if ((code = svc_parse_volume_id(volume_id, &v, st)) == GRPC_OK &&
	    (code = svc_route(a, &v, backend_type, &b, st)) == GRPC_OK) {
		if (bytes <= 0) {
			code = grpc_status_set(st, GRPC_INVALID_ARGUMENT,
			                       "%s must be positive, got %" PRId64, what, bytes);
		} else if (bytes > RULES_CAPACITY_MAX) {
			code = size_refused(bytes, st);
		} else {
			struct keylock_hold hold;
			keylock_wait(&a->locks, &hold, v.id);
			code = step(a, b, &v, req, resp, st);
			keylock_release(&a->locks, &hold);
		}
	}
	svc_leave(a);
	return code;
}

static int create_step(agent_service *a, backend *b, const struct volref *v, const void *req,
                       void *resp, struct grpc_status *st)
{
	return do_create(a, b, v, req, resp, st);
}

int agent_create_volume(agent_service *a, const PB(CreateVolumeRequest) * req,
                        PB(CreateVolumeResponse) * resp, struct grpc_status *st)
{
	return sized_call(a, req->volume_id, (int)req->backend_type, "capacity_bytes",
	                  (int64_t)req->capacity_bytes, create_step, req, resp, st);
}

/* An image of pool b that a power cut left empty (its name durable, its size not) gets the
 * size its live mark recorded.  0, or a negative errno with e set. */
static int complete_image(agent_service *a, backend *b, const char *name, struct err *e)
{
	char id[PATH_MAX];
	struct fence_mark m;
	snprintf(id, sizeof(id), "%s/%s", b->cfg.pool, name);
	int r = agent_fence_read(a->state_dir, id, &m, e);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	int64_t bytes = m.ended ? 0 : m.image_bytes;
	agent_fence_mark_clear(&m);
	if (bytes <= 0)
		return 0;
	r = b->ops->expand(b, name, bytes, e);
	if (r == 0) {
		char size[32];
		snprintf(size, sizeof(size), "%" PRId64, bytes);
		log_info("gave an empty image the size its fencing mark recorded", "volume", id,
		         "bytes", size);
	}
	return r;
}

/* The volume ID an escaped mark name (agent_fence_escape, ".mark") stands for; -EINVAL. */
static int mark_volume_id(const char *name, char *id, size_t cap)
{
	size_t n = strlen(name), k = 0;
	if (n < 6 || strcmp(name + n - 5, ".mark") != 0)
		return -EINVAL;
	for (size_t i = 0; i < n - 5; i++) {
		unsigned x;
		if (k + 1 >= cap)
			return -EINVAL;
		if (name[i] != '_') {
			id[k++] = name[i];
		} else if (i + 2 < n - 5 && sscanf(name + i + 1, "%2X", &x) == 1 && x) {
			id[k++] = (char)x;
			i += 2;
		} else {
			return -EINVAL;
		}
	}
	id[k] = '\0';
	return 0;
}

void svc_restore_image(void *arg, const char *name)
{
	agent_service *a = arg;
	char id[AGENT_VOLID_MAX], path[PATH_MAX];
	struct model_fence_mark m;
	struct volref v;
	struct grpc_status st;
	struct err e = {0};
	int64_t have;
	if (mark_volume_id(name, id, sizeof(id)) < 0 || svc_parse_volume_id(id, &v, &st) ||
	    snprintf(path, sizeof(path), "%s/generations/%s", a->state_dir, name) >=
	        (int)sizeof(path) ||
	    model_fence_mark_read(path, &m, &e) < 0)
		return; /* not an image's mark, or a corrupt one: the volume's calls report it */
	int64_t bytes = !m.ended && m.has_image_bytes ? m.image_bytes : 0;
	model_type_clear(&model_fence_mark_type, &m);
	backend *b = svc_find_pool(a, v.pool);
	if (bytes <= 0 || !b || b->cfg.kind != BACKEND_FILE ||
	    b->ops->size(b, v.name, &have, NULL) != -ENOENT)
		return;
	struct backend_create_opts o = {0}; /* fsync'd: durable before the journal retires */
	if (b->ops->create(b, v.name, bytes, &o, &e) < 0)
		log_warn("cannot make again the image a fencing mark records", "volume", id,
		         "error", e.msg);
	else
		log_info("made again the image a fencing mark records", "volume", id);
}

void svc_complete_images(agent_service *a)
{
	for (size_t i = 0; i < a->n_backends; i++) {
		backend *b = a->backends[i];
		struct backend_vol *vols;
		struct err e = {0};
		size_t n;
		if (b->cfg.kind != BACKEND_FILE || b->ops->list(b, &vols, &n, &e) < 0) {
			if (e.msg[0])
				log_warn("cannot list the images of a pool", "pool", b->cfg.pool,
				         "error", e.msg);
			continue;
		}
		for (size_t k = 0; k < n; k++)
			if (vols[k].size == 0 && complete_image(a, b, vols[k].name, &e) < 0)
				log_warn("cannot give an empty image its recorded size", "pool",
				         b->cfg.pool, "volume", vols[k].name, "error", e.msg);
		free(vols);
	}
}

/* ---- DeleteVolume -------------------------------------------------------------------------------- */

static int do_delete(agent_service *a, backend *b, const struct volref *v,
                     const PB(DeleteVolumeRequest) * req, struct grpc_status *st)
{
	struct err e = {0};
	char nqn[256];
	int64_t have;
	int code, r;
	if ((code = svc_fence(a, v->id, req->fence, FENCE_DESTROY, st)) != GRPC_OK)
		return code;
	if (rules_nqn_of_volume(v->id, nqn, sizeof(nqn), NULL) == 0) {
		pthread_mutex_lock(&a->nv_mu);
		bool exported = nvmet_subsys_exists(a->nv, nqn);
		pthread_mutex_unlock(&a->nv_mu);
		if (exported)
			return grpc_status_set(
			    st, GRPC_FAILED_PRECONDITION,
			    "volume \"%s\" is still exported as %s; unexport it first", v->id, nqn);
	}
	if (b->ops->cancel)
		b->ops->cancel(b, v->name);
	r = b->ops->size(b, v->name, &have, &e);
	if (r < 0 && r != -ENOENT)
		return grpc_status_from_err(st, &e);
	if (r == 0) {
		for (int attempt = 0;; attempt++) {
			r = b->ops->destroy(b, v->name, &e);
			if (r != -EBUSY || attempt == 3)
				break;
			time_sleep_ms(a->busy_retry_ms);
		}
		if (r == -EBUSY)
			return grpc_status_set(st, GRPC_FAILED_PRECONDITION,
			                       "volume \"%s\" is busy: %s", v->id, e.msg);
		if (r < 0 && r != -ENOENT)
			return grpc_status_set(
			    st, r == -ETIMEDOUT ? GRPC_UNAVAILABLE : GRPC_FAILED_PRECONDITION, "%s",
			    e.msg);
	}
	/* what snapshots and clones of it or of its origin kept (docs/snapshots.md) */
	if (b->ops->sweep && (r = b->ops->sweep(b, &e)) < 0)
		return grpc_status_set(st, r == -ETIMEDOUT ? GRPC_UNAVAILABLE : GRPC_INTERNAL, "%s",
		                       e.msg);
	if (agent_fence_end(a->state_dir, v->id, &e) < 0 ||
	    agent_identity_forget(a->state_dir, v->id, &e) < 0)
		return svc_state_failed(st, &e);
	return svc_ok(st);
}

int agent_delete_volume(agent_service *a, const PB(DeleteVolumeRequest) * req,
                        PB(DeleteVolumeResponse) * resp, struct grpc_status *st)
{
	struct volref v;
	backend *b;
	int code;
	(void)resp;
	if (svc_enter(a, st))
		return st->code;
	if ((code = svc_parse_volume_id(req->volume_id, &v, st)) == GRPC_OK &&
	    (code = svc_route(a, &v, (int)req->backend_type, &b, st)) == GRPC_OK) {
		struct keylock_hold hold;
		keylock_wait(&a->locks, &hold, v.id);
		code = do_delete(a, b, &v, req, st);
		keylock_release(&a->locks, &hold);
	}
	svc_leave(a);
	return code;
}

/* ---- ExpandVolume -------------------------------------------------------------------------------- */

static int do_expand(agent_service *a, backend *b, const struct volref *v,
                     const PB(ExpandVolumeRequest) * req, PB(ExpandVolumeResponse) * resp,
                     struct grpc_status *st)
{
	struct err e = {0};
	char nqn[256];
	int64_t cur;
	int code, r;
	if ((code = svc_fence(a, v->id, req->fence, FENCE_GRANT, st)) != GRPC_OK)
		return code;
	r = b->ops->size(b, v->name, &cur, &e);
	if (r == -ENOENT)
		return grpc_status_set(st, GRPC_NOT_FOUND, "volume \"%s\" does not exist", v->id);
	if (r < 0)
		return grpc_status_from_err(st, &e);
	if (req->requested_bytes < cur && !same_size(b, v->name, cur, req->requested_bytes))
		return grpc_status_set(st, GRPC_OUT_OF_RANGE,
		                       "cannot shrink volume \"%s\" from %" PRId64 " to %" PRId64
		                       " bytes",
		                       v->id, cur, (int64_t)req->requested_bytes);
	if (req->requested_bytes > cur) {
		r = b->ops->expand(b, v->name, req->requested_bytes, &e);
		if (r == -ENOSPC)
			return grpc_status_set(st, GRPC_RESOURCE_EXHAUSTED, "%s", e.msg);
		if (r == -ERANGE)
			return grpc_status_set(st, GRPC_OUT_OF_RANGE, "%s", e.msg);
		if (r < 0)
			return grpc_status_set(
			    st, r == -ETIMEDOUT ? GRPC_UNAVAILABLE : GRPC_INTERNAL, "%s", e.msg);
	}
	if (rules_nqn_of_volume(v->id, nqn, sizeof(nqn), NULL) == 0) {
		pthread_mutex_lock(&a->nv_mu);
		r = nvmet_subsys_exists(a->nv, nqn) ? nvmet_ns_revalidate(a->nv, nqn, &e) : 0;
		pthread_mutex_unlock(&a->nv_mu);
		if (r < 0)
			return grpc_status_from_err(st, &e);
	}
	if (b->ops->size(b, v->name, &cur, &e) < 0)
		return grpc_status_from_err(st, &e);
	resp->capacity_bytes = cur;
	return svc_ok(st);
}

static int expand_step(agent_service *a, backend *b, const struct volref *v, const void *req,
                       void *resp, struct grpc_status *st)
{
	return do_expand(a, b, v, req, resp, st);
}

int agent_expand_volume(agent_service *a, const PB(ExpandVolumeRequest) * req,
                        PB(ExpandVolumeResponse) * resp, struct grpc_status *st)
{
	return sized_call(a, req->volume_id, (int)req->backend_type, "requested_bytes",
	                  (int64_t)req->requested_bytes, expand_step, req, resp, st);
}
