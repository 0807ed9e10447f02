/* pvst — typed PillarVolumeState CAS and the agent parameters of a volume. */
#include "controller/pvst.h"

#include <stdlib.h>
#include <string.h>

static int lifecycle_changed(struct grpc_status *gs, const char *name, const char *uid)
{
	return grpc_status_set(
	    gs, GRPC_ABORTED,
	    "volume lifecycle of PillarVolumeState \"%s\" changed (uid %s); retry", name,
	    uid ? uid : "");
}

/* pvst_read with the stored object v was decoded from (model_get_base). */
static int read_base(struct ctl *c, const char *name, bool cached, struct model_pvst *v,
                     void **base, struct err *e)
{
	bool was = store_cache_thread_reads(cached);
	int r = model_get_base(c->st, &model_pvst_kind, NULL, name, v, base, e);
	store_cache_thread_reads(was);
	return r;
}

int pvst_read(struct ctl *c, const char *name, bool cached, struct model_pvst *v, struct err *e)
{
	return read_base(c, name, cached, v, NULL, e);
}

/* One read-modify-write; -ESTALE (STORE_CONFLICT) asks for another try, read through.  A copy
 * from the cache is only ever written conditionally on its resourceVersion, so a stale one is
 * refused (Conflict); with recheck, any other outcome decided on it (a missing object, another
 * UID, fn's skip or error) is decided again on a read through.  The object is decoded once: the
 * update's rules compare with the stored object it came from (model_update_on). */
static int pvst_try(struct ctl *c, const char *name, const char *uid, bool cached, bool recheck,
                    pvst_fn fn, void *arg, bool all, struct model_pvst *out, struct grpc_status *gs)
{
	struct model_pvst v, nv;
	struct err e = {0};
	void *base = NULL;
	int r = read_base(c, name, cached, &v, &base, &e);
	if (recheck && (r < 0 || (uid && strcmp(v.meta.uid ?: "", uid)))) {
		r = STORE_CONFLICT;
		goto done;
	}
	if (r == STORE_NOT_FOUND || (r == 0 && uid && strcmp(v.meta.uid ?: "", uid))) {
		r = lifecycle_changed(gs, name, uid);
		goto done;
	}
	if (r < 0) {
		r = grpc_status_set(gs, GRPC_UNAVAILABLE, "reading PillarVolumeState \"%s\": %s",
		                    name, e.msg);
		goto done;
	}
	r = fn(&v, arg, gs);
	if (recheck && r != 0) {
		r = STORE_CONFLICT;
		goto done;
	}
	if (r == PVST_SKIP) {
		if (out) { /* v moves to out */
			*out = v;
			memset(&v, 0, sizeof(v));
		}
		r = GRPC_OK;
		goto done;
	}
	if (r == 0)
		r = model_update_on(c->st, &model_pvst_kind, base, &v, all, out ? &nv : NULL, &e);
	if (r == 0 && out)
		*out = nv;
	if (r == STORE_NOT_FOUND)
		r = grpc_status_set(gs, GRPC_ABORTED,
		                    "volume lifecycle of PillarVolumeState \"%s\" changed; retry",
		                    name);
	else if (r < 0 && r != STORE_CONFLICT)
		r = grpc_status_set(gs, ctl_store_code(r), "updating PillarVolumeState \"%s\": %s",
		                    name, e.msg);
done:
	model_clear(&model_pvst_kind, &v);
	model_base_free(base);
	return r;
}

static int update(struct ctl *c, const char *name, const char *uid, pvst_fn fn, void *arg, bool all,
                  struct model_pvst *out, struct grpc_status *gs)
{
	if (out)
		memset(out, 0, sizeof(*out));
	/* the first try from the cache: no read before the write (client-go's RetryOnConflict
	 * over a lister's copy); a conflict reads through.  Threads that read from the caches
	 * anyway (the reconcilers) take every decision of the first try on the cache's copy. */
	bool thread_cached = store_cache_thread_reads(true);
	store_cache_thread_reads(thread_cached);
	for (int tries = 0; tries < 9; tries++) {
		bool cached = tries == 0;
		int r =
		    pvst_try(c, name, uid, cached, cached && !thread_cached, fn, arg, all, out, gs);
		if (r != STORE_CONFLICT)
			return r;
	}
	return grpc_status_set(gs, GRPC_ABORTED, "PillarVolumeState \"%s\" keeps changing; retry",
	                       name);
}

int pvst_update(struct ctl *c, const char *name, const char *uid, pvst_fn fn, void *arg,
                struct model_pvst *out, struct grpc_status *gs)
{
	return update(c, name, uid, fn, arg, false, out, gs);
}

int pvst_update_all(struct ctl *c, const char *name, const char *uid, pvst_fn fn, void *arg,
                    struct model_pvst *out, struct grpc_status *gs)
{
	return update(c, name, uid, fn, arg, true, out, gs);
}

uint64_t pvst_gen(const struct model_pvst *v)
{
	int64_t g = v->status.publication_generation;
	return v->status.has_publication_generation && g > 0 ? (uint64_t)g : 0;
}

void pvst_gen_set(struct model_pvst *v, uint64_t g)
{
	v->status.has_publication_generation = true;
	v->status.publication_generation = (int64_t)g;
}

