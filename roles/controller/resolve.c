/* resolve — a volume's effective configuration for CreateVolume: StorageClass parameters, the
 * referenced objects, PVC annotations and the volume context (crds.md §9–§13, csi.md §3).  The
 * merge rules themselves are resolve_conf.c. */
#include "controller/resolve.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "model/docs.h"
#include "model/kube.h"
#include "rules/mkfs.h"
#include "rules/volid.h"

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

static void cpy(char *dst, size_t cap, const char *s)
{
	str_copy(dst, cap, s ? s : "");
}

static int conf_err(const struct resolve_conf *c, struct grpc_status *gs)
{
	return gfail(gs, c->code, "%s", c->msg);
}

/* Reads a cluster-scoped object; NOT_FOUND with "<Kind> "<n>" (named via <via>) not found". */
static int lookup(store *st, const struct model_kind *k, const char *name, const char *via,
                  void *out, struct grpc_status *gs)
{
	struct err e = {0};
	int r = model_get(st, k, NULL, name, out, &e);
	if (r == STORE_NOT_FOUND || (r == STORE_INVALID && *name == 0))
		return gfail(gs, GRPC_NOT_FOUND, "%s \"%s\" (named via %s) not found", k->kind,
		             name, via);
	if (r < 0)
		return gfail(gs, GRPC_UNAVAILABLE, "reading %s \"%s\": %s", k->kind, name, e.msg);
	return 0;
}

/* ---- StorageClass parameters (§9) --------------------------------------------------------------- */

struct params {
	const char *psc, *store_ref, *protocol_ref;      /* pillar-csi.bhyoo.com/... */
	const char *backend_doc, *protocol_doc, *fs_doc; /* documents of a hand-written SC */
	const char *fstype, *pvc_name, *pvc_ns;          /* csi.storage.k8s.io/... */
};

static const struct {
	const char *key; /* after the pillar-csi.bhyoo.com/ prefix */
	size_t off;
} pillar_params[] = {
    {"storage-class", offsetof(struct params, psc)},
    {"store-ref", offsetof(struct params, store_ref)},
    {"protocol-ref", offsetof(struct params, protocol_ref)},
    {"backend", offsetof(struct params, backend_doc)},
    {"protocol", offsetof(struct params, protocol_doc)},
    {"filesystem", offsetof(struct params, fs_doc)},
};
#define N_PILLAR_PARAMS (sizeof(pillar_params) / sizeof(pillar_params[0]))
#define PARAM(p, i)     (*(const char **)((char *)(p) + pillar_params[i].off))

/* A csi.storage.k8s.io/ key: the three that are read; the others are ignored. */
static void read_csi_param(struct params *p, const char *k, const char *v)
{
	if (!strcmp(k, "fstype"))
		p->fstype = v;
	else if (!strcmp(k, "pvc/name"))
		p->pvc_name = v;
	else if (!strcmp(k, "pvc/namespace"))
		p->pvc_ns = v;
}

static int read_pillar_param(struct params *p, const char *k, const char *v, struct grpc_status *gs)
{
	size_t n = strlen(RULES_KEY_PREFIX);
	for (size_t i = 0; !strncmp(k, RULES_KEY_PREFIX, n) && i < N_PILLAR_PARAMS; i++)
		if (!strcmp(k + n, pillar_params[i].key)) {
			PARAM(p, i) = v;
			return 0;
		}
	return gfail(gs, GRPC_INVALID_ARGUMENT, "unsupported StorageClass parameter \"%s\"", k);
}

static int read_params(const struct model_map *params, struct params *p, struct grpc_status *gs)
{
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < params->n; i++) {
		const char *k = params->kv[i].key, *v = params->kv[i].value;
		int r;
		if (!strncmp(k, "csi.storage.k8s.io/", 19))
			read_csi_param(p, k + 19, v);
		else if ((r = read_pillar_param(p, k, v, gs)) != 0)
			return r;
	}
	if (p->psc) { /* a generated StorageClass: no other pillar-csi key */
		for (size_t i = 1; i < N_PILLAR_PARAMS; i++)
			if (PARAM(p, i))
				return gfail(gs, GRPC_INVALID_ARGUMENT,
				             "unsupported StorageClass parameter \"%s%s\"",
				             RULES_KEY_PREFIX, pillar_params[i].key);
		return 0;
	}
	for (size_t i = 1; i < 3; i++) /* store-ref, protocol-ref */
		if (!PARAM(p, i) || !*PARAM(p, i))
			return gfail(gs, GRPC_INVALID_ARGUMENT,
			             "StorageClass parameter \"%s%s\" is required",
			             RULES_KEY_PREFIX, pillar_params[i].key);
	return 0;
}

