/* The controller's side of DH-HMAC-CHAP keys (docs/authentication.md "Keys"): the node's
 * Secret read and its keys sent with the host's grant (AllowInitiator and ReconcileState) only
 * to an agent reached over mTLS unless plaintext is allowed, a grant without keys failing closed,
 * Secrets that do not check out ignored, and no key in any status or volume context. */
#include <sys/stat.h>

#include "controller/dhchap.h"
#include "controller/reconcile.h"
#include "ctl_fixture.h"
#include "model/dhchap_keys.h"

#define VID  "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1"
#define SNW  CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER
#define NQNA "nqn.2014-08.org.nvmexpress:uuid:aaaa"
#define NQNB "nqn.2014-08.org.nvmexpress:uuid:bbbb"
/* nvme-cli 2.3 gen-dhchap-key outputs (test_dhchap.c) */
#define KEY1 "DHHC-1:01:87YWYvNzas5i06zu/TTeHdORutGuVSnRxrGxeu6cLtwfL5KR:"
#define KEY2 "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"

static const char *const PSC_PARAMS[] = {"pillar-csi.bhyoo.com/storage-class", "fast", NULL};

static void setup(void)
{
	fx_setup();
	fx_objects(true);
	fx_c.dhchap_ns = "pillar-csi";
	fx_c.dhchap_enabled = true;
	fake_agent_set_mtls(fx_fa, true);
}

static void teardown(void)
{
	fx_teardown();
}

/* Volume pvc-1, then its resolved protocol given dhchap (as CreateVolume records it once the
 * refusal is lifted). */
static void make_dhchap_vol(bool bidirectional)
{
	struct grpc_status gs = {0};
	char vid[256], dh[160];
	struct err e = {0};
	ck_assert_msg(fx_create("pvc-1", PSC_PARAMS, false, vid, sizeof(vid), &gs) == 0, "%s",
	              gs.msg);
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	cJSON *tcp = cJSON_GetObjectItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "resolved"),
	                        "protocol"),
	    "nvmeofTcp");
	ck_assert_ptr_nonnull(tcp);
	snprintf(dh, sizeof(dh),
	         "{\"bidirectional\":%s,\"hash\":\"sha384\",\"dhGroup\":\"ffdhe3072\"}",
	         bidirectional ? "true" : "false");
	cJSON_AddItemToObject(tcp, "dhchap", fx_parse(dh));
	ck_assert_msg(store_update(fx_st, o, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
	fake_agent_reset_log(fx_fa);
}

/* The Secret node creates for host NQN nqn at generation gen (name as given, NULL: the right
 * one). */
static void put_secret(const char *node, const char *nqn, uint64_t gen, const char *key,
                       const char *name)
{
	struct model_dhchap_keys k = {0};
	struct model_secret s;
	struct err e = {0};
	snprintf(k.node, sizeof(k.node), "%s", node);
	snprintf(k.host_nqn, sizeof(k.host_nqn), "%s", nqn);
	k.generation = gen;
	snprintf(k.key, sizeof(k.key), "%s", key);
	snprintf(k.ctrl_key, sizeof(k.ctrl_key), "%s", KEY2);
	ck_assert_int_eq(model_dhchap_secret_encode(&k, "pillar-csi", &s, &e), 0);
	if (name)
		ck_assert_int_eq(model_str_set(&s.meta.name, name), 0);
	ck_assert_msg(model_create(fx_st, &model_secret_kind, &s, NULL, &e) == 0, "%s", e.msg);
	model_clear(&model_secret_kind, &s);
}

static const PillarCsi__Agent__V1__AllowInitiatorRequest *last_allow(void)
{
	const PillarCsi__Agent__V1__AllowInitiatorRequest *q = NULL;
	for (size_t i = 0; i < fake_agent_ncalls(fx_fa); i++)
		if (!strcmp(fake_agent_call(fx_fa, i)->method, "AllowInitiator"))
			q = (const void *)fake_agent_call(fx_fa, i)->req;
	return q;
}

static void no_key_stored(void)
{
	cJSON *o = fx_get("PillarVolumeState", "pvc-1");
	char *t = cJSON_PrintUnformatted(o);
	ck_assert_msg(!strstr(t, "DHHC") && !strstr(t, "87YW"), "a key in the volume: %s", t);
	free(t);
	cJSON_Delete(o);
}

static const char *installed(const char *node)
{
	static char v[64];
	cJSON *o = fx_get("CSINode", node);
	const cJSON *a = cJSON_GetObjectItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations"),
	    MODEL_DHCHAP_ANN_INSTALLED);
	snprintf(v, sizeof(v), "%s", cJSON_IsString(a) ? a->valuestring : "-");
	cJSON_Delete(o);
	return v;
}

