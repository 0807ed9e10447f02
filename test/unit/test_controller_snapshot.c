/* Controller snapshot handlers (docs/snapshots.md) on the embedded store and the fake agent,
 * driven by the csi-snapshotter and csi-provisioner stand-ins (sidecar.h): the PillarSnapshot
 * write sequence (intent recorded before the agent call, the agent's answer recorded after),
 * idempotency by name, fencing generations, retries after an agent failure, DeleteSnapshot,
 * ListSnapshots by ID, by source and paginated, CreateVolume from a snapshot and from a
 * volume, and every refusal with its code and message. */
#include "controller/psnap.h"
#include "controller/reconcile.h"
#include "ctl_fixture.h"

/* 64 letters a: the start of a long name as messages quote it */
#define A64                                \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

#define VID   "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1"
#define VID2  "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-2"
#define UID1  "0d6b61e9-3d71-4d6c-8f5e-6d9e8b7c2a10"
#define SNAP1 "storage-1/snapshot/zfs-zvol/tank/snapshot-" UID1

static const char *const PSC_PARAMS[] = {"pillar-csi.bhyoo.com/storage-class", "fast", NULL};

static void setup(void)
{
	fx_setup();
	fx_objects(true);
	struct grpc_status gs = {0};
	char vid[256];
	ck_assert_msg(fx_create("pvc-1", PSC_PARAMS, false, vid, sizeof(vid), &gs) == 0, "%s",
	              gs.msg);
	ck_assert_msg(fx_create("pvc-2", PSC_PARAMS, false, vid, sizeof(vid), &gs) == 0, "%s",
	              gs.msg);
	fake_agent_reset_log(fx_fa);
}

/* A VolumeSnapshotContent as the snapshot-controller creates it for a dynamic snapshot. */
static void content(char *out, size_t cap, const char *uid, const char *volume_handle,
                    const char *snapshot_handle)
{
	char status[600] = "";
	if (snapshot_handle)
		snprintf(status, sizeof(status), ",\"status\":{\"snapshotHandle\":\"%s\"}",
		         snapshot_handle);
	snprintf(out, cap,
	         "{\"metadata\":{\"name\":\"snapcontent-%s\"},\"spec\":{\"driver\":"
	         "\"pillar-csi.bhyoo.com\",\"deletionPolicy\":\"Delete\",\"source\":{"
	         "\"volumeHandle\":\"%s\"},\"volumeSnapshotClassName\":\"pillar-csi-snapshot\","
	         "\"volumeSnapshotRef\":{\"kind\":\"VolumeSnapshot\",\"name\":\"snap-%.8s\","
	         "\"namespace\":\"default\",\"uid\":\"%s\"}}%s}",
	         uid, volume_handle, uid, uid, status);
}

#define CLASS                                                                                   \
	"{\"metadata\":{\"name\":\"pillar-csi-snapshot\"},\"driver\":\"pillar-csi.bhyoo.com\"," \
	"\"deletionPolicy\":\"Delete\",\"parameters\":{"                                        \
	"\"csi.storage.k8s.io/snapshotter-secret-name\":\"snap-secret\","                       \
	"\"csi.storage.k8s.io/snapshotter-secret-namespace\":\"default\"}}"
#define SECRET "{\"metadata\":{\"name\":\"snap-secret\"},\"data\":{\"token\":\"czNjcjN0\"}}"

/* CreateSnapshot as csi-snapshotter sends it for a VolumeSnapshot of uid on volume_handle. */
static int create_snapshot(const char *uid, const char *volume_handle,
                           Csi__V1__CreateSnapshotResponse **resp, struct grpc_status *gs)
{
	char c[1200], err[300] = "";
	content(c, sizeof(c), uid, volume_handle, NULL);
	Csi__V1__CreateSnapshotRequest *q =
	    sidecar_create_snapshot(CLASS, c, SECRET, true, err, sizeof(err));
	ck_assert_msg(q, "snapshotter refused: %s", err);
	int r = FX_CALL(csi_create_snapshot, q, resp,
	                &csi__v1__create_snapshot_response__descriptor, gs);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	return r;
}