/* ---- the layers ------------------------------------------------------------------------------- */

/* The objects a CreateVolume reads. */
struct inputs {
	struct params p;
	struct model_psc psc;
	struct model_pst pst;
	struct model_pstr pstr;
	struct model_pvc pvc;
	bool have_psc, have_pvc;
	bool block;
};

static void inputs_clear(struct inputs *in)
{
	model_clear(&model_psc_kind, &in->psc);
	model_clear(&model_pst_kind, &in->pst);
	model_clear(&model_pstr_kind, &in->pstr);
	model_clear(&model_pvc_kind, &in->pvc);
}

/* The PillarStorageClass (when named), PillarStore and PillarProtocol. */
static int read_objects(store *st, struct inputs *in, struct resolve_out *out,
                        struct grpc_status *gs)
{
	char via[300];
	int r;
	if (in->p.psc) {
		cpy(out->psc, sizeof(out->psc), in->p.psc);
		if ((r = lookup(st, &model_psc_kind, in->p.psc, RULES_KEY_PREFIX "storage-class",
		                &in->psc, gs)) != 0)
			return r;
		in->have_psc = true;
		cpy(out->store, sizeof(out->store), in->psc.spec.store_ref);
		cpy(out->protocol, sizeof(out->protocol), in->psc.spec.protocol_ref);
		snprintf(via, sizeof(via), "PillarStorageClass \"%s\"", in->p.psc);
	} else {
		cpy(out->store, sizeof(out->store), in->p.store_ref);
		cpy(out->protocol, sizeof(out->protocol), in->p.protocol_ref);
	}
	if ((r = lookup(st, &model_pst_kind, out->store,
	                in->p.psc ? via : RULES_KEY_PREFIX "store-ref", &in->pst, gs)) != 0)
		return r;
	return lookup(st, &model_pstr_kind, out->protocol,
	              in->p.psc ? via : RULES_KEY_PREFIX "protocol-ref", &in->pstr, gs);
}

/* One document string of layer 1 or 2 onto the configuration. */
static int apply_doc(struct resolve_conf *c, const char *key, const char *text, int axis,
                     bool layer1)
{
	static const struct model_type *const types[3] = {&model_backend_type, &model_protocol_type,
	                                                  &model_filesystem_type};
	union {
		struct model_backend b;
		struct model_protocol p;
		struct model_filesystem f;
	} doc;
	struct err e = {0};
	int r;
	if (model_doc_decode(types[axis], key, text, &doc, &e) < 0) {
		snprintf(c->msg, sizeof(c->msg), "%s", e.msg);
		c->code = e.code == -ENOMEM ? GRPC_INTERNAL : GRPC_INVALID_ARGUMENT;
		c->reason[0] = 0;
		return -EINVAL;
	}
	r = axis == 0   ? resolve_apply_backend(c, &doc.b, key)
	    : axis == 1 ? resolve_apply_protocol(c, &doc.p, key)
	                : resolve_apply_fs(c, &doc.f, key, layer1);
	model_type_clear(types[axis], &doc);
	return r;
}

/* Layer 1: the PillarStorageClass's overrides and filesystem, or the hand-written
 * StorageClass's documents. */
static int layer1(struct resolve_conf *c, const struct inputs *in)
{
	char key[320];
	if (in->have_psc) {
		const __typeof__(in->psc.spec) *s = &in->psc.spec;
		snprintf(key, sizeof(key), "PillarStorageClass \"%s\"", in->p.psc);
		if (resolve_apply_backend(
		        c, s->overrides.has_backend ? &s->overrides.backend : NULL, key) < 0 ||
		    resolve_apply_protocol(
		        c, s->overrides.has_protocol ? &s->overrides.protocol : NULL, key) < 0 ||
		    (!in->block &&
		     resolve_apply_fs(c, s->has_filesystem ? &s->filesystem : NULL, key, true) < 0))
			return -EINVAL;
		return 0;
	}
	const char *docs[3] = {in->p.backend_doc, in->p.protocol_doc, in->p.fs_doc};
	for (int i = 0; i < 3; i++) {
		if (!docs[i] || (i == 2 && in->block))
			continue;
		snprintf(key, sizeof(key), "%s%s", RULES_KEY_PREFIX, pillar_params[3 + i].key);
		if (apply_doc(c, key, docs[i], i, true) < 0)
			return -EINVAL;
	}
	return 0;
}

