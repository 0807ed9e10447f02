/* csi — the CSI Identity and Controller services as plain functions (csi.md §1, §4).
 *
 * Every handler has the one handler shape of roles/glue.h:
 *     int csi_x(struct ctl *, const Req *req, Resp *resp, struct grpc_status *gs)
 * It returns the gRPC status code (0 = OK) with the message in *gs; resp is allocated and
 * initialised by the caller (the transport, glue.h), and the handler heap-allocates its members,
 * which the caller frees with protobuf_c_message_free_unpacked (on any code: members set before
 * a failure are freed with it).  Out of memory is RESOURCE_EXHAUSTED (grpc/status.h).  Handlers
 * never return negative errnos.
 */
#ifndef PILLAR_ROLES_CONTROLLER_CSI_H
#define PILLAR_ROLES_CONTROLLER_CSI_H

#include "controller/ctl.h"
#include "csi.pb-c.h"
#include "model/pillar.h"

int csi_get_plugin_info(struct ctl *c, const Csi__V1__GetPluginInfoRequest *req,
                        Csi__V1__GetPluginInfoResponse *resp, struct grpc_status *gs);
int csi_get_plugin_capabilities(struct ctl *c, const Csi__V1__GetPluginCapabilitiesRequest *req,
                                Csi__V1__GetPluginCapabilitiesResponse *resp,
                                struct grpc_status *gs);
/* ready: the store answers (a list of PillarAgents succeeds). */
int csi_probe(struct ctl *c, const Csi__V1__ProbeRequest *req, Csi__V1__ProbeResponse *resp,
              struct grpc_status *gs);

int csi_create_volume(struct ctl *c, const Csi__V1__CreateVolumeRequest *req,
                      Csi__V1__CreateVolumeResponse *resp, struct grpc_status *gs);
int csi_delete_volume(struct ctl *c, const Csi__V1__DeleteVolumeRequest *req,
                      Csi__V1__DeleteVolumeResponse *resp, struct grpc_status *gs);
int csi_controller_publish(struct ctl *c, const Csi__V1__ControllerPublishVolumeRequest *req,
                           Csi__V1__ControllerPublishVolumeResponse *resp, struct grpc_status *gs);
int csi_controller_unpublish(struct ctl *c, const Csi__V1__ControllerUnpublishVolumeRequest *req,
                             Csi__V1__ControllerUnpublishVolumeResponse *resp,
                             struct grpc_status *gs);
int csi_controller_expand(struct ctl *c, const Csi__V1__ControllerExpandVolumeRequest *req,
                          Csi__V1__ControllerExpandVolumeResponse *resp, struct grpc_status *gs);
int csi_validate_capabilities(struct ctl *c, const Csi__V1__ValidateVolumeCapabilitiesRequest *req,
                              Csi__V1__ValidateVolumeCapabilitiesResponse *resp,
                              struct grpc_status *gs);
int csi_get_capacity(struct ctl *c, const Csi__V1__GetCapacityRequest *req,
                     Csi__V1__GetCapacityResponse *resp, struct grpc_status *gs);
/* Snapshots (docs/snapshots.md): csi_snapshot.c, csi_snapshot_list.c. */
int csi_create_snapshot(struct ctl *c, const Csi__V1__CreateSnapshotRequest *req,
                        Csi__V1__CreateSnapshotResponse *resp, struct grpc_status *gs);
int csi_delete_snapshot(struct ctl *c, const Csi__V1__DeleteSnapshotRequest *req,
                        Csi__V1__DeleteSnapshotResponse *resp, struct grpc_status *gs);
int csi_list_snapshots(struct ctl *c, const Csi__V1__ListSnapshotsRequest *req,
                       Csi__V1__ListSnapshotsResponse *resp, struct grpc_status *gs);
int csi_controller_capabilities(struct ctl *c, const Csi__V1__ControllerGetCapabilitiesRequest *req,
                                Csi__V1__ControllerGetCapabilitiesResponse *resp,
                                struct grpc_status *gs);

/* ---- shared by the handler files -------------------------------------------------------------- */

/* Name of an access mode enum value ("SINGLE_NODE_WRITER"), "UNKNOWN" otherwise. */
const char *csi_mode_name(int mode);
/* INVALID_ARGUMENT "<what> \"<name>\" must match <pattern>" for a CO name that is not
 * rules_volname_valid; a name longer than any valid one is quoted by its first 64 bytes and
 * "...", so that the message keeps what to do whatever was sent. */
int csi_name_refused(struct grpc_status *gs, const char *what, const char *name,
                     const char *pattern);
/* 0 when the capability is acceptable (csi.md §4.1), else INVALID_ARGUMENT with message. */
int csi_check_capability(const Csi__V1__VolumeCapability *cap, struct grpc_status *gs);
/* The claim of crds.md §7.5 as a pvst_update step: bumps status.publicationGeneration by one
 * (gen: the committed value); refuses a volume being deleted (ABORTED); with set_deleting, the
 * DeleteVolume claim: refuses a published volume (FAILED_PRECONDITION) and sets deleting. */
struct csi_claim {
	const char *name;
	uint64_t gen;
	bool set_deleting;
	const char *volume_id;
};
int csi_claim(struct model_pvst *v, void *arg, struct grpc_status *gs);
/* CreateVolume steps 7–9 on an object in phase Provisioning or CreatePartial; on OK
 * resp->volume is set.  claimed: the generation of the claim before the agent's CreateVolume
 * when the caller wrote it with the object (0: step 7 claims). */
int csi_provision(struct ctl *c, const struct model_pvst *v, const char *pname, uint64_t claimed,
                  Csi__V1__CreateVolumeResponse *resp, struct grpc_status *gs);

/* Heap Volume message for a Ready PillarVolumeState. NULL when out of memory. */
Csi__V1__Volume *csi_volume_of(const struct model_pvst *pvst);

#endif
