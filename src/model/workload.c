/* model workload: the read-only field tables of Deployment, StatefulSet and ReplicaSet
 * (model/kube.h).  Only what outage-plan reads is typed; the rest is kept as every kind keeps
 * it. */
#include "model/kube.h"

#include "model/codec.h"

#define SUB(S, path)                  __typeof__(((S *)0)->path)
#define SUBTYPE(var, S, path, fields) static MODEL_TYPE(var, SUB(S, path), fields)

/* ---- Deployment, StatefulSet, ReplicaSet ------------------------------------------------- */

#define T SUB(struct model_workload, spec)
static const struct model_field wl_spec_fields[] = {MODEL_F_INT("replicas", replicas)};
#undef T
SUBTYPE(wl_spec_type, struct model_workload, spec, wl_spec_fields);

#define T SUB(struct model_workload, status)
static const struct model_field wl_status_fields[] = {MODEL_F_INT("replicas", replicas)};
#undef T
SUBTYPE(wl_status_type, struct model_workload, status, wl_status_fields);

#define T struct model_workload
static const struct model_field wl_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &wl_spec_type),
    MODEL_F_OBJ("status", status, &wl_status_type),
};
#undef T
static MODEL_TYPE(wl_type, struct model_workload, wl_fields);
const struct model_kind model_deployment_kind = {
    .kind = "Deployment", .api_version = "apps/v1", .type = &wl_type};
const struct model_kind model_statefulset_kind = {
    .kind = "StatefulSet", .api_version = "apps/v1", .type = &wl_type};
const struct model_kind model_replicaset_kind = {
    .kind = "ReplicaSet", .api_version = "apps/v1", .type = &wl_type};

int64_t model_workload_replicas(const struct model_workload *w)
{
	return w->spec.has_replicas ? w->spec.replicas : 1;
}
