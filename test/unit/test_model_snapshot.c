/* src/model: PillarSnapshot (docs/objects.md) and PillarVolumeState's spec.contentSource — the
 * codec keeps every field (and unknown ones), the validation refuses what the CRD refuses with
 * its message, the spec is immutable, and the embedded store and the CLI's kind lookup know the
 * kind by its names. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "model/snapshot.h"
#include "testutil.h"

#define PSNAP_SPEC                                                                                 \
	"\"spec\":{\"snapshotID\":\"storage-1/snapshot/zfs-zvol/tank/snapshot-1\","                \
	"\"agentSnapshotID\":\"tank/snapshot-1\",\"snapshotName\":\"snapshot-1\","                 \
	"\"agentRef\":\"storage-1\",\"backendType\":\"zfs-zvol\",\"sourceVolumeID\":"              \
	"\"storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1\",\"sourceVolumeState\":\"pvc-1\","            \
	"\"snapshotRef\":{\"namespace\":\"default\",\"name\":\"snap\",\"contentName\":"            \
	"\"snapcontent-1\"},\"backend\":{\"zfs\":{\"pool\":\"tank\",\"properties\":{\"a\":\"b\"}}" \
	"},"                                                                                       \
	"\"xFuture\":1}"
#define PSNAP_DOC(status)                                                                \
	"{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarSnapshot\"," \
	"\"metadata\":{\"name\":\"snapshot-1\"}," PSNAP_SPEC ",\"status\":" status "}"
#define PSNAP_STATUS                                                                      \
	"{\"phase\":\"Ready\",\"sizeBytes\":1073741824,\"creationTime\":"                 \
	"\"2026-12-06T16:00:00.123456789Z\",\"readyToUse\":true,\"fencingGeneration\":2," \
	"\"deleting\":false,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","     \
	"\"reason\":\"SnapshotReady\",\"message\":\"\",\"lastTransitionTime\":"           \
	"\"2026-12-06T16:00:00Z\"}]}"

START_TEST(test_roundtrip)
{
	struct model_psnap p;
	struct err e = {0};
	const char *text = PSNAP_DOC(PSNAP_STATUS);
	ck_assert_msg(model_decode_text(&model_psnap_kind, text, &p, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(p.spec.snapshot_id, "storage-1/snapshot/zfs-zvol/tank/snapshot-1");
	ck_assert_str_eq(p.spec.snapshot_ref.content_name, "snapcontent-1");
	ck_assert_str_eq(p.spec.backend.zfs.pool, "tank");
	ck_assert(p.status.ready_to_use && p.status.size_bytes == 1073741824);
	ck_assert_int_eq(p.status.fencing_generation, 2);
	ck_assert_int_eq(model_psnap_validate(&p, &e), 0);
	cJSON *in = NULL, *out = model_encode(&model_psnap_kind, &p);
	ck_assert_int_eq(json_parse_strict(text, strlen(text), &in, NULL), 0);
	ck_assert_msg(cJSON_Compare(in, out, true), "the round trip changed the object");
	cJSON_Delete(in);
	cJSON_Delete(out);
	model_clear(&model_psnap_kind, &p);
}
END_TEST

static void refused(const char *text, const char *msg)
{
	struct model_psnap p;
	struct err e = {0};
	ck_assert_msg(model_decode_text(&model_psnap_kind, text, &p, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(model_psnap_validate(&p, &e), -EINVAL);
	ck_assert_str_eq(e.msg, msg);
	model_clear(&model_psnap_kind, &p);
}

START_TEST(test_validate)
{
	refused("{\"spec\":{}}", "spec.snapshotID is required");
	refused("{\"spec\":{\"snapshotID\":\"a\",\"agentSnapshotID\":\"p/n\",\"agentRef\":\"s\"}}",
	        "spec.sourceVolumeID is required");
	refused("{\"spec\":{\"snapshotID\":\"a\",\"agentSnapshotID\":\"\",\"agentRef\":\"s\"}}",
	        "spec.agentSnapshotID is required");
	refused("{" PSNAP_SPEC ",\"status\":{\"phase\":\"Gone\"}}",
	        "status.phase \"Gone\" is not a known phase");
	refused("{" PSNAP_SPEC ",\"status\":{\"sizeBytes\":-1}}",
	        "status.sizeBytes must be at least 0");
	refused("{\"spec\":{\"snapshotID\":\"a\",\"agentSnapshotID\":\"p/n\",\"agentRef\":\"s\","
	        "\"sourceVolumeID\":\"v\",\"backendType\":\"ceph\"}}",
	        "spec.backendType must be zfs-zvol, lvm-lv or file");
	refused("{" PSNAP_SPEC ",\"status\":{\"fencingGeneration\":-3}}",
	        "status.fencingGeneration must be at least 0");
	/* IDs and names: an escaped control character is valid JSON, never a valid ID */
	refused("{\"spec\":{\"snapshotID\":\"a\\n\",\"agentSnapshotID\":\"p/n\",\"agentRef\":\"s\","
	        "\"sourceVolumeID\":\"v\",\"backendType\":\"file\"}}",
	        "spec.snapshotID contains a control character");
	refused(
	    "{\"spec\":{\"snapshotID\":\"a\",\"agentSnapshotID\":\"p/\\u001b\",\"agentRef\":\"s\","
	    "\"sourceVolumeID\":\"v\",\"backendType\":\"file\"}}",
	    "spec.agentSnapshotID contains a control character");
}
END_TEST

