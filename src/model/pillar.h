/* model/pillar — the five pillar-csi custom resources (crds.md) and the three configuration
 * axes they share (crds.md §8: backend, protocol, filesystem — one shape at every layer).
 *
 * Each kind is a struct (model.h: `rest` and `meta` first) with a kind descriptor for the
 * codec and the typed store operations, e.g.
 *     struct model_pa pa;
 *     model_get(st, &model_pa_kind, NULL, "storage-1", &pa, &e);  ...  model_clear(&model_pa_kind, &pa);
 * Defaults are not written into the struct (absent stays absent on a round trip); the
 * model_*_effective / accessor functions below apply them, with the spec's numbers.
 * Validation functions return 0 or -EINVAL with the spec's message in e (the first violation,
 * in the order of the spec's tables).
 */
#ifndef PILLAR_MODEL_PILLAR_H
#define PILLAR_MODEL_PILLAR_H

#include "model/model.h"

/* ---- configuration axes (crds.md §8) ---------------------------------------------------------- */

struct model_zfs {
	void *rest;
	char *volume_type, *pool, *parent_dataset;
	bool has_properties;         /* present, possibly empty (written when it has entries) */
	struct model_map properties; /* values are literal text */
};

struct model_lvm {
	void *rest;
	char *volume_group, *thin_pool, *provisioning_mode;
};

struct model_file {
	void *rest;
	char *pool;
	bool has_preallocate, preallocate;
};

/* backend: exactly one member in a store, at most one in an override. */
struct model_backend {
	void *rest;
	bool has_zfs, has_lvm, has_file;
	struct model_zfs zfs;
	struct model_lvm lvm;
	struct model_file file;
};

/* nvmeofTcp.dhchap (docs/authentication.md): NVMe in-band authentication, on when present.
 * Absent members take their defaults (model_dhchap_*). */
struct model_dhchap {
	void *rest;
	bool has_bidirectional, bidirectional; /* default true */
	char *hash;                            /* sha256 | sha384 | sha512; default sha256 */
	char *dh_group; /* null | ffdhe2048 | ffdhe3072 | ffdhe4096 | ffdhe6144 | ffdhe8192 */
};
bool model_dhchap_bidirectional(const struct model_dhchap *d);   /* true when unset */
const char *model_dhchap_hash(const struct model_dhchap *d);     /* "sha256" when unset */
const char *model_dhchap_dh_group(const struct model_dhchap *d); /* "ffdhe2048" when unset */
/* 0, or -EINVAL "<prefix>nvmeofTcp.dhchap.hash must be one of ..." (or dhGroup). */
int model_dhchap_validate(const struct model_dhchap *d, const char *prefix, struct err *e);

/* nvmeofTcp: port, acl, deletePodsAfterCtrlLoss and dhchap are structural (PillarProtocol
 * only); the four tunables are absent unless set. */
struct model_nvmeof_tcp {
	void *rest;
	bool has_port, has_acl;
	int64_t port; /* default 4420 (model_nvmeof_tcp_port) */
	bool acl;     /* default false */
	/* default false: delete the controller-owned pods of a volume whose NVMe controller a
	 * worker's kernel removed (roles/controller/recovery.h) */
	bool has_delete_pods_after_ctrl_loss, delete_pods_after_ctrl_loss;
	bool has_max_queue_size, has_in_capsule_data_size, has_ctrl_loss_tmo, has_reconnect_delay;
	int64_t max_queue_size, in_capsule_data_size, ctrl_loss_tmo, reconnect_delay;
	bool has_dhchap;
	struct model_dhchap dhchap;
};

struct model_protocol {
	void *rest;
	bool has_nvmeof_tcp;
	struct model_nvmeof_tcp nvmeof_tcp;
};

/* Lists: absent (has_* false) inherits, present (even empty) replaces. */
struct model_filesystem {
	void *rest;
	char *fs_type; /* ext4 | xfs; default ext4 */
	bool has_mkfs_options, has_mount_options;
	struct model_strs mkfs_options, mount_options;
};

/* A volume's effective configuration (PillarVolumeState spec.resolved, crds.md §7.1). */
struct model_resolved {
	void *rest;
	bool has_backend, has_protocol, has_filesystem;
	struct model_backend backend;
	struct model_protocol protocol;
	struct model_filesystem filesystem; /* absent for Block volumes */
};

extern const struct model_type model_backend_type, model_protocol_type, model_filesystem_type,
    model_nvmeof_tcp_type, model_dhchap_type, model_zfs_type, model_lvm_type, model_file_type,
    model_resolved_type;

/* The four nvmeofTcp tunables with the bounds of rules/bounds.h (crds.md §4.1; int32, so at
 * most 2147483647): maxQueueSize 16..1024, inCapsuleDataSize >= 1024, ctrlLossTmo >= -1 (§16),
 * reconnectDelay >= 1.  Each has its JSON name, the volume-context key the node reads
 * (rules/keys.h, csi.md §3; NULL when the node does not read it) and the member of struct
 * model_nvmeof_tcp. */
