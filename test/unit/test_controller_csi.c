/* Controller CSI handlers against csi.md §4 and crds.md §7.5, on the embedded store and the fake
 * agent: CreateVolume write sequence and volume context, every row of the publish conflict table
 * with its message, fail-closed fencing order (publication recorded before AllowInitiator,
 * removed only after DenyInitiator), DeleteVolume refused while published, identity. */
#include "ctl_fixture.h"
#include "rules/size.h"

/* 64 letters a: the start of a long name as messages quote it */
#define A64                                \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

#define VID  "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1"
#define SNW  CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER
#define SNRO CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY
#define SNSW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER
#define MNRO CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY

static const char *const PSC_PARAMS[] = {"pillar-csi.bhyoo.com/storage-class", "fast", NULL};

static void setup(void)
{
	fx_setup();
	fx_objects(true);
}

static void make_vol(void)
{
	struct grpc_status gs = {0};
	char vid[256];
	ck_assert_msg(fx_create("pvc-1", PSC_PARAMS, false, vid, sizeof(vid), &gs) == 0, "%s",
	              gs.msg);
	ck_assert_str_eq(vid, VID);
	fake_agent_reset_log(fx_fa);
}

static uint64_t gen_now(void)
{
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	uint64_t g = pvst_generation(o);
	cJSON_Delete(o);
	return g;
}

START_TEST(test_create_sequence_and_context)
{
	struct grpc_status gs = {0};
	Csi__V1__CreateVolumeResponse *resp = NULL;
	Csi__V1__CreateVolumeRequest *q = fx_provision_req("pvc-1", PSC_PARAMS, false, "1");
	ck_assert_int_eq(
	    FX_CALL(csi_create_volume, q, &resp, &csi__v1__create_volume_response__descriptor, &gs),
	    0);
	ck_assert_str_eq(resp->volume->volume_id, VID);
	ck_assert_int_eq(resp->volume->capacity_bytes, 1 << 20); /* rounded up to 1 MiB */
	int seen = 0;
	for (size_t i = 0; i < resp->volume->n_volume_context; i++) {
		const char *k = resp->volume->volume_context[i]->key,
		           *v = resp->volume->volume_context[i]->value;
		if (!strcmp(k, "target_id")) {
			ck_assert_str_eq(v, "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-1");
			seen++;
		} else if (!strcmp(k, "address")) {
			ck_assert_str_eq(v, "10.0.0.5");
			seen++;
		} else if (!strcmp(k, "port")) {
			ck_assert_str_eq(v, "4420");
			seen++;
		} else if (!strcmp(k, "pillar-csi.bhyoo.com/fs-type")) {
			ck_assert_str_eq(v, "ext4");
			seen++;
		} else if (!strcmp(k, "pillar-csi.bhyoo.com/volume-ref")) {
			ck_assert_str_eq(v, "1");
			seen++;
		} else if (!strcmp(k, "pillar-csi.bhyoo.com/protocol-type")) {
			ck_assert_str_eq(v, "nvmeof-tcp");
			seen++;
		} else
			ck_abort_msg("unexpected context key %s (unset tunables must be absent)",
			             k);
	}
	ck_assert_int_eq(seen, 6);
	ck_assert_int_eq(resp->volume->n_accessible_topology, 1);
	ck_assert_str_eq(resp->volume->accessible_topology[0]->segments[0]->key,
	                 "pillar-csi.bhyoo.com/nvmeof");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ck_assert_str_eq(fake_agent_log(fx_fa), "CreateVolume,ExportVolume");
	const PillarCsi__Agent__V1__CreateVolumeRequest *cq =
	    (const void *)fake_agent_call(fx_fa, 0)->req;
	const PillarCsi__Agent__V1__ExportVolumeRequest *eq =
	    (const void *)fake_agent_call(fx_fa, 1)->req;
	ck_assert_str_eq(cq->volume_id, "tank/pvc-1");
	/* one claim for both calls: the agent's mark is written once (crds.md §7.5 deviation) */
	ck_assert_int_eq(cq->fence->generation, 1);
	ck_assert_int_eq(eq->fence->generation, 1);
	ck_assert_str_eq(eq->export_params->nvmeof_tcp->bind_address, "10.0.0.5");
	ck_assert(eq->acl_enabled);
	ck_assert_int_eq(fake_agent_call(fx_fa, 0)->deadline_ms, 60000);
	ck_assert_int_eq(fake_agent_call(fx_fa, 1)->deadline_ms, 30000);
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(o, "status"), "phase"), "Ready");
	ck_assert_str_eq(cond_reason(o, "Ready"), "VolumeReady");
	ck_assert_ptr_null(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "backendDevicePath"));
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "exportSpec"));
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations"),
	                 RULES_ANN_SUCCESS),
	    "true");
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "labels"),
	                 RULES_LABEL_AGENT),
	    "storage-1");
	ck_assert_uint_eq(pvst_generation(o), 1);
	cJSON_Delete(o);
	/* fast path: no agent call, same answer */
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(
	    FX_CALL(csi_create_volume, q, &resp, &csi__v1__create_volume_response__descriptor, &gs),
	    0);
	ck_assert_int_eq(resp->volume->capacity_bytes, 1 << 20);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	/* same name, other capacity */
	q->capacity_range->required_bytes = 5 << 20;
	ck_assert_int_eq(
	    FX_CALL(csi_create_volume, q, &resp, &csi__v1__create_volume_response__descriptor, &gs),
	    GRPC_ALREADY_EXISTS);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	ck_assert_str_eq(
	    gs.msg,
	    "volume \"pvc-1\" already exists with capacity 1048576 bytes; requested 5242880");
}
END_TEST

