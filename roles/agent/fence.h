/* fence — durable fencing marks (agent-api.md §6).
 *
 * One mark per agent volume ID at <state-dir>/generations/<escaped id>.mark, written durably
 * (temp, fsync, rename, fsync of generations/ and of the state directory) BEFORE the mutation
 * it authorises.  The caller holds the volume's lock around check + mutation.
 *
 * Returns 0 (proceed), -ESTALE with the message
 *   stale fencing token (uid "<uid>", generation <n>) for volume "<id>": <reason> (mark uid "<u>", generation <g>, ended <b>)
 * -EBADMSG with `corrupt fencing mark <path>: <reason>` for an unreadable/unparsable mark, or
 * another negative errno when the mark cannot be written.
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

/* Rule 8: the destroy succeeded; sets ended=true (no-op without a mark). */
int agent_fence_end(const char *state_dir, const char *volume_id, struct err *e);

/* Mark as read from disk, for tests and diagnostics.  -ENOENT, -EBADMSG. */
struct fence_mark {
	char uid[256];
	uint64_t generation;
	bool ended;
	size_t n_ended;
	char **ended_uids;
};
int agent_fence_read(const char *state_dir, const char *volume_id, struct fence_mark *m,
                     struct err *e);
void agent_fence_mark_clear(struct fence_mark *m);

#endif