static int delete_snapshot(const char *snapshot_id, struct grpc_status *gs)
{
	char c[1200], err[300] = "";
	Csi__V1__DeleteSnapshotResponse *resp = NULL;
	content(c, sizeof(c), UID1, VID, snapshot_id);
	Csi__V1__DeleteSnapshotRequest *q = sidecar_delete_snapshot(c, SECRET, err, sizeof(err));
	ck_assert_msg(q, "%s", err);
	int r = FX_CALL(csi_delete_snapshot, q, &resp,
	                &csi__v1__delete_snapshot_response__descriptor, gs);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return r;
}

static char *at_call(void *arg, const char *method)
{
	(void)arg;
	if (strcmp(method, "CreateSnapshot"))
		return NULL;
	cJSON *o = fx_get("PillarSnapshot", "snapshot-" UID1);
	char *t = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	return t;
}

START_TEST(test_create_sequence_and_request)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	fake_agent_set_hook(fx_fa, at_call, NULL);
	ck_assert_msg(create_snapshot(UID1, VID, &resp, &gs) == 0, "%s", gs.msg);
	ck_assert_str_eq(resp->snapshot->snapshot_id, SNAP1);
	ck_assert_str_eq(resp->snapshot->source_volume_id, VID);
	ck_assert_int_eq(resp->snapshot->size_bytes, 1LL << 30);
	ck_assert(resp->snapshot->ready_to_use);
	ck_assert_int_eq(resp->snapshot->creation_time->seconds, FAKE_SNAPSHOT_TIME);
	ck_assert_int_eq(resp->snapshot->creation_time->nanos, 250000000);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	/* the agent got the snapshot's own identity and token, the source's backend */
	ck_assert_str_eq(fake_agent_log(fx_fa), "CreateSnapshot");
	const struct fake_call *fc = fake_agent_call(fx_fa, 0);
	const PillarCsi__Agent__V1__CreateSnapshotRequest *aq = (const void *)fc->req;
	ck_assert_str_eq(aq->snapshot_id, "tank/snapshot-" UID1);
	ck_assert_str_eq(aq->source_volume_id, "tank/pvc-1");
	ck_assert_int_eq(aq->backend_type,
	                 PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL);
	ck_assert_str_eq(aq->backend_params->zfs->pool, "tank");
	ck_assert_uint_eq(aq->fence->generation, 1);
	/* intent before the call: the record existed, Creating, with that generation */
	ck_assert_ptr_nonnull(fc->snapshot);
	cJSON *then = fx_parse(fc->snapshot);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(then, "status"), "phase"), "Creating");
	ck_assert_str_eq(aq->fence->volume_uid,
	                 json_get_str(cJSON_GetObjectItem(then, "metadata"), "uid"));
	cJSON_Delete(then);
	/* after: Ready with what the agent answered and the sidecar's metadata */
	cJSON *o = fx_get("PillarSnapshot", "snapshot-" UID1);
	const cJSON *st = cJSON_GetObjectItem(o, "status"), *sp = cJSON_GetObjectItem(o, "spec");
	ck_assert_str_eq(json_get_str(st, "phase"), "Ready");
	ck_assert_str_eq(json_get_str(st, "creationTime"), "2026-12-06T16:00:00.250000000Z");
	ck_assert_str_eq(cond_reason(o, "Ready"), "SnapshotReady");
	ck_assert_str_eq(json_get_str(sp, "sourceVolumeState"), "pvc-1");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(sp, "snapshotRef"), "contentName"),
	                 "snapcontent-" UID1);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(sp, "snapshotRef"), "name"),
	                 "snap-0d6b61e9");
	cJSON_Delete(o);
}
END_TEST

START_TEST(test_create_idempotent_by_name)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	ck_assert_int_eq(create_snapshot(UID1, VID, &resp, &gs), 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ck_assert_int_eq(create_snapshot(UID1, VID, &resp, &gs), 0); /* same name, same source */
	ck_assert_str_eq(resp->snapshot->snapshot_id, SNAP1);
	ck_assert_int_eq(resp->snapshot->creation_time->seconds, FAKE_SNAPSHOT_TIME);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "CreateSnapshot"), 1);
	ck_assert_int_eq(create_snapshot(UID1, VID2, &resp, &gs), GRPC_ALREADY_EXISTS);
	ck_assert_str_eq(gs.msg, "snapshot \"snapshot-" UID1 "\" already exists for source volume "
	                         "\"" VID "\"; requested for \"" VID2 "\"");
}
END_TEST

