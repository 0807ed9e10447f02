/* dhchap — the controller's side of the workers' DH-HMAC-CHAP keys (docs/authentication.md
 * "Keys"): it reads the Secrets the node plugins create, picks each worker's newest accepted
 * generation, and puts the keys into the agent API's HostAuth of a grant — only to an agent it
 * reaches over mTLS, unless the operator allowed plaintext.
 *
 * Keys never reach a log, an Event, a status or a record: messages name the Secret and the
 * node, never a key; buffers are wiped (dhchap_grant_clear). */
#ifndef PILLAR_ROLES_CONTROLLER_DHCHAP_H
#define PILLAR_ROLES_CONTROLLER_DHCHAP_H

#include <stdbool.h>

#include "controller/ctl.h"
#include "model/dhchap_keys.h"
#include "model/pillar.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"

/* The HostAuth of one grant, pointing into its own key buffer. */
struct dhchap_grant {
	bool on; /* the volume asks for authentication: auth is filled */
	PillarCsi__Agent__V1__HostAuth auth;
	struct model_dhchap_keys keys;
};
void dhchap_grant_clear(struct dhchap_grant *g);

/* A volume asks for keys the controller does not read (no --dhchap). */
#define DHCHAP_DISABLED_MSG                                                                \
	"the volume asks for NVMe in-band authentication but the controller runs without " \
	"--dhchap "                                                                        \
	"(the chart's dhchap.enabled), so it reads no worker's keys (docs/authentication.md)"

/* The refusal of a key to an agent without mTLS (docs/authentication.md). */
#define DHCHAP_PLAINTEXT_FMT                                                                  \
	"refusing to send DH-HMAC-CHAP keys to agent \"%s\" without mTLS: configure "         \
	"--agent-tls-cert, --agent-tls-key and --agent-tls-ca (chart mtls.enabled) or, on a " \
	"trusted network only, --dhchap-allow-plaintext"

/* The grant of host host_nqn on node to volume v (resolved protocol) on agent: g->on false
 * and 0 when v has no dhchap; else 0 with g->auth filled (hash and group of v, the node's
 * newest keys, the controller key when bidirectional), or FAILED_PRECONDITION: plaintext
 * (DHCHAP_PLAINTEXT_FMT), no accepted Secret of the node for that host NQN, or UNAVAILABLE
 * when the Secrets cannot be listed. */
int dhchap_grant_for(struct ctl *c, const char *agent, const struct model_resolved *res,
                     const char *node, const char *host_nqn, struct dhchap_grant *g,
                     struct grpc_status *gs);

/* The workers' accepted keys, the newest generation of each node and host NQN, listed once
 * for a pass over many volumes (dhchap_set_load lists when not yet loaded). */
struct dhchap_old {
	char node[MODEL_DHCHAP_NODE_MAX + 1];
	uint64_t generation;
};
struct dhchap_set {
	struct model_dhchap_keys *keys;
	size_t n, cap;
	struct dhchap_old *old; /* the accepted generations below each node's newest */
	size_t n_old, cap_old;
	bool loaded;
};
int dhchap_set_load(struct ctl *c, struct dhchap_set *set, struct grpc_status *gs);
void dhchap_set_free(struct dhchap_set *set); /* wipes */

/* The newest accepted keys of node for host_nqn: 0, NOT_FOUND (none), UNAVAILABLE. */
int dhchap_keys_of(struct ctl *c, const char *node, const char *host_nqn,
                   struct model_dhchap_keys *out, struct grpc_status *gs);

/* Adds to x (an unpacked export of volume on agent, with the volume's hash, group and
 * direction) the HostAuth of every allowed initiator, nodes naming each initiator's node in
 * order (NUL-separated).  An initiator without accepted keys — every initiator when the agent is
 * reached without mTLS and plaintext is not allowed, or the Secrets cannot be listed — is
 * removed from allowed_initiators (fail
 * closed: never admitted without its key) with a warning naming the volume, host and node.  0
 * or -ENOMEM (what was added is then still freed by dhchap_detach). */
struct dhchap_sent { /* one host's keys put into item `item` of a request */
	char node[MODEL_DHCHAP_NODE_MAX + 1];
	uint64_t generation; /* 0: left out (no keys, or no mTLS) */
	size_t item;
};
struct dhchap_pass {
	struct dhchap_set set;
	struct dhchap_sent *v;
	size_t n, cap;
};
void dhchap_pass_free(struct dhchap_pass *p);
int dhchap_attach(struct ctl *c, struct dhchap_pass *p, size_t item, const char *agent,
                  const char *volume, const char *hash, const char *group, bool bidir,
                  const char *nodes, PillarCsi__Agent__V1__ExportDesiredState *x);
/* Wipes the keys dhchap_attach added to x and frees them. */
void dhchap_detach(PillarCsi__Agent__V1__ExportDesiredState *x);

/* ---- confirmation (docs/authentication.md "Keys": the CSINode annotation) -------------------- */

/* After a request to agent: which node's keys of which generation the agent now holds (ok: the
 * item of p's entry succeeded).  whole: the request carried every volume of the agent, so the
 * agent's earlier record is replaced (a node it no longer admits drops out). */
void dhchap_record(struct ctl *c, const char *agent, bool whole, const struct dhchap_pass *p,
                   const bool *item_ok, size_t n_items);
/* For every node with accepted keys: when every agent that admits it holds its newest
 * generation (or none admits it), writes the CSINode annotation
 * MODEL_DHCHAP_ANN_INSTALLED = that generation and deletes the node's older Secrets.  0 or
 * the store's error (the next pass tries again). */
int dhchap_confirm(struct ctl *c, struct err *e);
/* With --dhchap, once this process made a whole pass of the agent: its records into the
 * PillarAgent's status.dhchap (what each node's keys are there, by generation; sorted by node),
 * written with the agent's status.  A restarted controller's dhchap_confirm reads them for an
 * agent it has not passed yet; an agent with neither holds every confirmation back.  0 or
 * -ENOMEM. */
int dhchap_status_fill(struct ctl *c, struct model_pa *pa);
/* Frees the records (ctl_fini). */
void dhchap_records_free(struct ctl *c);

#endif
