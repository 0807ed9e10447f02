/* call — `pillar-csi call ADDRESS /pkg.Service/Method [JSON|-]`: one gRPC call with a JSON
 * request and a JSON response, for operators and for the real-kernel scenarios (which have no
 * other gRPC client inside the VM).  Knows the AgentService, the CSI services and grpc.health.v1.
 * Exit 0 with the response on stdout; 1 with "<CODE>: <message>" on stderr when the call fails;
 * 2 on usage errors. */
#ifndef PILLAR_ROLES_CALL_H
#define PILLAR_ROLES_CALL_H

int call_main(int argc, char **argv);

#endif
