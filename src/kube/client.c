#include "kube/client.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/file.h"
#include "base/json.h"
#include "base/time.h"
#include "buildinfo.h"
#include "h2/client.h"
#include "h2/tls.h"
#include "kube/client_int.h"
#include "kube/codec.h"
#include "kube/ratelimit.h"
#include "metrics/metrics.h"

#define TOKEN_MAX (64u << 10)

#if defined(__x86_64__)
#define KUBE_ARCH "amd64"
#elif defined(__aarch64__)
#define KUBE_ARCH "arm64"
#else
#define KUBE_ARCH "unknown"
#endif

struct kube_client {
	struct h2_tls_cfg *tls;
	struct h2_client *h2;
	char ua[256];
	char ns[254];
	int64_t timeout_ms;
	struct kube_client_opts o;
	pthread_mutex_t mu; /* limiters and token */
	struct kube_ratelimit rl[KUBE_BUDGETS];
	char *token;      /* current bearer token, NULL: none */
	char *token_file; /* followed, NULL: none */
	struct stat token_st;
	bool token_read;
	char host[300]; /* the `host` label of the rest_client_* families */
};

/* client-go's request metrics (k8s.io/client-go/tools/metrics, registered by component-base):
 * the same names, labels and buckets.  Label sets: the verbs and codes this binary sees, for
 * one API server. */
static const char *const requests_labels[] = {"code", "method", "host", NULL};
static const char *const verb_labels[] = {"verb", "host", NULL};
static const double latency_buckets[] = {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, -1};
static struct metrics_family requests_total =
    METRICS_FAMILY("rest_client_requests_total",
                   "Number of HTTP requests, partitioned by status code, method, and host.",
                   METRICS_COUNTER, requests_labels, NULL, 128);
static struct metrics_family request_seconds =
    METRICS_FAMILY("rest_client_request_duration_seconds",
                   "Request latency in seconds. Broken down by verb, and host.", METRICS_HISTOGRAM,
                   verb_labels, latency_buckets, 32);
static struct metrics_family limiter_seconds =
    METRICS_FAMILY("rest_client_rate_limiter_duration_seconds",
                   "Client side rate limiter latency in seconds. Broken down by verb, and host.",
                   METRICS_HISTOGRAM, verb_labels, latency_buckets, 32);

void kube_metrics_register(void)
{
	metrics_register(&requests_total);
	metrics_register(&request_seconds);
	metrics_register(&limiter_seconds);
}

void kube_client_opts_init(struct kube_client_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->qps = KUBE_DEFAULT_QPS;
	o->burst = KUBE_DEFAULT_BURST;
	o->timeout_ms = 30000;
}

/* The default clock of kube_client_opts (base/time.h). */
static uint64_t mono_us(void *arg)
{
	(void)arg;
	return time_mono_us();
}

static void sleep_us(void *arg, uint64_t us)
{
	(void)arg;
	time_sleep_us(us);
}

int kube_client_new(struct kube_client **out, const struct kube_config *cfg,
                    const struct kube_client_opts *o, struct err *e)
{
	struct kube_client *kc;
	struct h2_client_opts ho = {0};
	int rc;

	if (!o || !o->component || !*o->component)
		return err_set(e, -EINVAL, "Kubernetes client: a component name is required");
	kc = calloc(1, sizeof(*kc));
	if (!kc)
		return err_set(e, -ENOMEM, "out of memory");
	kc->o = *o;
	if (!kc->o.now_us)
		kc->o.now_us = mono_us;
	if (!kc->o.sleep_us)
		kc->o.sleep_us = sleep_us;
	kc->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
	snprintf(kc->ua, sizeof(kc->ua), "%s/%s (linux/%s) pillar-csi/%s", o->component,
	         o->version ? o->version : "v" PILLAR_VERSION, KUBE_ARCH, PILLAR_GIT_COMMIT);
	snprintf(kc->ns, sizeof(kc->ns), "%s", cfg->ns);
	snprintf(kc->host, sizeof(kc->host), "%s", cfg->target);
	kube_metrics_register();
	for (int b = 0; b < KUBE_BUDGETS; b++)
		kube_ratelimit_init(&kc->rl[b], o->qps, o->burst);
	pthread_mutex_init(&kc->mu, NULL);
	rc = h2_tls_client_cfg_new_pem(&kc->tls, cfg->ca_pem, cfg->cert_pem, cfg->key_pem, e);
	if (rc == 0 && cfg->token && !(kc->token = strdup(cfg->token)))
		rc = err_set(e, -ENOMEM, "out of memory");
	if (rc == 0 && cfg->token_file && !(kc->token_file = strdup(cfg->token_file)))
		rc = err_set(e, -ENOMEM, "out of memory");
	ho.tls = kc->tls;
	ho.server_name = cfg->server_name[0] ? cfg->server_name : NULL;
	ho.loop = o->loop;
	if (rc == 0)
		rc = h2_client_new(&kc->h2, cfg->target, &ho, e);
	if (rc < 0) {
		err_prefix(e, "Kubernetes API %s", cfg->server);
		kube_client_free(kc);
		return rc;
	}
	*out = kc;
	return 0;
}

