/* outage_cmd: the outage-plan / outage-status commands and the kubectl-pillar plugin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "applets.h"
#include "base/str.h"
#include "cli/outage.h"
#include "storeflags.h"

struct outage_args {
	const char *url, *context, *out, *agent;
	struct store_flags sf;
	int64_t duration_ms;
	bool has_duration;
};

/* kubectl's choice of kubeconfig (clientcmd's loading rules): --kubeconfig, else the first
 * existing file of $KUBECONFIG (a colon-separated list; kubectl merges the files, here the
 * first one that exists is used whole), else ~/.kube/config when it exists, else none (the
 * in-cluster configuration). */
static const char *kubectl_kubeconfig(const char *flag, char *buf, size_t cap)
{
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
	if (flag && *flag)
		return flag;
	for (const char *p = env; p && *p;) {
		size_t n = strcspn(p, ":");
		if (n > 0 && n < cap) {
			snprintf(buf, cap, "%.*s", (int)n, p);
			if (access(buf, F_OK) == 0)
				return buf;
		}
		p += n + (p[n] == ':');
	}
	if (home && *home && (size_t)snprintf(buf, cap, "%s/.kube/config", home) < cap &&
	    access(buf, F_OK) == 0)
		return buf;
	return NULL;
}

static int open_outage_store(struct outage_args *a, store **s)
{
	struct store_open_opts o;
	struct err e = {0};
	char path[4096];
	a->sf.kubeconfig = kubectl_kubeconfig(a->sf.kubeconfig, path, sizeof(path));
	if (store_flags_opts(&a->sf, "pillar-csi", &o, &e) < 0) {
		fprintf(stderr, "error: %s\n", e.msg);
		return 2;
	}
	o.context = a->context;
	if (store_open(a->url, false, &o, s, &e) < 0) {
		fprintf(stderr, "error: %s\n", e.msg);
		return 1;
	}
	return 0;
}

/* -1 to go on, else the exit status. */
static int outage_args_parse(const char *prog, bool plan, int argc, char **argv,
                             struct outage_args *a)
{
	const char *env = getenv("PILLAR_CSI_STORE"), *duration = NULL;
	a->url = env && *env ? env : "kube";
	const struct flag_def defs[] = {
	    {"o", FLAG_STRING, &a->out, "output format: json or yaml (default: text)", false},
	    {"output", FLAG_STRING, &a->out, "same as -o", false},
	    {"store", FLAG_STRING, &a->url,
	     "object store: dir:PATH or kube (default $PILLAR_CSI_STORE, else kube)", false},
	    {"context", FLAG_STRING, &a->context, "the kubeconfig context to use (as kubectl's)",
	     false},
	    STORE_FLAG_DEFS(&a->sf),
	    {"duration", FLAG_STRING, &duration,
	     "the expected outage (Go duration: 10m, 1h30m): names the volumes whose ctrlLossTmo "
	     "is shorter and the commands to stop and restart their workloads",
	     false},
	};
	size_t n = sizeof(defs) / sizeof(defs[0]) - (plan ? 0 : 1);
	char **pos = calloc((size_t)argc + 1, sizeof(char *));
	int npos = 0;
	struct err e = {0};
	if (!pos)
		return 1;
	int r = flags_parse_mixed(prog, defs, n, argc, argv, pos, &npos, &e);
	a->agent = npos == 1 ? pos[0] : NULL;
	free(pos);
	if (r == FLAGS_HELP) {
		flags_usage(stdout, prog,
		            plan ? "What an outage of the storage node AGENT means: its volumes, "
		                   "their pods and owners, the outage budget (docs/cli.md)."
		                 : "How far an outage of the storage node AGENT has come: since "
		                   "when, the time left per volume, the restore (docs/cli.md).",
		            defs, n);
		return 0;
	}
	if (r == FLAGS_VERSION)
		return applet_dispatch(2, (char *[]){"pillar-csi", "--version", NULL});
	if (r < 0) {
		fprintf(stderr, "%s\n", e.msg);
		return 2;
	}
	if (!a->agent) {
		fprintf(stderr, "%s: usage: %s AGENT%s [-o json|yaml] [--store=dir:PATH|kube]\n",
		        prog, prog, plan ? " [--duration=DURATION]" : "");
		return 2;
	}
	char q[900]; /* a value as the message echoes it: no raw control byte */
	if (a->out && strcmp(a->out, "json") && strcmp(a->out, "yaml")) {
		fprintf(stderr, "%s: -o takes json or yaml, not %s\n", prog,
		        str_quote(q, sizeof(q), a->out, 200));
		return 2;
	}
	if (duration && (flags_parse_duration(duration, &a->duration_ms) < 0 || !*duration)) {
		fprintf(stderr, "%s: --duration takes a duration such as 10m or 1h30m, not %s\n",
		        prog, str_quote(q, sizeof(q), duration, 200));
		return 2;
	}
	a->has_duration = duration != NULL;
	return -1;
}

