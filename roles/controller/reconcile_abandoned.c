/* Abandoned provisioning attempts (crds.md §7.6): a PillarVolumeState still Provisioning or
 * CreatePartial after 10 minutes, provisioned for a claim (spec.claimRef) that no longer exists
 * and never recorded as a success, is deleted through the normal DeleteVolume sequence, so the
 * backend volume and its export do not leak.  Volumes without claimRef are never touched. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/log.h"
#include "controller/csi.h"
#include "controller/reconcile.h"

static long long ts_of(const char *ts)
{
	struct tm tm = {0};
	if (!ts || !strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -1;
	return (long long)timegm(&tm);
}

/* true when a PVC with this uid exists (any namespace), or the list cannot be read */
static bool claim_exists(struct ctl *c, const char *uid)
{
	cJSON *items = NULL, *it;
	bool found = false;
	if (store_list(c->st, kind_of("PersistentVolumeClaim"), NULL, NULL, &items, NULL, NULL) < 0)
		return true; /* unknown: never delete on a guess */
	cJSON_ArrayForEach(it, items)
	{
		const char *u = store_meta_str(it, "uid");
		found |= u && strcmp(u, uid) == 0;
	}
	cJSON_Delete(items);
	return found;
}

int reconcile_abandoned(struct ctl *c, long long now, int *deleted, struct err *e)
{
	cJSON *items = NULL, *it;
	int r = store_list(c->st, kind_of("PillarVolumeState"), NULL, NULL, &items, NULL, e);
	if (deleted)
		*deleted = 0;
	if (r < 0)
		return r;
	cJSON_ArrayForEach(it, items)
	{
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(it, "spec");
		const cJSON *status = cJSON_GetObjectItemCaseSensitive(it, "status");
		const cJSON *claim = cJSON_GetObjectItemCaseSensitive(spec, "claimRef");
		const char *phase = json_get_str(status, "phase");
		const char *name = store_meta_str(it, "name");
		const char *uid = json_get_str(claim, "uid");
		const char *volid = json_get_str(spec, "volumeID");
		const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(it, "metadata"), "annotations");
		long long born = ts_of(store_meta_str(it, "creationTimestamp"));
		cJSON *pv = NULL;

		if (!uid || !*uid || !volid || !name || born < 0 || now - born < ABANDONED_AGE_S)
			continue;
		if (!phase ||
		    (strcmp(phase, "Provisioning") != 0 && strcmp(phase, "CreatePartial") != 0))
			continue;
		if (json_get_str(ann, RULES_ANN_SUCCESS))
			continue;
		if (store_get(c->st, kind_of("PersistentVolume"), NULL, name, &pv, NULL) !=
		    STORE_NOT_FOUND) {
			cJSON_Delete(pv);
			continue; /* a PV exists (or the store could not tell): not abandoned */
		}
		if (claim_exists(c, uid))
			continue;
		Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
		Csi__V1__DeleteVolumeResponse *resp = NULL;
		struct grpc_status gs = {0};
		req.volume_id = (char *)volid;
		int code = csi_delete_volume(c, &req, &resp, &gs);
		if (resp)
			protobuf_c_message_free_unpacked(&resp->base, NULL);
		if (code == GRPC_OK) {
			log_info("abandoned provisioning attempt deleted", "volume", volid, "phase",
			         phase, "claimUID", uid);
			if (deleted)
				(*deleted)++;
		} else {
			log_warn("abandoned provisioning attempt not deleted yet", "volume", volid,
			         "error", gs.msg);
		}
	}
	cJSON_Delete(items);
	return 0;
}
