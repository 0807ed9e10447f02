/* resolve_conf — the merge rules of crds.md §11 over the typed configuration axes: layer 0 from
 * the PillarStore and PillarProtocol, layers 1 and 2 from overrides and documents, and the
 * checks after merging (§12.1, §13).  Messages are those of §13. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "controller/resolve.h"
#include "rules/conditions.h"
#include "rules/mkfs.h"

static int cfail(struct resolve_conf *c, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int cfail(struct resolve_conf *c, const char *reason, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	c->code = GRPC_INVALID_ARGUMENT;
	snprintf(c->reason, sizeof(c->reason), "%s", reason ? reason : "");
	return -EINVAL;
}

static int oom(struct resolve_conf *c)
{
	cfail(c, "", "out of memory");
	c->code = GRPC_INTERNAL;
	return -EINVAL;
}

static const char *const bk_tokens[] = {"none", "zfs-zvol", "lvm-lv", "file"};
static const char *const bk_members[] = {"none", "zfs", "lvm", "file"};

const char *resolve_conf_backend(const struct resolve_conf *c)
{
	return bk_tokens[c->bk];
}

const char *resolve_conf_pool(const struct resolve_conf *c)
{
	const struct model_backend *b = &c->r.backend;
	const char *p = c->bk == RESOLVE_BK_ZFS   ? b->zfs.pool
	                : c->bk == RESOLVE_BK_LVM ? b->lvm.volume_group
	                                          : b->file.pool;
	return p ? p : "";
}

void resolve_conf_init(struct resolve_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->r.has_backend = c->r.has_protocol = true;
	c->r.protocol.has_nvmeof_tcp = true;
}

void resolve_conf_clear(struct resolve_conf *c)
{
	model_type_clear(&model_resolved_type, &c->r);
}

/* "" → NULL: empty optional strings are not written. */
static int set_opt(char **dst, const char *s)
{
	return model_str_set(dst, s && *s ? s : NULL);
}

/* ---- layer 0 ----------------------------------------------------------------------------------- */

static int base_zfs(struct resolve_conf *c, const struct model_zfs *z)
{
	struct model_zfs *o = &c->r.backend.zfs;
	c->bk = RESOLVE_BK_ZFS;
	c->r.backend.has_zfs = true;
	if (set_opt(&o->pool, z->pool) < 0 || set_opt(&o->parent_dataset, z->parent_dataset) < 0 ||
	    model_str_set(&o->volume_type, model_zfs_volume_type(z)) < 0 ||
	    model_map_copy(&o->properties, &z->properties) < 0)
		return oom(c);
	return 0;
}

static int base_lvm(struct resolve_conf *c, const struct model_lvm *l, const char *name)
{
	struct model_lvm *o = &c->r.backend.lvm;
	c->bk = RESOLVE_BK_LVM;
	c->r.backend.has_lvm = true;
	if (set_opt(&o->volume_group, l->volume_group) < 0 ||
	    set_opt(&o->thin_pool, l->thin_pool) < 0 ||
	    model_str_set(&o->provisioning_mode, model_lvm_mode(l)) < 0)
		return oom(c);
	snprintf(c->mode_key, sizeof(c->mode_key), "PillarStore \"%s\"", name);
	return 0;
}

int resolve_base_store(struct resolve_conf *c, const struct model_pst *pst, const char *name)
{
	const struct model_backend *b = &pst->spec.backend;
	int r;
	if (b->has_zfs + b->has_lvm + b->has_file != 1)
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
		             "PillarStore \"%s\": spec.backend must set exactly one of zfs or lvm",
		             name);
	if (b->has_zfs) {
		r = base_zfs(c, &b->zfs);
	} else if (b->has_lvm) {
		r = base_lvm(c, &b->lvm, name);
	} else {
		c->bk = RESOLVE_BK_FILE;
		c->r.backend.has_file = true;
		c->r.backend.file.has_preallocate = b->file.has_preallocate;
		c->r.backend.file.preallocate = b->file.preallocate;
		r = set_opt(&c->r.backend.file.pool, b->file.pool) < 0 ? oom(c) : 0;
	}
	if (r == 0 && !resolve_conf_pool(c)[0])
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
		             "PillarStore \"%s\": spec.backend.%s names no pool", name,
		             bk_members[c->bk]);
	return r;
}

