/* Unit tests of src/kube without a server: Status decoding of the real API server's recorded
 * error bodies (404/409/410/422/403/401 and non-Status bodies), the token bucket on an injected
 * clock, kubeconfig and in-cluster configuration forms, REST paths and the watch-stream parser
 * on recorded streams (chunks that split events). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/base64.h>

#include "base/json.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/ratelimit.h"
#include "kube/status.h"
#include "kube/watch.h"
#include "testutil.h"

/* The recorded response of a transcript: status and raw body (malloc'd). */
static char *recorded(const char *name, int *status)
{
	char path[300];
	cJSON *t = NULL, *r;
	int64_t v = 0;
	char *b;

	snprintf(path, sizeof(path), "test/unit/kube/%s", name);
	ck_assert_int_eq(json_read_file(path, &t, NULL), 0);
	r = cJSON_GetObjectItem(t, "response");
	ck_assert_int_eq(json_get_int64(r, "status", &v), 0);
	*status = (int)v;
	b = strdup(json_get_str(r, "body_raw"));
	cJSON_Delete(t);
	return b;
}

static int decode(const char *name, struct kube_status *st)
{
	int code;
	char *b = recorded(name, &code);
	int rc = kube_status_decode(st, code, b, strlen(b));
	free(b);
	return rc;
}

START_TEST(test_status_recorded)
{
	struct kube_status st;

	ck_assert_int_eq(decode("02d-pa-get-missing-404.json", &st), -ENOENT);
	ck_assert_int_eq(st.kind, KUBE_NOT_FOUND);
	ck_assert_int_eq(st.code, 404);
	ck_assert_str_eq(st.resource, "pillaragents");
	ck_assert_str_eq(st.group, "pillar-csi.bhyoo.com");

	ck_assert_int_eq(decode("02b-pa-create-again-409.json", &st), -EEXIST);
	ck_assert_int_eq(st.kind, KUBE_ALREADY_EXISTS);
	ck_assert_str_eq(st.name, "storage-1");

	ck_assert_int_eq(decode("05a-pa-update-stale-rv-409.json", &st), -ESTALE);
	ck_assert_int_eq(st.kind, KUBE_CONFLICT);
	ck_assert_str_eq(st.name, "storage-2");

	ck_assert_int_eq(decode("06a-pa-delete-wrong-uid-409.json", &st), -ESTALE);
	ck_assert_str_eq(st.resource, "PillarAgent");

	ck_assert_int_eq(decode("07j-pa-list-old-rv-exact-after-compaction.json", &st), -ERANGE);
	ck_assert_int_eq(st.kind, KUBE_EXPIRED);
	ck_assert_int_eq(st.code, 410);

	ck_assert_int_eq(decode("02e-pa-create-invalid-schema-422.json", &st), -EINVAL);
	ck_assert_int_eq(st.kind, KUBE_INVALID);
	ck_assert_uint_eq(st.n_causes, 4);
	ck_assert_str_eq(st.causes[0].reason, "FieldValueNotSupported");
	ck_assert_str_eq(st.causes[0].field, "spec.nodeRef.addressType");
	ck_assert_str_eq(st.causes[2].field, "spec.nodeRef.port");
	ck_assert_str_eq(st.causes[3].field, "<nil>"); /* \u003cnil\u003e decoded */
	ck_assert_str_eq(st.resource, "PillarAgent");

	ck_assert_int_eq(decode("05j-pa-json-patch-test-fails-422.json", &st), -EINVAL);
	ck_assert_uint_eq(st.n_causes, 0);

	ck_assert_int_eq(decode("11b-sa-token-list-pa-403.json", &st), -EACCES);
	ck_assert_int_eq(st.kind, KUBE_FORBIDDEN);
	ck_assert_ptr_nonnull(strstr(st.message, "cannot list resource"));

	ck_assert_int_eq(decode("11j-invalid-token-401.json", &st), -EPERM);
	ck_assert_int_eq(st.kind, KUBE_UNAUTHORIZED);
	ck_assert_str_eq(st.message, "Unauthorized");
}
END_TEST

