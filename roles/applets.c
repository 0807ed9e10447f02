#include "applets.h"

#include <string.h>

#include "agent/agent.h"
#include "base/log.h"
#include "base/str.h"
#include "call/call.h"
#include "cli/cli.h"
#include "cli/outage.h"
#include "controller/controller.h"
#include "modprobe/modprobe.h"
#include "node/node.h"
#include "version/version.h"

static const struct applet applets[] = {
    {"controller", "pillar-controller", controller_main,
     "CSI controller service and reconcilers (Deployment)"},
    {"node", "pillar-node", node_main, "CSI node service on every worker (DaemonSet)"},
    {"agent", "pillar-agent", agent_main,
     "storage agent: backends and the kernel NVMe target (DaemonSet on storage nodes)"},
    {"version", NULL, version_main, "print the version line and the linked library versions"},
    {"apply", NULL, cli_apply_main, "create or update objects from a JSON file in the store"},
    {"get", NULL, cli_get_main, "print objects from the store (table or -o json)"},
    {"delete", NULL, cli_delete_main, "delete an object from the store"},
    {"dhchap", NULL, cli_dhchap_main,
     "NVMe in-band authentication: dhchap rotate NODE asks a worker for new keys"},
    {"call", NULL, call_main, "one gRPC call with a JSON request (agents, CSI endpoints)"},
    {"modprobe", NULL, modprobe_main, "load kernel modules (init containers); always exits 0"},
    {"outage-plan", NULL, cli_outage_plan_main,
     "what an outage of a storage node means: volumes, pods, owners, budget"},
    {"outage-status", NULL, cli_outage_status_main,
     "how far a storage node's outage has come: time left per volume, restore"},
    {"kubectl-pillar", "kubectl-pillar", cli_kubectl_pillar_main,
     "the kubectl plugin: kubectl pillar outage-plan|outage-status"},
};
#define N_APPLETS (sizeof(applets) / sizeof(applets[0]))

static const char *base_name(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;
	return s ? s + 1 : (p ? p : "");
}

const struct applet *applet_find(int argc, char **argv, int *argv_shift)
{
	const char *self = base_name(argc > 0 ? argv[0] : NULL);

	for (size_t i = 0; i < N_APPLETS; i++) {
		if (applets[i].symlink && strcmp(self, applets[i].symlink) == 0) {
			*argv_shift = 0;
			return &applets[i];
		}
	}
	if (argc < 2 || argv[1][0] == '-') {
		*argv_shift = -1;
		return NULL;
	}
	*argv_shift = 1;
	for (size_t i = 0; i < N_APPLETS; i++)
		if (strcmp(argv[1], applets[i].name) == 0)
			return &applets[i];
	return NULL;
}

static void usage(FILE *out)
{
	fprintf(out,
	        "Usage: pillar-csi <role> [flags]\n\n"
	        "pillar-csi is a Kubernetes CSI driver that exports ZFS zvols, LVM volumes and\n"
	        "files from storage nodes to workers over NVMe-oF/TCP.\n\nRoles:\n");
	for (size_t i = 0; i < N_APPLETS; i++)
		fprintf(out, "  %-11s %s\n", applets[i].name, applets[i].summary);
	fprintf(out,
	        "\nThe roles are also selected by the names pillar-controller, pillar-node and\n"
	        "pillar-agent (symlinks to this binary).  `pillar-csi <role> --help` lists a "
	        "role's flags.\n");
}

static const char *accepted(void)
{
	return "accepted: controller, node, agent, version, apply, get, delete, dhchap, call, "
	       "modprobe, outage-plan, outage-status, kubectl-pillar";
}

int applet_dispatch(int argc, char **argv)
{
	int shift;
	char q[900]; /* an argument as a message echoes it: no raw control byte */
	const struct applet *a = applet_find(argc, argv, &shift);

	if (a)
		return a->main(argc - shift, argv + shift);
	if (shift < 0) {
		if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
			usage(stdout);
			return 0;
		}
		if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
			version_print_line(stdout);
			return 0;
		}
		if (argc >= 2) {
			fprintf(stderr, "pillar-csi: unknown flag %s before the role; %s\n",
			        str_quote(q, sizeof(q), argv[1], 200), accepted());
			return 2;
		}
		usage(stderr);
		return 2;
	}
	fprintf(stderr, "pillar-csi: unknown role %s; %s\n", str_quote(q, sizeof(q), argv[1], 200),
	        accepted());
	return 2;
}

int role_parse_flags(const char *prog, const char *summary, const struct flag_def *defs, size_t n,
                     int argc, char **argv)
{
	struct err e = {0};
	int first = 0;
	int r = flags_parse(prog, defs, n, argc, argv, &first, &e);

	if (r == FLAGS_HELP) {
		flags_usage(stdout, prog, summary, defs, n);
		return 0;
	}
	if (r == FLAGS_VERSION) {
		version_print_line(stdout);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "%s\n", e.msg);
		return 2;
	}
	if (first < argc) {
		fprintf(stderr,
		        "%s: unexpected argument \"%s\"; this role takes flags only (see --help)\n",
		        prog, argv[first]);
		return 2;
	}
	return -1;
}
