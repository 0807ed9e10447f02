/* The node's DH-HMAC-CHAP keys and keyed connect (docs/authentication.md): the 0600 key file,
 * its strict reading, NodeStageVolume with the node's secrets, a kernel without host
 * authentication, and the kernel's authentication errnos as CSI statuses.  No key material in
 * the logs (at --v=5) or the stage record. */
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <mbedtls/base64.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "kube_fake.h"
#include "model/dhchap_keys.h"
#include "node/dhchap.h"
#include "node/dhchap_rotate.h"
#include "node/internal.h"
#include "node_fixture.h"
#include "store/store.h"

#define HOSTNQN         "nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1"
#define OTHERNQN        "nqn.2014-08.org.nvmexpress:uuid:0d3b7e5a-9a43-4f0e-8f3b-5b1e2c7d9e22"
#define VOL_RECORD_NAME "storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json"

static const char *const ctx_bi[] = {"pillar-csi.bhyoo.com/dhchap", "bidirectional", NULL};
static const char *const ctx_uni[] = {"pillar-csi.bhyoo.com/dhchap", "unidirectional", NULL};

/* Logs at --v=5 into <root>/node.log for the test's duration. */
static int log_to(const struct env *v)
{
	char p[8192];
	snprintf(p, sizeof(p), "%s/node.log", v->root);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	log_set_fd(fd);
	log_set_verbosity(5);
	return fd;
}

static void log_back(int fd)
{
	log_set_fd(2);
	log_set_verbosity(0);
	close(fd);
}

/* The base64 body of a DHHC-1 secret (between the second and the last colon). */
static const char *body(const char *secret)
{
	static char b[NVME_DHCHAP_SECRET_MAX];
	snprintf(b, sizeof(b), "%s", secret + 10);
	b[strlen(b) - 1] = 0;
	return b;
}

/* The raw key of a secret (its base64 body without the CRC) in lowercase hex. */
static const char *hexkey(const char *secret)
{
	static char hex[2 * 68 + 1];
	unsigned char raw[80];
	size_t n = 0;
	const char *b = body(secret);
	ck_assert_int_eq(
	    mbedtls_base64_decode(raw, sizeof(raw), &n, (const unsigned char *)b, strlen(b)), 0);
	ck_assert_uint_ge(n, 36);
	for (size_t i = 0; i + 4 < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	return hex;
}

/* Neither secret of k (DHHC-1 text, base64, raw key in hex) in <dir>/<name> (missing is fine). */
static void no_key_in(const char *dir, const char *name, const struct model_dhchap_generation *g)
{
	char p[8192];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (access(p, F_OK) != 0)
		return;
	const char *t = tu_read(dir, name);
	ck_assert_msg(!strstr(t, "DHHC-1"), "%s holds a DHHC-1 secret", name);
	ck_assert_msg(!strstr(t, body(g->key)), "%s holds the host key", name);
	ck_assert_msg(!strstr(t, body(g->ctrl_key)), "%s holds the controller key", name);
	ck_assert_msg(!strstr(t, hexkey(g->key)), "%s holds the host key in hex", name);
	ck_assert_msg(!strstr(t, hexkey(g->ctrl_key)), "%s holds the controller key in hex", name);
}

/* The node fixture with --dhchap. */
static void env_dhchap(struct env *v)
{
	env_init(v, 1);
	v->n->dhchap = true;
}

/* Writes confirmed keys of generation 17 (and next keys of 18 when next) for the fixture's
 * host into the fixture's key file. */
static void keys_confirmed(struct env *v, bool next, struct model_dhchap_file *k)
{
	struct err e = {0};
	memset(k, 0, sizeof(*k));
	snprintf(k->node, sizeof(k->node), "worker-1");
	snprintf(k->hostnqn, sizeof(k->hostnqn), HOSTNQN);
	k->has_current = true;
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 17, &k->current, &e), 0);
	k->has_next = next;
	if (next)
		ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 18, &k->next, &e), 0);
	ck_assert_int_eq(model_dhchap_file_write(v->state, k, &e), 0);
}

START_TEST(test_keys_made_once_0600_and_per_nqn)
{
	const char *dir = tu_mkdtemp();
	struct model_dhchap_file a, b, c;
	struct err e = {0};
	struct stat sb;
	char p[8192];
	bool created;
	ck_assert_int_eq(model_dhchap_file_read(dir, &a, &e), -ENOENT);
	ck_assert_int_eq(
	    node_dhchap_keys_ensure(dir, "worker-1", HOSTNQN, 1765000000, &a, &created, &e), 0);
	ck_assert(created);
	ck_assert(!a.has_current && a.has_next); /* unconfirmed: next */
	ck_assert_uint_eq(a.next.generation, 1765000000);
	ck_assert_str_eq(a.hostnqn, HOSTNQN);
	ck_assert_str_eq(a.node, "worker-1");
	ck_assert_int_eq(nvme_dhchap_secret_check(a.next.key, NULL), 0);
	ck_assert_int_eq(nvme_dhchap_secret_check(a.next.ctrl_key, NULL), 0);
	ck_assert_int_eq(strncmp(a.next.key, "DHHC-1:03:", 10), 0); /* 64-byte keys, SHA-512 */
	ck_assert_uint_eq(strlen(a.next.key), 10 + 92 + 1);
	ck_assert_str_ne(a.next.key, a.next.ctrl_key);
	ck_assert_ptr_eq(node_dhchap_connect_gen(&a), &a.next);
	snprintf(p, sizeof(p), "%s/dhchap.key", dir);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0600);
	ck_assert_str_eq(tu_read(dir, "dhchap.key"),
	                 fmt("{\"node\":\"worker-1\",\"hostNQN\":\"%s\",\"next\":{\"generation\":"
	                     "1765000000,\"key\":\"%s\",\"ctrlKey\":\"%s\"}}\n",
	                     HOSTNQN, a.next.key, a.next.ctrl_key));
	/* read back, then ensure keeps them */
	ck_assert_int_eq(model_dhchap_file_read(dir, &b, &e), 0);
	ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
	ck_assert_int_eq(
	    node_dhchap_keys_ensure(dir, "worker-1", HOSTNQN, 1765000500, &b, &created, &e), 0);
	ck_assert(!created);
	ck_assert_str_eq(b.next.key, a.next.key);
	/* another host NQN: new keys, a generation above the old one even if the clock is behind */
	ck_assert_int_eq(node_dhchap_keys_ensure(dir, "worker-1", OTHERNQN, 5, &c, &created, &e),
	                 0);
	ck_assert(created);
	ck_assert_uint_eq(c.next.generation, 1765000001);
	ck_assert_str_ne(c.next.key, a.next.key);
	ck_assert_str_ne(c.next.ctrl_key, a.next.ctrl_key);
	/* a wider mode is refused, not used */
	ck_assert_int_eq(chmod(p, 0640), 0);
	ck_assert_int_eq(model_dhchap_file_read(dir, &b, &e), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(e.msg, "it has mode 0640, not 0600"));
	tu_rmtree(dir);
}
END_TEST

