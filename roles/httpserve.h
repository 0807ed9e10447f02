/* httpserve — a plain-HTTP/1.1 GET listener for the roles' probe and metrics endpoints
 * (deploy.md §1.3).  One small thread per listener answers one connection at a time: the request
 * head is read with a size and time bound, answered by the handler, and the connection closed
 * (Connection: close).  Anything but "GET <path> HTTP/1.x" is answered 400. */
#ifndef PILLAR_ROLES_HTTPSERVE_H
#define PILLAR_ROLES_HTTPSERVE_H

#include "base/err.h"
#include "metrics/metrics.h"

struct httpserve;

/* Fills *status (200, 404, 503, …) and the body for path (the query string cut off). */
typedef void (*httpserve_fn)(void *ctx, const char *path, int *status, struct metrics_text *body);

/* addr NULL, "" or "0": nothing is served and *out is NULL.  0 or a negative errno. */
int httpserve_start(const char *addr, httpserve_fn fn, void *ctx, struct httpserve **out,
                    struct err *e);
/* Whether addr turns a listener off ("", "0" or NULL: httpserve_start then starts none). */
bool httpserve_addr_off(const char *addr);
/* A role's --metrics-bind-address: when it is off the process records no metrics at all
 * (metrics_disable; called before the role builds its servers). */
void role_metrics_gate(const char *addr);
/* The TCP port the listener is bound to, or -1 (NULL, or not TCP). */
int httpserve_port(const struct httpserve *h);
void httpserve_stop(struct httpserve *h); /* NULL is a no-op */

/* The /metrics endpoint of a role: serves every registered family on addr (registering the
 * build information and the process families first).  Same conventions as httpserve_start. */
int role_metrics_start(const char *addr, struct httpserve **out, struct err *e);
/* Registers pillar_csi_build_info and the process families (role_metrics_start does it). */
void role_metrics_register(void);
/* The handler role_metrics_start serves. */
void role_metrics_answer(void *ctx, const char *path, int *status, struct metrics_text *body);

#endif