START_TEST(test_create_refusals)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	Csi__V1__CreateSnapshotRequest q = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	q.source_volume_id = VID;
	ck_assert_int_eq(FX_CALL(csi_create_snapshot, &q, &resp,
	                         &csi__v1__create_snapshot_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "name is required");
	q.name = "bad.name";
	ck_assert_int_eq(FX_CALL(csi_create_snapshot, &q, &resp,
	                         &csi__v1__create_snapshot_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "name \"bad.name\" must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$");
	/* a name longer than the status message: quoted by its start, the rule kept */
	static char long_name[70000];
	memset(long_name, 'a', sizeof(long_name) - 1);
	q.name = long_name;
	ck_assert_int_eq(FX_CALL(csi_create_snapshot, &q, &resp,
	                         &csi__v1__create_snapshot_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg,
	                 "name \"" A64 "...\" must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$");
	q.name = "snap-1";
	q.source_volume_id = "";
	ck_assert_int_eq(FX_CALL(csi_create_snapshot, &q, &resp,
	                         &csi__v1__create_snapshot_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "source_volume_id is required");
	q.source_volume_id = "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-9";
	ck_assert_int_eq(FX_CALL(csi_create_snapshot, &q, &resp,
	                         &csi__v1__create_snapshot_response__descriptor, &gs),
	                 GRPC_NOT_FOUND);
	ck_assert_str_eq(gs.msg,
	                 "source volume \"storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-9\" not found");
	q.source_volume_id = "garbage";
	ck_assert_int_eq(FX_CALL(csi_create_snapshot, &q, &resp,
	                         &csi__v1__create_snapshot_response__descriptor, &gs),
	                 GRPC_NOT_FOUND);
	ck_assert_str_eq(gs.msg, "source volume \"garbage\" not found");
	Csi__V1__CreateSnapshotRequest__ParametersEntry
	    pe = CSI__V1__CREATE_SNAPSHOT_REQUEST__PARAMETERS_ENTRY__INIT,
	    *pp = &pe;
	pe.key = "compression";
	pe.value = "lz4";
	q.source_volume_id = VID;
	q.n_parameters = 1;
	q.parameters = &pp;
	ck_assert_int_eq(FX_CALL(csi_create_snapshot, &q, &resp,
	                         &csi__v1__create_snapshot_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "parameter \"compression\" is not known: a VolumeSnapshotClass of "
	                         "pillar-csi.bhyoo.com takes no parameters");
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0); /* nothing reached the agent */
	ck_assert_ptr_null(fx_get("PillarSnapshot", "snap-1"));
	/* the sidecar itself refuses a reserved key it does not know */
	char c[1200], err[300] = "";
	content(c, sizeof(c), UID1, VID, NULL);
	ck_assert_ptr_null(
	    sidecar_create_snapshot("{\"parameters\":{\"csi.storage.k8s.io/fstype\":\"ext4\"}}", c,
	                            NULL, true, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "found unknown parameter key"));
}
END_TEST

START_TEST(test_agent_failure_then_retry)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	fake_agent_fail(fx_fa, "CreateSnapshot", GRPC_UNAVAILABLE, "copying: 40% done");
	ck_assert_int_eq(create_snapshot(UID1, VID, &resp, &gs), GRPC_UNAVAILABLE);
	ck_assert_str_eq(gs.msg, "copying: 40% done");
	cJSON *o = fx_get("PillarSnapshot", "snapshot-" UID1);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(o, "status"), "phase"), "Creating");
	ck_assert_str_eq(cond_reason(o, "Ready"), "CreateFailed");
	ck_assert_str_eq(cond_message(o, "Ready"), "copying: 40% done");
	cJSON_Delete(o);
	/* not listed while not cut (CSI: ListSnapshots SHALL NOT list it) */
	Csi__V1__ListSnapshotsRequest lq = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	Csi__V1__ListSnapshotsResponse *lr = NULL;
	ck_assert_int_eq(FX_CALL(csi_list_snapshots, &lq, &lr,
	                         &csi__v1__list_snapshots_response__descriptor, &gs),
	                 0);
	ck_assert_uint_eq(lr->n_entries, 0);
	protobuf_c_message_free_unpacked(&lr->base, NULL);
	/* the sidecar's retry claims again and finishes */
	ck_assert_int_eq(create_snapshot(UID1, VID, &resp, &gs), 0);
	ck_assert(resp->snapshot->ready_to_use);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ck_assert_str_eq(fake_agent_log(fx_fa), "CreateSnapshot,CreateSnapshot");
	const PillarCsi__Agent__V1__CreateSnapshotRequest
	    *a0 = (const void *)fake_agent_call(fx_fa, 0)->req,
	    *a1 = (const void *)fake_agent_call(fx_fa, 1)->req;
	ck_assert_uint_eq(a0->fence->generation, 1);
	ck_assert_uint_eq(a1->fence->generation, 2);
	ck_assert_str_eq(a0->fence->volume_uid, a1->fence->volume_uid);
}
END_TEST