static bool secret_exists(const char *name)
{
	cJSON *o = NULL;
	int r = store_get(fx_st, store_kind_lookup("Secret"), "pillar-csi", name, &o, NULL);
	cJSON_Delete(o);
	return r == 0;
}

START_TEST(test_publish_sends_keys)
{
	struct grpc_status gs = {0};
	make_dhchap_vol(true);
	put_secret("node-a", NQNA, 5, KEY2, NULL);
	put_secret("node-a", NQNA, 7, KEY1, NULL); /* the newest generation wins */
	put_secret("node-b", NQNB, 9, KEY2, NULL);
	ck_assert_msg(fx_publish(VID, "node-a", SNW, false, &gs) == 0, "%s", gs.msg);
	const PillarCsi__Agent__V1__AllowInitiatorRequest *q = last_allow();
	ck_assert_ptr_nonnull(q);
	ck_assert_ptr_nonnull(q->auth);
	ck_assert_str_eq(q->auth->host_nqn, NQNA);
	ck_assert_str_eq(q->auth->hash, "sha384");
	ck_assert_str_eq(q->auth->dh_group, "ffdhe3072");
	ck_assert_str_eq(q->auth->dhchap_key, KEY1);
	ck_assert_str_eq(q->auth->dhchap_ctrl_key, KEY2);
	ck_assert_uint_eq(q->auth->generation, 7);
	no_key_stored();
	/* the volume context carries no key */
	cJSON *pv = fx_pv(VID);
	char *t = cJSON_PrintUnformatted(pv);
	ck_assert_msg(!strstr(t, "DHHC") && !strstr(t, "87YW"), "%s", t);
	free(t);
	cJSON_Delete(pv);
}
END_TEST

START_TEST(test_unidirectional_has_no_ctrl_key)
{
	struct grpc_status gs = {0};
	make_dhchap_vol(false);
	put_secret("node-a", NQNA, 5, KEY1, NULL);
	ck_assert_msg(fx_publish(VID, "node-a", SNW, false, &gs) == 0, "%s", gs.msg);
	ck_assert_str_eq(last_allow()->auth->dhchap_ctrl_key, "");
}
END_TEST