START_TEST(test_status_not_a_status)
{
	struct kube_status st;
	const char *html = "<html>bad gateway</html>\nmore";
	const char *other =
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"SomethingNew\","
	    "\"code\":409}";

	ck_assert_int_eq(kube_status_decode(&st, 502, html, strlen(html)), -EIO);
	ck_assert_int_eq(st.kind, KUBE_INTERNAL_ERROR);
	ck_assert_str_eq(st.message, "<html>bad gateway</html>");
	ck_assert_int_eq(kube_status_decode(&st, 404, "{\"trunc", 7), -ENOENT);
	ck_assert_str_eq(st.message, "{\"trunc");
	ck_assert_int_eq(kube_status_decode(&st, 503, NULL, 0), -EAGAIN);
	ck_assert_str_eq(st.message, "HTTP status 503");
	/* an unknown reason keeps the meaning of its code, and its text */
	ck_assert_int_eq(kube_status_decode(&st, 409, other, strlen(other)), -ESTALE);
	ck_assert_str_eq(st.reason, "SomethingNew");
	ck_assert_str_eq(kube_reason_name(KUBE_EXPIRED), "Expired");
}
END_TEST

START_TEST(test_ratelimit_bucket)
{
	struct kube_ratelimit rl;
	uint64_t t = 1000000;

	kube_ratelimit_init(&rl, KUBE_DEFAULT_QPS, KUBE_DEFAULT_BURST);
	for (int i = 0; i < 10; i++)
		ck_assert_uint_eq(kube_ratelimit_reserve(&rl, t), 0); /* the burst */
	ck_assert_uint_eq(kube_ratelimit_reserve(&rl, t), 200000);    /* 1/5 s */
	ck_assert_uint_eq(kube_ratelimit_reserve(&rl, t), 400000);    /* queued behind it */
	t += 400000;                                                  /* both have gone now */
	ck_assert_uint_eq(kube_ratelimit_reserve(&rl, t), 200000);
	t += 10000000; /* idle: refills to the burst, never beyond */
	for (int i = 0; i < 10; i++)
		ck_assert_uint_eq(kube_ratelimit_reserve(&rl, t), 0);
	ck_assert_uint_eq(kube_ratelimit_reserve(&rl, t), 200000);

	kube_ratelimit_init(&rl, 0.5, 0); /* burst 0 counts as 1 */
	ck_assert_uint_eq(kube_ratelimit_reserve(&rl, 0), 0);
	ck_assert_uint_eq(kube_ratelimit_reserve(&rl, 0), 2000000);

	kube_ratelimit_init(&rl, -1, 1); /* unlimited */
	for (int i = 0; i < 1000; i++)
		ck_assert_uint_eq(kube_ratelimit_reserve(&rl, 0), 0);
}
END_TEST

static char *b64(const char *s)
{
	size_t n = 0;
	char *out;

	mbedtls_base64_encode(NULL, 0, &n, (const unsigned char *)s, strlen(s));
	out = malloc(n + 1);
	ck_assert_int_eq(mbedtls_base64_encode((unsigned char *)out, n + 1, &n,
	                                       (const unsigned char *)s, strlen(s)),
	                 0);
	return out;
}

static struct kube_config *yaml_ok(const char *y, const char *dir, const char *ctx)
{
	struct kube_config *c = NULL;
	struct err e = {0};

	ck_assert_msg(kube_config_from_yaml(&c, y, strlen(y), dir, ctx, &e) == 0, "%s", e.msg);
	return c;
}

static int yaml_fail(const char *y, const char *ctx, struct err *e)
{
	struct kube_config *c = NULL;
	int rc = kube_config_from_yaml(&c, y, strlen(y), "/nonexistent", ctx, e);
	ck_assert_ptr_null(c);
	return rc;
}

