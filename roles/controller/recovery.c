/* controller/recovery — pods of volumes whose NVMe controller a worker's kernel removed
 * (recovery.h). */
#include "controller/recovery.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "cluster/events.h"
#include "model/kube.h"
#include "model/pillar.h"
#include "rules/conditions.h"
#include "rules/keys.h"
#include "rules/volid.h"

struct lost {
	char id[RULES_VOLID_CAP];
	char since[32];
	time_t since_s;
};

/* A JSON string without escapes at *p (advanced past it) into buf; -EINVAL otherwise. */
static int quoted(const char **p, char *buf, size_t cap)
{
	const char *s = *p, *end;
	if (*s != '"' || !(end = strchr(s + 1, '"')) ||
	    memchr(s + 1, '\\', (size_t)(end - s - 1)) || (size_t)(end - s - 1) >= cap)
		return -EINVAL;
	memcpy(buf, s + 1, (size_t)(end - s - 1));
	buf[end - s - 1] = '\0';
	*p = end + 1;
	return 0;
}

static time_t rfc3339(const char *s)
{
	struct tm tm = {0};
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return end && !*end ? timegm(&tm) : (time_t)-1;
}

/* {"<volume ID>":"<RFC 3339>",...} into out (at most max); the count, or -EINVAL. */
static int parse_lost(const char *p, struct lost *out, int max)
{
	int n = 0;
	if (*p++ != '{')
		return -EINVAL;
	if (*p == '}')
		return p[1] ? -EINVAL : 0;
	for (;;) {
		struct lost l;
		if (quoted(&p, l.id, sizeof(l.id)) < 0 || *p++ != ':' ||
		    quoted(&p, l.since, sizeof(l.since)) < 0 ||
		    (l.since_s = rfc3339(l.since)) == (time_t)-1)
			return -EINVAL;
		if (n < max)
			out[n++] = l;
		if (*p == '}')
			return p[1] ? -EINVAL : n;
		if (*p++ != ',')
			return -EINVAL;
	}
}

static void record(struct ctl *c, const struct kube_event_ref *r, const char *type,
                   const char *reason, const char *msg)
{
	if (c->rec)
		kube_events_record(c->rec, r, type, reason, "%s", msg);
}

/* The controller may not list or delete pods (the chart value recovery.deletePods is off). */
static void forbidden(struct ctl *c, const struct model_pvst *v, struct err *e)
{
	struct kube_event_ref pvc = {"v1", "PersistentVolumeClaim", v->spec.claim_ref.ns,
	                             v->spec.claim_ref.name, v->spec.claim_ref.uid};
	log_warn("no pod deleted after ctrlLossTmo", "volume", v->meta.name, "error", e->msg);
	record(
	    c, &pvc, KUBE_EVENT_WARNING, RULES_EVENT_POD_RECOVERY_FORBIDDEN,
	    "the volume's PillarProtocol sets deletePodsAfterCtrlLoss but the controller may not "
	    "list or delete pods: set the chart value recovery.deletePods=true");
	*e = (struct err){0};
}

/* The kind of pod p's controller owner reference when it is one that recreates its pods. */
static const char *recreating_owner(const struct model_pod *p, const char **name)
{
	static const char *const kinds[] = {"ReplicaSet", "StatefulSet", "DaemonSet", "Job"};
	for (size_t i = 0; i < p->meta.n_owner_refs; i++) {
		const struct model_owner_ref *o = &p->meta.owner_refs[i];
		if (!o->has_controller || !o->controller || !o->kind)
			continue;
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
			if (!strcmp(o->kind, kinds[k])) {
				*name = o->name ? o->name : "";
				return kinds[k];
			}
	}
	return NULL;
}

static bool mounts_claim(const struct model_pod *p, const char *claim)
{
	for (size_t i = 0; i < p->spec.n_volumes; i++)
		if (p->spec.volumes[i].has_pvc && p->spec.volumes[i].pvc.claim_name &&
		    !strcmp(p->spec.volumes[i].pvc.claim_name, claim))
			return true;
	return false;
}