START_TEST(test_corrupt_key_file_refused)
{
	const char *dir = tu_mkdtemp();
	struct model_dhchap_file k;
	struct model_dhchap_generation g, h;
	struct err e = {0};
	char p[8192], t[14][1200], bad[5000];
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 7, &g, &e), 0);
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 9, &h, &e), 0);
#define T(n, ...) (snprintf(t[n], sizeof(t[n]), __VA_ARGS__), t[n])
#define G(gen)    "{\"generation\":" gen ",\"key\":\"%s\",\"ctrlKey\":\"%s\"}"
	const char *head = "{\"node\":\"w\",\"hostNQN\":\"" HOSTNQN "\"";
	struct {
		const char *text, *why;
	} cases[] = {
	    {"", "not one JSON object"},
	    {"[]", "not one JSON object"},
	    {T(0, "%s}", head), "neither current nor next"},
	    {T(1, "%s,\"current\":" G("7") "} {}", head, g.key, g.ctrl_key), "not one JSON object"},
	    {T(2, "%s,\"current\":" G("7") ",\"extra\":1}", head, g.key, g.ctrl_key),
	     "a member other than"},
	    {T(3, "%s,\"current\":" G("0") "}", head, g.key, g.ctrl_key), "positive integer"},
	    {T(4, "%s,\"current\":" G("\"7\"") "}", head, g.key, g.ctrl_key), "positive integer"},
	    {T(5, "%s,\"current\":" G("7") "}", head, g.key, g.key), "are the same"},
	    {T(6, "%s,\"current\":" G("7") "}", head, "DHHC-1:03:AAAA:", g.ctrl_key), "malformed"},
	    {T(7, "%s,\"current\":" G("7") "}", head, "", g.ctrl_key), "missing, empty"},
	    {T(8, "{\"hostNQN\":\"" HOSTNQN "\",\"current\":" G("7") "}", g.key, g.ctrl_key),
	     "missing, empty"},
	    {T(9, "%s,\"current\":" G("9") ",\"next\":" G("7") "}", head, h.key, h.ctrl_key, g.key,
	       g.ctrl_key),
	     "not above"},
	    {T(10, "%s,\"current\":" G("7") ",\"rotateRequest\":5}", head, g.key, g.ctrl_key),
	     "rotateRequest"},
	    {T(12, "%s,\"current\":" G("7") ",\"ctrlKeyDue\":1}", head, g.key, g.ctrl_key),
	     "ctrlKeyDue is not true or false"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tu_write(dir, "dhchap.key", cases[i].text);
		snprintf(p, sizeof(p), "%s/dhchap.key", dir);
		ck_assert_int_eq(chmod(p, 0600), 0);
		memset(&e, 0, sizeof(e));
		ck_assert_int_eq(model_dhchap_file_read(dir, &k, &e), -EBADMSG);
		ck_assert_msg(strstr(e.msg, "corrupt DH-HMAC-CHAP key file") &&
		                  strstr(e.msg, cases[i].why) && strstr(e.msg, "delete it"),
		              "case %zu: %s", i, e.msg);
		ck_assert_msg(!strstr(e.msg, "DHHC") && !strstr(e.msg, body(g.key)),
		              "case %zu quotes the file: %s", i, e.msg);
		/* ensure refuses too: it never replaces a corrupt file silently */
		ck_assert_int_eq(node_dhchap_keys_ensure(dir, "w", HOSTNQN, 1, &k, NULL, &e),
		                 -EBADMSG);
	}
	/* an oversized file */
	memset(bad, ' ', sizeof(bad) - 1);
	bad[sizeof(bad) - 1] = 0;
	tu_write(dir, "dhchap.key", bad);
	ck_assert_int_eq(chmod(p, 0600), 0);
	ck_assert_int_eq(model_dhchap_file_read(dir, &k, &e), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(e.msg, "larger"));
	/* a whole file with both generations reads */
	tu_write(dir, "dhchap.key",
	         T(11,
	           "%s,\"current\":" G("7") ",\"next\":" G("9") ",\"rotateRequest\":"
	                                                        "\"r1\"}\n",
	           head, g.key, g.ctrl_key, h.key, h.ctrl_key));
	ck_assert_int_eq(chmod(p, 0600), 0);
	ck_assert_int_eq(model_dhchap_file_read(dir, &k, &e), 0);
	ck_assert(k.has_current && k.has_next);
	ck_assert_uint_eq(k.current.generation, 7);
	ck_assert_uint_eq(k.next.generation, 9);
	ck_assert_str_eq(k.next.ctrl_key, h.ctrl_key);
	ck_assert_str_eq(k.rotate_request, "r1");
	ck_assert(!k.ctrl_key_due);
	ck_assert_ptr_eq(node_dhchap_connect_gen(&k), &k.current);
	ck_assert_uint_eq(node_dhchap_next_generation(&k, 8), 10);
	ck_assert_uint_eq(node_dhchap_next_generation(&k, 100), 100);
	/* the second half of a rotation due: read, and written back as it was */
	tu_write(dir, "dhchap.key",
	         T(13, "%s,\"current\":" G("7") ",\"rotateRequest\":\"r1\",\"ctrlKeyDue\":true}\n",
	           head, g.key, g.ctrl_key));
	ck_assert_int_eq(chmod(p, 0600), 0);
	ck_assert_int_eq(model_dhchap_file_read(dir, &k, &e), 0);
	ck_assert(k.ctrl_key_due && k.has_current && !k.has_next);
	ck_assert_int_eq(model_dhchap_file_write(dir, &k, &e), 0);
	ck_assert_str_eq(tu_read(dir, "dhchap.key"), t[13]);
#undef G
#undef T
	tu_rmtree(dir);
}
END_TEST

