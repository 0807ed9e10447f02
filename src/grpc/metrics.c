#include "grpc/metrics.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/server.h"
#include "grpc/status.h"
#include "metrics/metrics.h"

#define N_CODES 17

static const char *const go_names[N_CODES] = {
    "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated"};

const char *grpc_code_go_name(int code)
{
	return code >= 0 && code < N_CODES ? go_names[code] : "Unknown";
}

static const char *const method_labels[] = {"grpc_type", "grpc_service", "grpc_method", NULL};
static const char *const code_labels[] = {"grpc_type", "grpc_service", "grpc_method", "grpc_code",
                                          NULL};

/* Label sets: the methods of this binary's services (about 40) times the codes they end with. */
#define METHODS_CAP 96
#define HANDLED_CAP 512

#define SIDE_FAMILIES(side, who)                                                                \
	static struct metrics_family side##_started = METRICS_FAMILY(                           \
	    "grpc_" #side "_started_total", "Total number of RPCs started on the " who ".",     \
	    METRICS_COUNTER, method_labels, NULL, METHODS_CAP);                                 \
	static struct metrics_family side##_handled = METRICS_FAMILY(                           \
	    "grpc_" #side "_handled_total",                                                     \
	    "Total number of RPCs completed on the " who ", regardless of success or failure.", \
	    METRICS_COUNTER, code_labels, NULL, HANDLED_CAP);                                   \
	static struct metrics_family side##_received =                                          \
	    METRICS_FAMILY("grpc_" #side "_msg_received_total",                                 \
	                   "Total number of RPC stream messages received on the " who ".",      \
	                   METRICS_COUNTER, method_labels, NULL, METHODS_CAP);                  \
	static struct metrics_family side##_sent =                                              \
	    METRICS_FAMILY("grpc_" #side "_msg_sent_total",                                     \
	                   "Total number of gRPC stream messages sent by the " who ".",         \
	                   METRICS_COUNTER, method_labels, NULL, METHODS_CAP);                  \
	static struct metrics_family side##_seconds = METRICS_FAMILY(                           \
	    "grpc_" #side "_handling_seconds",                                                  \
	    "Histogram of response latency (seconds) of gRPC that had been application-level "  \
	    "handled by the " who ".",                                                          \
	    METRICS_HISTOGRAM, method_labels, metrics_default_buckets, METHODS_CAP);            \
	static void side##_register(void)                                                       \
	{                                                                                       \
		metrics_register(&side##_started);                                              \
		metrics_register(&side##_handled);                                              \
		metrics_register(&side##_received);                                             \
		metrics_register(&side##_sent);                                                 \
		metrics_register(&side##_seconds);                                              \
	}

SIDE_FAMILIES(server, "server")
SIDE_FAMILIES(client, "client")

struct grpc_method_metrics {
	const char *values[4]; /* type, service, method, and the code filled per lookup */
	char *service, *method;
	struct metrics_child *started, *received, *sent, *seconds;
	struct metrics_child *_Atomic handled[N_CODES];
};

struct grpc_method_metrics *grpc_metrics_server_method(const char *service, const char *method,
                                                       bool server_stream)
{
	struct grpc_method_metrics *mm = calloc(1, sizeof(*mm));
	if (!mm)
		return NULL;
	server_register();
	mm->service = strdup(service);
	mm->method = strdup(method);
	if (!mm->service || !mm->method) {
		grpc_metrics_method_free(mm);
		return NULL;
	}
	mm->values[0] = server_stream ? "server_stream" : "unary";
	mm->values[1] = mm->service;
	mm->values[2] = mm->method;
	mm->started = metrics_child(&server_started, mm->values);
	mm->received = metrics_child(&server_received, mm->values);
	mm->sent = metrics_child(&server_sent, mm->values);
	mm->seconds = metrics_child(&server_seconds, mm->values);
	return mm;
}

void grpc_metrics_method_free(struct grpc_method_metrics *mm)
{
	if (!mm)
		return;
	free(mm->service);
	free(mm->method);
	free(mm);
}

void grpc_metrics_server_started(struct grpc_method_metrics *mm)
{
	if (!mm)
		return;
	if (mm->started)
		metrics_counter_add(&mm->started->m.counter, 1);
	if (mm->received)
		metrics_counter_add(&mm->received->m.counter, 1);
}

void grpc_metrics_server_sent(struct grpc_method_metrics *mm)
{
	if (mm && mm->sent)
		metrics_counter_add(&mm->sent->m.counter, 1);
}

void grpc_metrics_server_handled(struct grpc_method_metrics *mm, int code, double seconds)
{
	if (!mm)
		return;
	int i = code >= 0 && code < N_CODES ? code : GRPC_UNKNOWN;
	struct metrics_child *h = atomic_load_explicit(&mm->handled[i], memory_order_acquire);
	if (!h) {
		const char *v[4] = {mm->values[0], mm->values[1], mm->values[2], go_names[i]};
		h = metrics_child(&server_handled, v);
		atomic_store_explicit(&mm->handled[i], h, memory_order_release);
	}
	if (h)
		metrics_counter_add(&h->m.counter, 1);
	if (mm->seconds)
		metrics_histogram_observe(&mm->seconds->m.histogram, metrics_default_buckets,
		                          seconds);
}

void grpc_metrics_client_call(const char *path, int code, double seconds, bool sent, bool received)
{
	char buf[256];
	const char *slash;
	if (!path || path[0] != '/' || !(slash = strchr(path + 1, '/')) ||
	    strlen(path) >= sizeof(buf))
		return;
	client_register();
	memcpy(buf, path + 1, strlen(path));
	buf[slash - path - 1] = '\0';
	const char *v[4] = {"unary", buf, buf + (slash - path), grpc_code_go_name(code)};
	metrics_inc(&client_started, v, 1);
	if (sent)
		metrics_inc(&client_sent, v, 1);
	if (received)
		metrics_inc(&client_received, v, 1);
	metrics_inc(&client_handled, v, 1);
	metrics_observe(&client_seconds, v, seconds);
}

/* ---- memory for requests in progress ---------------------------------------------------- */

struct watched {
	struct watched *next;
	const struct grpc_server *s;
};

static pthread_mutex_t watched_mu = PTHREAD_MUTEX_INITIALIZER;
static struct watched *watched_list;

static void pending_collect(struct metrics_text *t, void *ctx)
{
	double held = 0, limit = 0;
	(void)ctx;

	pthread_mutex_lock(&watched_mu);
	for (const struct watched *w = watched_list; w; w = w->next) {
		held += (double)grpc_server_pending_bytes(w->s);
		limit += (double)grpc_server_pending_limit(w->s);
	}
	pthread_mutex_unlock(&watched_mu);
	metrics_text_single(t, "pillar_csi_grpc_server_pending_bytes",
	                    "Bytes the gRPC server holds for requests in progress: request "
	                    "buffers, requests and their decoded messages, headers, calls and "
	                    "unsent responses.",
	                    METRICS_GAUGE, held);
	metrics_text_single(t, "pillar_csi_grpc_server_pending_limit_bytes",
	                    "The most bytes the gRPC server holds for requests in progress; "
	                    "beyond it new requests fail with RESOURCE_EXHAUSTED.",
	                    METRICS_GAUGE, limit);
}

void grpc_metrics_server_watch(const struct grpc_server *s)
{
	struct watched *w;

	if (!metrics_enabled() || !(w = malloc(sizeof(*w))))
		return; /* not shown */
	w->s = s;
	metrics_register_collector(pending_collect, NULL);
	pthread_mutex_lock(&watched_mu);
	w->next = watched_list;
	watched_list = w;
	pthread_mutex_unlock(&watched_mu);
}

void grpc_metrics_server_unwatch(const struct grpc_server *s)
{
	struct watched **p, *w = NULL;

	pthread_mutex_lock(&watched_mu);
	for (p = &watched_list; *p; p = &(*p)->next)
		if ((*p)->s == s) {
			w = *p;
			*p = w->next;
			break;
		}
	pthread_mutex_unlock(&watched_mu);
	free(w);
}
