/* model/dhchap_keys — a worker's DH-HMAC-CHAP keys as they travel and rest
 * (docs/authentication.md "Keys"): the Secret `pillar-csi-dhchap-<node>-<generation>` the node
 * plugin creates and the controller reads (the node's own key file is model/dhchap_file.h).
 *
 * Keys are secrets: no message here quotes one; callers clear structures that held keys with
 * model_dhchap_keys_wipe.  Functions return 0 or a negative errno with
 * a message in e.
 */
#ifndef PILLAR_MODEL_DHCHAP_KEYS_H
#define PILLAR_MODEL_DHCHAP_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "model/kube.h"
#include "nvme/dhchap.h"
#include "rules/keys.h"
#include "rules/nqn.h"

#define MODEL_DHCHAP_SECRET_PREFIX "pillar-csi-dhchap-"
#define MODEL_DHCHAP_SECRET_TYPE   RULES_KEY_PREFIX "dhchap"
#define MODEL_DHCHAP_LABEL         RULES_KEY_PREFIX "dhchap"
#define MODEL_DHCHAP_LABEL_VALUE   "host-keys"
#define MODEL_DHCHAP_SELECTOR      MODEL_DHCHAP_LABEL "=" MODEL_DHCHAP_LABEL_VALUE
#define MODEL_DHCHAP_ANN_NODE      RULES_KEY_PREFIX "dhchap-node"
#define MODEL_DHCHAP_ANN_GEN       RULES_KEY_PREFIX "dhchap-generation"
/* CSINode annotation: the generation the controller installed on every agent (confirmation). */
#define MODEL_DHCHAP_ANN_INSTALLED RULES_KEY_PREFIX "dhchap-generation"
/* A Secret name is a DNS subdomain (253): prefix, node, "-", up to 20 digits. */
#define MODEL_DHCHAP_NODE_MAX 214

/* One generation of a worker's keys. */
struct model_dhchap_keys {
	char node[MODEL_DHCHAP_NODE_MAX + 1];
	char host_nqn[RULES_NQN_MAX + 1];
	uint64_t generation;                   /* > 0 */
	char key[NVME_DHCHAP_SECRET_MAX];      /* DHHC-1 host secret */
	char ctrl_key[NVME_DHCHAP_SECRET_MAX]; /* DHHC-1 controller secret */
};
void model_dhchap_keys_wipe(struct model_dhchap_keys *k);

/* "pillar-csi-dhchap-<node>-<generation>" into out (cap ≥ 254); -EINVAL for an empty node, a
 * node over MODEL_DHCHAP_NODE_MAX or generation 0. */
int model_dhchap_secret_name(const char *node, uint64_t generation, char *out, size_t cap,
                             struct err *e);

/* The keys of a Secret, checked as the controller accepts them: type, label, name equal to
 * model_dhchap_secret_name of the node and generation annotations, hostNQN a host NQN, key and
 * ctrlKey well-formed DHHC-1 secrets (base64 data, no NUL, at most 103 bytes).  -EINVAL with a
 * message naming the Secret and the defect. */
int model_dhchap_secret_decode(const struct model_secret *s, struct model_dhchap_keys *out,
                               struct err *e);

/* The Secret of k in namespace ns, as the node plugin creates it (out is cleared first; free
 * with model_clear(&model_secret_kind, out)).  -EINVAL when k would not decode. */
int model_dhchap_secret_encode(const struct model_dhchap_keys *k, const char *ns,
                               struct model_secret *out, struct err *e);

#endif