/* The write sequence of crds.md §7.5 in the fewest durable writes: the claim rides on the
 * object's first write, Ready on the success-recorded annotation (§7.4: "set in the same update
 * that records Ready"), and a pass that creates and exports at once records neither
 * CreatePartial nor a second claim (the §7.5 deviation): a CreateVolume is two writes — the
 * object with phase Provisioning and the claim, Ready with the annotation and exportSpec —
 * each one the store's watch shows, with the generation both agent calls carry. */
START_TEST(test_create_writes)
{
	static const struct {
		const char *phase;
		uint64_t gen;
		bool annotated;
	} want[] = {{"Provisioning", 1, false}, {"Ready", 1, true}};
	struct grpc_status gs = {0};
	cJSON *items = NULL, *o = NULL;
	uint64_t rv = 0;
	store_watch *w = NULL;
	const struct store_kind *k = store_kind_lookup("PillarVolumeState");
	ck_assert_int_eq(store_list(fx_st, k, NULL, NULL, &items, &rv, NULL), 0);
	cJSON_Delete(items);
	ck_assert_int_eq(store_watch_open(fx_st, k, rv, &w, NULL), 0);
	ck_assert_msg(fx_create("pvc-1", PSC_PARAMS, false, NULL, 0, &gs) == 0, "%s", gs.msg);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		enum store_event_type type;
		ck_assert_int_eq(store_watch_next(w, 1000, &type, &o, NULL), 1);
		ck_assert_int_eq(type, i == 0 ? STORE_ADDED : STORE_MODIFIED);
		const cJSON *st = cJSON_GetObjectItem(o, "status");
		const char *phase = st ? json_get_str(st, "phase") : NULL;
		ck_assert_msg(want[i].phase ? phase && !strcmp(phase, want[i].phase) : !phase,
		              "write %zu: phase %s", i + 1, phase ? phase : "(none)");
		ck_assert_uint_eq(pvst_generation(o), want[i].gen);
		const cJSON *ann =
		    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations");
		ck_assert(!!json_get_str(ann, RULES_ANN_SUCCESS) == want[i].annotated);
		ck_assert(!!cJSON_GetObjectItem(st, "exportSpec") == want[i].annotated);
		cJSON_Delete(o);
	}
	ck_assert_int_eq(store_watch_next(w, 200, &(enum store_event_type){0}, &o, NULL), 0);
	store_watch_close(w);
	ck_assert_str_eq(fake_agent_log(fx_fa), "CreateVolume,ExportVolume");
}
END_TEST

START_TEST(test_create_resume_after_export_failure)
{
	struct grpc_status gs = {0};
	fake_agent_fail(fx_fa, "ExportVolume", GRPC_UNAVAILABLE,
	                "export restore pending: ExportVolume: awaiting a complete ReconcileState "
	                "from the controller before exporting");
	ck_assert_int_eq(fx_create("pvc-1", PSC_PARAMS, false, NULL, 0, &gs), GRPC_UNAVAILABLE);
	ck_assert(strncmp(gs.msg, "export restore pending", 22) == 0);
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	cJSON *st = cJSON_GetObjectItem(o, "status");
	ck_assert_str_eq(json_get_str(st, "phase"), "CreatePartial");
	ck_assert_str_eq(json_get_str(st, "backendDevicePath"), "/dev/zvol/tank/pvc-1");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(st, "partialFailure"), "reason"),
	                 "ExportPending");
	/* the backend's record rode on the failure's write, under the one claim */
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(st, "exportSpec"));
	ck_assert_str_eq(cond_reason(o, "BackendCreated"), "BackendCreated");
	ck_assert_uint_eq(pvst_generation(o), 1);
	cJSON_Delete(o);
	/* retry skips the backend */
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(fx_create("pvc-1", PSC_PARAMS, false, NULL, 0, &gs), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "ExportVolume");
	const PillarCsi__Agent__V1__ExportVolumeRequest *eq =
	    (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_str_eq(eq->device_path, "/dev/zvol/tank/pvc-1");
	ck_assert_int_eq(eq->fence->generation, 2);
}
END_TEST

/* A controller killed between recording Ready and the success-recorded annotation (found by the
 * controller crash suite): the retried CreateVolume answers from the fast path only after the
 * annotation is there (crds.md §7.4: set before CreateVolume returns success). */
START_TEST(test_create_retry_records_success)
{
	struct grpc_status gs = {0};
	struct err e = {0};
	make_vol();
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(o, "metadata"), "annotations");
	ck_assert_msg(store_update(fx_st, o, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
	ck_assert_int_eq(fx_create("pvc-1", PSC_PARAMS, false, NULL, 0, &gs), 0);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	o = fx_get("PillarVolumeState", "pvc-1");
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations"),
	                 RULES_ANN_SUCCESS),
	    "true");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(o, "status"), "phase"), "Ready");
	cJSON_Delete(o);
}
END_TEST

