/* resolve — configuration layers, precedence and validation (crds.md §8–§13). */
#include "controller/resolve.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/fsopts.h"
#include "controller/yamldoc.h"

enum bk { BK_NONE, BK_ZFS, BK_LVM, BK_FILE };
enum axis { AX_BACKEND, AX_PROTOCOL, AX_FS, AX_OTHER };

#define json_str json_get_str

static const char *const tun_name[4] = {"maxQueueSize", "inCapsuleDataSize", "ctrlLossTmo",
                                        "reconnectDelay"};
static const long long tun_min[4] = {16, 1024, -1, 1};
static const long long tun_max[4] = {1024, INT_MAX, INT_MAX, INT_MAX};

struct conf {
	enum bk bk;
	char pool[254], parent[254], voltype[16];
	cJSON *props;
	char thin[254], mode[16], mode_key[300];
	bool prealloc_set, prealloc;
	long long port;
	bool acl;
	bool has[4];
	long long tun[4];
	char fstype[16];
	bool fstype_l1; /* set explicitly at layer 1 */
	cJSON *mkfs, *mount;
	/* error reporting */
	int code;
	enum axis axis;
	char reason[48];
	char msg[GRPC_STATUS_MSG_MAX];
};

static int cfail(struct conf *c, int code, enum axis ax, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int cfail(struct conf *c, int code, enum axis ax, const char *reason, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	c->code = code;
	c->axis = ax;
	snprintf(c->reason, sizeof(c->reason), "%s", reason ? reason : "");
	return -EINVAL;
}

static const char *bk_token(enum bk b)
{
	return b == BK_ZFS ? "zfs-zvol" : b == BK_LVM ? "lvm-lv" : b == BK_FILE ? "file" : "none";
}

static const char *bk_member(enum bk b)
{
	return b == BK_ZFS ? "zfs" : b == BK_LVM ? "lvm" : b == BK_FILE ? "file" : "none";
}

/* ---- typed readers over JSON values and yamldoc raw scalars ------------------------------- */

static int val_int(const cJSON *v, long long *out)
{
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d != (double)(long long)d || d > 9007199254740992.0 || d < -9007199254740992.0)
			return -EINVAL;
		*out = (long long)d;
		return 0;
	}
	if (cJSON_IsRaw(v) && v->valuestring) {
		char *end;
		errno = 0;
		long long x = strtoll(v->valuestring, &end, 10);
		if (errno || *end || end == v->valuestring)
			return -EINVAL;
		*out = x;
		return 0;
	}
	return -EINVAL;
}

static int val_bool(const cJSON *v, bool *out)
{
	if (cJSON_IsBool(v)) {
		*out = cJSON_IsTrue(v);
		return 0;
	}
	if (cJSON_IsRaw(v) && v->valuestring &&
	    (!strcmp(v->valuestring, "true") || !strcmp(v->valuestring, "false"))) {
		*out = v->valuestring[0] == 't';
		return 0;
	}
	return -EINVAL;
}

int resolve_get_int(const cJSON *obj, const char *key, long long *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	return val_int(v, out);
}

int resolve_get_bool(const cJSON *obj, const char *key, bool *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	return val_bool(v, out);
}

/* Literal text of a scalar (zfs.properties values). */
static bool val_text(const cJSON *v, char *buf, size_t cap)
{
	if (cJSON_IsString(v) || cJSON_IsRaw(v)) {
		snprintf(buf, cap, "%s", v->valuestring);
		return true;
	}
	long long i;
	if (cJSON_IsNumber(v) && val_int(v, &i) == 0) {
		snprintf(buf, cap, "%lld", i);
		return true;
	}
	if (cJSON_IsBool(v)) {
		snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
		return true;
	}
	return false;
}

static bool str_list(const cJSON *v)
{
	if (!cJSON_IsArray(v))
		return false;
	const cJSON *it;
	cJSON_ArrayForEach(it, v) if (!cJSON_IsString(it)) return false;
	return true;
}

/* ---- layer 0 -------------------------------------------------------------------------------- */

static void cpy(char *dst, size_t cap, const char *s)
{
	snprintf(dst, cap, "%s", s ? s : "");
}

