/* hash — FNV-1a string hashes. */
#include "base/hash.h"

uint32_t hash_fnv1a32(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * HASH_FNV1A32_PRIME;
	return h;
}

uint64_t hash_fnv1a64(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}
