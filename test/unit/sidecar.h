/* sidecar — CSI requests built exactly as the Kubernetes components build them, for every unit
 * test that stands in for a Kubernetes call.  The inputs are Kubernetes objects as JSON text
 * (StorageClass, PersistentVolumeClaim, PersistentVolume, Nodes and CSINodes), so a test states
 * the cluster, not the request.  Facts, from the components' own source:
 *
 * csi-provisioner 5.2 (pkg/controller/controller.go prepareProvision, topology.go
 * GenerateAccessibilityRequirements; csi-lib-utils accessmodes.ToCSIAccessMode):
 *  - name = "pvc-" + PVC uid (--volume-name-prefix=pvc, --volume-name-uuid-length=-1);
 *  - fstype = StorageClass parameter `csi.storage.k8s.io/fstype` (or the deprecated `fstype`;
 *    both → error), else --default-fstype (not set in our deployment → "");
 *  - one capability per PVC access mode: block for volumeMode Block, else mount{fs_type =
 *    fstype, mount_flags = StorageClass mountOptions}; ReadWriteOnce → SINGLE_NODE_MULTI_WRITER
 *    when the driver reports SINGLE_NODE_MULTI_WRITER (else SINGLE_NODE_WRITER),
 *    ReadWriteOncePod → SINGLE_NODE_SINGLE_WRITER (SINGLE_NODE_WRITER), ReadOnlyMany →
 *    MULTI_NODE_READER_ONLY, ReadWriteMany → MULTI_NODE_MULTI_WRITER;
 *  - capacity_range.required_bytes = the PVC's storage request, no limit;
 *  - parameters = the StorageClass parameters minus every `csi.storage.k8s.io/` key (an unknown
 *    one fails), plus `csi.storage.k8s.io/pvc/name`, `pvc/namespace`, `pv/name` with
 *    --extra-create-metadata (always set by our deployment, deploy.md §3);
 *  - accessibility_requirements when the driver reports VOLUME_ACCESSIBILITY_CONSTRAINTS
 *    (feature gate Topology is on by default): with a selected node (WaitForFirstConsumer) its
 *    CSINode's topology keys, else (--immediate-topology; we take its default as true — not read in the source) the keys of the first
 *    CSINode that has any; requisite = the distinct terms of every Node labelled with all keys,
 *    sorted; preferred = requisite rotated to the selected node's term, or by the StatefulSet
 *    name hash for Immediate binding.  No keys anywhere → "no available topology found".
 * csi-attacher 4.8 (pkg/controller/csi_handler.go csiAttach/csiDetach, util.go):
 *  - volume_id = PV spec.csi.volumeHandle; node_id = CSINode spec.drivers[driver].nodeID of
 *    the VolumeAttachment's node; volume_context = PV spec.csi.volumeAttributes;
 *  - capability from the PV: accessModes mapped as above, mount{fs_type = spec.csi.fsType
 *    (--default-fstype "" since 4.0), mount_flags = spec.mountOptions} or block;
 *  - readonly = spec.csi.readOnly only if the driver reports PUBLISH_READONLY, else false.
 * csi-resizer 1.13 (pkg/resizer/csi_resizer.go Resize): volume_id = volumeHandle,
 *  capacity_range.required_bytes = the PVC's new request, volume_capability from the PV as the
 *  attacher builds it.
 * kube-controller-manager / provisioner Delete: DeleteVolume{volume_id = volumeHandle}.
 * csi-provisioner dataSource (controller.go getVolumeContentSource): a VolumeSnapshot bound to a
 *  content with status.snapshotHandle and readyToUse, restoreSize not above the request →
 *  volume_content_source.snapshot{snapshot_id = snapshotHandle}; a PVC bound to a PV of the
 *  driver with a capacity not above the request → volume{volume_id = volumeHandle}.
 * csi-snapshotter v8 (pkg/sidecar-controller snapshot_controller.go createSnapshotWrapper,
 *  csi_handler.go; pkg/utils RemovePrefixedParameters), sidecar_snapshot.c:
 *  - CreateSnapshot name = --snapshot-name-prefix ("snapshot") + "-" + the VolumeSnapshot's UID
 *    (content spec.volumeSnapshotRef.uid; --snapshot-name-uuid-length -1: the whole UID);
 *    source_volume_id = content spec.source.volumeHandle;
 *  - parameters = the VolumeSnapshotClass parameters minus the reserved keys
 *    csi.storage.k8s.io/{snapshotter,snapshotter-list,group-snapshotter}-secret-{name,namespace}
 *    (another csi.storage.k8s.io/ key fails), plus with --extra-create-metadata
 *    csi.storage.k8s.io/volumesnapshot/name, /volumesnapshot/namespace and
 *    /volumesnapshotcontent/name;
 *  - secrets = the data of the Secret the class's snapshotter-secret-name/namespace names;
 *  - DeleteSnapshot and the readiness check (ListSnapshots{snapshot_id}) use the content's
 *    status.snapshotHandle, else spec.source.snapshotHandle (a pre-provisioned content); a
 *    dynamic content that is not ready yet gets CreateSnapshot again.
 *
 * Every builder returns a message decoded from its wire bytes (free with
 * protobuf_c_message_free_unpacked), or NULL with err filled when the component itself would
 * refuse before calling the driver (err holds its message). */