void kube_client_free(struct kube_client *kc)
{
	if (!kc)
		return;
	h2_client_free(kc->h2);
	h2_tls_cfg_free(kc->tls);
	pthread_mutex_destroy(&kc->mu);
	free(kc->token);
	free(kc->token_file);
	free(kc);
}

const char *kube_client_user_agent(const struct kube_client *kc)
{
	return kc->ua;
}

const char *kube_client_namespace(const struct kube_client *kc)
{
	return kc->ns;
}

int64_t kube_client_timeout_ms(const struct kube_client *kc)
{
	return kc->timeout_ms;
}

unsigned kube_client_connections(const struct kube_client *kc)
{
	return h2_client_connections(kc->h2);
}

/* Under kc->mu: re-reads the token file when it changed.  0, or a negative errno when there is
 * no token at all (a failed re-read keeps the previous one). */
static int token_refresh(struct kube_client *kc, struct kube_status *st)
{
	struct stat s;
	char *t = NULL;
	size_t len;
	struct err e = {0};

	if (!kc->token_file)
		return 0;
	if (stat(kc->token_file, &s) == 0 && kc->token_read && s.st_ino == kc->token_st.st_ino &&
	    s.st_dev == kc->token_st.st_dev && s.st_size == kc->token_st.st_size &&
	    s.st_mtim.tv_sec == kc->token_st.st_mtim.tv_sec &&
	    s.st_mtim.tv_nsec == kc->token_st.st_mtim.tv_nsec)
		return 0;
	if (file_read_all(kc->token_file, TOKEN_MAX, &t, &len, &e) == 0) {
		while (len && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' '))
			t[--len] = '\0';
		if (len) {
			free(kc->token);
			kc->token = t;
			kc->token_st = s;
			kc->token_read = true;
			return 0;
		}
		free(t);
		err_set(&e, -EINVAL, "%s is empty", kc->token_file);
	}
	if (kc->token)
		return 0;
	kube_status_local(st, KUBE_UNAUTHORIZED, "bearer token: %s", e.msg);
	return e.code ? e.code : -EPERM;
}

static int stream_start(struct kube_client *kc, enum kube_budget budget, const char *method,
                        const char *path, const char *content_type, const char *body, size_t len,
                        struct h2_stream **out, struct kube_status *st)
{
	struct h2_header h[5];
	struct h2_request rq = {
	    .method = method, .path = path, .headers = h, .body = body, .body_len = len};
	char auth[TOKEN_MAX + 16];
	struct err e = {0};
	uint64_t wait;
	bool has_auth;
	int rc;

	pthread_mutex_lock(&kc->mu);
	wait = kube_ratelimit_reserve(&kc->rl[budget], kc->o.now_us(kc->o.clock_arg));
	rc = token_refresh(kc, st);
	has_auth = rc == 0 && kc->token;
	if (has_auth)
		snprintf(auth, sizeof(auth), "Bearer %s", kc->token);
	pthread_mutex_unlock(&kc->mu);
	if (rc < 0)
		return rc;
	if (wait)
		kc->o.sleep_us(kc->o.clock_arg, wait);
	metrics_observe(&limiter_seconds, (const char *[]){method, kc->host}, (double)wait / 1e6);
	h[rq.n_headers++] = (struct h2_header){"accept", "application/json"};
	h[rq.n_headers++] = (struct h2_header){"user-agent", kc->ua};
	if (has_auth)
		h[rq.n_headers++] = (struct h2_header){"authorization", auth};
	if (content_type)
		h[rq.n_headers++] = (struct h2_header){"content-type", content_type};
	rc = h2_client_open(kc->h2, &rq, out, &e);
	if (rc < 0)
		kube_status_local(st, KUBE_SERVICE_UNAVAILABLE, "%s %s: %s", method, path, e.msg);
	return rc;
}

