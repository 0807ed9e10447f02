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
#include "node_dhchap_fixture.h"
#include "store/store.h"

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
	tcase_add_test(t, test_publish_creates_the_secret_through_the_kube_store);
	tcase_add_test(t, test_publish_into_the_embedded_store);
	suite_add_tcase(s, t);
	return tu_run(s);
}
