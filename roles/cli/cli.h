/* cli — `pillar-csi apply|get|delete`: operators manage objects in the store
 * (spec/standalone.md "CLI verbs").  Output follows kubectl's shapes so runbooks read the same. */
#ifndef PILLAR_ROLES_CLI_H
#define PILLAR_ROLES_CLI_H

#include <stddef.h>

int cli_apply_main(int argc, char **argv);
int cli_get_main(int argc, char **argv);
int cli_delete_main(int argc, char **argv);

/* kubectl-style age of an RFC 3339 timestamp relative to now (e.g. 45s, 5m10s, 3h, 12d). */
void cli_age(const char *timestamp, long long now, char *buf, size_t cap);

#endif