/* One pod of the claim on the node: deleted when a controller recreates it, else a Warning. */
static int pod_of_lost(struct ctl *c, const char *node, const struct model_pvst *v,
                       const struct lost *l, const struct model_pod *p, struct err *e)
{
	const char *ns = v->spec.claim_ref.ns, *claim = v->spec.claim_ref.name, *owner_name = NULL;
	struct kube_event_ref pod = {"v1", "Pod", ns, p->meta.name, p->meta.uid};
	struct kube_event_ref pvc = {"v1", "PersistentVolumeClaim", ns, claim,
	                             v->spec.claim_ref.uid};
	const char *owner = recreating_owner(p, &owner_name);
	char msg[1400];
	if (!owner) {
		snprintf(
		    msg, sizeof(msg),
		    "pod %s/%s on node %s uses volume %s, whose NVMe controller the kernel "
		    "removed at %s (ctrlLossTmo ran out); it has no ReplicaSet, StatefulSet, "
		    "DaemonSet or Job to recreate it, so it is not deleted: restart it by hand",
		    ns, p->meta.name, node, v->meta.name, l->since);
		record(c, &pod, KUBE_EVENT_WARNING, RULES_EVENT_POD_NOT_DELETED, msg);
		record(c, &pvc, KUBE_EVENT_WARNING, RULES_EVENT_POD_NOT_DELETED, msg);
		return 0;
	}
	int r =
	    store_delete(c->st, store_kind_lookup("Pod"), ns, p->meta.name, p->meta.uid, NULL, e);
	if (r == STORE_NOT_FOUND || r == STORE_CONFLICT) /* gone, or already replaced */
		return 0;
	if (r == -EACCES || r == -EPERM) {
		forbidden(c, v, e);
		return 0;
	}
	if (r < 0)
		return r;
	snprintf(msg, sizeof(msg),
	         "deleted pod %s/%s (owned by %s %s) on node %s: the kernel removed the NVMe "
	         "controller of volume %s at %s (ctrlLossTmo ran out); its %s recreates it and the "
	         "volume is staged on a new connection",
	         ns, p->meta.name, owner, owner_name, node, v->meta.name, l->since, owner);
	log_info("pod deleted after ctrlLossTmo", "pod", p->meta.name, "namespace", ns, "node",
	         node, "volume", v->meta.name);
	record(c, &pod, KUBE_EVENT_NORMAL, RULES_EVENT_POD_DELETED, msg);
	record(c, &pvc, KUBE_EVENT_NORMAL, RULES_EVENT_POD_DELETED, msg);
	return 0;
}

/* The pods of volume v's claim on the node that predate the report. */
static int claim_pods(struct ctl *c, const char *node, const struct model_pvst *v,
                      const struct lost *l, struct err *e)
{
	const char *ns = v->spec.claim_ref.ns, *claim = v->spec.claim_ref.name;
	void *items = NULL;
	size_t n = 0;
	int r = model_list(c->st, &model_pod_kind, ns, NULL, &items, &n, NULL, e);
	if (r == -EACCES || r == -EPERM) {
		forbidden(c, v, e);
		return 0;
	}
	for (size_t i = 0; r == 0 && i < n; i++) {
		const struct model_pod *p = (const struct model_pod *)items + i;
		time_t born = p->meta.creation_timestamp ? rfc3339(p->meta.creation_timestamp) : -1;
		if (!p->meta.name || !p->spec.node_name || strcmp(p->spec.node_name, node) ||
		    p->meta.deletion_timestamp || !mounts_claim(p, claim) || born == (time_t)-1 ||
		    born >= l->since_s)
			continue;
		r = pod_of_lost(c, node, v, l, p, e);
	}
	model_list_free(&model_pod_kind, items, n);
	return r;
}

static bool opted_in(const struct model_pvst *v)
{
	const struct model_resolved *rs = &v->spec.resolved;
	return v->spec.has_resolved && rs->has_protocol && rs->protocol.has_nvmeof_tcp &&
	       rs->protocol.nvmeof_tcp.has_delete_pods_after_ctrl_loss &&
	       rs->protocol.nvmeof_tcp.delete_pods_after_ctrl_loss;
}

static bool published_to(const struct model_pvst *v, const char *node)
{
	for (size_t i = 0; i < v->status.n_published; i++)
		if (v->status.published[i].node_id && !strcmp(v->status.published[i].node_id, node))
			return true;
	return false;
}

static int lost_volume(struct ctl *c, const char *node, const struct lost *l, struct err *e)
{
	struct rules_volid id;
	char name[RULES_PVST_NAME_CAP];
	struct model_pvst v = {0};
	if (rules_volid_parse(l->id, &id) < 0)
		return 0;
	rules_pvst_name(id.name, name, sizeof(name));
	int r = model_get(c->st, &model_pvst_kind, NULL, name, &v, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r == 0 && opted_in(&v) && v.spec.volume_id && !strcmp(v.spec.volume_id, l->id) &&
	    v.spec.has_claim_ref && v.spec.claim_ref.ns && v.spec.claim_ref.name &&
	    published_to(&v, node))
		r = claim_pods(c, node, &v, l, e);
	model_clear(&model_pvst_kind, &v);
	return r;
}

int reconcile_lost(struct ctl *c, const char *node, struct err *e)
{
	struct model_csinode cn = {0};
	int r = model_get(c->st, &model_csinode_kind, NULL, node, &cn, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	const char *report = model_map_get(&cn.meta.annotations, RULES_ANN_LOST_VOLUMES);
	struct lost *l = report ? calloc(RECOVERY_LOST_MAX, sizeof(*l)) : NULL;
	int n = l ? parse_lost(report, l, RECOVERY_LOST_MAX) : 0;
	if (report && !l)
		r = err_set(e, -ENOMEM, "out of memory");
	if (n < 0)
		log_warn("ignoring a malformed lost-volume report", "node", node, "annotation",
		         report);
	for (int i = 0; r == 0 && i < n; i++)
		r = lost_volume(c, node, &l[i], e);
	free(l);
	model_clear(&model_csinode_kind, &cn);
	return r;
}
