/* controller/grpc_service — csi.v1.Identity and csi.v1.Controller for the gRPC server, calling
 * the handlers of controller/csi.h. */
#ifndef PILLAR_ROLES_CONTROLLER_GRPC_SERVICE_H
#define PILLAR_ROLES_CONTROLLER_GRPC_SERVICE_H

#include "controller/csi.h"
#include "grpc/server.h"

void controller_grpc_identity_service(struct ctl *c, struct grpc_service *out);
void controller_grpc_controller_service(struct ctl *c, struct grpc_service *out);

#endif
