/* outage — `pillar-csi outage-plan AGENT` and `outage-status AGENT`, also the kubectl plugin
 * `kubectl pillar …` (docs/cli.md): what an outage of one storage node means for its volumes,
 * their pods and the workloads that own them, and how far an ongoing outage has come.
 *
 * outage_gather builds the document (model/outage.h) from the store; outage_text prints it for
 * people.  Both are separate from the commands so the unit tests drive them on a store of
 * fixtures. */
#ifndef PILLAR_ROLES_CLI_OUTAGE_H
#define PILLAR_ROLES_CLI_OUTAGE_H

#include <stdio.h>
#include <time.h>

#include "model/outage.h"
#include "store/store.h"

struct outage_query {
	const char *agent;
	bool status;          /* outage-status, else outage-plan */
	bool has_duration;    /* plan: --duration given */
	int64_t duration_sec; /* plan: the expected outage */
	time_t now;           /* status: the time the kernels' countdown is measured at */
};

/* The document of q into *out (cleared with model_type_clear(&model_outage_type, out)).  0, or
 * a store error with the reason in e (the agent not found is STORE_NOT_FOUND with the API
 * server's wording). */
int outage_gather(store *s, const struct outage_query *q, struct model_outage *out, struct err *e);
/* The document as text (docs/cli.md). */
void outage_text(FILE *f, const struct model_outage *o, time_t now);

int cli_outage_plan_main(int argc, char **argv);
int cli_outage_status_main(int argc, char **argv);
/* kubectl-pillar: the first argument names the command (outage-plan, outage-status). */
int cli_kubectl_pillar_main(int argc, char **argv);

#endif
