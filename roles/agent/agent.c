#include "agent/agent.h"

#include <stdbool.h>
#include <stdio.h>

#include "applets.h"
#include "base/log.h"

int agent_main(int argc, char **argv)
{
	const char *listen = ":9500", *config = NULL, *configfs = "/sys/kernel/config";
	const char *state_dir = "/var/lib/pillar-csi/agent", *cert = "", *key = "", *ca = "";
	int64_t grace_ms = 5000;
	const struct flag_def defs[] = {
	    {"listen-address", FLAG_STRING, &listen, "gRPC listen address ([host]:port)", false},
	    {"config", FLAG_STRING, &config, "path of the JSON configuration file (backends)",
	     true},
	    {"configfs-root", FLAG_STRING, &configfs,
	     "configfs mount; nvmet lives under <root>/nvmet", false},
	    {"state-dir", FLAG_STRING, &state_dir,
	     "durable state: fencing marks (generations/) and identity pins (nvmet-identity/)",
	     false},
	    {"shutdown-grace-period", FLAG_DURATION, &grace_ms,
	     "time between reporting NOT_SERVING and stopping", false},
	    {"tls-cert", FLAG_STRING, &cert, "server certificate (PEM) for mutual TLS", false},
	    {"tls-key", FLAG_STRING, &key, "server private key (PEM) for mutual TLS", false},
	    {"tls-ca", FLAG_STRING, &ca, "CA (PEM) that client certificates must chain to", false},
	};
	int r = role_parse_flags(
	    "pillar-csi agent",
	    "Storage agent: creates, expands and deletes volumes in ZFS pools, LVM "
	    "volume groups or a directory,\nexports them through the kernel NVMe-oF/TCP "
	    "target (nvmet) and keeps fencing marks and identity pins on disk.",
	    defs, sizeof(defs) / sizeof(defs[0]), argc, argv);
	if (r >= 0)
		return r;
	bool any = *cert || *key || *ca, all = *cert && *key && *ca;
	if (any && !all) {
		fprintf(stderr, "--tls-cert, --tls-key and --tls-ca must be set together\n");
		return 1;
	}
	fprintf(stderr, "pillar-csi agent: the agent service is not implemented yet\n");
	return 1;
}
