/* NodePublishVolume and NodeUnpublishVolume (csi.md §9.1, §9.2): a bind of the staged volume on
 * kubelet's target path, created and removed only below the kubelet directory (node/paths.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "node/internal.h"
#include "node/paths.h"

/* Creates the target (an empty file for a block volume, a directory otherwise; parents 0750)
 * below the kubelet directory without following a symlink. */
static int create_target(struct node *n, const char *target, bool block, struct grpc_status *st)
{
	const char *leaf;
	int fd, dfd, r;
	if (!block) {
		r = node_path_open_dir(n->kubelet_dir, target, true, &fd);
		if (r == 0)
			close(fd);
		return r < 0 ? node_path_status(r, n->kubelet_dir, "target_path", target, "create",
		                                st)
		             : GRPC_OK;
	}
	r = node_path_open_parent(n->kubelet_dir, target, true, &dfd, &leaf);
	if (r < 0)
		return node_path_status(r, n->kubelet_dir, "target_path", target, "create", st);
	fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
	r = fd < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	close(dfd);
	return r < 0 ? node_path_status(r, n->kubelet_dir, "target_path", target, "create", st)
	             : GRPC_OK;
}

/* Creates the target and bind-mounts src on it, read-only when ro (csi.md §9.1). */
static int publish_bind(struct node *n, const char *target, const char *src, bool block, bool ro,
                        struct grpc_status *st)
{
	int r, code;
	if ((code = create_target(n, target, block, st)) != GRPC_OK)
		return code;
	r = n->sys->mount(n->sys->ctx, src, target, NULL, MS_BIND, NULL);
	if (r == 0 && ro)
		r = n->sys->mount(n->sys->ctx, NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY,
		                  NULL);
	if (r < 0) {
		if (ro) /* do not leave a writable bind behind */
			n->sys->umount(n->sys->ctx, target);
		return grpc_status_set(st, GRPC_INTERNAL, "bind mount %s on %s: %s", src, target,
		                       strerror(-r));
	}
	return GRPC_OK;
}

int node_staged_at(const char *id, const struct node_record *rec, const char *staging, int code,
                   struct grpc_status *st)
{
	if (rec->staging_path[0] && strcmp(rec->staging_path, staging) != 0)
		return grpc_status_set(st, code,
		                       "volume \"%s\" is staged at %s on this node, not at %s", id,
		                       rec->staging_path, staging);
	return GRPC_OK;
}

int node_volume_path(struct node *n, const char *volume_path, const char *staging, struct stat *sb,
                     int *stat_err, struct grpc_status *st)
{
	int code, r;
	*stat_err = 0;
	if ((code = node_path_check(n->kubelet_dir, NODE_PATH_VOLUME, "volume_path", volume_path,
	                            st)) != GRPC_OK ||
	    (staging && *staging &&
	     (code = node_path_check(n->kubelet_dir, NODE_PATH_STAGING, "staging_target_path",
	                             staging, st)) != GRPC_OK))
		return code;
	r = node_path_lookup(n->kubelet_dir, volume_path);
	if (r == 0)
		r = n->sys->stat(n->sys->ctx, volume_path, sb);
	if (r == -ENOENT)
		return grpc_status_set(st, GRPC_NOT_FOUND, "path %s does not exist", volume_path);
	if (r == -ELOOP || r == -ENOTDIR)
		return node_path_status(r, n->kubelet_dir, "volume_path", volume_path, "stat", st);
	*stat_err = r;
	return GRPC_OK;
}

int node_volume_at(struct node *n, const char *id, const struct node_record *rec,
                   const char *volume_path, const char *staging, int code, struct grpc_status *st)
{
	struct grpc_status ignored = {0};
	int r;
	if (staging && *staging && (r = node_staged_at(id, rec, staging, code, st)) != GRPC_OK)
		return r;
	if (node_path_check(n->kubelet_dir, NODE_PATH_STAGING, "volume_path", volume_path,
	                    &ignored) == GRPC_OK)
		return node_staged_at(id, rec, volume_path, code, st);
	return GRPC_OK;
}

