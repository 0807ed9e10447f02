/* Names derived from an export: the port ID (nvmet.md §2.2).  NQNs and namespace identity are
 * shared rules (rules/nqn.h). */
#include <stdint.h>

#include "base/hash.h"
#include "nvmet/nvmet.h"

uint32_t nvmet_port_hash(const char *bind_address, uint32_t port)
{
	return (hash_fnv1a32(bind_address) ^ port) * HASH_FNV1A32_PRIME;
}

unsigned nvmet_port_preferred_id(const char *bind_address, uint32_t port)
{
	return nvmet_port_hash(bind_address, port) % 65535u + 1u;
}