/* dhchap is recorded with every member resolved (defaults filled in), so that the volume keeps
 * the settings it was created with. */
static int resolve_dhchap(struct resolve_conf *c, const struct model_nvmeof_tcp *n,
                          const char *name)
{
	struct model_dhchap *o = &c->r.protocol.nvmeof_tcp.dhchap;
	struct err e = {0};
	if (model_nvmeof_tcp_validate(n, "", &e) < 0)
		return cfail(c, RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH,
		             "PillarProtocol \"%s\": %s", name, e.msg);
	c->r.protocol.nvmeof_tcp.has_dhchap = true;
	o->has_bidirectional = true;
	o->bidirectional = model_dhchap_bidirectional(&n->dhchap);
	if (model_str_set(&o->hash, model_dhchap_hash(&n->dhchap)) < 0 ||
	    model_str_set(&o->dh_group, model_dhchap_dh_group(&n->dhchap)) < 0)
		return oom(c);
	return 0;
}

int resolve_base_protocol(struct resolve_conf *c, const struct model_pstr *pstr, const char *name)
{
	const struct model_protocol *p = &pstr->spec.protocol;
	struct model_nvmeof_tcp *o = &c->r.protocol.nvmeof_tcp;
	if (!p->has_nvmeof_tcp || model_unknown_count(&model_protocol_type, p) != 0)
		return cfail(c, RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH,
		             "PillarProtocol \"%s\": spec.protocol must set exactly one member "
		             "(nvmeofTcp)",
		             name);
	const struct model_nvmeof_tcp *n = &p->nvmeof_tcp;
	int64_t port = model_nvmeof_tcp_port(n);
	if (port < 1 || port > 65535)
		return cfail(c, RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH,
		             "PillarProtocol \"%s\": nvmeofTcp.port must be between 1 and 65535",
		             name);
	/* port and acl are always recorded; the tunables only when set */
	*o = (struct model_nvmeof_tcp){.has_port = true, .port = port, .has_acl = true};
	o->acl = n->has_acl && n->acl;
	if (n->has_delete_pods_after_ctrl_loss && n->delete_pods_after_ctrl_loss) /* only when on */
		o->has_delete_pods_after_ctrl_loss = o->delete_pods_after_ctrl_loss = true;
	for (int i = 0; i < MODEL_TUNABLES; i++) {
		const struct model_tunable *t = &model_tunables[i];
		*(bool *)((char *)o + t->has_off) = *(const bool *)((const char *)n + t->has_off);
		*(int64_t *)((char *)o + t->off) = *(const int64_t *)((const char *)n + t->off);
	}
	return n->has_dhchap ? resolve_dhchap(c, n, name) : 0;
}

/* ---- overrides and documents (layers 1 and 2) --------------------------------------------------- */

/* "<key>: " or "" */
static const char *pfx(const char *key, char *buf, size_t cap)
{
	if (!key)
		buf[0] = 0;
	else
		snprintf(buf, cap, "%s: ", key);
	return buf;
}

/* The structural field a backend member sets, or NULL. */
static const char *structural_backend(int mb, const struct model_backend *d)
{
	if (mb == RESOLVE_BK_ZFS)
		return d->zfs.pool             ? "pool"
		       : d->zfs.parent_dataset ? "parentDataset"
		       : d->zfs.volume_type    ? "volumeType"
		                               : NULL;
	if (mb == RESOLVE_BK_LVM)
		return d->lvm.volume_group ? "volumeGroup" : d->lvm.thin_pool ? "thinPool" : NULL;
	return d->file.pool ? "pool" : NULL;
}

