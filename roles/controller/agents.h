/* agents — the PillarAgent of a volume as the CSI handlers and reconcilers use it: its
 * resolved address, the bind address of an export, the agent API's backend enum and the
 * mapping of an agent's error (crds.md §3.2, agent-api.md).
 * Handler-style functions return a gRPC code (0 = OK) and fill a struct grpc_status.
 */
#ifndef PILLAR_ROLES_CONTROLLER_AGENTS_H
#define PILLAR_ROLES_CONTROLLER_AGENTS_H

#include <stddef.h>

#include "controller/ctl.h"

/* Reads PillarAgent `agent` and its status.resolvedAddress into addr.  Returns 0,
 * GRPC_NOT_FOUND (object missing; gs not set — the caller words it) or GRPC_UNAVAILABLE
 * `PillarAgent "<a>" has no resolved address`. */
int agents_address(struct ctl *c, const char *agent, char *addr, size_t cap,
                   struct grpc_status *gs);
/* The same for an operation on an existing volume: a missing agent is FAILED_PRECONDITION
 * `PillarAgent "<a>" not found`. */
int agents_address_of_volume(struct ctl *c, const char *agent, char *addr, size_t cap,
                             struct grpc_status *gs);
/* Bind address (IP part, no brackets) of "ip:port" / "[ip6]:port". */
/* 0 when the agent's status says its kernel has NVMe in-band authentication
 * (capabilities.nvmeTargetAuth), else FAILED_PRECONDITION RULES_DHCHAP_AGENT_MISSING_FMT (also
 * when not yet known), or the store's error. */
int agents_target_auth(struct ctl *c, const char *agent, struct grpc_status *gs);
void agents_bind_ip(const char *addr, char *out, size_t cap);
/* The agent API's BackendType of a token (zfs-zvol, lvm-lv, file); 0 when unknown. */
int agents_backend_enum(const char *token);
/* Sets gs from an agent status and returns its code; an `export restore pending` failure
 * kicks the agent's restore (ctl.restore_kick).  Prefixes nothing. */
int agents_error(struct ctl *c, const char *agent, const struct grpc_status *ast,
                 struct grpc_status *gs);

#endif