START_TEST(test_stage_bidirectional_connects_with_both_secrets)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	struct model_dhchap_file k;
	struct err e = {0};
	env_dhchap(&v);
	int fd = log_to(&v);
	sreq_init(&s, &v, 0, ctx_bi);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	log_back(fd);
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k, &e), 0);
	ck_assert_uint_gt(k.next.generation, 1765000000); /* the Unix time of making */
	ck_assert_ptr_nonnull(strstr(v.k.last_connect, fmt(",dhchap_secret=%s", k.next.key)));
	ck_assert_ptr_nonnull(
	    strstr(v.k.last_connect, fmt(",dhchap_ctrl_secret=%s", k.next.ctrl_key)));
	/* the log shows the line redacted; neither the log nor the record holds a key */
	ck_assert_ptr_nonnull(strstr(tu_read(v.root, "node.log"), "dhchap_secret=(secret)"));
	no_key_in(v.root, "node.log", &k.next);
	no_key_in(v.root, "tools.log", &k.next);
	no_key_in(v.state, VOL_RECORD_NAME, &k.next);
	ck_assert_ptr_nonnull(strstr(tu_read(v.state, VOL_RECORD_NAME), NQN));
	env_done(&v);
}
END_TEST

START_TEST(test_stage_unidirectional_and_off)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	struct model_dhchap_file k;
	struct err e = {0};
	char p[8192];
	env_init(&v, 1);
	sreq_init(&s, &v, 0, NULL); /* no --dhchap, no dhchap: no keys, no secret */
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_ptr_null(strstr(v.k.last_connect, "dhchap"));
	snprintf(p, sizeof(p), "%s/dhchap.key", v.state);
	ck_assert_int_ne(access(p, F_OK), 0);
	env_done(&v);

	env_dhchap(&v);
	sreq_init(&s, &v, 0, ctx_uni);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k, &e), 0);
	ck_assert_ptr_nonnull(strstr(v.k.last_connect, fmt(",dhchap_secret=%s", k.next.key)));
	ck_assert_ptr_null(strstr(v.k.last_connect, "dhchap_ctrl_secret"));
	env_done(&v);
}
END_TEST

START_TEST(test_stage_refused_on_kernel_without_host_auth)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	char p[8192];
	env_dhchap(&v);
	v.k.no_host_auth = 1; /* Debian 12's 6.1: the connect succeeds without authenticating */
	sreq_init(&s, &v, 0, ctx_bi);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_msg(strstr(st.msg, "CONFIG_NVME_HOST_AUTH") &&
	                  strstr(st.msg, "nvmeofTcp.dhchap") && strstr(st.msg, VOL),
	              "%s", st.msg);
	ck_assert_int_eq(v.k.connects, 1);
	ck_assert_int_eq(v.k.disconnects, 1); /* the unauthenticated controller is removed */
	snprintf(p, sizeof(p), "%s/%s", v.state, VOL_RECORD_NAME);
	ck_assert_int_ne(access(p, F_OK), 0);
	env_done(&v);
}
END_TEST

START_TEST(test_stage_auth_errnos)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	const struct {
		int rc;
		const char *const *ctx;
		int code;
		const char *want;
	} cases[] = {
	    {-EKEYREJECTED, ctx_bi, GRPC_UNAVAILABLE, "keys of generation 17"},
	    {-ENOKEY, ctx_uni, GRPC_UNAVAILABLE, "keys of generation 17"},
	    {-ENOKEY, NULL, GRPC_FAILED_PRECONDITION, "has no nvmeofTcp.dhchap"},
	    {-EINVAL, ctx_bi, GRPC_INVALID_ARGUMENT, "CONFIG_NVME_HOST_AUTH"},
	    {-EINVAL, NULL, GRPC_INVALID_ARGUMENT, "/etc/nvme/hostnqn"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct model_dhchap_file k;
		env_dhchap(&v);
		keys_confirmed(&v, false, &k);
		v.k.connect_rc = cases[i].rc;
		sreq_init(&s, &v, 0, cases[i].ctx);
		ck_assert_int_eq(stage(&v, &s, &st), cases[i].code);
		ck_assert_msg(strstr(st.msg, cases[i].want), "case %zu: %s", i, st.msg);
		ck_assert_msg(!strstr(st.msg, "DHHC"), "case %zu: %s", i, st.msg);
		env_done(&v);
	}
	env_dhchap(&v);
	static const char *const bad[] = {"pillar-csi.bhyoo.com/dhchap", "yes", NULL};
	sreq_init(&s, &v, 0, bad);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(st.msg, "\"bidirectional\" or \"unidirectional\""));
	ck_assert_int_eq(v.k.connects, 0);
	env_done(&v);
}
END_TEST

/* docs/authentication.md "The worker side": confirmed keys are offered to every target; a
 * rotation in flight falls back from current to next on EKEYREJECTED; no --dhchap refuses. */
START_TEST(test_stage_generations_and_enablement)
{
	struct err e = {0};
	struct env v;
	struct sreq s;
	struct grpc_status st;
	struct model_dhchap_file k;
	/* start-up with --dhchap makes the keys (unconfirmed: next) */
	env_dhchap(&v);
	node_dhchap_start(v.n);
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k, &e), 0);
	ck_assert(k.has_next && !k.has_current);
	ck_assert_str_eq(k.node, "worker-1");
	env_done(&v);
	/* a volume without dhchap, keys not yet confirmed: no secret */
	env_dhchap(&v);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_ptr_null(strstr(v.k.last_connect, "dhchap"));
	env_done(&v);
	/* confirmed: the host secret, never the controller's */
	env_dhchap(&v);
	keys_confirmed(&v, false, &k);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_ptr_nonnull(strstr(v.k.last_connect, fmt(",dhchap_secret=%s", k.current.key)));
	ck_assert_ptr_null(strstr(v.k.last_connect, "dhchap_ctrl_secret"));
	env_done(&v);
	/* rotation in flight: current refused, next used */
	env_dhchap(&v);
	keys_confirmed(&v, true, &k);
	v.k.reject_secret = k.current.key;
	sreq_init(&s, &v, 0, ctx_bi);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(v.k.connects, 2);
	ck_assert_ptr_nonnull(strstr(v.k.last_connect, fmt(",dhchap_secret=%s", k.next.key)));
	ck_assert_ptr_nonnull(
	    strstr(v.k.last_connect, fmt(",dhchap_ctrl_secret=%s", k.next.ctrl_key)));
	env_done(&v);
	/* both refused: UNAVAILABLE naming the generation tried last */
	env_dhchap(&v);
	keys_confirmed(&v, false, &k);
	v.k.reject_secret = k.current.key;
	sreq_init(&s, &v, 0, ctx_uni);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_UNAVAILABLE);
	ck_assert_int_eq(v.k.connects, 1);
	ck_assert_ptr_nonnull(strstr(st.msg, "keys of generation 17"));
	env_done(&v);
	/* a dhchap volume on a node plugin without --dhchap */
	env_init(&v, 1);
	sreq_init(&s, &v, 0, ctx_bi);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_ptr_nonnull(strstr(st.msg, "runs without --dhchap"));
	ck_assert_int_eq(v.k.connects, 0);
	env_done(&v);
}
END_TEST

