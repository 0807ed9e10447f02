/* model/dhchap_keys: the Secret a worker creates and the controller reads (docs/authentication.md
 * "Keys") — round trip, every refusal with its message, hostile input (malformed DHHC-1, NUL
 * inside, oversized, a name that names another node), and no key in any message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/dhchap_keys.h"
#include "testutil.h"

#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:0e2e0e2e-0000-4000-8000-000000000001"
/* nvme-cli 2.3 gen-dhchap-key outputs (test_dhchap.c) */
#define KEY1 "DHHC-1:01:87YWYvNzas5i06zu/TTeHdORutGuVSnRxrGxeu6cLtwfL5KR:"
#define KEY2 "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"

static struct model_dhchap_keys keys(const char *node, uint64_t gen)
{
	struct model_dhchap_keys k;
	memset(&k, 0, sizeof(k));
	snprintf(k.node, sizeof(k.node), "%s", node);
	snprintf(k.host_nqn, sizeof(k.host_nqn), "%s", HOSTNQN);
	k.generation = gen;
	snprintf(k.key, sizeof(k.key), "%s", KEY1);
	snprintf(k.ctrl_key, sizeof(k.ctrl_key), "%s", KEY2);
	return k;
}

static void no_key_in(const char *msg)
{
	ck_assert_msg(!strstr(msg, "DHHC") && !strstr(msg, "87YW") && !strstr(msg, "AAEC"),
	              "a key in a message: %s", msg);
}

START_TEST(test_secret_round_trip)
{
	struct model_dhchap_keys k = keys("worker-1", 1765000000), got;
	struct model_secret s;
	struct err e = {0};
	ck_assert_int_eq(model_dhchap_secret_encode(&k, "pillar-csi", &s, &e), 0);
	char *text = model_encode_text(&model_secret_kind, &s);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "\"name\":\"pillar-csi-dhchap-worker-1-1765000000\"") &&
	                  strstr(text, "\"namespace\":\"pillar-csi\"") &&
	                  strstr(text, "\"type\":\"pillar-csi.bhyoo.com/dhchap\"") &&
	                  strstr(text, "\"pillar-csi.bhyoo.com/dhchap\":\"host-keys\"") &&
	                  strstr(text, "\"pillar-csi.bhyoo.com/dhchap-node\":\"worker-1\"") &&
	                  strstr(text, "\"pillar-csi.bhyoo.com/dhchap-generation\":\"1765000000\""),
	              "%s", text);
	ck_assert_msg(!strstr(text, "DHHC-1"), "data is base64: %s", text);
	struct model_secret back;
	ck_assert_int_eq(model_decode_text(&model_secret_kind, text, &back, &e), 0);
	ck_assert_int_eq(model_dhchap_secret_decode(&back, &got, &e), 0);
	ck_assert_str_eq(got.node, "worker-1");
	ck_assert_str_eq(got.host_nqn, HOSTNQN);
	ck_assert_uint_eq(got.generation, 1765000000);
	ck_assert_str_eq(got.key, KEY1);
	ck_assert_str_eq(got.ctrl_key, KEY2);
	free(text);
	model_clear(&model_secret_kind, &s);
	model_clear(&model_secret_kind, &back);
}
END_TEST

/* A Secret as text with one member replaced: {NAME}, {GEN}, {NODE}, {KEY} (base64 of the key). */
static int decode_variant(const char *name, const char *node, const char *gen, const char *b64key,
                          const char *type, struct err *e)
{
	char text[4096];
	struct model_secret s;
	struct model_dhchap_keys got;
	snprintf(
	    text, sizeof(text),
	    "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"type\":\"%s\","
	    "\"metadata\":{\"name\":\"%s\",\"namespace\":\"pillar-csi\","
	    "\"labels\":{\"pillar-csi.bhyoo.com/dhchap\":\"host-keys\"},"
	    "\"annotations\":{\"pillar-csi.bhyoo.com/dhchap-node\":\"%s\","
	    "\"pillar-csi.bhyoo.com/dhchap-generation\":\"%s\"}},"
	    "\"data\":{\"hostNQN\":\"%s\",\"key\":\"%s\",\"ctrlKey\":\"%s\"}}",
	    type, name, node, gen,
	    /* base64 of HOSTNQN */
	    "bnFuLjIwMTQtMDgub3JnLm52bWV4cHJlc3M6dXVpZDowZTJlMGUyZS0wMDAwLTQwMDAtODAwMC0wMD"
	    "AwMDAwMDAwMDE=",
	    b64key,
	    /* base64 of KEY2 */
	    "REhIQy0xOjAwOkFBRUNBd1FGQmdjSUNRb0xEQTBPRHhBUkVoTVVGUllYR0JrYUd4d2RIaCtLZmlhUjo=");
	ck_assert_int_eq(model_decode_text(&model_secret_kind, text, &s, e), 0);
	int r = model_dhchap_secret_decode(&s, &got, e);
	model_clear(&model_secret_kind, &s);
	model_dhchap_keys_wipe(&got);
	return r;
}