#ifndef PILLAR_TEST_UNIT_SIDECAR_H
#define PILLAR_TEST_UNIT_SIDECAR_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "csi.pb-c.h"

#define SIDECAR_DRIVER "pillar-csi.bhyoo.com"

/* What a sidecar learned from the driver's capability RPCs and its own flags. */
struct sidecar_caps {
	bool snmw;                  /* ControllerGetCapabilities SINGLE_NODE_MULTI_WRITER */
	bool publish_ro;            /* ControllerGetCapabilities PUBLISH_READONLY */
	bool topology;              /* GetPluginCapabilities VOLUME_ACCESSIBILITY_CONSTRAINTS */
	const char *default_fstype; /* --default-fstype ("" = not set) */
	bool extra_metadata;        /* csi-provisioner --extra-create-metadata */
	bool immediate_topology;    /* csi-provisioner --immediate-topology */
};

/* Our deployment (deploy.md §3) in front of what csi.md §4 says the driver reports; the unit
 * test test_sidecar_caps_match checks the two against the controller's answers. */
extern const struct sidecar_caps sidecar_deployed;

/* CreateVolume for claim pvc_json of StorageClass sc_json.  cluster_json:
 * {"nodes":[Node...],"csinodes":[CSINode...]} (NULL = none); selected_node: the PVC's
 * volume.kubernetes.io/selected-node (NULL for Immediate binding). */
Csi__V1__CreateVolumeRequest *sidecar_create_volume(const struct sidecar_caps *c,
                                                    const char *sc_json, const char *pvc_json,
                                                    const char *cluster_json,
                                                    const char *selected_node, char *err,
                                                    size_t errcap);

/* The PersistentVolume csi-provisioner writes after a successful CreateVolume (caller frees). */
cJSON *sidecar_pv(const char *sc_json, const char *pvc_json,
                  const Csi__V1__CreateVolumeRequest *req,
                  const Csi__V1__CreateVolumeResponse *resp);

Csi__V1__DeleteVolumeRequest *sidecar_delete_volume(const cJSON *pv);

/* ControllerPublish/Unpublish for a VolumeAttachment of pv to node (the Node name). */
Csi__V1__ControllerPublishVolumeRequest *sidecar_attach(const struct sidecar_caps *c,
                                                        const cJSON *pv, const char *node,
                                                        const char *cluster_json, char *err,
                                                        size_t errcap);
Csi__V1__ControllerUnpublishVolumeRequest *sidecar_detach(const cJSON *pv, const char *node,
                                                          const char *cluster_json, char *err,
                                                          size_t errcap);

/* ControllerExpandVolume after the PVC's request was raised to bytes. */
Csi__V1__ControllerExpandVolumeRequest *sidecar_expand(const struct sidecar_caps *c,
                                                       const cJSON *pv, long long bytes, char *err,
                                                       size_t errcap);

/* "1Gi" and the like as the provisioner reads a request (Ki..Ti or bytes). */
long long sidecar_quantity(const char *q);

/* csi-snapshotter's CreateSnapshot for VolumeSnapshotContent content_json of VolumeSnapshotClass
 * class_json; secret_json: the Secret the class names (its base64 data), or NULL. */
Csi__V1__CreateSnapshotRequest *sidecar_create_snapshot(const char *class_json,
                                                        const char *content_json,
                                                        const char *secret_json,
                                                        bool extra_metadata, char *err, size_t cap);
Csi__V1__DeleteSnapshotRequest *
sidecar_delete_snapshot(const char *content_json, const char *secret_json, char *err, size_t cap);
/* The readiness check of a content (ListSnapshots by its snapshot handle). */
Csi__V1__ListSnapshotsRequest *sidecar_snapshot_status(const char *content_json, char *err,
                                                       size_t cap);
/* Sets req->volume_content_source from the claim's dataSource: source_json is the
 * VolumeSnapshot (content_json its bound VolumeSnapshotContent) or the source PVC (content_json
 * its bound PV).  0, or -1 with err when the provisioner refuses. */
int sidecar_content_source(Csi__V1__CreateVolumeRequest *req, const char *pvc_json,
                           const char *source_json, const char *content_json, char *err,
                           size_t cap);

/* ---- shared by sidecar.c and sidecar_snapshot.c ------------------------------------------- */

/* json parsed (NULL: an empty object); aborts on bad JSON, a test's own mistake. */
cJSON *sidecar_parse(const char *json);
/* The value at path, object keys joined by '.' (NULL: none), and that value when a string. */
const cJSON *sidecar_get(const cJSON *o, const char *path);
const char *sidecar_get_str(const cJSON *o, const char *path);
/* m packed and decoded again as d, as the driver receives it; aborts when out of memory. */
void *sidecar_roundtrip(const ProtobufCMessage *m, const ProtobufCMessageDescriptor *d);

#endif