START_TEST(test_stage_corrupt_key_file_refused)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	env_dhchap(&v);
	tu_write(v.state, "dhchap.key", "{\"node\":\"worker-1\"}");
	sreq_init(&s, &v, 0, ctx_bi);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INTERNAL);
	ck_assert_ptr_nonnull(strstr(st.msg, "corrupt DH-HMAC-CHAP key file"));
	ck_assert_int_eq(v.k.connects, 0);
	/* left as it was for the operator */
	ck_assert_str_eq(tu_read(v.state, "dhchap.key"), "{\"node\":\"worker-1\"}");
	env_done(&v);
}
END_TEST

/* Hooks of the rotation test: what the controller confirmed and the Node annotation's value,
 * and the Secrets "created". */
struct fake_api {
	uint64_t confirmed;
	char request[64];
	int publishes, publish_rc;
	uint64_t published_gen;
	char published_key[NVME_DHCHAP_SECRET_MAX];
};
static int fa_confirmed(void *ctx, const char *node, uint64_t *gen, struct err *e)
{
	(void)node;
	(void)e;
	*gen = ((struct fake_api *)ctx)->confirmed;
	return 0;
}
static int fa_requested(void *ctx, const char *node, char *buf, size_t cap, struct err *e)
{
	(void)node;
	(void)e;
	snprintf(buf, cap, "%s", ((struct fake_api *)ctx)->request);
	return 0;
}
static int fa_publish(void *ctx, const char *node, const struct model_dhchap_file *k, struct err *e)
{
	struct fake_api *a = ctx;
	ck_assert_str_eq(node, "worker-1");
	a->publishes++;
	if (a->publish_rc)
		return err_set(e, a->publish_rc, "fake publish failed");
	a->published_gen = k->next.generation;
	snprintf(a->published_key, sizeof(a->published_key), "%s", k->next.key);
	return 0;
}

/* A fake live controller nvme<i> authenticating with g. */
static void live_ctrl(struct env *v, int i, const struct model_dhchap_generation *g, bool bidi)
{
	tu_write(v->sys, fmt("class/nvme/nvme%d/dhchap_secret", i), fmt("%s\n", g->key));
	tu_write(v->sys, fmt("class/nvme/nvme%d/dhchap_ctrl_secret", i),
	         bidi ? fmt("%s\n", g->ctrl_key) : "none\n");
}

#define UNWRITTEN_MTIME 1000000000 /* the mtime of an attribute nothing wrote since marked */

/* Marks both secret attributes of nvme1 … nvme<count> unwritten: a later write (even of the same
 * value) changes the mtime, which is how a test tells which attributes the node wrote. */
static void mark_unwritten(struct env *v, int count)
{
	static const char *const attrs[] = {"dhchap_secret", "dhchap_ctrl_secret"};
	for (int i = 1; i <= count; i++)
		for (int a = 0; a < 2; a++) {
			struct timespec ts[2] = {{UNWRITTEN_MTIME, 0}, {UNWRITTEN_MTIME, 0}};
			ck_assert_int_eq(
			    utimensat(AT_FDCWD, fmt("%s/class/nvme/nvme%d/%s", v->sys, i, attrs[a]),
			              ts, 0),
			    0);
		}
}

/* Whether the node wrote nvme<i>'s attr since mark_unwritten. */
static bool written(struct env *v, int i, const char *attr)
{
	struct stat sb;
	ck_assert_int_eq(stat(fmt("%s/class/nvme/nvme%d/%s", v->sys, i, attr), &sb), 0);
	return sb.st_mtim.tv_sec != UNWRITTEN_MTIME;
}

/* Confirmed keys of generation gen (made by the first tick at gen) in *k. */
static void first_keys(struct env *v, struct fake_api *a, const struct node_dhchap_hooks *h,
                       uint64_t gen, struct model_dhchap_file *k)
{
	struct err e = {0};
	ck_assert_int_eq(node_dhchap_tick(v->n, h, gen, 0, &e), 0);
	ck_assert_int_eq(model_dhchap_file_read(v->state, k, &e), 0);
	ck_assert(k->has_next && !k->has_current);
	ck_assert_uint_eq(a->published_gen, k->next.generation);
	a->confirmed = k->next.generation;
	ck_assert_int_eq(node_dhchap_tick(v->n, h, gen + 1, 0, &e), 0);
	ck_assert_int_eq(model_dhchap_file_read(v->state, k, &e), 0);
	ck_assert(k->has_current && !k->has_next && !k->ctrl_key_due);
	ck_assert_uint_eq(k->current.generation, gen);
}

/* docs/authentication.md "Rotation": a rotation is two generations, each changing one secret,
 * and each live controller gets one attribute per generation, so that every re-authentication
 * pairs secrets the target holds (with both at once, the first of two writes pairs the new host
 * secret with the old controller secret, which the target refuses). */