static int base_store(struct conf *c, const cJSON *pst, const char *name)
{
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(pst, "spec"), "backend");
	const cJSON *z = cJSON_GetObjectItemCaseSensitive(b, "zfs"),
	            *l = cJSON_GetObjectItemCaseSensitive(b, "lvm"),
	            *f = cJSON_GetObjectItemCaseSensitive(b, "file");
	if (!!z + !!l + !!f != 1)
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND, "BackendOverrideMismatch",
		             "PillarStore \"%s\": spec.backend must set exactly one of zfs or lvm",
		             name);
	c->props = cJSON_CreateObject();
	if (z) {
		c->bk = BK_ZFS;
		cpy(c->pool, sizeof(c->pool), json_str(z, "pool"));
		cpy(c->parent, sizeof(c->parent), json_str(z, "parentDataset"));
		cpy(c->voltype, sizeof(c->voltype), json_str(z, "volumeType") ?: "zvol");
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(z, "properties"), *it;
		cJSON_ArrayForEach(it, p)
		{
			char t[1024];
			if (val_text(it, t, sizeof(t)))
				cJSON_AddStringToObject(c->props, it->string, t);
		}
	} else if (l) {
		c->bk = BK_LVM;
		cpy(c->pool, sizeof(c->pool), json_str(l, "volumeGroup"));
		cpy(c->thin, sizeof(c->thin), json_str(l, "thinPool"));
		cpy(c->mode, sizeof(c->mode), json_str(l, "provisioningMode") ?: "linear");
		snprintf(c->mode_key, sizeof(c->mode_key), "PillarStore \"%s\"", name);
	} else {
		c->bk = BK_FILE;
		cpy(c->pool, sizeof(c->pool), json_str(f, "pool"));
		c->prealloc_set = resolve_get_bool(f, "preallocate", &c->prealloc) == 0;
	}
	if (!c->pool[0])
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND, "BackendOverrideMismatch",
		             "PillarStore \"%s\": spec.backend.%s names no pool", name,
		             bk_member(c->bk));
	return 0;
}

static int base_protocol(struct conf *c, const cJSON *pstr, const char *name)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(pstr, "spec"), "protocol");
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(p, "nvmeofTcp");
	if (!cJSON_IsObject(n) || cJSON_GetArraySize(p) != 1)
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL, "ProtocolOverrideMismatch",
		             "PillarProtocol \"%s\": spec.protocol must set exactly one member "
		             "(nvmeofTcp)",
		             name);
	c->port = 4420;
	if (resolve_get_int(n, "port", &c->port) == -EINVAL || c->port < 1 || c->port > 65535)
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL, "ProtocolOverrideMismatch",
		             "PillarProtocol \"%s\": nvmeofTcp.port must be between 1 and 65535",
		             name);
	c->acl = false;
	resolve_get_bool(n, "acl", &c->acl);
	for (int i = 0; i < 4; i++) {
		int r = resolve_get_int(n, tun_name[i], &c->tun[i]);
		if (r == 0)
			c->has[i] = true;
	}
	return 0;
}

/* ---- documents (layers 1 and 2) ------------------------------------------------------------ */

/* "<key>: " or "" */
static const char *pfx(const char *key, char *buf, size_t cap)
{
	if (!key)
		buf[0] = 0;
	else
		snprintf(buf, cap, "%s: ", key);
	return buf;
}

