#include "node/service.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "base/time.h"
#include "node/internal.h"
#include "node/paths.h"
#include "version/version.h"

static char *dup_or(const char *v, const char *dflt)
{
	return strdup(v && *v ? v : dflt);
}

int node_new(const struct node_config *cfg, struct node **out, struct err *e)
{
	struct node *n;
	struct err ce = {0};
	int r;

	*out = NULL;
	if (!cfg->node_id || !*cfg->node_id)
		return err_set(e, -EINVAL, "no node id: set --node-id or NODE_NAME");
	n = calloc(1, sizeof(*n));
	if (!n)
		return err_set(e, -ENOMEM, "out of memory");
	keylock_init(&n->locks);
	pthread_mutex_init(&n->dhchap_mu, NULL);
	node_health_init(&n->health);
	n->node_id = strdup(cfg->node_id);
	n->state_dir = dup_or(cfg->state_dir, "/var/lib/pillar-csi/node");
	n->etc_nvme_dir = dup_or(cfg->etc_nvme_dir, "/etc/nvme");
	n->sysfs_root = dup_or(cfg->sysfs_root, "/sys");
	n->dev_root = dup_or(cfg->dev_root, "/dev");
	n->proc_root = dup_or(cfg->proc_root, "/proc");
	n->kubelet_dir = dup_or(cfg->kubelet_dir, "/var/lib/kubelet");
	if (!n->node_id || !n->state_dir || !n->etc_nvme_dir || !n->sysfs_root || !n->dev_root ||
	    !n->proc_root || !n->kubelet_dir) {
		r = err_set(e, -ENOMEM, "out of memory");
		goto fail;
	}
	if (node_kubelet_dir_check(n->kubelet_dir) < 0) {
		r = err_set(
		    e, -EINVAL,
		    "--kubelet-dir must be an absolute, normalised path other than /: \"%s\"",
		    n->kubelet_dir);
		goto fail;
	}
	n->sys = cfg->sys_ops ? cfg->sys_ops : &node_sys_ops_real;
	n->nvme = (struct nvme_ctx){.sysfs_root = n->sysfs_root,
	                            .dev_root = n->dev_root,
	                            .ops = cfg->nvme_ops ? cfg->nvme_ops : &nvme_kernel_ops_sys,
	                            .dying_wait_ms = cfg->dying_wait_ms,
	                            .device_wait_ms = cfg->device_wait_ms,
	                            .delete_wait_ms = cfg->delete_wait_ms,
	                            .size_wait_ms = cfg->size_wait_ms};
	n->dhchap = cfg->dhchap;
	n->publish_identity = cfg->publish_identity;
	n->publish_ctx = cfg->publish_ctx;
	n->health.report = cfg->report_lost;
	n->health.report_ctx = cfg->report_ctx;
	n->health.node_id = n->node_id;
	if ((r = nvme_host_identity_ensure(n->etc_nvme_dir, &n->id, e)) < 0)
		goto fail;
	if (nvme_host_identity_check(&n->id, &ce) < 0) {
		n->shared_identity = true;
		log_error("refusing a shared NVMe host identity; Probe reports not ready", "error",
		          ce.msg);
	}
	/* made durable before any record in it is: an acknowledged stage survives a power cut */
	if ((r = node_state_dir_ensure(n->state_dir, e)) < 0)
		goto fail;
	file_remove_temps(n->state_dir, NULL); /* of writes a killed node never finished */
	if ((r = node_records_sweep(n->state_dir, e)) < 0)
		goto fail;
	node_dhchap_start(n);
	if ((r = node_readiness_start(&n->readiness, n->dev_root, n->state_dir, n->shared_identity,
	                              e)) < 0)
		goto fail;
	*out = n;
	return 0;
fail:
	node_free(n);
	return r;
}

void node_free(struct node *n)
{
	if (!n)
		return;
	node_readiness_stop(&n->readiness); /* first: its thread reads the paths */
	free(n->node_id);
	free(n->state_dir);
	free(n->etc_nvme_dir);
	free(n->sysfs_root);
	free(n->dev_root);
	free(n->proc_root);
	free(n->kubelet_dir);
	keylock_fini(&n->locks);
	pthread_mutex_destroy(&n->dhchap_mu);
	node_health_fini(&n->health);
	free(n);
}

int node_publish_identity(struct node *n, struct err *e)
{
	if (!n->publish_identity)
		return 0;
	return n->publish_identity(n->publish_ctx, n->node_id, &n->id, e);
}

const struct nvme_host_identity *node_host_identity(const struct node *n, bool *shared)
{
	if (shared)
		*shared = n->shared_identity;
	return &n->id;
}

