/* rules/keys — the names controller, node and agent must spell alike: the CSI driver name, the
 * API group, labels, annotations and finalizers (crds.md §15, §14) and the volume-context keys
 * (csi.md §3).  Constants only.
 */
#ifndef PILLAR_RULES_KEYS_H
#define PILLAR_RULES_KEYS_H

/* csi.md §1: the driver name, also the prefix of every key below. */
#define RULES_DRIVER_NAME "pillar-csi.bhyoo.com"
#define RULES_KEY_PREFIX  RULES_DRIVER_NAME "/"
#define RULES_API_VERSION RULES_DRIVER_NAME "/v1alpha1"

/* Topology segment (csi.md §3): value "true" where nvme_tcp is loaded. */
#define RULES_TOPOLOGY_KEY RULES_KEY_PREFIX "nvmeof"

/* Labels and annotations (crds.md §15). */
#define RULES_LABEL_AGENT_NODE  RULES_KEY_PREFIX "agent-node"
#define RULES_LABEL_AGENT       RULES_KEY_PREFIX "agent"
#define RULES_LABEL_STORE       RULES_KEY_PREFIX "store"
#define RULES_LABEL_PSC         RULES_KEY_PREFIX "pillar-storage-class"
#define RULES_ANN_HOST_NQN      RULES_KEY_PREFIX "nvmeof-host-nqn"
#define RULES_ANN_HOST_ID       RULES_KEY_PREFIX "nvmeof-host-id"
#define RULES_ANN_SC_CARRY_OVER RULES_KEY_PREFIX "storage-class-carry-over"
#define RULES_ANN_SUCCESS       RULES_KEY_PREFIX "success-recorded"
/* CSINode: {"<volume ID>":"<RFC 3339>",...}, the volumes staged on the node whose NVMe
 * controller the kernel removed, and when the node plugin saw it (roles/node/health.h). */
#define RULES_ANN_LOST_VOLUMES RULES_KEY_PREFIX "nvmeof-lost-volumes"
#define RULES_LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
/* DH-HMAC-CHAP (docs/authentication.md "Keys"): the generation of a worker's keys the
 * controller confirmed (CSINode), and a worker's rotation request (Node; any new value). */
#define RULES_ANN_DHCHAP_GENERATION RULES_KEY_PREFIX "dhchap-generation"
#define RULES_ANN_DHCHAP_ROTATE     RULES_KEY_PREFIX "dhchap-rotate"

/* Finalizers (crds.md §14). */
#define RULES_FINALIZER_AGENT    RULES_KEY_PREFIX "pillar-agent-protection"
#define RULES_FINALIZER_STORE    RULES_KEY_PREFIX "store-protection"
#define RULES_FINALIZER_PROTOCOL RULES_KEY_PREFIX "protocol-protection"
#define RULES_FINALIZER_PSC      RULES_KEY_PREFIX "storage-class-protection"

/* Volume context (csi.md §3). */
#define RULES_CTX_TARGET_ID       "target_id"
#define RULES_CTX_ADDRESS         "address"
#define RULES_CTX_PORT            "port"
#define RULES_CTX_PROTOCOL_TYPE   RULES_KEY_PREFIX "protocol-type"
#define RULES_CTX_VOLUME_REF      RULES_KEY_PREFIX "volume-ref"
#define RULES_CTX_MAX_QUEUE_SIZE  RULES_KEY_PREFIX "nvmeof-max-queue-size"
#define RULES_CTX_CTRL_LOSS_TMO   RULES_KEY_PREFIX "nvmeof-ctrl-loss-tmo"
#define RULES_CTX_RECONNECT_DELAY RULES_KEY_PREFIX "nvmeof-reconnect-delay"
#define RULES_CTX_FS_TYPE         RULES_KEY_PREFIX "fs-type"
#define RULES_CTX_MKFS_OPTIONS    RULES_KEY_PREFIX "mkfs-options"
#define RULES_CTX_MOUNT_OPTIONS   RULES_KEY_PREFIX "mount-options"
/* NVMe in-band authentication (docs/authentication.md): absent when the volume's protocol has
 * no nvmeofTcp.dhchap; else "bidirectional" or "unidirectional" (the host's secret only).  The
 * node connects with its own secrets; the context never carries one. */
#define RULES_CTX_DHCHAP                RULES_KEY_PREFIX "dhchap"
#define RULES_CTX_DHCHAP_BIDIRECTIONAL  "bidirectional"
#define RULES_CTX_DHCHAP_UNIDIRECTIONAL "unidirectional"

#endif
