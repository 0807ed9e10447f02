/* fence — durable fencing marks (agent-api.md §6).
 *
 * One mark per agent volume ID at <state-dir>/generations/<escaped id>.mark, made durable
 * BEFORE the mutation it authorises by an entry of the marks' journal (marklog.h: one
 * fdatasync, then the file is written; a checkpoint or the replay when the journal is opened
 * makes the file itself durable).  The caller holds the volume's lock around check + mutation.
 *
 * Returns 0 (proceed), -ESTALE with the message
 *   stale fencing token (uid "<uid>", generation <n>) for volume "<id>": <reason> (mark uid "<u>", generation <g>, ended <b>)
 * -EBADMSG with `corrupt fencing mark <path>: <reason>` for an unreadable/unparsable mark, or
 * another negative errno when the mark cannot be written.
 *
 * A mark may also record the size of the `file` image its lifecycle's CreateVolume made
 * (imageBytes, agent_fence_check_create): the one durable write then covers the fencing
 * decision and the image's size, and the image is created without an fsync of its own.  When
 * the create wrote that mark itself (under agent_marklog_hold) the pool directory is not
 * fsync'd either: the mark's journal entry stays unretired until a checkpoint has synced the
 * pool's filesystem, and an agent starting after a power cut makes every image that a
 * replayed live mark records and that is missing (svc_restore_image).  Rewrites keep it; a
 * new lifecycle or the end of one drops it.
 */
#ifndef PILLAR_ROLES_AGENT_FENCE_H
#define PILLAR_ROLES_AGENT_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum fence_class { FENCE_GRANT, FENCE_REVOKE, FENCE_DESTROY };

#define FENCE_GENERATION_MAX (UINT64_C(1) << 53)

/* Escaping of §6.2: A–Z a–z 0–9 . - kept, every other byte → "_" + two uppercase hex digits.
 * -ENAMETOOLONG when out is too small. */
int agent_fence_escape(const char *id, char *out, size_t cap);

/* The decision rules of §6.3 (1–7'').  uid NULL or "" = missing token. */
int agent_fence_check(const char *state_dir, const char *volume_id, const char *uid,
                      uint64_t generation, enum fence_class cls, struct err *e);

/* agent_fence_check of a CreateVolume (class grant) about to make a `file` image of
 * image_bytes (> 0) bytes: the mark the check writes (rules 2, 5, 7'') records imageBytes in
 * the same durable write.  *recorded tells whether the mark, once the check passed, holds
 * image_bytes for the token's lifecycle (written now, or by an earlier try of the same
 * create): the image's own fsync is then not needed, as an agent starting after a power cut
 * gives an empty image its recorded size (svc_complete_images).  *written: this check wrote
 * that mark (its journal entry is pending). */
int agent_fence_check_create(const char *state_dir, const char *volume_id, const char *uid,
                             uint64_t generation, int64_t image_bytes, bool *recorded,
                             bool *written, struct err *e);

/* Rule 8: the destroy succeeded; sets ended=true (no-op without a mark). */
int agent_fence_end(const char *state_dir, const char *volume_id, struct err *e);

/* Mark as read from disk, for tests and diagnostics.  -ENOENT, -EBADMSG. */
struct fence_mark {
	char uid[256];
	uint64_t generation;
	bool ended;
	size_t n_ended;
	char **ended_uids;
	int64_t image_bytes; /* 0: none recorded */
};
int agent_fence_read(const char *state_dir, const char *volume_id, struct fence_mark *m,
                     struct err *e);
void agent_fence_mark_clear(struct fence_mark *m);

#endif
