/* model kube: field tables of the Kubernetes kinds (model/kube.h). */
#include "model/kube.h"

#include <stdlib.h>

#include "model/codec.h"

#define SUB(S, path)                  __typeof__(((S *)0)->path)
#define SUBTYPE(var, S, path, fields) static MODEL_TYPE(var, SUB(S, path), fields)

/* Storage {storage: Quantity} maps (capacity, requests) have one typed key. */
#define STORAGE_TYPE(var, S, path)                                                         \
	static const struct model_field var##_fields[] = {                                 \
	    {"storage", MODEL_QTY, offsetof(SUB(S, path), storage), MODEL_NONE, 0, NULL}}; \
	SUBTYPE(var, S, path, var##_fields)

#define TOP(var, S, name, av, fields)             \
	static MODEL_TYPE(var##_type, S, fields); \
	const struct model_kind var = {.kind = name, .api_version = av, .type = &var##_type}

/* ---- StorageClass -------------------------------------------------------------------------- */

#define T struct model_sc_expr
static const struct model_field expr_fields[] = {
    MODEL_F_STR("key", key),
    MODEL_F_STRS("values", values),
};
#undef T
static MODEL_TYPE(expr_type, struct model_sc_expr, expr_fields);

#define T struct model_sc_topology
static const struct model_field topo_fields[] = {
    MODEL_F_LIST("matchLabelExpressions", exprs, n_exprs, &expr_type)};
#undef T
static MODEL_TYPE(topo_type, struct model_sc_topology, topo_fields);

#define T struct model_sc_carry
static const struct model_field carry_fields[] = {
    MODEL_F_MAP("labels", labels),
    MODEL_F_MAP("annotations", annotations),
    MODEL_F_LIST("allowedTopologies", topologies, n_topologies, &topo_type),
};
#undef T
MODEL_TYPE(model_sc_carry_type, struct model_sc_carry, carry_fields);

int model_sc_topologies_copy(struct model_sc_topology **dst, size_t *n_dst,
                             const struct model_sc_topology *src, size_t n_src)
{
	struct model_sc_carry a = {0}, b = {0};
	a.topologies = (struct model_sc_topology *)src;
	a.n_topologies = n_src;
	int r = model_type_copy(&model_sc_carry_type, &b, &a);
	for (size_t i = 0; i < *n_dst; i++)
		model_type_clear(&topo_type, &(*dst)[i]);
	free(*dst);
	*dst = b.topologies;
	*n_dst = b.n_topologies;
	b.topologies = NULL;
	b.n_topologies = 0;
	model_type_clear(&model_sc_carry_type, &b);
	return r;
}

#define T struct model_sc
static const struct model_field sc_fields[] = {
    MODEL_F_META(),
    MODEL_F_STR("provisioner", provisioner),
    MODEL_F_MAP("parameters", parameters),
    MODEL_F_STR("reclaimPolicy", reclaim_policy),
    MODEL_F_STRS("mountOptions", mount_options),
    MODEL_F_BOOL("allowVolumeExpansion", allow_volume_expansion),
    MODEL_F_STR("volumeBindingMode", volume_binding_mode),
    MODEL_F_LIST("allowedTopologies", topologies, n_topologies, &topo_type),
};
#undef T
TOP(model_sc_kind, struct model_sc, "StorageClass", "storage.k8s.io/v1", sc_fields);

/* ---- PersistentVolume ---------------------------------------------------------------------- */

STORAGE_TYPE(pv_capacity, struct model_pv, spec.capacity);

#define T SUB(struct model_pv, spec.claim_ref)
static const struct model_field pv_claim_fields[] = {
    MODEL_F_STR("apiVersion", api_version),
    MODEL_F_STR("kind", kind),
    MODEL_F_STR("namespace", ns),
    MODEL_F_STR("name", name),
    MODEL_F_STR("uid", uid),
};
#undef T
SUBTYPE(pv_claim_type, struct model_pv, spec.claim_ref, pv_claim_fields);

#define T SUB(struct model_pv, spec.csi)
static const struct model_field pv_csi_fields[] = {
    MODEL_F_STR("driver", driver),
    MODEL_F_STR("volumeHandle", volume_handle),
    MODEL_F_STR("fsType", fs_type),
    MODEL_F_BOOL("readOnly", read_only),
    MODEL_F_MAP("volumeAttributes", volume_attributes),
};
#undef T
SUBTYPE(pv_csi_type, struct model_pv, spec.csi, pv_csi_fields);

#define T SUB(struct model_pv, spec)
static const struct model_field pv_spec_fields[] = {
    MODEL_F_OBJ("capacity", capacity, &pv_capacity),
    MODEL_F_STRS("accessModes", access_modes),
    MODEL_F_STR("persistentVolumeReclaimPolicy", reclaim_policy),
    MODEL_F_STR("storageClassName", storage_class_name),
    MODEL_F_STR("volumeMode", volume_mode),
    MODEL_F_OBJ_HAS("claimRef", claim_ref, &pv_claim_type),
    MODEL_F_OBJ_HAS("csi", csi, &pv_csi_type),
};
#undef T
SUBTYPE(pv_spec_type, struct model_pv, spec, pv_spec_fields);

#define T SUB(struct model_pv, status)
static const struct model_field pv_status_fields[] = {MODEL_F_STR("phase", phase)};
#undef T
SUBTYPE(pv_status_type, struct model_pv, status, pv_status_fields);

#define T struct model_pv
static const struct model_field pv_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &pv_spec_type),
    MODEL_F_OBJ("status", status, &pv_status_type),
};
#undef T
TOP(model_pv_kind, struct model_pv, "PersistentVolume", "v1", pv_fields);

/* ---- PersistentVolumeClaim ----------------------------------------------------------------- */

STORAGE_TYPE(pvc_requests, struct model_pvc, spec.resources.requests);
STORAGE_TYPE(pvc_capacity, struct model_pvc, status.capacity);

#define T SUB(struct model_pvc, spec.resources)
static const struct model_field pvc_res_fields[] = {
    MODEL_F_OBJ("requests", requests, &pvc_requests)};
#undef T
SUBTYPE(pvc_res_type, struct model_pvc, spec.resources, pvc_res_fields);

#define T SUB(struct model_pvc, spec)
static const struct model_field pvc_spec_fields[] = {
    MODEL_F_STRS("accessModes", access_modes),
    MODEL_F_OBJ("resources", resources, &pvc_res_type),
    MODEL_F_STR("storageClassName", storage_class_name),
    MODEL_F_STR("volumeMode", volume_mode),
    MODEL_F_STR("volumeName", volume_name),
};
#undef T
SUBTYPE(pvc_spec_type, struct model_pvc, spec, pvc_spec_fields);

#define T SUB(struct model_pvc, status)
static const struct model_field pvc_status_fields[] = {
    MODEL_F_STR("phase", phase),
    MODEL_F_OBJ("capacity", capacity, &pvc_capacity),
};
#undef T
SUBTYPE(pvc_status_type, struct model_pvc, status, pvc_status_fields);

#define T struct model_pvc
static const struct model_field pvc_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &pvc_spec_type),
    MODEL_F_OBJ("status", status, &pvc_status_type),
};
#undef T
TOP(model_pvc_kind, struct model_pvc, "PersistentVolumeClaim", "v1", pvc_fields);

