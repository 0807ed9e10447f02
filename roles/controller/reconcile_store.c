/* reconcile_store — PillarStore status and conditions (crds.md §5.2), capacity from the agent,
 * finalizer and deletion (§14). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "controller/reconcile.h"

struct pool_ref {
	const char *member; /* zfs | lvm | file */
	const char *token;  /* zfs-zvol | lvm-lv | file */
	const char *what;   /* for messages */
	const char *pool;
	const char *layout_field; /* parentDataset | thinPool | NULL */
	const char *layout;       /* the store's value ("" when unset) */
};

static bool pool_of(const cJSON *pst, struct pool_ref *p)
{
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(pst, "spec"), "backend");
	const cJSON *z = cJSON_GetObjectItemCaseSensitive(b, "zfs"),
	            *l = cJSON_GetObjectItemCaseSensitive(b, "lvm"),
	            *f = cJSON_GetObjectItemCaseSensitive(b, "file");
	memset(p, 0, sizeof(*p));
	if (!!z + !!l + !!f != 1)
		return false;
	if (z)
		*p = (struct pool_ref){"zfs",           "zfs-zvol",
		                       "ZFS pool",      json_get_str(z, "pool"),
		                       "parentDataset", json_get_str(z, "parentDataset") ?: ""};
	else if (l)
		*p = (struct pool_ref){"lvm",
		                       "lvm-lv",
		                       "LVM volume group",
		                       json_get_str(l, "volumeGroup"),
		                       "thinPool",
		                       json_get_str(l, "thinPool") ?: ""};
	else
		*p = (struct pool_ref){"file", "file", "file pool", json_get_str(f, "pool"),
		                       NULL,   NULL};
	return p->pool && *p->pool;
}

static void agent_ready(cJSON *status, const char *agent, const cJSON *pa, int64_t og)
{
	char m[1200];
	if (!pa) {
		snprintf(m, sizeof(m), "PillarAgent \"%s\" not found", agent);
		cond_set(status, "AgentReady", "False", "AgentNotFound", m, og);
		return;
	}
	if (!strcmp(cond_status(pa, "Ready"), "True")) {
		cond_set(status, "AgentReady", "True", "AgentReady", "", og);
		return;
	}
	const char *reason = cond_reason(pa, "Ready");
	const cJSON *rc = cond_get(cJSON_GetObjectItemCaseSensitive(pa, "status"), "Ready");
	const char *msg = rc ? json_get_str(rc, "message") ?: "" : "";
	if (!reason[0])
		snprintf(m, sizeof(m), "PillarAgent \"%s\" is not Ready yet", agent);
	else
		snprintf(m, sizeof(m), "PillarAgent \"%s\" is not Ready: %s%s%s", agent, reason,
		         msg[0] ? ": " : "", msg);
	cond_set(status, "AgentReady", "False", "AgentNotReady", m, og);
}

/* PoolDiscovered and BackendSupported from the agent's status; true when the pool is found. */
static bool pool_conditions(cJSON *status, const char *agent, const cJSON *pa, bool have_pool,
                            const struct pool_ref *p, int64_t og)
{
	char m[1200];
	const cJSON *pst = cJSON_GetObjectItemCaseSensitive(pa, "status");
	const cJSON *caps = cJSON_GetObjectItemCaseSensitive(pst, "capabilities");
	if (!have_pool) {
		cond_set(status, "PoolDiscovered", "False", "PoolNotFound",
		         "spec.backend must set exactly one of zfs, lvm or file, naming its pool",
		         og);
		cond_set(status, "BackendSupported", "False", "BackendNotSupported",
		         "spec.backend must set exactly one of zfs, lvm or file", og);
		return false;
	}
	if (!pa || !caps) {
		snprintf(m, sizeof(m), "PillarAgent \"%s\" has not reported its capabilities yet",
		         agent);
		cond_set(status, "PoolDiscovered", "False", "WaitingForAgentData", m, og);
		cond_set(status, "BackendSupported", "Unknown", "WaitingForAgentData", m, og);
		return false;
	}
	bool supported = false;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(caps, "backends"))
	{
		if (cJSON_IsString(it) && !strcmp(it->valuestring, p->token))
			supported = true;
	}
	if (supported) {
		cond_set(status, "BackendSupported", "True", "BackendSupported", "", og);
	} else {
		snprintf(m, sizeof(m), "agent \"%s\" does not list the %s backend", agent,
		         p->token);
		cond_set(status, "BackendSupported", "False", "BackendNotSupported", m, og);
	}
	const cJSON *found = NULL;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pst, "discoveredPools"))
	{
		const char *n = json_get_str(it, "name"), *t = json_get_str(it, "type");
		if (n && t && !strcmp(n, p->pool) && !strcmp(t, p->member)) {
			found = it;
			break;
		}
	}
	if (!found) {
		snprintf(m, sizeof(m),
		         "agent \"%s\" does not report %s \"%s\" (not in its configuration, not "
		         "imported/active, or the agent cannot see devices: check that it runs "
		         "privileged)",
		         agent, p->what, p->pool);
		cond_set(status, "PoolDiscovered", "False", "PoolNotFound", m, og);
		return false;
	}
	if (p->layout_field) {
		const char *theirs = json_get_str(found, p->layout_field) ?: "";
		if (strcmp(p->layout, theirs)) {
			snprintf(m, sizeof(m),
			         "store %s \"%s\" does not match agent config %s \"%s\"",
			         p->layout_field, p->layout, p->layout_field, theirs);
			cond_set(status, "PoolDiscovered", "False", "BackendLayoutMismatch", m, og);
			return false;
		}
	}
	cond_set(status, "PoolDiscovered", "True", "PoolFound", "", og);
	return true;
}