static int apply_backend(struct conf *c, const cJSON *doc, const char *key)
{
	char p[320];
	pfx(key, p, sizeof(p));
	if (!doc)
		return 0;
	if (!cJSON_IsObject(doc))
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND, "BackendOverrideMismatch",
		             "%sthe backend document must be a mapping", p);
	const cJSON *m, *member = NULL;
	enum bk mb = BK_NONE;
	int n = 0;
	cJSON_ArrayForEach(m, doc)
	{
		enum bk b = !strcmp(m->string, "zfs")    ? BK_ZFS
		            : !strcmp(m->string, "lvm")  ? BK_LVM
		            : !strcmp(m->string, "file") ? BK_FILE
		                                         : BK_NONE;
		if (b == BK_NONE)
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND,
			             "BackendOverrideMismatch", "%sunknown field \"%s\"", p,
			             m->string);
		n++;
		member = m;
		mb = b;
	}
	if (n == 0)
		return 0;
	if (n > 1)
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND, "BackendOverrideMismatch",
		             "%sthe backend document must set at most one of zfs or lvm", p);
	const char *mn = bk_member(mb);
	if (!cJSON_IsObject(member))
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND, "BackendOverrideMismatch",
		             "%s%s must be a mapping", p, mn);
	/* fields first: a structural or unknown path is reported as such */
	cJSON_ArrayForEach(m, member)
	{
		const char *f = m->string;
		bool structural =
		    (mb == BK_ZFS && (!strcmp(f, "pool") || !strcmp(f, "parentDataset") ||
		                      !strcmp(f, "volumeType"))) ||
		    (mb == BK_LVM && (!strcmp(f, "volumeGroup") || !strcmp(f, "thinPool"))) ||
		    (mb == BK_FILE && !strcmp(f, "pool"));
		bool known = (mb == BK_ZFS && !strcmp(f, "properties")) ||
		             (mb == BK_LVM && !strcmp(f, "provisioningMode")) ||
		             (mb == BK_FILE && !strcmp(f, "preallocate"));
		if (structural)
			return cfail(
			    c, GRPC_INVALID_ARGUMENT, AX_BACKEND, "BackendOverrideMismatch",
			    "%s%s.%s is structural and cannot be set per volume", p, mn, f);
		if (!known)
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND,
			             "BackendOverrideMismatch", "%sunknown field \"%s.%s\"", p, mn,
			             f);
	}
	if (mb != c->bk)
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND, "BackendOverrideMismatch",
		             "%s%s overrides do not apply to a %s backend", p, mn, bk_token(c->bk));
	if (mb == BK_ZFS) {
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(member, "properties"), *it;
		if (!cJSON_IsObject(props))
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND,
			             "BackendOverrideMismatch",
			             "%szfs.properties must be a mapping of strings", p);
		cJSON_ArrayForEach(it, props)
		{
			char t[1024];
			if (!strcmp(it->string, "volsize"))
				return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND,
				             "BackendOverrideMismatch",
				             "%szfs.properties: volsize is managed by the volume "
				             "capacity",
				             p);
			if (!val_text(it, t, sizeof(t)))
				return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND,
				             "BackendOverrideMismatch",
				             "%szfs.properties.%s must be a string", p, it->string);
			cJSON_DeleteItemFromObjectCaseSensitive(c->props, it->string);
			cJSON_AddStringToObject(c->props, it->string, t);
		}
	} else if (mb == BK_LVM) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(member, "provisioningMode");
		if (!cJSON_IsString(v) ||
		    (strcmp(v->valuestring, "linear") && strcmp(v->valuestring, "thin")))
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND,
			             "BackendOverrideMismatch",
			             "%slvm.provisioningMode must be linear or thin", p);
		cpy(c->mode, sizeof(c->mode), v->valuestring);
		cpy(c->mode_key, sizeof(c->mode_key), key);
	} else {
		bool b;
		if (resolve_get_bool(member, "preallocate", &b) != 0)
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND,
			             "BackendOverrideMismatch",
			             "%sfile.preallocate must be true or false", p);
		c->prealloc_set = true;
		c->prealloc = b;
	}
	return 0;
}

static int apply_protocol(struct conf *c, const cJSON *doc, const char *key)
{
	char p[320];
	pfx(key, p, sizeof(p));
	if (!doc)
		return 0;
	if (!cJSON_IsObject(doc))
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL, "ProtocolOverrideMismatch",
		             "%sthe protocol document must be a mapping", p);
	const cJSON *m;
	cJSON_ArrayForEach(m, doc)
	{
		if (strcmp(m->string, "nvmeofTcp"))
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL,
			             "ProtocolOverrideMismatch", "%sunknown field \"%s\"", p,
			             m->string);
		if (!cJSON_IsObject(m))
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL,
			             "ProtocolOverrideMismatch", "%snvmeofTcp must be a mapping",
			             p);
		const cJSON *f;
		cJSON_ArrayForEach(f, m)
		{
			if (!strcmp(f->string, "port") || !strcmp(f->string, "acl"))
				return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL,
				             "ProtocolOverrideMismatch",
				             "%snvmeofTcp.%s is structural and cannot be set per "
				             "volume",
				             p, f->string);
			int i;
			for (i = 0; i < 4 && strcmp(f->string, tun_name[i]); i++)
				;
			if (i == 4)
				return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL,
				             "ProtocolOverrideMismatch",
				             "%sunknown field \"nvmeofTcp.%s\"", p, f->string);
			long long v;
			if (val_int(f, &v) < 0)
				return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL,
				             "ProtocolOverrideMismatch",
				             "%snvmeofTcp.%s must be an integer", p, tun_name[i]);
			if (v < tun_min[i] || v > tun_max[i]) {
				if (tun_max[i] != INT_MAX)
					return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL,
					             "ProtocolOverrideMismatch",
					             "%snvmeofTcp.%s must be between %lld and %lld",
					             p, tun_name[i], tun_min[i], tun_max[i]);
				if (v < tun_min[i])
					return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL,
					             "ProtocolOverrideMismatch",
					             "%snvmeofTcp.%s must be at least %lld", p,
					             tun_name[i], tun_min[i]);
				return cfail(c, GRPC_INVALID_ARGUMENT, AX_PROTOCOL,
				             "ProtocolOverrideMismatch",
				             "%snvmeofTcp.%s must be at most %d", p, tun_name[i],
				             INT_MAX);
			}
			c->has[i] = true;
			c->tun[i] = v;
		}
	}
	return 0;
}