/* Requests at the CSI level (names, capacity limits, content sources, mixed fs_types that
 * csi-provisioner never sends in our deployment): built by hand, as another CO could send them. */
START_TEST(test_create_validation)
{
	struct grpc_status gs = {0};
	struct fx_create f;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	ck_assert_int_eq(fx_create("bad.name", PSC_PARAMS, false, NULL, 0, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg,
	                 "volume name \"bad.name\" must match [A-Za-z0-9][A-Za-z0-9_-]{0,127}");
	/* a name longer than the status message: quoted by its start, the rule kept */
	static char long_name[70000];
	memset(long_name, 'a', sizeof(long_name) - 1);
	ck_assert_int_eq(fx_create(long_name, PSC_PARAMS, false, NULL, 0, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg,
	                 "volume name \"" A64 "...\" must match [A-Za-z0-9][A-Za-z0-9_-]{0,127}");
	/* MULTI_NODE_MULTI_WRITER (a ReadWriteMany claim): test_controller_provision.c, through
	 * the provisioner emulation */
	fx_create_init(&f, "pvc-2", 1 << 30, false, PSC_PARAMS);
	Csi__V1__VolumeContentSource src = CSI__V1__VOLUME_CONTENT_SOURCE__INIT;
	f.req.volume_content_source = &src;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "volume_content_source must name a snapshot or a volume");
	fx_create_init(&f, "pvc-2", 0, false, PSC_PARAMS);
	f.cr.limit_bytes = 1000;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(gs.msg, "capacity 1048576 bytes exceeds limit_bytes 1000");
	/* a CO (not csi-provisioner: it sends one fstype) giving two fs_types */
	struct fx_cap c2;
	Csi__V1__VolumeCapability *two[2];
	fx_create_init(&f, "pvc-2", 1 << 30, false, PSC_PARAMS);
	fx_cap_init(&c2, SNW, false);
	f.cap.mount.fs_type = "ext4";
	c2.mount.fs_type = "xfs";
	two[0] = &f.cap.cap;
	two[1] = &c2.cap;
	f.req.volume_capabilities = two;
	f.req.n_volume_capabilities = 2;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "volume_capabilities carry different fs_type values \"ext4\" and "
	                         "\"xfs\"");
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	/* agent without address */
	fx_put("PillarAgent", NULL, "storage-2", NULL, "{\"nodeRef\":{\"name\":\"n2\"}}", NULL);
	fx_put("PillarStore", NULL, "tank2", NULL,
	       "{\"agentRef\":\"storage-2\",\"backend\":{\"zfs\":{\"pool\":\"tank2\"}}}", NULL);
	const char *const p2[] = {"pillar-csi.bhyoo.com/store-ref", "tank2",
	                          "pillar-csi.bhyoo.com/protocol-ref", "tcp", NULL};
	ck_assert_int_eq(fx_create("pvc-3", p2, false, NULL, 0, &gs), GRPC_UNAVAILABLE);
	ck_assert_str_eq(gs.msg, "PillarAgent \"storage-2\" has no resolved address");
	/* A lowercase name of 100 characters is its own PillarVolumeState name, uncut (csi.md
	 * §2.2); the controller used to cut it to 79 characters. */
	char longname[101], vid[300];
	memset(longname, 'v', 100);
	longname[100] = '\0';
	ck_assert_int_eq(fx_create(longname, PSC_PARAMS, false, vid, sizeof(vid), &gs), 0);
	cJSON *pvst = fx_get("PillarVolumeState", longname);
	ck_assert_ptr_nonnull(pvst);
	cJSON_Delete(pvst);
	ck_assert_int_eq(fx_attach(vid, "node-a", &gs), 0);
}
END_TEST

/* A size that cannot be rounded up to a MiB within int64_t (2^63-1) is OUT_OF_RANGE naming the
 * largest size accepted, before anything is recorded or sent; the rounding used to overflow
 * and record a negative capacity. */
START_TEST(test_create_expand_size_overflow)
{
	struct grpc_status gs = {0};
	struct fx_create f;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	const char *want = "capacity 9223372036854775807 bytes cannot be rounded up to a multiple "
	                   "of 1048576 bytes; the largest size accepted is 9223372035781033984 "
	                   "bytes";
	fx_create_init(&f, "pvc-big", INT64_MAX, false, PSC_PARAMS);
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(gs.msg, want);
	f.cr.limit_bytes = INT64_MAX;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(gs.msg, want);
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-big"));
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	/* the largest size accepted is accepted (the agent decides whether the pool holds it) */
	fx_create_init(&f, "pvc-big", RULES_CAPACITY_MAX, false, PSC_PARAMS);
	f.cr.limit_bytes = INT64_MAX;
	ck_assert_int_eq(FX_CALL(csi_create_volume, &f.req, &resp,
	                         &csi__v1__create_volume_response__descriptor, &gs),
	                 0);
	ck_assert_int_eq(resp->volume->capacity_bytes, RULES_CAPACITY_MAX);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	/* ControllerExpandVolume */
	make_vol();
	Csi__V1__ControllerExpandVolumeRequest eq = CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__ControllerExpandVolumeResponse *er = NULL;
	size_t calls = fake_agent_ncalls(fx_fa);
	cr.required_bytes = INT64_MAX;
	eq.volume_id = VID;
	eq.capacity_range = &cr;
	ck_assert_int_eq(FX_CALL(csi_controller_expand, &eq, &er,
	                         &csi__v1__controller_expand_volume_response__descriptor, &gs),
	                 GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(gs.msg, want);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), calls);
}
END_TEST