/* Validates the request and loads the record (csi.md §9.1 steps 1-2). */
static int publish_check(struct node *n, const Csi__V1__NodePublishVolumeRequest *req,
                         struct grpc_status *st)
{
	int code;
	if ((code = node_require(st, "volume_id", req->volume_id, "staging_target_path",
	                         req->staging_target_path, "target_path", req->target_path,
	                         NULL)) != GRPC_OK ||
	    (code = node_require_capability(req->volume_capability, st)) != GRPC_OK ||
	    (code = node_path_check(n->kubelet_dir, NODE_PATH_STAGING, "staging_target_path",
	                            req->staging_target_path, st)) != GRPC_OK)
		return code;
	return node_path_check(n->kubelet_dir, NODE_PATH_TARGET, "target_path", req->target_path,
	                       st);
}

int node_publish_volume(struct node *n, const Csi__V1__NodePublishVolumeRequest *req,
                        Csi__V1__NodePublishVolumeResponse *resp, struct grpc_status *st)
{
	struct node_record rec;
	struct node_mount sm, tm;
	char src[PATH_MAX];
	bool block, ro;
	int r, code;
	(void)resp;

	if ((code = publish_check(n, req, st)) != GRPC_OK)
		return code;
	struct keylock_hold hold;
	if ((code = node_lock_volume(n, &hold, req->volume_id, st)) != GRPC_OK)
		return code;
	code = node_load_record(n, req->volume_id, &rec, st);
	if (code == GRPC_NOT_FOUND)
		code = grpc_status_set(st, GRPC_FAILED_PRECONDITION,
		                       "volume \"%s\" is not staged on this node", req->volume_id);
	if (code != GRPC_OK ||
	    (code = node_staged_at(req->volume_id, &rec, req->staging_target_path,
	                           GRPC_FAILED_PRECONDITION, st)) != GRPC_OK)
		goto out;
	block = req->volume_capability->access_type_case ==
	        CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	if (!rec.legacy && strcmp(rec.access_type, block ? "block" : "filesystem") != 0) {
		code = grpc_status_set(st, GRPC_ALREADY_EXISTS,
		                       "volume \"%s\" is staged as %s but %s access was requested",
		                       req->volume_id, rec.access_type,
		                       block ? "block" : "filesystem");
		goto out;
	}
	ro = req->readonly || node_mode_read_only(req->volume_capability);
	snprintf(src, sizeof(src), block ? "%s/device" : "%s", req->staging_target_path);
	r = node_is_mounted(n, req->target_path, &tm);
	if (r < 0) {
		code = grpc_status_set(st, GRPC_INTERNAL, "probe mount point %s: %s",
		                       req->target_path, strerror(-r));
		goto out;
	}
	if (r == 1) {
		if (node_is_mounted(n, src, &sm) == 1 && sm.major == tm.major &&
		    sm.minor == tm.minor && !strcmp(sm.root, tm.root)) {
			code = tm.read_only == ro
			           ? GRPC_OK
			           : grpc_status_set(st, GRPC_ALREADY_EXISTS,
			                             "target path %s is already published %s",
			                             req->target_path,
			                             tm.read_only ? "read-only" : "read-write");
			goto out;
		}
		code = grpc_status_set(st, GRPC_ALREADY_EXISTS,
		                       "target path %s is already a mount of something else",
		                       req->target_path);
		goto out;
	}
	if ((code = publish_bind(n, req->target_path, src, block, ro, st)) != GRPC_OK)
		goto out;
	log_info("published volume", "volume", req->volume_id, "target", req->target_path,
	         "readonly", ro ? "true" : "false");
	code = GRPC_OK;
out:
	keylock_release(&n->locks, &hold);
	return code;
}

/* Whether the mount tm on the target is a bind of the volume's staged source, compared as
 * publish compares (device and root): 1, 0, or a negative errno from the probe.  A legacy
 * record names no staging path: its volume's mounts on kubelet's target paths count as its own. */
static int bind_of_volume(struct node *n, const struct node_record *rec,
                          const struct node_mount *tm)
{
	char src[PATH_MAX];
	struct node_mount sm;
	if (rec->legacy || !rec->staging_path[0])
		return 1;
	snprintf(src, sizeof(src), strcmp(rec->access_type, "block") ? "%s" : "%s/device",
	         rec->staging_path);
	int r = node_is_mounted(n, src, &sm);
	if (r <= 0)
		return r;
	return sm.major == tm->major && sm.minor == tm->minor && !strcmp(sm.root, tm->root);
}

