/* rules/conditions — the condition types and reasons the controller writes on the pillar-csi
 * objects (crds.md §3.3, §4.2, §5.2, §6.2, §7.3), spelled once.  A reason may serve several
 * objects and may equal a type's name (e.g. AgentConnected); each is defined once, in the group of
 * the first object that uses it.  Constants only.
 */
#ifndef PILLAR_RULES_CONDITIONS_H
#define PILLAR_RULES_CONDITIONS_H

/* PillarAgent (crds.md §3.3). */
#define RULES_COND_NODE_EXISTS              "NodeExists"
#define RULES_COND_AGENT_CONNECTED          "AgentConnected"
#define RULES_COND_EXPORTS_READY            "ExportsReady"
#define RULES_COND_READY                    "Ready"
#define RULES_REASON_NODE_FOUND             "NodeFound"
#define RULES_REASON_EXTERNAL_MODE          "ExternalMode"
#define RULES_REASON_NODE_NOT_FOUND         "NodeNotFound"
#define RULES_REASON_ADDRESS_NOT_RESOLVED   "AddressNotResolved"
#define RULES_REASON_NODE_LOOKUP_ERROR      "NodeLookupError"
#define RULES_REASON_MISSING_SPEC           "MissingSpec"
#define RULES_REASON_AUTHENTICATED          "Authenticated"
#define RULES_REASON_DIALED                 "Dialed"
#define RULES_REASON_AGENT_DEGRADED         "AgentDegraded"
#define RULES_REASON_TLS_HANDSHAKE_FAILED   "TLSHandshakeFailed"
#define RULES_REASON_HEALTH_CHECK_FAILED    "HealthCheckFailed"
#define RULES_REASON_DIALER_NOT_CONFIGURED  "DialerNotConfigured"
#define RULES_REASON_EXPORTS_SERVING        "ExportsServing"
#define RULES_REASON_EXPORT_RESTORE_PENDING "ExportRestorePending"
#define RULES_REASON_EXPORT_RESTORE_FAILED  "ExportRestoreFailed"
#define RULES_REASON_AGENT_NOT_CONNECTED    "AgentNotConnected"
#define RULES_REASON_AGENT_CONNECTED        "AgentConnected"
#define RULES_REASON_DELETION_BLOCKED       "DeletionBlocked"
/* VolumeStatesReadable: present once a PillarVolumeState could not be read (False, the records
 * and their repair in the message), True again when every record reads (controller Decision,
 * issue 24 #5). */
#define RULES_COND_VOLUME_STATES_READABLE    "VolumeStatesReadable"
#define RULES_REASON_UNREADABLE_VOLUME_STATE "UnreadableVolumeState"
#define RULES_REASON_VOLUME_STATES_READABLE  "VolumeStatesReadable"

/* PillarProtocol (crds.md §4.2); NodeTopology is a Decision of the controller (reconcile_class.c), not part of Ready. */
#define RULES_COND_NODE_TOPOLOGY         "NodeTopology"
#define RULES_REASON_PROTOCOL_READY      "ProtocolReady"
#define RULES_REASON_NO_NODE_REGISTERED  "NoNodeRegistered"
#define RULES_REASON_NVME_TCP_NOT_LOADED "NvmeTcpNotLoaded"
#define RULES_REASON_NODES_REACHABLE     "NodesReachable"

/* PillarStore (crds.md §5.2). */
#define RULES_COND_AGENT_READY               "AgentReady"
#define RULES_COND_POOL_DISCOVERED           "PoolDiscovered"
#define RULES_COND_BACKEND_SUPPORTED         "BackendSupported"
#define RULES_REASON_AGENT_READY             "AgentReady"
#define RULES_REASON_AGENT_NOT_FOUND         "AgentNotFound"
#define RULES_REASON_AGENT_NOT_READY         "AgentNotReady"
#define RULES_REASON_POOL_FOUND              "PoolFound"
#define RULES_REASON_WAITING_FOR_AGENT_DATA  "WaitingForAgentData"
#define RULES_REASON_POOL_NOT_FOUND          "PoolNotFound"
#define RULES_REASON_BACKEND_LAYOUT_MISMATCH "BackendLayoutMismatch"
#define RULES_REASON_BACKEND_SUPPORTED       "BackendSupported"
#define RULES_REASON_BACKEND_NOT_SUPPORTED   "BackendNotSupported"
#define RULES_REASON_STORE_READY             "StoreReady"

