/* Unit tests of src/nvme/dhchap: DH-HMAC-CHAP secrets in the DHHC-1 representation, compared
 * with what nvme-cli 2.3's `gen-dhchap-key --secret=<bytes 00 01 02 ...> --hmac=N --nqn=NQN`
 * prints for the same secret (the kernel takes that text as dhchap_secret= and in configfs). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nvme/dhchap.h"
#include "nvme/initiator.h"
#include "testutil.h"

#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:0e2e0e2e-0000-4000-8000-000000000001"

/* nvme-cli 2.3 (libnvme 1.3) with the secret 00 01 02 ... of the hash's key length */
static const char *const nvme_cli[] = {
    [NVME_DHCHAP_SHA256] = "DHHC-1:01:87YWYvNzas5i06zu/TTeHdORutGuVSnRxrGxeu6cLtwfL5KR:",
    [NVME_DHCHAP_SHA384] = "DHHC-1:02:/s3/NTTbF71qlUps+Yd/5l631JGH5jUI0fI4bGTDebTAnPKZCvzOVCmFz"
                           "cAbAJB/a6WaNg==:",
    [NVME_DHCHAP_SHA512] = "DHHC-1:03:C5ORtZyRUiAWBV863NlZb67wlPEN35YVw7Yf/nVwHcZokmHrspLdlHR1d1"
                           "Xk+lsDGg6a2V1keKHSRxy68uo6dYpc1Hk=:",
};

START_TEST(test_secret_from_key_equals_nvme_cli)
{
	unsigned char secret[64];
	char out[NVME_DHCHAP_SECRET_MAX];
	struct err e = {0};
	for (int i = 0; i < 64; i++)
		secret[i] = (unsigned char)i;
	for (int h = NVME_DHCHAP_SHA256; h <= NVME_DHCHAP_SHA512; h++) {
		ck_assert_int_eq(nvme_dhchap_secret_from_key(HOSTNQN, h, secret, out, &e), 0);
		ck_assert_str_eq(out, nvme_cli[h]);
		ck_assert_int_eq(nvme_dhchap_secret_check(out, &e), 0);
	}
}
END_TEST

START_TEST(test_generated_secrets_are_random_and_well_formed)
{
	char a[NVME_DHCHAP_SECRET_MAX], b[NVME_DHCHAP_SECRET_MAX];
	struct err e = {0};
	static const size_t lengths[] = {[1] = 59, [2] = 83, [3] = 103};
	for (int h = NVME_DHCHAP_SHA256; h <= NVME_DHCHAP_SHA512; h++) {
		char prefix[32];
		ck_assert_int_eq(nvme_dhchap_secret_generate(HOSTNQN, h, a, &e), 0);
		ck_assert_int_eq(nvme_dhchap_secret_generate(HOSTNQN, h, b, &e), 0);
		snprintf(prefix, sizeof(prefix), "DHHC-1:%02d:", h);
		ck_assert_msg(strncmp(a, prefix, strlen(prefix)) == 0, "%s", prefix);
		ck_assert_uint_eq(strlen(a), lengths[h]);
		ck_assert_str_ne(a, b);
		ck_assert_int_eq(nvme_dhchap_secret_check(a, &e), 0);
	}
}
END_TEST

