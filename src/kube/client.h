/* kube/client — a Kubernetes REST client on our HTTP/2 client (h2/client.h): every request and
 * watch of a process on one TLS connection (ALPN h2), as client-go does.
 *
 * Requests carry `Accept: application/json`, a User-Agent in client-go's shape
 * (`pillar-csi-controller/v0.1.0 (linux/amd64) pillar-csi/<commit>`; the server takes the part
 * before the first `/` as the field manager), and `Authorization: Bearer` when the configuration
 * has a token.  A token file (in cluster: the service account's bound token, which the kubelet
 * rotates) is stat()ed before each request and re-read when it changed; if a re-read fails, the
 * last token read stays in use.  Every request first takes a token of a rate limiter
 * (kube/ratelimit.h) and may wait for it; watches take one when they open.  The client has two
 * limiters of the same qps and burst: one for objects (every request unless said otherwise) and
 * one for Events (kube_request_on with KUBE_BUDGET_EVENTS), as a process with a separate event
 * client has (kube-scheduler, kube-controller-manager), so that Events never delay object
 * requests; the two share the connection.
 *
 * Operations return 0 on a 2xx answer, with the decoded object in *out when out is not NULL
 * (caller owns it).  Otherwise they return a negative errno and fill st: the
 * server's Status (kube/status.h: NotFound -ENOENT, AlreadyExists -EEXIST, Conflict -ESTALE,
 * Invalid -EINVAL, Expired -ERANGE, Forbidden -EACCES, Unauthorized -EPERM, ...) or, with
 * st->code 0, a local failure (-ETIMEDOUT, -ECONNREFUSED, -EINVAL for a bad name...).  Names,
 * namespaces and plurals are checked (DNS subdomain characters) before any request is built.
 * An answer 429 (or 5xx) with a Retry-After header is retried after that many seconds, at most
 * KUBE_RETRIES times, as client-go does; each attempt takes a token of the limiter.
 * All functions may be called from any thread that does not hold the event loop.
 */
#ifndef PILLAR_KUBE_CLIENT_H
#define PILLAR_KUBE_CLIENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "h2/loop.h"
#include "kube/config.h"
#include "kube/status.h"

struct kube_client;

#define KUBE_RETRIES         10 /* client-go's maximum for Retry-After answers */
#define KUBE_RETRY_AFTER_MAX 60 /* seconds; a longer Retry-After is not waited for */

struct kube_client_opts {
	const char *component; /* User-Agent product, e.g. "pillar-csi-controller" (required) */
	const char *version;   /* default "v" PILLAR_VERSION */
	double qps;            /* --kube-api-qps, default KUBE_DEFAULT_QPS; < 0: unlimited */
	int burst;             /* --kube-api-burst, default KUBE_DEFAULT_BURST */
	int64_t timeout_ms;    /* per request (not watches); default 30000 */
	struct h2_loop *loop;  /* default h2_loop_default() */
	/* Tests: the limiter's clock and its sleep (default CLOCK_MONOTONIC and nanosleep). */
	uint64_t (*now_us)(void *arg);
	void (*sleep_us)(void *arg, uint64_t us);
	void *clock_arg;
};

/* A kind's REST address: group "" is the core group (/api/v1). */
struct kube_resource {
	const char *group, *version, *plural;
	bool namespaced;
};

struct kube_list_opts {
	const char *label_selector, *field_selector; /* NULL: none */
	const char *resource_version;                /* NULL: most recent (a quorum read) */
	const char *resource_version_match;          /* "Exact", "NotOlderThan" or NULL */
	int64_t limit;                               /* 0: no paging */
	const char *continue_token;                  /* the previous page's metadata.continue */
	/* kube_list_each: each item's metadata.managedFields cut from its text before it is
	 * parsed (json_cut_member), for a reader that keeps none */
	bool drop_managed_fields;
};

enum kube_patch_type {
	KUBE_PATCH_MERGE, /* application/merge-patch+json (RFC 7386; null deletes) */
	KUBE_PATCH_JSON, /* application/json-patch+json (RFC 6902; `test` ops make it conditional) */
};

void kube_client_opts_init(struct kube_client_opts *o);
/* cfg is copied (the caller may free it afterwards). */
int kube_client_new(struct kube_client **out, const struct kube_config *cfg,
                    const struct kube_client_opts *o, struct err *e);
/* Every watch must have been freed before.  NULL is a no-op. */
void kube_client_free(struct kube_client *kc);
const char *kube_client_user_agent(const struct kube_client *kc);
/* The configuration's namespace ("" when none). */
const char *kube_client_namespace(const struct kube_client *kc);
/* Connections made so far (one unless the server went away). */
unsigned kube_client_connections(const struct kube_client *kc);

/* The path of a collection (name NULL), an object, or a subresource of it (sub NULL: none) into
 * buf; 0 or -EINVAL (bad name, namespace missing for a namespaced kind) / -ENAMETOOLONG. */
int kube_path(char *buf, size_t size, const struct kube_resource *r, const char *ns,
              const char *name, const char *sub);

/* Which token bucket a request takes its token from. */
enum kube_budget { KUBE_BUDGET_OBJECTS, KUBE_BUDGET_EVENTS, KUBE_BUDGETS };

/* One request: path with its query; body NULL for none.  On 2xx: 0, the body in *resp
 * (NUL-terminated, malloc'd; NULL allowed to discard) and its length. */
int kube_request(struct kube_client *kc, const char *method, const char *path,
                 const char *content_type, const char *body, size_t len, char **resp,
                 size_t *resp_len, struct kube_status *st);
/* kube_request limited by the given budget's bucket (kube_request: KUBE_BUDGET_OBJECTS). */
int kube_request_on(struct kube_client *kc, enum kube_budget budget, const char *method,
                    const char *path, const char *content_type, const char *body, size_t len,
                    char **resp, size_t *resp_len, struct kube_status *st);

int kube_get(struct kube_client *kc, const struct kube_resource *r, const char *ns,
             const char *name, cJSON **out, struct kube_status *st);
/* One page: *out is the List (items, metadata.resourceVersion, metadata.continue). */
int kube_list(struct kube_client *kc, const struct kube_resource *r, const char *ns,
              const struct kube_list_opts *o, cJSON **out, struct kube_status *st);
int kube_create(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                const cJSON *obj, cJSON **out, struct kube_status *st);
/* PUT of obj (its metadata.name and metadata.resourceVersion make it a compare-and-swap). */
int kube_update(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                const cJSON *obj, cJSON **out, struct kube_status *st);
/* PUT of obj to the status subresource. */
int kube_update_status(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                       const cJSON *obj, cJSON **out, struct kube_status *st);
/* PATCH name (or its status when status is true) with patch (JSON text of the given type). */
int kube_patch(struct kube_client *kc, const struct kube_resource *r, const char *ns,
               const char *name, enum kube_patch_type type, bool status, const char *patch,
               cJSON **out, struct kube_status *st);
/* DELETE with optional preconditions (uid, resource_version; NULL: none).  *out is what the
 * server answered: a Success Status, or the object itself when finalizers keep it. */
int kube_delete(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                const char *name, const char *uid, const char *resource_version, cJSON **out,
                struct kube_status *st);

/* Registers client-go's rest_client_requests_total{code,method,host},
 * rest_client_request_duration_seconds{verb,host} and
 * rest_client_rate_limiter_duration_seconds{verb,host}, which every client counts into
 * (kube_client_new registers them). */
void kube_metrics_register(void);

#endif
