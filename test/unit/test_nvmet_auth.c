/* src/nvmet in-band authentication against a fake configfs root (docs/authentication.md): the
 * dhchap_* attributes of a host entry, a kernel without CONFIG_NVME_TARGET_AUTH, bad input, and
 * secrets kept out of messages and the trace. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "nvme/dhchap.h"
#include "nvmet/nvmet.h"
#include "testutil.h"

#define NQN1  "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-abc123"
#define HOSTA "nqn.2014-08.org.nvmexpress:uuid:0e2e0e2e-0000-4000-8000-000000000001"
/* nvme-cli 2.3 gen-dhchap-key outputs (test_dhchap.c) */
#define KEY1 "DHHC-1:01:87YWYvNzas5i06zu/TTeHdORutGuVSnRxrGxeu6cLtwfL5KR:"
#define KEY2 "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"

static char tlog[32][512];
static int tn;
static void tracer(void *arg, const char *op, const char *rel, const char *value)
{
	(void)arg;
	if (tn < 32)
		snprintf(tlog[tn++], sizeof(tlog[0]), "%s %s %s", op, rel, value ? value : "-");
}

static char root[512];
static nvmet *nv;

static void setup(void)
{
	char p[PATH_MAX + 16];
	snprintf(root, sizeof(root), "%s", tu_mkdtemp());
	snprintf(p, sizeof(p), "%s/nvmet", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/nvmet/hosts", root);
	mkdir(p, 0755);
	ck_assert_int_eq(nvmet_open(root, &nv, NULL), 0);
	nvmet_set_trace(nv, tracer, NULL);
	tn = 0;
}

static void teardown(void)
{
	nvmet_free(nv);
	nv = NULL;
	tu_rmtree(root);
}

static const char *attr(const char *name)
{
	static char v[256];
	char rel[512];
	snprintf(rel, sizeof(rel), "hosts/" HOSTA "/%s", name);
	return nvmet_attr_read(nv, rel, v, sizeof(v), NULL) < 0 ? "<missing>" : v;
}

static bool traced(const char *needle)
{
	for (int i = 0; i < tn; i++)
		if (strstr(tlog[i], needle))
			return true;
	return false;
}

START_TEST(test_auth_attributes_written)
{
	struct err e = {0};
	struct nvmet_host_auth a = {"hmac(sha384)", "ffdhe3072", KEY1, KEY2};
	nvmet_set_fake_auth(nv, true);
	ck_assert_int_eq(nvmet_host_auth_supported(nv, HOSTA, &e), 1);
	ck_assert_int_eq(nvmet_host_auth_set(nv, HOSTA, &a, &e), 0);
	ck_assert_str_eq(attr("dhchap_hash"), "hmac(sha384)");
	ck_assert_str_eq(attr("dhchap_dhgroup"), "ffdhe3072");
	ck_assert_str_eq(attr("dhchap_key"), KEY1);
	ck_assert_str_eq(attr("dhchap_ctrl_key"), KEY2);
	/* the trace names the secret attributes but never their values */
	ck_assert(traced("write hosts/" HOSTA "/dhchap_key (secret)"));
	ck_assert(traced("write hosts/" HOSTA "/dhchap_ctrl_key (secret)"));
	ck_assert(!traced("DHHC-1"));
	/* satisfied: nothing is written again; a new key replaces the old one */
	tn = 0;
	ck_assert_int_eq(nvmet_host_auth_set(nv, HOSTA, &a, &e), 0);
	ck_assert_int_eq(tn, 0);
	a.key = KEY2;
	a.ctrl_key = NULL; /* unidirectional: the controller key is left as it is */
	ck_assert_int_eq(nvmet_host_auth_set(nv, HOSTA, &a, &e), 0);
	ck_assert_int_eq(tn, 1);
	ck_assert_str_eq(attr("dhchap_key"), KEY2);
	ck_assert_str_eq(attr("dhchap_ctrl_key"), KEY2);
}
END_TEST

START_TEST(test_kernel_without_auth)
{
	struct err e = {0};
	struct nvmet_host_auth a = {"hmac(sha256)", "ffdhe2048", KEY1, NULL};
	ck_assert_int_eq(nvmet_host_auth_supported(nv, HOSTA, &e), 0);
	ck_assert_int_eq(nvmet_host_auth_set(nv, HOSTA, &a, &e), -EOPNOTSUPP);
	ck_assert_str_eq(e.msg, NVMET_AUTH_MISSING_MSG);
	ck_assert_ptr_nonnull(strstr(e.msg, "CONFIG_NVME_TARGET_AUTH"));
	ck_assert_str_eq(attr("dhchap_key"), "<missing>"); /* nothing written */
}
END_TEST

START_TEST(test_bad_input_refused_without_secret_in_message)
{
	struct err e = {0};
	char bad[NVME_DHCHAP_SECRET_MAX];
	struct nvmet_host_auth a = {"hmac(md5)", "ffdhe2048", KEY1, NULL};
	nvmet_set_fake_auth(nv, true);
	ck_assert_int_eq(nvmet_host_auth_set(nv, HOSTA, &a, &e), -EINVAL);
	a.hash = "hmac(sha256)";
	a.dh_group = "ffdhe1024";
	ck_assert_int_eq(nvmet_host_auth_set(nv, HOSTA, &a, &e), -EINVAL);
	a.dh_group = "null";
	snprintf(bad, sizeof(bad), "%s", KEY1);
	bad[12] = bad[12] == 'A' ? 'B' : 'A'; /* CRC mismatch */
	a.key = bad;
	ck_assert_int_eq(nvmet_host_auth_set(nv, HOSTA, &a, &e), -EINVAL);
	ck_assert_ptr_null(strstr(e.msg, bad + 10));
	ck_assert_ptr_nonnull(strstr(e.msg, "host " HOSTA));
	a.key = KEY1;
	ck_assert_int_eq(nvmet_host_auth_set(nv, "not-an-nqn", &a, &e), -EINVAL);
	ck_assert_int_eq(tn, 0); /* nothing written for bad input */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nvmet_auth");
	TCase *t = tcase_create("nvmet_auth");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_auth_attributes_written);
	tcase_add_test(t, test_kernel_without_auth);
	tcase_add_test(t, test_bad_input_refused_without_secret_in_message);
	suite_add_tcase(s, t);
	return tu_run(s);
}
