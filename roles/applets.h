/* applets — the table of roles in the one pillar-csi executable (the BusyBox applet model).
 *
 * The role comes from the base name of argv[0] when it is one of the symlink names
 * (pillar-controller, pillar-node, pillar-agent); otherwise from argv[1] (`pillar-csi agent`).
 */
#ifndef PILLAR_ROLES_APPLETS_H
#define PILLAR_ROLES_APPLETS_H

#include <stddef.h>
#include <stdio.h>

#include "base/flags.h"

struct applet {
	const char *name;    /* subcommand: controller, node, agent, version */
	const char *symlink; /* argv[0] base name that selects it directly, or NULL */
	int (*main)(int argc, char **argv);
	const char *summary;
};

/* Finds the applet for this command line.  Returns it with *argv_shift set to the number of
 * leading arguments to skip (0 for a symlink name, 1 for a subcommand), or NULL when no role
 * was named (*argv_shift = -1) or the name is unknown (*argv_shift = 1). */
const struct applet *applet_find(int argc, char **argv, int *argv_shift);

/* Runs the selected role and returns the process exit status (2 for usage errors). */
int applet_dispatch(int argc, char **argv);

/* Shared start of every role: parse flags; print help or the version line.  Returns -1 when the
 * role should go on, otherwise the exit status to return at once (0 after --help/--version,
 * 2 after a usage error, whose one-line message went to stderr). */
int role_parse_flags(const char *prog, const char *summary, const struct flag_def *defs, size_t n,
                     int argc, char **argv);

#endif
