/* vdigest — per PillarVolumeState, a digest of the part a per-volume resync depends on
 * (agent-api.md §12.3: status.exportSpec and status.publishedNodes), so that the loop queues a
 * resync only when that part changed.  A hash table by volume name: an event costs the same
 * with 10 volumes or 10,000 (the list it replaces made every event scan all of them).
 *
 * A digest is a 64-bit FNV-1a hash of the part's fields; two different parts that hash alike
 * would skip one change-triggered resync, which the 30 s periodic pass then sends.
 *
 * The digest the agent confirmed (a resync's item reported Reconciled) is recorded in the
 * volume, status.reconciledDigest, with its ExportReconciled outcome: a controller's first list
 * compares it with the volume's own and resyncs the volumes that changed while no controller
 * watched them (published, unpublished or fenced by a leader that died before its resync, or
 * edited), and only those.  It is object content: the same on either store.
 *
 * vdigest_of, vdigest_text and vdigest_unconfirmed are pure (any thread).  The table is used by
 * one thread (the loop's PillarVolumeState watcher); no locking.  vdigests_update
 * returns true when the volume's digest changed or is new, and also when out of memory (a
 * resync too many, never one too few).  vdigests_free(NULL) is a no-op. */
#ifndef PILLAR_ROLES_CONTROLLER_VDIGEST_H
#define PILLAR_ROLES_CONTROLLER_VDIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/pillar.h"

#define VDIGEST_TEXT 17 /* 16 hex digits and the NUL */

struct vdigests {
	struct vdigest **b; /* buckets */
	size_t nb, n;
};

/* The digest of v's exportSpec and publishedNodes, and its text as status.reconciledDigest
 * records it (16 lowercase hex digits). */
uint64_t vdigest_of(const struct model_pvst *v);
void vdigest_text(uint64_t digest, char text[VDIGEST_TEXT]);
/* True when v's status.reconciledDigest names another digest than v's own: the agent last
 * confirmed another exportSpec or publishedNodes than v holds (changed since, perhaps while
 * no controller ran).  False when they agree, and when v records none (a volume no resync has
 * confirmed yet: its CreateVolume built the export, and its first resync records it). */
bool vdigest_unconfirmed(const struct model_pvst *v);

bool vdigests_update(struct vdigests *t, const char *name, const struct model_pvst *v);
void vdigests_drop(struct vdigests *t, const char *name);
/* A relist: vdigests_unsee before it; vdigests_update marks each volume listed as seen, and
 * vdigests_drop_unseen after it forgets the volumes that were not (they were deleted). */
void vdigests_unsee(struct vdigests *t);
void vdigests_drop_unseen(struct vdigests *t);
void vdigests_free(struct vdigests *t); /* empties t */

#endif
