/* NodeStageVolume, NodeUnstageVolume and NodeExpandVolume (csi.md §7, §8, §9.3). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "model/model.h"
#include "node/fs.h"
#include "node/internal.h"
#include "node/metrics.h"
#include "node/paths.h"
#include "rules/bounds.h"
#include "rules/keys.h"
#include "rules/mkfs.h"
#include "rules/nqn.h"
#include "rules/size.h"
#include "rules/volid.h"

static const char *ctx_get(const Csi__V1__NodeStageVolumeRequest *req, const char *key)
{
	size_t i;
	for (i = 0; i < req->n_volume_context; i++)
		if (req->volume_context[i]->key && !strcmp(req->volume_context[i]->key, key))
			return req->volume_context[i]->value;
	return NULL;
}

/* "-"? digits and nothing else (strtol also takes blanks and "+"). */
static bool decimal_text(const char *v)
{
	v += *v == '-';
	if (!*v)
		return false;
	for (; *v; v++)
		if (!isdigit((unsigned char)*v))
			return false;
	return true;
}

/* RFC 1123 host name: dot-separated labels of 1..63 letters, digits and "-", neither first nor
 * last in a label, 253 bytes at most. */
static bool dns_name(const char *v)
{
	size_t n = strlen(v), label = 0;
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (v[i] == '.' || v[i] == '\0') {
			if (label == 0 || label > 63 || v[i - 1] == '-')
				return false;
			label = 0;
		} else if (isalnum((unsigned char)v[i]) || (v[i] == '-' && label > 0)) {
			label++;
		} else {
			return false;
		}
	}
	return true;
}

/* What the node writes into the kernel's fabrics option line (csi.md §7.2) carries none of its
 * separators: target_id in the NQN grammar (rules/nqn.h), address an IPv4 or IPv6 address or a
 * DNS name, port a decimal 1..65535.  GRPC_OK or INVALID_ARGUMENT naming the key. */
static int ctx_target_values(const char *nqn, const char *addr, const char *port,
                             struct grpc_status *st)
{
	unsigned char ip[sizeof(struct in6_addr)];
	struct err e = {0};
	char *end;
	long p;
	if (rules_nqn_check(nqn, &e) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "volume_context \"%s\" is not a subsystem NQN (%s): \"%s\"",
		                       RULES_CTX_TARGET_ID, e.msg, nqn);
	if (inet_pton(AF_INET, addr, ip) != 1 && inet_pton(AF_INET6, addr, ip) != 1 &&
	    !dns_name(addr))
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "volume_context \"%s\" must be an IPv4 or IPv6 address or a "
		                       "DNS name, not \"%s\"",
		                       RULES_CTX_ADDRESS, addr);
	errno = 0;
	p = strtol(port, &end, 10);
	if (*port == '-' || !decimal_text(port) || *end || errno || p < 1 || p > 65535)
		return grpc_status_set(
		    st, GRPC_INVALID_ARGUMENT,
		    "volume_context \"%s\" must be a TCP port from 1 to 65535, not \"%s\"",
		    RULES_CTX_PORT, port);
	return GRPC_OK;
}

/* Optional integer context value in [lo, hi]: 0 absent, 1 set, -1 invalid (st set). */
static int ctx_int(const Csi__V1__NodeStageVolumeRequest *req, const char *key, long lo, long hi,
                   int *out, struct grpc_status *st)
{
	const char *v = ctx_get(req, key);
	char *end;
	long x;
	if (!v)
		return 0;
	errno = 0;
	x = strtol(v, &end, 10);
	if (!*v || *end || errno || x < lo || x > hi || !decimal_text(v)) {
		if (hi < INT_MAX)
			grpc_status_set(
			    st, GRPC_INVALID_ARGUMENT,
			    "volume_context \"%s\" must be an integer from %ld to %ld, not "
			    "\"%s\"",
			    key, lo, hi, v);
		else
			grpc_status_set(
			    st, GRPC_INVALID_ARGUMENT,
			    "volume_context \"%s\" must be an integer of at least %ld, not \"%s\"",
			    key, lo, v);
		return -1;
	}
	*out = (int)x;
	return 1;
}

