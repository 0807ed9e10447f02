/* The AgentService handlers as a component: file backend in a temp directory, fake configfs
 * root, real state directory.  Gate per RPC, lifecycle with fencing, two-phase restore (a hook
 * inspects the tree between the phases), failed-item isolation, in-capsule ordering and
 * conflict, bind-address check, restart without reboot, drain. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_fixture.h"

#define UID1 "uid-1111"
#define H1   "nqn.2014-08.org.nvmexpress:uuid:host-1"
#define H2   "nqn.2014-08.org.nvmexpress:uuid:host-2"

static int hook_calls;

/* openat and unlink calls of paths that end with watch_mark or watch_pin (when set). */
static const char *watch_mark, *watch_pin;
static atomic_int mark_opens, pin_opens, pin_unlinks;

static bool ends_with(const char *s, const char *end)
{
	size_t n = strlen(s), k = end ? strlen(end) : 0;
	return end && n >= k && strcmp(s + n - k, end) == 0;
}

int openat(int dirfd, const char *path, int flags, ...)
{
	static int (*real)(int, const char *, int, ...);
	mode_t mode = 0;
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "openat");
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if (ends_with(path, watch_mark))
		atomic_fetch_add(&mark_opens, 1);
	if (ends_with(path, watch_pin))
		atomic_fetch_add(&pin_opens, 1);
	return real(dirfd, path, flags, mode);
}

int unlink(const char *path)
{
	static int (*real)(const char *);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "unlink");
	if (ends_with(path, watch_pin))
		atomic_fetch_add(&pin_unlinks, 1);
	return real(path);
}

static void make_service(void (*hook)(void *))
{
	struct agent_service_opts o = af_opts();
	o.between_phases = hook;
	af_start(&o);
}

static void setup(void)
{
	af_setup();
	hook_calls = 0;
	make_service(NULL);
}

static const char *attr(const char *rel)
{
	char p[1200];
	snprintf(p, sizeof(p), "nvmet/%s", rel);
	return tu_read(cfs, p);
}

static bool port_exists(void)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "ports/%u", port_id);
	return af_exists(rel);
}

static const char *port_attr(const char *name)
{
	char rel[200];
	snprintf(rel, sizeof(rel), "ports/%u/%s", port_id, name);
	return attr(rel);
}

/* ---- request builders ------------------------------------------------------------------------ */

