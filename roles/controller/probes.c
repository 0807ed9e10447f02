#include "controller/probes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/metrics.h"
#include "httpserve.h"

struct probes {
	struct ctl *c;
	struct httpserve *l[2];
};

void probes_answer(struct ctl *c, bool metrics, const char *path, int *status,
                   struct metrics_text *body)
{
	if (!metrics && strcmp(path, "/healthz") == 0) {
		*status = 200;
		metrics_text_printf(body, "ok\n");
	} else if (!metrics && strcmp(path, "/readyz") == 0) {
		bool ok = ctl_store_ready(c);
		*status = ok ? 200 : 503;
		metrics_text_printf(body, ok ? "ok\n" : "object store not reachable\n");
	} else if (metrics && strcmp(path, "/metrics") == 0) {
		*status = 200;
		metrics_write(body);
		ctl_metrics_collect(c, body);
	} else {
		*status = 404;
		metrics_text_printf(body, "not found\n");
	}
}

static void answer_health(void *ctx, const char *path, int *status, struct metrics_text *body)
{
	probes_answer(ctx, false, path, status, body);
}

static void answer_metrics(void *ctx, const char *path, int *status, struct metrics_text *body)
{
	probes_answer(ctx, true, path, status, body);
}

int probes_start(struct ctl *c, const char *health_addr, const char *metrics_addr,
                 struct probes **out, struct err *e)
{
	struct probes *p = calloc(1, sizeof(*p));
	int r;
	*out = NULL;
	if (!p)
		return err_set(e, -ENOMEM, "probes: out of memory");
	p->c = c;
	role_metrics_register();
	ctl_metrics_register();
	if ((r = httpserve_start(health_addr, answer_health, c, &p->l[0], e)) < 0 ||
	    (r = httpserve_start(metrics_addr, answer_metrics, c, &p->l[1], e)) < 0) {
		err_prefix(e, "probes");
		probes_stop(p);
		return r;
	}
	*out = p;
	return 0;
}

int probes_port(const struct probes *p, int i)
{
	if (!p || i < 0 || i > 1)
		return -1;
	return httpserve_port(p->l[i]);
}

void probes_stop(struct probes *p)
{
	if (!p)
		return;
	httpserve_stop(p->l[0]);
	httpserve_stop(p->l[1]);
	free(p);
}
