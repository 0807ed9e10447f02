/* grpc/calllog — the per-call log lines of every gRPC service, as Kubernetes CSI drivers write
 * them (klog, csi-lib-utils protosanitizer):
 *
 *   --v=5  I… "GRPC request" method="/csi.v1.Controller/CreateVolume" request="{…}"
 *   --v=3  I… "GRPC call" method="…" volumeID="…" code="OK" duration="1.234ms"
 *   --v=0  E… "GRPC call failed" method="…" volumeID="…" code="NOT_FOUND" duration="…" err="…"
 *   --v=5  I… "GRPC response" method="…" response="{…}"
 *
 * volumeID is the request's volume_id, else the response's volume.volume_id (CreateVolume), else
 * the request's name; "" when the method names no volume.  The server calls these around every
 * handler (grpc/call.c), so every role and service gets them.  Requests and responses are
 * written by the format function installed with calllog_set_format (the binary installs
 * pbjson_log_text: JSON with secrets stripped); without one --v=5 writes the message type only,
 * so this layer needs no JSON.  Functions cannot fail.
 */
#ifndef PILLAR_GRPC_CALLLOG_H
#define PILLAR_GRPC_CALLLOG_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

/* Returns a malloc'd text of m with every secret left out, or NULL (out of memory). */
typedef char *(*calllog_format_fn)(const ProtobufCMessage *m);

/* Installs the --v=5 message format (NULL: the message type only).  Call before serving. */
void calllog_set_format(calllog_format_fn fn);

/* Before the handler: the request at --v=5.  Returns the start time (monotonic ns). */
uint64_t calllog_request(const char *method, const ProtobufCMessage *req);

/* After the handler: resp is NULL unless code is OK for a unary call; msg the status message. */
void calllog_result(const char *method, const ProtobufCMessage *req, const ProtobufCMessage *resp,
                    int code, const char *msg, uint64_t start_ns);

#endif
