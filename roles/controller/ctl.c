/* ctl — controller core helpers: locks, identifiers, PillarVolumeState CAS, conditions. */
#include "controller/ctl.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/resolve.h"

void ctl_init(struct ctl *c, store *st, agentclient *ac)
{
	memset(c, 0, sizeof(*c));
	c->st = st;
	c->ac = ac;
	c->agent_default_port = 9500;
	keylock_init(&c->locks);
}

void ctl_fini(struct ctl *c)
{
	if (c)
		keylock_fini(&c->locks);
}

int gstatus(struct grpc_status *gs, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(gs->msg, sizeof(gs->msg), fmt, ap);
	va_end(ap);
	gs->code = code;
	return code;
}

/* ---- PillarVolumeState ------------------------------------------------------------------------ */

const struct store_kind *kind_of(const char *name)
{
	return store_kind_lookup(name);
}

int pvst_get_by_id(struct ctl *c, const char *volume_id, cJSON **out, struct grpc_status *gs)
{
	struct rules_volid v;
	char name[RULES_PVST_NAME_CAP];
	struct err e = {0};
	*out = NULL;
	if (rules_volid_parse(volume_id, &v) < 0)
		return GRPC_NOT_FOUND;
	rules_pvst_name(v.name, name, sizeof(name));
	int r = store_get(c->st, kind_of("PillarVolumeState"), NULL, name, out, &e);
	if (r == STORE_NOT_FOUND)
		return GRPC_NOT_FOUND;
	if (r < 0)
		return gstatus(gs, GRPC_UNAVAILABLE, "reading PillarVolumeState \"%s\": %s", name,
		               e.msg);
	const char *vid = json_get_str(cJSON_GetObjectItemCaseSensitive(*out, "spec"), "volumeID");
	if (!vid || strcmp(vid, volume_id)) {
		cJSON_Delete(*out);
		*out = NULL;
		return GRPC_NOT_FOUND;
	}
	return GRPC_OK;
}

int pvst_cas(struct ctl *c, const char *name, const char *uid, pvst_mutate_fn fn, void *arg,
             cJSON **out, struct grpc_status *gs)
{
	const struct store_kind *k = kind_of("PillarVolumeState");
	if (out)
		*out = NULL;
	for (int tries = 0; tries < 8; tries++) {
		cJSON *obj = NULL, *nobj = NULL;
		struct err e = {0};
		int r = store_get(c->st, k, NULL, name, &obj, &e);
		if (r == STORE_NOT_FOUND ||
		    (r == 0 && uid && strcmp(store_meta_str(obj, "uid") ?: "", uid))) {
			cJSON_Delete(obj);
			return gstatus(
			    gs, GRPC_ABORTED,
			    "volume lifecycle of PillarVolumeState \"%s\" changed (uid %s); "
			    "retry",
			    name, uid ? uid : "");
		}
		if (r < 0)
			return gstatus(gs, GRPC_UNAVAILABLE, "reading PillarVolumeState \"%s\": %s",
			               name, e.msg);
		cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
		if (!cJSON_IsObject(status)) {
			cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
			status = cJSON_AddObjectToObject(obj, "status");
		}
		r = fn(obj, status, arg, gs);
		if (r == CAS_SKIP) {
			if (out)
				*out = obj;
			else
				cJSON_Delete(obj);
			return GRPC_OK;
		}
		if (r != 0) {
			cJSON_Delete(obj);
			return r;
		}
		r = store_update_status(c->st, obj, &nobj, &e);
		cJSON_Delete(obj);
		if (r == STORE_CONFLICT)
			continue;
		if (r == STORE_NOT_FOUND)
			return gstatus(
			    gs, GRPC_ABORTED,
			    "volume lifecycle of PillarVolumeState \"%s\" changed; retry", name);
		if (r < 0)
			return gstatus(gs, GRPC_UNAVAILABLE,
			               "updating PillarVolumeState \"%s\": %s", name, e.msg);
		if (out)
			*out = nobj;
		else
			cJSON_Delete(nobj);
		return GRPC_OK;
	}
	return gstatus(gs, GRPC_ABORTED, "PillarVolumeState \"%s\" keeps changing; retry", name);
}

uint64_t pvst_generation(const cJSON *obj)
{
	int64_t g = 0;
	if (json_get_int64(cJSON_GetObjectItemCaseSensitive(obj, "status"), "publicationGeneration",
	                   &g) < 0 ||
	    g < 0)
		return 0;
	return (uint64_t)g;
}