/* A context value holding a JSON array of strings (absent or empty: no strings). */
static int ctx_list(const Csi__V1__NodeStageVolumeRequest *req, const char *key,
                    struct model_strs *out, struct grpc_status *st)
{
	const char *v = ctx_get(req, key);
	if (!v || !*v)
		return 0;
	if (model_strs_decode_text(v, out) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "volume_context \"%s\" must be a JSON array of strings",
		                       key),
		       -1;
	return 0;
}

/* Appends each comma-separated option of s to buf unless already present. */
static void opts_add(char *buf, size_t cap, const char *s)
{
	char tmp[1024], *tok, *sp = NULL;
	snprintf(tmp, sizeof(tmp), "%s", s);
	for (tok = strtok_r(tmp, ",", &sp); tok; tok = strtok_r(NULL, ",", &sp)) {
		const char *p = buf;
		size_t tl = strlen(tok);
		int dup = 0;
		while (*p) {
			const char *end = strchr(p, ',');
			size_t l = end ? (size_t)(end - p) : strlen(p);
			if (l == tl && !strncmp(p, tok, l))
				dup = 1;
			p = end ? end + 1 : p + l;
		}
		if (!dup && strlen(buf) + tl + 2 < cap) {
			if (*buf)
				strcat(buf, ",");
			strcat(buf, tok);
		}
	}
}

static bool mount_is_dev(const struct node_mount *m, const struct nvme_ns_dev *d, bool block)
{
	if (!block)
		return m->major == d->major && m->minor == d->minor;
	const char *b = strrchr(m->root, '/');
	return b && !strcmp(b + 1, d->name);
}

static int stage_fs(struct node *n, const Csi__V1__NodeStageVolumeRequest *req,
                    const struct nvme_ns_dev *d, const char *fs, bool ro, struct grpc_status *st)
{
	char type[64], opts[2048] = "", data[2048];
	struct model_strs mkfs = {0}, mopts = {0};
	size_t i;
	unsigned long flags;
	int blank, code, r;

	if ((code = node_fs_probe(d->path, req->volume_id, &blank, type, sizeof(type), st)) !=
	    GRPC_OK)
		return code;
	if (!blank && strcmp(type, fs) != 0)
		return grpc_status_set(st, GRPC_FAILED_PRECONDITION,
		                       "volume \"%s\" holds a %s filesystem but %s was requested",
		                       req->volume_id, type, fs);
	if (blank && ro)
		return grpc_status_set(st, GRPC_FAILED_PRECONDITION,
		                       "volume \"%s\" has no filesystem and is staged read-only",
		                       req->volume_id);
	if (ctx_list(req, RULES_CTX_MKFS_OPTIONS, &mkfs, st) < 0 ||
	    ctx_list(req, RULES_CTX_MOUNT_OPTIONS, &mopts, st) < 0) {
		code = st->code;
		goto out;
	}
	if (blank && (code = node_fs_mkfs(fs, mkfs.v, mkfs.n, d->path, st)) != GRPC_OK)
		goto out;
	for (i = 0; i < mopts.n; i++)
		opts_add(opts, sizeof(opts), mopts.v[i]);
	for (i = 0; i < req->volume_capability->mount->n_mount_flags; i++)
		opts_add(opts, sizeof(opts), req->volume_capability->mount->mount_flags[i]);
	if (ro) {
		opts_add(opts, sizeof(opts), "ro");
		opts_add(opts, sizeof(opts), !strcmp(fs, "xfs") ? "norecovery" : "noload");
	}
	if (node_mount_flags(opts, &flags, data, sizeof(data)) < 0) {
		code = grpc_status_set(st, GRPC_INVALID_ARGUMENT, "mount options too long");
		goto out;
	}
	r = n->sys->mount(n->sys->ctx, d->path, req->staging_target_path, fs, flags,
	                  data[0] ? data : NULL);
	if (r < 0) {
		code = grpc_status_set(st, GRPC_INTERNAL, "mount %s on %s (%s, \"%s\"): %s",
		                       d->path, req->staging_target_path, fs, opts, strerror(-r));
		goto out;
	}
	code = GRPC_OK;
out:
	model_strs_clear(&mkfs);
	model_strs_clear(&mopts);
	return code;
}

