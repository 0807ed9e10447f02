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
 * Functions return the gRPC code (0 = OK) and fill st.
 */
#ifndef PILLAR_ROLES_CONTROLLER_RESOLVE_H
#define PILLAR_ROLES_CONTROLLER_RESOLVE_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "grpc/status.h"
#include "rules/keys.h"
#include "store/store.h"

struct resolve_out {
	cJSON *resolved; /* {backend, protocol, filesystem?} — caller frees (resolve_out_clear) */
	char store[254]; /* PillarStore name */
	char protocol[254];
	char psc[254];         /* PillarStorageClass, "" for a hand-written StorageClass */
	char agent[254];       /* PillarStore spec.agentRef */
	char backend_type[16]; /* zfs-zvol | lvm-lv | file */
	char pool[254];        /* zfs pool, lvm VG or file pool */
	char pvc_name[254], pvc_ns[254], pvc_uid[64]; /* "" when unknown */
};

/* params: JSON object of the request's parameters (string values).  block: access type block.
 * cap_fstype: the mount capability's fs_type (NULL/"" when none). */
int resolve_volume(store *st, const cJSON *params, bool block, const char *cap_fstype,
                   struct resolve_out *out, struct grpc_status *gs);
void resolve_out_clear(struct resolve_out *o);

/* The PillarStorageClass `Compatible` check (crds.md §6.2): 0 when overrides and filesystem fit
 * the store and protocol objects; else -EINVAL with reason (BackendOverrideMismatch,
 * ProtocolOverrideMismatch, ThinPoolRequired, InvalidFilesystem) and message. */
int resolve_psc_compatible(const cJSON *psc, const cJSON *pst, const cJSON *pstr, char *reason,
                           size_t rcap, char *msg, size_t mcap);

/* The volume context of csi.md §3 from a PillarVolumeState (spec.resolved, status.exportInfo):
 * a JSON object of string values.  NULL when out of memory. */
cJSON *resolve_volume_context(const cJSON *pvst);

/* String/int/bool readers for values that come either from JSON objects or from YAML
 * documents (yamldoc raw scalars).  0, -ENOENT (absent) or -EINVAL (wrong type). */
int resolve_get_int(const cJSON *obj, const char *key, long long *out);
int resolve_get_bool(const cJSON *obj, const char *key, bool *out);

#endif