int kube_stream_head(struct h2_stream *s, int64_t timeout_ms, const char *method, const char *path,
                     struct kube_status *st)
{
	struct err e = {0};
	int rc = h2_stream_head(s, timeout_ms, &e);
	if (rc < 0)
		kube_status_local(st, rc == -ETIMEDOUT ? KUBE_TIMEOUT : KUBE_SERVICE_UNAVAILABLE,
		                  "%s %s: %s", method, path, e.msg);
	return rc;
}

int kube_stream_start(struct kube_client *kc, const char *method, const char *path,
                      const char *content_type, const char *body, size_t len,
                      struct h2_stream **out, struct kube_status *st)
{
	return stream_start(kc, KUBE_BUDGET_OBJECTS, method, path, content_type, body, len, out,
	                    st);
}

int kube_stream_open(struct kube_client *kc, enum kube_budget budget, const char *method,
                     const char *path, const char *content_type, const char *body, size_t len,
                     struct h2_stream **out, int *http_status, struct kube_status *st)
{
	int rc = stream_start(kc, budget, method, path, content_type, body, len, out, st);
	if (rc == 0 && (rc = kube_stream_head(*out, kc->timeout_ms, method, path, st)) < 0) {
		h2_stream_free(*out);
		*out = NULL;
	}
	if (rc < 0)
		return rc;
	*http_status = rc;
	return 0;
}

/* Seconds a 429 or 5xx answer asks to wait before a retry (its Retry-After header), or -1. */
static int retry_after(struct h2_stream *s, int code)
{
	const char *h = h2_stream_header(s, "retry-after");
	char *end;
	long v;

	if ((code != 429 && code < 500) || !h)
		return -1;
	v = strtol(h, &end, 10);
	return end != h && !*end && v >= 0 && v <= KUBE_RETRY_AFTER_MAX ? (int)v : -1;
}

int kube_request_stream(struct kube_client *kc, enum kube_budget budget, const char *method,
                        const char *path, const char *content_type, const char *body, size_t len,
                        struct h2_stream **out, uint64_t *t0_ns, struct kube_status *st)
{
	kube_status_clear(st);
	for (int attempt = 0;; attempt++) {
		struct h2_stream *s;
		struct err e = {0};
		char code_text[16], *b = NULL;
		size_t n = 0;
		int code = 0, rc;

		*t0_ns = time_mono_ns();
		rc = kube_stream_open(kc, budget, method, path, content_type, body, len, &s, &code,
		                      st);
		snprintf(code_text, sizeof(code_text), "%d", code);
		metrics_inc(&requests_total,
		            (const char *[]){rc < 0 ? "<error>" : code_text, method, kc->host}, 1);
		if (rc < 0)
			return rc;
		if (code >= 200 && code < 300) {
			*out = s;
			return 0;
		}
		int wait_s = retry_after(s, code);
		if (wait_s >= 0 && attempt < KUBE_RETRIES) {
			h2_stream_free(s);
			kube_request_observe(kc, method, *t0_ns);
			kc->o.sleep_us(kc->o.clock_arg, (uint64_t)wait_s * 1000000u);
			continue;
		}
		rc = h2_stream_read_all(s, &b, &n, kc->timeout_ms, &e);
		h2_stream_free(s);
		kube_request_observe(kc, method, *t0_ns);
		if (rc < 0) {
			kube_status_local(
			    st, rc == -ETIMEDOUT ? KUBE_TIMEOUT : KUBE_SERVICE_UNAVAILABLE,
			    "%s %s: reading the response: %s", method, path, e.msg);
			return rc;
		}
		rc = kube_status_decode(st, code, b, n);
		free(b);
		return rc ? rc : -EIO;
	}
}

void kube_request_observe(struct kube_client *kc, const char *method, uint64_t t0_ns)
{
	metrics_observe(&request_seconds, (const char *[]){method, kc->host},
	                (double)(time_mono_ns() - t0_ns) / 1e9);
}

int kube_request(struct kube_client *kc, const char *method, const char *path,
                 const char *content_type, const char *body, size_t len, char **resp,
                 size_t *resp_len, struct kube_status *st)
{
	return kube_request_on(kc, KUBE_BUDGET_OBJECTS, method, path, content_type, body, len, resp,
	                       resp_len, st);
}

