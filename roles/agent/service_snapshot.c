/* AgentService: CreateSnapshot, DeleteSnapshot, ListSnapshots, and CreateVolume from a content
 * source (docs/snapshots.md "Agent API").
 *
 * A snapshot ID is <pool>/<name> with the rules of a volume ID (agent-api.md §5.1).  A snapshot
 * is fenced like a volume, with its own token, under the key "snapshot:<id>" (its fencing mark
 * and lock; a volume ID never contains ":", so the two never share one).  Snapshots are never
 * exported and hold no namespace identity; a volume made from one is a volume of its own: its
 * NQN, hence its identity (agent-api.md §8.2), comes from its own ID. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/service_int.h"
#include "base/keylock.h"
#include "glue.h"
#include "google/protobuf/timestamp.pb-c.h"

#define PB(x)           PillarCsi__Agent__V1__##x
#define SNAP_KEY_PREFIX "snapshot:"

static int parse_snapshot_id(const char *id, struct volref *v, struct grpc_status *st)
{
	struct grpc_status ignored = {0};
	if (svc_parse_volume_id(id, v, &ignored) == GRPC_OK)
		return GRPC_OK;
	return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "invalid snapshot id \"%s\"",
	                       id ? id : "");
}

static void snap_key(const struct volref *v, char *out, size_t cap)
{
	snprintf(out, cap, SNAP_KEY_PREFIX "%s", v->id);
}

/* The status of a failed backend snapshot or clone call. */
static int backend_failed(int r, const struct err *e, struct grpc_status *st)
{
	int code;
	switch (r) {
	case -ENOENT: code = GRPC_NOT_FOUND; break;
	case -EEXIST: code = GRPC_ALREADY_EXISTS; break;
	case -EOPNOTSUPP: code = GRPC_FAILED_PRECONDITION; break;
	case -EINPROGRESS:
	case -ETIMEDOUT: code = GRPC_UNAVAILABLE; break;
	case -ENOSPC: code = GRPC_RESOURCE_EXHAUSTED; break;
	case -EINVAL: code = GRPC_INVALID_ARGUMENT; break;
	default: code = GRPC_INTERNAL;
	}
	return grpc_status_set(st, code, "%s", e->msg[0] ? e->msg : "backend failure");
}

static bool snapshots_supported(backend *b, struct grpc_status *st)
{
	if (b->ops->snap_create && b->ops->clone)
		return true;
	grpc_status_set(st, GRPC_FAILED_PRECONDITION, "pool \"%s\": %s backends take no snapshots",
	                b->cfg.pool, backend_kind_name(b->cfg.kind));
	return false;
}

/* SnapshotInfo of a snapshot in pool; NULL when out of memory. */
static PB(SnapshotInfo) * snapshot_info(const char *pool, const struct backend_snap *s)
{
	struct glue_pair m = glue_new_pair(&pillar_csi__agent__v1__snapshot_info__descriptor,
	                                   &google__protobuf__timestamp__descriptor);
	if (!m.a)
		return NULL;
	PB(SnapshotInfo) *i = m.a;
	Google__Protobuf__Timestamp *t = m.b;
	t->seconds = s->created;
	i->creation_time = t;
	i->size_bytes = s->size;
	i->ready_to_use = true;
	if (asprintf(&i->snapshot_id, "%s/%s", pool, s->name) < 0)
		i->snapshot_id = NULL;
	if (asprintf(&i->source_volume_id, "%s/%s", pool, s->source) < 0)
		i->source_volume_id = NULL;
	if (!i->snapshot_id || !i->source_volume_id) {
		protobuf_c_message_free_unpacked(&i->base, NULL);
		return NULL;
	}
	return i;
}

/* ---- CreateSnapshot ---------------------------------------------------------------------------- */

static int do_create_snapshot(agent_service *a, backend *b, const struct volref *s,
                              const struct volref *src, const PB(CreateSnapshotRequest) * req,
                              PB(CreateSnapshotResponse) * resp, struct grpc_status *st)
{
	struct backend_create_opts o;
	struct backend_snap info;
	struct err e = {0};
	char key[AGENT_VOLID_MAX + 16];
	int code;
	snap_key(s, key, sizeof(key));
	if ((code = svc_layout(a, b, s, req->backend_params, &o, st)) != GRPC_OK ||
	    (code = svc_fence(a, key, req->fence, FENCE_GRANT, st)) != GRPC_OK)
		return code;
	int r = b->ops->snap_create(b, s->name, src->name, &info, &e);
	if (r == -ENOENT)
		return grpc_status_set(st, GRPC_NOT_FOUND, "source volume \"%s\" does not exist",
		                       src->id);
	if (r < 0)
		return backend_failed(r, &e, st);
	resp->snapshot = snapshot_info(s->pool, &info);
	return resp->snapshot ? svc_ok(st) : grpc_status_oom(st);
}

