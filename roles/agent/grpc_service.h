/* agent/grpc_service — the AgentService table for the gRPC server: each method unpacks into the
 * transport-independent handlers of agent/service.h. */
#ifndef PILLAR_ROLES_AGENT_GRPC_SERVICE_H
#define PILLAR_ROLES_AGENT_GRPC_SERVICE_H

#include "agent/service.h"
#include "grpc/server.h"

#define AGENT_SERVICE_NAME "pillar_csi.agent.v1.AgentService"

/* A service description whose handlers call into a (must outlive the server). */
void agent_grpc_service(agent_service *a, struct grpc_service *out);

#endif
