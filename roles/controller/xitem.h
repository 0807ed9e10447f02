/* xitem — one PillarVolumeState as a ReconcileState item (agent-api.md §12.2 step 3), kept
 * compact between reading the volume and sending the request.
 *
 * A restore or resync of an agent with N volumes reads them all before it sends one request.
 * Holding the decoded objects (several KiB each with their unknown-field trees) made the
 * controller's resident memory peak at about twice its size at rest on every pass; an xitem
 * instead keeps what the request and the ExportReconciled check need — the volume's name, UID,
 * generation and resourceVersion, its ExportReconciled condition as read, and the item itself
 * packed (protobuf) — in one allocation of a few hundred bytes.
 *
 * xitem_of returns 0, or -ENOMEM (x is then cleared).  xitem_item returns a new unpacked item
 * (free with pillar_csi__agent__v1__volume_desired_state__free_unpacked(item, NULL)) or NULL when
 * out of memory.  xitem_clear(NULL) is a no-op. */
#ifndef PILLAR_ROLES_CONTROLLER_XITEM_H
#define PILLAR_ROLES_CONTROLLER_XITEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/ctl.h"
#include "model/pillar.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"

enum xitem_what {
	XITEM_SKIP,    /* deleting, in phase Provisioning, or another agent's: not looked at */
	XITEM_NOSPEC,  /* no status.exportSpec: ExportSpecMissing, not sent */
	XITEM_EXPORTED /* sent */
};

struct xitem {
	enum xitem_what what;
	bool ics;         /* the export needs an in-capsule data size (sent first, §12.2 step 4) */
	const char *name; /* into mem, as every string here */
	const char *uid;  /* "" when none */
	const char *vid;  /* spec.agentVolumeID ("" when none): the item's volume_id */
	const char *cst;  /* ExportReconciled status, reason and message as read; NULL when the */
	const char *creas; /* condition is absent */
	const char *cmsg;
	bool c_has_og;
	int64_t c_og, gen; /* its observedGeneration; metadata.generation */
	uint64_t rv;       /* metadata.resourceVersion */
	size_t len;        /* the packed VolumeDesiredState (XITEM_EXPORTED) */
	const uint8_t *packed;
	char *mem;
};

/* A volume a resync looks at: not deleting, past phase Provisioning (§12.3). */
bool xitem_eligible(const struct model_pvst *v);
/* The item of volume v for agent (NULL: any agent), read under the volume's lock. */
int xitem_of(struct xitem *x, const struct model_pvst *v, const char *agent);
void xitem_clear(struct xitem *x);
PillarCsi__Agent__V1__VolumeDesiredState *xitem_item(const struct xitem *x);
/* True when ExportReconciled as read already says reason/msg (status True exactly for
 * Reconciled) at the volume's generation: recording the outcome would change nothing. */
bool xitem_cond_same(const struct xitem *x, const char *reason, const char *msg);

/* The items of an agent's last whole-agent pass, kept for its next pass, which decodes again
 * only the volumes whose resourceVersion moved (an unchanged version makes the same item).
 * xmemo_take detaches the agent's items (*v NULL, *n 0 when none; the caller owns them);
 * xmemo_put keeps v (n items sorted by name; ownership passes, freed on out of memory).  Both
 * are called under the agent's lock (reconcile_export.c); xmemo_free frees a ctl's list. */
void xmemo_take(struct ctl *c, const char *agent, struct xitem **v, size_t *n);
void xmemo_put(struct ctl *c, const char *agent, struct xitem *v, size_t n);
void xmemo_free(struct xmemo *m);

#endif