int agent_create_snapshot(agent_service *a, const PB(CreateSnapshotRequest) * req,
                          PB(CreateSnapshotResponse) * resp, struct grpc_status *st)
{
	struct volref s, src;
	backend *b;
	int code;
	if (svc_enter(a, st))
		return st->code;
	if ((code = parse_snapshot_id(req->snapshot_id, &s, st)) == GRPC_OK &&
	    (code = svc_parse_volume_id(req->source_volume_id, &src, st)) == GRPC_OK &&
	    (code = svc_route(a, &s, (int)req->backend_type, &b, st)) == GRPC_OK) {
		if (strcmp(s.pool, src.pool) != 0) {
			code =
			    grpc_status_set(st, GRPC_INVALID_ARGUMENT,
			                    "snapshot \"%s\" and its source volume \"%s\" must be "
			                    "in the same pool",
			                    s.id, src.id);
		} else if (snapshots_supported(b, st)) {
			char key[AGENT_VOLID_MAX + 16];
			struct keylock_hold hold;
			snap_key(&s, key, sizeof(key));
			keylock_wait(&a->locks, &hold, key);
			code = do_create_snapshot(a, b, &s, &src, req, resp, st);
			keylock_release(&a->locks, &hold);
		} else {
			code = st->code;
		}
	}
	svc_leave(a);
	return code;
}

/* ---- DeleteSnapshot ---------------------------------------------------------------------------- */

static int do_delete_snapshot(agent_service *a, backend *b, const struct volref *s,
                              const PB(DeleteSnapshotRequest) * req, struct grpc_status *st)
{
	struct err e = {0};
	char key[AGENT_VOLID_MAX + 16];
	int code, r;
	snap_key(s, key, sizeof(key));
	if ((code = svc_fence(a, key, req->fence, FENCE_DESTROY, st)) != GRPC_OK)
		return code;
	if ((r = b->ops->snap_destroy(b, s->name, &e)) < 0)
		return backend_failed(r, &e, st);
	if (b->ops->sweep && (r = b->ops->sweep(b, &e)) < 0)
		return backend_failed(r, &e, st);
	if (agent_fence_end(a->state_dir, key, &e) < 0)
		return svc_state_failed(st, &e);
	return svc_ok(st);
}

int agent_delete_snapshot(agent_service *a, const PB(DeleteSnapshotRequest) * req,
                          PB(DeleteSnapshotResponse) * resp, struct grpc_status *st)
{
	struct volref s;
	backend *b;
	int code;
	(void)resp;
	if (svc_enter(a, st))
		return st->code;
	if ((code = parse_snapshot_id(req->snapshot_id, &s, st)) == GRPC_OK &&
	    (code = svc_route(a, &s, (int)req->backend_type, &b, st)) == GRPC_OK) {
		if (snapshots_supported(b, st)) {
			char key[AGENT_VOLID_MAX + 16];
			struct keylock_hold hold;
			snap_key(&s, key, sizeof(key));
			keylock_wait(&a->locks, &hold, key);
			code = do_delete_snapshot(a, b, &s, req, st);
			keylock_release(&a->locks, &hold);
		} else {
			code = st->code;
		}
	}
	svc_leave(a);
	return code;
}

/* ---- ListSnapshots ----------------------------------------------------------------------------- */

/* The pool a ListSnapshots request names in its backend params ("" when none). */
static const char *params_pool(const PB(BackendParams) * p)
{
	const char *pool = NULL;
	if (p && p->params_case == PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_ZFS)
		pool = p->zfs->pool;
	else if (p && p->params_case == PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_LVM)
		pool = p->lvm->volume_group;
	else if (p && p->params_case == PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE)
		pool = p->file->pool;
	return pool ? pool : "";
}