static int stage_block(struct node *n, int staging_fd, const char *staging,
                       const struct nvme_ns_dev *d, bool ro, struct grpc_status *st)
{
	char file[PATH_MAX];
	int fd, r;
	snprintf(file, sizeof(file), "%s/device", staging);
	fd = openat(staging_fd, "device", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "create %s: %s", file, strerror(errno));
	close(fd);
	if ((r = n->sys->mount(n->sys->ctx, d->path, file, NULL, MS_BIND, NULL)) < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "bind mount %s on %s: %s", d->path, file,
		                       strerror(-r));
	if (ro && (r = n->sys->blk_set_ro(n->sys->ctx, d->path)) < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "mark %s read-only (BLKROSET): %s",
		                       d->path, strerror(-r));
	return GRPC_OK;
}

/* What a stage request asks for, validated (csi.md §7.1 steps 3-4): the target, the tunables of
 * the connect line, the access type and the filesystem. */
struct stage_plan {
	const char *nqn, *addr, *port;
	const char *fs; /* NULL for a block volume */
	bool block, ro;
	enum node_dhchap_mode dhchap;
	struct nvme_connect_args conn;
};

/* The protocol of the volume (context first, then the ID's segment, then the default). */
static int plan_protocol(const Csi__V1__NodeStageVolumeRequest *req, struct grpc_status *st)
{
	char proto[64] = "";
	struct err e = {0};
	if (node_volume_id_parse(req->volume_id, proto, sizeof(proto), &e) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s", e.msg);
	const char *p = ctx_get(req, RULES_CTX_PROTOCOL_TYPE);
	p = p && *p ? p : proto[0] ? proto : RULES_PROTOCOL_NVMEOF_TCP;
	if (strcmp(p, RULES_PROTOCOL_NVMEOF_TCP) != 0)
		return grpc_status_set(st, GRPC_FAILED_PRECONDITION, "unsupported protocol \"%s\"",
		                       p);
	return GRPC_OK;
}

/* The target and the optional tunables of the connect line (csi.md §3, §7.2). */
static int plan_target(const Csi__V1__NodeStageVolumeRequest *req, struct stage_plan *p,
                       struct grpc_status *st)
{
	struct nvme_connect_args *a = &p->conn;
	int r;
	p->nqn = ctx_get(req, RULES_CTX_TARGET_ID);
	p->addr = ctx_get(req, RULES_CTX_ADDRESS);
	p->port = ctx_get(req, RULES_CTX_PORT);
	if (!p->nqn || !*p->nqn || !p->addr || !*p->addr || !p->port || !*p->port)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "volume_context missing required key \"%s\"",
		                       !p->nqn || !*p->nqn     ? RULES_CTX_TARGET_ID
		                       : !p->addr || !*p->addr ? RULES_CTX_ADDRESS
		                                               : RULES_CTX_PORT);
	if (ctx_target_values(p->nqn, p->addr, p->port, st) != GRPC_OK)
		return st->code;
	*a = (struct nvme_connect_args){.traddr = p->addr, .trsvcid = p->port, .subsysnqn = p->nqn};
	if ((r = ctx_int(req, RULES_CTX_MAX_QUEUE_SIZE, RULES_MAX_QUEUE_SIZE_MIN,
	                 RULES_MAX_QUEUE_SIZE_MAX, &a->queue_size, st)) < 0)
		return st->code;
	a->has_queue_size = r;
	if ((r = ctx_int(req, RULES_CTX_CTRL_LOSS_TMO, RULES_CTRL_LOSS_TMO_MIN,
	                 RULES_CTRL_LOSS_TMO_MAX, &a->ctrl_loss_tmo, st)) < 0)
		return st->code;
	a->has_ctrl_loss_tmo = r;
	if ((r = ctx_int(req, RULES_CTX_RECONNECT_DELAY, RULES_RECONNECT_DELAY_MIN,
	                 RULES_RECONNECT_DELAY_MAX, &a->reconnect_delay, st)) < 0)
		return st->code;
	a->has_reconnect_delay = r;
	return GRPC_OK;
}