/* csi.storage.k8s.io/fstype and the capability's fs_type (layer 1 of the filesystem). */
static int sc_fstype(struct resolve_conf *c, struct inputs *in, const char *cap_fstype,
                     struct grpc_status *gs)
{
	const char *f = in->p.fstype;
	if (cap_fstype && *cap_fstype) {
		/* csi-provisioner strips csi.storage.k8s.io/fstype from the parameters and sends it
		 * as the capability's mount.fs_type: both are the StorageClass's fstype (layer 1) */
		if (f && *f && strcmp(f, cap_fstype))
			return gfail(gs, GRPC_INVALID_ARGUMENT,
			             "csi.storage.k8s.io/fstype \"%s\" does not match the volume "
			             "capability's fs_type \"%s\"",
			             f, cap_fstype);
		f = cap_fstype;
	}
	if (!f || !*f || in->block)
		return 0;
	const char *cur = c->r.filesystem.fs_type ? c->r.filesystem.fs_type : RULES_FS_DEFAULT;
	if (c->fstype_l1 && strcmp(cur, f))
		return gfail(gs, GRPC_INVALID_ARGUMENT,
		             "csi.storage.k8s.io/fstype \"%s\" does not match filesystem fsType "
		             "\"%s\"",
		             f, cur);
	if (!rules_fstype_supported(f))
		return gfail(gs, GRPC_INVALID_ARGUMENT,
		             "csi.storage.k8s.io/fstype \"%s\" is not supported (ext4 or xfs)", f);
	return model_str_set(&c->r.filesystem.fs_type, f) < 0
	           ? gfail(gs, GRPC_RESOURCE_EXHAUSTED, "out of memory")
	           : 0;
}

/* The PVC named by the provisioner's extra metadata, when it exists. */
static int read_pvc(store *st, struct inputs *in, struct resolve_out *out, struct grpc_status *gs)
{
	const char *n = in->p.pvc_name, *ns = in->p.pvc_ns;
	struct err e = {0};
	if (!n || !*n || !ns || !*ns)
		return 0;
	cpy(out->pvc_name, sizeof(out->pvc_name), n);
	cpy(out->pvc_ns, sizeof(out->pvc_ns), ns);
	int g = model_get(st, &model_pvc_kind, ns, n, &in->pvc, &e);
	if (g < 0 && g != STORE_NOT_FOUND)
		return gfail(gs, GRPC_UNAVAILABLE, "reading PersistentVolumeClaim %s/%s: %s", ns, n,
		             e.msg);
	in->have_pvc = g == 0;
	if (in->have_pvc)
		cpy(out->pvc_uid, sizeof(out->pvc_uid), in->pvc.meta.uid);
	return 0;
}

/* Layer 2: the PVC annotations (crds.md §10). */
static int layer2(struct resolve_conf *c, const struct inputs *in, struct grpc_status *gs)
{
	const char *docs[3] = {NULL, NULL, NULL};
	const struct model_map *ann = &in->pvc.meta.annotations;
	size_t n = strlen(RULES_KEY_PREFIX);
	char key[320];
	for (size_t i = 0; i < ann->n; i++) {
		const char *k = ann->kv[i].key;
		if (strncmp(k, RULES_KEY_PREFIX, n))
			continue;
		int a = !strcmp(k + n, "backend")      ? 0
		        : !strcmp(k + n, "protocol")   ? 1
		        : !strcmp(k + n, "filesystem") ? 2
		                                       : -1;
		if (a < 0)
			return gfail(gs, GRPC_INVALID_ARGUMENT, "unsupported PVC annotation \"%s\"",
			             k);
		docs[a] = ann->kv[i].value;
	}
	if (docs[2] && in->block)
		return gfail(gs, GRPC_INVALID_ARGUMENT,
		             RULES_KEY_PREFIX "filesystem: filesystem settings do not apply to a "
		                              "Block volume");
	for (int i = 0; i < 3; i++) {
		if (!docs[i])
			continue;
		snprintf(key, sizeof(key), "%s%s", RULES_KEY_PREFIX, pillar_params[3 + i].key);
		if (apply_doc(c, key, docs[i], i, false) < 0)
			return conf_err(c, gs);
	}
	return 0;
}