START_TEST(test_plaintext_refused_unless_allowed)
{
	struct grpc_status gs = {0};
	make_dhchap_vol(true);
	put_secret("node-a", NQNA, 5, KEY1, NULL);
	fake_agent_set_mtls(fx_fa, false);
	ck_assert_int_eq(fx_publish(VID, "node-a", SNW, false, &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg,
	                 "refusing to send DH-HMAC-CHAP keys to agent \"storage-1\" without mTLS: "
	                 "configure --agent-tls-cert, --agent-tls-key and --agent-tls-ca (chart "
	                 "mtls.enabled) or, on a trusted network only, --dhchap-allow-plaintext");
	ck_assert_ptr_null(last_allow()); /* nothing sent */
	/* a controller without --dhchap reads no Secret: the grant fails closed */
	fake_agent_set_mtls(fx_fa, true);
	fx_c.dhchap_enabled = false;
	ck_assert_int_eq(fx_publish(VID, "node-a", SNW, false, &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg,
	                 "the volume asks for NVMe in-band authentication but the controller "
	                 "runs without --dhchap (the chart's dhchap.enabled), so it reads no "
	                 "worker's keys (docs/authentication.md)");
	ck_assert_ptr_null(last_allow());
	struct err e = {0};
	ck_assert_int_eq(dhchap_confirm(&fx_c, &e), 0);
	ck_assert_str_eq(installed("node-a"), "-");
	fx_c.dhchap_enabled = true;
	fake_agent_set_mtls(fx_fa, false);
	fx_c.dhchap_plaintext = true;
	ck_assert_msg(fx_publish(VID, "node-a", SNW, false, &gs) == 0, "%s", gs.msg);
	ck_assert_str_eq(last_allow()->auth->dhchap_key, KEY1);
}
END_TEST

/* No accepted Secret: the grant fails closed (nothing sent); a Secret whose name names another
 * node, another host NQN, or another namespace is not taken. */
START_TEST(test_missing_or_foreign_keys_fail_closed)
{
	struct grpc_status gs = {0};
	make_dhchap_vol(true);
	put_secret("node-b", NQNA, 5, KEY1, NULL);                         /* node-b claims NQNA */
	put_secret("node-a", NQNB, 6, KEY1, NULL);                         /* wrong host NQN */
	put_secret("node-a", NQNA, 7, KEY1, "pillar-csi-dhchap-node-b-7"); /* name of another */
	ck_assert_int_eq(fx_publish(VID, "node-a", SNW, false, &gs), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg,
	                 "node \"node-a\" has published no DH-HMAC-CHAP keys for host NQN "
	                 "\"" NQNA "\" (Secret pillar-csi-dhchap-node-a-<generation> in "
	                 "namespace \"pillar-csi\"); is the node plugin running with dhchap "
	                 "enabled?");
	ck_assert_ptr_null(last_allow());
	fx_c.dhchap_ns = "elsewhere";
	put_secret("node-a", NQNA, 8, KEY1, NULL); /* in pillar-csi, not in elsewhere */
	ck_assert_int_eq(fx_publish(VID, "node-a", SNW, false, &gs), GRPC_FAILED_PRECONDITION);
	fx_c.dhchap_ns = "pillar-csi";
	ck_assert_msg(fx_publish(VID, "node-a", SNW, false, &gs) == 0, "%s", gs.msg);
	ck_assert_uint_eq(last_allow()->auth->generation, 8);
}
END_TEST

static const PillarCsi__Agent__V1__ExportDesiredState *last_reconcile_export(void)
{
	const PillarCsi__Agent__V1__ReconcileStateRequest *q = NULL;
	for (size_t i = 0; i < fake_agent_ncalls(fx_fa); i++)
		if (!strcmp(fake_agent_call(fx_fa, i)->method, "ReconcileState"))
			q = (const void *)fake_agent_call(fx_fa, i)->req;
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(q->n_volumes, 1);
	ck_assert_uint_eq(q->volumes[0]->n_exports, 1);
	return q->volumes[0]->exports[0];
}

/* The restore carries each admitted host's keys; a host whose keys are missing is left out
 * (never admitted without its key); without mTLS every host is left out. */
START_TEST(test_reconcile_carries_keys)
{
	struct grpc_status gs = {0};
	make_dhchap_vol(true);
	put_secret("node-a", NQNA, 5, KEY1, NULL);
	put_secret("node-b", NQNB, 6, KEY2, NULL);
	ck_assert_msg(fx_publish(VID, "node-a", SNW, false, &gs) == 0, "%s", gs.msg);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_agent_restore(&fx_c, "storage-1", "10.0.0.5:9500", NULL, &gs),
	                 GRPC_OK);
	const PillarCsi__Agent__V1__ExportDesiredState *x = last_reconcile_export();
	ck_assert_uint_eq(x->n_allowed_initiators, 1);
	ck_assert_str_eq(x->allowed_initiators[0], NQNA);
	ck_assert_uint_eq(x->n_host_auth, 1);
	ck_assert_str_eq(x->host_auth[0]->host_nqn, NQNA);
	ck_assert_str_eq(x->host_auth[0]->dhchap_key, KEY1);
	ck_assert_str_eq(x->host_auth[0]->dhchap_ctrl_key, KEY2);
	ck_assert_str_eq(x->host_auth[0]->hash, "sha384");
	/* without mTLS: the host is left out */
	fake_agent_set_mtls(fx_fa, false);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_agent_restore(&fx_c, "storage-1", "10.0.0.5:9500", NULL, &gs),
	                 GRPC_OK);
	x = last_reconcile_export();
	ck_assert_uint_eq(x->n_allowed_initiators, 0);
	ck_assert_uint_eq(x->n_host_auth, 0);
	no_key_stored();
}
END_TEST

