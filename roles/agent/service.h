/* service — the AgentService request handlers, transport-independent (agent-api.md §5–§10).
 *
 * Each handler takes the decoded request and a response the CALLER allocated on the heap and
 * initialised with its __INIT macro; the handler fills it with heap-allocated strings, repeated
 * fields and sub-messages, so the caller releases everything with
 * protobuf_c_message_free_unpacked(&resp->base, NULL) after packing (also on error).
 * Handlers return a gRPC code (grpc/status.h) and fill st with the message.  They may block
 * (backend commands, device waits) and are safe to call from several threads: mutating work is
 * serialised per volume, configfs work under one lock, ReconcileState one at a time.
 *
 * The restore gate starts closed in every new service (§7.1); Drain closes the door for good.
 */
#ifndef PILLAR_ROLES_AGENT_SERVICE_H
#define PILLAR_ROLES_AGENT_SERVICE_H

#include <stdbool.h>

#include "agent/config.h"
#include "base/err.h"
#include "grpc/status.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"

typedef struct agent_service agent_service;

struct agent_service_opts {
	const char *state_dir;     /* required */
	const char *configfs_root; /* required */
	const char *version;       /* agent_version; NULL = "unknown" */
	/* Test overrides (NULL/0 = production values). */
	const char *dev_root;  /* "/dev" for zvol and LV device nodes */
	const char *host_root; /* prefix for /dev/zfs, /dev/mapper/control, /sys/module/nvmet_tcp */
	int device_wait_ms;    /* restore/export device budget, 30000 */
	int create_wait_ms;    /* CreateVolume device wait, 10000 */
	int addr_wait_ms;      /* bind address presence wait, 30000 */
	int busy_retry_ms;     /* DeleteVolume busy retry spacing, 1000 */
	int drain_wait_ms;     /* Drain's wait for in-flight calls, 30000 */
	int health_cache_ms;   /* how long HealthCheck's pool/VG results are reused, 10000 */
	int copy_wait_ms;      /* file snapshot/clone copy wait per call, 10000 (< 0: none) */
	/* Called by ReconcileState after phase 1 (every item prepared) and before phase 2. */
	void (*between_phases)(void *arg);
	void *hook_arg;
};

/* Builds backends from cfg (copied) and opens the nvmet handle.  Creates <state>/generations and
 * <state>/nvmet-identity (0750).  Never touches configfs.  0 or a negative errno. */
int agent_service_new(const struct agent_config *cfg, const struct agent_service_opts *o,
                      agent_service **out, struct err *e);
void agent_service_free(agent_service *a);
bool agent_service_restore_pending(agent_service *a);
bool agent_service_draining(agent_service *a);
/* The configfs exporter (tests set a trace on it). */
struct nvmet *agent_service_nvmet(agent_service *a);

/* Read-only RPCs. */
int agent_get_capabilities(agent_service *a,
                           const PillarCsi__Agent__V1__GetCapabilitiesRequest *req,
                           PillarCsi__Agent__V1__GetCapabilitiesResponse *resp,
                           struct grpc_status *st);
int agent_get_capacity(agent_service *a, const PillarCsi__Agent__V1__GetCapacityRequest *req,
                       PillarCsi__Agent__V1__GetCapacityResponse *resp, struct grpc_status *st);
int agent_list_volumes(agent_service *a, const PillarCsi__Agent__V1__ListVolumesRequest *req,
                       PillarCsi__Agent__V1__ListVolumesResponse *resp, struct grpc_status *st);
int agent_list_exports(agent_service *a, const PillarCsi__Agent__V1__ListExportsRequest *req,
                       PillarCsi__Agent__V1__ListExportsResponse *resp, struct grpc_status *st);
int agent_health_check(agent_service *a, const PillarCsi__Agent__V1__HealthCheckRequest *req,
                       PillarCsi__Agent__V1__HealthCheckResponse *resp, struct grpc_status *st);

/* Backend RPCs (not gated). */
int agent_create_volume(agent_service *a, const PillarCsi__Agent__V1__CreateVolumeRequest *req,
                        PillarCsi__Agent__V1__CreateVolumeResponse *resp, struct grpc_status *st);
int agent_delete_volume(agent_service *a, const PillarCsi__Agent__V1__DeleteVolumeRequest *req,
                        PillarCsi__Agent__V1__DeleteVolumeResponse *resp, struct grpc_status *st);
int agent_expand_volume(agent_service *a, const PillarCsi__Agent__V1__ExpandVolumeRequest *req,
                        PillarCsi__Agent__V1__ExpandVolumeResponse *resp, struct grpc_status *st);

/* Export RPCs. */
int agent_export_volume(agent_service *a, const PillarCsi__Agent__V1__ExportVolumeRequest *req,
                        PillarCsi__Agent__V1__ExportVolumeResponse *resp, struct grpc_status *st);
int agent_unexport_volume(agent_service *a, const PillarCsi__Agent__V1__UnexportVolumeRequest *req,
                          PillarCsi__Agent__V1__UnexportVolumeResponse *resp,
                          struct grpc_status *st);
int agent_allow_initiator(agent_service *a, const PillarCsi__Agent__V1__AllowInitiatorRequest *req,
                          PillarCsi__Agent__V1__AllowInitiatorResponse *resp,
                          struct grpc_status *st);
int agent_deny_initiator(agent_service *a, const PillarCsi__Agent__V1__DenyInitiatorRequest *req,
                         PillarCsi__Agent__V1__DenyInitiatorResponse *resp, struct grpc_status *st);
int agent_reconcile_state(agent_service *a, const PillarCsi__Agent__V1__ReconcileStateRequest *req,
                          PillarCsi__Agent__V1__ReconcileStateResponse *resp,
                          struct grpc_status *st);
int agent_drain(agent_service *a, const PillarCsi__Agent__V1__DrainRequest *req,
                PillarCsi__Agent__V1__DrainResponse *resp, struct grpc_status *st);

/* Snapshot RPCs (docs/snapshots.md "Agent API"; not gated: snapshots are never exported). */
int agent_create_snapshot(agent_service *a, const PillarCsi__Agent__V1__CreateSnapshotRequest *req,
                          PillarCsi__Agent__V1__CreateSnapshotResponse *resp,
                          struct grpc_status *st);
int agent_delete_snapshot(agent_service *a, const PillarCsi__Agent__V1__DeleteSnapshotRequest *req,
                          PillarCsi__Agent__V1__DeleteSnapshotResponse *resp,
                          struct grpc_status *st);
int agent_list_snapshots(agent_service *a, const PillarCsi__Agent__V1__ListSnapshotsRequest *req,
                         PillarCsi__Agent__V1__ListSnapshotsResponse *resp, struct grpc_status *st);

/* SendVolume / ReceiveVolume: UNIMPLEMENTED. */
int agent_unimplemented(const char *rpc, struct grpc_status *st);

#endif