START_TEST(test_rotation_publish_confirm_live)
{
	struct env v;
	struct fake_api a = {0};
	struct node_dhchap_hooks h = {fa_confirmed, fa_requested, fa_publish, &a};
	struct model_dhchap_file k0, k1, k2, k;
	struct model_dhchap_generation other;
	struct err e = {0};
	env_dhchap(&v);
	int fd = log_to(&v);
	first_keys(&v, &a, &h, 1000, &k0);
	ck_assert_int_eq(a.publishes, 1);
	/* two live controllers with the current keys (one bidirectional), one with other keys */
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 5, &other, &e), 0);
	live_ctrl(&v, 1, &k0.current, true);
	live_ctrl(&v, 2, &k0.current, false);
	live_ctrl(&v, 3, &other, true);
	mark_unwritten(&v, 3);
	/* a request: the first half, a new host secret with the current controller secret,
	 * published; nothing live changes before the confirmation */
	snprintf(a.request, sizeof(a.request), "2026-12-06T19:00:00Z");
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1003, 0, &e), 0);
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k1, &e), 0);
	ck_assert(k1.has_current && k1.has_next && k1.ctrl_key_due);
	ck_assert_uint_eq(k1.next.generation, 1003);
	ck_assert_str_ne(k1.next.key, k0.current.key);
	ck_assert_str_eq(k1.next.ctrl_key, k0.current.ctrl_key);
	ck_assert_str_eq(k1.rotate_request, a.request);
	ck_assert_ptr_nonnull(strstr(tu_read(v.state, "dhchap.key"), "\"ctrlKeyDue\":true}"));
	ck_assert_int_eq(a.publishes, 2);
	ck_assert_str_eq(a.published_key, k1.next.key);
	/* the same request again does nothing */
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1004, 0, &e), 0);
	ck_assert_int_eq(a.publishes, 2);
	for (int i = 1; i <= 3; i++)
		ck_assert(!written(&v, i, "dhchap_secret") &&
		          !written(&v, i, "dhchap_ctrl_secret"));
	/* confirmed: the live controllers of the current keys get the host secret only; the
	 * second half (a new controller secret, the same host secret) is made and published */
	a.confirmed = 1003;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1005, 0, &e), 0);
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme1/dhchap_secret"),
	                 fmt("%s\n", k1.next.key));
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme2/dhchap_secret"),
	                 fmt("%s\n", k1.next.key));
	ck_assert(!written(&v, 1, "dhchap_ctrl_secret") && !written(&v, 2, "dhchap_ctrl_secret"));
	ck_assert(!written(&v, 3, "dhchap_secret") && !written(&v, 3, "dhchap_ctrl_secret"));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k2, &e), 0);
	ck_assert(k2.has_current && k2.has_next && !k2.ctrl_key_due);
	ck_assert_int_eq(memcmp(&k2.current, &k1.next, sizeof(k2.current)), 0);
	ck_assert_uint_eq(k2.next.generation, 1005);
	ck_assert_str_eq(k2.next.key, k1.next.key);
	ck_assert_str_ne(k2.next.ctrl_key, k1.next.ctrl_key);
	ck_assert_str_eq(k2.rotate_request, a.request);
	ck_assert_int_eq(a.publishes, 3);
	ck_assert_uint_eq(a.published_gen, 1005);
	/* confirmed: the bidirectional controller gets the controller secret only */
	mark_unwritten(&v, 3);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1006, 0, &e), 0);
	ck_assert(!written(&v, 1, "dhchap_ctrl_secret"));
	a.confirmed = 1005;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1007, 0, &e), 0);
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme1/dhchap_ctrl_secret"),
	                 fmt("%s\n", k2.next.ctrl_key));
	ck_assert(!written(&v, 1, "dhchap_secret"));
	ck_assert(!written(&v, 2, "dhchap_secret") && !written(&v, 2, "dhchap_ctrl_secret"));
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme2/dhchap_ctrl_secret"), "none\n");
	ck_assert(!written(&v, 3, "dhchap_secret") && !written(&v, 3, "dhchap_ctrl_secret"));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k, &e), 0);
	ck_assert(k.has_current && !k.has_next && !k.ctrl_key_due);
	ck_assert_int_eq(memcmp(&k.current, &k2.next, sizeof(k.current)), 0);
	/* done: the same request starts no third generation */
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1008, 0, &e), 0);
	ck_assert_int_eq(a.publishes, 3);
	/* a failed publish is retried at the next step; AlreadyExists counts as published */
	snprintf(a.request, sizeof(a.request), "2026-12-06T20:00:00Z");
	a.publish_rc = -EIO;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 5000, 0, &e), -EIO);
	a.publish_rc = -EEXIST;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 5001, 0, &e), 0);
	a.publish_rc = 0;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 5002, 0, &e), 0);
	ck_assert_int_eq(a.publishes, 5);
	log_back(fd);
	/* no generation's key in the log of all this at --v=5 */
	ck_assert_ptr_nonnull(strstr(tu_read(v.root, "node.log"), "written to a live controller"));
	no_key_in(v.root, "node.log", &k0.current);
	no_key_in(v.root, "node.log", &k1.next);
	no_key_in(v.root, "node.log", &k2.next);
	env_done(&v);
}
END_TEST

/* The schedule rotates the same way: two generations, one secret each. */
START_TEST(test_rotation_interval_two_halves)
{
	struct env v;
	struct fake_api a = {0};
	struct node_dhchap_hooks h = {fa_confirmed, fa_requested, fa_publish, &a};
	struct model_dhchap_file k0, k1, k2;
	struct err e = {0};
	env_dhchap(&v);
	first_keys(&v, &a, &h, 1000, &k0);
	live_ctrl(&v, 1, &k0.current, true);
	mark_unwritten(&v, 1);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1099, 100, &e), 0);
	ck_assert_int_eq(a.publishes, 1);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1100, 100, &e), 0);
	ck_assert_int_eq(a.publishes, 2);
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k1, &e), 0);
	ck_assert(k1.has_next && k1.ctrl_key_due);
	ck_assert_uint_eq(k1.next.generation, 1100);
	ck_assert_str_ne(k1.next.key, k0.current.key);
	ck_assert_str_eq(k1.next.ctrl_key, k0.current.ctrl_key);
	ck_assert_str_eq(k1.rotate_request, ""); /* no request was acted on */
	a.confirmed = 1100;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1101, 100, &e), 0);
	ck_assert(written(&v, 1, "dhchap_secret") && !written(&v, 1, "dhchap_ctrl_secret"));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k2, &e), 0);
	ck_assert(k2.has_next && !k2.ctrl_key_due);
	ck_assert_uint_eq(k2.next.generation, 1101);
	ck_assert_str_eq(k2.next.key, k1.next.key);
	ck_assert_str_ne(k2.next.ctrl_key, k1.next.ctrl_key);
	mark_unwritten(&v, 1);
	a.confirmed = 1101;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1102, 100, &e), 0);
	ck_assert(!written(&v, 1, "dhchap_secret") && written(&v, 1, "dhchap_ctrl_secret"));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k0, &e), 0);
	ck_assert(k0.has_current && !k0.has_next && !k0.ctrl_key_due);
	ck_assert_uint_eq(k0.current.generation, 1101);
	ck_assert_int_eq(a.publishes, 3);
	/* the interval counts from the generation that finished the rotation */
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1200, 100, &e), 0);
	ck_assert_int_eq(a.publishes, 3);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1201, 100, &e), 0);
	ck_assert_int_eq(a.publishes, 4);
	env_done(&v);
}
END_TEST