START_TEST(test_source_refusals)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	fx_put("PillarStore", NULL, "vg", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"lvm\":{\"volumeGroup\":\"vg\"}}}", NULL);
	fx_put("PillarStorageClass", NULL, "linear", NULL,
	       "{\"storeRef\":\"vg\",\"protocolRef\":\"tcp\"}", NULL);
	static const char *const LINEAR[] = {"pillar-csi.bhyoo.com/storage-class", "linear", NULL};
	char vid[256];
	ck_assert_msg(fx_create("pvc-3", LINEAR, false, vid, sizeof(vid), &gs) == 0, "%s", gs.msg);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(create_snapshot(UID1, vid, &resp, &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg, "source volume \"storage-1/nvmeof-tcp/lvm-lv/vg/pvc-3\" is an LVM "
	                         "linear volume: snapshots need a thin pool");
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
}
END_TEST

/* A source volume whose create is still being completed — also one already answered whose lazy
 * Ready record a crash took (architecture.md), back at Provisioning or CreatePartial until the
 * controller provisions it again — answers a retryable code: the sidecar's retry succeeds once
 * it is Ready.  Nothing is written or called meanwhile. */
START_TEST(test_source_not_ready_is_retryable)
{
	static const char *const phases[] = {"Provisioning", "CreatePartial"};
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	for (size_t i = 0; i < sizeof(phases) / sizeof(*phases); i++) {
		cJSON *o = fx_get("PillarVolumeState", "pvc-1");
		ck_assert_ptr_nonnull(o);
		cJSON_ReplaceItemInObject(cJSON_GetObjectItem(o, "status"), "phase",
		                          cJSON_CreateString(phases[i]));
		ck_assert_int_eq(store_update_with_status(fx_st, o, NULL, NULL), 0);
		cJSON_Delete(o);
		ck_assert_int_eq(create_snapshot(UID1, VID, &resp, &gs), GRPC_UNAVAILABLE);
		char want[200];
		snprintf(want, sizeof(want),
		         "source volume \"" VID "\" is not ready yet (phase %s); retry once "
		         "CreateVolume has succeeded",
		         phases[i]);
		ck_assert_str_eq(gs.msg, want);
		ck_assert_ptr_null(fx_get("PillarSnapshot", "snapshot-" UID1));
		ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	}
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(o, "status"), "phase",
	                          cJSON_CreateString("Ready"));
	ck_assert_int_eq(store_update_with_status(fx_st, o, NULL, NULL), 0);
	cJSON_Delete(o);
	ck_assert_msg(create_snapshot(UID1, VID, &resp, &gs) == 0, "%s", gs.msg);
	ck_assert(resp->snapshot->ready_to_use);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}
END_TEST