/* Unmounts the volume's binds on the target (stacked ones too); a mount that is not the
 * volume's is left in place: FAILED_PRECONDITION. */
static int unpublish_unmount(struct node *n, const char *id, const char *target,
                             struct grpc_status *st)
{
	struct node_record rec;
	struct node_mount tm;
	bool loaded = false;
	int r, code;
	for (int guard = 0; guard < 8; guard++) {
		if ((r = node_is_mounted(n, target, &tm)) < 0)
			return grpc_status_set(st, GRPC_INTERNAL, "probe mount point %s: %s",
			                       target, strerror(-r));
		if (r == 0)
			return GRPC_OK;
		if (!loaded && (code = node_load_record(n, id, &rec, st)) != GRPC_OK)
			return code != GRPC_NOT_FOUND
			           ? code
			           : grpc_status_set(
			                 st, GRPC_FAILED_PRECONDITION,
			                 "target path %s is a mount point but volume \"%s\" "
			                 "is not staged on this node; left in place",
			                 target, id);
		loaded = true;
		if ((r = bind_of_volume(n, &rec, &tm)) < 0)
			return grpc_status_set(st, GRPC_INTERNAL, "probe mount point %s: %s",
			                       rec.staging_path, strerror(-r));
		if (r == 0)
			return grpc_status_set(
			    st, GRPC_FAILED_PRECONDITION,
			    "target path %s is a mount of something other than volume "
			    "\"%s\"; left in place",
			    target, id);
		r = n->sys->umount(n->sys->ctx, target);
		if (r < 0 && r != -EINVAL)
			return grpc_status_set(st, GRPC_INTERNAL, "unmount %s: %s", target,
			                       r == -EBUSY ? "target is busy" : strerror(-r));
	}
	return GRPC_OK;
}

/* Removes what publish created at leaf of dfd: an empty directory, or an empty regular file (a
 * block target).  Anything else is left in place (logged); the volume is not published there. */
static int unpublish_remove(int dfd, const char *leaf, const char *id, const char *target,
                            struct grpc_status *st)
{
	struct stat sb;
	int r = 0;
	if (fstatat(dfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? GRPC_OK
		                       : grpc_status_set(st, GRPC_INTERNAL, "stat %s: %s", target,
		                                         strerror(errno));
	if (S_ISDIR(sb.st_mode))
		r = unlinkat(dfd, leaf, AT_REMOVEDIR);
	else if (S_ISREG(sb.st_mode) && sb.st_size == 0)
		r = unlinkat(dfd, leaf, 0);
	else
		errno = EEXIST;
	if (r == 0 || errno == ENOENT)
		return GRPC_OK;
	if (errno == EEXIST || errno == ENOTEMPTY) {
		log_warn(
		    "target path left in place: not an empty directory or file the node created",
		    "volume", id, "target", target);
		return GRPC_OK;
	}
	return grpc_status_set(st, GRPC_INTERNAL, "remove %s: %s", target, strerror(errno));
}

int node_unpublish_volume(struct node *n, const Csi__V1__NodeUnpublishVolumeRequest *req,
                          Csi__V1__NodeUnpublishVolumeResponse *resp, struct grpc_status *st)
{
	const char *leaf;
	int r, code, dfd;
	(void)resp;
	if ((code = node_require(st, "volume_id", req->volume_id, "target_path", req->target_path,
	                         NULL)) != GRPC_OK ||
	    (code = node_path_check(n->kubelet_dir, NODE_PATH_TARGET, "target_path",
	                            req->target_path, st)) != GRPC_OK)
		return code;
	struct keylock_hold hold;
	if ((code = node_lock_volume(n, &hold, req->volume_id, st)) != GRPC_OK)
		return code;
	r = node_path_open_parent(n->kubelet_dir, req->target_path, false, &dfd, &leaf);
	if (r == -ENOENT) /* nothing was published there */
		code = GRPC_OK;
	else if (r < 0)
		code = node_path_status(r, n->kubelet_dir, "target_path", req->target_path, "open",
		                        st);
	else if ((code = unpublish_unmount(n, req->volume_id, req->target_path, st)) == GRPC_OK)
		code = unpublish_remove(dfd, leaf, req->volume_id, req->target_path, st);
	if (dfd >= 0)
		close(dfd);
	keylock_release(&n->locks, &hold);
	return code;
}
