/* probes — the controller's plain-HTTP endpoints (deploy.md §1.3): /healthz (the process is
 * alive) and /readyz (the object store answers) on --health-probe-bind-address, and /metrics in
 * Prometheus text format on --metrics-bind-address ("0" disables it).  One small thread per
 * listener (roles/httpserve). */
#ifndef PILLAR_ROLES_CONTROLLER_PROBES_H
#define PILLAR_ROLES_CONTROLLER_PROBES_H

#include "base/err.h"
#include "controller/ctl.h"
#include "metrics/metrics.h"

struct probes;

/* Either address may be NULL, "" or "0" (not served).  0 or a negative errno. */
int probes_start(struct ctl *c, const char *health_addr, const char *metrics_addr,
                 struct probes **out, struct err *e);
/* TCP port the health (i = 0) or metrics (i = 1) listener is bound to, or -1. */
int probes_port(const struct probes *p, int i);
void probes_stop(struct probes *p); /* NULL is a no-op */

/* The response for one request path: fills status (200, 404, 503) and a body. */
void probes_answer(struct ctl *c, bool metrics, const char *path, int *status,
                   struct metrics_text *body);

#endif
