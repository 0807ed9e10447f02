/* psnap — typed PillarSnapshot CAS, the agent parameters and the CSI message of a snapshot. */
#include "controller/psnap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/agents.h"
#include "glue.h"
#include "rules/volid.h"

static const char *str(const char *s)
{
	return s ? s : "";
}

static int lifecycle_changed(struct grpc_status *gs, const char *name)
{
	return grpc_status_set(gs, GRPC_ABORTED,
	                       "snapshot lifecycle of PillarSnapshot \"%s\" changed; retry", name);
}

/* One read-modify-write; STORE_CONFLICT asks for another. */
static int psnap_try(struct ctl *c, const char *name, const char *uid, psnap_fn fn, void *arg,
                     struct model_psnap *out, struct grpc_status *gs)
{
	struct model_psnap s;
	struct err e = {0};
	int r = model_get(c->st, &model_psnap_kind, NULL, name, &s, &e);
	if (r == STORE_NOT_FOUND || (r == 0 && uid && strcmp(str(s.meta.uid), uid))) {
		model_clear(&model_psnap_kind, &s);
		return lifecycle_changed(gs, name);
	}
	if (r < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "reading PillarSnapshot \"%s\": %s",
		                       name, e.msg);
	r = fn(&s, arg, gs);
	if (r == 0)
		r = model_update_status(c->st, &model_psnap_kind, &s, out, &e);
	model_clear(&model_psnap_kind, &s);
	if (r == STORE_CONFLICT || r >= 0)
		return r;
	if (r == STORE_NOT_FOUND)
		return lifecycle_changed(gs, name);
	return grpc_status_set(gs, ctl_store_code(r), "updating PillarSnapshot \"%s\": %s", name,
	                       e.msg);
}

int psnap_update(struct ctl *c, const char *name, const char *uid, psnap_fn fn, void *arg,
                 struct model_psnap *out, struct grpc_status *gs)
{
	for (int tries = 0; tries < 9; tries++) {
		if (out)
			memset(out, 0, sizeof(*out));
		int r = psnap_try(c, name, uid, fn, arg, out, gs);
		if (r != STORE_CONFLICT)
			return r;
	}
	return grpc_status_set(gs, GRPC_ABORTED, "PillarSnapshot \"%s\" keeps changing; retry",
	                       name);
}

int psnap_find(struct ctl *c, const char *snapshot_id, struct model_psnap *out,
               struct grpc_status *gs)
{
	struct rules_volid v;
	char name[RULES_PVST_NAME_CAP];
	struct err e = {0};
	memset(out, 0, sizeof(*out));
	if (rules_snapid_parse(snapshot_id, &v) < 0)
		return GRPC_NOT_FOUND;
	rules_pvst_name(v.name, name, sizeof(name));
	int r = model_get(c->st, &model_psnap_kind, NULL, name, out, &e);
	if (r == STORE_NOT_FOUND)
		return GRPC_NOT_FOUND;
	if (r < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "reading PillarSnapshot \"%s\": %s",
		                       name, e.msg);
	if (strcmp(str(out->spec.snapshot_id), snapshot_id)) {
		model_clear(&model_psnap_kind, out);
		return GRPC_NOT_FOUND;
	}
	return GRPC_OK;
}

uint64_t psnap_gen(const struct model_psnap *s)
{
	int64_t g = s->status.fencing_generation;
	return s->status.has_fencing_generation && g > 0 ? (uint64_t)g : 0;
}

void psnap_gen_set(struct model_psnap *s, uint64_t g)
{
	s->status.has_fencing_generation = true;
	s->status.fencing_generation = (int64_t)g;
}

bool psnap_deleting(const struct model_psnap *s)
{
	return s->status.has_deleting && s->status.deleting;
}

bool psnap_cut(const struct model_psnap *s)
{
	return s->status.creation_time && !psnap_deleting(s);
}

int psnap_target(struct psnap_target *t, const struct model_psnap *s, uint64_t gen)
{
	memset(t, 0, sizeof(*t));
	if (pvst_backend_params_of(&t->bb, &s->spec.backend, &t->params) < 0) {
		psnap_target_free(t);
		return -ENOMEM;
	}
	pillar_csi__agent__v1__fencing_token__init(&t->fence);
	t->fence.volume_uid = (char *)str(s->meta.uid);
	t->fence.generation = gen;
	t->snapshot_id = (char *)str(s->spec.agent_snapshot_id);
	t->backend_type = agents_backend_enum(str(s->spec.backend_type));
	return 0;
}

void psnap_target_free(struct psnap_target *t)
{
	pvst_backend_params_free(&t->bb);
}

void psnap_time_format(int64_t seconds, int32_t nanos, char *out, size_t cap)
{
	time_t t = (time_t)seconds;
	struct tm tm;
	char day[32];
	gmtime_r(&t, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, cap, "%s.%09dZ", day, nanos >= 0 && nanos < 1000000000 ? nanos : 0);
}

int psnap_time_parse(const char *text, int64_t *seconds, int32_t *nanos)
{
	struct tm tm = {0};
	int n = 0;
	if (!text || sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
		return -EINVAL;
	const char *p = text + n;
	long ns = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 9)
				ns = ns * 10 + (*p - '0');
		if (digits == 0)
			return -EINVAL;
		for (; digits < 9; digits++)
			ns *= 10;
	}
	if (strcmp(p, "Z"))
		return -EINVAL;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*seconds = (int64_t)timegm(&tm);
	*nanos = (int32_t)ns;
	return 0;
}

static char *dup(const char *s)
{
	return strdup(str(s));
}

Csi__V1__Snapshot *psnap_csi(const struct model_psnap *s)
{
	struct glue_pair m =
	    glue_new_pair(&csi__v1__snapshot__descriptor, &google__protobuf__timestamp__descriptor);
	if (!m.a)
		return NULL;
	Csi__V1__Snapshot *o = m.a;
	Google__Protobuf__Timestamp *ts = m.b;
	o->creation_time = ts;
	int64_t sec = 0;
	int32_t ns = 0;
	if (psnap_time_parse(s->status.creation_time, &sec, &ns) == 0) {
		ts->seconds = sec;
		ts->nanos = ns;
	}
	o->size_bytes = s->status.has_size_bytes ? s->status.size_bytes : 0;
	o->ready_to_use = s->status.has_ready_to_use && s->status.ready_to_use;
	o->snapshot_id = dup(s->spec.snapshot_id);
	o->source_volume_id = dup(s->spec.source_volume_id);
	if (!o->snapshot_id || !o->source_volume_id) {
		protobuf_c_message_free_unpacked(&o->base, NULL);
		return NULL;
	}
	return o;
}