void pvst_set_generation(cJSON *status, uint64_t g)
{
	cJSON_DeleteItemFromObjectCaseSensitive(status, "publicationGeneration");
	cJSON_AddNumberToObject(status, "publicationGeneration", (double)g);
}

bool pvst_deleting(const cJSON *obj)
{
	bool d = false;
	json_get_bool(cJSON_GetObjectItemCaseSensitive(obj, "status"), "deleting", &d);
	return d;
}

/* ---- conditions ------------------------------------------------------------------------------- */

const cJSON *cond_get(const cJSON *status, const char *type)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(status, "conditions"))
	{
		const char *t = json_get_str(it, "type");
		if (t && !strcmp(t, type))
			return it;
	}
	return NULL;
}

static void set_str(cJSON *o, const char *k, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, k);
	cJSON_AddStringToObject(o, k, v);
}

bool cond_set(cJSON *status, const char *type, const char *cstatus, const char *reason,
              const char *message, int64_t og)
{
	cJSON *list = cJSON_GetObjectItemCaseSensitive(status, "conditions");
	if (!cJSON_IsArray(list)) {
		cJSON_DeleteItemFromObjectCaseSensitive(status, "conditions");
		list = cJSON_AddArrayToObject(status, "conditions");
	}
	cJSON *c = (cJSON *)cond_get(status, type);
	char ts[32];
	store_timestamp(ts, sizeof(ts));
	if (!c) {
		c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "type", type);
		cJSON_AddStringToObject(c, "status", cstatus);
		cJSON_AddStringToObject(c, "reason", reason);
		cJSON_AddStringToObject(c, "message", message ? message : "");
		cJSON_AddStringToObject(c, "lastTransitionTime", ts);
		cJSON_AddNumberToObject(c, "observedGeneration", (double)og);
		cJSON_AddItemToArray(list, c);
		return true;
	}
	bool changed = false;
	const char *os = json_get_str(c, "status");
	if (!os || strcmp(os, cstatus)) {
		set_str(c, "status", cstatus);
		set_str(c, "lastTransitionTime", ts);
		changed = true;
	}
	const char *orr = json_get_str(c, "reason");
	if (!orr || strcmp(orr, reason)) {
		set_str(c, "reason", reason);
		changed = true;
	}
	const char *om = json_get_str(c, "message");
	if (!om || strcmp(om, message ? message : "")) {
		set_str(c, "message", message ? message : "");
		changed = true;
	}
	int64_t g = -1;
	json_get_int64(c, "observedGeneration", &g);
	if (g != og) {
		cJSON_DeleteItemFromObjectCaseSensitive(c, "observedGeneration");
		cJSON_AddNumberToObject(c, "observedGeneration", (double)og);
		changed = true;
	}
	return changed;
}

const char *cond_status(const cJSON *obj, const char *type)
{
	const cJSON *c = cond_get(cJSON_GetObjectItemCaseSensitive(obj, "status"), type);
	return c ? (json_get_str(c, "status") ?: "") : "";
}

const char *cond_reason(const cJSON *obj, const char *type)
{
	const cJSON *c = cond_get(cJSON_GetObjectItemCaseSensitive(obj, "status"), type);
	return c ? (json_get_str(c, "reason") ?: "") : "";
}

/* ---- agents ----------------------------------------------------------------------------------- */

int ctl_agent_address(struct ctl *c, const char *agent, char *addr, size_t cap,
                      struct grpc_status *gs)
{
	cJSON *pa = NULL;
	struct err e = {0};
	int r = store_get(c->st, kind_of("PillarAgent"), NULL, agent, &pa, &e);
	if (r == STORE_NOT_FOUND || r == STORE_INVALID)
		return GRPC_NOT_FOUND;
	if (r < 0)
		return gstatus(gs, GRPC_UNAVAILABLE, "reading PillarAgent \"%s\": %s", agent,
		               e.msg);
	const char *a =
	    json_get_str(cJSON_GetObjectItemCaseSensitive(pa, "status"), "resolvedAddress");
	if (!a || !*a) {
		cJSON_Delete(pa);
		return gstatus(gs, GRPC_UNAVAILABLE, "PillarAgent \"%s\" has no resolved address",
		               agent);
	}
	snprintf(addr, cap, "%s", a);
	cJSON_Delete(pa);
	return GRPC_OK;
}

void addr_ip_part(const char *addr, char *out, size_t cap)
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

int backend_enum(const char *t)
{
	if (!strcmp(t, "zfs-zvol"))
		return PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL;
	if (!strcmp(t, "lvm-lv"))
		return PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_LVM;
	if (!strcmp(t, "file"))
		return PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE; /* agent-api.md §14 */
	return 0;
}