START_TEST(test_delete)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	ck_assert_int_eq(create_snapshot(UID1, VID, &resp, &gs), 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	fake_agent_reset_log(fx_fa);
	fake_agent_fail(fx_fa, "DeleteSnapshot", GRPC_FAILED_PRECONDITION,
	                "snapshot has dependent clones");
	ck_assert_int_eq(delete_snapshot(SNAP1, &gs), GRPC_FAILED_PRECONDITION);
	cJSON *o = fx_get("PillarSnapshot", "snapshot-" UID1);
	ck_assert_ptr_nonnull(o); /* kept, deleting, no longer listed or restorable */
	ck_assert(fx_deleting(o));
	ck_assert_str_eq(cond_reason(o, "Ready"), "Deleting");
	cJSON_Delete(o);
	ck_assert_int_eq(delete_snapshot(SNAP1, &gs), 0);
	ck_assert_ptr_null(fx_get("PillarSnapshot", "snapshot-" UID1));
	ck_assert_str_eq(fake_agent_log(fx_fa), "DeleteSnapshot,DeleteSnapshot");
	const PillarCsi__Agent__V1__DeleteSnapshotRequest
	    *d0 = (const void *)fake_agent_call(fx_fa, 0)->req,
	    *d1 = (const void *)fake_agent_call(fx_fa, 1)->req;
	ck_assert_str_eq(d1->snapshot_id, "tank/snapshot-" UID1);
	/* the retry of a delete keeps its generation: an agent that ended the lifecycle but
	 * whose answer was lost accepts only that one (agent-api.md §6.3 rule 6) */
	ck_assert_uint_eq(d0->fence->generation, 2);
	ck_assert_uint_eq(d1->fence->generation, 2);
	ck_assert_str_eq(d1->backend_params->zfs->pool, "tank");
	/* idempotent: gone, unknown, malformed → OK, nothing called */
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(delete_snapshot(SNAP1, &gs), 0);
	ck_assert_int_eq(delete_snapshot("storage-1/snapshot/zfs-zvol/tank/nope", &gs), 0);
	ck_assert_int_eq(delete_snapshot("not/an/id", &gs), 0);
	ck_assert_int_eq(delete_snapshot(VID, &gs), 0); /* a volume ID is no snapshot ID */
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	o = fx_get("PillarVolumeState", "pvc-1");
	ck_assert_ptr_nonnull(o);
	cJSON_Delete(o);
	Csi__V1__DeleteSnapshotRequest q = CSI__V1__DELETE_SNAPSHOT_REQUEST__INIT;
	Csi__V1__DeleteSnapshotResponse *dr = NULL;
	ck_assert_int_eq(FX_CALL(csi_delete_snapshot, &q, &dr,
	                         &csi__v1__delete_snapshot_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "snapshot_id is required");
}
END_TEST

static Csi__V1__ListSnapshotsResponse *list(const char *snapshot_id, const char *source, int max,
                                            const char *token, int want_code)
{
	struct grpc_status gs = {0};
	Csi__V1__ListSnapshotsRequest q = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	Csi__V1__ListSnapshotsResponse *r = NULL;
	q.snapshot_id = (char *)(snapshot_id ? snapshot_id : "");
	q.source_volume_id = (char *)(source ? source : "");
	q.max_entries = max;
	q.starting_token = (char *)(token ? token : "");
	ck_assert_int_eq(
	    FX_CALL(csi_list_snapshots, &q, &r, &csi__v1__list_snapshots_response__descriptor, &gs),
	    want_code);
	return r;
}

START_TEST(test_list)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	static const char *const uids[] = {"a-1", "b-2", "c-3"};
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(create_snapshot(uids[i], i < 2 ? VID : VID2, &resp, &gs), 0);
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	Csi__V1__ListSnapshotsResponse *r = list(NULL, NULL, 0, NULL, 0);
	ck_assert_uint_eq(r->n_entries, 3);
	ck_assert_str_eq(r->entries[0]->snapshot->snapshot_id,
	                 "storage-1/snapshot/zfs-zvol/tank/snapshot-a-1");
	ck_assert_str_eq(r->entries[2]->snapshot->source_volume_id, VID2);
	ck_assert(r->entries[2]->snapshot->ready_to_use);
	ck_assert_str_eq(r->next_token, "");
	protobuf_c_message_free_unpacked(&r->base, NULL);
	r = list(NULL, VID, 0, NULL, 0); /* by source */
	ck_assert_uint_eq(r->n_entries, 2);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	r = list("storage-1/snapshot/zfs-zvol/tank/snapshot-b-2", NULL, 0, NULL, 0); /* by ID */
	ck_assert_uint_eq(r->n_entries, 1);
	ck_assert_str_eq(r->entries[0]->snapshot->source_volume_id, VID);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	r = list("storage-1/snapshot/zfs-zvol/tank/snapshot-b-2", VID2, 0, NULL, 0);
	ck_assert_uint_eq(r->n_entries, 0); /* both filters apply */
	protobuf_c_message_free_unpacked(&r->base, NULL);
	r = list("storage-1/snapshot/zfs-zvol/tank/none", NULL, 0, NULL, 0);
	ck_assert_uint_eq(r->n_entries, 0);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	r = list(NULL, "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-9", 0, NULL, 0);
	ck_assert_uint_eq(r->n_entries, 0);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	/* pages of 2 */
	r = list(NULL, NULL, 2, NULL, 0);
	ck_assert_uint_eq(r->n_entries, 2);
	ck_assert_str_eq(r->next_token, "2");
	protobuf_c_message_free_unpacked(&r->base, NULL);
	r = list(NULL, NULL, 2, "2", 0);
	ck_assert_uint_eq(r->n_entries, 1);
	ck_assert_str_eq(r->entries[0]->snapshot->snapshot_id,
	                 "storage-1/snapshot/zfs-zvol/tank/snapshot-c-3");
	ck_assert_str_eq(r->next_token, "");
	protobuf_c_message_free_unpacked(&r->base, NULL);
	ck_assert_ptr_null(list(NULL, NULL, 2, "x", GRPC_ABORTED));
	ck_assert_ptr_null(list(NULL, NULL, 2, "99", GRPC_ABORTED));
	ck_assert_ptr_null(list(NULL, NULL, 2, "-1", GRPC_ABORTED));
	ck_assert_ptr_null(list(NULL, NULL, -1, NULL, GRPC_INVALID_ARGUMENT));
	/* the snapshotter's readiness check of a content */
	char c[1200], err[300] = "";
	content(c, sizeof(c), "b-2", VID, "storage-1/snapshot/zfs-zvol/tank/snapshot-b-2");
	Csi__V1__ListSnapshotsRequest *q = sidecar_snapshot_status(c, err, sizeof(err));
	ck_assert_ptr_nonnull(q);
	ck_assert_int_eq(
	    FX_CALL(csi_list_snapshots, q, &r, &csi__v1__list_snapshots_response__descriptor, &gs),
	    0);
	ck_assert_uint_eq(r->n_entries, 1);
	ck_assert(r->entries[0]->snapshot->ready_to_use);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	protobuf_c_message_free_unpacked(&q->base, NULL);
}
END_TEST