START_TEST(test_kubeconfig_forms)
{
	const char *d = tu_mkdtemp();
	char *ca64 = b64("CA PEM\n"), *cert64 = b64("CERT PEM\n"), *key64 = b64("KEY PEM\n");
	char y[4096];
	struct kube_config *c;
	struct err e = {0};

	/* data forms, token, current context, namespace */
	snprintf(y, sizeof(y),
	         "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
	         "clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443\n"
	         "    certificate-authority-data: %s\n"
	         "- name: c2\n  cluster:\n    server: https://[fd00::1]\n"
	         "    certificate-authority: ca.crt\n    tls-server-name: api.example\n"
	         "contexts:\n- name: prod\n  context: {cluster: c1, user: u1, namespace: pillar}\n"
	         "- name: files\n  context: {cluster: c2, user: u2}\n"
	         "- name: tf\n  context: {cluster: c2, user: u3}\n"
	         "users:\n- name: u1\n  user:\n    client-certificate-data: %s\n"
	         "    client-key-data: %s\n    token: abc.def\n"
	         "- name: u2\n  user:\n    client-certificate: %s/client.crt\n"
	         "    client-key: client.key\n"
	         "- name: u3\n  user:\n    tokenFile: tok\n",
	         ca64, cert64, key64, d);
	c = yaml_ok(y, d, NULL);
	ck_assert_str_eq(c->target, "10.0.0.1:6443");
	ck_assert_str_eq(c->ca_pem, "CA PEM\n");
	ck_assert_str_eq(c->cert_pem, "CERT PEM\n");
	ck_assert_str_eq(c->key_pem, "KEY PEM\n");
	ck_assert_str_eq(c->token, "abc.def");
	ck_assert_ptr_null(c->token_file);
	ck_assert_str_eq(c->ns, "pillar");
	kube_config_free(c);

	/* file forms (absolute and relative to the kubeconfig), IPv6, default port, SNI */
	tu_write(d, "ca.crt", "CA FILE\n");
	tu_write(d, "client.crt", "CERT FILE\n");
	tu_write(d, "client.key", "KEY FILE\n");
	c = yaml_ok(y, d, "files");
	ck_assert_str_eq(c->target, "[fd00::1]:443");
	ck_assert_str_eq(c->server_name, "api.example");
	ck_assert_str_eq(c->ca_pem, "CA FILE\n");
	ck_assert_str_eq(c->cert_pem, "CERT FILE\n");
	ck_assert_str_eq(c->key_pem, "KEY FILE\n");
	ck_assert_ptr_null(c->token);
	ck_assert_str_eq(c->ns, "");
	kube_config_free(c);

	c = yaml_ok(y, d, "tf");
	ck_assert_ptr_null(c->cert_pem);
	ck_assert_ptr_nonnull(strstr(c->token_file, "/tok"));
	ck_assert_int_eq(c->token_file[0], '/');
	kube_config_free(c);

	/* a kubeconfig file names its directory for relative paths */
	tu_write(d, "config", y);
	{
		char path[600];
		snprintf(path, sizeof(path), "%s/config", d);
		ck_assert_int_eq(kube_config_from_file(&c, path, "files", &e), 0);
		ck_assert_str_eq(c->ca_pem, "CA FILE\n");
		ck_assert_ptr_nonnull(strstr(c->source, "context files"));
		kube_config_free(c);
	}

	ck_assert_int_eq(yaml_fail(y, "nope", &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "no context named \"nope\""));
	tu_rmtree(d);
	free(ca64);
	free(cert64);
	free(key64);
}
END_TEST

START_TEST(test_kubeconfig_refused)
{
	struct err e = {0};
	const char *head =
	    "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n";
	char y[2048];

	snprintf(y, sizeof(y), "%sclusters:\n- name: c\n  cluster: {server: http://1.2.3.4}\n",
	         head);
	ck_assert_int_eq(yaml_fail(y, NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "only https://"));
	snprintf(y, sizeof(y), "%sclusters:\n- name: c\n  cluster: {server: 'https://h/prefix'}\n",
	         head);
	ck_assert_int_eq(yaml_fail(y, NULL, &e), -EINVAL);
	snprintf(y, sizeof(y),
	         "%sclusters:\n- name: c\n  cluster: {server: 'https://h:1', "
	         "certificate-authority-data: Q0E=, insecure-skip-tls-verify: 'true'}\n",
	         head);
	ck_assert_int_eq(yaml_fail(y, NULL, &e), -ENOTSUP);
	/* a plain `true` (base/yaml.h keeps it as raw text) reads the same as 'true' */
	snprintf(y, sizeof(y),
	         "%sclusters:\n- name: c\n  cluster: {server: 'https://h:1', "
	         "certificate-authority-data: Q0E=, insecure-skip-tls-verify: true}\n",
	         head);
	ck_assert_int_eq(yaml_fail(y, NULL, &e), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(e.msg, "insecure-skip-tls-verify"));
	snprintf(
	    y, sizeof(y),
	    "%sclusters:\n- name: c\n  cluster: {server: 'https://h:1', "
	    "certificate-authority-data: Q0E=}\nusers:\n- name: u\n  user:\n    exec: {command: "
	    "aws}\n",
	    head);
	ck_assert_int_eq(yaml_fail(y, NULL, &e), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(e.msg, "\"exec\""));
	snprintf(y, sizeof(y),
	         "%sclusters:\n- name: c\n  cluster: {server: 'https://h:1', "
	         "certificate-authority-data: Q0E=}\nusers:\n- name: u\n  user: "
	         "{client-certificate-data: Q0E=}\n",
	         head);
	ck_assert_int_eq(yaml_fail(y, NULL, &e), -EINVAL);
	ck_assert_int_eq(yaml_fail("clusters: [", NULL, &e), -EINVAL);
	ck_assert_int_eq(yaml_fail("- a\n- b\n", NULL, &e), -EINVAL);
	ck_assert_int_eq(yaml_fail("kind: Config\n", NULL, &e), -ENOENT);
	snprintf(y, sizeof(y),
	         "%sclusters:\n- name: c\n  cluster: {server: 'https://h:1', "
	         "certificate-authority: /nonexistent/ca.crt}\n",
	         head);
	ck_assert_int_eq(yaml_fail(y, NULL, &e), -ENOENT);
}
END_TEST

