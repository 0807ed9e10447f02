/* pvst — PillarVolumeState access shared by the CSI handlers and the reconcilers (crds.md §7).
 *
 * pvst_update is the compare-and-swap of crds.md §7.5 on the typed object: it reads the
 * object `name` (pinned to uid: a missing object or another UID → ABORTED "volume lifecycle of
 * ... changed"), calls fn on it; fn returns 0 to write the status, PVST_SKIP to stop without
 * writing (OK), or a gRPC code to fail.  Conflicts are retried.  Handler-style functions return
 * a gRPC code (0 = OK) with the message in gs.
 *
 * The first read is the watch-fed cache's copy (store_cache_open), as client-go controllers
 * update from a lister's copy: the status write is conditional on that copy's resourceVersion,
 * so a stale copy is refused with Conflict and the retry reads through to the store (an
 * uncached API read, crds.md §7.5).  On threads that read through (the CSI handlers),
 * outcomes that write nothing (a missing object, another UID, fn's PVST_SKIP or error) are never
 * taken on a cached copy: they are decided again on a read through; the reconcilers, which read
 * from the caches anyway, take them on the cache's copy.  On the kube store a status
 * write thus costs one PUT, not a GET and a PUT.
 */
#ifndef PILLAR_ROLES_CONTROLLER_PVST_H
#define PILLAR_ROLES_CONTROLLER_PVST_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/ctl.h"
#include "model/pillar.h"

#define PVST_SKIP (-1)
typedef int (*pvst_fn)(struct model_pvst *v, void *arg, struct grpc_status *gs);

/* The PillarVolumeState `name`: the cache's copy when cached (see above; a name the cache does
 * not hold is read through), else read through.  model_get's results. */
int pvst_read(struct ctl *c, const char *name, bool cached, struct model_pvst *v, struct err *e);

/* *out (optional, zeroed or cleared) receives the written (or current) object. */
int pvst_update(struct ctl *c, const char *name, const char *uid, pvst_fn fn, void *arg,
                struct model_pvst *out, struct grpc_status *gs);
/* pvst_update that writes fn's changes of metadata too, with the status in one write where the
 * store can (model_update_with_status). */
int pvst_update_all(struct ctl *c, const char *name, const char *uid, pvst_fn fn, void *arg,
                    struct model_pvst *out, struct grpc_status *gs);

/* Runs fn under the per-volume lock of the volume ID volume_id (csi.md §4: one call per volume
 * at a time) with the ID's parts and the PillarVolumeState name.  A malformed ID runs nothing:
 * GRPC_OK when absent_ok (DeleteVolume, ControllerUnpublishVolume), else GRPC_NOT_FOUND
 * `volume "<id>" not found`.  Returns fn's code. */
typedef int (*pvst_locked_fn)(struct ctl *c, const struct rules_volid *v, const char *pname,
                              void *arg, struct grpc_status *gs);
int pvst_locked(struct ctl *c, const char *volume_id, bool absent_ok, pvst_locked_fn fn, void *arg,
                struct grpc_status *gs);

/* status.publicationGeneration (0 when absent or negative) and its setter. */
uint64_t pvst_gen(const struct model_pvst *v);
void pvst_gen_set(struct model_pvst *v, uint64_t g);

/* The PillarVolumeState of a volume ID: 0 with *out (zeroed or cleared; the caller clears it),
 * GRPC_NOT_FOUND when none (or its spec.volumeID differs), GRPC_UNAVAILABLE on a store error
 * (message in gs). */
int pvst_find(struct ctl *c, const char *volume_id, struct model_pvst *out, struct grpc_status *gs);
/* pvst_find for a call whose volume must exist: GRPC_NOT_FOUND comes with the message
 * `volume "<id>" not found` in gs. */
int pvst_find_existing(struct ctl *c, const char *volume_id, struct model_pvst *out,
                       struct grpc_status *gs);

bool pvst_deleting(const struct model_pvst *v);

/* The agent's BackendParams of a volume from spec.resolved.backend (pointers into v and b) in
 * *out, NULL when it has none of zfs, lvm, file.  0 or -ENOMEM; pvst_backend_params_free(b)
 * afterwards either way. */
struct pvst_backend_buf {
	PillarCsi__Agent__V1__BackendParams bp;
	PillarCsi__Agent__V1__ZfsVolumeParams zfs;
	PillarCsi__Agent__V1__LvmVolumeParams lvm;
	PillarCsi__Agent__V1__FileVolumeParams file;
	PillarCsi__Agent__V1__ZfsVolumeParams__PropertiesEntry *props;
	PillarCsi__Agent__V1__ZfsVolumeParams__PropertiesEntry **propp;
};
int pvst_backend_params(struct pvst_backend_buf *b, const struct model_pvst *v,
                        PillarCsi__Agent__V1__BackendParams **out);
/* The same of a backend member (a PillarSnapshot's spec.backend). */
int pvst_backend_params_of(struct pvst_backend_buf *b, const struct model_backend *bk,
                           PillarCsi__Agent__V1__BackendParams **out);
void pvst_backend_params_free(struct pvst_backend_buf *b);

/* The fencing token of a volume at generation gen (pointers into v). */
void pvst_fence(PillarCsi__Agent__V1__FencingToken *t, const struct model_pvst *v, uint64_t gen);

#endif