static int apply_fs(struct conf *c, const cJSON *doc, const char *key, bool layer1)
{
	char p[320];
	pfx(key, p, sizeof(p));
	if (!doc)
		return 0;
	if (!cJSON_IsObject(doc))
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_FS, "InvalidFilesystem",
		             "%sthe filesystem document must be a mapping", p);
	const cJSON *f;
	cJSON_ArrayForEach(f, doc)
	{
		if (!strcmp(f->string, "fsType")) {
			if (!cJSON_IsString(f) ||
			    (strcmp(f->valuestring, "ext4") && strcmp(f->valuestring, "xfs")))
				return cfail(c, GRPC_INVALID_ARGUMENT, AX_FS, "InvalidFilesystem",
				             "%sfsType must be ext4 or xfs", p);
			cpy(c->fstype, sizeof(c->fstype), f->valuestring);
			if (layer1)
				c->fstype_l1 = true;
		} else if (!strcmp(f->string, "mkfsOptions") ||
		           !strcmp(f->string, "mountOptions")) {
			if (!str_list(f))
				return cfail(c, GRPC_INVALID_ARGUMENT, AX_FS, "InvalidFilesystem",
				             "%s%s must be a list of strings", p, f->string);
			cJSON **dst = f->string[1] == 'k' ? &c->mkfs : &c->mount;
			cJSON_Delete(*dst);
			*dst = cJSON_Duplicate(f, true);
		} else {
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_FS, "InvalidFilesystem",
			             "%sunknown field \"%s\"", p, f->string);
		}
	}
	return 0;
}

/* Parses a document string (layer 1 SC parameter or layer 2 PVC annotation). */
static int parse_doc(struct conf *c, const char *key, const char *text, enum axis ax, cJSON **out)
{
	struct err e = {0};
	if (yamldoc_parse(text, out, &e) < 0)
		return cfail(c, GRPC_INVALID_ARGUMENT, ax, "", "%s: %s", key, e.msg);
	return 0;
}

static int post_checks(struct conf *c, const char *store_name, bool block)
{
	if (c->bk == BK_LVM && !strcmp(c->mode, "thin") && !c->thin[0])
		return cfail(c, GRPC_INVALID_ARGUMENT, AX_BACKEND, "ThinPoolRequired",
		             "%s%slvm.provisioningMode thin requires PillarStore \"%s\" to set "
		             "lvm.thinPool",
		             c->mode_key, c->mode_key[0] ? ": " : "", store_name);
	if (!block) {
		struct err e = {0};
		if (fsopts_mkfs_check(c->fstype, c->mkfs, &e) < 0)
			return cfail(c, GRPC_INVALID_ARGUMENT, AX_FS, "InvalidFilesystem", "%s",
			             e.msg);
	}
	return 0;
}

static void conf_init(struct conf *c)
{
	memset(c, 0, sizeof(*c));
	cpy(c->fstype, sizeof(c->fstype), "ext4");
}

static void conf_free(struct conf *c)
{
	cJSON_Delete(c->props);
	cJSON_Delete(c->mkfs);
	cJSON_Delete(c->mount);
}

static cJSON *conf_json(const struct conf *c, bool block)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *b = cJSON_AddObjectToObject(r, "backend");
	cJSON *m = cJSON_AddObjectToObject(b, bk_member(c->bk));
	if (c->bk == BK_ZFS) {
		cJSON_AddStringToObject(m, "volumeType", c->voltype);
		cJSON_AddStringToObject(m, "pool", c->pool);
		if (c->parent[0])
			cJSON_AddStringToObject(m, "parentDataset", c->parent);
		if (cJSON_GetArraySize(c->props))
			cJSON_AddItemToObject(m, "properties", cJSON_Duplicate(c->props, true));
	} else if (c->bk == BK_LVM) {
		cJSON_AddStringToObject(m, "volumeGroup", c->pool);
		if (c->thin[0])
			cJSON_AddStringToObject(m, "thinPool", c->thin);
		cJSON_AddStringToObject(m, "provisioningMode", c->mode);
	} else {
		cJSON_AddStringToObject(m, "pool", c->pool);
		if (c->prealloc_set)
			cJSON_AddBoolToObject(m, "preallocate", c->prealloc);
	}
	cJSON *n = cJSON_AddObjectToObject(cJSON_AddObjectToObject(r, "protocol"), "nvmeofTcp");
	cJSON_AddNumberToObject(n, "port", (double)c->port);
	cJSON_AddBoolToObject(n, "acl", c->acl);
	for (int i = 0; i < 4; i++)
		if (c->has[i])
			cJSON_AddNumberToObject(n, tun_name[i], (double)c->tun[i]);
	if (!block) {
		cJSON *f = cJSON_AddObjectToObject(r, "filesystem");
		cJSON_AddStringToObject(f, "fsType", c->fstype);
		cJSON_AddItemToObject(f, "mkfsOptions",
		                      c->mkfs ? cJSON_Duplicate(c->mkfs, true)
		                              : cJSON_CreateArray());
		cJSON_AddItemToObject(f, "mountOptions",
		                      c->mount ? cJSON_Duplicate(c->mount, true)
		                               : cJSON_CreateArray());
	}
	return r;
}