/* A node plugin restarted between the halves (the key file says the controller secret is due)
 * finishes the rotation with the second half: it neither starts a third generation for the
 * request it already acted on nor changes the host secret again. */
START_TEST(test_rotation_resumes_after_restart)
{
	struct env v;
	struct fake_api a = {0};
	struct node_dhchap_hooks h = {fa_confirmed, fa_requested, fa_publish, &a};
	struct model_dhchap_file k, k2;
	struct model_dhchap_generation g18;
	struct err e = {0};
	/* restarted after the first half became current */
	env_dhchap(&v);
	keys_confirmed(&v, false, &k);
	k.ctrl_key_due = true;
	snprintf(k.rotate_request, sizeof(k.rotate_request), "r1");
	ck_assert_int_eq(model_dhchap_file_write(v.state, &k, &e), 0);
	snprintf(a.request, sizeof(a.request), "r1");
	a.confirmed = 17;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 100, 0, &e), 0);
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k2, &e), 0);
	ck_assert(k2.has_next && !k2.ctrl_key_due);
	ck_assert_uint_eq(k2.next.generation, 100);
	ck_assert_str_eq(k2.next.key, k.current.key);
	ck_assert_str_ne(k2.next.ctrl_key, k.current.ctrl_key);
	ck_assert_str_eq(k2.rotate_request, "r1");
	ck_assert_int_eq(a.publishes, 1);
	a.confirmed = 100;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 101, 0, &e), 0);
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k2, &e), 0);
	ck_assert(k2.has_current && !k2.has_next && !k2.ctrl_key_due);
	ck_assert_int_eq(a.publishes, 1);
	env_done(&v);
	/* restarted while the first half waited for its confirmation: published again (the Secret
	 * exists), confirmed, live controllers get the host secret, then the second half */
	env_dhchap(&v);
	keys_confirmed(&v, false, &k);
	ck_assert_int_eq(node_dhchap_gen_rotate(HOSTNQN, 18, &k.current, false, &g18, &e), 0);
	k.next = g18;
	k.has_next = true;
	k.ctrl_key_due = true;
	snprintf(k.rotate_request, sizeof(k.rotate_request), "r1");
	ck_assert_int_eq(model_dhchap_file_write(v.state, &k, &e), 0);
	live_ctrl(&v, 1, &k.current, true);
	mark_unwritten(&v, 1);
	memset(&a, 0, sizeof(a));
	snprintf(a.request, sizeof(a.request), "r1");
	a.publish_rc = -EEXIST;
	a.confirmed = 18;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 19, 0, &e), 0);
	ck_assert(written(&v, 1, "dhchap_secret") && !written(&v, 1, "dhchap_ctrl_secret"));
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme1/dhchap_secret"), fmt("%s\n", g18.key));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k2, &e), 0);
	ck_assert(k2.has_current && k2.has_next && !k2.ctrl_key_due);
	ck_assert_uint_eq(k2.current.generation, 18);
	ck_assert_uint_eq(k2.next.generation, 19);
	ck_assert_str_eq(k2.next.key, g18.key);
	ck_assert_str_ne(k2.next.ctrl_key, g18.ctrl_key);
	ck_assert_int_eq(a.publishes, 2);
	env_done(&v);
}
END_TEST

/* A `next` that changes both secrets (a key file written before rotations had two halves)
 * becomes a first half at a higher generation; the other half follows. */
START_TEST(test_rotation_splits_a_next_of_both_secrets)
{
	struct env v;
	struct fake_api a = {0};
	struct node_dhchap_hooks h = {fa_confirmed, fa_requested, fa_publish, &a};
	struct model_dhchap_file k, k2;
	struct err e = {0};
	env_dhchap(&v);
	keys_confirmed(&v, true, &k); /* current 17, next 18 with two new secrets */
	a.confirmed = 18;             /* confirmed before the upgrade: now outranked */
	live_ctrl(&v, 1, &k.current, true);
	mark_unwritten(&v, 1);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 5, 0, &e), 0);
	ck_assert(!written(&v, 1, "dhchap_secret") && !written(&v, 1, "dhchap_ctrl_secret"));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k2, &e), 0);
	ck_assert(k2.has_next && k2.ctrl_key_due);
	ck_assert_uint_eq(k2.next.generation, 19);
	ck_assert_str_eq(k2.next.key, k.next.key);
	ck_assert_str_eq(k2.next.ctrl_key, k.current.ctrl_key);
	ck_assert_uint_eq(a.published_gen, 19);
	a.confirmed = 19;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 6, 0, &e), 0);
	ck_assert(written(&v, 1, "dhchap_secret") && !written(&v, 1, "dhchap_ctrl_secret"));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k2, &e), 0);
	ck_assert_uint_eq(k2.current.generation, 19);
	ck_assert(k2.has_next && !k2.ctrl_key_due);
	ck_assert_uint_eq(k2.next.generation, 20);
	env_done(&v);
}
END_TEST

/* node_dhchap_live_rotate writes one attribute per controller and pass: the one secret from and
 * to differ in, where the controller holds from's (and, for the controller secret, already to's
 * host secret); keys that differ in both are refused with nothing written. */