/* ---- publish conflict table (csi.md §4.3) ------------------------------------------------------- */

START_TEST(test_conflict_single_node_elsewhere)
{
	struct grpc_status gs = {0};
	make_vol();
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), 0);
	static const int modes[] = {SNW, SNRO, SNSW, MNRO};
	static const char *const names[] = {"SINGLE_NODE_WRITER", "SINGLE_NODE_READER_ONLY",
	                                    "SINGLE_NODE_SINGLE_WRITER", "MULTI_NODE_READER_ONLY"};
	for (int i = 0; i < 4; i++) {
		char want[512];
		ck_assert_int_eq(fx_publish(VID, "node-b", modes[i], false, &gs),
		                 GRPC_FAILED_PRECONDITION);
		snprintf(
		    want, sizeof(want),
		    "volume \"" VID "\" is published to another node \"node-a\" (access mode "
		    "SINGLE_NODE_MULTI_WRITER, readonly=false); cannot publish to node \"node-b\" "
		    "with access mode %s",
		    names[i]);
		ck_assert_str_eq(gs.msg, want);
	}
	ck_assert_uint_eq(fake_agent_count(fx_fa, "AllowInitiator"), 1);
}
END_TEST

START_TEST(test_conflict_rox_then_single)
{
	struct grpc_status gs = {0};
	make_vol();
	ck_assert_int_eq(fx_publish(VID, "node-a", MNRO, true, &gs), 0);
	ck_assert_int_eq(fx_attach(VID, "node-b", &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(
	    gs.msg, "volume \"" VID "\" is published to another node \"node-a\" (access mode "
	            "MULTI_NODE_READER_ONLY, readonly=true); cannot publish to node \"node-b\" "
	            "with access mode SINGLE_NODE_MULTI_WRITER");
	/* ROX on both nodes is allowed */
	ck_assert_int_eq(fx_publish(VID, "node-b", MNRO, true, &gs), 0);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "AllowInitiator"), 2);
}
END_TEST

START_TEST(test_conflict_same_node)
{
	struct grpc_status gs = {0};
	make_vol();
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), 0);
	uint64_t g1 = gen_now();
	/* identical: OK, re-granted */
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), 0);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "AllowInitiator"), 2);
	ck_assert_uint_eq(gen_now(), g1 + 1);
	/* same node, other mode or readonly */
	ck_assert_int_eq(fx_publish(VID, "node-a", SNRO, false, &gs), GRPC_ALREADY_EXISTS);
	ck_assert_str_eq(gs.msg, "volume \"" VID "\" is already published to node \"node-a\" with "
	                         "access mode SINGLE_NODE_MULTI_WRITER, readonly=false; requested "
	                         "access mode SINGLE_NODE_READER_ONLY, readonly=false");
	ck_assert_int_eq(fx_publish(VID, "node-a", SNW, true, &gs), GRPC_ALREADY_EXISTS);
	ck_assert_str_eq(gs.msg, "volume \"" VID "\" is already published to node \"node-a\" with "
	                         "access mode SINGLE_NODE_MULTI_WRITER, readonly=false; requested "
	                         "access mode SINGLE_NODE_WRITER, readonly=true");
	/* the node now reports another host NQN */
	cJSON *n = fx_get("CSINode", "node-a");
	cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "annotations");
	cJSON_ReplaceItemInObject(ann, RULES_ANN_HOST_NQN,
	                          cJSON_CreateString("nqn.2014-08.org.nvmexpress:uuid:cccc"));
	ck_assert_int_eq(store_update(fx_st, n, NULL, NULL), 0);
	cJSON_Delete(n);
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg,
	                 "volume \"" VID "\" is published to node \"node-a\" with host NQN "
	                 "\"nqn.2014-08.org.nvmexpress:uuid:aaaa\" but the node now reports "
	                 "\"nqn.2014-08.org.nvmexpress:uuid:cccc\"; unpublish it first");
	ck_assert_uint_eq(fake_agent_count(fx_fa, "AllowInitiator"), 2);
}
END_TEST

START_TEST(test_conflict_revoking_and_fail_closed)
{
	struct grpc_status gs = {0};
	make_vol();
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), 0);
	fake_agent_fail(fx_fa, "DenyInitiator", GRPC_UNAVAILABLE, "connection refused");
	ck_assert_int_eq(fx_unpublish(VID, "node-a", &gs), GRPC_UNAVAILABLE);
	ck_assert_str_eq(gs.msg, "connection refused");
	/* the entry stays, marked revoking */
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	cJSON *e = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "publishedNodes"), 0);
	ck_assert_ptr_nonnull(e);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(e, "revoking")));
	cJSON_Delete(o);
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), GRPC_ABORTED);
	ck_assert_str_eq(gs.msg, "volume \"" VID
	                         "\" is being unpublished from node \"node-a\"; retry later");
	/* a revoking entry on another node still counts */
	ck_assert_int_eq(fx_attach(VID, "node-b", &gs), GRPC_FAILED_PRECONDITION);
	ck_assert(strstr(gs.msg, "is published to another node \"node-a\""));
	/* the retry completes; then node-b may publish */
	ck_assert_int_eq(fx_unpublish(VID, "node-a", &gs), 0);
	ck_assert_int_eq(fx_attach(VID, "node-b", &gs), 0);
}
END_TEST