int kube_request_on(struct kube_client *kc, enum kube_budget budget, const char *method,
                    const char *path, const char *content_type, const char *body, size_t len,
                    char **resp, size_t *resp_len, struct kube_status *st)
{
	struct h2_stream *s;
	struct err e = {0};
	uint64_t t0;
	char *b = NULL;
	size_t n = 0;
	int rc =
	    kube_request_stream(kc, budget, method, path, content_type, body, len, &s, &t0, st);

	if (rc < 0)
		return rc;
	rc = h2_stream_read_all(s, &b, &n, kc->timeout_ms, &e);
	h2_stream_free(s);
	kube_request_observe(kc, method, t0);
	if (rc < 0) {
		kube_status_local(st, rc == -ETIMEDOUT ? KUBE_TIMEOUT : KUBE_SERVICE_UNAVAILABLE,
		                  "%s %s: reading the response: %s", method, path, e.msg);
		return rc;
	}
	if (resp) {
		*resp = b;
		if (resp_len)
			*resp_len = n;
	} else {
		free(b);
	}
	return 0;
}

/* ---- paths ------------------------------------------------------------------------------- */

/* A DNS-subdomain-like segment: lower-case alphanumerics, '-' and '.', at most 253. */
static bool segment_ok(const char *s)
{
	size_t n = 0;

	if (!s || !*s)
		return false;
	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '-' ||
		      s[n] == '.'))
			return false;
	return n <= 253 && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int kube_path(char *buf, size_t size, const struct kube_resource *r, const char *ns,
              const char *name, const char *sub)
{
	int n;

	if (!segment_ok(r->version) || !segment_ok(r->plural) ||
	    (r->group && *r->group && !segment_ok(r->group)))
		return -EINVAL;
	if ((r->namespaced && ns && !segment_ok(ns)) || (!r->namespaced && ns && *ns))
		return -EINVAL;
	if ((name && !segment_ok(name)) || (sub && !segment_ok(sub)) || (sub && !name))
		return -EINVAL;
	if (r->namespaced && name && (!ns || !*ns))
		return -EINVAL;
	if (r->group && *r->group)
		n = snprintf(buf, size, "/apis/%s/%s", r->group, r->version);
	else
		n = snprintf(buf, size, "/api/%s", r->version);
	if (n > 0 && (size_t)n < size && r->namespaced && ns && *ns)
		n += snprintf(buf + n, size - (size_t)n, "/namespaces/%s", ns);
	if (n > 0 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, "/%s", r->plural);
	if (n > 0 && (size_t)n < size && name)
		n += snprintf(buf + n, size - (size_t)n, "/%s", name);
	if (n > 0 && (size_t)n < size && sub)
		n += snprintf(buf + n, size - (size_t)n, "/%s", sub);
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

int kube_query_add(char *buf, size_t size, const char *key, const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(buf);

	if (n + strlen(key) + 2 >= size)
		return -ENAMETOOLONG;
	n += (size_t)snprintf(buf + n, size - n, "%s%s=", strchr(buf, '?') ? "&" : "?", key);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		             (*p >= '0' && *p <= '9') || strchr("-._~", *p);
		if (n + 4 >= size)
			return -ENAMETOOLONG;
		if (plain) {
			buf[n++] = (char)*p;
		} else {
			buf[n++] = '%';
			buf[n++] = hex[*p >> 4];
			buf[n++] = hex[*p & 15];
		}
	}
	buf[n] = '\0';
	return 0;
}

int kube_list_path(char *buf, size_t size, const struct kube_resource *r, const char *ns,
                   const struct kube_list_opts *o)
{
	char lim[24];
	int rc = kube_path(buf, size, r, ns, NULL, NULL);

	if (rc < 0 || !o)
		return rc;
	if (o->label_selector)
		rc = kube_query_add(buf, size, "labelSelector", o->label_selector);
	if (rc == 0 && o->field_selector)
		rc = kube_query_add(buf, size, "fieldSelector", o->field_selector);
	if (rc == 0 && o->resource_version)
		rc = kube_query_add(buf, size, "resourceVersion", o->resource_version);
	if (rc == 0 && o->resource_version_match)
		rc = kube_query_add(buf, size, "resourceVersionMatch", o->resource_version_match);
	if (rc == 0 && o->limit > 0) {
		snprintf(lim, sizeof(lim), "%lld", (long long)o->limit);
		rc = kube_query_add(buf, size, "limit", lim);
	}
	if (rc == 0 && o->continue_token && *o->continue_token)
		rc = kube_query_add(buf, size, "continue", o->continue_token);
	return rc;
}

/* ---- operations ---------------------------------------------------------------------------- */

