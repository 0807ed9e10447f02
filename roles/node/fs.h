/* node/fs — probing, formatting and growing filesystems with the standard tools (base/exec.h;
 * tests put fake commands first on PATH, see test/unit/fakes/node/).
 *
 * Each function returns a node status code (status.h) and fills st with the spec's message.
 */
#ifndef PILLAR_ROLES_NODE_FS_H
#define PILLAR_ROLES_NODE_FS_H

#include <stddef.h>

#include "base/err.h"
#include "grpc/status.h"

/* csi.md §7.4 step 1.  GRPC_OK with *blank set, or with type (cap bytes) holding TYPE=. */
int node_fs_probe(const char *dev, const char *volume_id, int *blank, char *type, size_t cap,
                  struct grpc_status *st);

/* csi.md §7.4 step 4 (ext4 or xfs with the Linux 5.15 profile); opts are checked against the
 * allowlist of rules/mkfs.h first (INVALID_ARGUMENT with its message). */
int node_fs_mkfs(const char *fs, char *const *opts, size_t n, const char *dev,
                 struct grpc_status *st);

/* csi.md §9.3 step 5: resize2fs <dev> or xfs_growfs <mountpoint>. */
int node_fs_grow(const char *fs, const char *dev, const char *mountpoint, struct grpc_status *st);

#endif