START_TEST(test_conflict_deleting)
{
	struct grpc_status gs = {0};
	make_vol();
	fake_agent_fail(fx_fa, "UnexportVolume", GRPC_UNAVAILABLE, "agent down");
	ck_assert_int_eq(fx_delete(VID, &gs), GRPC_UNAVAILABLE);
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	ck_assert(fx_deleting(o));
	cJSON_Delete(o);
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg, "volume \"" VID "\" is being deleted");
	ck_assert_uint_eq(fake_agent_count(fx_fa, "AllowInitiator"), 0);
}
END_TEST

START_TEST(test_publish_errors)
{
	struct grpc_status gs = {0};
	make_vol();
	ck_assert_int_eq(fx_attach(VID, "node-x", &gs), GRPC_NOT_FOUND);
	ck_assert_str_eq(gs.msg, "CSINode \"node-x\" not found");
	fx_put("CSINode", NULL, "node-c", NULL, NULL, NULL);
	ck_assert_int_eq(fx_attach(VID, "node-c", &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg, "CSINode \"node-c\" is missing annotation "
	                         "\"pillar-csi.bhyoo.com/nvmeof-host-nqn\"");
	ck_assert_int_eq(fx_attach("storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-9", "node-a", &gs),
	                 GRPC_NOT_FOUND);
	ck_assert_str_eq(gs.msg, "volume \"storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-9\" not found");
	/* a clone with the same host NQN (ACL on) */
	fx_put("CSINode", NULL, "node-d",
	       "\"annotations\":{\"pillar-csi.bhyoo.com/"
	       "nvmeof-host-nqn\":\"nqn.2014-08.org.nvmexpress:uuid:aaaa\"}",
	       NULL, NULL);
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg,
	                 "host NQN \"nqn.2014-08.org.nvmexpress:uuid:aaaa\" is also used by "
	                 "node \"node-d\"; give every worker a unique /etc/nvme/hostnqn and "
	                 "/etc/nvme/hostid");
	ck_assert_uint_eq(fake_agent_count(fx_fa, "AllowInitiator"), 0);
}
END_TEST

/* ---- fencing order ------------------------------------------------------------------------------ */

/* Snapshot at every agent call: "<generation>|<publishedNodes JSON>". */
static char *snap(void *arg, const char *method)
{
	(void)arg;
	(void)method;
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	if (!o)
		return strdup("gone");
	char *pn = cJSON_PrintUnformatted(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "publishedNodes"));
	char *out = NULL;
	if (asprintf(&out, "%llu|%s", (unsigned long long)pvst_generation(o), pn ? pn : "null") < 0)
		out = NULL;
	free(pn);
	cJSON_Delete(o);
	return out;
}

START_TEST(test_fencing_order)
{
	struct grpc_status gs = {0};
	make_vol();
	fake_agent_set_hook(fx_fa, snap, NULL);
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), 0);
	const struct fake_call *c0 = fake_agent_call(fx_fa, 0);
	ck_assert_str_eq(c0->method, "AllowInitiator");
	const PillarCsi__Agent__V1__AllowInitiatorRequest *aq = (const void *)c0->req;
	ck_assert_str_eq(aq->initiator_id, "nqn.2014-08.org.nvmexpress:uuid:aaaa");
	ck_assert_int_eq(aq->fence->generation, 2);
	ck_assert_int_eq(c0->deadline_ms, 15000);
	/* the publication is recorded, at the token's generation, before the grant */
	ck_assert_str_eq(
	    c0->snapshot,
	    "2|[{\"nodeID\":\"node-a\",\"initiatorID\":\"nqn.2014-08.org.nvmexpress:"
	    "uuid:aaaa\",\"accessMode\":\"SINGLE_NODE_MULTI_WRITER\",\"readonly\":false,"
	    "\"revoking\":false}]");
	/* a failed grant keeps the entry (fail closed) */
	fake_agent_fail(fx_fa, "AllowInitiator", GRPC_UNAVAILABLE, "timeout");
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), GRPC_UNAVAILABLE);
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"),
	                                                        "publishedNodes")),
	                 1);
	cJSON_Delete(o);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(fx_unpublish(VID, "node-a", &gs), 0);
	const struct fake_call *d0 = fake_agent_call(fx_fa, 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "DenyInitiator");
	const PillarCsi__Agent__V1__DenyInitiatorRequest *dq = (const void *)d0->req;
	ck_assert_int_eq(dq->fence->generation, 4);
	ck_assert_str_eq(dq->initiator_id, "nqn.2014-08.org.nvmexpress:uuid:aaaa");
	/* during the revoke the entry is still there, marked revoking, at the token's generation */
	ck_assert_str_eq(
	    d0->snapshot,
	    "4|[{\"nodeID\":\"node-a\",\"initiatorID\":\"nqn.2014-08.org.nvmexpress:"
	    "uuid:aaaa\",\"accessMode\":\"SINGLE_NODE_MULTI_WRITER\",\"readonly\":false,"
	    "\"revoking\":true}]");
	/* removed only after the revoke, without another generation bump */
	o = fx_get("PillarVolumeState", "pvc-1");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"),
	                                                        "publishedNodes")),
	                 0);
	ck_assert_uint_eq(pvst_generation(o), 4);
	cJSON_Delete(o);
	/* unpublishing again: nothing to do */
	ck_assert_int_eq(fx_unpublish(VID, "node-a", &gs), 0);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 1);
}
END_TEST