/* A request whose answer is one JSON object, decoded into *out. */
static int json_call(struct kube_client *kc, const char *method, const char *path,
                     const char *ctype, const char *body, cJSON **out, struct kube_status *st)
{
	char *resp = NULL;
	size_t n = 0;
	struct err e = {0};
	int rc;

	if (out)
		*out = NULL;
	rc = kube_request(kc, method, path, ctype, body, body ? strlen(body) : 0,
	                  out ? &resp : NULL, &n, st);
	if (rc < 0 || !out)
		return rc;
	rc = json_parse_marked(resp, n, out, &e); /* a NUL byte is its object's problem */
	free(resp);
	if (rc < 0)
		kube_status_local(st, KUBE_INTERNAL_ERROR, "%s %s: the answer is not JSON: %s",
		                  method, path, e.msg);
	return rc;
}

static int bad_path(struct kube_status *st, int rc, const struct kube_resource *r, const char *ns,
                    const char *name)
{
	kube_status_local(st, KUBE_BAD_REQUEST, "cannot address %s \"%.253s\"%s%.253s: %s",
	                  r->plural, name ? name : "", ns && *ns ? " in namespace " : "",
	                  ns ? ns : "",
	                  rc == -ENAMETOOLONG ? "too long" : "invalid name or namespace");
	return rc;
}

int kube_get(struct kube_client *kc, const struct kube_resource *r, const char *ns,
             const char *name, cJSON **out, struct kube_status *st)
{
	char path[1024];
	int rc = kube_path(path, sizeof(path), r, ns, name, NULL);

	if (rc < 0 || !name)
		return bad_path(st, rc < 0 ? rc : -EINVAL, r, ns, name);
	return json_call(kc, "GET", path, NULL, NULL, out, st);
}

int kube_list(struct kube_client *kc, const struct kube_resource *r, const char *ns,
              const struct kube_list_opts *o, cJSON **out, struct kube_status *st)
{
	char path[4096];
	int rc = kube_list_path(path, sizeof(path), r, ns, o);

	if (rc < 0)
		return bad_path(st, rc, r, ns, NULL);
	return json_call(kc, "GET", path, NULL, NULL, out, st);
}

static int put_or_post(struct kube_client *kc, const char *method, const struct kube_resource *r,
                       const char *ns, const cJSON *obj, const char *sub, cJSON **out,
                       struct kube_status *st)
{
	const char *name = kube_codec_meta_str(obj, "name");
	char path[1024], *body;
	int rc;

	if (!name && strcmp(method, "PUT") == 0)
		return bad_path(st, -EINVAL, r, ns, "");
	rc = kube_path(path, sizeof(path), r, ns, strcmp(method, "PUT") == 0 ? name : NULL, sub);
	if (rc < 0)
		return bad_path(st, rc, r, ns, name);
	body = json_dump(obj);
	if (!body) {
		kube_status_local(st, KUBE_UNKNOWN, "out of memory");
		return -ENOMEM;
	}
	rc = json_call(kc, method, path, "application/json", body, out, st);
	free(body);
	return rc;
}

int kube_create(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                const cJSON *obj, cJSON **out, struct kube_status *st)
{
	return put_or_post(kc, "POST", r, ns, obj, NULL, out, st);
}

int kube_update(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                const cJSON *obj, cJSON **out, struct kube_status *st)
{
	return put_or_post(kc, "PUT", r, ns, obj, NULL, out, st);
}

int kube_update_status(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                       const cJSON *obj, cJSON **out, struct kube_status *st)
{
	return put_or_post(kc, "PUT", r, ns, obj, "status", out, st);
}

int kube_patch(struct kube_client *kc, const struct kube_resource *r, const char *ns,
               const char *name, enum kube_patch_type type, bool status, const char *patch,
               cJSON **out, struct kube_status *st)
{
	char path[1024];
	int rc = kube_path(path, sizeof(path), r, ns, name, status ? "status" : NULL);

	if (rc < 0 || !name)
		return bad_path(st, rc < 0 ? rc : -EINVAL, r, ns, name);
	return json_call(kc, "PATCH", path,
	                 type == KUBE_PATCH_JSON ? "application/json-patch+json"
	                                         : "application/merge-patch+json",
	                 patch, out, st);
}

int kube_delete(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                const char *name, const char *uid, const char *resource_version, cJSON **out,
                struct kube_status *st)
{
	char path[1024], *body = NULL;
	int rc = kube_path(path, sizeof(path), r, ns, name, NULL);

	if (rc < 0 || !name)
		return bad_path(st, rc < 0 ? rc : -EINVAL, r, ns, name);
	if (uid || resource_version) {
		body = kube_codec_delete_options_encode(uid, resource_version);
		if (!body) {
			kube_status_local(st, KUBE_UNKNOWN, "out of memory");
			return -ENOMEM;
		}
	}
	rc = json_call(kc, "DELETE", path, body ? "application/json" : NULL, body, out, st);
	free(body);
	return rc;
}