/* ---- Node ---------------------------------------------------------------------------------- */

#define T struct model_node_address
static const struct model_field addr_fields[] = {
    MODEL_F_STR("type", type),
    MODEL_F_STR("address", address),
};
#undef T
static MODEL_TYPE(addr_type, struct model_node_address, addr_fields);

#define T SUB(struct model_node, status)
static const struct model_field node_status_fields[] = {
    MODEL_F_LIST("addresses", addresses, n_addresses, &addr_type)};
#undef T
SUBTYPE(node_status_type, struct model_node, status, node_status_fields);

#define T struct model_node
static const struct model_field node_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("status", status, &node_status_type),
};
#undef T
TOP(model_node_kind, struct model_node, "Node", "v1", node_fields);

/* ---- CSINode ------------------------------------------------------------------------------- */

#define T SUB(struct model_csinode_driver, allocatable)
static const struct model_field alloc_fields[] = {MODEL_F_INT("count", count)};
#undef T
SUBTYPE(alloc_type, struct model_csinode_driver, allocatable, alloc_fields);

#define T struct model_csinode_driver
static const struct model_field driver_fields[] = {
    MODEL_F_STR("name", name),
    MODEL_F_STR("nodeID", node_id),
    MODEL_F_STRS("topologyKeys", topology_keys),
    MODEL_F_OBJ_HAS("allocatable", allocatable, &alloc_type),
};
#undef T
static MODEL_TYPE(driver_type, struct model_csinode_driver, driver_fields);

#define T SUB(struct model_csinode, spec)
static const struct model_field csinode_spec_fields[] = {
    MODEL_F_LIST("drivers", drivers, n_drivers, &driver_type)};
#undef T
SUBTYPE(csinode_spec_type, struct model_csinode, spec, csinode_spec_fields);

#define T struct model_csinode
static const struct model_field csinode_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ_HAS("spec", spec, &csinode_spec_type),
};
#undef T
TOP(model_csinode_kind, struct model_csinode, "CSINode", "storage.k8s.io/v1", csinode_fields);

/* ---- Pod ----------------------------------------------------------------------------------- */

#define T SUB(struct model_pod_volume, pvc)
static const struct model_field pod_pvc_fields[] = {MODEL_F_STR("claimName", claim_name)};
#undef T
SUBTYPE(pod_pvc_type, struct model_pod_volume, pvc, pod_pvc_fields);

#define T struct model_pod_volume
static const struct model_field pod_volume_fields[] = {
    MODEL_F_STR("name", name),
    MODEL_F_OBJ_HAS("persistentVolumeClaim", pvc, &pod_pvc_type),
};
#undef T
static MODEL_TYPE(pod_volume_type, struct model_pod_volume, pod_volume_fields);

