/* agentclient — the AgentService calls the controller makes, independent of the transport.
 *
 * An agentclient is a vtable with one generic `invoke` (method name, request message, response
 * descriptor, deadline) that a transport implements: the gRPC client over src/h2+src/grpc in the
 * controller, a scripted fake in the unit tests (test/unit/fake_agent.h).  The typed functions
 * below are what the controller calls: each takes the generated protobuf-c request of that RPC,
 * applies the per-call deadline of spec/agent-api.md §12.1 and returns the gRPC status code
 * (0 = OK, else enum grpc_code) with the message in *st.  On OK *resp is a heap message the
 * caller frees with protobuf_c_message_free_unpacked(&(*resp)->base, NULL); on any other code
 * *resp is NULL.  A transport failure is reported as UNAVAILABLE or DEADLINE_EXCEEDED, never as
 * a negative errno.  `address` is the agent's resolved "ip:port" ("[ipv6]:port").
 */
#ifndef PILLAR_ROLES_CONTROLLER_AGENTCLIENT_H
#define PILLAR_ROLES_CONTROLLER_AGENTCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/status.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"

/* Deadlines of agent-api.md §12.1, in milliseconds. */
#define AGENT_DEADLINE_HEALTH_MS     5000
#define AGENT_DEADLINE_CAPS_MS       5000
#define AGENT_DEADLINE_CAPACITY_MS   10000
#define AGENT_DEADLINE_INITIATOR_MS  15000
#define AGENT_DEADLINE_EXPORT_MS     30000
#define AGENT_DEADLINE_LIST_MS       30000
#define AGENT_DEADLINE_BACKEND_MS    60000
#define AGENT_DEADLINE_RECONCILE_MS  30000
#define AGENT_DEADLINE_RESTORE_PER_V 10000

typedef struct agentclient agentclient;

struct agentclient_ops {
	/* method: the RPC name ("CreateVolume"); path /pillar_csi.agent.v1.AgentService/<method>.
	 * Must set st->code/msg; on OK *resp (of resp_desc) is a new heap message. */
	int (*invoke)(agentclient *c, const char *address, const char *method,
	              const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
	              ProtobufCMessage **resp, int deadline_ms, struct grpc_status *st);
	void (*close)(agentclient *c);
	/* Optional (a transport with connections): the next call to address connects at once,
	 * whatever backoff its earlier failures left. */
	void (*reset_backoff)(agentclient *c, const char *address);
	/* Optional: true when calls go over mutual TLS (deploy.md §9). */
	bool (*mtls)(agentclient *c);
	/* Optional: an id of the established connection to address (a new connection, a new id),
	 * 0 when none. */
	uint64_t (*conn_id)(agentclient *c, const char *address);
};

struct agentclient {
	const struct agentclient_ops *ops;
};

void agentclient_close(agentclient *c); /* NULL is a no-op */

/* The deadline of ReconcileState: one volume 30 s; complete restore 30 s + 10 s per volume. */
int agentclient_reconcile_deadline_ms(bool complete, size_t n_volumes);

/* True when calls go over mutual TLS (the transport says so; false without the op). */
bool agentclient_mtls(agentclient *c);
/* The handshake's reason when st is a call that failed in the TLS handshake (the gRPC client's
 * "<address>: TLS handshake: <reason>"), else NULL: the controller reports it as
 * AgentConnected=False/TLSHandshakeFailed (crds.md §3.3, deploy.md §9.3). */
const char *agentclient_tls_failure(const struct grpc_status *st);
/* True when a status message begins with the restore-gate prefix "export restore pending". */
bool agentclient_restore_pending(const struct grpc_status *st);

int agentclient_create_volume(agentclient *c, const char *addr,
                              const PillarCsi__Agent__V1__CreateVolumeRequest *req,
                              PillarCsi__Agent__V1__CreateVolumeResponse **resp,
                              struct grpc_status *st);
int agentclient_delete_volume(agentclient *c, const char *addr,
                              const PillarCsi__Agent__V1__DeleteVolumeRequest *req,
                              struct grpc_status *st);
int agentclient_expand_volume(agentclient *c, const char *addr,
                              const PillarCsi__Agent__V1__ExpandVolumeRequest *req,
                              PillarCsi__Agent__V1__ExpandVolumeResponse **resp,
                              struct grpc_status *st);
int agentclient_export_volume(agentclient *c, const char *addr,
                              const PillarCsi__Agent__V1__ExportVolumeRequest *req,
                              PillarCsi__Agent__V1__ExportVolumeResponse **resp,
                              struct grpc_status *st);
int agentclient_unexport_volume(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__UnexportVolumeRequest *req,
                                struct grpc_status *st);
int agentclient_allow_initiator(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__AllowInitiatorRequest *req,
                                struct grpc_status *st);
int agentclient_deny_initiator(agentclient *c, const char *addr,
                               const PillarCsi__Agent__V1__DenyInitiatorRequest *req,
                               struct grpc_status *st);
int agentclient_reconcile_state(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__ReconcileStateRequest *req,
                                PillarCsi__Agent__V1__ReconcileStateResponse **resp,
                                struct grpc_status *st);
/* The liveness probe of agentmon.h: HealthCheck with deadline_ms after forgetting any reconnect
 * backoff, so that an agent whose port accepts again is reached by this very call.  *pending
 * gets export_restore_pending.  -ENOTSUP (nothing called) when the transport has no
 * connections to probe (reset_backoff unset), else the gRPC code. */
int agentclient_probe(agentclient *c, const char *addr, int deadline_ms, bool *pending,
                      struct grpc_status *st);
/* The transport's conn_id (0 when it has none or no connection is established). */
uint64_t agentclient_conn_id(agentclient *c, const char *addr);
int agentclient_health_check(agentclient *c, const char *addr,
                             PillarCsi__Agent__V1__HealthCheckResponse **resp,
                             struct grpc_status *st);
int agentclient_get_capabilities(agentclient *c, const char *addr,
                                 PillarCsi__Agent__V1__GetCapabilitiesResponse **resp,
                                 struct grpc_status *st);
int agentclient_get_capacity(agentclient *c, const char *addr,
                             const PillarCsi__Agent__V1__GetCapacityRequest *req,
                             PillarCsi__Agent__V1__GetCapacityResponse **resp,
                             struct grpc_status *st);
/* Snapshots (docs/snapshots.md "Agent API"): the deadline of a backend operation. */
int agentclient_create_snapshot(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__CreateSnapshotRequest *req,
                                PillarCsi__Agent__V1__CreateSnapshotResponse **resp,
                                struct grpc_status *st);
int agentclient_delete_snapshot(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__DeleteSnapshotRequest *req,
                                struct grpc_status *st);
int agentclient_list_exports(agentclient *c, const char *addr,
                             const PillarCsi__Agent__V1__ListExportsRequest *req,
                             PillarCsi__Agent__V1__ListExportsResponse **resp,
                             struct grpc_status *st);

#endif