/* PillarStorageClass (crds.md §6.2). */
#define RULES_COND_STORE_READY                  "StoreReady"
#define RULES_COND_PROTOCOL_VALID               "ProtocolValid"
#define RULES_COND_COMPATIBLE                   "Compatible"
#define RULES_COND_STORAGE_CLASS_CREATED        "StorageClassCreated"
#define RULES_REASON_POOL_NOT_READY             "PoolNotReady"
#define RULES_REASON_PROTOCOL_VALID             "ProtocolValid"
#define RULES_REASON_PROTOCOL_NOT_FOUND         "ProtocolNotFound"
#define RULES_REASON_COMPATIBLE                 "Compatible"
#define RULES_REASON_BACKEND_OVERRIDE_MISMATCH  "BackendOverrideMismatch"
#define RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH "ProtocolOverrideMismatch"
#define RULES_REASON_THIN_POOL_REQUIRED         "ThinPoolRequired"
#define RULES_REASON_INVALID_FILESYSTEM         "InvalidFilesystem"
#define RULES_REASON_WAITING_FOR_STORE          "WaitingForStore"
#define RULES_REASON_STORAGE_CLASS_CREATED      "StorageClassCreated"
#define RULES_REASON_STORAGE_CLASS_ERROR        "StorageClassError"
#define RULES_REASON_STORAGE_CLASS_CONFLICT     "StorageClassConflict"
#define RULES_REASON_STORAGE_CLASS_AVAILABLE    "StorageClassAvailable"

/* PillarVolumeState (crds.md §7.3). */
#define RULES_COND_BACKEND_CREATED       "BackendCreated"
#define RULES_COND_EXPORT_CREATED        "ExportCreated"
#define RULES_COND_EXPORT_RECONCILED     "ExportReconciled"
#define RULES_REASON_BACKEND_CREATED     "BackendCreated"
#define RULES_REASON_BACKEND_PENDING     "BackendPending"
#define RULES_REASON_EXPORT_CREATED      "ExportCreated"
#define RULES_REASON_EXPORT_PENDING      "ExportPending"
#define RULES_REASON_VOLUME_READY        "VolumeReady"
#define RULES_REASON_PROVISIONING        "Provisioning"
#define RULES_REASON_CREATE_PARTIAL      "CreatePartial"
#define RULES_REASON_DELETING            "Deleting"
#define RULES_REASON_RECONCILED          "Reconciled"
#define RULES_REASON_EXPORT_SPEC_MISSING "ExportSpecMissing"
#define RULES_REASON_AGENT_UNAVAILABLE   "AgentUnavailable"
#define RULES_REASON_RECONCILE_FAILED    "ReconcileFailed"
#define RULES_REASON_STALE_GENERATION    "StaleGeneration"

/* Event reasons that are no condition's (roles/controller/events.h). */
#define RULES_EVENT_STORAGE_NODE_UNREACHABLE "StorageNodeUnreachable"
#define RULES_EVENT_STORAGE_NODE_RESTORED    "StorageNodeRestored"
#define RULES_EVENT_POD_DELETED              "PodDeletedAfterCtrlLoss"
#define RULES_EVENT_POD_NOT_DELETED          "PodNotDeletedAfterCtrlLoss"
#define RULES_EVENT_POD_RECOVERY_FORBIDDEN   "PodRecoveryForbidden"

#endif