/* ---- CreateVolume resolution ---------------------------------------------------------------- */

static int gfail(struct grpc_status *gs, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int gfail(struct grpc_status *gs, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(gs->msg, sizeof(gs->msg), fmt, ap);
	va_end(ap);
	gs->code = code;
	return code;
}

/* Reads a cluster-scoped object; NOT_FOUND with "<Kind> "<n>" (named via <via>) not found". */
static int lookup(store *st, const char *kind, const char *name, const char *via, cJSON **out,
                  struct grpc_status *gs)
{
	struct err e = {0};
	int r = store_get(st, store_kind_lookup(kind), NULL, name, out, &e);
	if (r == STORE_NOT_FOUND || (r == STORE_INVALID && *name == 0))
		return gfail(gs, GRPC_NOT_FOUND, "%s \"%s\" (named via %s) not found", kind, name,
		             via);
	if (r < 0)
		return gfail(gs, GRPC_UNAVAILABLE, "reading %s \"%s\": %s", kind, name, e.msg);
	return 0;
}

static const char *const sc_keys[] = {
    "storage-class", "store-ref", "protocol-ref", "backend", "protocol", "filesystem", NULL};

struct params {
	const char *v[6]; /* by sc_keys index */
	const char *fstype, *pvc_name, *pvc_ns;
};

static int read_params(const cJSON *params, struct params *p, struct grpc_status *gs)
{
	const cJSON *it;
	memset(p, 0, sizeof(*p));
	cJSON_ArrayForEach(it, params)
	{
		const char *k = it->string, *v = cJSON_IsString(it) ? it->valuestring : "";
		if (!strncmp(k, "csi.storage.k8s.io/", 19)) {
			if (!strcmp(k + 19, "fstype"))
				p->fstype = v;
			else if (!strcmp(k + 19, "pvc/name"))
				p->pvc_name = v;
			else if (!strcmp(k + 19, "pvc/namespace"))
				p->pvc_ns = v;
			continue;
		}
		int i = -1;
		if (!strncmp(k, RULES_KEY_PREFIX, strlen(RULES_KEY_PREFIX)))
			for (i = 0; sc_keys[i] && strcmp(k + strlen(RULES_KEY_PREFIX), sc_keys[i]);
			     i++)
				;
		if (i < 0 || !sc_keys[i])
			return gfail(gs, GRPC_INVALID_ARGUMENT,
			             "unsupported StorageClass parameter \"%s\"", k);
		p->v[i] = v;
	}
	if (p->v[0]) {
		for (int i = 1; i < 6; i++)
			if (p->v[i])
				return gfail(gs, GRPC_INVALID_ARGUMENT,
				             "unsupported StorageClass parameter \"%s%s\"",
				             RULES_KEY_PREFIX, sc_keys[i]);
		return 0;
	}
	for (int i = 1; i < 3; i++)
		if (!p->v[i] || !*p->v[i])
			return gfail(gs, GRPC_INVALID_ARGUMENT,
			             "StorageClass parameter \"%s%s\" is required",
			             RULES_KEY_PREFIX, sc_keys[i]);
	return 0;
}

static int conf_err(struct conf *c, struct grpc_status *gs)
{
	return gfail(gs, c->code, "%s", c->msg);
}

/* FAILED_PRECONDITION when the agent reports the store's pool with another layout. */
static int layout_check(store *st, const struct conf *c, const char *store_name, const char *agent,
                        struct grpc_status *gs)
{
	cJSON *pa = NULL;
	if (store_get(st, store_kind_lookup("PillarAgent"), NULL, agent, &pa, NULL) < 0)
		return 0; /* step 6 reports a missing agent */
	const cJSON *pools = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(pa, "status"), "discoveredPools");
	const cJSON *it;
	int r = 0;
	cJSON_ArrayForEach(it, pools)
	{
		const char *n = json_str(it, "name");
		if (!n || strcmp(n, c->pool))
			continue;
		const char *field = NULL, *ours = NULL, *theirs = NULL;
		if (c->bk == BK_ZFS) {
			field = "parentDataset";
			ours = c->parent;
			theirs = json_str(it, "parentDataset") ?: "";
		} else if (c->bk == BK_LVM) {
			field = "thinPool";
			ours = c->thin;
			theirs = json_str(it, "thinPool") ?: "";
		}
		if (field && strcmp(ours, theirs))
			r = gfail(
			    gs, GRPC_FAILED_PRECONDITION,
			    "PillarStore \"%s\" does not match agent \"%s\": %s \"%s\" vs agent "
			    "config \"%s\"",
			    store_name, agent, field, ours, theirs);
		break;
	}
	cJSON_Delete(pa);
	return r;
}

