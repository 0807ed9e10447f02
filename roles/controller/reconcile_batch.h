/* reconcile_batch — the ReconcileState batch of one agent built from its PillarVolumeStates
 * (agent-api.md §12.2 steps 2-4, §12.3): which volumes are in it, each volume's item, the order
 * of the request, and the items kept from the agent's last whole-agent pass.  The full restore
 * and both resyncs build their batch here; reconcile_export.c locks, sends and records.
 *
 * Each volume of a batch is a batch_item: what the request and the ExportReconciled check need
 * — the volume's name, UID, agentVolumeID, generation and resourceVersion, its ExportReconciled
 * condition as read, and its VolumeDesiredState packed (protobuf) — in one allocation.  A batch
 * over N volumes therefore holds N small items and at most one decoded object at a time (a
 * decoded object carries its unknown-field trees).
 *
 * batch_item_of returns 0, or -ENOMEM (the item is then cleared).  batch_item_unpack returns a
 * new unpacked item (free with pillar_csi__agent__v1__volume_desired_state__free_unpacked(item,
 * NULL)) or NULL when out of memory.  batch_item_clear(NULL) is a no-op. */
#ifndef PILLAR_ROLES_CONTROLLER_RECONCILE_BATCH_H
#define PILLAR_ROLES_CONTROLLER_RECONCILE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/ctl.h"
#include "controller/vdigest.h"
#include "grpc/status.h"
#include "model/pillar.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"

enum batch_item_state {
	BATCH_ITEM_SKIPPED, /* deleting, in phase Provisioning, or another agent's: not looked at */
	BATCH_ITEM_NO_SPEC, /* no status.exportSpec: ExportSpecMissing, not sent */
	BATCH_ITEM_EXPORTED /* sent */
};

struct batch_item {
	enum batch_item_state state;
	bool in_capsule;  /* the export needs an in-capsule data size (sent first, §12.2 step 4) */
	const char *name; /* into storage, as every string here */
	const char *uid;  /* "" when none */
	const char *volume_id; /* spec.agentVolumeID ("" when none): the item's volume_id */
	/* ExportReconciled status, reason and message as read; NULL when the condition is absent */
	const char *cond_status, *cond_reason, *cond_message;
	bool cond_has_observed_generation;
	int64_t cond_observed_generation;
	/* the digest of the exportSpec and publishedNodes this item carries (vdigest.h, text), and
	 * whether status.reconciledDigest as read names it, or another (BATCH_ITEM_EXPORTED) */
	char digest[VDIGEST_TEXT];
	bool digest_recorded, digest_stale;
	int64_t generation;        /* metadata.generation */
	uint64_t resource_version; /* metadata.resourceVersion */
	/* DH-HMAC-CHAP (docs/authentication.md "Keys"): the volume's hash and group (NULL: no
	 * authentication), and the nodes of the allowed initiators in their order, each
	 * NUL-terminated one after the other.  Keys are added only when sent (dhchap.h). */
	const char *dhchap_hash, *dhchap_group;
	bool dhchap_bidirectional;
	const char *initiator_nodes;
	size_t packed_len; /* the packed VolumeDesiredState (BATCH_ITEM_EXPORTED) */
	const uint8_t *packed;
	char *storage;
};

/* A volume a resync looks at: not deleting, past phase Provisioning (§12.3). */
bool batch_item_eligible(const struct model_pvst *v);
/* The item of volume v for agent (NULL: any agent), read under the volume's lock. */
int batch_item_of(struct batch_item *x, const struct model_pvst *v, const char *agent);
void batch_item_clear(struct batch_item *x);
PillarCsi__Agent__V1__VolumeDesiredState *batch_item_unpack(const struct batch_item *x);
/* True when ExportReconciled as read already says reason/msg (status True exactly for
 * Reconciled) at the volume's generation: recording the outcome would change nothing. */
bool batch_item_cond_same(const struct batch_item *x, const char *reason, const char *msg);

/* The volumes of one pass.  A whole-agent pass decodes again only the volumes whose
 * resourceVersion moved since the agent's last whole-agent pass (an unchanged version makes the
 * same item); a one-volume pass reads that volume. */
struct reconcile_batch {
	struct batch_item *items; /* sorted by name once read */
	size_t n, cap;
	const char *agent; /* checked against spec.agentRef (the one-volume pass), or NULL */
	const char *const *locked; /* NULL, or only these names (sorted, n_locked) are taken */
	size_t n_locked;
	struct batch_item *last; /* the last pass's items, sorted by name; reused ones move out */
	size_t n_last;
	int err; /* out of memory while reusing */
};

/* Reads the batch of agent (only == NULL: every volume labelled with it, starting from the items
 * its last whole-agent pass kept) or of PillarVolumeState `only`.  GRPC_OK, or an error in gs. */
int reconcile_batch_read(struct ctl *c, const char *agent, const char *only,
                         struct reconcile_batch *b, struct grpc_status *gs);
/* Reads b again, taking only the names given (sorted: the volumes whose locks the pass holds)
 * and reusing what b held.  GRPC_OK, or an error in gs. */
int reconcile_batch_reread(struct ctl *c, const char *agent, const char *only,
                           struct reconcile_batch *b, const char *const *names, size_t n_names,
                           struct grpc_status *gs);
/* The exported items in request order (in-capsule first, then by name, §12.2 step 4): *order
 * points into b, *vols holds them unpacked for the request (free with
 * reconcile_batch_request_free); *n of them.  0 or -ENOMEM. */
int reconcile_batch_request(const struct reconcile_batch *b, struct batch_item ***order,
                            PillarCsi__Agent__V1__VolumeDesiredState ***vols, size_t *n);
void reconcile_batch_request_free(PillarCsi__Agent__V1__VolumeDesiredState **vols, size_t n);
/* Keeps b's items for agent's next whole-agent pass (b is emptied).  Called under the agent's
 * lock (reconcile_export.c), as reconcile_batch_read of a whole-agent pass is. */
void reconcile_batch_keep(struct ctl *c, const char *agent, struct reconcile_batch *b);
void reconcile_batch_clear(struct reconcile_batch *b);
/* The PillarVolumeStates the last whole-agent pass (of any agent) could not read and left out —
 * `PillarVolumeState "<name>": <error naming its file>`, joined by "; " — into buf ("" when it
 * read every record).  A record that cannot be read has no readable agent label either: every
 * agent's pass reports it, and its export, if any, is never touched (agent-api.md §7.2: the
 * agent keeps exports a complete list leaves out). */
void reconcile_batch_unreadable(struct ctl *c, char *buf, size_t cap);
/* Frees the kept items of a ctl (ctl_fini). */
void reconcile_batch_memos_free(struct batch_memo *m);

#endif
