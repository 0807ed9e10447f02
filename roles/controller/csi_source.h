/* csi_source — the volume_content_source of CreateVolume (docs/snapshots.md): a snapshot
 * (restore) or another volume (clone), looked up in the controller's records.  A volume made
 * from a source lives where the source lives: the source's agent, pool and backend settings
 * replace the StorageClass's; the protocol and filesystem still come from the request.
 * Handler-style functions return a gRPC code (0 = OK) with the message in gs. */
#ifndef PILLAR_ROLES_CONTROLLER_CSI_SOURCE_H
#define PILLAR_ROLES_CONTROLLER_CSI_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/ctl.h"
#include "csi.pb-c.h"
#include "model/pillar.h"
#include "rules/volid.h"

struct csi_source {
	bool set;      /* the request names a source */
	bool snapshot; /* a snapshot, else a volume */
	char id[RULES_VOLID_CAP];
	struct rules_volid where; /* the ID's parts: agent, backend, pool */
	int64_t size;             /* the least size of the new volume */
	char store[254];          /* the source's PillarStore label ("" when unknown) */
	struct model_backend backend;
};

/* The source cs names (NULL: none, s->set false).  INVALID_ARGUMENT for an empty one,
 * NOT_FOUND for one the records do not hold (or that is being deleted), UNAVAILABLE while it is
 * not ready yet, FAILED_PRECONDITION for an LVM linear source. */
int csi_source_resolve(struct ctl *c, const Csi__V1__VolumeContentSource *cs, struct csi_source *s,
                       struct grpc_status *gs);
void csi_source_clear(struct csi_source *s);
/* spec.contentSource of a new volume.  0 or -ENOMEM. */
int csi_source_record(struct model_pvst *v, const struct csi_source *s);
/* Whether an existing volume was made from the same source (or none from none). */
bool csi_source_same(const struct model_pvst *v, const struct csi_source *s);
/* The agent's content source of a volume (the agent ID in buf): 1 when it has one, 0 when
 * not, -1 when the recorded ID is malformed. */
int csi_source_agent(const struct model_pvst *v, PillarCsi__Agent__V1__VolumeContentSource *out,
                     char *buf, size_t cap);
/* The CreateVolumeResponse's content_source of a volume (heap), NULL when it has none or out of
 * memory. */
Csi__V1__VolumeContentSource *csi_source_csi(const struct model_pvst *v);

#endif
