/* controller/metrics — the controller's own families on /metrics (docs/metrics.md): what is read
 * from the object store at scrape time (store readiness, volumes by state, agents), and the
 * families the controller's code updates as it works. */
#ifndef PILLAR_ROLES_CONTROLLER_METRICS_H
#define PILLAR_ROLES_CONTROLLER_METRICS_H

#include "controller/ctl.h"
#include "metrics/metrics.h"

/* Writes the families read from c's store at scrape time: store readiness, volumes by phase,
 * unreconciled exports per agent, each agent's connection and ExportsReady. */
void ctl_metrics_collect(struct ctl *c, struct metrics_text *t);
/* Frees what the scrapes kept of the volumes (ctl_fini; NULL is a no-op). */
void ctl_metrics_volumes_free(struct ctl_metrics_volumes *m);
/* How many PillarVolumeStates the last scrape decoded: the others were carried over from the
 * scrape before at the same resourceVersion. */
size_t ctl_metrics_volumes_decoded(struct ctl *c);

/* Registers the families the controller updates as it works. */
void ctl_metrics_register(void);
/* A complete restore of agent sent volumes exports and took seconds. */
void ctl_metrics_restore(const char *agent, size_t volumes, double seconds);

#endif
