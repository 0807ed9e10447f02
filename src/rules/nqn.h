/* rules/nqn — NVMe qualified names and namespace identity (nvmet.md §2, agent-api.md §8): the
 * one definition the agent (which exports) and the node (which attaches and checks the device
 * it found) share.
 *
 * Subsystem NQN of an agent volume ID `<pool>/<name>`: RULES_NQN_PREFIX followed by the ID with
 * every "/" replaced by "." (at most 223 bytes).  Namespace identity of a subsystem (NSID 1):
 * uuid = UUIDv5(ns, "uuid:<nqn>/namespaces/1"), nguid = UUIDv5(ns, "nguid:<nqn>/namespaces/1")
 * in UUID text form, serial = the first 10 bytes of SHA-256("serial:<nqn>") in lowercase hex,
 * where ns is 3c6e0b8a-6a0f-5c1d-9f5e-8d2b7a4e1c90.  The functions are pure and thread-safe.
 */
#ifndef PILLAR_RULES_NQN_H
#define PILLAR_RULES_NQN_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define RULES_NQN_PREFIX "nqn.2026-01.com.bhyoo.pillar-csi:"
#define RULES_NQN_MAX    223 /* bytes, NVMe base specification */

/* The NQN of an agent volume ID.  0; -EINVAL `invalid volume id "<id>"` when the ID has no "/";
 * -ENAMETOOLONG `NQN for volume "<id>" is <n> bytes; the limit is 223` (or when cap is too
 * small). */
int rules_nqn_of_volume(const char *agent_volume_id, char *out, size_t cap, struct err *e);
/* The reverse mapping: strip the prefix, split at the last ".".  0, or -EINVAL when nqn is not
 * one of ours or out (cap bytes) is too small. */
int rules_volume_of_nqn(const char *nqn, char *out, size_t cap);
/* A host NQN: starts with "nqn.", 5..223 bytes, printable ASCII without space or "/".
 * 0 or -EINVAL `invalid initiator id "<nqn>": ...`. */
int rules_hostnqn_check(const char *hostnqn, struct err *e);

/* A subsystem NQN as the node writes it into the kernel's fabrics option line
 * (`…,nqn=<nqn>,…`, csi.md §7.2): starts with "nqn.", 5..223 bytes, printable ASCII without
 * space, "/", "," or "=" (the option line's separators).  0 or -EINVAL with the reason in e
 * (`a subsystem NQN starts with "nqn." and is at most 223 bytes`, `… has the character ','`). */
int rules_nqn_check(const char *nqn, struct err *e);

struct rules_ns_identity {
	char uuid[37];  /* canonical lowercase 8-4-4-4-12 */
	char nguid[37]; /* UUID text form */
	char serial[21];
};

void rules_ns_identity_derive(const char *nqn, struct rules_ns_identity *out);
/* uuid and nguid compared case-insensitively, serial exactly. */
bool rules_ns_identity_equal(const struct rules_ns_identity *a, const struct rules_ns_identity *b);

#endif
