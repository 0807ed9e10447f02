/* kube/client_int — what kube/watch.c shares with kube/client.c (not for other layers). */
#ifndef PILLAR_KUBE_CLIENT_INT_H
#define PILLAR_KUBE_CLIENT_INT_H

#include "h2/client.h"
#include "kube/client.h"

/* Authenticated request limited by the budget's token bucket; returns the open stream after its
 * response headers: 0 with *out and *http_status, or a negative errno with st filled (local
 * failure). */
int kube_stream_open(struct kube_client *kc, enum kube_budget budget, const char *method,
                     const char *path, const char *content_type, const char *body, size_t len,
                     struct h2_stream **out, int *http_status, struct kube_status *st);
/* A request with kube_request_on's rate limit, authentication and Retry-After retries, its 2xx
 * answer's body left to the caller: 0 with the open stream in *out (caller frees) and the start
 * of the attempt in *t0_ns (for kube_request_observe once the body is read), or a negative errno
 * with st: the server's Status for an answer other than 2xx, or a local failure. */
int kube_request_stream(struct kube_client *kc, enum kube_budget budget, const char *method,
                        const char *path, const char *content_type, const char *body, size_t len,
                        struct h2_stream **out, uint64_t *t0_ns, struct kube_status *st);
/* Counts a request's duration from t0_ns (rest_client_request_duration_seconds). */
void kube_request_observe(struct kube_client *kc, const char *method, uint64_t t0_ns);
/* The per-request timeout (kube_client_opts.timeout_ms). */
int64_t kube_client_timeout_ms(const struct kube_client *kc);
/* kube_stream_open in two steps: the rate-limited, authenticated request is queued (0 with *out,
 * or a negative errno with st filled) ... */
int kube_stream_start(struct kube_client *kc, const char *method, const char *path,
                      const char *content_type, const char *body, size_t len,
                      struct h2_stream **out, struct kube_status *st);
/* ... then its response headers are awaited: the HTTP status, or a negative errno with st filled
 * (-ETIMEDOUT after timeout_ms, which may be retried; -ECANCELED after h2_stream_cancel).
 * method and path only word the message. */
int kube_stream_head(struct h2_stream *s, int64_t timeout_ms, const char *method, const char *path,
                     struct kube_status *st);
/* Appends "&key=value" (value percent-encoded) to the query in buf, "?" for the first. */
int kube_query_add(char *buf, size_t size, const char *key, const char *value);
/* The path of r's collection with the list options' query. */
int kube_list_path(char *buf, size_t size, const struct kube_resource *r, const char *ns,
                   const struct kube_list_opts *o);

#endif
