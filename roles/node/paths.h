/* node/paths — the only paths the node creates, mounts on, unmounts and removes: kubelet's own
 * staging and publish paths below the kubelet directory (--kubelet-dir, default
 * /var/lib/kubelet; docs/cli.md).
 *
 * A path is accepted when it is absolute, normalised (no ".", ".." or empty components, no
 * trailing "/", no control characters) and, below the kubelet directory <k>, in one of kubelet's
 * layouts:
 *   staging_target_path  <k>/plugins/kubernetes.io/csi/<driver>/<volume hash>/globalmount
 *                        <k>/plugins/kubernetes.io/csi/pv/<pv>/globalmount       (older kubelets)
 *                        <k>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>    (block)
 *   target_path          <k>/pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount
 *                        <k>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<pod uid>
 *                        <k>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>  (older kubelets)
 * where <driver> is this driver's name.  NodeGetVolumeStats' and NodeExpandVolume's volume_path
 * is either kind.  The directories are then opened one component at a time from the kubelet
 * directory with O_NOFOLLOW, so no symlink below it is ever followed. */
#ifndef PILLAR_ROLES_NODE_PATHS_H
#define PILLAR_ROLES_NODE_PATHS_H

#include <stdbool.h>

#include "grpc/status.h"

enum node_path_kind {
	NODE_PATH_STAGING,
	NODE_PATH_TARGET,
	NODE_PATH_VOLUME, /* a staging or a target path */
};

/* An acceptable --kubelet-dir: absolute, normalised, not "/".  0 or -EINVAL. */
int node_kubelet_dir_check(const char *dir);

/* The lexical rules above for field (its request name).  GRPC_OK or INVALID_ARGUMENT, e.g.
 * `target_path "<p>" is not one of kubelet's publish paths: <k>/pods/<pod uid>/volumes/…`. */
int node_path_check(const char *kubelet_dir, enum node_path_kind kind, const char *field,
                    const char *path, struct grpc_status *st);

/* Opens (O_DIRECTORY) the directory holding path's last component, walking from the kubelet
 * directory without following symlinks; with create, missing directories are made (0750).
 * path must have passed node_path_check.  *leaf points into path.  0 with *dirfd open, or a
 * negative errno: -ENOENT (missing, without create), -ELOOP (a symlink), -ENOTDIR. */
int node_path_open_parent(const char *kubelet_dir, const char *path, bool create, int *dirfd,
                          const char **leaf);

/* node_path_open_parent, then the last component itself as a directory (made 0750 with
 * create).  0 with *fd open or a negative errno as above. */
int node_path_open_dir(const char *kubelet_dir, const char *path, bool create, int *fd);

/* Whether path (past node_path_check) exists, reached from the kubelet directory without a
 * symlink, itself not one.  0, or a negative errno: -ENOENT, -ELOOP (a symlink), -ENOTDIR. */
int node_path_lookup(const char *kubelet_dir, const char *path);

/* The status of a failed open above for field: INVALID_ARGUMENT for -ELOOP/-ENOTDIR (`<field>
 * "<p>" passes through a symlink or a file below the kubelet directory <k>`), INTERNAL
 * otherwise, with what (e.g. "create") in the message. */
int node_path_status(int r, const char *kubelet_dir, const char *field, const char *path,
                     const char *what, struct grpc_status *st);

#endif