START_TEST(test_store_and_immutable_spec)
{
	const char *dir = tu_mkdtemp();
	store *st = NULL;
	struct err e = {0};
	struct model_psnap in, out;
	ck_assert_int_eq(store_dir_open(dir, true, 50, &st, NULL), 0);
	ck_assert_int_eq(
	    model_decode_text(&model_psnap_kind, PSNAP_DOC("{\"phase\":\"Creating\"}"), &in, NULL),
	    0);
	ck_assert_msg(model_create_with_status(st, &model_psnap_kind, &in, &out, &e) == 0, "%s",
	              e.msg);
	ck_assert_str_eq(out.status.phase, "Creating");
	ck_assert_int_eq(model_str_set(&out.spec.source_volume_id, "other"), 0);
	ck_assert_int_eq(model_update(st, &model_psnap_kind, &out, NULL, &e), STORE_INVALID);
	ck_assert_str_eq(e.msg, "PillarSnapshot \"snapshot-1\" is invalid: spec is immutable");
	model_clear(&model_psnap_kind, &out);
	/* the kind is known by its names (the CLI's `get psnap`) */
	const struct store_kind *k = store_kind_lookup("psnap");
	ck_assert_ptr_nonnull(k);
	ck_assert_str_eq(k->plural, "pillarsnapshots");
	ck_assert_ptr_eq(model_kind_find("PillarSnapshot"), &model_psnap_kind);
	ck_assert_int_eq(model_get(st, &model_psnap_kind, NULL, "snapshot-1", &out, &e), 0);
	ck_assert_str_eq(out.spec.source_volume_id, "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1");
	model_clear(&model_psnap_kind, &out);
	model_clear(&model_psnap_kind, &in);
	store_close(st);
	tu_rmtree(dir);
}
END_TEST

START_TEST(test_pvst_content_source)
{
	struct model_pvst v;
	struct err e = {0};
	const char *ok = "{\"spec\":{\"contentSource\":{\"snapshotID\":\"s/snapshot/file/p/n\"}}}";
	ck_assert_int_eq(model_decode_text(&model_pvst_kind, ok, &v, &e), 0);
	ck_assert(v.spec.has_content_source);
	ck_assert_str_eq(v.spec.content_source.snapshot_id, "s/snapshot/file/p/n");
	ck_assert_int_eq(model_pvst_validate(&v, &e), 0);
	char *t = model_encode_text(&model_pvst_kind, &v);
	ck_assert_ptr_nonnull(
	    strstr(t, "\"contentSource\":{\"snapshotID\":\"s/snapshot/file/p/n\"}"));
	free(t);
	model_clear(&model_pvst_kind, &v);
	static const char *const bad[] = {
	    "{\"spec\":{\"contentSource\":{}}}",
	    "{\"spec\":{\"contentSource\":{\"snapshotID\":\"a\",\"volumeID\":\"b\"}}}",
	};
	for (size_t i = 0; i < 2; i++) {
		ck_assert_int_eq(model_decode_text(&model_pvst_kind, bad[i], &v, &e), 0);
		ck_assert_int_eq(model_pvst_validate(&v, &e), -EINVAL);
		ck_assert_str_eq(
		    e.msg, "spec.contentSource must name exactly one of snapshotID and volumeID");
		model_clear(&model_pvst_kind, &v);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("model_snapshot");
	TCase *tc = tcase_create("model_snapshot");
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_validate);
	tcase_add_test(tc, test_store_and_immutable_spec);
	tcase_add_test(tc, test_pvst_content_source);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