static int zfs_params(struct pvst_backend_buf *b, const struct model_zfs *z)
{
	b->zfs.pool = z->pool ?: "";
	b->zfs.parent_dataset = z->parent_dataset ?: "";
	size_t n = z->properties.n;
	if (n == 0)
		return 0;
	b->props = calloc(n, sizeof(*b->props));
	b->propp = calloc(n, sizeof(*b->propp));
	if (!b->props || !b->propp)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		pillar_csi__agent__v1__zfs_volume_params__properties_entry__init(&b->props[i]);
		b->props[i].key = z->properties.kv[i].key;
		b->props[i].value = z->properties.kv[i].value;
		b->propp[i] = &b->props[i];
	}
	b->zfs.n_properties = n;
	b->zfs.properties = b->propp;
	return 0;
}

int pvst_backend_params(struct pvst_backend_buf *b, const struct model_pvst *v,
                        PillarCsi__Agent__V1__BackendParams **out)
{
	return pvst_backend_params_of(b, &v->spec.resolved.backend, out);
}

int pvst_backend_params_of(struct pvst_backend_buf *b, const struct model_backend *bk,
                           PillarCsi__Agent__V1__BackendParams **out)
{
	memset(b, 0, sizeof(*b));
	*out = NULL;
	pillar_csi__agent__v1__file_volume_params__init(&b->file);
	pillar_csi__agent__v1__backend_params__init(&b->bp);
	pillar_csi__agent__v1__zfs_volume_params__init(&b->zfs);
	pillar_csi__agent__v1__lvm_volume_params__init(&b->lvm);
	if (bk->has_zfs) {
		if (zfs_params(b, &bk->zfs) < 0)
			return -ENOMEM;
		b->bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_ZFS;
		b->bp.zfs = &b->zfs;
	} else if (bk->has_lvm) {
		b->lvm.volume_group = bk->lvm.volume_group ?: "";
		b->lvm.provision_mode = bk->lvm.provisioning_mode ?: "";
		b->lvm.thin_pool = bk->lvm.thin_pool ?: "";
		b->bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_LVM;
		b->bp.lvm = &b->lvm;
	} else if (bk->has_file) {
		/* preallocate unset = false: the agent's configuration decides (agent-api.md §14) */
		b->file.pool = bk->file.pool ?: "";
		b->file.preallocate = bk->file.has_preallocate && bk->file.preallocate;
		b->bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE;
		b->bp.file = &b->file;
	} else {
		return 0;
	}
	*out = &b->bp;
	return 0;
}

void pvst_backend_params_free(struct pvst_backend_buf *b)
{
	free(b->props);
	free(b->propp);
	b->props = NULL;
	b->propp = NULL;
}

void pvst_fence(PillarCsi__Agent__V1__FencingToken *t, const struct model_pvst *v, uint64_t gen)
{
	pillar_csi__agent__v1__fencing_token__init(t);
	t->volume_uid = v->meta.uid ? v->meta.uid : "";
	t->generation = gen;
}

bool pvst_deleting(const struct model_pvst *v)
{
	return v->status.has_deleting && v->status.deleting;
}

int pvst_find(struct ctl *c, const char *volume_id, struct model_pvst *out, struct grpc_status *gs)
{
	struct rules_volid v;
	char name[RULES_PVST_NAME_CAP];
	struct err e = {0};
	memset(out, 0, sizeof(*out));
	if (rules_volid_parse(volume_id, &v) < 0)
		return GRPC_NOT_FOUND;
	rules_pvst_name(v.name, name, sizeof(name));
	int r = model_get(c->st, &model_pvst_kind, NULL, name, out, &e);
	if (r == STORE_NOT_FOUND)
		return GRPC_NOT_FOUND;
	if (r < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "reading PillarVolumeState \"%s\": %s",
		                       name, e.msg);
	if (!out->spec.volume_id || strcmp(out->spec.volume_id, volume_id)) {
		model_clear(&model_pvst_kind, out);
		return GRPC_NOT_FOUND;
	}
	return GRPC_OK;
}

int pvst_find_existing(struct ctl *c, const char *volume_id, struct model_pvst *out,
                       struct grpc_status *gs)
{
	int r = pvst_find(c, volume_id, out, gs);
	if (r == GRPC_NOT_FOUND)
		return grpc_status_set(gs, GRPC_NOT_FOUND, "volume \"%s\" not found", volume_id);
	return r;
}

int pvst_locked(struct ctl *c, const char *volume_id, bool absent_ok, pvst_locked_fn fn, void *arg,
                struct grpc_status *gs)
{
	struct rules_volid v;
	char pname[RULES_PVST_NAME_CAP];
	if (rules_volid_parse(volume_id, &v) < 0)
		return absent_ok ? GRPC_OK
		                 : grpc_status_set(gs, GRPC_NOT_FOUND, "volume \"%s\" not found",
		                                   volume_id);
	rules_pvst_name(v.name, pname, sizeof(pname));
	struct keylock_hold hold;
	keylock_wait(&c->locks, &hold, pname);
	int r = fn(c, &v, pname, arg, gs);
	keylock_release(&c->locks, &hold);
	return r;
}