/* The member of a backend override: which one, and that its fields may be set per volume. */
static int backend_member(struct resolve_conf *c, const struct model_backend *d, const char *p,
                          int *mb)
{
	const char *u = model_unknown_first(&model_backend_type, d);
	if (u)
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH, "%sunknown field \"%s\"", p,
		             u);
	int n = d->has_zfs + d->has_lvm + d->has_file;
	if (n > 1)
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
		             "%sthe backend document must set at most one of zfs or lvm", p);
	*mb = d->has_zfs    ? RESOLVE_BK_ZFS
	      : d->has_lvm  ? RESOLVE_BK_LVM
	      : d->has_file ? RESOLVE_BK_FILE
	                    : RESOLVE_BK_NONE;
	if (*mb == RESOLVE_BK_NONE)
		return 0;
	const char *mn = bk_members[*mb], *f = structural_backend(*mb, d);
	if (f)
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
		             "%s%s.%s is structural and cannot be set per volume", p, mn, f);
	const struct model_type *t = *mb == RESOLVE_BK_ZFS   ? &model_zfs_type
	                             : *mb == RESOLVE_BK_LVM ? &model_lvm_type
	                                                     : &model_file_type;
	const void *m = *mb == RESOLVE_BK_ZFS   ? (const void *)&d->zfs
	                : *mb == RESOLVE_BK_LVM ? (const void *)&d->lvm
	                                        : (const void *)&d->file;
	if ((u = model_unknown_first(t, m)))
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH, "%sunknown field \"%s.%s\"",
		             p, mn, u);
	if (*mb != (int)c->bk)
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
		             "%s%s overrides do not apply to a %s backend", p, mn,
		             bk_tokens[c->bk]);
	return 0;
}

static int override_zfs(struct resolve_conf *c, const struct model_zfs *z, const char *p)
{
	struct model_map *props = &c->r.backend.zfs.properties;
	if (!z->has_properties)
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
		             "%szfs.properties must be a mapping of strings", p);
	if (model_map_get(&z->properties, "volsize"))
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
		             "%szfs.properties: volsize is managed by the volume capacity", p);
	for (size_t i = 0; i < z->properties.n; i++) {
		const struct model_kv *kv = &z->properties.kv[i];
		/* an overridden key moves to the end, as the layer that set it last */
		if (model_map_set(props, kv->key, NULL) < 0 ||
		    model_map_set(props, kv->key, kv->value) < 0)
			return oom(c);
	}
	return 0;
}

int resolve_apply_backend(struct resolve_conf *c, const struct model_backend *doc, const char *key)
{
	char p[320];
	int mb, r;
	pfx(key, p, sizeof(p));
	if (!doc || (r = backend_member(c, doc, p, &mb)) < 0 || mb == RESOLVE_BK_NONE)
		return doc ? r : 0;
	if (mb == RESOLVE_BK_ZFS)
		return override_zfs(c, &doc->zfs, p);
	if (mb == RESOLVE_BK_LVM) {
		const char *m = doc->lvm.provisioning_mode;
		if (!m || (strcmp(m, "linear") && strcmp(m, "thin")))
			return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
			             "%slvm.provisioningMode must be linear or thin", p);
		if (model_str_set(&c->r.backend.lvm.provisioning_mode, m) < 0)
			return oom(c);
		snprintf(c->mode_key, sizeof(c->mode_key), "%s", key ? key : "");
		return 0;
	}
	if (!doc->file.has_preallocate)
		return cfail(c, RULES_REASON_BACKEND_OVERRIDE_MISMATCH,
		             "%sfile.preallocate must be true or false", p);
	c->r.backend.file.has_preallocate = true;
	c->r.backend.file.preallocate = doc->file.preallocate;
	return 0;
}

