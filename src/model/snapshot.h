/* model/snapshot — PillarSnapshot (docs/objects.md "PillarSnapshot", docs/snapshots.md): the
 * controller's durable record of one CSI snapshot, written only by the controller, as
 * PillarVolumeState is of a volume.
 *
 * The object is named after the CSI snapshot name (rules_pvst_name of it: csi-snapshotter's
 * `snapshot-<uid>` is its own object name).  Its spec is written once at creation and never
 * changed; its status carries the phase (Creating, then Ready), what the agent answered, the
 * fencing generation of the snapshot's agent calls and `deleting`.
 */
#ifndef PILLAR_MODEL_SNAPSHOT_H
#define PILLAR_MODEL_SNAPSHOT_H

#include "model/pillar.h"

struct model_psnap {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		/* snapshotID: <agent>/snapshot/<backend>/<pool>/<name> (rules/volid.h);
		 * agentSnapshotID: <pool>/<name> */
		char *snapshot_id, *agent_snapshot_id, *snapshot_name, *agent_ref, *backend_type;
		/* the source volume: its CSI volume ID and PillarVolumeState name */
		char *source_volume_id, *source_volume_state;
		bool has_snapshot_ref;
		struct {
			void *rest;
			char *ns, *name, *content_name;
		} snapshot_ref; /* from csi-snapshotter's --extra-create-metadata */
		bool has_backend;
		struct model_backend backend; /* the source's spec.resolved.backend */
	} spec;
	struct {
		void *rest;
		char *phase, *creation_time;
		bool has_size_bytes, has_ready_to_use;
		int64_t size_bytes;
		bool ready_to_use;
		bool has_fencing_generation;
		int64_t fencing_generation;
		bool has_deleting, deleting;
		struct model_conds conditions;
	} status;
};

extern const struct model_kind model_psnap_kind;
/* spec: snapshotID, agentSnapshotID, agentRef, sourceVolumeID required; backendType one of
 * zfs-zvol, lvm-lv, file; status: phase Creating or Ready, sizeBytes >= 0. */
int model_psnap_validate(const struct model_psnap *p, struct err *e);
/* On update: the spec is immutable. */
int model_psnap_validate_update(const struct model_psnap *old, const struct model_psnap *p,
                                struct err *e);

#endif
