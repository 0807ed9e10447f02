/* psnap — PillarSnapshot access for the CSI snapshot handlers (docs/snapshots.md), as pvst.h is
 * for PillarVolumeState: a compare-and-swap of the status pinned to the object's UID, the
 * snapshot's fencing generation, and the agent's parameters and token of a snapshot.
 * Handler-style functions return a gRPC code (0 = OK) with the message in gs.
 */
#ifndef PILLAR_ROLES_CONTROLLER_PSNAP_H
#define PILLAR_ROLES_CONTROLLER_PSNAP_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/ctl.h"
#include "controller/pvst.h"
#include "csi.pb-c.h"
#include "model/snapshot.h"

/* Reads the object `name` (read through: snapshots are not cached), calls fn on it and writes
 * its status conditionally on the read's resourceVersion; conflicts are retried.  A missing
 * object or another UID is ABORTED "snapshot lifecycle ... changed".  fn returns 0 (write) or
 * a gRPC code.  *out (optional, zeroed or cleared) receives the written object. */
typedef int (*psnap_fn)(struct model_psnap *s, void *arg, struct grpc_status *gs);
int psnap_update(struct ctl *c, const char *name, const char *uid, psnap_fn fn, void *arg,
                 struct model_psnap *out, struct grpc_status *gs);

/* The PillarSnapshot of a snapshot ID: 0 with *out (the caller clears it), GRPC_NOT_FOUND when
 * none (a malformed ID, no object, or one whose spec.snapshotID differs), GRPC_UNAVAILABLE on a
 * store error (message in gs). */
int psnap_find(struct ctl *c, const char *snapshot_id, struct model_psnap *out,
               struct grpc_status *gs);

/* status.fencingGeneration (0 when absent) and a claim: +1. */
uint64_t psnap_gen(const struct model_psnap *s);
void psnap_gen_set(struct model_psnap *s, uint64_t g);
bool psnap_deleting(const struct model_psnap *s);
/* Listed by ListSnapshots and usable as a content source: the agent took it (creationTime set)
 * and it is not being deleted. */
bool psnap_cut(const struct model_psnap *s);

/* What an agent snapshot request carries to name the snapshot s under fencing generation gen:
 * its BackendParams (spec.backend; pvst_backend_params), its fencing token, its agent snapshot
 * ID and its backend type (pointers into s and into bb). */
struct psnap_target {
	struct pvst_backend_buf bb;
	PillarCsi__Agent__V1__FencingToken fence;
	PillarCsi__Agent__V1__BackendParams *params;
	char *snapshot_id;
	int backend_type; /* PillarCsi__Agent__V1__BackendType */
};
/* Fills t: 0, or -ENOMEM (t is then freed). */
int psnap_target(struct psnap_target *t, const struct model_psnap *s, uint64_t gen);
void psnap_target_free(struct psnap_target *t);

/* A heap Csi__V1__Snapshot of the record; NULL when out of memory. */
Csi__V1__Snapshot *psnap_csi(const struct model_psnap *s);

/* RFC 3339 with nanoseconds ("2026-12-06T16:00:00.123456789Z") of seconds and nanos, and back:
 * 0 or -EINVAL. */
void psnap_time_format(int64_t seconds, int32_t nanos, char *out, size_t cap);
int psnap_time_parse(const char *text, int64_t *seconds, int32_t *nanos);

#endif