/* base64 of KEY1 */
#define B64KEY1 "REhIQy0xOjAxOjg3WVdZdk56YXM1aTA2enUvVFRlSGRPUnV0R3VWU25SeHJHeGV1NmNMdHdmTDVLUjo="

START_TEST(test_secret_refusals)
{
	char big[1200];
	memset(big, 'Q', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	const struct {
		const char *name, *node, *gen, *key, *type, *want;
	} cases[] = {
	    {"pillar-csi-dhchap-w1-7", "w1", "7", B64KEY1, "pillar-csi.bhyoo.com/dhchap", NULL},
	    /* node a planting a Secret whose name says node a-1 */
	    {"pillar-csi-dhchap-a-1-7", "a", "7", B64KEY1, "pillar-csi.bhyoo.com/dhchap",
	     "Secret \"pillar-csi-dhchap-a-1-7\": the name is not \"pillar-csi-dhchap-a-7\" (from "
	     "annotations pillar-csi.bhyoo.com/dhchap-node and "
	     "pillar-csi.bhyoo.com/dhchap-generation)"},
	    {"pillar-csi-dhchap-w1-07", "w1", "07", B64KEY1, "pillar-csi.bhyoo.com/dhchap",
	     "Secret \"pillar-csi-dhchap-w1-07\": annotation "
	     "pillar-csi.bhyoo.com/dhchap-generation "
	     "is not a decimal number > 0"},
	    {"pillar-csi-dhchap-w1-7", "w1", "7", B64KEY1, "Opaque",
	     "Secret \"pillar-csi-dhchap-w1-7\": type is not pillar-csi.bhyoo.com/dhchap"},
	    /* base64 of "DHHC-1:01:AAAA:" */
	    {"pillar-csi-dhchap-w1-7", "w1", "7", "REhIQy0xOjAxOkFBQUE6",
	     "pillar-csi.bhyoo.com/dhchap",
	     "Secret \"pillar-csi-dhchap-w1-7\": data.key: a DH-HMAC-CHAP secret holds a key of "
	     "32, "
	     "48 or 64 bytes and its CRC-32 in base64"},
	    /* base64 of "DHHC-1\0:01:" */
	    {"pillar-csi-dhchap-w1-7", "w1", "7", "REhIQy0xADowMTo=", "pillar-csi.bhyoo.com/dhchap",
	     "Secret \"pillar-csi-dhchap-w1-7\": data.key contains a NUL byte"},
	    {"pillar-csi-dhchap-w1-7", "w1", "7", big, "pillar-csi.bhyoo.com/dhchap",
	     "Secret \"pillar-csi-dhchap-w1-7\": data.key is not base64 of at most 103 bytes"},
	    {"pillar-csi-dhchap-w1-7", "w1", "7", "!!!", "pillar-csi.bhyoo.com/dhchap",
	     "Secret \"pillar-csi-dhchap-w1-7\": data.key is not base64 of at most 103 bytes"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err e = {0};
		int r = decode_variant(cases[i].name, cases[i].node, cases[i].gen, cases[i].key,
		                       cases[i].type, &e);
		if (!cases[i].want) {
			ck_assert_msg(r == 0, "%s", e.msg);
			continue;
		}
		ck_assert_int_eq(r, -EINVAL);
		ck_assert_str_eq(e.msg, cases[i].want);
		no_key_in(e.msg);
	}
	/* names: too long, generation 0 */
	char node[300], name[400];
	struct err e = {0};
	memset(node, 'n', 215);
	node[215] = 0;
	ck_assert_int_eq(model_dhchap_secret_name(node, 1, name, sizeof(name), &e), -EINVAL);
	ck_assert_str_eq(e.msg,
	                 "a node name of 1 to 214 characters is needed for DH-HMAC-CHAP keys");
	ck_assert_int_eq(model_dhchap_secret_name("w1", 0, name, sizeof(name), &e), -EINVAL);
	node[214] = 0;
	ck_assert_int_eq(model_dhchap_secret_name(node, UINT64_MAX, name, sizeof(name), &e), 0);
	ck_assert_uint_eq(strlen(name), 253);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dhchap_keys");
	TCase *t = tcase_create("codec");
	tcase_add_test(t, test_secret_round_trip);
	tcase_add_test(t, test_secret_refusals);
	suite_add_tcase(s, t);
	return tu_run(s);
}