void node_response_clear(ProtobufCMessage *m)
{
	/* protobuf-c frees every member and then the message itself; free a heap copy of the
	 * shell instead of the caller's (stack) message. */
	size_t sz = m->descriptor->sizeof_message;
	void *copy = malloc(sz);
	if (!copy)
		return; /* cannot happen in practice; leaks rather than crashes */
	memcpy(copy, m, sz);
	protobuf_c_message_free_unpacked(copy, NULL);
	protobuf_c_message_init(m->descriptor, m);
}

int node_lock_volume(struct node *n, struct keylock_hold *h, const char *id, struct grpc_status *st)
{
	if (keylock_try(&n->locks, h, id) < 0)
		return grpc_status_set(st, GRPC_ABORTED,
		                       "an operation on volume \"%s\" is already in progress", id);
	return GRPC_OK;
}

int node_require(struct grpc_status *st, ...)
{
	va_list ap;
	const char *name;
	int code = GRPC_OK;
	va_start(ap, st);
	while (code == GRPC_OK && (name = va_arg(ap, const char *)) != NULL) {
		const char *v = va_arg(ap, const char *);
		if (!v || !*v)
			code = grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s is required", name);
	}
	va_end(ap);
	return code;
}

int node_require_capability(const Csi__V1__VolumeCapability *cap, struct grpc_status *st)
{
	if (!cap)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "volume_capability is required");
	if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE__NOT_SET)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "volume_capability.access_type is required");
	return GRPC_OK;
}

int node_status_from_nvme(int r, const struct err *e, struct grpc_status *st)
{
	/* csi.md §8 step 5: a controller that was not removed in time is INTERNAL (kubelet retries);
	 * everything else maps as everywhere (grpc_code_from_errno). */
	int code = r == -EBUSY ? GRPC_INTERNAL : grpc_code_from_errno(r);
	return grpc_status_set(st, code, "%s", e->msg[0] ? e->msg : strerror(-r));
}

int node_is_mounted(const struct node *n, const char *path, struct node_mount *m)
{
	struct node_mount tmp;
	int r = node_mount_find(n->proc_root, path, m ? m : &tmp);
	if (r == 0)
		return 1;
	return r == -ENOENT ? 0 : r;
}

bool node_mode_read_only(const Csi__V1__VolumeCapability *cap)
{
	return cap && cap->access_mode &&
	       (cap->access_mode->mode ==
	            CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY ||
	        cap->access_mode->mode ==
	            CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY);
}

int node_load_record(struct node *n, const char *id, struct node_record *r, struct grpc_status *st)
{
	struct err e = {0};
	int rc = node_record_read(n->state_dir, id, r, &e);
	if (rc == -ENOENT)
		return GRPC_NOT_FOUND;
	if (rc < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "%s", e.msg);
	return GRPC_OK;
}

/* ---- Identity ------------------------------------------------------------------------------- */

int node_get_plugin_info(struct node *n, const Csi__V1__GetPluginInfoRequest *req,
                         Csi__V1__GetPluginInfoResponse *resp, struct grpc_status *st)
{
	(void)n;
	(void)req;
	resp->name = strdup(RULES_DRIVER_NAME);
	resp->vendor_version = strdup(version_string());
	if (!resp->name || !resp->vendor_version)
		return grpc_status_oom(st);
	return GRPC_OK;
}

static Csi__V1__PluginCapability *plugin_cap(int service, int expansion)
{
	Csi__V1__PluginCapability *c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	csi__v1__plugin_capability__init(c);
	if (service) {
		c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
		c->service = malloc(sizeof(*c->service));
		if (!c->service) {
			free(c);
			return NULL;
		}
		csi__v1__plugin_capability__service__init(c->service);
		c->service->type = service;
	} else {
		c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
		c->volume_expansion = malloc(sizeof(*c->volume_expansion));
		if (!c->volume_expansion) {
			free(c);
			return NULL;
		}
		csi__v1__plugin_capability__volume_expansion__init(c->volume_expansion);
		c->volume_expansion->type = expansion;
	}
	return c;
}

