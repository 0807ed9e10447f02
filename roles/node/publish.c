#include "node/publish.h"

#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "model/kube.h"

static int set_identity(struct model_csinode *cn, const struct nvme_host_identity *id)
{
	if (model_map_set(&cn->meta.annotations, RULES_ANN_HOST_NQN, id->hostnqn) < 0 ||
	    model_map_set(&cn->meta.annotations, RULES_ANN_HOST_ID, id->hostid) < 0)
		return -ENOMEM;
	return 0;
}

static int create(store *s, const char *node_id, const struct nvme_host_identity *id, struct err *e)
{
	struct model_csinode cn = {0};
	int r = model_str_set(&cn.meta.name, node_id);
	cn.has_spec = true;
	if (r == 0)
		r = set_identity(&cn, id);
	r = r < 0 ? err_set(e, r, "out of memory")
	          : model_create(s, &model_csinode_kind, &cn, NULL, e);
	model_clear(&model_csinode_kind, &cn);
	return r;
}

static int upsert(store *s, const char *node_id, const struct nvme_host_identity *id, struct err *e)
{
	for (int attempt = 0; attempt < 5; attempt++) {
		struct model_csinode cur = {0};
		int r = model_get(s, &model_csinode_kind, NULL, node_id, &cur, e);
		if (r == STORE_NOT_FOUND) {
			r = create(s, node_id, id, e);
			if (r == STORE_ALREADY_EXISTS)
				continue;
			return r;
		}
		if (r < 0)
			return r;
		const char *nqn = model_map_get(&cur.meta.annotations, RULES_ANN_HOST_NQN);
		const char *hid = model_map_get(&cur.meta.annotations, RULES_ANN_HOST_ID);
		if (nqn && hid && strcmp(nqn, id->hostnqn) == 0 && strcmp(hid, id->hostid) == 0) {
			model_clear(&model_csinode_kind, &cur);
			return 0;
		}
		r = set_identity(&cur, id);
		r = r < 0 ? err_set(e, r, "out of memory")
		          : model_update(s, &model_csinode_kind, &cur, NULL, e);
		model_clear(&model_csinode_kind, &cur);
		if (r != STORE_CONFLICT)
			return r;
	}
	return err_set(e, STORE_CONFLICT, "CSINode \"%s\": too many concurrent updates", node_id);
}

void node_report_lost_store(void *ctx, const char *node_id, const char *lost_json)
{
	store *s = ctx;
	struct err e = {0};
	int r = STORE_CONFLICT;
	for (int attempt = 0; attempt < 5 && r == STORE_CONFLICT; attempt++) {
		struct model_csinode cur = {0};
		r = model_get(s, &model_csinode_kind, NULL, node_id, &cur, &e);
		if (r == 0 && (r = model_map_set(&cur.meta.annotations, RULES_ANN_LOST_VOLUMES,
		                                 lost_json)) == 0)
			r = model_update(s, &model_csinode_kind, &cur, NULL, &e);
		else if (r == -ENOMEM)
			err_set(&e, r, "out of memory");
		model_clear(&model_csinode_kind, &cur);
	}
	if (r < 0)
		log_error("lost volumes not reported on the CSINode", "node", node_id, "error",
		          e.msg);
	else
		log_info("lost volumes reported on the CSINode", "node", node_id, "volumes",
		         lost_json);
}

int node_identity_check_duplicates(store *s, const char *node_id,
                                   const struct nvme_host_identity *id, struct err *e)
{
	struct model_csinode *items = NULL;
	size_t n = 0;
	int r = model_list(s, &model_csinode_kind, NULL, NULL, (void **)&items, &n, NULL, e);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const char *other = items[i].meta.name;
		const char *nqn = model_map_get(&items[i].meta.annotations, RULES_ANN_HOST_NQN);
		const char *hid = model_map_get(&items[i].meta.annotations, RULES_ANN_HOST_ID);
		if (!other || strcmp(other, node_id) == 0)
			continue;
		if ((nqn && strcmp(nqn, id->hostnqn) == 0) ||
		    (hid && strcmp(hid, id->hostid) == 0)) {
			r = err_set(
			    e, -ENOTUNIQ,
			    "host NQN \"%s\" is also used by node \"%s\"; give every worker a "
			    "unique /etc/nvme/hostnqn and /etc/nvme/hostid",
			    id->hostnqn, other);
			log_error("DuplicateHostNQN", "node", node_id, "message", e ? e->msg : "");
			break;
		}
	}
	model_list_free(&model_csinode_kind, items, n);
	return r;
}

int node_publish_identity_store(void *ctx, const char *node_id, const struct nvme_host_identity *id,
                                struct err *e)
{
	store *s = ctx;
	int r = upsert(s, node_id, id, e);

	if (r < 0) {
		err_prefix(e, "publish host NQN on CSINode \"%s\"", node_id);
		return r;
	}
	log_info("host identity published", "node", node_id, "hostnqn", id->hostnqn);
	return node_identity_check_duplicates(s, node_id, id, e);
}