int resolve_volume(store *st, const cJSON *params, bool block, const char *cap_fstype,
                   struct resolve_out *out, struct grpc_status *gs)
{
	struct params p;
	struct conf c;
	cJSON *psc = NULL, *pst = NULL, *pstr = NULL, *pvc = NULL, *doc = NULL;
	char key[320];
	int r;

	memset(out, 0, sizeof(*out));
	conf_init(&c);
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if ((r = read_params(params, &p, gs)) != 0)
		goto out;
	if (p.v[0]) {
		cpy(out->psc, sizeof(out->psc), p.v[0]);
		if ((r = lookup(st, "PillarStorageClass", p.v[0], RULES_KEY_PREFIX "storage-class",
		                &psc, gs)) != 0)
			goto out;
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(psc, "spec");
		cpy(out->store, sizeof(out->store), json_str(spec, "storeRef"));
		cpy(out->protocol, sizeof(out->protocol), json_str(spec, "protocolRef"));
		char via[300];
		snprintf(via, sizeof(via), "PillarStorageClass \"%s\"", p.v[0]);
		if ((r = lookup(st, "PillarStore", out->store, via, &pst, gs)) != 0 ||
		    (r = lookup(st, "PillarProtocol", out->protocol, via, &pstr, gs)) != 0)
			goto out;
	} else {
		cpy(out->store, sizeof(out->store), p.v[1]);
		cpy(out->protocol, sizeof(out->protocol), p.v[2]);
		if ((r = lookup(st, "PillarStore", out->store, RULES_KEY_PREFIX "store-ref", &pst,
		                gs)) != 0 ||
		    (r = lookup(st, "PillarProtocol", out->protocol,
		                RULES_KEY_PREFIX "protocol-ref", &pstr, gs)) != 0)
			goto out;
	}
	/* layer 0 */
	if (base_store(&c, pst, out->store) < 0 || base_protocol(&c, pstr, out->protocol) < 0) {
		r = conf_err(&c, gs);
		goto out;
	}
	cpy(out->agent, sizeof(out->agent),
	    json_str(cJSON_GetObjectItemCaseSensitive(pst, "spec"), "agentRef"));
	/* layer 1 */
	if (psc) {
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(psc, "spec");
		const cJSON *ov = cJSON_GetObjectItemCaseSensitive(spec, "overrides");
		snprintf(key, sizeof(key), "PillarStorageClass \"%s\"", out->psc);
		if (apply_backend(&c, cJSON_GetObjectItemCaseSensitive(ov, "backend"), key) < 0 ||
		    apply_protocol(&c, cJSON_GetObjectItemCaseSensitive(ov, "protocol"), key) < 0 ||
		    (!block && apply_fs(&c, cJSON_GetObjectItemCaseSensitive(spec, "filesystem"),
		                        key, true) < 0)) {
			r = conf_err(&c, gs);
			goto out;
		}
	} else {
		for (int i = 3; i < 6; i++) {
			if (!p.v[i] || (i == 5 && block))
				continue;
			snprintf(key, sizeof(key), "%s%s", RULES_KEY_PREFIX, sc_keys[i]);
			if (parse_doc(&c, key, p.v[i], (enum axis)(i - 3), &doc) < 0 ||
			    (i == 3 && apply_backend(&c, doc, key) < 0) ||
			    (i == 4 && apply_protocol(&c, doc, key) < 0) ||
			    (i == 5 && apply_fs(&c, doc, key, true) < 0)) {
				r = conf_err(&c, gs);
				goto out;
			}
			cJSON_Delete(doc);
			doc = NULL;
		}
	}
	if (cap_fstype && *cap_fstype) {
		/* csi-provisioner strips csi.storage.k8s.io/fstype from the parameters and sends it
		 * as the capability's mount.fs_type: both are the StorageClass's fstype (layer 1) */
		if (p.fstype && *p.fstype && strcmp(p.fstype, cap_fstype)) {
			r = gfail(gs, GRPC_INVALID_ARGUMENT,
			          "csi.storage.k8s.io/fstype \"%s\" does not match the volume "
			          "capability's fs_type \"%s\"",
			          p.fstype, cap_fstype);
			goto out;
		}
		p.fstype = cap_fstype;
	}
	if (p.fstype && *p.fstype && !block) {
		if (c.fstype_l1 && strcmp(c.fstype, p.fstype)) {
			r = gfail(
			    gs, GRPC_INVALID_ARGUMENT,
			    "csi.storage.k8s.io/fstype \"%s\" does not match filesystem fsType "
			    "\"%s\"",
			    p.fstype, c.fstype);
			goto out;
		}
		if (strcmp(p.fstype, "ext4") && strcmp(p.fstype, "xfs")) {
			r = gfail(gs, GRPC_INVALID_ARGUMENT,
			          "csi.storage.k8s.io/fstype \"%s\" is not supported (ext4 or xfs)",
			          p.fstype);
			goto out;
		}
		cpy(c.fstype, sizeof(c.fstype), p.fstype);
	}
	/* layer 2: PVC annotations */
	if (p.pvc_name && *p.pvc_name && p.pvc_ns && *p.pvc_ns) {
		cpy(out->pvc_name, sizeof(out->pvc_name), p.pvc_name);
		cpy(out->pvc_ns, sizeof(out->pvc_ns), p.pvc_ns);
		struct err e = {0};
		int g = store_get(st, store_kind_lookup("PersistentVolumeClaim"), p.pvc_ns,
		                  p.pvc_name, &pvc, &e);
		if (g < 0 && g != STORE_NOT_FOUND) {
			r = gfail(gs, GRPC_UNAVAILABLE, "reading PersistentVolumeClaim %s/%s: %s",
			          p.pvc_ns, p.pvc_name, e.msg);
			goto out;
		}
	}
	if (pvc) {
		cpy(out->pvc_uid, sizeof(out->pvc_uid), store_meta_str(pvc, "uid"));
		const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(pvc, "metadata"), "annotations");
		const cJSON *it;
		const char *docs[3] = {NULL, NULL, NULL};
		cJSON_ArrayForEach(it, ann)
		{
			if (strncmp(it->string, RULES_KEY_PREFIX, strlen(RULES_KEY_PREFIX)))
				continue;
			const char *s = it->string + strlen(RULES_KEY_PREFIX);
			int i = !strcmp(s, "backend")      ? 0
			        : !strcmp(s, "protocol")   ? 1
			        : !strcmp(s, "filesystem") ? 2
			                                   : -1;
			if (i < 0) {
				r = gfail(gs, GRPC_INVALID_ARGUMENT,
				          "unsupported PVC annotation \"%s\"", it->string);
				goto out;
			}
			docs[i] = cJSON_IsString(it) ? it->valuestring : "";
		}
		if (docs[2] && block) {
			r = gfail(gs, GRPC_INVALID_ARGUMENT,
			          RULES_KEY_PREFIX
			          "filesystem: filesystem settings do not apply to a "
			          "Block volume");
			goto out;
		}
		for (int i = 0; i < 3; i++) {
			if (!docs[i])
				continue;
			snprintf(key, sizeof(key), "%s%s", RULES_KEY_PREFIX, sc_keys[i + 3]);
			if (parse_doc(&c, key, docs[i], (enum axis)i, &doc) < 0 ||
			    (i == 0 && apply_backend(&c, doc, key) < 0) ||
			    (i == 1 && apply_protocol(&c, doc, key) < 0) ||
			    (i == 2 && apply_fs(&c, doc, key, false) < 0)) {
				r = conf_err(&c, gs);
				goto out;
			}
			cJSON_Delete(doc);
			doc = NULL;
		}
	}
	if (post_checks(&c, out->store, block) < 0) {
		r = conf_err(&c, gs);
		goto out;
	}
	if ((r = layout_check(st, &c, out->store, out->agent, gs)) != 0)
		goto out;
	cpy(out->backend_type, sizeof(out->backend_type), bk_token(c.bk));
	cpy(out->pool, sizeof(out->pool), c.pool);
	out->resolved = conf_json(&c, block);
	r = out->resolved ? GRPC_OK : gfail(gs, GRPC_INTERNAL, "out of memory");