/* Plan: everything the request must say, checked before anything is touched. */
static int stage_plan(const Csi__V1__NodeStageVolumeRequest *req, struct stage_plan *p,
                      struct grpc_status *st)
{
	int code;
	memset(p, 0, sizeof(*p));
	if ((code = plan_protocol(req, st)) != GRPC_OK ||
	    (code = plan_target(req, p, st)) != GRPC_OK ||
	    (code = node_dhchap_mode_parse(ctx_get(req, RULES_CTX_DHCHAP), &p->dhchap, st)) !=
	        GRPC_OK)
		return code;
	p->block = req->volume_capability->access_type_case ==
	           CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	p->ro = node_mode_read_only(req->volume_capability);
	if (p->block)
		return GRPC_OK;
	p->fs = ctx_get(req, RULES_CTX_FS_TYPE);
	if (!p->fs || !*p->fs)
		p->fs = req->volume_capability->mount->fs_type;
	if (!p->fs || !*p->fs)
		p->fs = RULES_FS_DEFAULT;
	if (!rules_fstype_supported(p->fs))
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported fsType \"%s\"",
		                       p->fs);
	return GRPC_OK;
}

/* Idempotency (§7.1 step 5): *done when the volume is already staged the same way. */
static int stage_already(struct node *n, const Csi__V1__NodeStageVolumeRequest *req,
                         const struct stage_plan *p, bool *done, struct grpc_status *st)
{
	char mpath[PATH_MAX];
	struct node_record old;
	int code = node_load_record(n, req->volume_id, &old, st), r;
	*done = false;
	if (code == GRPC_NOT_FOUND || (code == GRPC_OK && old.legacy))
		return GRPC_OK;
	if (code != GRPC_OK)
		return code;
	bool oblock = !strcmp(old.access_type, "block");
	snprintf(mpath, sizeof(mpath), oblock ? "%s/device" : "%s", req->staging_target_path);
	if ((r = node_is_mounted(n, mpath, NULL)) < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "probe mount point %s: %s", mpath,
		                       strerror(-r));
	if (r == 0)
		return GRPC_OK;
	*done = true;
	if (oblock != p->block)
		return grpc_status_set(st, GRPC_ALREADY_EXISTS,
		                       "volume \"%s\" is already staged as %s", req->volume_id,
		                       old.access_type);
	return GRPC_OK;
}

/* Attach and resolve (§7.2, §7.3): the namespace device of the target in *d; with the node's
 * DH-HMAC-CHAP secrets when the volume asks for authentication (keys wiped before return). */