PillarCsi__Agent__V1__BackendParams *backend_params_fill(struct backend_params_buf *b,
                                                         const cJSON *pvst)
{
	const cJSON *bk = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pvst, "spec"),
	                                     "resolved"),
	    "backend");
	const cJSON *z = cJSON_GetObjectItemCaseSensitive(bk, "zfs");
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(bk, "lvm");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(bk, "file");
	memset(b, 0, sizeof(*b));
	pillar_csi__agent__v1__file_volume_params__init(&b->file);
	pillar_csi__agent__v1__backend_params__init(&b->bp);
	pillar_csi__agent__v1__zfs_volume_params__init(&b->zfs);
	pillar_csi__agent__v1__lvm_volume_params__init(&b->lvm);
	if (z) {
		b->zfs.pool = (char *)(json_get_str(z, "pool") ?: "");
		b->zfs.parent_dataset = (char *)(json_get_str(z, "parentDataset") ?: "");
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(z, "properties"), *it;
		int n = cJSON_GetArraySize(props);
		if (n > 0) {
			b->props = calloc((size_t)n, sizeof(*b->props));
			b->propp = calloc((size_t)n, sizeof(*b->propp));
			if (b->props && b->propp) {
				size_t i = 0;
				cJSON_ArrayForEach(it, props)
				{
					if (!cJSON_IsString(it))
						continue;
					pillar_csi__agent__v1__zfs_volume_params__properties_entry__init(
					    &b->props[i]);
					b->props[i].key = it->string;
					b->props[i].value = it->valuestring;
					b->propp[i] = &b->props[i];
					i++;
				}
				b->zfs.n_properties = i;
				b->zfs.properties = b->propp;
			}
		}
		b->bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_ZFS;
		b->bp.zfs = &b->zfs;
		return &b->bp;
	}
	if (l) {
		b->lvm.volume_group = (char *)(json_get_str(l, "volumeGroup") ?: "");
		b->lvm.provision_mode = (char *)(json_get_str(l, "provisioningMode") ?: "");
		b->lvm.thin_pool = (char *)(json_get_str(l, "thinPool") ?: "");
		b->bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_LVM;
		b->bp.lvm = &b->lvm;
		return &b->bp;
	}
	if (f) {
		/* preallocate unset = false: the agent's configuration decides (agent-api.md §14) */
		bool pre = false;
		b->file.pool = (char *)(json_get_str(f, "pool") ?: "");
		json_get_bool(f, "preallocate", &pre);
		b->file.preallocate = pre;
		b->bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE;
		b->bp.file = &b->file;
		return &b->bp;
	}
	return NULL;
}

void backend_params_free(struct backend_params_buf *b)
{
	free(b->props);
	free(b->propp);
	b->props = NULL;
	b->propp = NULL;
}

int ctl_agent_error(struct ctl *c, const char *agent, const struct grpc_status *ast,
                    struct grpc_status *gs)
{
	if (agentclient_restore_pending(ast) && c->restore_kick)
		c->restore_kick(c->restore_kick_arg, agent);
	gs->code = ast->code;
	snprintf(gs->msg, sizeof(gs->msg), "%s", ast->msg);
	return ast->code;
}

/* ---- quantities ------------------------------------------------------------------------------- */

void quantity_format(long long b, char *out, size_t cap)
{
	static const char *const sfx[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
	for (int i = 0; i < 6 && b != 0; i++) {
		long long unit = 1LL << (10 * (6 - i));
		if (b % unit == 0) {
			snprintf(out, cap, "%lld%s", b / unit, sfx[i]);
			return;
		}
	}
	snprintf(out, cap, "%lld", b);
}

int quantity_parse(const char *q, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(q, &end, 10);
	if (errno || end == q || v < 0)
		return -EINVAL;
	static const struct {
		const char *s;
		long long m;
	} u[] = {{"", 1},
	         {"Ki", 1LL << 10},
	         {"Mi", 1LL << 20},
	         {"Gi", 1LL << 30},
	         {"Ti", 1LL << 40},
	         {"Pi", 1LL << 50},
	         {"Ei", 1LL << 60},
	         {"k", 1000LL},
	         {"M", 1000000LL},
	         {"G", 1000000000LL},
	         {"T", 1000000000000LL},
	         {"P", 1000000000000000LL},
	         {"E", 1000000000000000000LL}};
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		if (!strcmp(end, u[i].s)) {
			if (v > LLONG_MAX / u[i].m)
				return -EINVAL;
			*out = v * u[i].m;
			return 0;
		}
	return -EINVAL;
}
