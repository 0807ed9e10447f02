/* node/dhchap — the worker's own DH-HMAC-CHAP keys (docs/authentication.md, "Keys").
 *
 * The node plugin makes its keys itself: a host secret and a controller secret (for
 * bidirectional authentication) of one generation, each a 64-byte key from getrandom transformed
 * with this host's NQN (DHHC-1:03, nvme/dhchap.h).  They live in <state-dir>/dhchap.key, mode
 * 0600, owned by the node plugin's user, written durably (temp, fsync, rename, fsync of the
 * directory); JSON, one object:
 *
 *   {"node": "<node>", "hostNQN": "<host NQN the keys were made for>",
 *    "current": {"generation": N, "key": "DHHC-1:03:…:", "ctrlKey": "DHHC-1:03:…:"},
 *    "next":    {"generation": M, "key": "DHHC-1:03:…:", "ctrlKey": "DHHC-1:03:…:"},
 *    "rotateRequest": "<last value of the rotation annotation acted on>"}
 *
 * `current` is the generation the controller confirmed, `next` one made but not yet confirmed
 * (at least one of them is present; M > N).  A file of another mode or owner, or anything else
 * (an unknown member, a missing one, a malformed secret, a generation that is not a positive
 * integer) is refused with a message that names the file and the defect, never its content.
 * Keys are never logged; buffers that held them are wiped (nvme_dhchap_wipe).
 */
#ifndef PILLAR_ROLES_NODE_DHCHAP_H
#define PILLAR_ROLES_NODE_DHCHAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/err.h"
#include "nvme/dhchap.h"

#define NODE_DHCHAP_FILE    "dhchap.key"
#define NODE_DHCHAP_NQN_MAX 224 /* 223 bytes and the NUL (NVMe Base Specification) */
#define NODE_DHCHAP_REQ_MAX 256 /* an annotation value kept for comparison */

struct node_dhchap_gen {
	uint64_t generation; /* the Unix time the keys were made, or the previous + 1 */
	char key[NVME_DHCHAP_SECRET_MAX];
	char ctrl_key[NVME_DHCHAP_SECRET_MAX];
};

struct node_dhchap_keys {
	char node[254];
	char hostnqn[NODE_DHCHAP_NQN_MAX];
	bool has_current, has_next;
	struct node_dhchap_gen current, next;
	char rotate_request[NODE_DHCHAP_REQ_MAX]; /* "" when none was acted on */
};

/* Reads <state_dir>/dhchap.key: 0, -ENOENT (no keys yet), -EBADMSG (corrupt, or of another mode
 * or owner: the message names the file and the defect and says to delete it to make new keys),
 * or another negative errno. */
int node_dhchap_keys_read(const char *state_dir, struct node_dhchap_keys *k, struct err *e);

/* Writes k durably (mode 0600).  0 or a negative errno (-ENOSPC … with the file named). */
int node_dhchap_keys_write(const char *state_dir, const struct node_dhchap_keys *k, struct err *e);

/* New keys of generation for hostnqn into g.  0 or nvme_dhchap's errors. */
int node_dhchap_gen_make(const char *hostnqn, uint64_t generation, struct node_dhchap_gen *g,
                         struct err *e);

/* The generation new keys take at Unix time now: now, or one more than any k holds when that is
 * larger (generations of a node only grow). */
uint64_t node_dhchap_next_generation(const struct node_dhchap_keys *k, uint64_t now);

/* The keys of node for hostnqn: read, or made (as `next`) and written when there are none or
 * when they were made for another host NQN (logged).  *created (may be NULL) tells whether new
 * keys were written.  Callers serialise calls (struct node's dhchap_mu). */
int node_dhchap_keys_ensure(const char *state_dir, const char *node, const char *hostnqn,
                            uint64_t now, struct node_dhchap_keys *k, bool *created, struct err *e);

/* The generation a new connect uses first: `current`, or `next` before any confirmation. */
const struct node_dhchap_gen *node_dhchap_connect_gen(const struct node_dhchap_keys *k);

/* Clears every string of the JSON value v (and its children, and its siblings after it). */
void node_dhchap_json_wipe(cJSON *v);

/* The annotation key of the store object of kind (store_kind_lookup's name) and name copied
 * into buf ("" when the object or the annotation is absent).  0 or the store's error. */
struct store;
int node_dhchap_annotation(struct store *s, const char *kind, const char *name, const char *key,
                           char *buf, size_t cap, struct err *e);

/* The Secret (docs/authentication.md "The Secret") named name in namespace ns that carries k's
 * `next` keys of generation gen for node (caller frees after node_dhchap_json_wipe), or NULL
 * when out of memory. */
cJSON *node_dhchap_secret_object(const char *name, const char *ns, const char *node,
                                 const struct node_dhchap_keys *k, const char *gen);

/* Clears every byte of k. */
void node_dhchap_keys_wipe(struct node_dhchap_keys *k);

#endif