#define T SUB(struct model_pod, spec)
static const struct model_field pod_spec_fields[] = {
    MODEL_F_STR("nodeName", node_name),
    MODEL_F_LIST("volumes", volumes, n_volumes, &pod_volume_type),
};
#undef T
SUBTYPE(pod_spec_type, struct model_pod, spec, pod_spec_fields);

#define T SUB(struct model_pod, status)
static const struct model_field pod_status_fields[] = {MODEL_F_STR("phase", phase)};
#undef T
SUBTYPE(pod_status_type, struct model_pod, status, pod_status_fields);

#define T struct model_pod
static const struct model_field pod_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &pod_spec_type),
    MODEL_F_OBJ("status", status, &pod_status_type),
};
#undef T
TOP(model_pod_kind, struct model_pod, "Pod", "v1", pod_fields);

/* ---- VolumeAttachment ---------------------------------------------------------------------- */

#define T SUB(struct model_va, spec.source)
static const struct model_field va_source_fields[] = {
    MODEL_F_STR("persistentVolumeName", persistent_volume_name)};
#undef T
SUBTYPE(va_source_type, struct model_va, spec.source, va_source_fields);

#define T SUB(struct model_va, spec)
static const struct model_field va_spec_fields[] = {
    MODEL_F_STR("attacher", attacher),
    MODEL_F_STR("nodeName", node_name),
    MODEL_F_OBJ("source", source, &va_source_type),
};
#undef T
SUBTYPE(va_spec_type, struct model_va, spec, va_spec_fields);

#define T struct model_va_error
static const struct model_field va_err_fields[] = {
    MODEL_F_STR("time", time),
    MODEL_F_STR("message", message),
};
#undef T
static MODEL_TYPE(va_err_type, struct model_va_error, va_err_fields);

#define T SUB(struct model_va, status)
static const struct model_field va_status_fields[] = {
    MODEL_F_BOOL("attached", attached),
    MODEL_F_MAP("attachmentMetadata", attachment_metadata),
    MODEL_F_OBJ_HAS("attachError", attach_error, &va_err_type),
    MODEL_F_OBJ_HAS("detachError", detach_error, &va_err_type),
};
#undef T
SUBTYPE(va_status_type, struct model_va, status, va_status_fields);

#define T struct model_va
static const struct model_field va_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &va_spec_type),
    MODEL_F_OBJ("status", status, &va_status_type),
};
#undef T
TOP(model_va_kind, struct model_va, "VolumeAttachment", "storage.k8s.io/v1", va_fields);

/* ---- Lease --------------------------------------------------------------------------------- */

#define T SUB(struct model_lease, spec)
static const struct model_field lease_spec_fields[] = {
    MODEL_F_STR("holderIdentity", holder_identity),
    MODEL_F_INT("leaseDurationSeconds", lease_duration_seconds),
    MODEL_F_STR("acquireTime", acquire_time),
    MODEL_F_STR("renewTime", renew_time),
    MODEL_F_INT("leaseTransitions", lease_transitions),
};
#undef T
SUBTYPE(lease_spec_type, struct model_lease, spec, lease_spec_fields);

#define T struct model_lease
static const struct model_field lease_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &lease_spec_type),
};
#undef T
TOP(model_lease_kind, struct model_lease, "Lease", "coordination.k8s.io/v1", lease_fields);

/* ---- Secret -------------------------------------------------------------------------------- */

#define T struct model_secret
static const struct model_field secret_fields[] = {
    MODEL_F_META(),
    MODEL_F_STR("type", type),
    MODEL_F_MAP("data", data),
};
#undef T
TOP(model_secret_kind, struct model_secret, "Secret", "v1", secret_fields);

/* ---- Event --------------------------------------------------------------------------------- */

#define T SUB(struct model_event, involved_object)
static const struct model_field involved_fields[] = {
    MODEL_F_STR("apiVersion", api_version),
    MODEL_F_STR("kind", kind),
    MODEL_F_STR("namespace", ns),
    MODEL_F_STR("name", name),
    MODEL_F_STR("uid", uid),
    MODEL_F_STR("resourceVersion", resource_version),
};
#undef T
SUBTYPE(involved_type, struct model_event, involved_object, involved_fields);

#define T SUB(struct model_event, source)
static const struct model_field source_fields[] = {
    MODEL_F_STR("component", component),
    MODEL_F_STR("host", host),
};
#undef T
SUBTYPE(source_type, struct model_event, source, source_fields);

#define T struct model_event
static const struct model_field event_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("involvedObject", involved_object, &involved_type),
    MODEL_F_STR("reason", reason),
    MODEL_F_STR("message", message),
    MODEL_F_STR("type", type),
    MODEL_F_OBJ("source", source, &source_type),
    MODEL_F_STR("firstTimestamp", first_timestamp),
    MODEL_F_STR("lastTimestamp", last_timestamp),
    MODEL_F_INT("count", count),
    MODEL_F_STR("reportingComponent", reporting_component),
    MODEL_F_STR("reportingInstance", reporting_instance),
    MODEL_F_STR("action", action),
    MODEL_F_STR("eventTime", event_time),
};
#undef T
TOP(model_event_kind, struct model_event, "Event", "v1", event_fields);