/* FAILED_PRECONDITION when the agent reports the store's pool with another layout. */
static int layout_check(store *st, const struct resolve_conf *c, const char *store_name,
                        const char *agent, struct grpc_status *gs)
{
	struct model_pa pa;
	const char *pool = resolve_conf_pool(c);
	int r = 0;
	if (model_get(st, &model_pa_kind, NULL, agent, &pa, NULL) < 0)
		return 0; /* the provisioning step reports a missing agent */
	for (size_t i = 0; i < pa.status.n_pools; i++) {
		const struct model_pa_pool *it = &pa.status.pools[i];
		if (!it->name || strcmp(it->name, pool))
			continue;
		const char *field = NULL, *ours = NULL, *theirs = NULL;
		if (c->bk == RESOLVE_BK_ZFS) {
			field = "parentDataset";
			ours = c->r.backend.zfs.parent_dataset;
			theirs = it->parent_dataset;
		} else if (c->bk == RESOLVE_BK_LVM) {
			field = "thinPool";
			ours = c->r.backend.lvm.thin_pool;
			theirs = it->thin_pool;
		}
		if (field && strcmp(ours ?: "", theirs ?: ""))
			r = gfail(
			    gs, GRPC_FAILED_PRECONDITION,
			    "PillarStore \"%s\" does not match agent \"%s\": %s \"%s\" vs agent "
			    "config \"%s\"",
			    store_name, agent, field, ours ?: "", theirs ?: "");
		break;
	}
	model_clear(&model_pa_kind, &pa);
	return r;
}

/* The merged configuration into out (the filesystem axis with its defaults, unless Block). */
static void finish(struct resolve_conf *c, bool block, struct resolve_out *out)
{
	struct model_filesystem *f = &c->r.filesystem;
	cpy(out->backend_type, sizeof(out->backend_type), resolve_conf_backend(c));
	cpy(out->pool, sizeof(out->pool), resolve_conf_pool(c));
	struct model_zfs *z = &c->r.backend.zfs;
	z->has_properties = z->properties.n > 0;
	if (block) {
		model_type_clear(&model_filesystem_type, f);
	} else {
		c->r.has_filesystem = f->has_mkfs_options = f->has_mount_options = true;
		if (!f->fs_type)
			model_str_set(&f->fs_type, RULES_FS_DEFAULT); /* checked below */
	}
	out->resolved = c->r;
	memset(&c->r, 0, sizeof(c->r));
}

int resolve_volume(store *st, const struct model_map *params, bool block, const char *cap_fstype,
                   struct resolve_out *out, struct grpc_status *gs)
{
	struct inputs in = {.block = block};
	struct resolve_conf c;
	int r;

	memset(out, 0, sizeof(*out));
	resolve_conf_init(&c);
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if ((r = read_params(params, &in.p, gs)) != 0 || (r = read_objects(st, &in, out, gs)) != 0)
		goto out;
	if (resolve_base_store(&c, &in.pst, out->store) < 0 ||
	    resolve_base_protocol(&c, &in.pstr, out->protocol) < 0 || layer1(&c, &in) < 0) {
		r = conf_err(&c, gs);
		goto out;
	}
	cpy(out->agent, sizeof(out->agent), in.pst.spec.agent_ref);
	if ((r = sc_fstype(&c, &in, cap_fstype, gs)) != 0 ||
	    (r = read_pvc(st, &in, out, gs)) != 0 ||
	    (in.have_pvc && (r = layer2(&c, &in, gs)) != 0))
		goto out;
	if (resolve_post_checks(&c, out->store, block) < 0) {
		r = conf_err(&c, gs);
		goto out;
	}
	if ((r = layout_check(st, &c, out->store, out->agent, gs)) != 0)
		goto out;
	finish(&c, block, out);
	if (!block && !out->resolved.filesystem.fs_type)
		r = gfail(gs, GRPC_RESOURCE_EXHAUSTED, "out of memory");
out:
	resolve_conf_clear(&c);
	inputs_clear(&in);
	return r;
}

void resolve_out_clear(struct resolve_out *o)
{
	if (o)
		model_type_clear(&model_resolved_type, &o->resolved);
}

