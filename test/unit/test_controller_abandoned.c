/* crds.md §7.6: abandoned provisioning attempts are deleted, and nothing else is; creates a
 * power cut left unfinished after their answer are completed, never deleted. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "controller/csi.h"
#include "controller/reconcile.h"
#include "ctl_fixture.h"
#include "fake_agent.h"
#include "testutil.h"

static const char *phase_of(const char *name)
{
	static char buf[64];
	char pname[128];
	rules_pvst_name(name, pname, sizeof(pname));
	cJSON *o = fx_get("PillarVolumeState", pname);
	if (!o)
		return "(gone)";
	const char *p = json_get_str(cJSON_GetObjectItem(o, "status"), "phase");
	snprintf(buf, sizeof(buf), "%s", p ? p : "");
	cJSON_Delete(o);
	return buf;
}

START_TEST(test_abandoned_attempts)
{
	struct grpc_status gs = {0};
	char live[80], gone[80], vid[512];
	int deleted = -1;
	long long now = (long long)time(NULL);

	fx_objects(false);
	/* a claim that still exists */
	fx_put("PersistentVolumeClaim", "apps", "data", NULL, "{}", NULL);
	cJSON *pvc = NULL;
	ck_assert_int_eq(store_get(fx_st, store_kind_lookup("pvc"), "apps", "data", &pvc, NULL), 0);
	snprintf(live, sizeof(live), "pvc-%s", store_meta_str(pvc, "uid"));
	cJSON_Delete(pvc);
	snprintf(gone, sizeof(gone), "pvc-0b6c3c1e-7d2a-4e7b-9a51-3c2f1d0e9b88");

	/* three attempts that stop at the export: CreatePartial */
	static const char *const params[] = {"pillar-csi.bhyoo.com/storage-class", "fast", NULL};
	const char *names[] = {live, gone, "plain-volume"};
	for (int i = 0; i < 3; i++) {
		fake_agent_fail(fx_fa, "ExportVolume", GRPC_UNAVAILABLE, "agent unreachable");
		int rc = fx_create(names[i], params, false, vid, sizeof(vid), &gs);
		ck_assert_msg(rc == GRPC_UNAVAILABLE, "create %s: %d %s", names[i], rc, gs.msg);
		ck_assert_str_eq(phase_of(names[i]), "CreatePartial");
	}
	/* too young: untouched */
	ck_assert_int_eq(reconcile_abandoned(&fx_c, now, &deleted, NULL), 0);
	ck_assert_int_eq(deleted, 0);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "DeleteVolume"), 0);

	/* eleven minutes later: only the attempt whose claim is gone goes */
	ck_assert_int_eq(reconcile_abandoned(&fx_c, now + 660, &deleted, NULL), 0);
	ck_assert_int_eq(deleted, 1);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "DeleteVolume"), 1);
	ck_assert_str_eq(phase_of(gone), "(gone)");
	ck_assert_str_eq(phase_of(live), "CreatePartial");
	ck_assert_str_eq(phase_of("plain-volume"), "CreatePartial"); /* no claimRef: never */

	/* the claim goes but a PV of the same name exists: still not abandoned */
	ck_assert_int_eq(
	    store_delete(fx_st, store_kind_lookup("pvc"), "apps", "data", NULL, NULL, NULL), 0);
	fx_put("PersistentVolume", NULL, live, NULL, "{}", NULL);
	ck_assert_int_eq(reconcile_abandoned(&fx_c, now + 660, &deleted, NULL), 0);
	ck_assert_int_eq(deleted, 0);
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("pv"), NULL, live, NULL, NULL, NULL),
	                 0);
	/* a claim whose record cannot be read may be this one: never deleted on that guess */
	char broken[700];
	tu_write(fx_dir, "persistentvolumeclaims/apps/broken.json", "{\"kind\":\"Persist");
	ck_assert_int_eq(reconcile_abandoned(&fx_c, now + 660, &deleted, NULL), 0);
	ck_assert_int_eq(deleted, 0);
	ck_assert_str_eq(phase_of(live), "CreatePartial");
	snprintf(broken, sizeof(broken), "%s/persistentvolumeclaims/apps/broken.json", fx_dir);
	ck_assert_int_eq(unlink(broken), 0);
	ck_assert_int_eq(reconcile_abandoned(&fx_c, now + 660, &deleted, NULL), 0);
	ck_assert_int_eq(deleted, 1);
	ck_assert_str_eq(phase_of(live), "(gone)");
}
END_TEST