static int stage_attach(struct node *n, const char *id, struct stage_plan *p, struct nvme_ns_dev *d,
                        struct grpc_status *st)
{
	struct nvme_host_identity hid;
	struct rules_ns_identity derived;
	struct model_dhchap_file keys = {0};
	char ctrl[NVME_NAME_MAX] = "";
	struct err e = {0};
	int r, code = GRPC_OK;
	if (nvme_host_identity_read(n->etc_nvme_dir, &hid, &e) < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "read host identity: %s", e.msg);
	p->conn.hostnqn = hid.hostnqn;
	p->conn.hostid = hid.hostid;
	if ((code = node_dhchap_prepare(n, id, p->dhchap, hid.hostnqn, &keys, &p->conn, st)) !=
	    GRPC_OK)
		goto out;
	uint64_t t0 = time_mono_ns();
	r = nvme_attach(&n->nvme, &p->conn, ctrl, &e);
	if (r == -EKEYREJECTED && node_dhchap_fallback(&keys, p->dhchap, &p->conn))
		r = nvme_attach(&n->nvme, &p->conn, ctrl, &e);
	if (r < 0 || (r = nvme_ns_wait(&n->nvme, p->nqn, d, &e)) < 0) {
		node_metrics_connect(false, (double)(time_mono_ns() - t0) / 1e9);
		code = node_dhchap_connect_status(r, &e, p->dhchap, &keys, &p->conn, st);
		goto out;
	}
	node_metrics_connect(true, (double)(time_mono_ns() - t0) / 1e9);
	if (p->dhchap != NODE_DHCHAP_OFF &&
	    (code = node_dhchap_verify(n, id, ctrl, p->nqn, st)) != GRPC_OK)
		goto out;
	rules_ns_identity_derive(p->nqn, &derived);
	if ((d->uuid[0] && strcasecmp(d->uuid, derived.uuid)) ||
	    (d->nguid[0] && strcasecmp(d->nguid, derived.nguid)))
		log_warn("namespace identity differs from the one derived from the NQN", "device",
		         d->name, "uuid", d->uuid, "derived", derived.uuid, "nqn", p->nqn);
out:
	p->conn.dhchap_secret = p->conn.dhchap_ctrl_secret = NULL;
	model_dhchap_file_wipe(&keys);
	return code;
}

/* Filesystem or block (§7.4): format a blank device and mount it, or bind the device, unless the
 * staging path already is a mount of this device. */
static int stage_mount(struct node *n, const Csi__V1__NodeStageVolumeRequest *req,
                       const struct stage_plan *p, const struct nvme_ns_dev *d,
                       struct grpc_status *st)
{
	char mpath[PATH_MAX];
	struct node_mount m;
	int r, fd, code;
	if ((r = node_path_open_dir(n->kubelet_dir, req->staging_target_path, true, &fd)) < 0)
		return node_path_status(r, n->kubelet_dir, "staging_target_path",
		                        req->staging_target_path, "create", st);
	snprintf(mpath, sizeof(mpath), p->block ? "%s/device" : "%s", req->staging_target_path);
	if ((r = node_is_mounted(n, mpath, &m)) < 0)
		code = grpc_status_set(st, GRPC_INTERNAL, "probe mount point %s: %s", mpath,
		                       strerror(-r));
	else if (r == 1 && !mount_is_dev(&m, d, p->block))
		code = grpc_status_set(st, GRPC_INTERNAL,
		                       "staging path %s is a mount of another device", mpath);
	else if (r == 1) {
		log_info(
		    "staging path already mounted from the volume's device; rewriting the record",
		    "volume", req->volume_id, "path", mpath);
		code = GRPC_OK;
	} else if (p->block)
		code = stage_block(n, fd, req->staging_target_path, d, p->ro, st);
	else
		code = stage_fs(n, req, d, p->fs, p->ro, st);
	close(fd);
	return code;
}