out:
	conf_free(&c);
	cJSON_Delete(doc);
	cJSON_Delete(psc);
	cJSON_Delete(pst);
	cJSON_Delete(pstr);
	cJSON_Delete(pvc);
	return r;
}

void resolve_out_clear(struct resolve_out *o)
{
	if (!o)
		return;
	cJSON_Delete(o->resolved);
	o->resolved = NULL;
}

int resolve_psc_compatible(const cJSON *psc, const cJSON *pst, const cJSON *pstr, char *reason,
                           size_t rcap, char *msg, size_t mcap)
{
	struct conf c;
	int r = 0;
	conf_init(&c);
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(psc, "spec");
	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(spec, "overrides");
	const char *sname = store_meta_str(pst, "name") ?: "";
	if (base_store(&c, pst, sname) < 0 ||
	    base_protocol(&c, pstr, store_meta_str(pstr, "name") ?: "") < 0 ||
	    apply_backend(&c, cJSON_GetObjectItemCaseSensitive(ov, "backend"), NULL) < 0 ||
	    apply_protocol(&c, cJSON_GetObjectItemCaseSensitive(ov, "protocol"), NULL) < 0 ||
	    apply_fs(&c, cJSON_GetObjectItemCaseSensitive(spec, "filesystem"), NULL, true) < 0)
		r = -EINVAL;
	if (r == 0) {
		c.mode_key[0] = 0; /* the Compatible message carries no key */
		r = post_checks(&c, sname, false);
	}
	if (r < 0) {
		snprintf(reason, rcap, "%s", c.reason);
		snprintf(msg, mcap, "%s", c.msg);
	}
	conf_free(&c);
	return r;
}