/* A power cut took the lazy Ready write of an answered create (csi_volume.c): the object is
 * back at its intent, Provisioning, without the success-recorded annotation, the agent's volume
 * created and exported.  With the store's note (store_dir_lazy_lost) the pass marks it before
 * any reaping (old, no claim, no PV: without the mark it would be deleted), provisions it again
 * to Ready, removes the note; a CreateVolume retry answers the same volume. */
static void intent_again(const char *name)
{
	char pname[128];
	rules_pvst_name(name, pname, sizeof(pname));
	cJSON *o = fx_get("PillarVolumeState", pname);
	ck_assert_ptr_nonnull(o);
	cJSON *st = cJSON_GetObjectItem(o, "status");
	cJSON_ReplaceItemInObject(st, "phase", cJSON_CreateString("Provisioning"));
	cJSON_DeleteItemFromObject(st, "exportInfo");
	cJSON_DeleteItemFromObject(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations"),
	    RULES_ANN_SUCCESS);
	ck_assert_int_eq(store_update_with_status(fx_st, o, NULL, NULL), 0);
	cJSON_Delete(o);
}

static int expand(const char *vid, struct grpc_status *gs)
{
	Csi__V1__ControllerExpandVolumeRequest req =
	    CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerExpandVolumeResponse resp =
	    CSI__V1__CONTROLLER_EXPAND_VOLUME_RESPONSE__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	cr.required_bytes = 2LL << 30;
	req.volume_id = (char *)vid;
	req.capacity_range = &cr;
	return csi_controller_expand(&fx_c, &req, &resp, gs);
}

START_TEST(test_unfinished_creates_after_a_power_cut)
{
	struct grpc_status gs = {0};
	static const char *const params[] = {"pillar-csi.bhyoo.com/storage-class", "fast", NULL};
	const char *name = "pvc-0b6c3c1e-7d2a-4e7b-9a51-3c2f1d0e9b88"; /* its claim is gone */
	char vid[512], again[512];
	int deleted = -1;
	long long now = (long long)time(NULL);

	fx_objects(false);
	ck_assert_int_eq(fx_create(name, params, false, vid, sizeof(vid), &gs), GRPC_OK);
	intent_again(name);
	/* the agent's size never outgrows what the recovery provisions again: retry later */
	ck_assert_int_eq(expand(vid, &gs), GRPC_UNAVAILABLE);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ExpandVolume"), 0);
	ck_assert(!store_dir_lazy_lost(fx_st)); /* as the first lock holder after a cut notes: */
	tu_write(fx_dir, ".lazy-lost", "");
	ck_assert(store_dir_lazy_lost(fx_st));
	unsigned creates = fake_agent_count(fx_fa, "CreateVolume");
	ck_assert_int_eq(reconcile_abandoned(&fx_c, now + 660, &deleted, NULL), 0);
	ck_assert_int_eq(deleted, 0);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "DeleteVolume"), 0);
	ck_assert_str_eq(phase_of(name), "Ready");
	ck_assert_uint_eq(fake_agent_count(fx_fa, "CreateVolume"), creates + 1);
	ck_assert(!store_dir_lazy_lost(fx_st));
	ck_assert_int_eq(fx_create(name, params, false, again, sizeof(again), &gs), GRPC_OK);
	ck_assert_str_eq(again, vid);
	ck_assert_int_eq(expand(vid, &gs), GRPC_OK);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "ExpandVolume"), 1);

	/* marked, but the agent is unreachable: tried again at the next pass, never reaped */
	intent_again(name);
	tu_write(fx_dir, ".lazy-lost", "");
	fake_agent_fail(fx_fa, "CreateVolume", GRPC_UNAVAILABLE, "agent unreachable");
	ck_assert_int_eq(reconcile_abandoned(&fx_c, now + 660, &deleted, NULL), 0);
	ck_assert_int_eq(deleted, 0);
	ck_assert_str_eq(phase_of(name), "Provisioning");
	ck_assert(!store_dir_lazy_lost(fx_st));
	ck_assert_int_eq(reconcile_abandoned(&fx_c, now + 1320, &deleted, NULL), 0);
	ck_assert_int_eq(deleted, 0);
	ck_assert_str_eq(phase_of(name), "Ready");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_abandoned");
	TCase *t = tcase_create("abandoned");
	tcase_add_checked_fixture(t, fx_setup, fx_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_abandoned_attempts);
	tcase_add_test(t, test_unfinished_creates_after_a_power_cut);
	suite_add_tcase(s, t);
	return tu_run(s);
}