struct model_tunable {
	const char *name;    /* maxQueueSize */
	const char *ctx_key; /* pillar-csi.bhyoo.com/nvmeof-max-queue-size */
	int64_t min, max;
	size_t off, has_off;
};
#define MODEL_TUNABLES 4
extern const struct model_tunable model_tunables[MODEL_TUNABLES];
/* The tunable named name, or NULL. */
const struct model_tunable *model_tunable_find(const char *name);
/* 0, or -EINVAL "<prefix>nvmeofTcp.<name> must be between <min> and <max>" (a bounded range),
 * "... must be at least <min>" / "... must be at most 2147483647". prefix may be "". */
int model_tunable_check(const struct model_tunable *t, int64_t v, const char *prefix,
                        struct err *e);
/* Checks every tunable that is set, in the order above, then dhchap (which needs acl). */
int model_nvmeof_tcp_validate(const struct model_nvmeof_tcp *n, const char *prefix, struct err *e);
int64_t model_nvmeof_tcp_port(const struct model_nvmeof_tcp *n); /* 4420 when unset */

/* ---- PillarAgent (crds.md §3) ----------------------------------------------------------------- */

struct model_pa_node_ref {
	void *rest;
	char *name, *address_type, *address_selector;
	bool has_port;
	int64_t port;
};

struct model_pa_external {
	void *rest;
	char *address;
	bool has_port;
	int64_t port;
};

struct model_pa_pool {
	void *rest;
	char *name, *type, *total, *available, *parent_dataset, *thin_pool;
};

struct model_pa_caps {
	void *rest;
	struct model_strs backends, protocols;
	/* the storage node's kernel has NVMe in-band authentication (docs/authentication.md) */
	bool has_nvme_target_auth, nvme_target_auth;
};

/* Which generation of a worker's DH-HMAC-CHAP keys the agent's host entries hold, as the
 * controller last sent them (docs/authentication.md "Keys": confirmation).  Not secret. */
struct model_pa_dhchap_node {
	void *rest;
	char *node;
	bool has_generation;
	int64_t generation; /* 0: meant to admit the node, holds no keys of it */
};
struct model_pa_dhchap {
	void *rest;
	size_t n_installed;
	struct model_pa_dhchap_node *installed;
};
/* Frees d's members and zeroes it. */
void model_pa_dhchap_clear(struct model_pa_dhchap *d);

struct model_pa {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		bool has_node_ref, has_external;
		struct model_pa_node_ref node_ref;
		struct model_pa_external external;
	} spec;
	struct {
		void *rest;
		char *resolved_address, *agent_version;
		bool has_capabilities;
		struct model_pa_caps capabilities;
		size_t n_pools;
		struct model_pa_pool *pools; /* discoveredPools */
		/* what an outage of the node touches (model/outage.h; docs/objects.md) */
		bool has_volumes, has_published_volumes, has_connected_hosts,
		    has_outage_budget_seconds;
		int64_t volumes, published_volumes, connected_hosts, outage_budget_seconds;
		/* present once the controller made a whole pass of the agent with --dhchap */
		bool has_dhchap;
		struct model_pa_dhchap dhchap;
		struct model_conds conditions;
	} status;
};

extern const struct model_kind model_pa_kind;
/* §3.1: exactly one of nodeRef/external; name; addressType; CIDR; IP; ports 1..65535; the
 * object name a DNS label of at most 63 characters. */
int model_pa_validate(const struct model_pa *pa, struct err *e);
/* §3.1 on update: nodeRef/external cannot be switched; nodeRef.name is immutable. */
int model_pa_validate_update(const struct model_pa *old, const struct model_pa *pa, struct err *e);
/* nodeRef.addressType or "InternalIP"; nodeRef.port or default_port. */
const char *model_pa_address_type(const struct model_pa *pa);
int64_t model_pa_node_port(const struct model_pa *pa, int64_t default_port);

/* ---- PillarProtocol (crds.md §4) -------------------------------------------------------------- */

struct model_pstr {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		bool has_protocol;
		struct model_protocol protocol;
	} spec;
	struct {
		void *rest;
		bool has_storage_class_count;
		int64_t storage_class_count;
		struct model_strs active_agents;
		struct model_conds conditions;
	} status;
};

extern const struct model_kind model_pstr_kind;
/* §4.1: exactly one member (nvmeofTcp); port 1..65535; the tunables' ranges. */
int model_pstr_validate(const struct model_pstr *p, struct err *e);
/* §4.1 on update: nvmeofTcp.port and acl are immutable. */
int model_pstr_validate_update(const struct model_pstr *old, const struct model_pstr *p,
                               struct err *e);

/* ---- PillarStore (crds.md §5) ----------------------------------------------------------------- */

struct model_pst {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		char *agent_ref;
		bool has_backend;
		struct model_backend backend;
	} spec;
	struct {
		void *rest;
		bool has_capacity;
		struct {
			void *rest;
			char *total, *available, *used;
		} capacity;
		struct model_conds conditions;
	} status;
};

extern const struct model_kind model_pst_kind;
/* §5.1: agentRef; exactly one backend member naming its pool; zfs volumeType zvol,
 * parentDataset relative, no volsize property; lvm provisioningMode linear|thin, thin needs a
 * thinPool. */
