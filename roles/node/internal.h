/* node/internal — state shared by service.c and stage.c (not part of the role's interface). */
#ifndef PILLAR_ROLES_NODE_INTERNAL_H
#define PILLAR_ROLES_NODE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/keylock.h"

#include "node/dhchap.h"
#include "node/health.h"
#include "node/readiness.h"
#include "node/record.h"
#include "node/service.h"

struct node {
	char *node_id, *state_dir, *etc_nvme_dir, *sysfs_root, *dev_root, *proc_root;
	char *kubelet_dir; /* staging and target paths live below it (node/paths.h) */
	const struct node_sys_ops *sys;
	struct nvme_ctx nvme;
	struct nvme_host_identity id;
	bool shared_identity;
	node_publish_identity_fn publish_identity;
	void *publish_ctx;
	struct keylock locks;            /* volume IDs with an operation in flight */
	struct node_health health;       /* NodeGetVolumeStats' volume conditions */
	struct node_readiness readiness; /* Probe's answer */
	pthread_mutex_t dhchap_mu;       /* the DH-HMAC-CHAP key file (model/dhchap_file.h) */
	bool dhchap;                     /* --dhchap: make, publish and use keys */
	uint64_t dhchap_published;       /* the generation last published (node_dhchap_tick) */
};

/* Per-volume operation lock (csi.md §7.1 step 2): GRPC_OK holding id through h (release with
 * keylock_release(&n->locks, h)), or GRPC_ABORTED `an operation on volume "<id>" is already in
 * progress` at once. */
int node_lock_volume(struct node *n, struct keylock_hold *h, const char *id,
                     struct grpc_status *st);

/* csi.md §7.1 step 1 and alike: the request fields (name, value pairs, NULL-terminated) that
 * must be non-empty.  GRPC_OK, or INVALID_ARGUMENT `<name> is required` for the first missing. */
int node_require(struct grpc_status *st, ...);

/* The request's volume_capability with its access type set: GRPC_OK, or INVALID_ARGUMENT
 * `volume_capability is required` / `volume_capability.access_type is required`. */
int node_require_capability(const Csi__V1__VolumeCapability *cap, struct grpc_status *st);

/* Maps an nvme layer errno (initiator.h) to a status with e's message. */
int node_status_from_nvme(int r, const struct err *e, struct grpc_status *st);

/* Staging mount point probe: 1 mounted (m filled), 0 not, negative errno on probe error. */
int node_is_mounted(const struct node *n, const char *path, struct node_mount *m);

bool node_mode_read_only(const Csi__V1__VolumeCapability *cap);

/* The record's staging path, when it has one, is staging: GRPC_OK, or code with `volume "<id>"
 * is staged at <recorded> on this node, not at <staging>`.  A legacy record has none. */
int node_staged_at(const char *id, const struct node_record *rec, const char *staging, int code,
                   struct grpc_status *st);

/* NodeGetVolumeStats' and NodeExpandVolume's paths (csi.md §9.3, §9.4; node/paths.h):
 * volume_path one of kubelet's staging or publish paths, staging (when non-empty) a staging
 * path, and volume_path reached below the kubelet directory without a symlink, then stat'ed into
 * *sb.  GRPC_OK (*stat_err 0, or the negative errno of another failure to reach or stat it),
 * INVALID_ARGUMENT, or NOT_FOUND `path <p> does not exist`. */
int node_volume_path(struct node *n, const char *volume_path, const char *staging, struct stat *sb,
                     int *stat_err, struct grpc_status *st);

/* The volume of rec is staged at staging (when non-empty) and at volume_path when that is a
 * staging path (node_staged_at with code); a publish path is not compared. */
int node_volume_at(struct node *n, const char *id, const struct node_record *rec,
                   const char *volume_path, const char *staging, int code, struct grpc_status *st);

/* Reads the record; GRPC_OK, GRPC_NOT_FOUND (no record, st untouched) or GRPC_INTERNAL. */
int node_load_record(struct node *n, const char *id, struct node_record *r, struct grpc_status *st);

/* Keyed connect (docs/authentication.md).  The stage plan's authentication mode. */
enum node_dhchap_mode { NODE_DHCHAP_OFF, NODE_DHCHAP_UNI, NODE_DHCHAP_BI };

/* The context's RULES_CTX_DHCHAP: GRPC_OK with *mode, or INVALID_ARGUMENT naming the key. */
int node_dhchap_mode_parse(const char *value, enum node_dhchap_mode *mode, struct grpc_status *st);

/* Before the connect (docs/authentication.md "The worker side"): for a dhchap volume, refuses
 * (FAILED_PRECONDITION) on a kernel whose fabrics device lists its options without
 * dhchap_secret (naming CONFIG_NVME_HOST_AUTH) or on a node plugin without --dhchap; reads the
 * node's keys (made on first need) into k and points a's secrets at the generation to use
 * (the controller key only for bidirectional).  A volume without dhchap gets the host secret
 * when the node has confirmed keys and the kernel knows the option.  The caller wipes k. */
int node_dhchap_prepare(struct node *n, const char *id, enum node_dhchap_mode mode,
                        const char *hostnqn, struct model_dhchap_file *k,
                        struct nvme_connect_args *a, struct grpc_status *st);

/* Start-up with --dhchap: makes the keys unless the key file holds them (a failure, such as a
 * corrupt file, is logged; stages of dhchap volumes then refuse with the reason). */
void node_dhchap_start(struct node *n);

/* After EKEYREJECTED with the current keys during a rotation: points a at the next
 * generation's and returns true (the caller connects once more), else false. */
bool node_dhchap_fallback(const struct model_dhchap_file *k, enum node_dhchap_mode mode,
                          struct nvme_connect_args *a);

/* After the connect: a controller without the dhchap_secret attribute belongs to a kernel
 * without host authentication (Debian 12's 6.1 connects, ignoring the secret): its subsystem
 * is detached and the stage refused with FAILED_PRECONDITION naming CONFIG_NVME_HOST_AUTH. */
int node_dhchap_verify(struct node *n, const char *id, const char *ctrl, const char *nqn,
                       struct grpc_status *st);

/* A failed connect or namespace wait of a stage: the nvme layer's errno r mapped to a CSI
 * status, with what to check when the kernel refused authentication. */
int node_dhchap_connect_status(int r, const struct err *e, enum node_dhchap_mode mode,
                               const struct model_dhchap_file *k, const struct nvme_connect_args *a,
                               struct grpc_status *st);

#endif