START_TEST(test_live_rotate_one_secret_per_pass)
{
	struct env v;
	struct model_dhchap_generation g, host, ctrl, both;
	struct err e = {0};
	env_dhchap(&v);
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 17, &g, &e), 0);
	ck_assert_int_eq(node_dhchap_gen_rotate(HOSTNQN, 18, &g, false, &host, &e), 0);
	ck_assert_int_eq(node_dhchap_gen_rotate(HOSTNQN, 19, &host, true, &ctrl, &e), 0);
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 20, &both, &e), 0);
	ck_assert_str_eq(host.ctrl_key, g.ctrl_key);
	ck_assert_str_ne(host.key, g.key);
	ck_assert_str_eq(ctrl.key, host.key);
	ck_assert_str_ne(ctrl.ctrl_key, host.ctrl_key);
	live_ctrl(&v, 1, &g, true);
	live_ctrl(&v, 2, &g, false);
	mark_unwritten(&v, 2);
	ck_assert_int_eq(node_dhchap_live_rotate(v.sys, &g, &both, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "differ in both secrets"));
	ck_assert_ptr_null(strstr(e.msg, "DHHC"));
	for (int i = 1; i <= 2; i++)
		ck_assert(!written(&v, i, "dhchap_secret") &&
		          !written(&v, i, "dhchap_ctrl_secret"));
	ck_assert_int_eq(node_dhchap_live_rotate(v.sys, &g, &g, &e), 0);
	/* the host secret: both controllers, their controller secret untouched */
	ck_assert_int_eq(node_dhchap_live_rotate(v.sys, &g, &host, &e), 2);
	for (int i = 1; i <= 2; i++) {
		ck_assert_str_eq(tu_read(v.sys, fmt("class/nvme/nvme%d/dhchap_secret", i)),
		                 fmt("%s\n", host.key));
		ck_assert(!written(&v, i, "dhchap_ctrl_secret"));
	}
	/* the controller secret: the bidirectional controller only, its host secret untouched;
	 * a controller still on the old host secret is left alone */
	live_ctrl(&v, 3, &g, true);
	mark_unwritten(&v, 3);
	ck_assert_int_eq(node_dhchap_live_rotate(v.sys, &host, &ctrl, &e), 1);
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme1/dhchap_ctrl_secret"),
	                 fmt("%s\n", ctrl.ctrl_key));
	ck_assert(!written(&v, 1, "dhchap_secret"));
	for (int i = 2; i <= 3; i++)
		ck_assert(!written(&v, i, "dhchap_secret") &&
		          !written(&v, i, "dhchap_ctrl_secret"));
	env_done(&v);
}
END_TEST

/* New connects between the halves: current first, next on EKEYREJECTED.  In the first half the
 * target may hold the new host secret; in the second it may present the new controller secret
 * (the host refuses it with the old one), and a unidirectional connect needs no fallback. */
START_TEST(test_stage_between_the_halves)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	struct model_dhchap_file k;
	struct err e = {0};
	for (int half = 1; half <= 2; half++) {
		env_dhchap(&v);
		keys_confirmed(&v, false, &k);
		if (half == 2) { /* current: a first half's keys */
			struct model_dhchap_generation first;
			ck_assert_int_eq(
			    node_dhchap_gen_rotate(HOSTNQN, 17, &k.current, false, &first, &e), 0);
			k.current = first;
		}
		ck_assert_int_eq(
		    node_dhchap_gen_rotate(HOSTNQN, 18, &k.current, half == 2, &k.next, &e), 0);
		k.has_next = true;
		k.ctrl_key_due = half == 1;
		ck_assert_int_eq(model_dhchap_file_write(v.state, &k, &e), 0);
		if (half == 1)
			v.k.reject_secret = k.current.key;
		else
			v.k.reject_ctrl_secret = k.current.ctrl_key;
		sreq_init(&s, &v, 0, ctx_bi);
		ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
		ck_assert_int_eq(v.k.connects, 2);
		ck_assert_ptr_nonnull(
		    strstr(v.k.last_connect, fmt(",dhchap_secret=%s", k.next.key)));
		ck_assert_ptr_nonnull(
		    strstr(v.k.last_connect, fmt(",dhchap_ctrl_secret=%s", k.next.ctrl_key)));
		env_done(&v);
	}
	/* the second half, unidirectional: the host secret did not change */
	env_dhchap(&v);
	keys_confirmed(&v, false, &k);
	ck_assert_int_eq(node_dhchap_gen_rotate(HOSTNQN, 18, &k.current, true, &k.next, &e), 0);
	k.has_next = true;
	ck_assert_int_eq(model_dhchap_file_write(v.state, &k, &e), 0);
	v.k.reject_ctrl_secret = k.current.ctrl_key;
	sreq_init(&s, &v, 0, ctx_uni);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(v.k.connects, 1);
	ck_assert_ptr_nonnull(strstr(v.k.last_connect, fmt(",dhchap_secret=%s", k.current.key)));
	env_done(&v);
}
END_TEST

/* ---- publication through the kube store ---------------------------------------------------- */

#define SECRETS_PATH "/api/v1/namespaces/pillar-csi/secrets"

/* The API server's answer to a second create of the same Secret (kube-apiserver 1.32). */
static const char secret_exists[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"secrets \\\"pillar-csi-dhchap-node-a-5\\\" already exists\","
    "\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"pillar-csi-dhchap-node-a-5\","
    "\"kind\":\"secrets\"},\"code\":409}";

static int secret_posts;

static void secret_handler(void *arg, const struct kf_req *rq, struct kf_resp *resp)
{
	(void)arg;
	if (strcmp(rq->method, "POST") || strcmp(rq->path, SECRETS_PATH)) {
		resp->status = 404;
		return;
	}
	if (__atomic_fetch_add(&secret_posts, 1, __ATOMIC_SEQ_CST) == 0) {
		resp->status = 201; /* the created object: what was sent */
		kf_resp_add(resp, rq->body, rq->body_len);
		return;
	}
	resp->status = 409;
	kf_resp_add(resp, secret_exists, strlen(secret_exists));
}

/* The base64 text of member name of data decoded equals want. */
static void data_is(const cJSON *data, const char *name, const char *want)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(data, name);
	unsigned char out[512];
	size_t n = 0;
	ck_assert_msg(cJSON_IsString(v), "data.%s missing", name);
	ck_assert_int_eq(mbedtls_base64_decode(out, sizeof(out) - 1, &n,
	                                       (const unsigned char *)v->valuestring,
	                                       strlen(v->valuestring)),
	                 0);
	out[n] = 0;
	ck_assert_msg(!strcmp((const char *)out, want), "data.%s is not the key sent", name);
}

