#include "node/node.h"

#include <stdio.h>
#include <stdlib.h>

#include "applets.h"

int node_main(int argc, char **argv)
{
	const char *endpoint = "unix:///var/lib/kubelet/plugins/pillar-csi.bhyoo.com/csi.sock";
	const char *node_id = NULL, *state_dir = "/var/lib/pillar-csi/node", *store = NULL;
	const struct flag_def defs[] = {
	    {"csi-endpoint", FLAG_STRING, &endpoint, "CSI socket (unix:///path)", false},
	    {"node-id", FLAG_STRING, &node_id,
	     "Kubernetes node name (default: the NODE_NAME environment variable)", false},
	    {"state-dir", FLAG_STRING, &state_dir, "stage records of staged volumes", false},
	    {"store", FLAG_STRING, &store, "object store: kube, or dir:PATH for the embedded store",
	     false},
	};
	int r = role_parse_flags(
	    "pillar-csi node",
	    "CSI node service: connects to NVMe-oF/TCP targets with the kernel "
	    "initiator, formats blank devices,\nmounts and expands volumes, and keeps "
	    "a durable record of every staged volume.",
	    defs, sizeof(defs) / sizeof(defs[0]), argc, argv);
	if (r >= 0)
		return r;
	if (!node_id || !*node_id)
		node_id = getenv("NODE_NAME");
	if (!node_id || !*node_id) {
		fprintf(stderr, "pillar-csi node: no node id: set --node-id or NODE_NAME\n");
		return 1;
	}
	fprintf(stderr, "pillar-csi node: the node service is not implemented yet\n");
	return 1;
}