int model_pst_validate(const struct model_pst *p, struct err *e);
/* §5.1 on update: agentRef immutable; the backend member cannot switch; zfs pool,
 * parentDataset, volumeType, lvm volumeGroup, thinPool and file pool are immutable. */
int model_pst_validate_update(const struct model_pst *old, const struct model_pst *p,
                              struct err *e);
/* lvm.provisioningMode or "linear"; zfs.volumeType or "zvol". */
const char *model_lvm_mode(const struct model_lvm *l);
const char *model_zfs_volume_type(const struct model_zfs *z);

/* ---- PillarStorageClass (crds.md §6) ---------------------------------------------------------- */

struct model_psc {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		char *store_ref, *protocol_ref;
		bool has_storage_class;
		struct {
			void *rest;
			char *name, *reclaim_policy, *volume_binding_mode;
			bool has_allow_volume_expansion, allow_volume_expansion;
		} storage_class;
		bool has_filesystem;
		struct model_filesystem filesystem;
		bool has_overrides;
		struct {
			void *rest;
			bool has_backend, has_protocol;
			struct model_backend backend;
			struct model_protocol protocol;
		} overrides;
	} spec;
	struct {
		void *rest;
		char *storage_class_name;
		struct model_conds conditions;
	} status;
};

extern const struct model_kind model_psc_kind;
/* §6.1: refs; storageClass.name a DNS subdomain; enums; overrides.backend at most one member,
 * no volsize; the tunables' ranges. */
int model_psc_validate(const struct model_psc *p, struct err *e);
/* §6.1 on update: storeRef, protocolRef and storageClass.name are immutable. */
int model_psc_validate_update(const struct model_psc *old, const struct model_psc *p,
                              struct err *e);
/* Effective values (§6.1 defaults). */
const char *model_psc_sc_name(const struct model_psc *p); /* storageClass.name or meta.name */
const char *model_psc_reclaim_policy(const struct model_psc *p); /* Delete */
const char *model_psc_binding_mode(const struct model_psc *p);   /* Immediate */
bool model_psc_allow_expansion(const struct model_psc *p);       /* true */
const char *model_psc_fs_type(const struct model_psc *p);        /* ext4 */

/* ---- PillarVolumeState (crds.md §7) ----------------------------------------------------------- */

struct model_pvst_published {
	void *rest;
	char *node_id, *initiator_id, *access_mode;
	bool has_readonly, readonly, has_revoking, revoking;
};

struct model_pvst_export_spec {
	void *rest;
	char *bind_address;
	bool has_port, has_acl_enabled, has_in_capsule_data_size;
	int64_t port;
	bool acl_enabled;
	int64_t in_capsule_data_size;
};

struct model_pvst {
	void *rest;
	struct model_meta meta;
	struct {
		void *rest;
		char *volume_id, *agent_volume_id, *agent_ref, *backend_type, *protocol_type;
		bool has_capacity_bytes;
		int64_t capacity_bytes;
		bool has_claim_ref;
		struct {
			void *rest;
			char *uid, *ns, *name;
		} claim_ref;
		bool has_resolved;
		struct model_resolved resolved;
		/* where the volume's first content came from (docs/snapshots.md): one of a
		 * snapshot ID or a volume ID; absent for a blank volume */
		bool has_content_source;
		struct {
			void *rest;
			char *snapshot_id, *volume_id;
		} content_source;
	} spec;
	struct {
		void *rest;
		char *phase, *backend_device_path;
		bool has_partial_failure;
		struct {
			void *rest;
			char *failed_operation, *failed_at, *reason, *message;
			bool has_backend_created, backend_created, has_export_created,
			    export_created;
		} partial_failure;
		bool has_export_info;
		struct {
			void *rest;
			char *target_id, *address, *volume_ref;
			bool has_port;
			int64_t port;
		} export_info;
		bool has_export_spec;
		struct model_pvst_export_spec export_spec;
		bool has_published; /* present, possibly empty (written when it has elements) */
		size_t n_published;
		struct model_pvst_published *published; /* publishedNodes */
		bool has_publication_generation;
		int64_t publication_generation;
		/* reconciledDigest: the digest (controller/vdigest.h, 16 hex digits) of the
		 * exportSpec and publishedNodes the agent last confirmed; NULL when none */
		char *reconciled_digest;
		bool has_deleting, deleting;
		struct model_conds conditions;
	} status;
};

extern const struct model_kind model_pvst_kind;
extern const struct model_type model_pvst_published_type, model_pvst_export_spec_type,
    model_pvst_export_info_type, model_pvst_partial_failure_type;
/* §7.1/§7.2: backendType, protocolType, claimRef.uid, phase, exportSpec (bindAddress and
 * aclEnabled required, port 0..65535, inCapsuleDataSize >= 1024), publishedNodes keyed by a
 * non-empty nodeID. */
int model_pvst_validate(const struct model_pvst *p, struct err *e);
/* On update: the spec is immutable (the CRD's `self == oldSelf` on spec). */
int model_pvst_validate_update(const struct model_pvst *old, const struct model_pvst *p,
                               struct err *e);

#endif
