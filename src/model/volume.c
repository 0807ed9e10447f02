/* model volume: PillarVolumeState (crds.md §7): field table and validation. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

#include "base/str.h"
#include "model/codec.h"
#include "model/pillar.h"

#define PVST struct model_pvst

#define T __typeof__(((PVST *)0)->spec.claim_ref)
static const struct model_field claim_fields[] = {
    MODEL_F_STR("uid", uid),
    MODEL_F_STR("namespace", ns),
    MODEL_F_STR("name", name),
};
#undef T
static MODEL_TYPE(claim_type, __typeof__(((PVST *)0)->spec.claim_ref), claim_fields);

#define T __typeof__(((PVST *)0)->spec.content_source)
static const struct model_field source_fields[] = {
    MODEL_F_STR("snapshotID", snapshot_id),
    MODEL_F_STR("volumeID", volume_id),
};
#undef T
static MODEL_TYPE(source_type, __typeof__(((PVST *)0)->spec.content_source), source_fields);

#define T __typeof__(((PVST *)0)->spec)
static const struct model_field spec_fields[] = {
    MODEL_F_STR("volumeID", volume_id),
    MODEL_F_STR("agentVolumeID", agent_volume_id),
    MODEL_F_STR("agentRef", agent_ref),
    MODEL_F_STR("backendType", backend_type),
    MODEL_F_STR("protocolType", protocol_type),
    MODEL_F_INT("capacityBytes", capacity_bytes),
    MODEL_F_OBJ_HAS("claimRef", claim_ref, &claim_type),
    MODEL_F_OBJ_HAS("resolved", resolved, &model_resolved_type),
    MODEL_F_OBJ_HAS("contentSource", content_source, &source_type),
};
#undef T
static MODEL_TYPE(spec_type, __typeof__(((PVST *)0)->spec), spec_fields);

#define T __typeof__(((PVST *)0)->status.partial_failure)
static const struct model_field pf_fields[] = {
    MODEL_F_STR("failedOperation", failed_operation),
    MODEL_F_STR("failedAt", failed_at),
    MODEL_F_STR("reason", reason),
    MODEL_F_STR("message", message),
    MODEL_F_BOOL("backendCreated", backend_created),
    MODEL_F_BOOL("exportCreated", export_created),
};
#undef T
MODEL_TYPE(model_pvst_partial_failure_type, __typeof__(((PVST *)0)->status.partial_failure),
           pf_fields);

#define T __typeof__(((PVST *)0)->status.export_info)
static const struct model_field ei_fields[] = {
    MODEL_F_STR("targetID", target_id),
    MODEL_F_STR("address", address),
    MODEL_F_INT("port", port),
    MODEL_F_STR("volumeRef", volume_ref),
};
#undef T
MODEL_TYPE(model_pvst_export_info_type, __typeof__(((PVST *)0)->status.export_info), ei_fields);

#define T struct model_pvst_export_spec
static const struct model_field es_fields[] = {
    MODEL_F_STR("bindAddress", bind_address),
    MODEL_F_INT("port", port),
    MODEL_F_BOOL("aclEnabled", acl_enabled),
    MODEL_F_INT("inCapsuleDataSize", in_capsule_data_size),
};
#undef T
MODEL_TYPE(model_pvst_export_spec_type, struct model_pvst_export_spec, es_fields);

#define T struct model_pvst_published
static const struct model_field pub_fields[] = {
    MODEL_F_STR("nodeID", node_id),         MODEL_F_STR("initiatorID", initiator_id),
    MODEL_F_STR("accessMode", access_mode), MODEL_F_BOOL("readonly", readonly),
    MODEL_F_BOOL("revoking", revoking),
};
#undef T
MODEL_TYPE(model_pvst_published_type, struct model_pvst_published, pub_fields);

#define T __typeof__(((PVST *)0)->status)
static const struct model_field status_fields[] = {
    MODEL_F_STR("phase", phase),
    MODEL_F_OBJ_HAS("partialFailure", partial_failure, &model_pvst_partial_failure_type),
    MODEL_F_STR("backendDevicePath", backend_device_path),
    MODEL_F_OBJ_HAS("exportInfo", export_info, &model_pvst_export_info_type),
    MODEL_F_OBJ_HAS("exportSpec", export_spec, &model_pvst_export_spec_type),
    MODEL_F_LIST_HAS("publishedNodes", published, n_published, &model_pvst_published_type),
    MODEL_F_INT("publicationGeneration", publication_generation),
    MODEL_F_STR("reconciledDigest", reconciled_digest),
    MODEL_F_BOOL("deleting", deleting),
    MODEL_F_CONDS("conditions", conditions),
};
#undef T
static MODEL_TYPE(status_type, __typeof__(((PVST *)0)->status), status_fields);

#define T PVST
static const struct model_field pvst_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &spec_type),
    MODEL_F_OBJ("status", status, &status_type),
};
#undef T
static MODEL_TYPE(pvst_type, PVST, pvst_fields);
static int pvst_validate(const void *obj, struct err *e)
{
	return model_pvst_validate(obj, e);
}

static int pvst_validate_update(const void *old, const void *obj, struct err *e)
{
	return model_pvst_validate_update(old, obj, e);
}

const struct model_kind model_pvst_kind = {"PillarVolumeState",  "pillar-csi.bhyoo.com/v1alpha1",
                                           &pvst_type,           pvst_validate,
                                           pvst_validate_update, "spec"};

int model_pvst_validate_update(const struct model_pvst *old, const struct model_pvst *p,
                               struct err *e)
{
	return model_spec_unchanged(&model_pvst_kind, old, p, e);
}

static bool in(const char *v, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(v, *set))
			return true;
	return false;
}

static int export_spec_check(const struct model_pvst_export_spec *es, struct err *e)
{
	if (!es->bind_address)
		return err_set(e, -EINVAL, "status.exportSpec.bindAddress is required");
	if (!es->has_acl_enabled)
		return err_set(e, -EINVAL, "status.exportSpec.aclEnabled is required");
	if (es->has_port && (es->port < 0 || es->port > 65535))
		return err_set(e, -EINVAL, "status.exportSpec.port must be between 0 and 65535");
	if (es->has_in_capsule_data_size && es->in_capsule_data_size < 1024)
		return err_set(e, -EINVAL,
		               "status.exportSpec.inCapsuleDataSize must be at least 1024");
	return 0;
}

int model_pvst_validate(const struct model_pvst *p, struct err *e)
{
	static const char *const backends[] = {"zfs-zvol", "lvm-lv", "file", NULL};
	static const char *const phases[] = {
	    "Provisioning",     "CreatePartial", "Ready",         "ControllerPublished",
	    "NodeStagePartial", "NodeStaged",    "NodePublished", NULL};
#define PVST struct model_pvst
	static const struct model_name_field names[] = {
	    {"spec.volumeID", offsetof(PVST, spec.volume_id)},
	    {"spec.agentVolumeID", offsetof(PVST, spec.agent_volume_id)},
	    {"spec.agentRef", offsetof(PVST, spec.agent_ref)},
	    {"spec.claimRef.uid", offsetof(PVST, spec.claim_ref.uid)},
	    {"spec.claimRef.namespace", offsetof(PVST, spec.claim_ref.ns)},
	    {"spec.claimRef.name", offsetof(PVST, spec.claim_ref.name)},
	    {"spec.contentSource.snapshotID", offsetof(PVST, spec.content_source.snapshot_id)},
	    {"spec.contentSource.volumeID", offsetof(PVST, spec.content_source.volume_id)},
	    {"status.backendDevicePath", offsetof(PVST, status.backend_device_path)},
	    {"status.reconciledDigest", offsetof(PVST, status.reconciled_digest)},
	};
#undef PVST
	if (model_names_plain(p, names, sizeof(names) / sizeof(names[0]), e) < 0)
		return -EINVAL;
	if (p->spec.backend_type && !in(p->spec.backend_type, backends))
		return err_set(e, -EINVAL, "spec.backendType must be zfs-zvol, lvm-lv or file");
	if (p->spec.protocol_type && strcmp(p->spec.protocol_type, "nvmeof-tcp"))
		return err_set(e, -EINVAL, "spec.protocolType must be nvmeof-tcp");
	if (p->spec.has_claim_ref && (!p->spec.claim_ref.uid || !*p->spec.claim_ref.uid))
		return err_set(e, -EINVAL, "spec.claimRef.uid is required");
	if (p->spec.has_content_source && (p->spec.content_source.snapshot_id == NULL) ==
	                                      (p->spec.content_source.volume_id == NULL))
		return err_set(
		    e, -EINVAL,
		    "spec.contentSource must name exactly one of snapshotID and volumeID");
	if (p->status.phase && !in(p->status.phase, phases))
		return err_set(e, -EINVAL, "status.phase \"%s\" is not a known phase",
		               p->status.phase);
	if (p->status.has_export_spec && export_spec_check(&p->status.export_spec, e) < 0)
		return -EINVAL;
	for (size_t i = 0; i < p->status.n_published; i++) {
		const char *node = p->status.published[i].node_id;
		if (!node || !*node)
			return err_set(e, -EINVAL, "status.publishedNodes[%zu].nodeID is required",
			               i);
		if (str_has_control(node))
			return err_set(
			    e, -EINVAL,
			    "status.publishedNodes[%zu].nodeID contains a control character", i);
	}
	return 0;
}