int resolve_psc_compatible(const struct model_psc *psc, const struct model_pst *pst,
                           const struct model_pstr *pstr, char *reason, size_t rcap, char *msg,
                           size_t mcap)
{
	const __typeof__(psc->spec) *s = &psc->spec;
	const char *sname = pst->meta.name ? pst->meta.name : "";
	struct resolve_conf c;
	int r = 0;
	resolve_conf_init(&c);
	if (resolve_base_store(&c, pst, sname) < 0 ||
	    resolve_base_protocol(&c, pstr, pstr->meta.name ? pstr->meta.name : "") < 0 ||
	    resolve_apply_backend(&c, s->overrides.has_backend ? &s->overrides.backend : NULL,
	                          NULL) < 0 ||
	    resolve_apply_protocol(&c, s->overrides.has_protocol ? &s->overrides.protocol : NULL,
	                           NULL) < 0 ||
	    resolve_apply_fs(&c, s->has_filesystem ? &s->filesystem : NULL, NULL, true) < 0)
		r = -EINVAL;
	if (r == 0) {
		c.mode_key[0] = 0; /* the Compatible message carries no key */
		r = resolve_post_checks(&c, sname, false);
	}
	if (r < 0) {
		snprintf(reason, rcap, "%s", c.reason);
		snprintf(msg, mcap, "%s", c.msg);
	}
	resolve_conf_clear(&c);
	return r;
}

/* ---- volume context (csi.md §3) ----------------------------------------------------------------- */

static int ctx_int(struct model_map *ctx, const char *key, int64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%lld", (long long)v);
	return model_map_set(ctx, key, buf);
}

/* A non-empty option list as its JSON text. */
static int ctx_list(struct model_map *ctx, const char *key, const struct model_strs *l)
{
	if (l->n == 0)
		return 0;
	char *t = model_strs_json(l);
	int r = t ? model_map_set(ctx, key, t) : -ENOMEM;
	free(t);
	return r;
}

/* The nvmeofTcp tunables the node reads, the authentication mode, and the filesystem. */
static int ctx_settings(struct model_map *ctx, const struct model_resolved *res)
{
	const struct model_nvmeof_tcp *n = &res->protocol.nvmeof_tcp;
	int r = 0;
	for (int i = 0; r == 0 && i < MODEL_TUNABLES; i++) {
		const struct model_tunable *t = &model_tunables[i];
		if (t->ctx_key && *(const bool *)((const char *)n + t->has_off))
			r = ctx_int(ctx, t->ctx_key, *(const int64_t *)((const char *)n + t->off));
	}
	if (r == 0 && n->has_dhchap) /* the mode only: the node connects with its own secrets */
		r = model_map_set(ctx, RULES_CTX_DHCHAP,
		                  model_dhchap_bidirectional(&n->dhchap)
		                      ? RULES_CTX_DHCHAP_BIDIRECTIONAL
		                      : RULES_CTX_DHCHAP_UNIDIRECTIONAL);
	if (r < 0 || !res->has_filesystem)
		return r;
	const struct model_filesystem *fs = &res->filesystem;
	if ((r = model_map_set(ctx, RULES_CTX_FS_TYPE, fs->fs_type ?: RULES_FS_DEFAULT)) < 0 ||
	    (r = ctx_list(ctx, RULES_CTX_MKFS_OPTIONS, &fs->mkfs_options)) < 0)
		return r;
	return ctx_list(ctx, RULES_CTX_MOUNT_OPTIONS, &fs->mount_options);
}

int resolve_volume_context(const struct model_pvst *v, struct model_map *ctx)
{
	const __typeof__(v->status.export_info) *ei = &v->status.export_info;
	const struct model_resolved *res = &v->spec.resolved;
	const char *addr = ei->address, *ref = ei->volume_ref;
	int64_t port = ei->has_port ? ei->port : 0;
	memset(ctx, 0, sizeof(*ctx));
	if (!addr || !*addr)
		addr = v->status.export_spec.bind_address ?: "";
	if (port == 0)
		port = model_nvmeof_tcp_port(&res->protocol.nvmeof_tcp);
	int r = model_map_set(ctx, RULES_CTX_TARGET_ID, ei->target_id ?: "");
	if (r == 0)
		r = model_map_set(ctx, RULES_CTX_ADDRESS, addr);
	if (r == 0)
		r = ctx_int(ctx, RULES_CTX_PORT, port);
	if (r == 0)
		r = model_map_set(ctx, RULES_CTX_PROTOCOL_TYPE, RULES_PROTOCOL_NVMEOF_TCP);
	if (r == 0)
		r = model_map_set(ctx, RULES_CTX_VOLUME_REF, ref && *ref ? ref : "1");
	if (r == 0)
		r = ctx_settings(ctx, res);
	if (r < 0)
		model_map_clear(ctx);
	return r;
}
