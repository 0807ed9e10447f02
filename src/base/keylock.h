/* keylock — one lock per key (a volume ID or name), the per-volume operation lock of every role
 * (DESIGN §2, csi.md §4 and §7.1).
 *
 * Two modes over one table: keylock_wait blocks until the key is free (the controller, csi.md §4:
 * "a second call for the same volume waits for the first"; the agent, which serialises the
 * controller's retries), keylock_try refuses a busy key at once (the node, csi.md §7.1: ABORTED
 * "an operation on volume X is already in progress").
 *
 * The table never allocates: the caller lends a struct keylock_hold (usually on its stack) that
 * stays linked while the key is held, and the key string must stay valid as long.  So taking a
 * lock cannot fail for want of memory.  Thread-safe; keys are compared with strcmp.  Holds live
 * in KEYLOCK_BUCKETS hash chains (doubly linked), so taking and releasing cost the same with ten
 * or ten thousand keys held (a restore batch holds every volume's lock at once).
 */
#ifndef PILLAR_BASE_KEYLOCK_H
#define PILLAR_BASE_KEYLOCK_H

#include <pthread.h>
#include <stdbool.h>

#define KEYLOCK_BUCKETS 256

struct keylock_hold {
	struct keylock_hold *next, **pprev;
	const char *key;
};

struct keylock {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct keylock_hold *held[KEYLOCK_BUCKETS];
	unsigned long releases; /* keylock_release calls so far */
};

void keylock_init(struct keylock *k);
/* Every hold must have been released. */
void keylock_fini(struct keylock *k);

/* Waits until key is free, then holds it through h. */
void keylock_wait(struct keylock *k, struct keylock_hold *h, const char *key);
/* Holds key through h and returns 0, or -EBUSY at once when another hold has it. */
int keylock_try(struct keylock *k, struct keylock_hold *h, const char *key);
/* Releases h (taken by keylock_wait or a successful keylock_try) and wakes the waiters. */
void keylock_release(struct keylock *k, struct keylock_hold *h);
/* How many holds have been released so far: equal before and after a span means that no hold
 * ended within it (so every operation a held key stood for had ended before it, or is still
 * running). */
unsigned long keylock_releases(struct keylock *k);

#endif