/* Stage record (§7.5). */
static int stage_record(struct node *n, const Csi__V1__NodeStageVolumeRequest *req,
                        const struct stage_plan *p, const struct nvme_ns_dev *d,
                        struct grpc_status *st)
{
	struct node_record rec;
	struct err e = {0};
	memset(&rec, 0, sizeof(rec));
	str_copy(rec.protocol_type, sizeof(rec.protocol_type), RULES_PROTOCOL_NVMEOF_TCP);
	str_copy(rec.access_type, sizeof(rec.access_type), p->block ? "block" : "filesystem");
	str_copy(rec.fs_type, sizeof(rec.fs_type), p->block ? "" : p->fs);
	str_copy(rec.subsys_nqn, sizeof(rec.subsys_nqn), p->nqn);
	str_copy(rec.address, sizeof(rec.address), p->addr);
	str_copy(rec.port, sizeof(rec.port), p->port);
	str_copy(rec.volume_id, sizeof(rec.volume_id), req->volume_id);
	str_copy(rec.staging_path, sizeof(rec.staging_path), req->staging_target_path);
	str_copy(rec.namespace_uuid, sizeof(rec.namespace_uuid), d->uuid);
	str_copy(rec.namespace_nguid, sizeof(rec.namespace_nguid), d->nguid);
	int r = node_record_write(n->state_dir, &rec, &e);
	if (r < 0) /* no space (or memory) is RESOURCE_EXHAUSTED, as everywhere (grpc/status.h) */
		return grpc_status_set(st,
		                       r == -ENOSPC || r == -EDQUOT || r == -ENOMEM
		                           ? GRPC_RESOURCE_EXHAUSTED
		                           : GRPC_INTERNAL,
		                       "write stage record: %s", e.msg);
	log_info("staged volume", "volume", req->volume_id, "device", d->name, "staging",
	         req->staging_target_path);
	return GRPC_OK;
}

/* The staging directory opens below the kubelet directory without a symlink (made when
 * missing), checked before the kernel is asked to connect. */
static int stage_path_usable(struct node *n, const char *staging, struct grpc_status *st)
{
	int fd, r = node_path_open_dir(n->kubelet_dir, staging, true, &fd);
	if (r < 0)
		return node_path_status(r, n->kubelet_dir, "staging_target_path", staging, "create",
		                        st);
	close(fd);
	return GRPC_OK;
}

/* csi.md §7.1: plan → attach → format and mount → record, under the volume's lock. */
int node_stage_volume(struct node *n, const Csi__V1__NodeStageVolumeRequest *req,
                      Csi__V1__NodeStageVolumeResponse *resp, struct grpc_status *st)
{
	struct stage_plan plan;
	struct nvme_ns_dev d;
	struct keylock_hold hold;
	bool done = false;
	int code;
	(void)resp;

	if ((code = node_require(st, "volume_id", req->volume_id, "staging_target_path",
	                         req->staging_target_path, NULL)) != GRPC_OK)
		return code;
	if ((code = node_require_capability(req->volume_capability, st)) != GRPC_OK ||
	    (code = node_path_check(n->kubelet_dir, NODE_PATH_STAGING, "staging_target_path",
	                            req->staging_target_path, st)) != GRPC_OK)
		return code;
	if ((code = node_lock_volume(n, &hold, req->volume_id, st)) != GRPC_OK)
		return code;
	if ((code = stage_plan(req, &plan, st)) == GRPC_OK &&
	    (code = stage_path_usable(n, req->staging_target_path, st)) == GRPC_OK &&
	    (code = stage_already(n, req, &plan, &done, st)) == GRPC_OK && !done &&
	    (code = stage_attach(n, req->volume_id, &plan, &d, st)) == GRPC_OK &&
	    (code = stage_mount(n, req, &plan, &d, st)) == GRPC_OK)
		code = stage_record(n, req, &plan, &d, st);
	keylock_release(&n->locks, &hold);
	return code;
}

/* Unmounts path when it is a mount point.  GRPC_OK or GRPC_INTERNAL. */
static int unmount_if(struct node *n, const char *path, const char *staging, struct grpc_status *st)
{
	int r = node_is_mounted(n, path, NULL);
	if (r < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "probe mount point %s: %s", path,
		                       strerror(-r));
	if (r == 0)
		return GRPC_OK;
	r = n->sys->umount(n->sys->ctx, path);
	if (r == -EBUSY)
		return grpc_status_set(st, GRPC_INTERNAL, "staging path %s is busy", staging);
	if (r < 0 && r != -EINVAL && r != -ENOENT)
		return grpc_status_set(st, GRPC_INTERNAL, "unmount %s: %s", path, strerror(-r));
	return GRPC_OK;
}

