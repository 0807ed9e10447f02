/* pvst — PillarVolumeState access shared by the CSI handlers and the reconcilers (crds.md §7).
 *
 * pvst_update is the compare-and-swap of crds.md §7.5 on the typed object: it re-reads the
 * object `name` (pinned to uid: a missing object or another UID → ABORTED "volume lifecycle of
 * ... changed"), calls fn on it; fn returns 0 to write the status, PVST_SKIP to stop without
 * writing (OK), or a gRPC code to fail.  Conflicts are retried.  Handler-style functions return
 * a gRPC code (0 = OK) with the message in gs.
 */
#ifndef PILLAR_ROLES_CONTROLLER_PVST_H
#define PILLAR_ROLES_CONTROLLER_PVST_H

#include <stdint.h>

#include "controller/ctl.h"
#include "model/pillar.h"

#define PVST_SKIP (-1)
typedef int (*pvst_fn)(struct model_pvst *v, void *arg, struct grpc_status *gs);

/* *out (optional, zeroed or cleared) receives the written (or current) object. */
int pvst_update(struct ctl *c, const char *name, const char *uid, pvst_fn fn, void *arg,
                struct model_pvst *out, struct grpc_status *gs);

/* status.publicationGeneration (0 when absent or negative) and its setter. */
uint64_t pvst_gen(const struct model_pvst *v);
void pvst_gen_set(struct model_pvst *v, uint64_t g);

/* The agent's BackendParams of a volume from spec.resolved.backend (pointers into v and b);
 * NULL when it has none of zfs, lvm, file.  backend_params_free(b) afterwards. */
PillarCsi__Agent__V1__BackendParams *pvst_backend_params(struct backend_params_buf *b,
                                                         const struct model_pvst *v);

#endif
