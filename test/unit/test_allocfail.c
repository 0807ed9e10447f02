/* The allocation-failure sweep, as nghttp2 tests itself: for each operation, a reference run
 * counts the allocations it makes (N), then for every k in 0..N-1 the operation runs again with
 * exactly the k-th allocation failing.  Each run must end either with the reference result or
 * with a clean error (a failure code and a message), never a crash; LeakSanitizer then finds no
 * leak, and the operation works again once memory is back.
 *
 * Injection: this program is linked with --wrap=malloc,calloc,realloc,strdup,strndup and with
 * libyaml and mbedtls statically (Makefile), so every allocation our code makes — cJSON is
 * compiled into our objects, and nghttp2 and protobuf-c allocate through malloc calls in our
 * objects (h2/conn.h: h2_nghttp2_mem, grpc/status.h: grpc_pb_allocator) — and every one libyaml
 * and mbedtls make goes through the counting wrappers (allocfail.h), which call the real (ASan)
 * allocator.  Not covered: allocations made inside libc (getline, open_memstream, realpath,
 * asprintf).  mbedtls is swept in test_allocfail_tls, the controller in test_allocfail_ctl.
 *
 * Operations: the codecs (JSON, model object files and configuration documents, pbjson, the kube
 * Status and watch codecs, the agent's configuration, stage records, fencing marks, identity
 * pins), one gRPC call through our client and our server (HTTP/2 both ways, in one process over
 * a unix socket), and the agent's handlers (GetCapabilities, ListVolumes, HealthCheck, and
 * CreateVolume then ExportVolume of a file-backed volume: RESOURCE_EXHAUSTED "out of memory",
 * never an abort). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/config.h"
#include "agent/fence.h"
#include "agent/identity.h"
#include "agent/service.h"
#include "allocfail.h"
#include "base/json.h"
#include "csi.pb-c.h"
#include "grpc/client.h"
#include "grpc/server.h"
#include "kube/codec.h"
#include "kube/status.h"
#include "kube/watch.h"
#include "model/docs.h"
#include "model/model.h"
#include "model/pillar.h"
#include "node/record.h"
#include "pbjson/pbjson.h"
#include "testutil.h"

/* ---- codecs ----------------------------------------------------------------------------------- */

#define PVST_JSON                                                                                  \
	"{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\","        \
	"\"metadata\":{\"name\":\"v\",\"labels\":{\"a\":\"b\"},\"finalizers\":[\"f\"]},\"spec\":"  \
	"{\"volumeId\":\"storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1\",\"capacityBytes\":1073741824," \
	"\"resolved\":{\"filesystem\":{\"fsType\":\"xfs\",\"mountOptions\":[\"noatime\"]}}},"      \
	"\"status\":{\"publicationGeneration\":2,\"conditions\":[{\"type\":\"Ready\",\"status\":"  \
	"\"True\",\"reason\":\"Ok\",\"message\":\"m\"}]}}"

static char ref[8192];

static int op_json(void *arg, char *why, size_t cap)
{
	struct err e = {0};
	cJSON *j = NULL;
	int rc = json_parse_strict(PVST_JSON, strlen(PVST_JSON), &j, &e);
	(void)arg;
	if (rc < 0)
		return af_err(&e, rc, why, cap);
	char *t = json_dump(j);
	cJSON_Delete(j);
	if (!t)
		return -1; /* json_dump: NULL when out of memory */
	rc = af_same(t, PVST_JSON, why, cap);
	free(t);
	return rc;
}

