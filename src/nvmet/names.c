/* Names derived from an export: the port ID (nvmet.md §2.2).  NQNs and namespace identity are
 * shared rules (rules/nqn.h). */
#include <stdint.h>

#include "nvmet/nvmet.h"

uint32_t nvmet_port_hash(const char *bind_address, uint32_t port)
{
	uint32_t h = 0x811C9DC5u;
	for (const unsigned char *p = (const unsigned char *)bind_address; *p; p++)
		h = (h ^ *p) * 0x01000193u;
	return (h ^ port) * 0x01000193u;
}

unsigned nvmet_port_preferred_id(const char *bind_address, uint32_t port)
{
	return nvmet_port_hash(bind_address, port) % 65535u + 1u;
}