/* A claim restoring from a VolumeSnapshot (or cloning a PVC) through the provisioner. */
static int restore(const char *name, const char *storage, const char *kind, const char *source_id,
                   Csi__V1__CreateVolumeResponse **resp, struct grpc_status *gs)
{
	Csi__V1__CreateVolumeRequest *q = fx_provision_req(name, PSC_PARAMS, false, storage);
	char pvc[400], src[600], cnt[600], err[300] = "";
	snprintf(pvc, sizeof(pvc), "{\"spec\":{\"dataSource\":{\"kind\":\"%s\",\"name\":\"src\"}}}",
	         kind);
	if (!strcmp(kind, "VolumeSnapshot")) {
		snprintf(src, sizeof(src),
		         "{\"metadata\":{\"name\":\"src\"},\"status\":{"
		         "\"boundVolumeSnapshotContentName\":"
		         "\"c\",\"readyToUse\":true,\"restoreSize\":\"1Gi\"}}");
		snprintf(cnt, sizeof(cnt), "{\"status\":{\"snapshotHandle\":\"%s\"}}", source_id);
	} else {
		snprintf(src, sizeof(src), "{\"metadata\":{\"name\":\"src\"}}");
		snprintf(cnt, sizeof(cnt),
		         "{\"spec\":{\"capacity\":{\"storage\":\"1Gi\"},\"csi\":{\"driver\":"
		         "\"pillar-csi.bhyoo.com\",\"volumeHandle\":\"%s\"}}}",
		         source_id);
	}
	ck_assert_msg(sidecar_content_source(q, pvc, src, cnt, err, sizeof(err)) == 0, "%s", err);
	int r =
	    FX_CALL(csi_create_volume, q, resp, &csi__v1__create_volume_response__descriptor, gs);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	return r;
}

#define PVC_R "pvc-11111111-2222-3333-4444-555555555555"

