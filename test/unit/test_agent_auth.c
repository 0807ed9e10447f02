/* The agent API's HostAuth (docs/authentication.md "Keys") against a fake configfs root: the
 * keys are written into the host entry before the host is admitted (AllowInitiator), the
 * complete ReconcileState after a storage reboot re-installs them in phase 1 before any port is
 * linked, a kernel without target authentication is refused by name and reported in
 * GetCapabilities, and hostile HostAuth input is INVALID_ARGUMENT without quoting a key. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_fixture.h"
#include "grpc/strcheck.h"

#define UID1 "uid-1111"
#define H1   "nqn.2014-08.org.nvmexpress:uuid:host-1"
#define H2   "nqn.2014-08.org.nvmexpress:uuid:host-2"
/* nvme-cli 2.3 gen-dhchap-key outputs (test_dhchap.c) */
#define KEY1 "DHHC-1:01:87YWYvNzas5i06zu/TTeHdORutGuVSnRxrGxeu6cLtwfL5KR:"
#define KEY2 "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"

static int hook_calls;

static char tlog[64][512];
static int tn;
static void tracer(void *arg, const char *op, const char *rel, const char *value)
{
	(void)arg;
	if (tn < 64)
		snprintf(tlog[tn++], sizeof(tlog[0]), "%s %s %s", op, rel, value ? value : "");
}

/* The index of the first trace line containing needle, or -1. */
static int traced(const char *needle)
{
	for (int i = 0; i < tn; i++)
		if (strstr(tlog[i], needle))
			return i;
	return -1;
}

static void make_service(void (*hook)(void *), bool kernel_auth)
{
	struct agent_service_opts o = af_opts();
	o.between_phases = hook;
	af_start(&o);
	nvmet_set_fake_auth(agent_service_nvmet(svc), kernel_auth);
	tn = 0;
	nvmet_set_trace(agent_service_nvmet(svc), tracer, NULL);
}

static void setup(void)
{
	af_setup();
	hook_calls = 0;
	make_service(NULL, true);
}

/* An attribute's value without the newline the kernel shows. */
static const char *attr(const char *rel)
{
	static char v[256];
	char p[1200];
	snprintf(p, sizeof(p), "nvmet/%s", rel);
	snprintf(v, sizeof(v), "%s", tu_read(cfs, p));
	v[strcspn(v, "\n")] = 0;
	return v;
}

static PB(FencingToken) tok(uint64_t gen)
{
	return af_token(UID1, gen);
}

static PB(HostAuth) auth(const char *host, const char *key, const char *ctrl)
{
	PB(HostAuth) h = PILLAR_CSI__AGENT__V1__HOST_AUTH__INIT;
	h.host_nqn = (char *)host;
	h.hash = "sha384";
	h.dh_group = "ffdhe3072";
	h.dhchap_key = (char *)key;
	h.dhchap_ctrl_key = (char *)ctrl;
	h.generation = 1765000000;
	return h;
}