int node_get_plugin_capabilities(struct node *n, const Csi__V1__GetPluginCapabilitiesRequest *req,
                                 Csi__V1__GetPluginCapabilitiesResponse *resp,
                                 struct grpc_status *st)
{
	(void)n;
	(void)req;
	resp->capabilities = calloc(3, sizeof(*resp->capabilities));
	if (!resp->capabilities)
		return grpc_status_oom(st);
	resp->capabilities[0] =
	    plugin_cap(CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE, 0);
	resp->capabilities[1] = plugin_cap(
	    CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS, 0);
	resp->capabilities[2] =
	    plugin_cap(0, CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE);
	resp->n_capabilities = 3;
	if (!resp->capabilities[0] || !resp->capabilities[1] || !resp->capabilities[2]) {
		size_t i;
		for (i = 0; i < 3; i++)
			if (resp->capabilities[i])
				protobuf_c_message_free_unpacked(&resp->capabilities[i]->base,
				                                 NULL);
		free(resp->capabilities);
		resp->capabilities = NULL;
		resp->n_capabilities = 0;
		return grpc_status_oom(st);
	}
	return GRPC_OK;
}

int node_probe(struct node *n, const Csi__V1__ProbeRequest *req, Csi__V1__ProbeResponse *resp,
               struct grpc_status *st)
{
	(void)req;
	resp->ready = malloc(sizeof(*resp->ready));
	if (!resp->ready)
		return grpc_status_oom(st);
	google__protobuf__bool_value__init(resp->ready);
	resp->ready->value = node_readiness_ready(&n->readiness);
	return GRPC_OK;
}

/* ---- Node: info and capabilities ------------------------------------------------------------ */

int node_get_info(struct node *n, const Csi__V1__NodeGetInfoRequest *req,
                  Csi__V1__NodeGetInfoResponse *resp, struct grpc_status *st)
{
	char path[PATH_MAX];
	struct stat sb;
	(void)req;
	resp->node_id = strdup(n->node_id);
	resp->max_volumes_per_node = 0;
	if (!resp->node_id)
		return grpc_status_oom(st);
	snprintf(path, sizeof(path), "%s/module/nvme_tcp", n->sysfs_root);
	if (stat(path, &sb) == 0) {
		Csi__V1__Topology *t = malloc(sizeof(*t));
		Csi__V1__Topology__SegmentsEntry **segs = calloc(1, sizeof(*segs));
		Csi__V1__Topology__SegmentsEntry *s = malloc(sizeof(*s));
		char *k = strdup(RULES_TOPOLOGY_KEY), *v = strdup("true");
		if (!t || !segs || !s || !k || !v) {
			free(t);
			free(segs);
			free(s);
			free(k);
			free(v);
			return grpc_status_oom(st);
		}
		csi__v1__topology__init(t);
		csi__v1__topology__segments_entry__init(s);
		s->key = k;
		s->value = v;
		segs[0] = s;
		t->segments = segs;
		t->n_segments = 1;
		resp->accessible_topology = t;
	}
	return GRPC_OK;
}

int node_get_capabilities(struct node *n, const Csi__V1__NodeGetCapabilitiesRequest *req,
                          Csi__V1__NodeGetCapabilitiesResponse *resp, struct grpc_status *st)
{
	static const int types[] = {
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
	};
	size_t i, cnt = sizeof(types) / sizeof(types[0]);
	(void)n;
	(void)req;
	resp->capabilities = calloc(cnt, sizeof(*resp->capabilities));
	if (!resp->capabilities)
		return grpc_status_oom(st);
	for (i = 0; i < cnt; i++) {
		Csi__V1__NodeServiceCapability *c = malloc(sizeof(*c));
		Csi__V1__NodeServiceCapability__RPC *rpc = malloc(sizeof(*rpc));
		if (!c || !rpc) {
			free(c);
			free(rpc);
			return grpc_status_oom(st);
		}
		csi__v1__node_service_capability__init(c);
		csi__v1__node_service_capability__rpc__init(rpc);
		rpc->type = types[i];
		c->type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = rpc;
		resp->capabilities[resp->n_capabilities++] = c;
	}
	return GRPC_OK;
}

/* ---- Node: stats ------------------------------------------------------------------------------ */

static Csi__V1__VolumeUsage *usage(int unit, int64_t total, int64_t avail, int64_t used)
{
	Csi__V1__VolumeUsage *u = malloc(sizeof(*u));
	if (!u)
		return NULL;
	csi__v1__volume_usage__init(u);
	u->unit = unit;
	u->total = total;
	u->available = avail;
	u->used = used;
	return u;
}