/* The embedded store keeps Secrets in files of mode 0600, in a directory of mode 0700, also
 * when a write reuses an earlier file's inode. */
START_TEST(test_embedded_store_secret_modes)
{
	char p[700];
	struct stat st;
	put_secret("node-a", NQNA, 5, KEY1, NULL);
	put_secret("node-a", NQNA, 6, KEY1, NULL);
	snprintf(p, sizeof(p), "%s/secrets/pillar-csi/pillar-csi-dhchap-node-a-6.json", fx_dir);
	ck_assert_msg(stat(p, &st) == 0, "%s", p);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	snprintf(p, sizeof(p), "%s/secrets/pillar-csi/pillar-csi-dhchap-node-a-5.json", fx_dir);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	snprintf(p, sizeof(p), "%s/secrets/pillar-csi", fx_dir);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0077, 0);
	/* an update goes through the reused spare inode */
	cJSON *o = NULL;
	struct err e = {0};
	ck_assert_int_eq(store_get(fx_st, store_kind_lookup("Secret"), "pillar-csi",
	                           "pillar-csi-dhchap-node-a-5", &o, &e),
	                 0);
	cJSON_AddItemToObject(
	    cJSON_GetObjectItem(o, "metadata"), "labels",
	    fx_parse("{\"pillar-csi.bhyoo.com/dhchap\":\"host-keys\",\"x\":\"y\"}"));
	ck_assert_msg(store_update(fx_st, o, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
	snprintf(p, sizeof(p), "%s/secrets/pillar-csi/pillar-csi-dhchap-node-a-5.json", fx_dir);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
}
END_TEST

/* Rotation, the controller's side: a new generation reaches every agent admitting the node
 * with the next whole pass, is then confirmed on the CSINode, and the older Secret goes; an
 * agent that did not take it holds the confirmation back.  A node no agent admits is confirmed
 * at once. */
START_TEST(test_rotation_confirmed)
{
	struct grpc_status gs = {0};
	struct err e = {0};
	make_dhchap_vol(true);
	put_secret("node-a", NQNA, 5, KEY1, NULL);
	put_secret("node-b", NQNB, 9, KEY2, NULL);
	ck_assert_msg(fx_publish(VID, "node-a", SNW, false, &gs) == 0, "%s", gs.msg);
	ck_assert_int_eq(dhchap_confirm(&fx_c, &e), 0);
	ck_assert_str_eq(installed("node-b"), "-"); /* storage-1 not passed yet: unknown */
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	ck_assert_str_eq(installed("node-a"), "5");
	ck_assert_str_eq(installed("node-b"), "9"); /* admitted nowhere */
	/* the worker rotates: generation 6 */
	put_secret("node-a", NQNA, 6, KEY2, NULL);
	fake_agent_item_error(fx_fa, "tank/pvc-1", "INTERNAL: configfs write failed");
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	ck_assert_str_eq(installed("node-a"), "5"); /* the agent did not take it */
	ck_assert(secret_exists("pillar-csi-dhchap-node-a-5"));
	fake_agent_item_error(fx_fa, "tank/pvc-1", NULL);
	fake_agent_reset_log(fx_fa);
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	const PillarCsi__Agent__V1__ExportDesiredState *x = last_reconcile_export();
	ck_assert_uint_eq(x->host_auth[0]->generation, 6);
	ck_assert_str_eq(x->host_auth[0]->dhchap_key, KEY2);
	ck_assert_str_eq(installed("node-a"), "6");
	ck_assert(!secret_exists("pillar-csi-dhchap-node-a-5"));
	ck_assert(secret_exists("pillar-csi-dhchap-node-a-6"));
	ck_assert(secret_exists("pillar-csi-dhchap-node-b-9"));
}
END_TEST

/* What PillarAgent storage-1's status.dhchap says (node=generation, ...), "-" without it. */
static const char *status_installed(void)
{
	static char v[200];
	cJSON *o = fx_get("PillarAgent", "storage-1");
	const cJSON *d = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "dhchap");
	const cJSON *i;
	snprintf(v, sizeof(v), "%s", d ? "" : "-");
	cJSON_ArrayForEach(i, cJSON_GetObjectItem(d, "installed"))
	{
		size_t n = strlen(v);
		snprintf(v + n, sizeof(v) - n, "%s=%.0f,",
		         cJSON_GetStringValue(cJSON_GetObjectItem(i, "node")),
		         cJSON_GetNumberValue(cJSON_GetObjectItem(i, "generation")));
	}
	cJSON_Delete(o);
	return v;
}

