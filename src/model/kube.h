/* model/kube — the Kubernetes kinds the driver reads or writes (Kubernetes 1.32 OpenAPI v3,
 * /work/shared/kube): StorageClass, PersistentVolume, PersistentVolumeClaim, Node, CSINode,
 * VolumeAttachment, Lease and the core/v1 Event.
 *
 * Only the fields the driver reads or writes are typed; everything else (managedFields,
 * allowedTopologies, nodeAffinity, node conditions, …) is kept by the codec (model.h) and
 * written back unchanged.  Same conventions and errors as model.h.
 */
#ifndef PILLAR_MODEL_KUBE_H
#define PILLAR_MODEL_KUBE_H

#include "model/model.h"

/* storage.k8s.io/v1 StorageClass: its fields are top-level (no spec). */
struct model_sc_expr {
	void *rest;
	char *key;
	struct model_strs values;
};
struct model_sc_topology {
	void *rest;
	size_t n_exprs;
	struct model_sc_expr *exprs; /* matchLabelExpressions */
};
struct model_sc {
	void *rest;
	struct model_meta meta;
	char *provisioner, *reclaim_policy, *volume_binding_mode;
	struct model_map parameters;
	struct model_strs mount_options;
	bool has_allow_volume_expansion, allow_volume_expansion;
	size_t n_topologies;
	struct model_sc_topology *topologies; /* allowedTopologies */
};
extern const struct model_kind model_sc_kind;

/* The carry-over record of crds.md §6.3 (the PSC annotation
 * pillar-csi.bhyoo.com/storage-class-carry-over): {"labels":{…},"annotations":{…},
 * "allowedTopologies":[…]}.  Decode/encode with model_type_decode_text/model_type_encode_text. */
struct model_sc_carry {
	void *rest;
	struct model_map labels, annotations;
	size_t n_topologies;
	struct model_sc_topology *topologies;
};
extern const struct model_type model_sc_carry_type;
/* Deep copy of a list of topologies into *dst (replacing it).  0 or -ENOMEM. */
int model_sc_topologies_copy(struct model_sc_topology **dst, size_t *n_dst,
                             const struct model_sc_topology *src, size_t n_src);

/* v1 PersistentVolume. */
struct model_pv {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		struct {
			void *rest;
			char *storage;
		} capacity;
		struct model_strs access_modes;
		char *reclaim_policy, *storage_class_name, *volume_mode;
		bool has_claim_ref;
		struct {
			void *rest;
			char *api_version, *kind, *ns, *name, *uid;
		} claim_ref;
		bool has_csi;
		struct {
			void *rest;
			char *driver, *volume_handle, *fs_type;
			bool has_read_only, read_only;
			struct model_map volume_attributes;
		} csi;
	} spec;
	struct {
		void *rest;
		char *phase;
	} status;
};
extern const struct model_kind model_pv_kind;

/* v1 PersistentVolumeClaim. */
struct model_pvc {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		struct model_strs access_modes;
		char *storage_class_name, *volume_mode, *volume_name;
		struct {
			void *rest;
			struct {
				void *rest;
				char *storage;
			} requests;
		} resources;
	} spec;
	struct {
		void *rest;
		char *phase;
		struct {
			void *rest;
			char *storage;
		} capacity;
	} status;
};
extern const struct model_kind model_pvc_kind;

/* v1 Node: labels (meta) and status.addresses. */
struct model_node_address {
	void *rest;
	char *type, *address;
};
struct model_node {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		size_t n_addresses;
		struct model_node_address *addresses;
	} status;
};
extern const struct model_kind model_node_kind;

/* storage.k8s.io/v1 CSINode: annotations (meta) and spec.drivers. */
struct model_csinode_driver {
	void *rest;
	char *name, *node_id;
	struct model_strs topology_keys;
	bool has_allocatable;
	struct {
		void *rest;
		bool has_count;
		int64_t count;
	} allocatable;
};
struct model_csinode {
	void *rest;
	struct model_meta meta;
	bool has_spec; /* spec is written (possibly {}) */
	struct {
		void *rest;
		size_t n_drivers;
		struct model_csinode_driver *drivers;
	} spec;
};
extern const struct model_kind model_csinode_kind;

/* Pod: what the controller's opt-in recovery (roles/controller/recovery.h) and outage-plan
 * (roles/cli/outage.c) read. */
struct model_pod_volume {
	void *rest;
	char *name;
	bool has_pvc;
	struct {
		void *rest;
		char *claim_name;
	} pvc; /* persistentVolumeClaim */
};
struct model_pod {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		char *node_name;
		size_t n_volumes;
		struct model_pod_volume *volumes;
	} spec;
	struct {
		void *rest;
		char *phase; /* outage-plan leaves out pods that are over */
	} status;
};
extern const struct model_kind model_pod_kind;

/* storage.k8s.io/v1 VolumeAttachment. */
struct model_va_error {
	void *rest;
	char *time, *message;
};
struct model_va {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		char *attacher, *node_name;
		struct {
			void *rest;
			char *persistent_volume_name;
		} source;
	} spec;
	struct {
		void *rest;
		bool has_attached, attached;
		struct model_map attachment_metadata;
		bool has_attach_error, has_detach_error;
		struct model_va_error attach_error, detach_error;
	} status;
};
extern const struct model_kind model_va_kind;

/* coordination.k8s.io/v1 Lease (times are MicroTime strings). */
struct model_lease {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		char *holder_identity, *acquire_time, *renew_time;
		bool has_lease_duration_seconds, has_lease_transitions;
		int64_t lease_duration_seconds, lease_transitions;
	} spec;
};
extern const struct model_kind model_lease_kind;

/* v1 Event (core). */
struct model_event {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		char *api_version, *kind, *ns, *name, *uid, *resource_version;
	} involved_object;
	char *reason, *message, *type, *first_timestamp, *last_timestamp;
	char *reporting_component, *reporting_instance, *action, *event_time;
	bool has_count;
	int64_t count;
	struct {
		void *rest;
		char *component, *host;
	} source;
};
extern const struct model_kind model_event_kind;

/* v1 Secret: only the DH-HMAC-CHAP keys of the workers (model/dhchap_keys.h).  data values
 * are base64 text as on the wire. */
struct model_secret {
	void *rest;
	struct model_meta meta;
	char *type;
	struct model_map data;
};
extern const struct model_kind model_secret_kind;

/* ---- read-only: the workloads that use volumes (outage-plan, roles/cli/outage.c) ----------- */

/* apps/v1 Deployment, StatefulSet and ReplicaSet: spec.replicas (absent means 1, the API
 * server's default) and status.replicas; a ReplicaSet's Deployment is in meta.owner_refs. */
struct model_workload {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		bool has_replicas;
		int64_t replicas;
	} spec;
	struct {
		void *rest;
		bool has_replicas;
		int64_t replicas;
	} status;
};
extern const struct model_kind model_deployment_kind, model_statefulset_kind, model_replicaset_kind;
/* spec.replicas, or 1 when absent. */
int64_t model_workload_replicas(const struct model_workload *w);

#endif