START_TEST(test_in_cluster)
{
	const char *d = tu_mkdtemp();
	struct kube_config *c = NULL;
	struct err e = {0};

	unsetenv("KUBERNETES_SERVICE_HOST");
	ck_assert_int_eq(kube_config_in_cluster(&c, d, &e), -ENOENT);
	ck_assert_int_eq(kube_config_load(&c, NULL, &e), -ENOENT); /* no --kubeconfig, no cluster */
	ck_assert_ptr_nonnull(strstr(e.msg, "--kubeconfig"));
	ck_assert_int_eq(kube_config_load(&c, "/nonexistent/kubeconfig", &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/kubeconfig"));
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	ck_assert_int_eq(kube_config_in_cluster(&c, d, &e), -ENOENT); /* no ca.crt */
	tu_write(d, "ca.crt", "CA\n");
	tu_write(d, "namespace", "pillar-system\n");
	ck_assert_int_eq(kube_config_in_cluster(&c, d, &e), 0);
	ck_assert_str_eq(c->target, "[fd00:10::1]:443");
	ck_assert_str_eq(c->ns, "pillar-system");
	ck_assert_str_eq(c->ca_pem, "CA\n");
	ck_assert_ptr_null(c->token);
	ck_assert_ptr_nonnull(strstr(c->token_file, "/token"));
	kube_config_free(c);
	setenv("KUBERNETES_SERVICE_PORT", "44x", 1);
	ck_assert_int_eq(kube_config_in_cluster(&c, d, &e), -EINVAL);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	tu_rmtree(d);
}
END_TEST

START_TEST(test_paths)
{
	const struct kube_resource pa = {"pillar-csi.bhyoo.com", "v1alpha1", "pillaragents", false};
	const struct kube_resource ev = {"", "v1", "events", true};
	char p[256];

	ck_assert_int_eq(kube_path(p, sizeof(p), &pa, NULL, "storage-1", "status"), 0);
	ck_assert_str_eq(p, "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents/storage-1/status");
	ck_assert_int_eq(kube_path(p, sizeof(p), &ev, "default", NULL, NULL), 0);
	ck_assert_str_eq(p, "/api/v1/namespaces/default/events");
	ck_assert_int_eq(kube_path(p, sizeof(p), &ev, NULL, NULL, NULL), 0); /* all namespaces */
	ck_assert_str_eq(p, "/api/v1/events");
	ck_assert_int_eq(kube_path(p, sizeof(p), &ev, NULL, "x", NULL), -EINVAL);
	ck_assert_int_eq(kube_path(p, sizeof(p), &pa, "default", "x", NULL), -EINVAL);
	ck_assert_int_eq(kube_path(p, sizeof(p), &pa, NULL, "../x", NULL), -EINVAL);
	ck_assert_int_eq(kube_path(p, sizeof(p), &pa, NULL, "a/b", NULL), -EINVAL);
	ck_assert_int_eq(kube_path(p, sizeof(p), &pa, NULL, "A", NULL), -EINVAL);
	ck_assert_int_eq(kube_path(p, 20, &pa, NULL, "x", NULL), -ENAMETOOLONG);
}
END_TEST

/* Feeds a recorded watch stream chunk by chunk (or byte by byte) and collects the events. */
static size_t parse_stream(const char *name, bool bytewise, enum kube_event_type *types,
                           char rvs[][16], size_t max)
{
	char path[300];
	cJSON *t = NULL, *c;
	struct kube_watch_parser p;
	size_t n = 0;

	snprintf(path, sizeof(path), "test/unit/kube/%s", name);
	ck_assert_int_eq(json_read_file(path, &t, NULL), 0);
	kube_watch_parser_init(&p, 0);
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(t, "response"), "chunks"))
	{
		const char *d = json_get_str(c, "data");
		size_t len = strlen(d), step = bytewise ? 1 : len;
		for (size_t off = 0; off < len; off += step) {
			enum kube_event_type ty;
			cJSON *o;
			ck_assert_int_eq(kube_watch_parser_push(&p, d + off, step), 0);
			while (kube_watch_parser_next(&p, &ty, &o, NULL) == 1) {
				ck_assert_uint_lt(n, max);
				types[n] = ty;
				snprintf(rvs[n++], 16, "%s",
				         json_get_str(cJSON_GetObjectItem(o, "metadata"),
				                      "resourceVersion"));
				cJSON_Delete(o);
			}
		}
	}
	ck_assert_uint_eq(p.len, 0);
	kube_watch_parser_free(&p);
	cJSON_Delete(t);
	return n;
}