START_TEST(test_unpublish_acl_off_and_missing_agent)
{
	struct grpc_status gs = {0};
	fx_teardown();
	fx_setup();
	fx_objects(false);
	make_vol();
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), 0);
	ck_assert_int_eq(fx_unpublish(VID, "node-a", &gs), 0);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0); /* ACL off: no agent calls */
	fx_teardown();
	fx_setup();
	fx_objects(true);
	make_vol();
	ck_assert_int_eq(fx_attach(VID, "node-a", &gs), 0);
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("PillarAgent"), NULL, "storage-1",
	                              NULL, NULL, NULL),
	                 0);
	ck_assert_int_eq(fx_unpublish(VID, "node-a", &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg, "PillarAgent \"storage-1\" not found; keeping the publication of "
	                         "volume \"" VID "\" on node \"node-a\"");
}
END_TEST

/* ---- DeleteVolume ------------------------------------------------------------------------------- */

START_TEST(test_delete_refused_while_published)
{
	struct grpc_status gs = {0};
	make_vol();
	ck_assert_int_eq(fx_publish(VID, "node-a", MNRO, true, &gs), 0);
	ck_assert_int_eq(fx_publish(VID, "node-b", MNRO, true, &gs), 0);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(fx_delete(VID, &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg, "volume \"" VID "\" is still published to nodes [node-a, node-b]; "
	                         "unpublish it before deleting");
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	ck_assert(!fx_deleting(o));
	cJSON_Delete(o);
	ck_assert_int_eq(fx_unpublish_all(VID, &gs), 0);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(fx_delete(VID, &gs), 0);
	ck_assert_str_eq(fake_agent_log(fx_fa), "UnexportVolume,DeleteVolume");
	const PillarCsi__Agent__V1__DeleteVolumeRequest *dq =
	    (const void *)fake_agent_call(fx_fa, 1)->req;
	ck_assert_int_eq(dq->fence->generation, 5); /* 1 create, 2+3 publish, 4 fence, 5 delete */
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-1"));
	/* gone, malformed, empty */
	ck_assert_int_eq(fx_delete(VID, &gs), 0);
	ck_assert_int_eq(fx_delete("not/a/volume", &gs), 0);
	ck_assert_int_eq(fx_delete("", &gs), GRPC_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_delete_agent_missing_and_retry)
{
	struct grpc_status gs = {0};
	make_vol();
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("PillarAgent"), NULL, "storage-1",
	                              NULL, NULL, NULL),
	                 0);
	ck_assert_int_eq(fx_delete(VID, &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg, "PillarAgent \"storage-1\" not found; cannot confirm that volume "
	                         "\"" VID "\" was removed");
	ck_assert_uint_eq(gen_now(), 2);
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}",
	       "{\"resolvedAddress\":\"10.0.0.5:9500\"}");
	ck_assert_int_eq(fx_delete(VID, &gs), 0);
	/* the retry reuses the generation of the first attempt */
	const PillarCsi__Agent__V1__DeleteVolumeRequest *dq =
	    (const void *)fake_agent_call(fx_fa, 1)->req;
	ck_assert_int_eq(dq->fence->generation, 2);
}
END_TEST

START_TEST(test_identity_and_caps)
{
	struct grpc_status gs = {0};
	Csi__V1__GetPluginInfoResponse *pi = NULL;
	ck_assert_int_eq(FX_CALL(csi_get_plugin_info, NULL, &pi,
	                         &csi__v1__get_plugin_info_response__descriptor, &gs),
	                 0);
	ck_assert_str_eq(pi->name, "pillar-csi.bhyoo.com");
	ck_assert_str_eq(pi->vendor_version, version_string());
	protobuf_c_message_free_unpacked(&pi->base, NULL);
	Csi__V1__GetPluginCapabilitiesResponse *pc = NULL;
	ck_assert_int_eq(FX_CALL(csi_get_plugin_capabilities, NULL, &pc,
	                         &csi__v1__get_plugin_capabilities_response__descriptor, &gs),
	                 0);
	ck_assert_int_eq(pc->n_capabilities, 3);
	protobuf_c_message_free_unpacked(&pc->base, NULL);
	Csi__V1__ControllerGetCapabilitiesResponse *cc = NULL;
	ck_assert_int_eq(FX_CALL(csi_controller_capabilities, NULL, &cc,
	                         &csi__v1__controller_get_capabilities_response__descriptor, &gs),
	                 0);
	ck_assert_int_eq(cc->n_capabilities, 8); /* with snapshots and clones */
	protobuf_c_message_free_unpacked(&cc->base, NULL);
	Csi__V1__ProbeResponse *pr = NULL;
	ck_assert_int_eq(FX_CALL(csi_probe, NULL, &pr, &csi__v1__probe_response__descriptor, &gs),
	                 0);
	ck_assert(pr->ready->value);
	protobuf_c_message_free_unpacked(&pr->base, NULL);
}
END_TEST