START_TEST(test_bad_input_refused)
{
	char out[NVME_DHCHAP_SECRET_MAX], tampered[NVME_DHCHAP_SECRET_MAX];
	struct err e = {0};
	enum nvme_dhchap_hash h;
	char longnqn[300];
	memset(longnqn, 'n', sizeof(longnqn) - 1);
	longnqn[sizeof(longnqn) - 1] = '\0';
	ck_assert_int_eq(nvme_dhchap_secret_generate(HOSTNQN, 4, out, &e), -EINVAL);
	ck_assert_int_eq(nvme_dhchap_secret_generate("", NVME_DHCHAP_SHA256, out, &e), -EINVAL);
	ck_assert_int_eq(nvme_dhchap_secret_generate(longnqn, NVME_DHCHAP_SHA256, out, &e),
	                 -EINVAL);
	ck_assert_int_eq(nvme_dhchap_hash_parse("sha384", &h), 0);
	ck_assert_int_eq(h, NVME_DHCHAP_SHA384);
	ck_assert_int_eq(nvme_dhchap_hash_parse("md5", &h), -EINVAL);
	ck_assert_str_eq(nvme_dhchap_hash_kernel(NVME_DHCHAP_SHA512), "hmac(sha512)");
	ck_assert_ptr_null(nvme_dhchap_hash_name(0));

	/* one base64 character changed: the CRC no longer matches; the message has no key */
	snprintf(tampered, sizeof(tampered), "%s", nvme_cli[NVME_DHCHAP_SHA256]);
	tampered[12] = tampered[12] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(nvme_dhchap_secret_check(tampered, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "CRC-32"));
	ck_assert_ptr_null(strstr(e.msg, tampered + 10));
	ck_assert_int_eq(nvme_dhchap_secret_check("DHHC-1:04:AAAA:", &e), -EINVAL);
	ck_assert_int_eq(nvme_dhchap_secret_check("DHHC-2:01:AAAA:", &e), -EINVAL);
	ck_assert_int_eq(nvme_dhchap_secret_check("DHHC-1:01:AAAA:", &e), -EINVAL);
	ck_assert_int_eq(nvme_dhchap_secret_check("DHHC-1:01:", &e), -EINVAL);
	ck_assert_int_eq(nvme_dhchap_secret_check(NULL, &e), -EINVAL);
}
END_TEST

/* Rotation on the host: the new secret reaches <sysfs>/class/nvme/<name>/dhchap_secret (or
 * dhchap_ctrl_secret); a kernel without the attribute and bad input are refused. */
START_TEST(test_ctrl_rotation_write)
{
	char sys[4096], got[NVME_DHCHAP_SECRET_MAX];
	struct err e = {0};
	snprintf(sys, sizeof(sys), "%s", tu_mkdtemp());
	tu_write(sys, "class/nvme/nvme3/dhchap_secret", "old\n");
	tu_write(sys, "class/nvme/nvme3/dhchap_ctrl_secret", "old\n");
	ck_assert_int_eq(nvme_ctrl_dhchap_set(sys, "nvme3", false, nvme_cli[1], &e), 0);
	snprintf(got, sizeof(got), "%s", tu_read(sys, "class/nvme/nvme3/dhchap_secret"));
	ck_assert_str_eq(got, nvme_cli[1]);
	ck_assert_int_eq(nvme_ctrl_dhchap_set(sys, "nvme3", true, nvme_cli[2], &e), 0);
	ck_assert_str_eq(tu_read(sys, "class/nvme/nvme3/dhchap_ctrl_secret"), nvme_cli[2]);
	tu_write(sys, "class/nvme/nvme4/state", "live\n");
	ck_assert_int_eq(nvme_ctrl_dhchap_set(sys, "nvme4", false, nvme_cli[1], &e), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(e.msg, "CONFIG_NVME_HOST_AUTH"));
	ck_assert_int_eq(nvme_ctrl_dhchap_set(sys, "../nvme3", false, nvme_cli[1], &e), -EINVAL);
	ck_assert_int_eq(nvme_ctrl_dhchap_set(sys, "nvme3", false, "DHHC-1:01:AAAA:", &e), -EINVAL);
	ck_assert_str_eq(tu_read(sys, "class/nvme/nvme3/dhchap_secret"), nvme_cli[1]);
	tu_rmtree(sys);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dhchap");
	TCase *tc = tcase_create("dhchap");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_secret_from_key_equals_nvme_cli);
	tcase_add_test(tc, test_generated_secrets_are_random_and_well_formed);
	tcase_add_test(tc, test_bad_input_refused);
	tcase_add_test(tc, test_ctrl_rotation_write);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