static int outage_main(const char *prog, bool plan, int argc, char **argv)
{
	struct outage_args a = {.sf = STORE_FLAGS_INIT};
	int r = outage_args_parse(prog, plan, argc, argv, &a);
	store *s = NULL;
	if (r >= 0 || (r = open_outage_store(&a, &s)) != 0)
		return r;
	struct outage_query q = {.agent = a.agent,
	                         .status = !plan,
	                         .has_duration = a.has_duration,
	                         .duration_sec = a.duration_ms / 1000,
	                         .now = time(NULL)};
	struct model_outage o;
	struct err e = {0};
	r = outage_gather(s, &q, &o, &e);
	store_close(s);
	if (r < 0) {
		fprintf(stderr, "Error from server (%s): %s\n", store_reason(r), e.msg);
		return 1;
	}
	if (a.out) {
		char *text = model_outage_print(&o, !strcmp(a.out, "yaml"));
		if (text)
			fputs(text, stdout);
		else
			fprintf(stderr, "error: out of memory\n");
		r = text ? 0 : 1;
		free(text);
	} else {
		outage_text(stdout, &o, q.now);
	}
	model_type_clear(&model_outage_type, &o);
	return r;
}

int cli_outage_plan_main(int argc, char **argv)
{
	return outage_main("pillar-csi outage-plan", true, argc, argv);
}

int cli_outage_status_main(int argc, char **argv)
{
	return outage_main("pillar-csi outage-status", false, argc, argv);
}

int cli_kubectl_pillar_main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";
	if (!strcmp(cmd, "outage-plan"))
		return outage_main("kubectl pillar outage-plan", true, argc - 1, argv + 1);
	if (!strcmp(cmd, "outage-status"))
		return outage_main("kubectl pillar outage-status", false, argc - 1, argv + 1);
	if (!strcmp(cmd, "--version"))
		return applet_dispatch(2, (char *[]){"pillar-csi", "--version", NULL});
	bool help = !strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help");
	char q[900]; /* the command as the message echoes it: no raw control byte */
	fprintf(help ? stdout : stderr,
	        "%s%s%sUsage: kubectl pillar COMMAND AGENT [flags]\n\n"
	        "Commands (pillar-csi's operator commands as a kubectl plugin):\n"
	        "  outage-plan     what an outage of the storage node AGENT means, and what to "
	        "stop first\n"
	        "  outage-status   how far an outage of AGENT has come, and the restore\n\n"
	        "`kubectl pillar COMMAND --help` lists a command's flags.\n",
	        *cmd && !help ? "kubectl pillar: unknown command " : "",
	        help   ? ""
	        : *cmd ? str_quote(q, sizeof(q), cmd, 200)
	               : "",
	        *cmd && !help ? "\n" : "");
	return help ? 0 : 2;
}
