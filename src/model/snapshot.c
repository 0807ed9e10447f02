/* model snapshot: PillarSnapshot (docs/objects.md): field table and validation. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

#include "model/codec.h"
#include "model/snapshot.h"

#define PSNAP struct model_psnap

#define T __typeof__(((PSNAP *)0)->spec.snapshot_ref)
static const struct model_field ref_fields[] = {
    MODEL_F_STR("namespace", ns),
    MODEL_F_STR("name", name),
    MODEL_F_STR("contentName", content_name),
};
#undef T
static MODEL_TYPE(ref_type, __typeof__(((PSNAP *)0)->spec.snapshot_ref), ref_fields);

#define T __typeof__(((PSNAP *)0)->spec)
static const struct model_field spec_fields[] = {
    MODEL_F_STR("snapshotID", snapshot_id),
    MODEL_F_STR("agentSnapshotID", agent_snapshot_id),
    MODEL_F_STR("snapshotName", snapshot_name),
    MODEL_F_STR("agentRef", agent_ref),
    MODEL_F_STR("backendType", backend_type),
    MODEL_F_STR("sourceVolumeID", source_volume_id),
    MODEL_F_STR("sourceVolumeState", source_volume_state),
    MODEL_F_OBJ_HAS("snapshotRef", snapshot_ref, &ref_type),
    MODEL_F_OBJ_HAS("backend", backend, &model_backend_type),
};
#undef T
static MODEL_TYPE(spec_type, __typeof__(((PSNAP *)0)->spec), spec_fields);

#define T __typeof__(((PSNAP *)0)->status)
static const struct model_field status_fields[] = {
    MODEL_F_STR("phase", phase),
    MODEL_F_INT("sizeBytes", size_bytes),
    MODEL_F_STR("creationTime", creation_time),
    MODEL_F_BOOL("readyToUse", ready_to_use),
    MODEL_F_INT("fencingGeneration", fencing_generation),
    MODEL_F_BOOL("deleting", deleting),
    MODEL_F_CONDS("conditions", conditions),
};
#undef T
static MODEL_TYPE(status_type, __typeof__(((PSNAP *)0)->status), status_fields);

#define T PSNAP
static const struct model_field psnap_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &spec_type),
    MODEL_F_OBJ("status", status, &status_type),
};
#undef T
static MODEL_TYPE(psnap_type, PSNAP, psnap_fields);

static int psnap_validate(const void *obj, struct err *e)
{
	return model_psnap_validate(obj, e);
}

static int psnap_validate_update(const void *old, const void *obj, struct err *e)
{
	return model_psnap_validate_update(old, obj, e);
}

const struct model_kind model_psnap_kind = {"PillarSnapshot",      "pillar-csi.bhyoo.com/v1alpha1",
                                            &psnap_type,           psnap_validate,
                                            psnap_validate_update, "spec"};

int model_psnap_validate_update(const struct model_psnap *old, const struct model_psnap *p,
                                struct err *e)
{
	return model_spec_unchanged(&model_psnap_kind, old, p, e);
}

static bool empty(const char *s)
{
	return !s || !*s;
}

int model_psnap_validate(const struct model_psnap *p, struct err *e)
{
	static const struct {
		const char *name;
		size_t off;
	} required[] = {
	    {"snapshotID", offsetof(PSNAP, spec.snapshot_id)},
	    {"agentSnapshotID", offsetof(PSNAP, spec.agent_snapshot_id)},
	    {"agentRef", offsetof(PSNAP, spec.agent_ref)},
	    {"sourceVolumeID", offsetof(PSNAP, spec.source_volume_id)},
	};
	static const struct model_name_field names[] = {
	    {"spec.snapshotID", offsetof(PSNAP, spec.snapshot_id)},
	    {"spec.agentSnapshotID", offsetof(PSNAP, spec.agent_snapshot_id)},
	    {"spec.snapshotName", offsetof(PSNAP, spec.snapshot_name)},
	    {"spec.agentRef", offsetof(PSNAP, spec.agent_ref)},
	    {"spec.sourceVolumeID", offsetof(PSNAP, spec.source_volume_id)},
	    {"spec.snapshotRef.namespace", offsetof(PSNAP, spec.snapshot_ref.ns)},
	    {"spec.snapshotRef.name", offsetof(PSNAP, spec.snapshot_ref.name)},
	    {"spec.snapshotRef.contentName", offsetof(PSNAP, spec.snapshot_ref.content_name)},
	};
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (empty(*(char *const *)((const char *)p + required[i].off)))
			return err_set(e, -EINVAL, "spec.%s is required", required[i].name);
	if (model_names_plain(p, names, sizeof(names) / sizeof(names[0]), e) < 0)
		return -EINVAL;
	const char *b = p->spec.backend_type;
	if (!b || (strcmp(b, "zfs-zvol") && strcmp(b, "lvm-lv") && strcmp(b, "file")))
		return err_set(e, -EINVAL, "spec.backendType must be zfs-zvol, lvm-lv or file");
	const char *ph = p->status.phase;
	if (ph && strcmp(ph, "Creating") && strcmp(ph, "Ready"))
		return err_set(e, -EINVAL, "status.phase \"%s\" is not a known phase", ph);
	if (p->status.has_size_bytes && p->status.size_bytes < 0)
		return err_set(e, -EINVAL, "status.sizeBytes must be at least 0");
	if (p->status.has_fencing_generation && p->status.fencing_generation < 0)
		return err_set(e, -EINVAL, "status.fencingGeneration must be at least 0");
	return 0;
}