/* csi.md §9.4 steps 3-4: the usage of the staged or published path (stat'ed as sb). */
static int stats_usage(struct node *n, const char *path, const struct stat *sb,
                       Csi__V1__NodeGetVolumeStatsResponse *resp, struct grpc_status *st)
{
	int r;
	resp->usage = calloc(2, sizeof(*resp->usage));
	if (!resp->usage)
		return grpc_status_oom(st);
	if (S_ISBLK(sb->st_mode)) {
		uint64_t bytes = 0;
		r = n->sys->blk_size(n->sys->ctx, path, &bytes);
		if (r < 0)
			return grpc_status_set(st, GRPC_INTERNAL, "BLKGETSIZE64 %s: %s", path,
			                       strerror(-r));
		resp->usage[0] = usage(CSI__V1__VOLUME_USAGE__UNIT__BYTES, (int64_t)bytes, 0, 0);
		if (!resp->usage[0])
			return grpc_status_oom(st);
		resp->n_usage = 1;
		return GRPC_OK;
	}
	if (S_ISDIR(sb->st_mode)) {
		struct statfs sf;
		int64_t fr;
		if (statfs(path, &sf) < 0)
			return grpc_status_set(st, GRPC_INTERNAL, "statfs %s: %s", path,
			                       strerror(errno));
		fr = sf.f_frsize ? (int64_t)sf.f_frsize : (int64_t)sf.f_bsize;
		resp->usage[0] =
		    usage(CSI__V1__VOLUME_USAGE__UNIT__BYTES, (int64_t)sf.f_blocks * fr,
		          (int64_t)sf.f_bavail * fr, (int64_t)(sf.f_blocks - sf.f_bfree) * fr);
		if (resp->usage[0])
			resp->n_usage = 1;
		resp->usage[1] = usage(CSI__V1__VOLUME_USAGE__UNIT__INODES, (int64_t)sf.f_files,
		                       (int64_t)sf.f_ffree, (int64_t)(sf.f_files - sf.f_ffree));
		if (!resp->usage[0] || !resp->usage[1])
			return grpc_status_oom(st);
		resp->n_usage = 2;
		return GRPC_OK;
	}
	return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
	                       "volume_path %s is neither a directory nor a block device", path);
}

/* VOLUME_CONDITION (node/health.h) into resp; *abnormal.  GRPC_OK (no condition when sysfs could
 * not be read: logged) or out of memory. */
static int stats_condition(struct node *n, const struct node_record *rec,
                           Csi__V1__NodeGetVolumeStatsResponse *resp, bool *abnormal,
                           struct grpc_status *st)
{
	struct node_volume_health vh;
	struct err e = {0};
	*abnormal = false;
	if (node_health_check(&n->health, &n->nvme, rec, time_mono_ms(), time(NULL), &vh, &e) < 0) {
		log_warnf("volume condition of %s: %s", rec->volume_id, e.msg);
		return GRPC_OK;
	}
	Csi__V1__VolumeCondition *c = malloc(sizeof(*c));
	if (!c)
		return grpc_status_oom(st);
	csi__v1__volume_condition__init(c);
	resp->volume_condition = c;
	c->abnormal = *abnormal = vh.abnormal;
	c->message = strdup(vh.message);
	return c->message ? GRPC_OK : grpc_status_oom(st);
}

int node_get_volume_stats(struct node *n, const Csi__V1__NodeGetVolumeStatsRequest *req,
                          Csi__V1__NodeGetVolumeStatsResponse *resp, struct grpc_status *st)
{
	struct node_record rec;
	struct stat sb;
	bool abnormal;
	int r, code;

	if ((code = node_require(st, "volume_id", req->volume_id, "volume_path", req->volume_path,
	                         NULL)) != GRPC_OK)
		return code;
	if ((code = node_volume_path(n, req->volume_path, req->staging_target_path, &sb, &r, st)) !=
	    GRPC_OK)
		return code;
	code = node_load_record(n, req->volume_id, &rec, st);
	if (code == GRPC_NOT_FOUND)
		return grpc_status_set(st, GRPC_NOT_FOUND,
		                       "volume \"%s\" is not staged on this node", req->volume_id);
	if (code != GRPC_OK ||
	    (code = node_volume_at(n, req->volume_id, &rec, req->volume_path,
	                           req->staging_target_path, GRPC_NOT_FOUND, st)) != GRPC_OK)
		return code;
	if ((code = stats_condition(n, &rec, resp, &abnormal, st)) != GRPC_OK)
		return code;
	if (r < 0)
		code = grpc_status_set(st, GRPC_INTERNAL, "stat %s: %s", req->volume_path,
		                       strerror(-r));
	else
		code = stats_usage(n, req->volume_path, &sb, resp, st);
	if (code != GRPC_OK && code != GRPC_RESOURCE_EXHAUSTED && abnormal) {
		/* a dead device has no usage to report; its condition says why */
		log_infof("volume %s: no usage while abnormal: %s", req->volume_id, st->msg);
		*st = (struct grpc_status){0};
		return GRPC_OK;
	}
	return code;
}