START_TEST(test_watch_parser)
{
	enum kube_event_type ty[16];
	char rv[16][16];
	static const enum kube_event_type want[] = {KUBE_ADDED,   KUBE_MODIFIED, KUBE_MODIFIED,
	                                            KUBE_DELETED, KUBE_BOOKMARK, KUBE_BOOKMARK};
	struct kube_watch_parser p;
	cJSON *o = NULL;
	struct err e = {0};

	ck_assert_uint_eq(parse_stream("07a-pa-watch-bookmarks.json", false, ty, rv, 16), 6);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(ty[i], want[i]);
	ck_assert_str_eq(rv[0], "301");
	ck_assert_str_eq(rv[5], "306");
	/* 07b: 2048-byte chunks that split events; byte by byte gives the same */
	ck_assert_uint_eq(parse_stream("07b-pa-watch-rv0.json", false, ty, rv, 16), 4);
	ck_assert_uint_eq(parse_stream("07b-pa-watch-rv0.json", true, ty, rv, 16), 4);
	ck_assert_int_eq(ty[3], KUBE_ADDED);
	ck_assert_uint_eq(parse_stream("07h-pa-watch-too-old-rv-410.json", false, ty, rv, 16), 1);
	ck_assert_int_eq(ty[0], KUBE_ERROR);

	/* garbage lines are skipped one at a time; an endless line is refused */
	kube_watch_parser_init(&p, 64);
#define PUSH(str) kube_watch_parser_push(&p, str, strlen(str))
	ck_assert_int_eq(PUSH("nope\n\n{\"type\":\"X\",\"object\":{}}\n"), 0);
	ck_assert_int_eq(kube_watch_parser_next(&p, &ty[0], &o, &e), -EBADMSG);
	ck_assert_int_eq(kube_watch_parser_next(&p, &ty[0], &o, &e), -EBADMSG);
	ck_assert_int_eq(kube_watch_parser_next(&p, &ty[0], &o, &e), 0);
	ck_assert_int_eq(PUSH("{\"type\":\"ADDED\",\"object\":{}}"), 0);
	ck_assert_int_eq(kube_watch_parser_next(&p, &ty[0], &o, &e), 0);
	ck_assert_int_eq(PUSH("\n"), 0);
	ck_assert_int_eq(kube_watch_parser_next(&p, &ty[0], &o, &e), 1);
	cJSON_Delete(o);
	char big[100];
	memset(big, 'x', sizeof(big));
	ck_assert_int_eq(kube_watch_parser_push(&p, big, sizeof(big)), -EMSGSIZE);
	kube_watch_parser_free(&p);
#undef PUSH
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kube");
	TCase *t = tcase_create("core");

	tcase_add_test(t, test_status_recorded);
	tcase_add_test(t, test_status_not_a_status);
	tcase_add_test(t, test_ratelimit_bucket);
	tcase_add_test(t, test_kubeconfig_forms);
	tcase_add_test(t, test_kubeconfig_refused);
	tcase_add_test(t, test_in_cluster);
	tcase_add_test(t, test_paths);
	tcase_add_test(t, test_watch_parser);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