START_TEST(test_restore_and_clone)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *sr = NULL;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	ck_assert_int_eq(create_snapshot(UID1, VID, &sr, &gs), 0);
	protobuf_c_message_free_unpacked(&sr->base, NULL);
	fake_agent_reset_log(fx_fa);
	ck_assert_msg(restore(PVC_R, "1Gi", "VolumeSnapshot", SNAP1, &resp, &gs) == 0, "%s",
	              gs.msg);
	ck_assert_str_eq(resp->volume->volume_id, "storage-1/nvmeof-tcp/zfs-zvol/tank/" PVC_R);
	ck_assert_int_eq(resp->volume->content_source->type_case,
	                 CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT);
	ck_assert_str_eq(resp->volume->content_source->snapshot->snapshot_id, SNAP1);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	const PillarCsi__Agent__V1__CreateVolumeRequest *aq =
	    (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_str_eq(fake_agent_call(fx_fa, 0)->method, "CreateVolume");
	ck_assert_int_eq(aq->content_source->source_case,
	                 PILLAR_CSI__AGENT__V1__VOLUME_CONTENT_SOURCE__SOURCE_SNAPSHOT_ID);
	ck_assert_str_eq(aq->content_source->snapshot_id, "tank/snapshot-" UID1);
	cJSON *o = fx_get("PillarVolumeState", PVC_R);
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "contentSource"),
	                 "snapshotID"),
	    SNAP1);
	cJSON_Delete(o);
	/* idempotent; another source under the same name is refused */
	ck_assert_int_eq(restore(PVC_R, "1Gi", "VolumeSnapshot", SNAP1, &resp, &gs), 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ck_assert_int_eq(restore(PVC_R, "1Gi", "PersistentVolumeClaim", VID, &resp, &gs),
	                 GRPC_ALREADY_EXISTS);
	ck_assert_str_eq(gs.msg, "volume \"" PVC_R "\" already exists with another content source");
	/* a clone of pvc-2 */
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(restore("pvc-c", "1Gi", "PersistentVolumeClaim", VID2, &resp, &gs), 0);
	ck_assert_str_eq(resp->volume->content_source->volume->volume_id, VID2);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	aq = (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_str_eq(aq->content_source->volume_id, "tank/pvc-2");
}
END_TEST

START_TEST(test_restore_refusals)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateSnapshotResponse *sr = NULL;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	fake_agent_set_snapshot_size(fx_fa, 2LL << 30);
	ck_assert_int_eq(create_snapshot(UID1, VID, &sr, &gs), 0);
	protobuf_c_message_free_unpacked(&sr->base, NULL);
	fake_agent_reset_log(fx_fa);
	/* smaller than the snapshot (a CO other than the provisioner, which checks restoreSize) */
	struct fx_create f;
	Csi__V1__VolumeContentSource cs = CSI__V1__VOLUME_CONTENT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__SnapshotSource ss =
	    CSI__V1__VOLUME_CONTENT_SOURCE__SNAPSHOT_SOURCE__INIT;
	cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
	cs.snapshot = &ss;
	ss.snapshot_id = SNAP1;
	fx_create_init(&f, "pvc-r", 1LL << 30, false, PSC_PARAMS);
	f.req.volume_content_source = &cs;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(gs.msg, "requested capacity 1073741824 bytes is smaller than the snapshot "
	                         "\"" SNAP1 "\" (2147483648 bytes); request at least its size");
	/* unset: the snapshot's size */
	f.req.capacity_range = NULL;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 0);
	ck_assert_int_eq(resp->volume->capacity_bytes, 2LL << 30);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	/* missing sources */
	ss.snapshot_id = "storage-1/snapshot/zfs-zvol/tank/gone";
	fx_create_init(&f, "pvc-s", 4LL << 30, false, PSC_PARAMS);
	f.req.volume_content_source = &cs;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_NOT_FOUND);
	ck_assert_str_eq(gs.msg, "snapshot \"storage-1/snapshot/zfs-zvol/tank/gone\" not found");
	ss.snapshot_id = "";
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "volume_content_source.snapshot.snapshot_id is required");
	Csi__V1__VolumeContentSource__VolumeSource vs =
	    CSI__V1__VOLUME_CONTENT_SOURCE__VOLUME_SOURCE__INIT;
	cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
	cs.volume = &vs;
	vs.volume_id = "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-9";
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_NOT_FOUND);
	ck_assert_str_eq(gs.msg,
	                 "source volume \"storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-9\" not found");
	vs.volume_id = SNAP1; /* a snapshot ID given as a volume */
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_NOT_FOUND);
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-s"));
	/* a snapshot being deleted is no source */
	fake_agent_fail(fx_fa, "DeleteSnapshot", GRPC_UNAVAILABLE, "agent down");
	ck_assert_int_eq(delete_snapshot(SNAP1, &gs), GRPC_UNAVAILABLE);
	cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
	cs.snapshot = &ss; /* a oneof: shares its storage with cs.volume */
	ss.snapshot_id = SNAP1;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_NOT_FOUND);
	ck_assert_str_eq(gs.msg, "snapshot \"" SNAP1 "\" not found (being deleted)");
}
END_TEST

