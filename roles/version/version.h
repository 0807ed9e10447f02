/* version — the build's identity and the versions of the libraries actually linked. */
#ifndef PILLAR_ROLES_VERSION_H
#define PILLAR_ROLES_VERSION_H

#include <stdio.h>

const char *version_string(void); /* "0.1.0": CSI vendor_version, agent_version */
const char *version_commit(void);
const char *version_build_date(void);

/* "pillar-csi <version> (<commit>)" and a newline. */
void version_print_line(FILE *out);

/* `pillar-csi version [--output=text|json]`. */
int version_main(int argc, char **argv);

#endif
