/* grpc/calllog: the per-call klog lines (method, volume ID, code, duration at --v=3, failures
 * at --v=0 as errors, request and response at --v=5) and secrets stripped from logged messages. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "csi.pb-c.h"
#include "grpc/calllog.h"
#include "grpc/status.h"
#include "pbjson/pbjson.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"
#include "testutil.h"

static char dir[512];
static int fd = -1;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	char p[600];
	snprintf(p, sizeof(p), "%s/log", dir);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	calllog_set_format(pbjson_log_text);
	ck_assert_int_ge(fd, 0);
	log_set_fd(fd);
}

static void teardown(void)
{
	log_set_fd(2);
	log_set_verbosity(0);
	close(fd);
	tu_rmtree(dir);
}

/* Everything logged so far (static buffer), then the log is emptied. */
static const char *logged(void)
{
	static char buf[8192];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	lseek(fd, 0, SEEK_SET);
	return buf;
}

static int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static Csi__V1__NodeStageVolumeRequest *stage_req(void)
{
	static Csi__V1__NodeStageVolumeRequest r = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	static Csi__V1__NodeStageVolumeRequest__SecretsEntry s =
	    CSI__V1__NODE_STAGE_VOLUME_REQUEST__SECRETS_ENTRY__INIT;
	static Csi__V1__NodeStageVolumeRequest__SecretsEntry *sp[1] = {&s};
	s.key = "password";
	s.value = "hunter2";
	r.volume_id = "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1";
	r.staging_target_path = "/var/lib/kubelet/plugins/x/globalmount";
	r.n_secrets = 1;
	r.secrets = sp;
	return &r;
}

START_TEST(test_secrets_stripped)
{
	char *t = pbjson_log_text(&stage_req()->base);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_null(strstr(t, "hunter2"));
	ck_assert_ptr_null(strstr(t, "password"));
	ck_assert_ptr_nonnull(strstr(t, "\"secrets\":\"***stripped***\""));
	ck_assert_ptr_nonnull(
	    strstr(t, "\"volume_id\":\"storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1\""));
	free(t);
}
END_TEST

/* docs/authentication.md "Keys": the agent API's DH-HMAC-CHAP keys are logged as stripped, in
 * AllowInitiator and in each ReconcileState export; the rest of HostAuth is shown. */
START_TEST(test_dhchap_keys_stripped)
{
	static const char key[] = "DHHC-1:03:aG9zdC1rZXktbWF0ZXJpYWw=:",
	                  ctrl[] = "DHHC-1:03:Y3RybC1rZXktbWF0ZXJpYWw=:";
	PillarCsi__Agent__V1__HostAuth a = PILLAR_CSI__AGENT__V1__HOST_AUTH__INIT, *ap[1] = {&a};
	a.host_nqn = "nqn.2014-08.org.nvmexpress:uuid:1";
	a.hash = "sha256";
	a.dhchap_key = (char *)key;
	a.dhchap_ctrl_key = (char *)ctrl;
	a.generation = 7;
	PillarCsi__Agent__V1__AllowInitiatorRequest q =
	    PILLAR_CSI__AGENT__V1__ALLOW_INITIATOR_REQUEST__INIT;
	q.initiator_id = a.host_nqn;
	q.auth = &a;
	PillarCsi__Agent__V1__ExportDesiredState
	    x = PILLAR_CSI__AGENT__V1__EXPORT_DESIRED_STATE__INIT,
	    *xp[1] = {&x};
	x.n_host_auth = 1;
	x.host_auth = ap;
	PillarCsi__Agent__V1__VolumeDesiredState
	    v = PILLAR_CSI__AGENT__V1__VOLUME_DESIRED_STATE__INIT,
	    *vp[1] = {&v};
	v.n_exports = 1;
	v.exports = xp;
	PillarCsi__Agent__V1__ReconcileStateRequest r =
	    PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	r.n_volumes = 1;
	r.volumes = vp;
	const ProtobufCMessage *msgs[] = {&q.base, &r.base};
	for (size_t i = 0; i < 2; i++) {
		char *t = pbjson_log_text(msgs[i]);
		ck_assert_ptr_nonnull(t);
		ck_assert_msg(!strstr(t, "DHHC-1") && !strstr(t, "aG9zdC1r") &&
		                  !strstr(t, "Y3RybC1r"),
		              "%s", t);
		ck_assert_ptr_nonnull(strstr(t, "\"dhchap_key\":\"***stripped***\""));
		ck_assert_ptr_nonnull(strstr(t, "\"dhchap_ctrl_key\":\"***stripped***\""));
		ck_assert_ptr_nonnull(
		    strstr(t, "\"host_nqn\":\"nqn.2014-08.org.nvmexpress:uuid:1\""));
		free(t);
	}
}
END_TEST