static int create(const char *id, int64_t size, PB(FencingToken) * t, struct grpc_status *st)
{
	PB(CreateVolumeRequest) req = PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	PB(CreateVolumeResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__create_volume_response__init(resp);
	req.volume_id = (char *)id;
	req.capacity_bytes = size;
	req.backend_type = FILE_T;
	req.fence = t;
	int code = agent_create_volume(svc, &req, resp, st);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

struct exp {
	PB(NvmeofTcpExportParams) tcp;
	PB(ExportParams) params;
};

static void exp_init(struct exp *x, const char *addr, int icds)
{
	PB(NvmeofTcpExportParams) t = PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
	PB(ExportParams) p = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
	x->tcp = t;
	x->params = p;
	x->tcp.bind_address = (char *)addr;
	x->tcp.in_capsule_data_size = icds;
	x->params.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	x->params.nvmeof_tcp = &x->tcp;
}

static int export(const char *id, bool acl, int icds, PB(FencingToken) * t, struct grpc_status *st)
{
	struct exp x;
	PB(ExportVolumeRequest) req = PILLAR_CSI__AGENT__V1__EXPORT_VOLUME_REQUEST__INIT;
	PB(ExportVolumeResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__export_volume_response__init(resp);
	exp_init(&x, "127.0.0.1", icds);
	req.volume_id = (char *)id;
	req.protocol_type = TCP;
	req.export_params = &x.params;
	req.acl_enabled = acl;
	req.fence = t;
	int code = agent_export_volume(svc, &req, resp, st);
	if (code == GRPC_OK) {
		ck_assert_str_eq(resp->export_info->address, "127.0.0.1");
		ck_assert_int_eq(resp->export_info->port, 4420);
		ck_assert_str_eq(resp->export_info->volume_ref, "1");
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

static int initiator(bool allow, const char *id, const char *host, PB(FencingToken) * t,
                     struct grpc_status *st)
{
	if (allow) {
		PB(AllowInitiatorRequest)
		req = PILLAR_CSI__AGENT__V1__ALLOW_INITIATOR_REQUEST__INIT;
		req.volume_id = (char *)id;
		req.protocol_type = TCP;
		req.initiator_id = (char *)host;
		req.fence = t;
		return agent_allow_initiator(svc, &req, NULL, st);
	}
	PB(DenyInitiatorRequest) req = PILLAR_CSI__AGENT__V1__DENY_INITIATOR_REQUEST__INIT;
	req.volume_id = (char *)id;
	req.protocol_type = TCP;
	req.initiator_id = (char *)host;
	req.fence = t;
	return agent_deny_initiator(svc, &req, NULL, st);
}

static int unexport(const char *id, PB(FencingToken) * t, struct grpc_status *st)
{
	PB(UnexportVolumeRequest) req = PILLAR_CSI__AGENT__V1__UNEXPORT_VOLUME_REQUEST__INIT;
	req.volume_id = (char *)id;
	req.protocol_type = TCP;
	req.fence = t;
	return agent_unexport_volume(svc, &req, NULL, st);
}

static int delete (const char *id, PB(FencingToken) * t, struct grpc_status *st)
{
	PB(DeleteVolumeRequest) req = PILLAR_CSI__AGENT__V1__DELETE_VOLUME_REQUEST__INIT;
	req.volume_id = (char *)id;
	req.backend_type = FILE_T;
	req.fence = t;
	return agent_delete_volume(svc, &req, NULL, st);
}

static int expand(const char *id, int64_t size, PB(FencingToken) * t, struct grpc_status *st)
{
	PB(ExpandVolumeRequest) req = PILLAR_CSI__AGENT__V1__EXPAND_VOLUME_REQUEST__INIT;
	PB(ExpandVolumeResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__expand_volume_response__init(resp);
	req.volume_id = (char *)id;
	req.requested_bytes = size;
	req.backend_type = FILE_T;
	req.fence = t;
	int code = agent_expand_volume(svc, &req, resp, st);
	if (code == GRPC_OK)
		ck_assert_int_eq(resp->capacity_bytes, size);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

/* One desired volume for ReconcileState. */
struct want {
	const char *id, *addr, *uid;
	uint64_t gen;
	int icds;
	bool acl;
	const char *hosts[2];
	size_t n_hosts;
	/* storage */
	PB(FencingToken) t;
	struct exp x;
	PB(ExportDesiredState) ex;
	PB(ExportDesiredState) * exs[1];
	PB(VolumeDesiredState) vd;
};

static void want_build(struct want *w)
{
	PB(ExportDesiredState) ex = PILLAR_CSI__AGENT__V1__EXPORT_DESIRED_STATE__INIT;
	PB(VolumeDesiredState) vd = PILLAR_CSI__AGENT__V1__VOLUME_DESIRED_STATE__INIT;
	w->t = af_token(w->uid ? w->uid : UID1, w->gen);
	exp_init(&w->x, w->addr ? w->addr : "127.0.0.1", w->icds);
	w->ex = ex;
	w->ex.protocol_type = TCP;
	w->ex.export_params = &w->x.params;
	w->ex.acl_enabled = w->acl;
	w->ex.allowed_initiators = (char **)w->hosts;
	w->ex.n_allowed_initiators = w->n_hosts;
	w->exs[0] = &w->ex;
	w->vd = vd;
	w->vd.volume_id = (char *)w->id;
	w->vd.backend_type = FILE_T;
	w->vd.exports = w->exs;
	w->vd.n_exports = 1;
	w->vd.fence = &w->t;
}

/* Runs ReconcileState; fills msgs[i] with "" (success) or the item's error_message. */
static int reconcile(struct want *w, size_t n, bool complete, char msgs[][600],
                     struct grpc_status *st)
{
	PB(ReconcileStateRequest) req = PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PB(VolumeDesiredState) * vols[8];
	PB(ReconcileStateResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__reconcile_state_response__init(resp);
	for (size_t i = 0; i < n; i++) {
		want_build(&w[i]);
		vols[i] = &w[i].vd;
	}
	req.volumes = vols;
	req.n_volumes = n;
	req.complete = complete;
	int code = agent_reconcile_state(svc, &req, resp, st);
	if (code == GRPC_OK) {
		ck_assert_uint_eq(resp->n_results, n);
		ck_assert_ptr_nonnull(resp->reconciled_at);
		for (size_t i = 0; i < n; i++) {
			ck_assert_str_eq(resp->results[i]->volume_id, w[i].id); /* request order */
			ck_assert_int_eq(resp->results[i]->success,
			                 resp->results[i]->error_message[0] == 0);
			if (msgs)
				snprintf(msgs[i], 600, "%s", resp->results[i]->error_message);
		}
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

static void open_gate(void)
{
	struct grpc_status st;
	ck_assert_int_eq(reconcile(NULL, 0, true, NULL, &st), GRPC_OK);
}

static bool restore_pending(void)
{
	struct grpc_status st;
	PB(HealthCheckRequest) req = PILLAR_CSI__AGENT__V1__HEALTH_CHECK_REQUEST__INIT;
	PB(HealthCheckResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__health_check_response__init(resp);
	ck_assert_int_eq(agent_health_check(svc, &req, resp, &st), GRPC_OK);
	ck_assert_str_eq(resp->agent_version, "0.1.0-test");
	ck_assert_ptr_nonnull(resp->checked_at);
	ck_assert_uint_ge(resp->n_subsystems, 3);
	ck_assert_str_eq(resp->subsystems[0]->name, "nvmet-configfs");
	ck_assert(resp->subsystems[0]->healthy);
	bool p = resp->export_restore_pending;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return p;
}

/* ---- tests ------------------------------------------------------------------------------------- */

START_TEST(test_gate_per_rpc)
{
	struct grpc_status st;
	PB(FencingToken) t = af_token(UID1, 1);
	ck_assert(restore_pending());
	/* not gated: backend RPCs */
	ck_assert_int_eq(create("fpool/v1", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(expand("fpool/v1", 2 << 20, &t, &st), GRPC_OK);
	/* gated */
	ck_assert_int_eq(export("fpool/v1", false, 0, &t, &st), GRPC_UNAVAILABLE);
	ck_assert_str_eq(st.msg, "export restore pending: ExportVolume: awaiting a complete "
	                         "ReconcileState from the controller before exporting");
	ck_assert_int_eq(initiator(true, "fpool/v1", H1, &t, &st), GRPC_UNAVAILABLE);
	ck_assert_str_eq(st.msg, "export restore pending: AllowInitiator: awaiting a complete "
	                         "ReconcileState from the controller before exporting");
	struct want w = {.id = "fpool/v1", .gen = 1};
	ck_assert_int_eq(reconcile(&w, 1, false, NULL, &st), GRPC_UNAVAILABLE);
	ck_assert_str_eq(st.msg, "export restore pending: ReconcileState: awaiting a complete "
	                         "ReconcileState from the controller before exporting");
	ck_assert(!af_exists("subsystems/" NQN("v1")));
	/* not gated: revokes */
	ck_assert_int_eq(initiator(false, "fpool/v1", H1, &t, &st), GRPC_OK);
	ck_assert_int_eq(unexport("fpool/v1", &t, &st), GRPC_OK);
	/* a complete (empty) ReconcileState opens the gate */
	open_gate();
	ck_assert(!restore_pending());
	ck_assert_int_eq(export("fpool/v1", false, 0, &t, &st), GRPC_OK);
	ck_assert_int_eq(reconcile(&w, 1, false, NULL, &st), GRPC_OK);
	/* SendVolume / ReceiveVolume */
	ck_assert_int_eq(agent_unimplemented("SendVolume", &st), GRPC_UNIMPLEMENTED);
}
END_TEST

START_TEST(test_lifecycle_and_fencing)
{
	struct grpc_status st;
	PB(FencingToken)
	t1 = af_token(UID1, 1), t2 = af_token(UID1, 2), t3 = af_token(UID1, 3),
	none = af_token("", 0);
	open_gate();
	ck_assert_int_eq(create("fpool/v1", 1 << 20, &t1, &st), GRPC_OK);
	ck_assert_int_eq(create("fpool/v1", 1 << 20, &t1, &st), GRPC_OK); /* idempotent */
	ck_assert_int_eq(create("fpool/v1", 2 << 20, &t1, &st), GRPC_ALREADY_EXISTS);
	ck_assert_str_eq(st.msg,
	                 "volume \"fpool/v1\" exists with 1048576 bytes; requested 2097152");
	ck_assert_int_eq(export("fpool/v1", true, 0, &t2, &st), GRPC_OK);
	ck_assert_str_eq(attr("subsystems/" NQN("v1") "/attr_allow_any_host"), "0\n");
	ck_assert_int_eq(initiator(true, "fpool/v1", H1, &t3, &st), GRPC_OK);
	ck_assert(af_exists("subsystems/" NQN("v1") "/allowed_hosts/" H1));
	/* stale: older generation, token-less */
	ck_assert_int_eq(initiator(true, "fpool/v1", H2, &t2, &st), GRPC_FAILED_PRECONDITION);
	ck_assert(strncmp(st.msg, "stale fencing token (uid \"uid-1111\", generation 2)", 50) == 0);
	ck_assert_int_eq(initiator(true, "fpool/v1", H2, &none, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_ptr_nonnull(strstr(st.msg, "missing fencing token"));
	ck_assert_int_eq(initiator(true, "fpool/v1", H2, NULL, &st), GRPC_FAILED_PRECONDITION);
	ck_assert(!af_exists("subsystems/" NQN("v1") "/allowed_hosts/" H2));
	/* bad host NQN */
	ck_assert_int_eq(initiator(true, "fpool/v1", "host-2", &t3, &st), GRPC_INVALID_ARGUMENT);
	/* delete refused while exported */
	PB(FencingToken) t4 = af_token(UID1, 4);
	ck_assert_int_eq(initiator(false, "fpool/v1", H1, &t4, &st), GRPC_OK);
	ck_assert(!af_exists("hosts/" H1));
	ck_assert_int_eq(delete ("fpool/v1", &t4, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(
	    st.msg, "volume \"fpool/v1\" is still exported as " NQN("v1") "; unexport it first");
	ck_assert_int_eq(unexport("fpool/v1", &t4, &st), GRPC_OK);
	ck_assert(!af_exists("subsystems/" NQN("v1")) && !port_exists());
	ck_assert_int_eq(unexport("fpool/v1", &t4, &st), GRPC_OK); /* missing = OK */
	ck_assert_int_eq(delete ("fpool/v1", &t4, &st), GRPC_OK);
	ck_assert_int_eq(delete ("fpool/v1", &t4, &st), GRPC_OK); /* retry of the final delete */
	ck_assert_int_eq(create("fpool/v1", 1 << 20, &t4, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_ptr_nonnull(strstr(st.msg, "lifecycle already ended"));
	/* a corrupt mark is INTERNAL */
	tu_write(state, "generations/fpool_2Fv2.mark", "{\"volumeUID\":");
	ck_assert_int_eq(create("fpool/v2", 1 << 20, &t1, &st), GRPC_INTERNAL);
	ck_assert(strncmp(st.msg, "corrupt fencing mark ", 21) == 0);
}
END_TEST

/* ExportVolume reads its volume's fencing mark once: the volume's lock, held from the check to
 * the link, keeps the mark as the check read it.  With no identity pinned it looks for the
 * record once and removes none. */
START_TEST(test_export_reads_its_records_once)
{
	struct grpc_status st;
	PB(FencingToken) t1 = af_token(UID1, 1);
	open_gate();
	ck_assert_int_eq(create("fpool/v1", 1 << 20, &t1, &st), GRPC_OK);
	watch_mark = "/generations/fpool_2Fv1.mark";
	watch_pin = "/nvmet-identity/fpool_2Fv1.json";
	int code = export("fpool/v1", true, 0, &t1, &st);
	watch_mark = watch_pin = NULL;
	ck_assert_msg(code == GRPC_OK, "%s", st.msg);
	ck_assert(af_linked(NQN("v1")));
	int marks = atomic_load(&mark_opens), pins = atomic_load(&pin_opens),
	    removed = atomic_load(&pin_unlinks);
	ck_assert_int_eq(marks, 1);
	ck_assert_int_eq(pins, 1);
	ck_assert_int_eq(removed, 0);
}
END_TEST

START_TEST(test_validation)
{
	struct grpc_status st;
	PB(FencingToken) t = af_token(UID1, 1);
	ck_assert_int_eq(create("fpool/a/b", 1 << 20, &t, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "invalid volume id \"fpool/a/b\"");
	ck_assert_int_eq(create("fpool/../x", 1 << 20, &t, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_int_eq(create("fpool/-x", 1 << 20, &t, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_int_eq(create("tank/x", 1 << 20, &t, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, "pool \"tank\" is not configured on this agent");
	ck_assert_int_eq(create("fpool/x", 0, &t, &st), GRPC_INVALID_ARGUMENT);
	PB(CreateVolumeRequest) req = PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	req.volume_id = "fpool/x";
	req.capacity_bytes = 1;
	req.backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL;
	req.fence = &t;
	ck_assert_int_eq(agent_create_volume(svc, &req, NULL, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "pool \"fpool\" is a file backend");
	req.backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_DIRECTORY;
	ck_assert_int_eq(agent_create_volume(svc, &req, NULL, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "unsupported backend type 5");
	open_gate();
	ck_assert_int_eq(create("fpool/x", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(export("fpool/x", false, 512, &t, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "in_capsule_data_size 512 is below 1024");
}
END_TEST

/* agent-api.md §14: FileVolumeParams travel in BackendParams.file (= 3). */
START_TEST(test_file_backend_params)
{
	struct grpc_status st;
	PB(FencingToken) t = af_token(UID1, 1);
	PB(FileVolumeParams) fp = PILLAR_CSI__AGENT__V1__FILE_VOLUME_PARAMS__INIT;
	PB(ZfsVolumeParams) zp = PILLAR_CSI__AGENT__V1__ZFS_VOLUME_PARAMS__INIT;
	PB(BackendParams) bp = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__INIT;
	PB(CreateVolumeRequest) req = PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	PB(CreateVolumeResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__create_volume_response__init(resp);
	req.volume_id = "fpool/fp1";
	req.capacity_bytes = 1 << 20;
	req.backend_type = FILE_T;
	req.fence = &t;
	req.backend_params = &bp;
	bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE;
	bp.file = &fp;
	fp.pool = "other"; /* a layout mismatch (agent-api.md §1: FAILED_PRECONDITION) */
	ck_assert_int_eq(agent_create_volume(svc, &req, NULL, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_ptr_nonnull(strstr(st.msg, "other"));
	bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_ZFS;
	bp.zfs = &zp;
	ck_assert_int_eq(agent_create_volume(svc, &req, NULL, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "pool \"fpool\" is a file backend");
	bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE;
	bp.file = &fp;
	fp.pool = "fpool";
	fp.preallocate = 1;
	ck_assert_int_eq(agent_create_volume(svc, &req, resp, &st), GRPC_OK);
	ck_assert_int_eq(resp->capacity_bytes, 1 << 20);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}
END_TEST

START_TEST(test_expand_online)
{
	struct grpc_status st;
	PB(FencingToken) t = af_token(UID1, 1);
	open_gate();
	ck_assert_int_eq(create("fpool/v1", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(export("fpool/v1", false, 0, &t, &st), GRPC_OK);
	ck_assert_int_eq(expand("fpool/v1", 4 << 20, &t, &st), GRPC_OK);
	ck_assert_str_eq(attr("subsystems/" NQN("v1") "/namespaces/1/revalidate_size"), "1\n");
	ck_assert_str_eq(attr("subsystems/" NQN("v1") "/namespaces/1/enable"), "1\n");
	ck_assert_int_eq(expand("fpool/v1", 2 << 20, &t, &st), GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(st.msg, "cannot shrink volume \"fpool/v1\" from 4194304 to 2097152 bytes");
	ck_assert_int_eq(expand("fpool/none", 2 << 20, &t, &st), GRPC_NOT_FOUND);
	/* a size no granule rounds within int64_t: OUT_OF_RANGE before the backend is asked */
	ck_assert_int_eq(expand("fpool/v1", INT64_MAX, &t, &st), GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(st.msg, "capacity 9223372036854775807 bytes exceeds the largest size "
	                         "accepted, 9223372035781033984 bytes");
	ck_assert_int_eq(create("fpool/v2", INT64_MAX, &t, &st), GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(st.msg, "capacity 9223372036854775807 bytes exceeds the largest size "
	                         "accepted, 9223372035781033984 bytes");
	ck_assert_int_eq(create("fpool/v2", INT64_MAX - (1LL << 30) + 2, &t, &st),
	                 GRPC_OUT_OF_RANGE);
}
END_TEST

/* Between the phases: every good item is fully prepared and no port link exists anywhere. */
static void hook_check(void *arg)
{
	(void)arg;
	hook_calls++;
	ck_assert(!af_linked(NQN("a")));
	ck_assert(!af_linked(NQN("b")));
	ck_assert(!port_exists());
	ck_assert_str_eq(attr("subsystems/" NQN("a") "/namespaces/1/enable"), "1\n");
	ck_assert_str_eq(attr("subsystems/" NQN("b") "/namespaces/1/enable"), "1\n");
	ck_assert(af_exists("subsystems/" NQN("b") "/allowed_hosts/" H1));
}

/* A volume listed twice (not next to each other) is refused before anything is touched. */
START_TEST(test_reconcile_duplicate_volume)
{
	struct grpc_status st;
	struct want w[3] = {
	    {.id = "fpool/a", .gen = 1}, {.id = "fpool/b", .gen = 1}, {.id = "fpool/a", .gen = 1}};
	ck_assert_int_eq(reconcile(w, 3, true, NULL, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "volume \"fpool/a\" appears more than once in the request");
	ck_assert(restore_pending());
}
END_TEST

START_TEST(test_two_phase_restore_and_isolation)
{
	struct grpc_status st;
	char msgs[4][600];
	PB(FencingToken) t = af_token(UID1, 5);
	ck_assert_int_eq(create("fpool/a", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(create("fpool/b", 1 << 20, &t, &st), GRPC_OK);
	PB(FencingToken) told = af_token("uid-old", 9);
	ck_assert_int_eq(create("fpool/s", 1 << 20, &told, &st), GRPC_OK);
	agent_service_free(svc);
	make_service(hook_check); /* "reboot": new process, gate closed */
	ck_assert(restore_pending());
	struct want w[4] = {
	    {.id = "fpool/b", .gen = 5, .acl = true, .hosts = {H1}, .n_hosts = 1},
	    {.id = "fpool/missing", .gen = 1},        /* backing device never appears */
	    {.id = "fpool/s", .gen = 9, .uid = UID1}, /* owned by another lifecycle: stale */
	    {.id = "fpool/a", .gen = 5},
	};
	ck_assert_int_eq(reconcile(w, 4, true, msgs, &st), GRPC_OK);
	ck_assert_int_eq(hook_calls, 1);
	ck_assert_str_eq(msgs[0], "");
	ck_assert_str_eq(msgs[3], "");
	ck_assert_msg(strncmp(msgs[1], "UNAVAILABLE: backing device ", 28) == 0, "%s", msgs[1]);
	ck_assert_ptr_nonnull(strstr(msgs[1],
	                             "of volume \"fpool/missing\" is not available (pool not "
	                             "imported or volume group not active)"));
	ck_assert_msg(strncmp(msgs[2], "FAILED_PRECONDITION: stale fencing token", 40) == 0, "%s",
	              msgs[2]);
	ck_assert(af_linked(NQN("a")));
	ck_assert(af_linked(NQN("b")));
	ck_assert(!af_exists("subsystems/" NQN("missing")) || !af_linked(NQN("missing")));
	ck_assert(!af_exists("subsystems/" NQN("s")));
	/* the identity written is the derived one */
	struct rules_ns_identity id;
	rules_ns_identity_derive(NQN("a"), &id);
	char want_serial[32], want_uuid[64];
	snprintf(want_serial, sizeof(want_serial), "%s\n", id.serial);
	ck_assert_str_eq(attr("subsystems/" NQN("a") "/attr_serial"), want_serial);
	snprintf(want_uuid, sizeof(want_uuid), "%s\n", id.uuid);
	ck_assert_str_eq(attr("subsystems/" NQN("a") "/namespaces/1/device_uuid"), want_uuid);
	/* complete=true opened the gate although items failed */
	ck_assert(!restore_pending());
}
END_TEST

START_TEST(test_icds_link_order_and_conflict)
{
	struct grpc_status st;
	char msgs[2][600];
	PB(FencingToken) t = af_token(UID1, 1);
	ck_assert_int_eq(create("fpool/a", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(create("fpool/z", 1 << 20, &t, &st), GRPC_OK);
	/* "a" sorts first but asks nothing; "z" requests 8192 and must be linked first */
	struct want w[2] = {{.id = "fpool/a", .gen = 1}, {.id = "fpool/z", .gen = 1, .icds = 8192}};
	ck_assert_int_eq(reconcile(w, 2, true, msgs, &st), GRPC_OK);
	ck_assert_str_eq(msgs[0], "");
	ck_assert_str_eq(msgs[1], "");
	ck_assert_str_eq(port_attr("param_inline_data_size"), "8192\n");
	/* a different size on the live port: the spec's conflict */
	ck_assert_int_eq(create("fpool/c", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(export("fpool/c", false, 16384, &t, &st), GRPC_FAILED_PRECONDITION);
	char want[200];
	snprintf(want, sizeof(want),
	         "param_inline_data_size is 8192 but the export requires 16384 "
	         "(port %u, ipv4 4420)",
	         port_id);
	ck_assert_str_eq(st.msg, want);
}
END_TEST

START_TEST(test_bind_address_missing)
{
	struct grpc_status st;
	char msgs[1][600];
	PB(FencingToken) t = af_token(UID1, 1);
	ck_assert_int_eq(create("fpool/a", 1 << 20, &t, &st), GRPC_OK);
	struct want w = {.id = "fpool/a", .gen = 1, .addr = "192.0.2.77"};
	ck_assert_int_eq(reconcile(&w, 1, true, msgs, &st), GRPC_OK);
	ck_assert_str_eq(msgs[0],
	                 "UNAVAILABLE: bind address 192.0.2.77 is not configured on this node");
	ck_assert_str_eq(attr("subsystems/" NQN("a") "/namespaces/1/enable"), "1\n"); /* prepared */
	unsigned id = nvmet_port_preferred_id("192.0.2.77", 4420);
	char rel[64];
	snprintf(rel, sizeof(rel), "ports/%u", id);
	ck_assert(!af_exists(rel)); /* unlinked */
}
END_TEST

static char tlog[32][512];
static int tn;
static void tracer(void *arg, const char *op, const char *rel, const char *value)
{
	(void)arg;
	if (tn < 32)
		snprintf(tlog[tn++], sizeof(tlog[0]), "%s %s %s", op, rel, value ? value : "");
}

START_TEST(test_restart_without_reboot)
{
	struct grpc_status st;
	char msgs[2][600];
	PB(FencingToken) t = af_token(UID1, 1);
	ck_assert_int_eq(create("fpool/a", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(create("fpool/b", 1 << 20, &t, &st), GRPC_OK);
	struct want w[2] = {{.id = "fpool/a", .gen = 1, .acl = true, .hosts = {H1}, .n_hosts = 1},
	                    {.id = "fpool/b", .gen = 1}};
	ck_assert_int_eq(reconcile(w, 2, true, msgs, &st), GRPC_OK);
	ck_assert_str_eq(msgs[0], "");
	/* plain restart: the agent never touches configfs at start */
	agent_service_free(svc);
	make_service(NULL);
	ck_assert(restore_pending());
	ck_assert(af_linked(NQN("a")));
	/* the gate delays only new exports; ListExports sees the live ones */
	PB(ListExportsRequest) lreq = PILLAR_CSI__AGENT__V1__LIST_EXPORTS_REQUEST__INIT;
	PB(ListExportsResponse) *lresp = malloc(sizeof(*lresp));
	pillar_csi__agent__v1__list_exports_response__init(lresp);
	lreq.protocol_type = TCP;
	ck_assert_int_eq(agent_list_exports(svc, &lreq, lresp, &st), GRPC_OK);
	ck_assert_uint_eq(lresp->n_exports, 2);
	ck_assert_str_eq(lresp->exports[0]->key, "fpool/a");
	ck_assert_str_eq(lresp->exports[0]->value->target_id, NQN("a"));
	ck_assert_int_eq(lresp->exports[0]->value->port, 4420);
	protobuf_c_message_free_unpacked(&lresp->base, NULL);
	/* the controller re-sends the same list: nothing is unlinked, disabled or rewritten */
	tn = 0;
	nvmet_set_trace(agent_service_nvmet(svc), tracer, NULL);
	ck_assert_int_eq(reconcile(w, 2, true, msgs, &st), GRPC_OK);
	ck_assert_str_eq(msgs[0], "");
	ck_assert_str_eq(msgs[1], "");
	ck_assert_msg(tn == 0, "unexpected change: %s", tlog[0]);
	ck_assert(!restore_pending());
}
END_TEST

/* A restore's configfs system calls per export (nvmet_calls, the fake's own emulation left
 * out), on an empty tree after a reboot and again on the tree it left: the phase-2 link of a
 * batch's later exports is one lstat, a symlink and its read-back (it read the port's links),
 * the prepared subsystem is not read again after its own read-backs, and the batch lists the
 * ports once, not once per live subsystem (51 and 37 per export before).  The second restore
 * changes nothing. */
START_TEST(test_restore_calls_per_export)
{
	enum { N = 8 };
	static char ids[N][32];
	struct want w[N];
	struct grpc_status st;
	char msgs[N][600];
	PB(FencingToken) t = af_token(UID1, 1);
	memset(w, 0, sizeof(w));
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "fpool/r%d", i);
		ck_assert_int_eq(create(ids[i], 1 << 20, &t, &st), GRPC_OK);
		w[i] = (struct want){.id = ids[i], .gen = 1, .acl = true};
	}
	agent_service_free(svc);
	make_service(NULL); /* "reboot": new process, empty tree */
	unsigned long c0 = nvmet_calls(agent_service_nvmet(svc));
	ck_assert_int_eq(reconcile(w, N, true, msgs, &st), GRPC_OK);
	unsigned long c1 = nvmet_calls(agent_service_nvmet(svc));
	for (int i = 0; i < N; i++) {
		char nqn[128];
		snprintf(nqn, sizeof(nqn), RULES_NQN_PREFIX "fpool.r%d", i);
		ck_assert_str_eq(msgs[i], "");
		ck_assert(af_linked(nqn));
	}
	ck_assert_msg((c1 - c0) / N <= 45, "%lu calls per export on an empty tree", (c1 - c0) / N);
	tn = 0;
	nvmet_set_trace(agent_service_nvmet(svc), tracer, NULL);
	ck_assert_int_eq(reconcile(w, N, true, msgs, &st), GRPC_OK);
	unsigned long c2 = nvmet_calls(agent_service_nvmet(svc));
	ck_assert_msg(tn == 0, "unexpected change: %s", tlog[0]);
	ck_assert_msg((c2 - c1) / N <= 33, "%lu calls per export on a restored tree",
	              (c2 - c1) / N);
}
END_TEST

/* A batch lists the ports once: a live subsystem linked to a port other than the one the
 * batch links into (made by older software) is still seen as linked, so its live serial is
 * kept (K4) and pinned. */
START_TEST(test_restore_keeps_serial_of_foreign_port)
{
	struct grpc_status st;
	char msgs[2][600], dev[600], link[1200];
	PB(FencingToken) t = af_token(UID1, 1);
	ck_assert_int_eq(create("fpool/a", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(create("fpool/b", 1 << 20, &t, &st), GRPC_OK);
	snprintf(dev, sizeof(dev), "%s/a.img\n", files);
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/attr_allow_any_host", "0\n");
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/attr_serial", "1234abcd\n");
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/namespaces/1/device_path", dev);
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/namespaces/1/enable", "1\n");
	tu_write(cfs, "nvmet/ports/7/addr_trtype", "tcp\n");
	snprintf(link, sizeof(link), "%s/nvmet/ports/7/subsystems", cfs);
	ck_assert_int_eq(mkdir(link, 0755), 0);
	snprintf(link, sizeof(link), "%s/nvmet/ports/7/subsystems/" NQN("a"), cfs);
	ck_assert_int_eq(symlink("../../../subsystems/" NQN("a"), link), 0);
	struct want w[2] = {{.id = "fpool/a", .gen = 1, .acl = true},
	                    {.id = "fpool/b", .gen = 1, .acl = true}};
	ck_assert_int_eq(reconcile(w, 2, true, msgs, &st), GRPC_OK);
	ck_assert_str_eq(msgs[0], "");
	ck_assert_str_eq(msgs[1], "");
	ck_assert_str_eq(attr("subsystems/" NQN("a") "/attr_serial"), "1234abcd\n");
	ck_assert_ptr_nonnull(
	    strstr(tu_read(state, "nvmet-identity/fpool_2Fa.json"), "\"serial\":\"1234abcd\""));
	ck_assert(af_linked(NQN("a")) && af_linked(NQN("b")));
}
END_TEST

START_TEST(test_live_foreign_identity_is_pinned)
{
	struct grpc_status st;
	char msgs[1][600];
	PB(FencingToken) t = af_token(UID1, 1);
	ck_assert_int_eq(create("fpool/a", 1 << 20, &t, &st), GRPC_OK);
	/* a live, enabled namespace with a kernel-random identity (older software) */
	char dev[600];
	snprintf(dev, sizeof(dev), "%s/a.img\n", files);
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/attr_allow_any_host", "1\n");
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/attr_serial", "1234abcd\n");
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/namespaces/1/device_path", dev);
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/namespaces/1/device_uuid",
	         "11111111-2222-4333-8444-555555555555\n");
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/namespaces/1/device_nguid",
	         "66666666-2222-4333-8444-555555555555\n");
	tu_write(cfs, "nvmet/subsystems/" NQN("a") "/namespaces/1/enable", "1\n");
	struct want w = {.id = "fpool/a", .gen = 1};
	ck_assert_int_eq(reconcile(&w, 1, true, msgs, &st), GRPC_OK);
	ck_assert_str_eq(msgs[0], "");
	ck_assert_str_eq(attr("subsystems/" NQN("a") "/namespaces/1/device_uuid"),
	                 "11111111-2222-4333-8444-555555555555\n");
	/* not linked before: the derived serial was written; uuid/nguid pinned */
	const char *pin = tu_read(state, "nvmet-identity/fpool_2Fa.json");
	ck_assert_ptr_nonnull(strstr(pin, "\"uuid\":\"11111111-2222-4333-8444-555555555555\""));
	ck_assert_ptr_nonnull(strstr(pin, "\"volumeUID\":\"" UID1 "\""));
	/* unexport removes the pin */
	ck_assert_int_eq(unexport("fpool/a", &t, &st), GRPC_OK);
	ck_assert_str_eq(tu_read(state, "nvmet-identity/fpool_2Fa.json"), "");
}
END_TEST

START_TEST(test_drain)
{
	struct grpc_status st;
	PB(DrainResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__drain_response__init(resp);
	ck_assert_int_eq(agent_drain(svc, NULL, resp, &st), GRPC_OK);
	ck_assert(!resp->was_already_drained);
	ck_assert(strncmp(tu_read(state, ".drained"), "{\"drainedAt\":\"", 14) == 0);
	ck_assert_int_eq(agent_drain(svc, NULL, resp, &st), GRPC_OK);
	ck_assert(resp->was_already_drained);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	PB(FencingToken) t = af_token(UID1, 1);
	ck_assert_int_eq(create("fpool/a", 1 << 20, &t, &st), GRPC_UNAVAILABLE);
	ck_assert_str_eq(st.msg, "agent is draining");
	ck_assert_int_eq(reconcile(NULL, 0, true, NULL, &st), GRPC_UNAVAILABLE);
	ck_assert(agent_service_restore_pending(svc)); /* rejected as a whole: gate stays closed */
}
END_TEST

START_TEST(test_capacity_and_list)
{
	struct grpc_status st;
	PB(FencingToken) t = af_token(UID1, 1);
	open_gate();
	ck_assert_int_eq(create("fpool/a", 1 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(create("fpool/b", 2 << 20, &t, &st), GRPC_OK);
	ck_assert_int_eq(export("fpool/b", false, 0, &t, &st), GRPC_OK);
	PB(ListVolumesRequest) req = PILLAR_CSI__AGENT__V1__LIST_VOLUMES_REQUEST__INIT;
	PB(ListVolumesResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__list_volumes_response__init(resp);
	req.backend_type = FILE_T;
	req.pool_name = "fpool";
	ck_assert_int_eq(agent_list_volumes(svc, &req, resp, &st), GRPC_OK);
	ck_assert_uint_eq(resp->n_volumes, 2);
	for (size_t i = 0; i < 2; i++) {
		bool isb = strcmp(resp->volumes[i]->volume_id, "fpool/b") == 0;
		ck_assert_int_eq(resp->volumes[i]->exported, isb);
		ck_assert_int_eq(resp->volumes[i]->capacity_bytes, isb ? 2 << 20 : 1 << 20);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	PB(GetCapacityRequest) creq = PILLAR_CSI__AGENT__V1__GET_CAPACITY_REQUEST__INIT;
	PB(GetCapacityResponse) *cresp = malloc(sizeof(*cresp));
	pillar_csi__agent__v1__get_capacity_response__init(cresp);
	creq.backend_type = FILE_T;
	creq.pool_name = "nope";
	ck_assert_int_eq(agent_get_capacity(svc, &creq, cresp, &st), GRPC_NOT_FOUND);
	ck_assert_str_eq(st.msg, "pool \"nope\" is not configured on this agent");
	creq.pool_name = "fpool";
	ck_assert_int_eq(agent_get_capacity(svc, &creq, cresp, &st), GRPC_OK);
	ck_assert_int_gt(cresp->total_bytes, 0);
	ck_assert_int_eq(cresp->used_bytes, cresp->total_bytes - cresp->available_bytes);
	protobuf_c_message_free_unpacked(&cresp->base, NULL);
	PB(GetCapabilitiesResponse) *cap = malloc(sizeof(*cap));
	pillar_csi__agent__v1__get_capabilities_response__init(cap);
	ck_assert_int_eq(agent_get_capabilities(svc, NULL, cap, &st), GRPC_OK);
	ck_assert_uint_eq(cap->n_supported_backends, 1);
	ck_assert_int_eq(cap->supported_backends[0], 6);
	ck_assert_uint_eq(cap->n_discovered_pools, 1);
	ck_assert_str_eq(cap->discovered_pools[0]->name, "fpool");
	protobuf_c_message_free_unpacked(&cap->base, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_service");
	TCase *t = tcase_create("service");
	tcase_set_timeout(t, 30);
	tcase_add_checked_fixture(t, setup, af_teardown);
	tcase_add_test(t, test_gate_per_rpc);
	tcase_add_test(t, test_lifecycle_and_fencing);
	tcase_add_test(t, test_export_reads_its_records_once);
	tcase_add_test(t, test_validation);
	tcase_add_test(t, test_expand_online);
	tcase_add_test(t, test_file_backend_params);
	tcase_add_test(t, test_reconcile_duplicate_volume);
	tcase_add_test(t, test_two_phase_restore_and_isolation);
	tcase_add_test(t, test_icds_link_order_and_conflict);
	tcase_add_test(t, test_bind_address_missing);
	tcase_add_test(t, test_restart_without_reboot);
	tcase_add_test(t, test_restore_calls_per_export);
	tcase_add_test(t, test_restore_keeps_serial_of_foreign_port);
	tcase_add_test(t, test_live_foreign_identity_is_pinned);
	tcase_add_test(t, test_drain);
	tcase_add_test(t, test_capacity_and_list);
	suite_add_tcase(s, t);
	return tu_run(s);
}
