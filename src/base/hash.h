/* hash — FNV-1a string hashes (Fowler/Noll/Vo), the one hash of every in-memory table (keylock,
 * workqueue, the dir store's index, nvmet host references, the event correlator) and of the
 * nvmet port ID (nvmet.md §2.2, whose values are a contract: they must not change).
 *
 * hash_fnv1a32 / hash_fnv1a64 hash the bytes of s up to its NUL.  HASH_FNV1A32_PRIME lets a
 * caller fold one more value into a 32-bit hash.  None of these fails.
 */
#ifndef PILLAR_BASE_HASH_H
#define PILLAR_BASE_HASH_H

#include <stdint.h>

#define HASH_FNV1A32_PRIME 16777619u

uint32_t hash_fnv1a32(const char *s);
uint64_t hash_fnv1a64(const char *s);

#endif