static int op_model_file(void *arg, char *why, size_t cap)
{
	const char *text = arg;
	struct model_any *a = NULL;
	size_t n = 0;
	struct err e = {0};
	int rc = model_decode_file(text, strlen(text), &a, &n, &e);
	if (rc < 0)
		return af_err(&e, rc, why, cap);
	if (n != 1 || !a[0].k) { /* the object refused: only with a reason */
		rc =
		    n == 1 && a[0].err[0] ? -1 : (snprintf(why, cap, "no object and no reason"), 1);
		model_any_free(a, n);
		return rc;
	}
	char *t = model_encode_text(a[0].k, a[0].obj); /* NULL: out of memory */
	rc = !t       ? -1
	     : ref[0] ? af_same(t, ref, why, cap)
	              : (snprintf(ref, sizeof(ref), "%s", t), 0);
	free(t);
	model_any_free(a, n);
	return rc;
}

static int op_model_doc(void *arg, char *why, size_t cap)
{
	struct model_filesystem fs = {0};
	struct err e = {0};
	int rc = model_doc_decode(&model_filesystem_type, "pillar-csi.bhyoo.com/filesystem", arg,
	                          &fs, &e);
	if (rc < 0)
		return af_err(&e, rc, why, cap);
	char *t = model_type_encode_text(&model_filesystem_type, &fs);
	model_type_clear(&model_filesystem_type, &fs);
	if (!t)
		return -1;
	rc = ref[0] ? af_same(t, ref, why, cap) : (snprintf(ref, sizeof(ref), "%s", t), 0);
	free(t);
	return rc;
}

static int op_pbjson(void *arg, char *why, size_t cap)
{
	static const char in[] =
	    "{\"name\":\"pvc-1\",\"capacityRange\":{\"requiredBytes\":\"1073741824\"},"
	    "\"volumeCapabilities\":[{\"mount\":{\"fsType\":\"ext4\"},\"accessMode\":{\"mode\":"
	    "\"SINGLE_NODE_WRITER\"}}],\"parameters\":{\"a\":\"b\"},\"secrets\":{\"s\":\"t\"}}";
	ProtobufCMessage *m = NULL;
	struct err e = {0};
	cJSON *j = NULL;
	int rc;
	(void)arg;
	if ((rc = json_parse_strict(in, strlen(in), &j, &e)) < 0)
		return af_err(&e, rc, why, cap);
	rc = pbjson_to_message(&csi__v1__create_volume_request__descriptor, j, &m, &e);
	cJSON_Delete(j);
	if (rc < 0)
		return af_err(&e, rc, why, cap);
	cJSON *out = pbjson_from_message(m, 0);
	char *log = pbjson_log_text(m), *t = out ? json_dump(out) : NULL;
	protobuf_c_message_free_unpacked(m, NULL);
	cJSON_Delete(out);
	rc = !t || !log ? -1 : af_same(t, in, why, cap);
	if (rc == 0 && strstr(log, "\"t\""))
		rc = (snprintf(why, cap, "the log shows a secret: %s", log), 1);
	free(t);
	free(log);
	return rc;
}

static int op_kube_status(void *arg, char *why, size_t cap)
{
	static const char body[] =
	    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
	    "\"message\":\"pillaragents \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":"
	    "{\"name\":\"x\",\"kind\":\"pillaragents\"},\"code\":404}";
	struct kube_status st;
	(void)arg;
	int rc = kube_status_decode(&st, 404, body, strlen(body));
	/* out of memory, the body cannot be parsed and is taken as text (as a body that is not a
	 * Status would be): still NotFound, with the body as the message */
	rc = rc != -ENOENT || st.kind != KUBE_NOT_FOUND || !st.message[0]
	         ? (snprintf(why, cap, "decoded %d reason %d: %s", rc, (int)st.kind, st.message), 1)
	     : strcmp(st.message, "pillaragents \"x\" not found") ? -1
	                                                          : 0;
	kube_status_clear(&st);
	return rc;
}

