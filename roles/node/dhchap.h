/* node/dhchap — the worker's own DH-HMAC-CHAP keys (docs/authentication.md, "Keys").
 *
 * The node plugin makes its keys itself: a host secret and a controller secret (for
 * bidirectional authentication) of one generation, each a 64-byte key from getrandom transformed
 * with this host's NQN (DHHC-1:03, nvme/dhchap.h).  They live in the key file of
 * model/dhchap_file.h.  Keys are never logged; buffers that held them are wiped
 * (nvme_dhchap_wipe).
 */
#ifndef PILLAR_ROLES_NODE_DHCHAP_H
#define PILLAR_ROLES_NODE_DHCHAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "model/dhchap_file.h"
#include "nvme/dhchap.h"

/* New keys of generation for hostnqn into g.  0 or nvme_dhchap's errors. */
int node_dhchap_gen_make(const char *hostnqn, uint64_t generation,
                         struct model_dhchap_generation *g, struct err *e);

/* The keys of a rotation's half into g: generation, a new controller secret (ctrl) or a new host
 * secret (!ctrl) for hostnqn, and the other secret of from.  0 or nvme_dhchap's errors. */
int node_dhchap_gen_rotate(const char *hostnqn, uint64_t generation,
                           const struct model_dhchap_generation *from, bool ctrl,
                           struct model_dhchap_generation *g, struct err *e);

/* The generation new keys take at Unix time now: now, or one more than any k holds when that is
 * larger (generations of a node only grow). */
uint64_t node_dhchap_next_generation(const struct model_dhchap_file *k, uint64_t now);

/* The keys of node for hostnqn: read, or made (as `next`) and written when there are none or
 * when they were made for another host NQN (logged).  *created (may be NULL) tells whether new
 * keys were written.  Callers serialise calls (struct node's dhchap_mu). */
int node_dhchap_keys_ensure(const char *state_dir, const char *node, const char *hostnqn,
                            uint64_t now, struct model_dhchap_file *k, bool *created,
                            struct err *e);

/* The generation a new connect uses first: `current`, or `next` before any confirmation. */
const struct model_dhchap_generation *node_dhchap_connect_gen(const struct model_dhchap_file *k);

/* The annotation key of the CSINode (kind "csinode") or the Node ("node") name copied into buf
 * ("" when the object or the annotation is absent).  0 or the store's error. */
struct store;
int node_dhchap_annotation(struct store *s, const char *kind, const char *name, const char *key,
                           char *buf, size_t cap, struct err *e);

#endif