START_TEST(test_expand_validate_capacity)
{
	struct grpc_status gs = {0};
	make_vol();
	/* csi-resizer: the PVC's request raised to 2 GiB + 1 byte */
	char err[256] = "";
	cJSON *pv = fx_pv(VID);
	Csi__V1__ControllerExpandVolumeRequest *eq =
	    sidecar_expand(&sidecar_deployed, pv, (2LL << 30) + 1, err, sizeof(err));
	Csi__V1__ControllerExpandVolumeResponse *er = NULL;
	cJSON_Delete(pv);
	ck_assert_msg(eq, "%s", err);
	ck_assert_str_eq(eq->volume_capability->mount->fs_type, "ext4");
	ck_assert_int_eq(FX_CALL(csi_controller_expand, eq, &er,
	                         &csi__v1__controller_expand_volume_response__descriptor, &gs),
	                 0);
	protobuf_c_message_free_unpacked(&eq->base, NULL);
	ck_assert_int_eq(er->capacity_bytes, (2LL << 30) + (1 << 20));
	ck_assert(er->node_expansion_required);
	protobuf_c_message_free_unpacked(&er->base, NULL);
	const PillarCsi__Agent__V1__ExpandVolumeRequest *x =
	    (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_int_eq(x->fence->generation, 1); /* current token, no bump */
	ck_assert_uint_eq(gen_now(), 1);
	Csi__V1__ValidateVolumeCapabilitiesRequest vq =
	    CSI__V1__VALIDATE_VOLUME_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ValidateVolumeCapabilitiesResponse *vr = NULL;
	struct fx_cap cap;
	fx_cap_init(&cap, SNW, false);
	cap.mount.fs_type = "xfs";
	vq.volume_id = VID;
	vq.n_volume_capabilities = 1;
	vq.volume_capabilities = cap.capp;
	ck_assert_int_eq(FX_CALL(csi_validate_capabilities, &vq, &vr,
	                         &csi__v1__validate_volume_capabilities_response__descriptor, &gs),
	                 0);
	ck_assert_ptr_null(vr->confirmed);
	ck_assert_str_eq(vr->message,
	                 "fs_type \"xfs\" does not match the volume's fsType \"ext4\"");
	protobuf_c_message_free_unpacked(&vr->base, NULL);
	cap.mount.fs_type = "ext4";
	ck_assert_int_eq(FX_CALL(csi_validate_capabilities, &vq, &vr,
	                         &csi__v1__validate_volume_capabilities_response__descriptor, &gs),
	                 0);
	ck_assert_ptr_nonnull(vr->confirmed);
	ck_assert_int_eq(vr->confirmed->n_volume_capabilities, 1);
	protobuf_c_message_free_unpacked(&vr->base, NULL);
	/* GetCapacity reads the store's status */
	cJSON *s = fx_get("PillarStore", "tank");
	cJSON_AddItemToObject(s, "status", fx_parse("{\"capacity\":{\"available\":\"10Gi\"}}"));
	ck_assert_int_eq(store_update_status(fx_st, s, NULL, NULL), 0);
	cJSON_Delete(s);
	Csi__V1__GetCapacityRequest gq = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	Csi__V1__GetCapacityRequest__ParametersEntry
	    pe = CSI__V1__GET_CAPACITY_REQUEST__PARAMETERS_ENTRY__INIT,
	    *pp = &pe;
	Csi__V1__GetCapacityResponse *gr = NULL;
	pe.key = "pillar-csi.bhyoo.com/storage-class";
	pe.value = "fast";
	gq.n_parameters = 1;
	gq.parameters = &pp;
	ck_assert_int_eq(
	    FX_CALL(csi_get_capacity, &gq, &gr, &csi__v1__get_capacity_response__descriptor, &gs),
	    0);
	ck_assert_int_eq(gr->available_capacity, 10LL << 30);
	ck_assert_ptr_nonnull(gr->maximum_volume_size);
	ck_assert_int_eq(gr->maximum_volume_size->value, 10LL << 30);
	protobuf_c_message_free_unpacked(&gr->base, NULL);
	/* the pool fills up: maximum_volume_size follows what the store has left */
	s = fx_get("PillarStore", "tank");
	cJSON_ReplaceItemInObject(s, "status", fx_parse("{\"capacity\":{\"available\":\"1Gi\"}}"));
	ck_assert_int_eq(store_update_status(fx_st, s, NULL, NULL), 0);
	cJSON_Delete(s);
	Csi__V1__Topology topo = CSI__V1__TOPOLOGY__INIT;
	Csi__V1__Topology__SegmentsEntry seg = CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT,
	                                 *segp = &seg;
	seg.key = "pillar-csi.bhyoo.com/nvmeof";
	seg.value = "true";
	topo.n_segments = 1;
	topo.segments = &segp;
	gq.accessible_topology = &topo; /* the segment of the nodes with NVMe/TCP */
	ck_assert_int_eq(
	    FX_CALL(csi_get_capacity, &gq, &gr, &csi__v1__get_capacity_response__descriptor, &gs),
	    0);
	ck_assert_int_eq(gr->available_capacity, 1LL << 30);
	ck_assert_int_eq(gr->maximum_volume_size->value, 1LL << 30);
	protobuf_c_message_free_unpacked(&gr->base, NULL);
	seg.key = "topology.kubernetes.io/zone"; /* a segment our volumes do not reach */
	ck_assert_int_eq(
	    FX_CALL(csi_get_capacity, &gq, &gr, &csi__v1__get_capacity_response__descriptor, &gs),
	    0);
	ck_assert_int_eq(gr->available_capacity, 0);
	ck_assert_int_eq(gr->maximum_volume_size->value, 0);
	protobuf_c_message_free_unpacked(&gr->base, NULL);
	/* the empty segment: nodes whose plugin reported no topology (no nvme_tcp), which
	 * csi-provisioner asks about as a segment of their own */
	topo.n_segments = 0;
	ck_assert_int_eq(
	    FX_CALL(csi_get_capacity, &gq, &gr, &csi__v1__get_capacity_response__descriptor, &gs),
	    0);
	ck_assert_int_eq(gr->available_capacity, 0);
	ck_assert_int_eq(gr->maximum_volume_size->value, 0);
	protobuf_c_message_free_unpacked(&gr->base, NULL);
	gq.accessible_topology = NULL;
	/* no class named: the whole of nothing, 0 */
	gq.n_parameters = 0;
	ck_assert_int_eq(
	    FX_CALL(csi_get_capacity, &gq, &gr, &csi__v1__get_capacity_response__descriptor, &gs),
	    0);
	ck_assert_int_eq(gr->available_capacity, 0);
	ck_assert_ptr_null(gr->maximum_volume_size);
	protobuf_c_message_free_unpacked(&gr->base, NULL);
}
END_TEST

/* GetCapacity for a class or store that does not exist is an invalid argument naming it, not
 * an empty answer the CO would read as a full pool. */
START_TEST(test_capacity_unknown_class)
{
	struct grpc_status gs = {0};
	Csi__V1__GetCapacityRequest gq = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	Csi__V1__GetCapacityRequest__ParametersEntry
	    pe = CSI__V1__GET_CAPACITY_REQUEST__PARAMETERS_ENTRY__INIT,
	    *pp = &pe;
	Csi__V1__GetCapacityResponse *gr = NULL;
	gq.n_parameters = 1;
	gq.parameters = &pp;
	pe.key = "pillar-csi.bhyoo.com/storage-class";
	pe.value = "nope";
	ck_assert_int_eq(
	    FX_CALL(csi_get_capacity, &gq, &gr, &csi__v1__get_capacity_response__descriptor, &gs),
	    GRPC_INVALID_ARGUMENT);
	ck_assert_ptr_null(gr);
	ck_assert_str_eq(gs.msg, "PillarStorageClass \"nope\" (named via "
	                         "pillar-csi.bhyoo.com/storage-class) not found");
	pe.key = "pillar-csi.bhyoo.com/store-ref";
	pe.value = "missing";
	ck_assert_int_eq(
	    FX_CALL(csi_get_capacity, &gq, &gr, &csi__v1__get_capacity_response__descriptor, &gs),
	    GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "PillarStore \"missing\" (named via "
	                         "pillar-csi.bhyoo.com/store-ref) not found");
	pe.value = "tank"; /* the fixture's store, no capacity recorded yet */
	ck_assert_int_eq(
	    FX_CALL(csi_get_capacity, &gq, &gr, &csi__v1__get_capacity_response__descriptor, &gs),
	    0);
	ck_assert_int_eq(gr->available_capacity, 0);
	protobuf_c_message_free_unpacked(&gr->base, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_csi");
	TCase *t = tcase_create("csi");
	tcase_add_checked_fixture(t, setup, fx_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_create_sequence_and_context);
	tcase_add_test(t, test_create_writes);
	tcase_add_test(t, test_create_resume_after_export_failure);
	tcase_add_test(t, test_create_retry_records_success);
	tcase_add_test(t, test_create_validation);
	tcase_add_test(t, test_create_expand_size_overflow);
	tcase_add_test(t, test_conflict_single_node_elsewhere);
	tcase_add_test(t, test_conflict_rox_then_single);
	tcase_add_test(t, test_conflict_same_node);
	tcase_add_test(t, test_conflict_revoking_and_fail_closed);
	tcase_add_test(t, test_conflict_deleting);
	tcase_add_test(t, test_publish_errors);
	tcase_add_test(t, test_fencing_order);
	tcase_add_test(t, test_unpublish_acl_off_and_missing_agent);
	tcase_add_test(t, test_delete_refused_while_published);
	tcase_add_test(t, test_delete_agent_missing_and_retry);
	tcase_add_test(t, test_identity_and_caps);
	tcase_add_test(t, test_expand_validate_capacity);
	tcase_add_test(t, test_capacity_unknown_class);
	suite_add_tcase(s, t);
	return tu_run(s);
}