static int op_kube_watch(void *arg, char *why, size_t cap)
{
	static const char stream[] =
	    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"PillarAgent\",\"metadata\":{\"name\":\"a\","
	    "\"resourceVersion\":\"5\"}}}\n{\"type\":\"BOOKMARK\",\"object\":{\"kind\":"
	    "\"PillarAgent\""
	    ",\"metadata\":{\"resourceVersion\":\"7\"}}}\n";
	struct kube_watch_parser p;
	enum kube_event_type t;
	cJSON *obj;
	struct err e = {0};
	int rc, events = 0;
	(void)arg;
	kube_watch_parser_init(&p, 4096);
	rc = kube_watch_parser_push(&p, stream, sizeof(stream) - 1);
	while (rc == 0 && (rc = kube_watch_parser_next(&p, &t, &obj, &e)) == 1) {
		cJSON_Delete(obj);
		events++;
		rc = 0;
	}
	kube_watch_parser_free(&p);
	if (rc == -ENOMEM || (rc < 0 && e.msg[0]))
		return -1;
	if (rc < 0 || events != 2)
		return (snprintf(why, cap, "rc %d after %d events", rc, events), 1);
	return 0;
}

static int op_agent_config(void *arg, char *why, size_t cap)
{
	static const char in[] =
	    "{\"backends\":[{\"zfs\":{\"pool\":\"tank\",\"parentDataset\":\"k8s\"}},"
	    "{\"lvm\":{\"volumeGroup\":\"vg0\",\"thinPool\":\"t\"}},"
	    "{\"file\":{\"pool\":\"fpool\",\"directory\":\"/srv/files\"}}]}";
	struct agent_config c = {0};
	struct err e = {0};
	(void)arg;
	int rc = agent_config_parse(in, strlen(in), &c, &e);
	if (rc < 0)
		return af_err(&e, rc, why, cap);
	rc = c.n == 3 ? 0 : (snprintf(why, cap, "%zu backends", c.n), 1);
	agent_config_clear(&c);
	return rc;
}

#define NVOL "storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-abc123"

static int op_stage_record(void *arg, char *why, size_t cap)
{
	struct node_record w = {0}, r = {0};
	struct err e = {0};
	int rc;
	snprintf(w.protocol_type, sizeof(w.protocol_type), "nvmeof-tcp");
	snprintf(w.access_type, sizeof(w.access_type), "filesystem");
	snprintf(w.fs_type, sizeof(w.fs_type), "ext4");
	snprintf(w.subsys_nqn, sizeof(w.subsys_nqn), "nqn.2026-01.com.bhyoo.pillar-csi:tank.x");
	snprintf(w.address, sizeof(w.address), "10.0.0.5");
	snprintf(w.port, sizeof(w.port), "4420");
	snprintf(w.volume_id, sizeof(w.volume_id), NVOL);
	snprintf(w.staging_path, sizeof(w.staging_path), "/var/lib/kubelet/x");
	if ((rc = node_record_write(arg, &w, &e)) < 0 ||
	    (rc = node_record_read(arg, NVOL, &r, &e)) < 0)
		return af_err(&e, rc, why, cap);
	return af_same(r.subsys_nqn, w.subsys_nqn, why, cap) |
	       af_same(r.staging_path, w.staging_path, why, cap);
}

static int op_fence(void *arg, char *why, size_t cap)
{
	static unsigned gen = 1;
	struct fence_mark m = {0};
	struct err e = {0};
	int rc = agent_fence_check(arg, "fpool/pvc-1", "uid-1", ++gen, FENCE_GRANT, &e);
	if (rc < 0)
		return af_err(&e, rc, why, cap);
	if ((rc = agent_fence_read(arg, "fpool/pvc-1", &m, &e)) < 0)
		return af_err(&e, rc, why, cap);
	rc = m.generation == gen ? 0
	                         : (snprintf(why, cap, "mark generation %llu, granted %u",
	                                     (unsigned long long)m.generation, gen),
	                            1);
	agent_fence_mark_clear(&m);
	return rc;
}

