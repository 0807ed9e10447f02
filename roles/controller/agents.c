/* agents — the PillarAgent of a volume (agents.h). */
#include "controller/agents.h"

#include <stdio.h>
#include <string.h>

#include "model/pillar.h"
#include "rules/auth.h"

int agents_address(struct ctl *c, const char *agent, char *addr, size_t cap, struct grpc_status *gs)
{
	struct model_pa pa;
	struct err e = {0};
	int r = model_get(c->st, &model_pa_kind, NULL, agent, &pa, &e);
	if (r == STORE_NOT_FOUND || r == STORE_INVALID)
		return GRPC_NOT_FOUND;
	if (r < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "reading PillarAgent \"%s\": %s",
		                       agent, e.msg);
	const char *a = pa.status.resolved_address;
	if (!a || !*a)
		r = grpc_status_set(gs, GRPC_UNAVAILABLE,
		                    "PillarAgent \"%s\" has no resolved address", agent);
	else
		snprintf(addr, cap, "%s", a);
	model_clear(&model_pa_kind, &pa);
	return r;
}

int agents_address_of_volume(struct ctl *c, const char *agent, char *addr, size_t cap,
                             struct grpc_status *gs)
{
	int r = agents_address(c, agent, addr, cap, gs);
	if (r == GRPC_NOT_FOUND)
		r = grpc_status_set(gs, GRPC_FAILED_PRECONDITION, "PillarAgent \"%s\" not found",
		                    agent);
	return r;
}

int agents_target_auth(struct ctl *c, const char *agent, struct grpc_status *gs)
{
	struct model_pa pa;
	struct err e = {0};
	int r = model_get(c->st, &model_pa_kind, NULL, agent, &pa, &e);
	if (r == STORE_NOT_FOUND || r == STORE_INVALID)
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION, "PillarAgent \"%s\" not found",
		                       agent);
	if (r < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "reading PillarAgent \"%s\": %s",
		                       agent, e.msg);
	const struct model_pa_caps *caps = &pa.status.capabilities;
	if (!(pa.status.has_capabilities && caps->has_nvme_target_auth && caps->nvme_target_auth))
		r = grpc_status_set(gs, GRPC_FAILED_PRECONDITION, RULES_DHCHAP_AGENT_MISSING_FMT,
		                    agent);
	model_clear(&model_pa_kind, &pa);
	return r;
}

void agents_bind_ip(const char *addr, char *out, size_t cap)
{
	if (addr[0] == '[') {
		const char *e = strchr(addr, ']');
		size_t n = e ? (size_t)(e - addr - 1) : strlen(addr + 1);
		snprintf(out, cap, "%.*s", (int)n, addr + 1);
		return;
	}
	const char *colon = strrchr(addr, ':');
	if (colon && strchr(addr, ':') == colon)
		snprintf(out, cap, "%.*s", (int)(colon - addr), addr);
	else
		snprintf(out, cap, "%s", addr);
}

int agents_backend_enum(const char *t)
{
	if (!strcmp(t, "zfs-zvol"))
		return PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL;
	if (!strcmp(t, "lvm-lv"))
		return PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_LVM;
	if (!strcmp(t, "file"))
		return PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE; /* agent-api.md §14 */
	return 0;
}

int agents_error(struct ctl *c, const char *agent, const struct grpc_status *ast,
                 struct grpc_status *gs)
{
	if (agentclient_restore_pending(ast) && c->restore_kick)
		c->restore_kick(c->restore_kick_arg, agent);
	gs->code = ast->code;
	snprintf(gs->msg, sizeof(gs->msg), "%s", ast->msg);
	return ast->code;
}
