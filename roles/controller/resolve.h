/* resolve — a volume's effective configuration (crds.md §8–§13) and its volume context.
 *
 * resolve_volume reads the StorageClass parameters of a CreateVolume request, the live
 * PillarStorageClass / PillarStore / PillarProtocol from the store and the PVC annotations (the
 * PersistentVolumeClaim named by csi.storage.k8s.io/pvc/name and /pvc/namespace, when it exists
 * in the store), merges the three layers by the rules of §11 and returns `spec.resolved`.
 * The StorageClass's fstype (layer 1 of the filesystem axis) is the capability's mount.fs_type
 * (cap_fstype, NULL or "" when absent) — csi-provisioner strips `csi.storage.k8s.io/fstype`
 * from the parameters and sends it only there; a direct caller may still pass the parameter,
 * which must then equal cap_fstype when both are set.
 * Every rejection of crds.md §13 is returned as a gRPC code with its message, verbatim.
 * Functions return the gRPC code (0 = OK) and fill gs.
 */
#ifndef PILLAR_ROLES_CONTROLLER_RESOLVE_H
#define PILLAR_ROLES_CONTROLLER_RESOLVE_H

#include <stdbool.h>

#include "grpc/status.h"
#include "model/pillar.h"
#include "rules/keys.h"
#include "store/store.h"

struct resolve_out {
	struct model_resolved resolved; /* caller clears it (resolve_out_clear) */
	char store[254];                /* PillarStore name */
	char protocol[254];
	char psc[254];         /* PillarStorageClass, "" for a hand-written StorageClass */
	char agent[254];       /* PillarStore spec.agentRef */
	char backend_type[16]; /* zfs-zvol | lvm-lv | file */
	char pool[254];        /* zfs pool, lvm VG or file pool */
	char pvc_name[254], pvc_ns[254], pvc_uid[64]; /* "" when unknown */
};

/* params: the request's parameters.  block: access type block.  cap_fstype: the mount
 * capability's fs_type (NULL/"" when none). */
int resolve_volume(store *st, const struct model_map *params, bool block, const char *cap_fstype,
                   struct resolve_out *out, struct grpc_status *gs);
void resolve_out_clear(struct resolve_out *o);

/* The PillarStorageClass `Compatible` check (crds.md §6.2): 0 when overrides and filesystem fit
 * the store and protocol objects; else -EINVAL with reason (BackendOverrideMismatch,
 * ProtocolOverrideMismatch, ThinPoolRequired, InvalidFilesystem) and message. */
int resolve_psc_compatible(const struct model_psc *psc, const struct model_pst *pst,
                           const struct model_pstr *pstr, char *reason, size_t rcap, char *msg,
                           size_t mcap);

/* The volume context of csi.md §3 from a PillarVolumeState (spec.resolved, status.exportInfo)
 * into ctx (string values).  0 or -ENOMEM. */
int resolve_volume_context(const struct model_pvst *v, struct model_map *ctx);

/* ---- the layers (resolve_conf.c) --------------------------------------------------------------- */

/* A configuration being merged, and the first failure (code, condition reason, message). */
struct resolve_conf {
	enum { RESOLVE_BK_NONE, RESOLVE_BK_ZFS, RESOLVE_BK_LVM, RESOLVE_BK_FILE } bk;
	struct model_resolved r; /* backend and protocol always; filesystem while not Block */
	char mode_key[300];      /* the layer that set lvm.provisioningMode ("" for layer 0) */
	bool fstype_l1;          /* fsType set explicitly at layer 1 */
	int code;
	char reason[48];
	char msg[GRPC_STATUS_MSG_MAX];
};

void resolve_conf_init(struct resolve_conf *c);
void resolve_conf_clear(struct resolve_conf *c);
/* Each returns 0, or -EINVAL with c->code/reason/msg set.  key: "<key>: " prefixes messages
 * (NULL: no prefix). */
int resolve_base_store(struct resolve_conf *c, const struct model_pst *pst, const char *name);
int resolve_base_protocol(struct resolve_conf *c, const struct model_pstr *pstr, const char *name);
int resolve_apply_backend(struct resolve_conf *c, const struct model_backend *doc, const char *key);
int resolve_apply_protocol(struct resolve_conf *c, const struct model_protocol *doc,
                           const char *key);
int resolve_apply_fs(struct resolve_conf *c, const struct model_filesystem *doc, const char *key,
                     bool layer1);
/* thin needs a thinPool; the mkfs allowlist (unless block). */
int resolve_post_checks(struct resolve_conf *c, const char *store_name, bool block);
/* The backend token (zfs-zvol, lvm-lv, file) and pool of c. */
const char *resolve_conf_backend(const struct resolve_conf *c);
const char *resolve_conf_pool(const struct resolve_conf *c);

#endif