START_TEST(test_levels)
{
	const char *m = "/csi.v1.Node/NodeStageVolume";
	Csi__V1__NodeStageVolumeResponse resp = CSI__V1__NODE_STAGE_VOLUME_RESPONSE__INIT;
	/* --v=0: success silent, failure an error line with the message */
	log_set_verbosity(0);
	uint64_t t0 = calllog_request(m, &stage_req()->base);
	calllog_result(m, &stage_req()->base, &resp.base, GRPC_OK, NULL, t0);
	ck_assert_str_eq(logged(), "");
	calllog_result(m, &stage_req()->base, NULL, GRPC_NOT_FOUND, "volume gone", t0);
	const char *l = logged();
	ck_assert_msg(l[0] == 'E' &&
	                  strstr(l, "] \"GRPC call failed\" method=\""
	                            "/csi.v1.Node/"
	                            "NodeStageVolume\" volumeID=\"storage-1/nvmeof-tcp/"
	                            "zfs-zvol/tank/pvc-1\" code=\"NOT_FOUND\" duration=\""),
	              "%s", l);
	ck_assert_ptr_nonnull(strstr(l, "ms\" err=\"volume gone\"\n"));
	/* --v=3: one info line per call, no request */
	log_set_verbosity(3);
	t0 = calllog_request(m, &stage_req()->base);
	calllog_result(m, &stage_req()->base, &resp.base, GRPC_OK, NULL, t0);
	l = logged();
	ck_assert_msg(l[0] == 'I' &&
	                  strstr(l, "\"GRPC call\" method=\"/csi.v1.Node/NodeStageVolume\" "
	                            "volumeID=\"storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1\" "
	                            "code=\"OK\" duration=\""),
	              "%s", l);
	ck_assert_int_eq(lines(l), 1);
	/* --v=5: request and response too, secrets stripped */
	log_set_verbosity(5);
	t0 = calllog_request(m, &stage_req()->base);
	calllog_result(m, &stage_req()->base, &resp.base, GRPC_OK, NULL, t0);
	l = logged();
	ck_assert_ptr_nonnull(strstr(l, "\"GRPC request\" method=\"/csi.v1.Node/NodeStageVolume\" "
	                                "request=\"{\\\"volume_id\\\":"));
	ck_assert_ptr_nonnull(strstr(l, "\\\"secrets\\\":\\\"***stripped***\\\""));
	ck_assert_ptr_null(strstr(l, "hunter2"));
	ck_assert_ptr_nonnull(strstr(l, "\"GRPC call\" method="));
	ck_assert_ptr_nonnull(strstr(l, "\"GRPC response\" method=\"/csi.v1.Node/NodeStageVolume\" "
	                                "response=\"{}\""));
	/* without a format (the layer alone, e.g. the test peers): the message type only */
	calllog_set_format(NULL);
	calllog_result(m, &stage_req()->base, NULL, GRPC_OK, NULL,
	               calllog_request(m, &stage_req()->base));
	ck_assert_ptr_nonnull(strstr(logged(), "request=\"<csi.v1.NodeStageVolumeRequest>\""));
}
END_TEST

START_TEST(test_volume_of_create)
{
	/* CreateVolume: the name before a volume exists, the response's volume_id after */
	Csi__V1__CreateVolumeRequest q = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeResponse r = CSI__V1__CREATE_VOLUME_RESPONSE__INIT;
	Csi__V1__Volume v = CSI__V1__VOLUME__INIT;
	q.name = "pvc-1";
	v.volume_id = "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1";
	r.volume = &v;
	log_set_verbosity(3);
	calllog_result("/csi.v1.Controller/CreateVolume", &q.base, NULL, GRPC_INVALID_ARGUMENT, "x",
	               calllog_request("/csi.v1.Controller/CreateVolume", &q.base));
	ck_assert_ptr_nonnull(strstr(logged(), "volumeID=\"pvc-1\" code=\"INVALID_ARGUMENT\""));
	calllog_result("/csi.v1.Controller/CreateVolume", &q.base, &r.base, GRPC_OK, NULL,
	               calllog_request("/csi.v1.Controller/CreateVolume", &q.base));
	ck_assert_ptr_nonnull(
	    strstr(logged(), "volumeID=\"storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1\" code=\"OK\""));
	/* a method that names no volume */
	Csi__V1__GetPluginInfoRequest g = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	calllog_result("/csi.v1.Identity/GetPluginInfo", &g.base, NULL, GRPC_OK, NULL,
	               calllog_request("/csi.v1.Identity/GetPluginInfo", &g.base));
	ck_assert_ptr_nonnull(strstr(logged(), "volumeID=\"\" code=\"OK\""));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("calllog");
	TCase *t = tcase_create("calllog");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_secrets_stripped);
	tcase_add_test(t, test_dhchap_keys_stripped);
	tcase_add_test(t, test_levels);
	tcase_add_test(t, test_volume_of_create);
	suite_add_tcase(s, t);
	return tu_run(s);
}