/* Volumes made from a snapshot or a volume are volumes: the storage-node restore (one complete
 * ReconcileState) carries them with every other export, and the PillarAgent's outage counts
 * (outage-plan's figures) count them. */
START_TEST(test_restore_batch_and_counts)
{
	struct grpc_status gs = {0};
	struct err e = {0};
	Csi__V1__CreateSnapshotResponse *sr = NULL;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	ck_assert_int_eq(create_snapshot(UID1, VID, &sr, &gs), 0);
	protobuf_c_message_free_unpacked(&sr->base, NULL);
	ck_assert_int_eq(restore(PVC_R, "1Gi", "VolumeSnapshot", SNAP1, &resp, &gs), 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ck_assert_int_eq(restore("pvc-c", "1Gi", "PersistentVolumeClaim", VID2, &resp, &gs), 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	fake_agent_reset_log(fx_fa);
	ck_assert_msg(reconcile_agent_restore(&fx_c, "storage-1", "10.0.0.5:9500", NULL, &gs) == 0,
	              "%s", gs.msg);
	ck_assert_str_eq(fake_agent_log(fx_fa), "ReconcileState");
	const PillarCsi__Agent__V1__ReconcileStateRequest *q =
	    (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert(q->complete);
	ck_assert_uint_eq(q->n_volumes, 4);
	int seen = 0;
	for (size_t i = 0; i < q->n_volumes; i++)
		seen += !strcmp(q->volumes[i]->volume_id, "tank/" PVC_R) ||
		        !strcmp(q->volumes[i]->volume_id, "tank/pvc-c");
	ck_assert_int_eq(seen, 2);
	struct model_pa pa = {0};
	ck_assert_int_eq(model_get(fx_st, &model_pa_kind, NULL, "storage-1", &pa, &e), 0);
	ck_assert_int_eq(reconcile_agent_counts(&fx_c, &pa, &e), 0);
	ck_assert_int_eq(pa.status.volumes, 4);
	model_clear(&model_pa_kind, &pa);
}
END_TEST

START_TEST(test_time_format)
{
	char t[64];
	int64_t s = 0;
	int32_t ns = 0;
	psnap_time_format(FAKE_SNAPSHOT_TIME, 7, t, sizeof(t));
	ck_assert_str_eq(t, "2026-12-06T16:00:00.000000007Z");
	ck_assert_int_eq(psnap_time_parse(t, &s, &ns), 0);
	ck_assert(s == FAKE_SNAPSHOT_TIME && ns == 7);
	ck_assert_int_eq(psnap_time_parse("2026-12-06T16:00:00Z", &s, &ns), 0);
	ck_assert_int_eq(ns, 0);
	ck_assert_int_eq(psnap_time_parse("2026-12-06T16:00:00.5Z", &s, &ns), 0);
	ck_assert_int_eq(ns, 500000000);
	ck_assert_int_eq(psnap_time_parse("2026-12-06T16:00:00.Z", &s, &ns), -EINVAL);
	ck_assert_int_eq(psnap_time_parse("2026-12-06 16:00:00Z", &s, &ns), -EINVAL);
	ck_assert_int_eq(psnap_time_parse(NULL, &s, &ns), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_snapshot");
	TCase *t = tcase_create("snapshot");
	tcase_add_checked_fixture(t, setup, fx_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_create_sequence_and_request);
	tcase_add_test(t, test_create_idempotent_by_name);
	tcase_add_test(t, test_create_refusals);
	tcase_add_test(t, test_agent_failure_then_retry);
	tcase_add_test(t, test_source_refusals);
	tcase_add_test(t, test_source_not_ready_is_retryable);
	tcase_add_test(t, test_delete);
	tcase_add_test(t, test_list);
	tcase_add_test(t, test_restore_and_clone);
	tcase_add_test(t, test_restore_refusals);
	tcase_add_test(t, test_restore_batch_and_counts);
	tcase_add_test(t, test_time_format);
	suite_add_tcase(s, t);
	return tu_run(s);
}