/* Appends the snapshots of pool b (of source, when not NULL) to resp. */
static int list_pool(backend *b, const char *source, PB(ListSnapshotsResponse) * resp,
                     struct grpc_status *st)
{
	struct backend_snap *s = NULL;
	struct err e = {0};
	size_t n = 0;
	int r = b->ops->snap_list ? b->ops->snap_list(b, &s, &n, &e) : 0;
	if (r < 0)
		return backend_failed(r, &e, st);
	PB(SnapshotInfo) **grown =
	    n ? realloc(resp->snapshots, (resp->n_snapshots + n) * sizeof(*grown)) : NULL;
	if (n && !grown) {
		free(s);
		return grpc_status_oom(st);
	}
	if (n)
		resp->snapshots = grown;
	for (size_t i = 0; i < n; i++) {
		if (source && strcmp(s[i].source, source) != 0)
			continue;
		if (!(resp->snapshots[resp->n_snapshots] = snapshot_info(b->cfg.pool, &s[i]))) {
			free(s);
			return grpc_status_oom(st);
		}
		resp->n_snapshots++;
	}
	free(s);
	return GRPC_OK;
}

int agent_list_snapshots(agent_service *a, const PB(ListSnapshotsRequest) * req,
                         PB(ListSnapshotsResponse) * resp, struct grpc_status *st)
{
	struct volref src;
	memset(&src, 0, sizeof(src));
	int code = GRPC_OK;
	bool by_source = req->source_volume_id && *req->source_volume_id;
	const char *pool = params_pool(req->backend_params);
	if (svc_enter(a, st))
		return st->code;
	if (by_source && (code = svc_parse_volume_id(req->source_volume_id, &src, st)) == GRPC_OK)
		pool = *pool ? pool : src.pool;
	if (code == GRPC_OK && *pool) {
		struct volref v;
		memset(&v, 0, sizeof(v));
		backend *b;
		snprintf(v.pool, sizeof(v.pool), "%s", pool);
		if ((code = svc_route(a, &v, (int)req->backend_type, &b, st)) == GRPC_OK)
			code = list_pool(b, by_source ? src.name : NULL, resp, st);
	} else if (code == GRPC_OK) { /* every pool (of the type, when one is named) */
		for (size_t i = 0; i < a->n_backends && code == GRPC_OK; i++)
			if (!req->backend_type ||
			    (int)req->backend_type == (int)a->backends[i]->cfg.kind)
				code = list_pool(a->backends[i], NULL, resp, st);
	}
	svc_leave(a);
	return code == GRPC_OK ? svc_ok(st) : code;
}

/* ---- CreateVolume from a content source ---------------------------------------------------------- */

int svc_clone_volume(agent_service *a, backend *b, const struct volref *v,
                     const PB(CreateVolumeRequest) * req, const struct backend_create_opts *o,
                     struct grpc_status *st)
{
	const PB(VolumeContentSource) *cs = req->content_source;
	bool from_snap =
	    cs->source_case == PILLAR_CSI__AGENT__V1__VOLUME_CONTENT_SOURCE__SOURCE_SNAPSHOT_ID;
	struct volref src;
	struct backend_snap info;
	struct err e = {0};
	int64_t size;
	int code, r;
	(void)a;
	if (!from_snap &&
	    cs->source_case != PILLAR_CSI__AGENT__V1__VOLUME_CONTENT_SOURCE__SOURCE_VOLUME_ID)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "content_source names neither a snapshot nor a volume");
	if ((code = from_snap ? parse_snapshot_id(cs->snapshot_id, &src, st)
	                      : svc_parse_volume_id(cs->volume_id, &src, st)) != GRPC_OK)
		return code;
	if (strcmp(src.pool, v->pool) != 0 || (!from_snap && strcmp(src.id, v->id) == 0))
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "content source \"%s\" of volume \"%s\": a restore or clone "
		                       "stays in its source's pool and is a volume of its own",
		                       src.id, v->id);
	if (!snapshots_supported(b, st))
		return st->code;
	r = from_snap ? b->ops->snap_find(b, src.name, &info, &e)
	              : b->ops->size(b, src.name, &size, &e);
	if (r == -ENOENT)
		return grpc_status_set(st, GRPC_NOT_FOUND, "%s \"%s\" does not exist",
		                       from_snap ? "snapshot" : "source volume", src.id);
	if (r < 0)
		return backend_failed(r, &e, st);
	if (from_snap)
		size = info.size;
	if (req->capacity_bytes < size)
		return grpc_status_set(st, GRPC_OUT_OF_RANGE,
		                       "volume \"%s\" of %" PRId64
		                       " bytes is smaller than its source "
		                       "\"%s\" of %" PRId64 " bytes",
		                       v->id, (int64_t)req->capacity_bytes, src.id, size);
	r = b->ops->clone(b, v->name, from_snap ? BACKEND_FROM_SNAPSHOT : BACKEND_FROM_VOLUME,
	                  src.name, req->capacity_bytes, o, &e);
	return r < 0 ? backend_failed(r, &e, st) : GRPC_OK;
}