int resolve_apply_protocol(struct resolve_conf *c, const struct model_protocol *doc,
                           const char *key)
{
	char p[320];
	struct err e = {0};
	pfx(key, p, sizeof(p));
	if (!doc)
		return 0;
	const char *u = model_unknown_first(&model_protocol_type, doc);
	if (u)
		return cfail(c, RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH, "%sunknown field \"%s\"",
		             p, u);
	if (!doc->has_nvmeof_tcp)
		return 0;
	const struct model_nvmeof_tcp *n = &doc->nvmeof_tcp;
	if (n->has_port || n->has_acl || n->has_delete_pods_after_ctrl_loss || n->has_dhchap)
		return cfail(c, RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH,
		             "%snvmeofTcp.%s is structural and cannot be set per volume", p,
		             n->has_port     ? "port"
		             : n->has_acl    ? "acl"
		             : n->has_dhchap ? "dhchap"
		                             : "deletePodsAfterCtrlLoss");
	if ((u = model_unknown_first(&model_nvmeof_tcp_type, n)))
		return cfail(c, RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH,
		             "%sunknown field \"nvmeofTcp.%s\"", p, u);
	for (int i = 0; i < MODEL_TUNABLES; i++) {
		const struct model_tunable *t = &model_tunables[i];
		if (!*(const bool *)((const char *)n + t->has_off))
			continue;
		int64_t v = *(const int64_t *)((const char *)n + t->off);
		if (model_tunable_check(t, v, p, &e) < 0)
			return cfail(c, RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH, "%s", e.msg);
		*(bool *)((char *)&c->r.protocol.nvmeof_tcp + t->has_off) = true;
		*(int64_t *)((char *)&c->r.protocol.nvmeof_tcp + t->off) = v;
	}
	return 0;
}

int resolve_apply_fs(struct resolve_conf *c, const struct model_filesystem *doc, const char *key,
                     bool layer1)
{
	char p[320];
	struct model_filesystem *o = &c->r.filesystem;
	pfx(key, p, sizeof(p));
	if (!doc)
		return 0;
	const char *u = model_unknown_first(&model_filesystem_type, doc);
	if (u)
		return cfail(c, RULES_REASON_INVALID_FILESYSTEM, "%sunknown field \"%s\"", p, u);
	if (doc->fs_type) {
		if (!rules_fstype_supported(doc->fs_type))
			return cfail(c, RULES_REASON_INVALID_FILESYSTEM,
			             "%sfsType must be ext4 or xfs", p);
		if (model_str_set(&o->fs_type, doc->fs_type) < 0)
			return oom(c);
		c->fstype_l1 |= layer1;
	}
	if (doc->has_mkfs_options) {
		o->has_mkfs_options = true;
		if (model_strs_copy(&o->mkfs_options, &doc->mkfs_options) < 0)
			return oom(c);
	}
	if (doc->has_mount_options) {
		o->has_mount_options = true;
		if (model_strs_copy(&o->mount_options, &doc->mount_options) < 0)
			return oom(c);
	}
	return 0;
}

int resolve_post_checks(struct resolve_conf *c, const char *store_name, bool block)
{
	const struct model_lvm *l = &c->r.backend.lvm;
	if (c->bk == RESOLVE_BK_LVM && !strcmp(l->provisioning_mode, "thin") && !l->thin_pool)
		return cfail(c, RULES_REASON_THIN_POOL_REQUIRED,
		             "%s%slvm.provisioningMode thin requires PillarStore \"%s\" to set "
		             "lvm.thinPool",
		             c->mode_key, c->mode_key[0] ? ": " : "", store_name);
	if (!block) {
		const struct model_filesystem *f = &c->r.filesystem;
		struct err e = {0};
		size_t bad;
		if (rules_mkfs_check(f->fs_type ? f->fs_type : RULES_FS_DEFAULT,
		                     (const char *const *)f->mkfs_options.v, f->mkfs_options.n,
		                     &bad, &e) < 0)
			return cfail(c, RULES_REASON_INVALID_FILESYSTEM, "%s", e.msg);
	}
	return 0;
}