/* No record (csi.md §8 step 2): OK unless the staging path or its device file is still mounted. */
static int unstage_unrecorded(struct node *n, const char *id, const char *staging,
                              const char *dev_file, struct grpc_status *st)
{
	int r1 = node_is_mounted(n, staging, NULL), r2 = node_is_mounted(n, dev_file, NULL);
	if (r1 < 0 || r2 < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "probe mount point %s: %s", staging,
		                       strerror(r1 < 0 ? -r1 : -r2));
	if (r1 == 1 || r2 == 1)
		return grpc_status_set(st, GRPC_INTERNAL,
		                       "stage state for \"%s\" is missing but \"%s\" is still "
		                       "mounted; refusing to report the volume unstaged",
		                       id, r2 == 1 ? dev_file : staging);
	return GRPC_OK;
}

/* Block (csi.md §8 step 3): unmounts <staging>/device and removes the file stage created — a
 * regular file, reached below the kubelet directory without a symlink. */
static int unstage_device_file(struct node *n, const char *staging, const char *dev_file,
                               struct grpc_status *st)
{
	struct stat sb;
	int code, fd, r;
	if ((code = unmount_if(n, dev_file, staging, st)) != GRPC_OK)
		return code;
	r = node_path_open_dir(n->kubelet_dir, staging, false, &fd);
	if (r == -ENOENT)
		return GRPC_OK;
	if (r < 0)
		return node_path_status(r, n->kubelet_dir, "staging_target_path", staging, "open",
		                        st);
	r = 0;
	if (fstatat(fd, "device", &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) &&
	    unlinkat(fd, "device", 0) < 0 && errno != ENOENT)
		r = -errno;
	close(fd);
	if (r < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "remove %s: %s", dev_file, strerror(-r));
	return GRPC_OK;
}

/* Unmount, disconnect, forget (csi.md §8 steps 3-6) for a volume with a record. */
static int unstage_recorded(struct node *n, const char *id, const struct node_record *rec,
                            const char *staging, struct grpc_status *st)
{
	char dev_file[PATH_MAX];
	struct err e = {0};
	int code, r;
	if ((code = node_staged_at(id, rec, staging, GRPC_FAILED_PRECONDITION, st)) != GRPC_OK)
		return code;
	snprintf(dev_file, sizeof(dev_file), "%s/device", staging);
	if ((rec->legacy || !strcmp(rec->access_type, "block")) &&
	    (code = unstage_device_file(n, staging, dev_file, st)) != GRPC_OK)
		return code;
	if ((rec->legacy || strcmp(rec->access_type, "block") != 0) &&
	    (code = unmount_if(n, staging, staging, st)) != GRPC_OK)
		return code;
	if ((r = nvme_detach_subsys(&n->nvme, rec->subsys_nqn, &e)) < 0)
		return node_status_from_nvme(r, &e, st);
	if ((r = node_record_delete(n->state_dir, id, &e)) < 0)
		return grpc_status_set(st, GRPC_INTERNAL, "delete stage record: %s", e.msg);
	log_info("unstaged volume", "volume", id);
	return GRPC_OK;
}

int node_unstage_volume(struct node *n, const Csi__V1__NodeUnstageVolumeRequest *req,
                        Csi__V1__NodeUnstageVolumeResponse *resp, struct grpc_status *st)
{
	char dev_file[PATH_MAX];
	struct node_record rec;
	int code;
	(void)resp;

	if ((code = node_require(st, "volume_id", req->volume_id, "staging_target_path",
	                         req->staging_target_path, NULL)) != GRPC_OK ||
	    (code = node_path_check(n->kubelet_dir, NODE_PATH_STAGING, "staging_target_path",
	                            req->staging_target_path, st)) != GRPC_OK)
		return code;
	struct keylock_hold hold;
	if ((code = node_lock_volume(n, &hold, req->volume_id, st)) != GRPC_OK)
		return code;
	snprintf(dev_file, sizeof(dev_file), "%s/device", req->staging_target_path);
	code = node_load_record(n, req->volume_id, &rec, st);
	if (code == GRPC_NOT_FOUND)
		code =
		    unstage_unrecorded(n, req->volume_id, req->staging_target_path, dev_file, st);
	else if (code == GRPC_OK)
		code = unstage_recorded(n, req->volume_id, &rec, req->staging_target_path, st);
	keylock_release(&n->locks, &hold);
	return code;
}