/* ---- volume context (csi.md §3) ------------------------------------------------------------- */

static void add_json_list(cJSON *ctx, const char *key, const cJSON *list)
{
	if (cJSON_GetArraySize(list) <= 0)
		return;
	char *t = cJSON_PrintUnformatted(list);
	if (t)
		cJSON_AddStringToObject(ctx, key, t);
	free(t);
}

cJSON *resolve_volume_context(const cJSON *pvst)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pvst, "spec");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(pvst, "status");
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(spec, "resolved");
	const cJSON *ei = cJSON_GetObjectItemCaseSensitive(status, "exportInfo");
	const cJSON *es = cJSON_GetObjectItemCaseSensitive(status, "exportSpec");
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(res, "protocol"), "nvmeofTcp");
	const cJSON *fs = cJSON_GetObjectItemCaseSensitive(res, "filesystem");
	cJSON *ctx = cJSON_CreateObject();
	char buf[32];
	long long v;

	if (!ctx)
		return NULL;
	cJSON_AddStringToObject(ctx, "target_id", json_str(ei, "targetID") ?: "");
	const char *addr = json_str(ei, "address");
	if (!addr || !*addr)
		addr = json_str(es, "bindAddress") ?: "";
	cJSON_AddStringToObject(ctx, "address", addr);
	if (resolve_get_int(ei, "port", &v) != 0 || v == 0)
		if (resolve_get_int(n, "port", &v) != 0)
			v = 4420;
	snprintf(buf, sizeof(buf), "%lld", v);
	cJSON_AddStringToObject(ctx, "port", buf);
	cJSON_AddStringToObject(ctx, RULES_CTX_PROTOCOL_TYPE, "nvmeof-tcp");
	const char *ref = json_str(ei, "volumeRef");
	cJSON_AddStringToObject(ctx, RULES_CTX_VOLUME_REF, ref && *ref ? ref : "1");
	static const char *const ctx_key[4] = {RULES_CTX_MAX_QUEUE_SIZE, NULL,
	                                       RULES_CTX_CTRL_LOSS_TMO, RULES_CTX_RECONNECT_DELAY};
	for (int i = 0; i < 4; i++) {
		if (!ctx_key[i] || resolve_get_int(n, tun_name[i], &v) != 0)
			continue;
		snprintf(buf, sizeof(buf), "%lld", v);
		cJSON_AddStringToObject(ctx, ctx_key[i], buf);
	}
	if (fs) {
		cJSON_AddStringToObject(ctx, RULES_CTX_FS_TYPE, json_str(fs, "fsType") ?: "ext4");
		add_json_list(ctx, RULES_CTX_MKFS_OPTIONS,
		              cJSON_GetObjectItemCaseSensitive(fs, "mkfsOptions"));
		add_json_list(ctx, RULES_CTX_MOUNT_OPTIONS,
		              cJSON_GetObjectItemCaseSensitive(fs, "mountOptions"));
	}
	return ctx;
}
