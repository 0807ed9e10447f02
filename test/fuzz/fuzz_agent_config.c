/* libFuzzer target: the agent's configuration file (agent_config_parse, agent-api.md §11.2):
 * whatever the file holds, the agent either starts with a valid configuration or refuses it
 * with a message; it never crashes or leaks. */
#include <stdlib.h>

#include "agent/config.h"
#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_config c = {0};
	struct err e = {0};
	if (agent_config_parse((const char *)data, size, &c, &e) == 0) {
		if (!c.n) /* a configuration without a backend is refused by the spec */
			abort();
		agent_config_clear(&c);
	}
	return 0;
}