int node_expand_volume(struct node *n, const Csi__V1__NodeExpandVolumeRequest *req,
                       Csi__V1__NodeExpandVolumeResponse *resp, struct grpc_status *st)
{
	struct node_record rec;
	struct nvme_ns_dev d;
	struct err e = {0};
	struct stat sb;
	const char *mp;
	int code, r;

	if ((code = node_require(st, "volume_id", req->volume_id, "volume_path", req->volume_path,
	                         NULL)) != GRPC_OK)
		return code;
	if (req->capacity_range && (req->capacity_range->required_bytes < 0 ||
	                            req->capacity_range->required_bytes > RULES_CAPACITY_MAX)) {
		char why[200];
		return grpc_status_set(
		    st, GRPC_OUT_OF_RANGE, "%s",
		    rules_size_refusal(req->capacity_range->required_bytes, 0, why, sizeof(why)));
	}
	if ((code = node_volume_path(n, req->volume_path, req->staging_target_path, &sb, &r, st)) !=
	    GRPC_OK)
		return code;
	if (r < 0)
		return node_path_status(r, n->kubelet_dir, "volume_path", req->volume_path, "stat",
		                        st);
	struct keylock_hold hold;
	if ((code = node_lock_volume(n, &hold, req->volume_id, st)) != GRPC_OK)
		return code;
	code = node_load_record(n, req->volume_id, &rec, st);
	if (code == GRPC_NOT_FOUND)
		code = grpc_status_set(st, GRPC_NOT_FOUND,
		                       "volume \"%s\" is not staged on this node", req->volume_id);
	if (code != GRPC_OK || (code = node_volume_at(n, req->volume_id, &rec, req->volume_path,
	                                              req->staging_target_path,
	                                              GRPC_FAILED_PRECONDITION, st)) != GRPC_OK)
		goto out;
	if ((r = nvme_rescan_subsys(&n->nvme, rec.subsys_nqn, &e)) < 0 ||
	    (r = nvme_ns_wait(&n->nvme, rec.subsys_nqn, &d, &e)) < 0) {
		code = node_status_from_nvme(r, &e, st);
		goto out;
	}
	if ((rec.namespace_uuid[0] && strcasecmp(rec.namespace_uuid, d.uuid)) ||
	    (rec.namespace_nguid[0] && strcasecmp(rec.namespace_nguid, d.nguid))) {
		code = grpc_status_set(
		    st, GRPC_FAILED_PRECONDITION, "device %s no longer carries namespace %s of %s",
		    d.name, rec.namespace_uuid[0] ? rec.namespace_uuid : rec.namespace_nguid,
		    rec.subsys_nqn);
		goto out;
	}
	if (req->capacity_range && req->capacity_range->required_bytes > 0 &&
	    (r = nvme_ns_wait_size(&n->nvme, &d, (uint64_t)req->capacity_range->required_bytes,
	                           &e)) < 0) {
		code = node_status_from_nvme(r, &e, st);
		goto out;
	}
	if (strcmp(rec.access_type, "block") != 0) {
		mp = rec.staging_path[0] ? rec.staging_path
		     : req->staging_target_path && *req->staging_target_path
		         ? req->staging_target_path
		         : req->volume_path;
		if ((code = node_fs_grow(rec.fs_type[0] ? rec.fs_type : "ext4", d.path, mp, st)) !=
		    GRPC_OK)
			goto out;
	}
	resp->capacity_bytes = (int64_t)d.size_bytes;
	code = GRPC_OK;
out:
	keylock_release(&n->locks, &hold);
	return code;
}
