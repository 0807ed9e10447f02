/* vdigest — per PillarVolumeState, a digest of the part a per-volume resync depends on
 * (agent-api.md §12.3: status.exportSpec and status.publishedNodes), so that the loop queues a
 * resync only when that part changed.  A hash table by volume name: an event costs the same
 * with 10 volumes or 10,000 (the list it replaces made every event scan all of them).
 *
 * A digest is a 64-bit FNV-1a hash of the part's fields; two different parts that hash alike
 * would skip one change-triggered resync, which the 30 s periodic pass then sends.
 *
 * Used by one thread (the loop's PillarVolumeState watcher); no locking.  vdigests_update
 * returns true when the volume's digest changed or is new, and also when out of memory (a
 * resync too many, never one too few).  vdigests_free(NULL) is a no-op. */
#ifndef PILLAR_ROLES_CONTROLLER_VDIGEST_H
#define PILLAR_ROLES_CONTROLLER_VDIGEST_H

#include <stdbool.h>
#include <stddef.h>

#include "model/pillar.h"

struct vdigests {
	struct vdigest **b; /* buckets */
	size_t nb, n;
};

bool vdigests_update(struct vdigests *t, const char *name, const struct model_pvst *v);
void vdigests_drop(struct vdigests *t, const char *name);
/* A relist: vdigests_unsee before it; vdigests_update marks each volume listed as seen, and
 * vdigests_drop_unseen after it forgets the volumes that were not (they were deleted). */
void vdigests_unsee(struct vdigests *t);
void vdigests_drop_unseen(struct vdigests *t);
void vdigests_free(struct vdigests *t); /* empties t */

#endif
