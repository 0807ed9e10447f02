/* grpc/oplock — per-key operation locks: a second concurrent operation on the same key (e.g. a
 * volume ID) is refused with ABORTED instead of waiting, as CSI expects.  Thread-safe.
 * grpc_oplock_new returns NULL when out of memory. */
#ifndef PILLAR_GRPC_OPLOCK_H
#define PILLAR_GRPC_OPLOCK_H

struct grpc_oplock;
struct grpc_call;

struct grpc_oplock *grpc_oplock_new(void);
void grpc_oplock_free(struct grpc_oplock *t);
/* GRPC_OK when the key was free and is now held by the caller; GRPC_ABORTED when busy, with
 * "an operation on volume <key> is already in progress" set on call (if not NULL);
 * GRPC_RESOURCE_EXHAUSTED when out of memory. */
int grpc_oplock_try(struct grpc_oplock *t, const char *key, struct grpc_call *call);
void grpc_oplock_release(struct grpc_oplock *t, const char *key);

#endif
