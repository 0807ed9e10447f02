/* csi_source — the volume_content_source of CreateVolume (docs/snapshots.md): a snapshot
 * (restore) or a live volume (clone).  The source is looked up in the controller's records
 * (PillarSnapshot, PillarVolumeState); the new volume goes where the source lives (its agent,
 * pool and backend settings), is at least as large, and records the source in
 * spec.contentSource; the agent's CreateVolume gets the source's agent ID. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/csi_source.h"
#include "controller/psnap.h"
#include "rules/keys.h"

static const char *str(const char *s)
{
	return s ? s : "";
}

void csi_source_clear(struct csi_source *s)
{
	model_type_clear(&model_backend_type, &s->backend);
	memset(s, 0, sizeof(*s));
}

static int from_snapshot(struct ctl *c, const char *id, struct csi_source *s,
                         struct grpc_status *gs)
{
	struct model_psnap snap;
	int r = psnap_find(c, id, &snap, gs);
	if (r == GRPC_NOT_FOUND)
		return grpc_status_set(gs, GRPC_NOT_FOUND, "snapshot \"%s\" not found", id);
	if (r)
		return r;
	if (!psnap_cut(&snap))
		r = grpc_status_set(gs, GRPC_NOT_FOUND, "snapshot \"%s\" not found (%s)", id,
		                    psnap_deleting(&snap) ? "being deleted" : "not yet taken");
	else if (!snap.status.has_ready_to_use || !snap.status.ready_to_use)
		r = grpc_status_set(gs, GRPC_UNAVAILABLE,
		                    "snapshot \"%s\" is not ready to use yet; retry", id);
	else if (model_type_copy(&model_backend_type, &s->backend, &snap.spec.backend) < 0)
		r = grpc_status_oom(gs);
	if (r == 0) {
		s->size = snap.status.has_size_bytes ? snap.status.size_bytes : 0;
		snprintf(s->store, sizeof(s->store), "%s",
		         str(model_map_get(&snap.meta.labels, RULES_LABEL_STORE)));
	}
	model_clear(&model_psnap_kind, &snap);
	return r;
}

static int from_volume(struct ctl *c, const char *id, struct csi_source *s, struct grpc_status *gs)
{
	struct model_pvst v;
	int r = pvst_find(c, id, &v, gs);
	if (r == GRPC_NOT_FOUND)
		return grpc_status_set(gs, GRPC_NOT_FOUND, "source volume \"%s\" not found", id);
	if (r)
		return r;
	const struct model_backend *b = &v.spec.resolved.backend;
	if (pvst_deleting(&v))
		r = grpc_status_set(gs, GRPC_NOT_FOUND,
		                    "source volume \"%s\" not found (being "
		                    "deleted)",
		                    id);
	else if (!v.status.phase || strcmp(v.status.phase, "Ready"))
		r = grpc_status_set(gs, GRPC_UNAVAILABLE,
		                    "source volume \"%s\" is not ready yet; retry once its "
		                    "CreateVolume has succeeded",
		                    id);
	else if (b->has_lvm && strcmp(model_lvm_mode(&b->lvm), "thin"))
		r = grpc_status_set(gs, GRPC_FAILED_PRECONDITION,
		                    "source volume \"%s\" is an LVM linear volume: clones need a "
		                    "thin pool",
		                    id);
	else if (model_type_copy(&model_backend_type, &s->backend, b) < 0)
		r = grpc_status_oom(gs);
	if (r == 0) {
		s->size = v.spec.capacity_bytes;
		snprintf(s->store, sizeof(s->store), "%s",
		         str(model_map_get(&v.meta.labels, RULES_LABEL_STORE)));
	}
	model_clear(&model_pvst_kind, &v);
	return r;
}

int csi_source_resolve(struct ctl *c, const Csi__V1__VolumeContentSource *cs, struct csi_source *s,
                       struct grpc_status *gs)
{
	memset(s, 0, sizeof(*s));
	if (!cs)
		return 0;
	const char *id = NULL;
	if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT && cs->snapshot) {
		s->snapshot = true;
		id = cs->snapshot->snapshot_id;
	} else if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME && cs->volume) {
		id = cs->volume->volume_id;
	} else {
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "volume_content_source must name a snapshot or a volume");
	}
	if (!id || !*id)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "volume_content_source.%s is required",
		                       s->snapshot ? "snapshot.snapshot_id" : "volume.volume_id");
	if (strlen(id) >= sizeof(s->id))
		return grpc_status_set(gs, GRPC_NOT_FOUND, "%s \"%.64s...\" not found",
		                       s->snapshot ? "snapshot" : "source volume", id);
	snprintf(s->id, sizeof(s->id), "%s", id);
	int r = (s->snapshot ? rules_snapid_parse : rules_volid_parse)(id, &s->where);
	if (r < 0)
		return grpc_status_set(gs, GRPC_NOT_FOUND, "%s \"%s\" not found",
		                       s->snapshot ? "snapshot" : "source volume", id);
	s->set = true;
	r = s->snapshot ? from_snapshot(c, id, s, gs) : from_volume(c, id, s, gs);
	if (r)
		csi_source_clear(s);
	return r;
}

int csi_source_record(struct model_pvst *v, const struct csi_source *s)
{
	if (!s->set)
		return 0;
	v->spec.has_content_source = true;
	return model_str_set(s->snapshot ? &v->spec.content_source.snapshot_id
	                                 : &v->spec.content_source.volume_id,
	                     s->id);
}

bool csi_source_same(const struct model_pvst *v, const struct csi_source *s)
{
	const char *snap = v->spec.has_content_source ? v->spec.content_source.snapshot_id : NULL;
	const char *vol = v->spec.has_content_source ? v->spec.content_source.volume_id : NULL;
	if (!s->set)
		return !snap && !vol;
	return s->snapshot ? snap && !strcmp(snap, s->id) : vol && !strcmp(vol, s->id);
}

int csi_source_agent(const struct model_pvst *v, PillarCsi__Agent__V1__VolumeContentSource *out,
                     char *buf, size_t cap)
{
	struct rules_volid id;
	pillar_csi__agent__v1__volume_content_source__init(out);
	if (!v->spec.has_content_source)
		return 0;
	const char *snap = v->spec.content_source.snapshot_id,
	           *vol = v->spec.content_source.volume_id;
	if (snap ? rules_snapid_parse(snap, &id) < 0 : rules_volid_parse(str(vol), &id) < 0)
		return -1;
	snprintf(buf, cap, "%s", id.agent_volume_id);
	if (snap) {
		out->source_case = PILLAR_CSI__AGENT__V1__VOLUME_CONTENT_SOURCE__SOURCE_SNAPSHOT_ID;
		out->snapshot_id = buf;
	} else {
		out->source_case = PILLAR_CSI__AGENT__V1__VOLUME_CONTENT_SOURCE__SOURCE_VOLUME_ID;
		out->volume_id = buf;
	}
	return 1;
}

Csi__V1__VolumeContentSource *csi_source_csi(const struct model_pvst *v)
{
	const char *snap = v->spec.content_source.snapshot_id,
	           *vol = v->spec.content_source.volume_id;
	if (!v->spec.has_content_source || (!snap && !vol))
		return NULL;
	Csi__V1__VolumeContentSource *cs = calloc(1, sizeof(*cs));
	if (!cs)
		return NULL;
	csi__v1__volume_content_source__init(cs);
	if (snap) {
		Csi__V1__VolumeContentSource__SnapshotSource *s = calloc(1, sizeof(*s));
		if (s) {
			csi__v1__volume_content_source__snapshot_source__init(s);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs->snapshot = s;
			s->snapshot_id = strdup(snap);
		}
		if (!s || !s->snapshot_id) {
			protobuf_c_message_free_unpacked(&cs->base, NULL);
			return NULL;
		}
	} else {
		Csi__V1__VolumeContentSource__VolumeSource *s = calloc(1, sizeof(*s));
		if (s) {
			csi__v1__volume_content_source__volume_source__init(s);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			cs->volume = s;
			s->volume_id = strdup(vol);
		}
		if (!s || !s->volume_id) {
			protobuf_c_message_free_unpacked(&cs->base, NULL);
			return NULL;
		}
	}
	return cs;
}