static int op_identity(void *arg, char *why, size_t cap)
{
	struct rules_ns_identity id, pin = {"0b661a8a-9925-5917-b52c-a5719096bc2b",
	                                    "0b661a8a-9925-5917-b52c-a5719096bc2b", "pin-serial"};
	const char *nqn = RULES_NQN_PREFIX "fpool.pvc-1";
	struct err e = {0};
	int rc = agent_identity_settle(arg, "fpool/pvc-1", "uid-1", nqn, &pin, &e);
	if (rc < 0 || (rc = agent_identity_start(arg, "fpool/pvc-1", "uid-1", nqn, &id, &e)) < 0)
		return af_err(&e, rc, why, cap);
	return af_same(id.serial, "pin-serial", why, cap);
}

START_TEST(test_codecs)
{
	const char *dir = tu_mkdtemp();
	af_sweep("json parse+print", op_json, NULL);
	ref[0] = 0;
	af_sweep("model object file", op_model_file, PVST_JSON);
	ref[0] = 0;
	af_sweep("model document (YAML)", op_model_doc,
	         "fsType: xfs\nmkfsOptions: [\"-L\", data]\nmountOptions:\n  - noatime\n");
	af_sweep("pbjson", op_pbjson, NULL);
	af_sweep("kube Status", op_kube_status, NULL);
	af_sweep("kube watch stream", op_kube_watch, NULL);
	af_sweep("agent configuration", op_agent_config, NULL);
	af_sweep("stage record write+read", op_stage_record, (void *)dir);
	af_sweep("fencing mark", op_fence, (void *)dir);
	af_sweep("identity pin", op_identity, (void *)dir);
	tu_rmtree(dir);
}
END_TEST

/* ---- one gRPC call: our client, our server, HTTP/2 both ways ---------------------------------- */

static int h_info(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	Csi__V1__GetPluginInfoResponse *r = grpc_call_alloc(call, sizeof(*r));
	(void)req;
	(void)ctx;
	if (!r) {
		grpc_call_set_status_msg(call, "out of memory");
		return GRPC_RESOURCE_EXHAUSTED;
	}
	csi__v1__get_plugin_info_response__init(r);
	r->name = "pillar-csi.bhyoo.com";
	r->vendor_version = "0.1.0";
	*resp = &r->base;
	return GRPC_OK;
}

static const struct grpc_method info_methods[] = {
    {.name = "GetPluginInfo",
     .unary = h_info,
     .req = &csi__v1__get_plugin_info_request__descriptor,
     .resp = &csi__v1__get_plugin_info_response__descriptor},
};
static const struct grpc_service info_svc = {
    .name = "csi.v1.Identity", .methods = info_methods, .n_methods = 1};

static int op_rpc(void *arg, char *why, size_t cap)
{
	Csi__V1__GetPluginInfoRequest rq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	struct grpc_channel *ch;
	struct grpc_status st = {0};
	ProtobufCMessage *resp = NULL;
	struct err e = {0};
	int rc = grpc_channel_new(&ch, arg, NULL, &e);
	if (rc < 0)
		return af_err(&e, rc, why, cap);
	int code = grpc_channel_call(ch, "/csi.v1.Identity/GetPluginInfo", &rq.base,
	                             &csi__v1__get_plugin_info_response__descriptor, &resp, 5000,
	                             NULL, &st);
	grpc_channel_free(ch);
	if (code != GRPC_OK) {
		if (code == GRPC_DEADLINE_EXCEEDED) /* a lost wakeup, not an error report */
			return (snprintf(why, cap, "the call hung until its deadline: %s", st.msg),
			        1);
		return st.msg[0] ? -1 : (snprintf(why, cap, "code %d without a message", code), 1);
	}
	rc = af_same(((Csi__V1__GetPluginInfoResponse *)resp)->name, "pillar-csi.bhyoo.com", why,
	             cap);
	protobuf_c_message_free_unpacked(resp, NULL);
	return rc;
}

