/* identity — namespace identity resolution and pinned records (agent-api.md §8.3, §8.4).
 *
 * Records live at <state-dir>/nvmet-identity/<escaped volume id>.json, written with the same
 * durability as fencing marks:
 *   {"volumeUID":"<uid>","identity":{"uuid":"…","nguid":"…","serial":"…"}}
 * Functions return 0 or a negative errno; a corrupt record is -EBADMSG with
 * `corrupt identity record <path>: <reason>`.
 */
#ifndef PILLAR_ROLES_AGENT_IDENTITY_H
#define PILLAR_ROLES_AGENT_IDENTITY_H

#include "base/err.h"
#include "nvmet/nvmet.h"

/* Rule 1: the pinned identity when its volumeUID equals uid (a record of another lifecycle is
 * deleted and ignored), else the derived one.  The live-state rule is the exporter's. */
int agent_identity_start(const char *state_dir, const char *volume_id, const char *uid,
                         const char *nqn, struct rules_ns_identity *out, struct err *e);
/* Rule 4: pin `result` when it differs from the derived identity, else delete any record. */
int agent_identity_settle(const char *state_dir, const char *volume_id, const char *uid,
                          const char *nqn, const struct rules_ns_identity *result, struct err *e);
/* Deletes the record (UnexportVolume, DeleteVolume); missing is success. */
int agent_identity_forget(const char *state_dir, const char *volume_id, struct err *e);

#endif
