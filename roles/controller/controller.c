#include "controller/controller.h"

#include <stdbool.h>
#include <stdio.h>

#include "applets.h"

int controller_main(int argc, char **argv)
{
	const char *endpoint = "unix:///csi/csi.sock", *probe = ":8081", *metrics = ":8080";
	const char *cert = "", *key = "", *ca = "", *server_name = "", *store = NULL;
	bool leader_elect = false;
	int64_t agent_port = 9500;
	const struct flag_def defs[] = {
	    {"csi-endpoint", FLAG_STRING, &endpoint, "CSI socket for the sidecars", false},
	    {"leader-elect", FLAG_BOOL, &leader_elect, "run reconcilers only on the Lease holder",
	     false},
	    {"health-probe-bind-address", FLAG_STRING, &probe, "/healthz and /readyz", false},
	    {"metrics-bind-address", FLAG_STRING, &metrics,
	     "/metrics in Prometheus text format; 0 disables", false},
	    {"agent-default-port", FLAG_INT, &agent_port,
	     "agent port when PillarAgent.spec.nodeRef.port is unset", false},
	    {"agent-tls-cert", FLAG_STRING, &cert, "client certificate (PEM) for agent mTLS",
	     false},
	    {"agent-tls-key", FLAG_STRING, &key, "client private key (PEM) for agent mTLS", false},
	    {"agent-tls-ca", FLAG_STRING, &ca, "CA (PEM) that agent certificates chain to", false},
	    {"agent-tls-server-name", FLAG_STRING, &server_name,
	     "name expected in the agent certificate", false},
	    {"store", FLAG_STRING, &store,
	     "object store: kube (in a cluster), or dir:PATH for the embedded store", false},
	};
	int r =
	    role_parse_flags("pillar-csi controller",
	                     "CSI controller service and reconcilers: records every volume, "
	                     "publication and fencing generation\nand drives the storage agents.",
	                     defs, sizeof(defs) / sizeof(defs[0]), argc, argv);
	if (r >= 0)
		return r;
	bool any = *cert || *key || *ca, all = *cert && *key && *ca;
	if (any && !all) {
		fprintf(
		    stderr,
		    "--agent-tls-cert, --agent-tls-key and --agent-tls-ca must be set together\n");
		return 1;
	}
	if (agent_port < 1 || agent_port > 65535) {
		fprintf(stderr, "pillar-csi controller: --agent-default-port must be 1-65535\n");
		return 2;
	}
	fprintf(stderr, "pillar-csi controller: the controller service is not implemented yet\n");
	return 1;
}