static void refresh_capacity(struct ctl *c, const char *name, cJSON *status, const cJSON *pa,
                             const struct pool_ref *p)
{
	const char *addr =
	    json_get_str(cJSON_GetObjectItemCaseSensitive(pa, "status"), "resolvedAddress");
	if (!c->ac || !addr || !*addr)
		return;
	PillarCsi__Agent__V1__GetCapacityRequest q =
	    PILLAR_CSI__AGENT__V1__GET_CAPACITY_REQUEST__INIT;
	PillarCsi__Agent__V1__GetCapacityResponse *resp = NULL;
	struct grpc_status ast = {0};
	q.backend_type = backend_enum(p->token);
	q.pool_name = (char *)p->pool;
	if (agentclient_get_capacity(c->ac, addr, &q, &resp, &ast) != GRPC_OK) {
		log_warnf("PillarStore %s: GetCapacity of %s \"%s\" failed: %s", name, p->what,
		          p->pool, ast.msg);
		return;
	}
	char qs[32];
	cJSON *cap = cJSON_CreateObject();
	quantity_format(resp->total_bytes, qs, sizeof(qs));
	cJSON_AddStringToObject(cap, "total", qs);
	quantity_format(resp->available_bytes, qs, sizeof(qs));
	cJSON_AddStringToObject(cap, "available", qs);
	quantity_format(resp->used_bytes, qs, sizeof(qs));
	cJSON_AddStringToObject(cap, "used", qs);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	cJSON_DeleteItemFromObjectCaseSensitive(status, "capacity");
	cJSON_AddItemToObject(status, "capacity", cap);
}

int reconcile_store(struct ctl *c, const char *name, bool refresh, struct err *e)
{
	static const char *const types[] = {"AgentReady", "PoolDiscovered", "BackendSupported",
	                                    NULL};
	cJSON *pst = NULL, *pa = NULL, *before = NULL;
	struct deps d = {0};
	int r = store_get(c->st, kind_of("PillarStore"), NULL, name, &pst, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	bool deleting = store_meta_str(pst, "deletionTimestamp") != NULL;
	if (deleting) {
		cJSON *pscs = reconcile_names_where(c, "PillarStorageClass", "storeRef", name);
		cJSON *vols =
		    reconcile_names_labeled(c, "PillarVolumeState", RULES_LABEL_STORE, name);
		deps_objects(&d, "PillarStorageClass", pscs);
		deps_volumes(&d, vols);
		cJSON_Delete(pscs);
		cJSON_Delete(vols);
		if (!d.msg[0]) {
			r = reconcile_finalizer(c, pst, RULES_FINALIZER_STORE, false, e);
			cJSON_Delete(pst);
			return r == STORE_NOT_FOUND ? 0 : r;
		}
	} else if ((r = reconcile_finalizer(c, pst, RULES_FINALIZER_STORE, true, e)) < 0) {
		cJSON_Delete(pst);
		return r == STORE_NOT_FOUND ? 0 : r;
	}
	int64_t og = reconcile_generation(pst);
	cJSON *status = reconcile_status_of(pst);
	before = cJSON_Duplicate(status, true);
	const char *agent =
	    json_get_str(cJSON_GetObjectItemCaseSensitive(pst, "spec"), "agentRef") ?: "";
	struct err ae = {0};
	int ar = agent[0] ? store_get(c->st, kind_of("PillarAgent"), NULL, agent, &pa, &ae)
	                  : STORE_NOT_FOUND;
	if (ar < 0 && ar != STORE_NOT_FOUND && ar != STORE_INVALID) {
		r = err_set(e, ar, "reading PillarAgent \"%s\": %s", agent, ae.msg);
		goto out;
	}
	struct pool_ref p;
	bool have_pool = pool_of(pst, &p);
	agent_ready(status, agent, pa, og);
	bool found = pool_conditions(status, agent, pa, have_pool, &p, og);
	if (found && (refresh || !cJSON_GetObjectItemCaseSensitive(status, "capacity")))
		refresh_capacity(c, name, status, pa, &p);
	reconcile_ready(status, types, "StoreReady", deleting ? d.msg : NULL, og);
	r = reconcile_write_status(c, pst, before, e);
	if (r == STORE_CONFLICT || r == STORE_NOT_FOUND)
		r = 0; /* the watch brings the newer object back */
out:
	cJSON_Delete(before);
	cJSON_Delete(pa);
	cJSON_Delete(pst);
	return r;
}