START_TEST(test_grpc_call)
{
	const char *dir = tu_mkdtemp();
	char listen[600], url[600];
	const char *ls[] = {listen, NULL};
	struct grpc_server_opts o;
	struct grpc_server *srv;
	struct err e = {0};
	snprintf(listen, sizeof(listen), "unix://%s/s.sock", dir);
	snprintf(url, sizeof(url), "unix://%s/s.sock", dir);
	grpc_server_opts_init(&o);
	o.listen = ls;
	o.workers = 2;
	ck_assert_msg(grpc_server_new(&srv, &o, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(grpc_server_add_service(srv, &info_svc, &e), 0);
	ck_assert_msg(grpc_server_start(srv, &e) == 0, "%s", e.msg);
	af_sweep("gRPC call (client and server)", op_rpc, url);
	grpc_server_free(srv);
	tu_rmtree(dir);
}
END_TEST

/* ---- the agent's response builders: RESOURCE_EXHAUSTED, never an abort ------------------------ */

#define PB(x) PillarCsi__Agent__V1__##x

static int agent_code(int code, const struct grpc_status *st, char *why, size_t cap)
{
	if (code == GRPC_RESOURCE_EXHAUSTED && strstr(st->msg, "out of memory"))
		return -1;
	return (snprintf(why, cap, "code %d: %s", code, st->msg), 1);
}

static int op_agent_caps(void *arg, char *why, size_t cap)
{
	PB(GetCapabilitiesResponse) *r = malloc(sizeof(*r));
	struct grpc_status st = {0};
	if (!r)
		return -1;
	pillar_csi__agent__v1__get_capabilities_response__init(r);
	int code = agent_get_capabilities(arg, NULL, r, &st), rc;
	rc = code != GRPC_OK ? agent_code(code, &st, why, cap)
	     : r->n_discovered_pools == 1
	         ? af_same(r->agent_version, "0.1.0-test", why, cap)
	         : (snprintf(why, cap, "%zu pools", r->n_discovered_pools), 1);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

static int op_agent_health(void *arg, char *why, size_t cap)
{
	PB(HealthCheckRequest) rq = PILLAR_CSI__AGENT__V1__HEALTH_CHECK_REQUEST__INIT;
	PB(HealthCheckResponse) *r = malloc(sizeof(*r));
	struct grpc_status st = {0};
	if (!r)
		return -1;
	pillar_csi__agent__v1__health_check_response__init(r);
	int code = agent_health_check(arg, &rq, r, &st);
	int rc = code != GRPC_OK ? agent_code(code, &st, why, cap)
	                         : af_same(r->agent_version, "0.1.0-test", why, cap);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

static int op_agent_list(void *arg, char *why, size_t cap)
{
	PB(ListVolumesRequest) rq = PILLAR_CSI__AGENT__V1__LIST_VOLUMES_REQUEST__INIT;
	rq.backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE;
	rq.pool_name = "fpool";
	PB(ListVolumesResponse) *r = malloc(sizeof(*r));
	struct grpc_status st = {0};
	if (!r)
		return -1;
	pillar_csi__agent__v1__list_volumes_response__init(r);
	int code = agent_list_volumes(arg, &rq, r, &st);
	int rc = code != GRPC_OK ? agent_code(code, &st, why, cap) : 0;
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

/* CreateVolume then ExportVolume of a new file-backed volume (a fresh name and lifecycle each
 * run, so every run takes the same path as the reference): each answers OK or RESOURCE_EXHAUSTED
 * "out of memory". */
static int op_agent_create_export(void *arg, char *why, size_t cap)
{
	static int seq;
	char id[64], uid[64];
	snprintf(id, sizeof(id), "fpool/af-%d", ++seq);
	snprintf(uid, sizeof(uid), "uid-af-%d", seq);
	PB(FencingToken) tok = PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
	tok.volume_uid = uid;
	tok.generation = 1;
	PB(CreateVolumeRequest) cq = PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	cq.volume_id = id;
	cq.capacity_bytes = 1 << 20;
	cq.backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE;
	cq.fence = &tok;
	PB(CreateVolumeResponse) *cr = malloc(sizeof(*cr));
	struct grpc_status st = {0};
	if (!cr)
		return -1;
	pillar_csi__agent__v1__create_volume_response__init(cr);
	int code = agent_create_volume(arg, &cq, cr, &st);
	protobuf_c_message_free_unpacked(&cr->base, NULL);
	if (code != GRPC_OK)
		return agent_code(code, &st, why, cap);
	PB(NvmeofTcpExportParams) tcp = PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
	PB(ExportParams) params = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
	PB(ExportVolumeRequest) eq = PILLAR_CSI__AGENT__V1__EXPORT_VOLUME_REQUEST__INIT;
	tcp.bind_address = "127.0.0.1";
	params.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	params.nvmeof_tcp = &tcp;
	eq.volume_id = id;
	eq.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	eq.export_params = &params;
	eq.acl_enabled = true;
	eq.fence = &tok;
	PB(ExportVolumeResponse) *er = malloc(sizeof(*er));
	if (!er)
		return -1;
	pillar_csi__agent__v1__export_volume_response__init(er);
	code = agent_export_volume(arg, &eq, er, &st);
	int rc = code != GRPC_OK ? agent_code(code, &st, why, cap)
	         : er->export_info && er->export_info->port == 4420
	             ? af_same(er->export_info->address, "127.0.0.1", why, cap)
	             : (snprintf(why, cap, "no export info"), 1);
	protobuf_c_message_free_unpacked(&er->base, NULL);
	return rc;
}

START_TEST(test_agent_out_of_memory)
{
	char root[400], cfs[480], state[480];
	struct agent_config cfg = {0};
	agent_service *svc = NULL;
	struct err e = {0};
	snprintf(root, sizeof(root), "%s", tu_mkdtemp());
	snprintf(cfs, sizeof(cfs), "%s/cfs", root);
	snprintf(state, sizeof(state), "%s/state", root);
	tu_agent_layout(root, &cfg);
	struct agent_service_opts o = {.state_dir = state,
	                               .configfs_root = cfs,
	                               .host_root = root, /* never the machine's /dev, /sys */
	                               .version = "0.1.0-test",
	                               .health_cache_ms = 1,
	                               .device_wait_ms = 300,
	                               .create_wait_ms = 300,
	                               .addr_wait_ms = 600,
	                               .busy_retry_ms = 10,
	                               .drain_wait_ms = 500};
	ck_assert_msg(agent_service_new(&cfg, &o, &svc, &e) == 0, "%s", e.msg);
	af_sweep("agent GetCapabilities", op_agent_caps, svc);
	af_sweep("agent HealthCheck", op_agent_health, svc);
	af_sweep("agent ListVolumes", op_agent_list, svc);
	/* the restore gate opens with a complete ReconcileState (an empty one here) */
	PB(ReconcileStateRequest) rq = PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PB(ReconcileStateResponse) *rr = malloc(sizeof(*rr));
	struct grpc_status st = {0};
	ck_assert_ptr_nonnull(rr);
	pillar_csi__agent__v1__reconcile_state_response__init(rr);
	rq.complete = true;
	ck_assert_msg(agent_reconcile_state(svc, &rq, rr, &st) == GRPC_OK, "%s", st.msg);
	protobuf_c_message_free_unpacked(&rr->base, NULL);
	af_sweep("agent CreateVolume+ExportVolume", op_agent_create_export, svc);
	agent_service_free(svc);
	agent_config_clear(&cfg);
	tu_rmtree(root);
}
END_TEST

Suite *allocfail_suite(void);
Suite *allocfail_suite(void)
{
	Suite *s = suite_create("allocfail");
	TCase *tc = tcase_create("sweep");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_codecs);
	tcase_add_test(tc, test_grpc_call);
	tcase_add_test(tc, test_agent_out_of_memory);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(allocfail_suite());
}
