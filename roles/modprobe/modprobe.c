#include "modprobe/modprobe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "applets.h"
#include "base/exec.h"
#include "base/log.h"

static int valid_module(const char *m)
{
	if (!*m || strlen(m) > 64)
		return 0;
	for (const char *c = m; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
			return 0;
	return 1;
}

int modprobe_main(int argc, char **argv)
{
	const char *cmd = "modprobe";
	const struct flag_def defs[] = {
	    {"modprobe", FLAG_STRING, &cmd, "the modprobe command to run", false},
	};
	char **pos = calloc((size_t)argc + 1, sizeof(char *));
	int npos = 0, r;
	struct err e = {0};

	if (!pos)
		return 0;
	r = flags_parse_mixed("pillar-csi modprobe", defs, 1, argc, argv, pos, &npos, &e);
	if (r == FLAGS_HELP) {
		flags_usage(
		    stdout, "pillar-csi modprobe",
		    "Load kernel modules for an init container: pillar-csi modprobe MODULE...\n"
		    "Always exits 0; each module's result is logged.",
		    defs, 1);
		free(pos);
		return 0;
	}
	if (r < 0)
		log_error("bad arguments", "error", e.msg);
	for (int i = 0; r >= 0 && i < npos; i++) {
		struct exec_result res;
		if (!valid_module(pos[i])) {
			log_error("not a module name; skipped", "module", pos[i]);
			continue;
		}
		const char *args[] = {cmd, pos[i], NULL};
		struct exec_opts o = {.timeout_ms = 60000};
		int rc = exec_run(args, &o, &res, &e);
		if (rc == 0 && res.exit_code == 0)
			log_info("module loaded", "module", pos[i]);
		else
			log_error("module not loaded", "module", pos[i], "error",
			          rc < 0 ? e.msg : exec_result_summary(&res));
		exec_result_free(&res);
	}
	free(pos);
	return 0;
}
