/* config — the agent's JSON backends file (agent-api.md §11.2, §14).
 *
 * Strict: unknown keys, wrong types, missing names, duplicates are refused with the exact
 * messages of the spec; the agent prints the message and exits 1.  Functions return 0 or
 * -EINVAL (invalid content), -ENOENT/-EACCES/... (unreadable), -ENOMEM, with the message in e.
 */
#ifndef PILLAR_ROLES_AGENT_CONFIG_H
#define PILLAR_ROLES_AGENT_CONFIG_H

#include <stddef.h>

#include "backend/backend.h"
#include "base/err.h"

struct agent_config {
	struct backend_config *backends;
	size_t n;
};

int agent_config_parse(const char *buf, size_t len, struct agent_config *out, struct err *e);
int agent_config_load(const char *path, struct agent_config *out, struct err *e);
void agent_config_clear(struct agent_config *c);
/* The start-time probe of every file backend's directory (O_DIRECT, then the synchronous-update
 * attribute the images get): `backends[<i>].file.directory <path> does not support direct I/O
 * (tmpfs?)`, `backends[<i>].file.directory <path> does not support synchronous writes (chattr
 * +S: <reason>)`. */
int agent_config_check_dirs(const struct agent_config *c, struct err *e);

#endif
