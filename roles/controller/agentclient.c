/* agentclient — typed AgentService calls with the deadlines of agent-api.md §12.1. */
#include "controller/agentclient.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void agentclient_close(agentclient *c)
{
	if (c && c->ops && c->ops->close)
		c->ops->close(c);
}

int agentclient_reconcile_deadline_ms(bool complete, size_t n_volumes)
{
	if (!complete)
		return AGENT_DEADLINE_RECONCILE_MS;
	size_t ms = AGENT_DEADLINE_RECONCILE_MS + n_volumes * AGENT_DEADLINE_RESTORE_PER_V;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

bool agentclient_mtls(agentclient *c)
{
	return c && c->ops->mtls && c->ops->mtls(c);
}

const char *agentclient_tls_failure(const struct grpc_status *st)
{
	static const char mark[] = "TLS handshake: ";
	const char *p = st->code == GRPC_UNAVAILABLE ? strstr(st->msg, mark) : NULL;
	return p ? p + sizeof(mark) - 1 : NULL;
}

bool agentclient_restore_pending(const struct grpc_status *st)
{
	return st && strncmp(st->msg, "export restore pending", 22) == 0;
}

static int call(agentclient *c, const char *addr, const char *method, const void *req,
                const ProtobufCMessageDescriptor *rd, void **resp, int deadline_ms,
                struct grpc_status *st)
{
	ProtobufCMessage *out = NULL;
	st->code = GRPC_OK;
	st->msg[0] = 0;
	if (resp)
		*resp = NULL;
	if (!c || !c->ops || !c->ops->invoke) {
		st->code = GRPC_UNAVAILABLE;
		snprintf(st->msg, sizeof(st->msg), "no agent client configured");
		return st->code;
	}
	int code = c->ops->invoke(c, addr, method, (const ProtobufCMessage *)req, rd, &out,
	                          deadline_ms, st);
	st->code = code;
	if (code != GRPC_OK) {
		if (out)
			protobuf_c_message_free_unpacked(out, NULL);
		return code;
	}
	if (resp)
		*resp = out;
	else if (out)
		protobuf_c_message_free_unpacked(out, NULL);
	return GRPC_OK;
}

#define D(name) &pillar_csi__agent__v1__##name##__descriptor

int agentclient_create_volume(agentclient *c, const char *addr,
                              const PillarCsi__Agent__V1__CreateVolumeRequest *req,
                              PillarCsi__Agent__V1__CreateVolumeResponse **resp,
                              struct grpc_status *st)
{
	return call(c, addr, "CreateVolume", req, D(create_volume_response), (void **)resp,
	            AGENT_DEADLINE_BACKEND_MS, st);
}

int agentclient_create_snapshot(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__CreateSnapshotRequest *req,
                                PillarCsi__Agent__V1__CreateSnapshotResponse **resp,
                                struct grpc_status *st)
{
	return call(c, addr, "CreateSnapshot", req, D(create_snapshot_response), (void **)resp,
	            AGENT_DEADLINE_BACKEND_MS, st);
}

int agentclient_delete_snapshot(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__DeleteSnapshotRequest *req,
                                struct grpc_status *st)
{
	return call(c, addr, "DeleteSnapshot", req, D(delete_snapshot_response), NULL,
	            AGENT_DEADLINE_BACKEND_MS, st);
}

int agentclient_delete_volume(agentclient *c, const char *addr,
                              const PillarCsi__Agent__V1__DeleteVolumeRequest *req,
                              struct grpc_status *st)
{
	return call(c, addr, "DeleteVolume", req, D(delete_volume_response), NULL,
	            AGENT_DEADLINE_BACKEND_MS, st);
}

int agentclient_expand_volume(agentclient *c, const char *addr,
                              const PillarCsi__Agent__V1__ExpandVolumeRequest *req,
                              PillarCsi__Agent__V1__ExpandVolumeResponse **resp,
                              struct grpc_status *st)
{
	return call(c, addr, "ExpandVolume", req, D(expand_volume_response), (void **)resp,
	            AGENT_DEADLINE_BACKEND_MS, st);
}

int agentclient_export_volume(agentclient *c, const char *addr,
                              const PillarCsi__Agent__V1__ExportVolumeRequest *req,
                              PillarCsi__Agent__V1__ExportVolumeResponse **resp,
                              struct grpc_status *st)
{
	return call(c, addr, "ExportVolume", req, D(export_volume_response), (void **)resp,
	            AGENT_DEADLINE_EXPORT_MS, st);
}

int agentclient_unexport_volume(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__UnexportVolumeRequest *req,
                                struct grpc_status *st)
{
	return call(c, addr, "UnexportVolume", req, D(unexport_volume_response), NULL,
	            AGENT_DEADLINE_EXPORT_MS, st);
}

int agentclient_allow_initiator(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__AllowInitiatorRequest *req,
                                struct grpc_status *st)
{
	return call(c, addr, "AllowInitiator", req, D(allow_initiator_response), NULL,
	            AGENT_DEADLINE_INITIATOR_MS, st);
}

int agentclient_deny_initiator(agentclient *c, const char *addr,
                               const PillarCsi__Agent__V1__DenyInitiatorRequest *req,
                               struct grpc_status *st)
{
	return call(c, addr, "DenyInitiator", req, D(deny_initiator_response), NULL,
	            AGENT_DEADLINE_INITIATOR_MS, st);
}

int agentclient_reconcile_state(agentclient *c, const char *addr,
                                const PillarCsi__Agent__V1__ReconcileStateRequest *req,
                                PillarCsi__Agent__V1__ReconcileStateResponse **resp,
                                struct grpc_status *st)
{
	return call(c, addr, "ReconcileState", req, D(reconcile_state_response), (void **)resp,
	            agentclient_reconcile_deadline_ms(req->complete, req->n_volumes), st);
}

int agentclient_health_check(agentclient *c, const char *addr,
                             PillarCsi__Agent__V1__HealthCheckResponse **resp,
                             struct grpc_status *st)
{
	PillarCsi__Agent__V1__HealthCheckRequest req =
	    PILLAR_CSI__AGENT__V1__HEALTH_CHECK_REQUEST__INIT;
	return call(c, addr, "HealthCheck", &req, D(health_check_response), (void **)resp,
	            AGENT_DEADLINE_HEALTH_MS, st);
}

int agentclient_probe(agentclient *c, const char *addr, int deadline_ms, bool *pending,
                      struct grpc_status *st)
{
	PillarCsi__Agent__V1__HealthCheckRequest req =
	    PILLAR_CSI__AGENT__V1__HEALTH_CHECK_REQUEST__INIT;
	PillarCsi__Agent__V1__HealthCheckResponse *resp = NULL;
	if (!c || !c->ops || !c->ops->reset_backoff)
		return -ENOTSUP;
	c->ops->reset_backoff(c, addr);
	int r = call(c, addr, "HealthCheck", &req, D(health_check_response), (void **)&resp,
	             deadline_ms, st);
	*pending = resp && resp->export_restore_pending;
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return r;
}

uint64_t agentclient_conn_id(agentclient *c, const char *addr)
{
	return c && c->ops && c->ops->conn_id ? c->ops->conn_id(c, addr) : 0;
}

int agentclient_get_capabilities(agentclient *c, const char *addr,
                                 PillarCsi__Agent__V1__GetCapabilitiesResponse **resp,
                                 struct grpc_status *st)
{
	PillarCsi__Agent__V1__GetCapabilitiesRequest req =
	    PILLAR_CSI__AGENT__V1__GET_CAPABILITIES_REQUEST__INIT;
	return call(c, addr, "GetCapabilities", &req, D(get_capabilities_response), (void **)resp,
	            AGENT_DEADLINE_CAPS_MS, st);
}

int agentclient_get_capacity(agentclient *c, const char *addr,
                             const PillarCsi__Agent__V1__GetCapacityRequest *req,
                             PillarCsi__Agent__V1__GetCapacityResponse **resp,
                             struct grpc_status *st)
{
	return call(c, addr, "GetCapacity", req, D(get_capacity_response), (void **)resp,
	            AGENT_DEADLINE_CAPACITY_MS, st);
}

int agentclient_list_exports(agentclient *c, const char *addr,
                             const PillarCsi__Agent__V1__ListExportsRequest *req,
                             PillarCsi__Agent__V1__ListExportsResponse **resp,
                             struct grpc_status *st)
{
	return call(c, addr, "ListExports", req, D(list_exports_response), (void **)resp,
	            AGENT_DEADLINE_LIST_MS, st);
}