START_TEST(test_publish_creates_the_secret_through_the_kube_store)
{
	struct kf_certs c;
	struct model_dhchap_file k = {0};
	struct node_dhchap_hooks h;
	struct err e = {0};
	char path[400];
	store *st = NULL;
	kf_certs_make(&c);
	struct kf_server *srv = kf_start(&c, false, secret_handler, NULL);
	snprintf(path, sizeof(path), "%s/kubeconfig", c.dir);
	kf_kubeconfig(srv, &c, "t0ken", path);
	struct store_open_opts o = {.qps = -1, .kubeconfig = path};
	ck_assert_msg(store_kube_open(&o, &st, &e) == 0, "%s", e.msg);
	snprintf(k.node, sizeof(k.node), "node-a");
	snprintf(k.hostnqn, sizeof(k.hostnqn), HOSTNQN);
	k.has_next = true;
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 5, &k.next, &e), 0);
	setenv("POD_NAMESPACE", "pillar-csi", 1);
	node_dhchap_store_hooks(&h, st);

	ck_assert_msg(h.publish(h.ctx, "node-a", &k, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(kf_requests(srv), 1);
	cJSON *sent = cJSON_Parse(kf_request(srv, 0)->body);
	ck_assert_ptr_nonnull(sent);
	const cJSON *md = cJSON_GetObjectItem(sent, "metadata");
	ck_assert_str_eq(cJSON_GetObjectItem(sent, "kind")->valuestring, "Secret");
	ck_assert_str_eq(cJSON_GetObjectItem(sent, "type")->valuestring,
	                 "pillar-csi.bhyoo.com/dhchap");
	ck_assert_str_eq(cJSON_GetObjectItem(md, "name")->valuestring,
	                 "pillar-csi-dhchap-node-a-5");
	ck_assert_str_eq(cJSON_GetObjectItem(md, "namespace")->valuestring, "pillar-csi");
	ck_assert_str_eq(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(md, "labels"), "pillar-csi.bhyoo.com/dhchap")
	        ->valuestring,
	    "host-keys");
	const cJSON *an = cJSON_GetObjectItem(md, "annotations");
	ck_assert_str_eq(cJSON_GetObjectItem(an, "pillar-csi.bhyoo.com/dhchap-node")->valuestring,
	                 "node-a");
	ck_assert_str_eq(
	    cJSON_GetObjectItem(an, "pillar-csi.bhyoo.com/dhchap-generation")->valuestring, "5");
	const cJSON *data = cJSON_GetObjectItem(sent, "data");
	data_is(data, "hostNQN", HOSTNQN);
	data_is(data, "key", k.next.key);
	data_is(data, "ctrlKey", k.next.ctrl_key);
	cJSON_Delete(sent);

	/* an earlier attempt of this node made it: AlreadyExists counts as published */
	ck_assert_int_eq(h.publish(h.ctx, "node-a", &k, &e), -EEXIST);
	ck_assert_uint_eq(kf_requests(srv), 2);
	unsetenv("POD_NAMESPACE");
	model_dhchap_file_wipe(&k);
	store_close(st);
	kf_stop(srv);
	kf_certs_remove(&c);
}
END_TEST

/* With the embedded store (--store=dir:PATH, the directory the controller reads) the Secret is
 * created there, a file of mode 0600, in POD_NAMESPACE or "default" (the controller's default
 * namespace there), and decodes as the controller checks it. */
START_TEST(test_publish_into_the_embedded_store)
{
	struct model_dhchap_file k = {0};
	struct model_dhchap_keys got = {0};
	struct model_secret secret;
	struct node_dhchap_hooks h;
	struct err e = {0};
	struct stat sb;
	char dir[300], path[500];
	store *st = NULL;
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	ck_assert_msg(store_dir_open(dir, false, 0, &st, &e) == 0, "%s", e.msg);
	snprintf(k.node, sizeof(k.node), "node-a");
	snprintf(k.hostnqn, sizeof(k.hostnqn), HOSTNQN);
	k.has_next = true;
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 5, &k.next, &e), 0);
	unsetenv("POD_NAMESPACE");
	node_dhchap_store_hooks(&h, st);
	ck_assert_msg(h.publish(h.ctx, "node-a", &k, &e) == 0, "%s", e.msg);
	snprintf(path, sizeof(path), "%s/secrets/default/pillar-csi-dhchap-node-a-5.json", dir);
	ck_assert_msg(stat(path, &sb) == 0, "%s", path);
	ck_assert_uint_eq(sb.st_mode & 07777, 0600);
	memset(&secret, 0, sizeof(secret));
	ck_assert_msg(model_get(st, &model_secret_kind, "default", "pillar-csi-dhchap-node-a-5",
	                        &secret, &e) == 0,
	              "%s", e.msg);
	ck_assert_msg(model_dhchap_secret_decode(&secret, &got, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(got.key, k.next.key);
	ck_assert_str_eq(got.ctrl_key, k.next.ctrl_key);
	ck_assert_uint_eq(got.generation, 5);
	model_dhchap_keys_wipe(&got);
	model_clear(&model_secret_kind, &secret);
	/* a restart publishes again: it is there */
	ck_assert_int_eq(h.publish(h.ctx, "node-a", &k, &e), -EEXIST);
	/* the pod's namespace when it has one */
	setenv("POD_NAMESPACE", "pillar-csi", 1);
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 6, &k.next, &e), 0);
	ck_assert_msg(h.publish(h.ctx, "node-a", &k, &e) == 0, "%s", e.msg);
	snprintf(path, sizeof(path), "%s/secrets/pillar-csi/pillar-csi-dhchap-node-a-6.json", dir);
	ck_assert_msg(stat(path, &sb) == 0, "%s", path);
	unsetenv("POD_NAMESPACE");
	model_dhchap_file_wipe(&k);
	store_close(st);
	tu_rmtree(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_dhchap");
	TCase *t = tcase_create("keys");
	tcase_add_test(t, test_keys_made_once_0600_and_per_nqn);
	tcase_add_test(t, test_corrupt_key_file_refused);
	suite_add_tcase(s, t);
	t = tcase_create("stage");
	tcase_add_test(t, test_stage_bidirectional_connects_with_both_secrets);
	tcase_add_test(t, test_stage_unidirectional_and_off);
	tcase_add_test(t, test_stage_refused_on_kernel_without_host_auth);
	tcase_add_test(t, test_stage_auth_errnos);
	tcase_add_test(t, test_stage_corrupt_key_file_refused);
	tcase_add_test(t, test_stage_generations_and_enablement);
	tcase_add_test(t, test_rotation_publish_confirm_live);
	tcase_add_test(t, test_rotation_interval_two_halves);
	tcase_add_test(t, test_rotation_resumes_after_restart);
	tcase_add_test(t, test_rotation_splits_a_next_of_both_secrets);
	tcase_add_test(t, test_live_rotate_one_secret_per_pass);
	tcase_add_test(t, test_stage_between_the_halves);
	tcase_add_test(t, test_publish_creates_the_secret_through_the_kube_store);
	tcase_add_test(t, test_publish_into_the_embedded_store);
	suite_add_tcase(s, t);
	return tu_run(s);
}
