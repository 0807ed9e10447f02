/* grpc/metrics — the gRPC families of go-grpc-prometheus, with its names, labels and default
 * buckets, so that dashboards written for Go gRPC services work unchanged:
 *
 *   grpc_server_started_total{grpc_type,grpc_service,grpc_method}
 *   grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}
 *   grpc_server_msg_received_total{grpc_type,grpc_service,grpc_method}
 *   grpc_server_msg_sent_total{grpc_type,grpc_service,grpc_method}
 *   grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}   (histogram)
 *   and the same five as grpc_client_* for calls made through grpc/client.
 *
 * grpc_type is "unary" or "server_stream"; grpc_code is Go's name of the code ("OK",
 * "InvalidArgument", …).  The server resolves each method's children once, when its service is
 * added, so a call costs a few atomic adds; the label sets are bounded by the service tables
 * (the server) and by the methods this binary calls (the client).  Nothing here fails: a full
 * family drops its update (metrics/metrics.h). */
#ifndef PILLAR_GRPC_METRICS_H
#define PILLAR_GRPC_METRICS_H

#include <stdbool.h>
#include <stdint.h>

/* Go's name of a gRPC code ("OK", "Canceled", … "Unauthenticated"; "Unknown" out of range). */
const char *grpc_code_go_name(int code);

/* The children of one server method. */
struct grpc_method_metrics;

/* Registers the families (idempotent) and resolves one method's children; NULL when out of
 * memory (calls are then not counted). */
struct grpc_method_metrics *grpc_metrics_server_method(const char *service, const char *method,
                                                       bool server_stream);
void grpc_metrics_method_free(struct grpc_method_metrics *mm);

/* A call has started (its request was received). */
void grpc_metrics_server_started(struct grpc_method_metrics *mm);
/* A response message was sent. */
void grpc_metrics_server_sent(struct grpc_method_metrics *mm);
/* The call ended with code after seconds. */
void grpc_metrics_server_handled(struct grpc_method_metrics *mm, int code, double seconds);

/* The memory gRPC servers hold for requests in progress, read at each scrape and summed over
 * the servers being watched (one per role):
 *   pillar_csi_grpc_server_pending_bytes        (grpc_server_pending_bytes)
 *   pillar_csi_grpc_server_pending_limit_bytes  (their max_pending)
 * A server is watched from grpc_metrics_server_watch until grpc_metrics_server_unwatch, which
 * returns once no scrape reads it. */
struct grpc_server;
void grpc_metrics_server_watch(const struct grpc_server *s);
void grpc_metrics_server_unwatch(const struct grpc_server *s);

/* A unary client call of path ("/pkg.Service/Method") ended with code after seconds; sent and
 * received say whether the request and a response message went over the wire (grpc/client
 * counts a call that ended UNAVAILABLE as not sent: it found no connection). */
void grpc_metrics_client_call(const char *path, int code, double seconds, bool sent, bool received);

#endif