static void create(const char *id, PB(FencingToken) * t)
{
	struct grpc_status st;
	PB(CreateVolumeRequest) req = PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	PB(CreateVolumeResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__create_volume_response__init(resp);
	req.volume_id = (char *)id;
	req.capacity_bytes = 1 << 20;
	req.backend_type = FILE_T;
	req.fence = t;
	ck_assert_int_eq(agent_create_volume(svc, &req, resp, &st), GRPC_OK);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* One volume's desired state with one ACL export. */
struct want {
	const char *id;
	const char *hosts[2];
	size_t n_hosts;
	PB(HostAuth) * auth[2];
	size_t n_auth;
	PB(FencingToken) t;
	PB(NvmeofTcpExportParams) tcp;
	PB(ExportParams) params;
	PB(ExportDesiredState) ex, *exs[1];
	PB(VolumeDesiredState) vd;
};

static void want_build(struct want *w)
{
	PB(NvmeofTcpExportParams) tcp = PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
	PB(ExportParams) params = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
	PB(ExportDesiredState) ex = PILLAR_CSI__AGENT__V1__EXPORT_DESIRED_STATE__INIT;
	PB(VolumeDesiredState) vd = PILLAR_CSI__AGENT__V1__VOLUME_DESIRED_STATE__INIT;
	w->t = tok(1);
	w->tcp = tcp;
	w->tcp.bind_address = "127.0.0.1";
	w->params = params;
	w->params.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	w->params.nvmeof_tcp = &w->tcp;
	w->ex = ex;
	w->ex.protocol_type = TCP;
	w->ex.export_params = &w->params;
	w->ex.acl_enabled = true;
	w->ex.allowed_initiators = (char **)w->hosts;
	w->ex.n_allowed_initiators = w->n_hosts;
	w->ex.host_auth = w->auth;
	w->ex.n_host_auth = w->n_auth;
	w->exs[0] = &w->ex;
	w->vd = vd;
	w->vd.volume_id = (char *)w->id;
	w->vd.backend_type = FILE_T;
	w->vd.exports = w->exs;
	w->vd.n_exports = 1;
	w->vd.fence = &w->t;
}

/* A complete ReconcileState of one volume: the RPC's code, the item's error in msg. */
static int reconcile(struct want *w, char msg[600])
{
	struct grpc_status st;
	PB(ReconcileStateRequest) req = PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PB(VolumeDesiredState) * vols[1];
	PB(ReconcileStateResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__reconcile_state_response__init(resp);
	want_build(w);
	vols[0] = &w->vd;
	req.volumes = vols;
	req.n_volumes = 1;
	req.complete = true;
	int code = agent_reconcile_state(svc, &req, resp, &st);
	if (code == GRPC_OK)
		snprintf(msg, 600, "%s", resp->results[0]->error_message);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

static int allow(const char *id, const char *host, PB(HostAuth) * a, struct grpc_status *st)
{
	PB(FencingToken) t = tok(1);
	PB(AllowInitiatorRequest) req = PILLAR_CSI__AGENT__V1__ALLOW_INITIATOR_REQUEST__INIT;
	req.volume_id = (char *)id;
	req.protocol_type = TCP;
	req.initiator_id = (char *)host;
	req.fence = &t;
	req.auth = a;
	return agent_allow_initiator(svc, &req, NULL, st);
}

/* fpool/a exported with ACL and no host (the gate opened by a complete ReconcileState). */
static void exported(void)
{
	char msg[600];
	PB(FencingToken) t = tok(1);
	create("fpool/a", &t);
	struct want w = {.id = "fpool/a"};
	ck_assert_int_eq(reconcile(&w, msg), GRPC_OK);
	ck_assert_str_eq(msg, "");
	ck_assert(af_linked(NQN("a")));
	tn = 0;
}

static bool capability_auth(void)
{
	struct grpc_status st;
	PB(GetCapabilitiesResponse) *cap = malloc(sizeof(*cap));
	pillar_csi__agent__v1__get_capabilities_response__init(cap);
	ck_assert_int_eq(agent_get_capabilities(svc, NULL, cap, &st), GRPC_OK);
	bool yes = cap->nvme_target_auth;
	protobuf_c_message_free_unpacked(&cap->base, NULL);
	return yes;
}

/* ---- tests ------------------------------------------------------------------------------------- */

START_TEST(test_allow_writes_keys_before_admitting)
{
	struct grpc_status st;
	exported();
	PB(HostAuth) a = auth(H1, KEY1, KEY2);
	ck_assert_int_eq(allow("fpool/a", H1, &a, &st), GRPC_OK);
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_hash"), "hmac(sha384)");
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_dhgroup"), "ffdhe3072");
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_key"), KEY1);
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_ctrl_key"), KEY2);
	ck_assert(af_exists("subsystems/" NQN("a") "/allowed_hosts/" H1));
	int key = traced("hosts/" H1 "/dhchap_key"), admit = traced("allowed_hosts/" H1);
	ck_assert_msg(key >= 0 && admit > key, "key written at %d, host admitted at %d", key,
	              admit);
	for (int i = 0; i < tn; i++)
		ck_assert_msg(!strstr(tlog[i], "DHHC-1"), "a key in the trace: %s", tlog[i]);
	/* unidirectional: no controller key; a grant without auth leaves the entry's key */
	PB(HostAuth) b = auth(H2, KEY2, NULL);
	ck_assert_int_eq(allow("fpool/a", H2, &b, &st), GRPC_OK);
	ck_assert_str_eq(attr("hosts/" H2 "/dhchap_key"), KEY2);
	ck_assert_int_eq(allow("fpool/a", H1, NULL, &st), GRPC_OK);
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_key"), KEY1);
}
END_TEST

START_TEST(test_kernel_without_auth)
{
	struct grpc_status st;
	agent_service_free(svc);
	make_service(NULL, false);
	ck_assert(!capability_auth());
	ck_assert(!af_exists("hosts/" NVMET_AUTH_PROBE_NQN)); /* the probe leaves nothing */
	exported();
	PB(HostAuth) a = auth(H1, KEY1, NULL);
	ck_assert_int_eq(allow("fpool/a", H1, &a, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_msg(strstr(st.msg, "CONFIG_NVME_TARGET_AUTH"), "%s", st.msg);
	ck_assert(!af_exists("subsystems/" NQN("a") "/allowed_hosts/" H1)); /* fail closed */
	/* the same in a ReconcileState item */
	char msg[600];
	PB(HostAuth) *ap = &a;
	struct want w = {.id = "fpool/a", .hosts = {H1}, .n_hosts = 1, .auth = {ap}, .n_auth = 1};
	ck_assert_int_eq(reconcile(&w, msg), GRPC_OK);
	ck_assert_msg(strncmp(msg, "FAILED_PRECONDITION: ", 21) == 0 &&
	                  strstr(msg, "CONFIG_NVME_TARGET_AUTH"),
	              "%s", msg);
	ck_assert(!af_exists("subsystems/" NQN("a") "/allowed_hosts/" H1));
}
END_TEST

START_TEST(test_capability_reported)
{
	ck_assert(capability_auth());
	ck_assert(!af_exists("hosts/" NVMET_AUTH_PROBE_NQN));
}
END_TEST

static void hook_keys_before_ports(void *arg)
{
	(void)arg;
	if (++hook_calls > 1)
		return; /* the repeated request: the export is live */
	ck_assert(!af_linked(NQN("a")));
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_key"), KEY1);
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_ctrl_key"), KEY2);
	ck_assert(af_exists("subsystems/" NQN("a") "/allowed_hosts/" H1));
}

/* After a storage reboot (an empty configfs) the one complete request re-installs the keys
 * in phase 1, before the subsystem admits the host and before any port is linked. */
START_TEST(test_restore_reinstalls_keys_before_ports)
{
	char msg[600];
	PB(FencingToken) t = tok(1);
	create("fpool/a", &t);
	agent_service_free(svc);
	static const char *const dirs[] = {"subsystems", "ports", "hosts"};
	for (size_t i = 0; i < 3; i++) { /* reboot: configfs starts empty */
		char p[600];
		snprintf(p, sizeof(p), "%s/nvmet/%s", cfs, dirs[i]);
		tu_rmtree(p);
		ck_assert_int_eq(mkdir(p, 0755), 0);
	}
	make_service(hook_keys_before_ports, true);
	PB(HostAuth) a = auth(H1, KEY1, KEY2), *ap = &a;
	struct want w = {.id = "fpool/a", .hosts = {H1}, .n_hosts = 1, .auth = {ap}, .n_auth = 1};
	ck_assert_int_eq(reconcile(&w, msg), GRPC_OK);
	ck_assert_str_eq(msg, "");
	ck_assert_int_eq(hook_calls, 1);
	ck_assert(af_linked(NQN("a")));
	/* the agent keeps no key on disk */
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "grep -rqs DHHC-1 '%s'", state);
	ck_assert_int_ne(system(cmd), 0);
	/* the same request again changes nothing */
	tn = 0;
	ck_assert_int_eq(reconcile(&w, msg), GRPC_OK);
	ck_assert_str_eq(msg, "");
	ck_assert_int_eq(hook_calls, 2);
	ck_assert_msg(tn == 0, "unexpected change: %s", tlog[0]);
}
END_TEST

START_TEST(test_hostile_auth)
{
	struct grpc_status st;
	char oversized[300], msg[600];
	exported();
	memset(oversized, 'A', sizeof(oversized) - 2);
	memcpy(oversized, "DHHC-1:01:", 10);
	oversized[sizeof(oversized) - 2] = ':';
	oversized[sizeof(oversized) - 1] = 0;
	const struct {
		const char *host, *hash, *group, *key, *ctrl, *want;
	} cases[] = {
	    {H1, "sha256", "null", "DHHC-1:01:bm90LWEta2V5:", NULL,
	     "auth.dhchap_key: a DH-HMAC-CHAP secret holds a key of 32, 48 or 64 bytes and its "
	     "CRC-32 in base64"},
	    {H1, "sha256", "null", "secret-password", NULL,
	     "auth.dhchap_key: a DH-HMAC-CHAP secret starts with \"DHHC-1:\""},
	    {H1, "sha256", "null", oversized, NULL,
	     "auth.dhchap_key: a DH-HMAC-CHAP secret is \"DHHC-1:<00-03>:<base64>:\""},
	    {H1, "sha256", "null", KEY1, "DHHC-1:07:AAAA:",
	     "auth.dhchap_ctrl_key: a DH-HMAC-CHAP secret is \"DHHC-1:<00-03>:<base64>:\""},
	    {H1, "sha256", "null", "", NULL, "auth.dhchap_key is required"},
	    {H1, "md5", "null", KEY1, NULL, "auth.hash must be one of sha256, sha384, sha512"},
	    {H1, "sha256", "ffdhe1024", KEY1, NULL,
	     "auth.dh_group must be one of null, ffdhe2048, ffdhe3072, ffdhe4096, ffdhe6144, "
	     "ffdhe8192"},
	    {H2, "sha256", "null", KEY1, NULL,
	     "auth.host_nqn \"" H2 "\" is not initiator_id \"" H1 "\""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		PB(HostAuth) a = auth(cases[i].host, cases[i].key, cases[i].ctrl);
		a.hash = (char *)cases[i].hash;
		a.dh_group = (char *)cases[i].group;
		ck_assert_int_eq(allow("fpool/a", H1, &a, &st), GRPC_INVALID_ARGUMENT);
		ck_assert_str_eq(st.msg, cases[i].want);
	}
	ck_assert(!af_exists("hosts/" H1));
	ck_assert_int_eq(tn, 0); /* nothing touched */
	/* ReconcileState: a host_auth for a host that is not allowed, or twice */
	PB(HostAuth) a = auth(H2, KEY1, NULL), *ap = &a;
	struct want w = {.id = "fpool/a", .hosts = {H1}, .n_hosts = 1, .auth = {ap}, .n_auth = 1};
	ck_assert_int_eq(reconcile(&w, msg), GRPC_OK);
	ck_assert_str_eq(msg, "INVALID_ARGUMENT: exports[0].host_auth[0].host_nqn \"" H2
	                      "\" is not in allowed_initiators");
	PB(HostAuth) b = auth(H1, KEY1, NULL), *bp = &b;
	struct want w2 = {
	    .id = "fpool/a", .hosts = {H1}, .n_hosts = 1, .auth = {bp, bp}, .n_auth = 2};
	ck_assert_int_eq(reconcile(&w2, msg), GRPC_OK);
	ck_assert_str_eq(msg, "INVALID_ARGUMENT: exports[0].host_auth[1].host_nqn \"" H1
	                      "\" appears more than once");
	ck_assert(!af_exists("hosts/" H1));
}
END_TEST

/* A NUL inside a key is refused by the server before any handler (grpc/strcheck), naming the
 * field and not the bytes. */
START_TEST(test_nul_inside_key)
{
	PB(HostAuth) a = auth(H1, KEY1, NULL);
	PB(AllowInitiatorRequest) req = PILLAR_CSI__AGENT__V1__ALLOW_INITIATOR_REQUEST__INIT;
	req.volume_id = "fpool/a";
	req.initiator_id = H1;
	req.auth = &a;
	size_t n = protobuf_c_message_get_packed_size(&req.base);
	uint8_t *buf = malloc(n);
	ck_assert_uint_eq(protobuf_c_message_pack(&req.base, buf), n);
	/* the same bytes but one of the key's a NUL (protobuf-c cannot send one itself) */
	uint8_t *at = memmem(buf, n, KEY1, strlen(KEY1));
	ck_assert_ptr_nonnull(at);
	at[12] = 0;
	char msg[256];
	int r = grpc_strcheck(&pillar_csi__agent__v1__allow_initiator_request__descriptor, buf, n,
	                      msg, sizeof(msg));
	ck_assert_int_eq(r, -EILSEQ);
	ck_assert_str_eq(msg, "field auth.dhchap_key contains a NUL byte");
	free(buf);
}
END_TEST

/* Two volumes of different protocols granted to one host on one storage node share its host
 * entry: the entry takes the strongest hash and group either asks for and the controller key
 * of the bidirectional one, in whichever order the grants come, and so does a ReconcileState
 * of both (the restore). */
static PB(HostAuth) asks(const char *host, const char *hash, const char *group, const char *ctrl)
{
	PB(HostAuth) h = auth(host, KEY1, ctrl);
	h.hash = (char *)hash;
	h.dh_group = (char *)group;
	return h;
}

static void assert_strongest(const char *host)
{
	char rel[200];
	snprintf(rel, sizeof(rel), "hosts/%s/dhchap_hash", host);
	ck_assert_str_eq(attr(rel), "hmac(sha512)");
	snprintf(rel, sizeof(rel), "hosts/%s/dhchap_dhgroup", host);
	ck_assert_str_eq(attr(rel), "ffdhe4096");
	snprintf(rel, sizeof(rel), "hosts/%s/dhchap_ctrl_key", host);
	ck_assert_str_eq(attr(rel), KEY2);
}

START_TEST(test_host_entry_strongest_of_volumes)
{
	struct grpc_status st;
	PB(FencingToken) t = tok(1);
	exported();
	create("fpool/b", &t);
	PB(HostAuth) strong = asks(H1, "sha512", "ffdhe4096", NULL);
	PB(HostAuth) weak = asks(H1, "sha256", "null", KEY2);
	/* both volumes exported by one complete request, the weak one first */
	PB(HostAuth) s2 = asks(H2, "sha512", "ffdhe4096", NULL), *s2p = &s2;
	PB(HostAuth) w2 = asks(H2, "sha256", "null", KEY2), *w2p = &w2;
	PB(HostAuth) s1 = strong, *s1p = &s1, w1 = weak, *w1p = &w1;
	struct want a = {
	    .id = "fpool/a", .hosts = {H1, H2}, .n_hosts = 2, .auth = {w1p, w2p}, .n_auth = 2};
	struct want b = {
	    .id = "fpool/b", .hosts = {H1, H2}, .n_hosts = 2, .auth = {s1p, s2p}, .n_auth = 2};
	want_build(&a);
	want_build(&b);
	PB(VolumeDesiredState) * vols[2] = {&a.vd, &b.vd};
	PB(ReconcileStateRequest) req = PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	req.volumes = vols;
	req.n_volumes = 2;
	req.complete = true;
	PB(ReconcileStateResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__reconcile_state_response__init(resp);
	ck_assert_int_eq(agent_reconcile_state(svc, &req, resp, &st), GRPC_OK);
	ck_assert_msg(resp->results[0]->success && resp->results[1]->success, "%s %s",
	              resp->results[0]->error_message, resp->results[1]->error_message);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	assert_strongest(H1);
	assert_strongest(H2);
	/* grants in either order keep the strongest */
	ck_assert_int_eq(allow("fpool/a", H1, &weak, &st), GRPC_OK);
	assert_strongest(H1);
	ck_assert_int_eq(allow("fpool/b", H2, &s2, &st), GRPC_OK);
	ck_assert_int_eq(allow("fpool/a", H2, &w2, &st), GRPC_OK);
	assert_strongest(H2);
	/* the strong volume's grant revoked: the weak one's own settings from the next grant */
	PB(FencingToken) t1 = tok(1);
	PB(DenyInitiatorRequest) deny = PILLAR_CSI__AGENT__V1__DENY_INITIATOR_REQUEST__INIT;
	deny.volume_id = "fpool/b";
	deny.protocol_type = TCP;
	deny.initiator_id = H1;
	deny.fence = &t1;
	ck_assert_int_eq(agent_deny_initiator(svc, &deny, NULL, &st), GRPC_OK);
	ck_assert_int_eq(allow("fpool/a", H1, &weak, &st), GRPC_OK);
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_hash"), "hmac(sha256)");
	ck_assert_str_eq(attr("hosts/" H1 "/dhchap_dhgroup"), "null");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_auth");
	TCase *t = tcase_create("auth");
	tcase_set_timeout(t, 30);
	tcase_add_checked_fixture(t, setup, af_teardown);
	tcase_add_test(t, test_allow_writes_keys_before_admitting);
	tcase_add_test(t, test_kernel_without_auth);
	tcase_add_test(t, test_capability_reported);
	tcase_add_test(t, test_restore_reinstalls_keys_before_ports);
	tcase_add_test(t, test_hostile_auth);
	tcase_add_test(t, test_nul_inside_key);
	tcase_add_test(t, test_host_entry_strongest_of_volumes);
	suite_add_tcase(s, t);
	return tu_run(s);
}
