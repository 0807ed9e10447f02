#include "controller/metrics.h"

void ctl_metrics_collect(struct ctl *c, struct metrics_text *t)
{
	metrics_text_single(t, "pillar_csi_store_ready",
	                    "Whether the object store answers (1) or not (0).", METRICS_GAUGE,
	                    ctl_store_ready(c) ? 1 : 0);
}
