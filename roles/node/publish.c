#include "node/publish.h"

#include <errno.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"

static cJSON *annotations_of(cJSON *obj)
{
	cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	cJSON *a = cJSON_GetObjectItemCaseSensitive(m, "annotations");
	if (!cJSON_IsObject(a)) {
		cJSON_DeleteItemFromObjectCaseSensitive(m, "annotations");
		a = cJSON_AddObjectToObject(m, "annotations");
	}
	return a;
}

static void set_ann(cJSON *ann, const char *k, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(ann, k);
	cJSON_AddStringToObject(ann, k, v);
}

static int upsert(store *s, const char *node_id, const struct nvme_host_identity *id, struct err *e)
{
	const struct store_kind *k = store_kind_lookup("CSINode");
	for (int attempt = 0; attempt < 5; attempt++) {
		cJSON *cur = NULL;
		int r = store_get(s, k, NULL, node_id, &cur, e);
		if (r == STORE_NOT_FOUND) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "apiVersion", k->api_version);
			cJSON_AddStringToObject(o, "kind", k->kind);
			cJSON *m = cJSON_AddObjectToObject(o, "metadata");
			cJSON_AddStringToObject(m, "name", node_id);
			cJSON *ann = annotations_of(o);
			set_ann(ann, RULES_ANN_HOST_NQN, id->hostnqn);
			set_ann(ann, RULES_ANN_HOST_ID, id->hostid);
			cJSON_AddObjectToObject(o, "spec");
			r = store_create(s, o, NULL, e);
			cJSON_Delete(o);
			if (r == STORE_ALREADY_EXISTS)
				continue;
			return r;
		}
		if (r < 0)
			return r;
		cJSON *ann = annotations_of(cur);
		const char *nqn = json_get_str(ann, RULES_ANN_HOST_NQN);
		const char *hid = json_get_str(ann, RULES_ANN_HOST_ID);
		if (nqn && hid && strcmp(nqn, id->hostnqn) == 0 && strcmp(hid, id->hostid) == 0) {
			cJSON_Delete(cur);
			return 0;
		}
		set_ann(ann, RULES_ANN_HOST_NQN, id->hostnqn);
		set_ann(ann, RULES_ANN_HOST_ID, id->hostid);
		r = store_update(s, cur, NULL, e);
		cJSON_Delete(cur);
		if (r != STORE_CONFLICT)
			return r;
	}
	return err_set(e, STORE_CONFLICT, "CSINode \"%s\": too many concurrent updates", node_id);
}

int node_publish_identity_store(void *ctx, const char *node_id, const struct nvme_host_identity *id,
                                struct err *e)
{
	store *s = ctx;
	cJSON *items = NULL, *it;
	int r = upsert(s, node_id, id, e);

	if (r < 0) {
		err_prefix(e, "publish host NQN on CSINode \"%s\"", node_id);
		return r;
	}
	log_info("host identity published", "node", node_id, "hostnqn", id->hostnqn);
	r = store_list(s, store_kind_lookup("CSINode"), NULL, NULL, &items, NULL, e);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(it, items)
	{
		const char *other = store_meta_str(it, "name");
		const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(it, "metadata"), "annotations");
		const char *nqn = json_get_str(ann, RULES_ANN_HOST_NQN);
		const char *hid = json_get_str(ann, RULES_ANN_HOST_ID);
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
	cJSON_Delete(items);
	return r;
}
