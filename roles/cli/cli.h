/* cli — `pillar-csi apply|get|delete`: operators manage objects in the store
 * (spec/standalone.md "CLI verbs").  Output follows kubectl's shapes so runbooks read the same. */
#ifndef PILLAR_ROLES_CLI_H
#define PILLAR_ROLES_CLI_H

#include <stddef.h>

int cli_apply_main(int argc, char **argv);
int cli_get_main(int argc, char **argv);
int cli_delete_main(int argc, char **argv);
/* `pillar-csi dhchap rotate NODE` (docs/authentication.md "Rotation"). */
int cli_dhchap_main(int argc, char **argv);

/* Shared by the verbs: $PILLAR_CSI_STORE (or kube in a cluster, else NULL); the store flags;
 * opening url with them (0, or the exit status with the message printed). */
struct store;
struct store_flags;
const char *cli_default_store(void);
extern struct store_flags cli_sf;
/* Objects per list request of the kube store (get --chunk-size); 0: the store's default. */
extern int cli_list_page;
int cli_open_store(const char *url, struct store **s);

/* kubectl-style age of an RFC 3339 timestamp relative to now (e.g. 45s, 5m10s, 3h, 12d). */
void cli_age(const char *timestamp, long long now, char *buf, size_t cap);

#endif
