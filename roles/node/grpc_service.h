/* node/grpc_service — csi.v1.Identity and csi.v1.Node for the gRPC server, calling the
 * transport-independent handlers of node/service.h. */
#ifndef PILLAR_ROLES_NODE_GRPC_SERVICE_H
#define PILLAR_ROLES_NODE_GRPC_SERVICE_H

#include "grpc/server.h"
#include "node/service.h"

void node_grpc_identity_service(struct node *n, struct grpc_service *out);
void node_grpc_node_service(struct node *n, struct grpc_service *out);

#endif
