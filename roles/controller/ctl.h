/* ctl — the controller core shared by the CSI handlers and the reconcilers.
 *
 * A struct ctl holds the object store, the agent client and the in-process per-volume locks
 * (csi.md §4: a second call for the same volume waits for the first: keylock_wait on locks,
 * keyed by PillarVolumeState name).  Helpers here implement the pieces every handler needs: volume IDs and names (csi.md §2), PillarVolumeState lookup
 * and the conditional status update pinned to a UID (crds.md §7.5), conditions (crds.md §1) and
 * the agent of a volume.  Handler-style functions return a gRPC code (0 = OK) and fill a
 * struct grpc_status; plain library functions return 0 or a negative errno.
 */
#ifndef PILLAR_ROLES_CONTROLLER_CTL_H
#define PILLAR_ROLES_CONTROLLER_CTL_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/keylock.h"
#include "controller/agentclient.h"
#include "grpc/status.h"
#include "rules/keys.h"
#include "rules/volid.h"
#include "store/store.h"

struct ctl {
	store *st;
	agentclient *ac;
	int agent_default_port;
	struct keylock locks; /* per PillarVolumeState name: a second call waits (csi.md §4) */
	/* Called (when set) with an agent name when an agent RPC failed with the
	 * `export restore pending` prefix, so the agent's restore runs at once. */
	void (*restore_kick)(void *arg, const char *agent);
	void *restore_kick_arg;
};

void ctl_init(struct ctl *c, store *st, agentclient *ac);
void ctl_fini(struct ctl *c);

/* Volume IDs, volume names and PillarVolumeState names (csi.md §2) are rules/volid.h. */

/* ---- PillarVolumeState ------------------------------------------------------------------------ */

const struct store_kind *kind_of(const char *name); /* store_kind_lookup, never NULL for ours */

/* The PillarVolumeState of a volume ID: 0 with *out, GRPC_NOT_FOUND when none (or its
 * spec.volumeID differs), GRPC_UNAVAILABLE on a store error (message in gs). */
int pvst_get_by_id(struct ctl *c, const char *volume_id, cJSON **out, struct grpc_status *gs);

/* Compare-and-swap on status: re-reads `name` (pinned to uid: a missing object or another UID
 * → ABORTED "volume lifecycle of ... changed"), calls fn on the object (status created if
 * absent); fn returns 0 to write, CAS_SKIP to stop without writing (OK), or a gRPC code to
 * fail.  Conflicts are retried.  *out (optional) is the written (or current) object. */
#define CAS_SKIP (-1)
typedef int (*pvst_mutate_fn)(cJSON *obj, cJSON *status, void *arg, struct grpc_status *gs);
int pvst_cas(struct ctl *c, const char *name, const char *uid, pvst_mutate_fn fn, void *arg,
             cJSON **out, struct grpc_status *gs);

/* status.publicationGeneration (0 when absent) and setter. */
uint64_t pvst_generation(const cJSON *obj);
void pvst_set_generation(cJSON *status, uint64_t g);
bool pvst_deleting(const cJSON *obj);

/* ---- conditions (crds.md §1) ------------------------------------------------------------------ */

/* Sets condition `type` in status.conditions.  lastTransitionTime changes only when the status
 * changes.  Returns true when anything changed. */
bool cond_set(cJSON *status, const char *type, const char *cstatus, const char *reason,
              const char *message, int64_t observed_generation);
/* The condition object of type, or NULL. */
const cJSON *cond_get(const cJSON *status, const char *type);
/* status and reason of a condition ("" when absent). */
const char *cond_status(const cJSON *obj, const char *type);
const char *cond_reason(const cJSON *obj, const char *type);

/* ---- agents ----------------------------------------------------------------------------------- */

/* Reads PillarAgent `agent` and its status.resolvedAddress into addr.  Returns 0,
 * GRPC_NOT_FOUND (object missing; gs not set — the caller words it) or GRPC_UNAVAILABLE
 * `PillarAgent "<a>" has no resolved address`. */
int ctl_agent_address(struct ctl *c, const char *agent, char *addr, size_t cap,
                      struct grpc_status *gs);
/* Bind address (IP part, no brackets) of "ip:port" / "[ip6]:port". */
void addr_ip_part(const char *addr, char *out, size_t cap);

/* Agent enums and params from spec.backendType / spec.resolved.backend. */
int backend_enum(const char *token);
/* Fills *bp (and the sub-message storage in *zfs / *lvm / *file, props storage) from
 * resolved.backend; NULL when resolved.backend has none of zfs, lvm, file. */
struct backend_params_buf {
	PillarCsi__Agent__V1__BackendParams bp;
	PillarCsi__Agent__V1__ZfsVolumeParams zfs;
	PillarCsi__Agent__V1__LvmVolumeParams lvm;
	PillarCsi__Agent__V1__FileVolumeParams file;
	PillarCsi__Agent__V1__ZfsVolumeParams__PropertiesEntry *props;
	PillarCsi__Agent__V1__ZfsVolumeParams__PropertiesEntry **propp;
};
PillarCsi__Agent__V1__BackendParams *backend_params_fill(struct backend_params_buf *b,
                                                         const cJSON *pvst);
void backend_params_free(struct backend_params_buf *b);

/* Sets st from an agent status and returns its code. Prefixes nothing. */
int ctl_agent_error(struct ctl *c, const char *agent, const struct grpc_status *ast,
                    struct grpc_status *gs);

/* Kubernetes Quantities in canonical binary form (crds.md §1): the largest suffix of
 * Ki Mi Gi Ti Pi Ei dividing the byte count, else plain bytes.  quantity_parse accepts those
 * suffixes, the decimal k M G T P E and plain integers; 0 or -EINVAL. */
void quantity_format(long long bytes, char *out, size_t cap);
int quantity_parse(const char *q, long long *out);

int gstatus(struct grpc_status *gs, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