/* A restarted controller (its records gone) neither confirms a generation an agent may lack nor
 * waits for a pass of that agent: the PillarAgent's status.dhchap says what it holds. */
START_TEST(test_confirmation_survives_restart)
{
	struct grpc_status gs = {0};
	struct err e = {0};
	int requeue = 0;
	make_dhchap_vol(true);
	put_secret("node-a", NQNA, 5, KEY1, NULL);
	ck_assert_msg(fx_publish(VID, "node-a", SNW, false, &gs) == 0, "%s", gs.msg);
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	ck_assert_str_eq(installed("node-a"), "5");
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_str_eq(status_installed(), "node-a=5,");
	/* the worker rotates; storage-1 refuses generation 6 */
	put_secret("node-a", NQNA, 6, KEY2, NULL);
	fake_agent_item_error(fx_fa, "tank/pvc-1", "INTERNAL: configfs write failed");
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_str_eq(status_installed(), "node-a=0,");
	/* the controller restarts: nothing may be confirmed that storage-1 lacks */
	dhchap_records_free(&fx_c);
	ck_assert_int_eq(dhchap_confirm(&fx_c, &e), 0);
	ck_assert_str_eq(installed("node-a"), "5");
	ck_assert(secret_exists("pillar-csi-dhchap-node-a-5"));
	/* storage-1 takes 6; the controller restarts before it confirms (as if: the annotation
	 * and the older Secret put back): the status is enough, no pass of storage-1 needed */
	fake_agent_item_error(fx_fa, "tank/pvc-1", NULL);
	ck_assert_int_eq(reconcile_agent_resync(&fx_c, "storage-1", &e), 0);
	ck_assert_int_eq(reconcile_agent(&fx_c, "storage-1", &requeue, &e), 0);
	ck_assert_str_eq(status_installed(), "node-a=6,");
	cJSON *cn = fx_get("CSINode", "node-a");
	cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(cn, "metadata"), "annotations");
	cJSON_ReplaceItemInObject(ann, MODEL_DHCHAP_ANN_INSTALLED, cJSON_CreateString("5"));
	ck_assert_msg(store_update(fx_st, cn, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(cn);
	put_secret("node-a", NQNA, 5, KEY1, NULL);
	dhchap_records_free(&fx_c);
	ck_assert_int_eq(dhchap_confirm(&fx_c, &e), 0);
	ck_assert_str_eq(installed("node-a"), "6");
	ck_assert(!secret_exists("pillar-csi-dhchap-node-a-5"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_dhchap");
	TCase *t = tcase_create("keys");
	tcase_set_timeout(t, 30);
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_publish_sends_keys);
	tcase_add_test(t, test_unidirectional_has_no_ctrl_key);
	tcase_add_test(t, test_plaintext_refused_unless_allowed);
	tcase_add_test(t, test_missing_or_foreign_keys_fail_closed);
	tcase_add_test(t, test_reconcile_carries_keys);
	tcase_add_test(t, test_embedded_store_secret_modes);
	tcase_add_test(t, test_rotation_confirmed);
	tcase_add_test(t, test_confirmation_survives_restart);
	suite_add_tcase(s, t);
	return tu_run(s);
}
