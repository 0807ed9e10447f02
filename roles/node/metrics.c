#include "node/metrics.h"

#include <time.h>

#include "base/time.h"
#include "node/internal.h"

static const char *const result_label[] = {"result", NULL};
static const double connect_buckets[] = {.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, -1};
static struct metrics_family connects =
    METRICS_FAMILY("pillar_csi_node_connects_total",
                   "NVMe-oF connects of NodeStageVolume (attach and namespace found), by result.",
                   METRICS_COUNTER, result_label, NULL, 2);
static struct metrics_family connect_seconds =
    METRICS_FAMILY("pillar_csi_node_connect_duration_seconds",
                   "Time a connect of NodeStageVolume took until the namespace was found.",
                   METRICS_HISTOGRAM, NULL, connect_buckets, 1);

void node_metrics_connect(bool ok, double seconds)
{
	metrics_inc(&connects, (const char *[]){ok ? "success" : "failure"}, 1);
	metrics_observe(&connect_seconds, NULL, seconds);
}

void node_metrics_register(struct node *n)
{
	metrics_register(&connects);
	/* both results from the start, so a rate() sees the first failure */
	metrics_child(&connects, (const char *[]){"success"});
	metrics_child(&connects, (const char *[]){"failure"});
	metrics_register(&connect_seconds);
	metrics_register_collector(node_metrics_collect, n);
}

enum { LIVE, DOWN, TMO, REMOVED, N_FAMILIES };

static const char *const names[N_FAMILIES] = {
    "pillar_csi_node_volume_path_live", "pillar_csi_node_volume_path_down_seconds",
    "pillar_csi_node_volume_ctrl_loss_tmo_seconds", "pillar_csi_node_volume_controller_removed"};
static const char *const helps[N_FAMILIES] = {
    "1 while a controller of the staged volume's NVMe subsystem is live, else 0.",
    "Seconds since this node plugin first saw the volume's NVMe path down (0 while live).",
    "The ctrl_loss_tmo of the volume's NVMe controller while its path is down: the kernel "
    "removes the controller this long after the path went down (absent when off).",
    "1 when the kernel removed every controller of the volume's subsystem (ctrl_loss_tmo ran "
    "out, or it was deleted): the volume no longer works on this node."};

struct scrape {
	struct node *n;
	int64_t now_ms;
	time_t now_s;
	int staged;
	struct metrics_text part[N_FAMILIES];
};

static void one_volume(const struct node_record *r, void *arg)
{
	struct scrape *s = arg;
	struct node_volume_health h;
	s->staged++;
	if (!r->subsys_nqn[0] ||
	    node_health_check(&s->n->health, &s->n->nvme, r, s->now_ms, s->now_s, &h, NULL) < 0)
		return;
	const char *labels[] = {"volume_id", r->volume_id, NULL};
	metrics_text_sample(&s->part[LIVE], names[LIVE], labels, h.live);
	metrics_text_sample(&s->part[DOWN], names[DOWN], labels, h.down_seconds);
	if (!h.live && !h.removed && h.ctrl_loss_tmo >= 0)
		metrics_text_sample(&s->part[TMO], names[TMO], labels, (double)h.ctrl_loss_tmo);
	metrics_text_sample(&s->part[REMOVED], names[REMOVED], labels, h.removed);
}

void node_metrics_collect(struct metrics_text *t, void *arg)
{
	struct scrape s = {.n = arg, .now_ms = time_mono_ms(), .now_s = time(NULL)};
	int r = node_records_each(s.n->state_dir, one_volume, &s);
	if (r >= 0) {
		metrics_text_single(t, "pillar_csi_node_staged_volumes",
		                    "Volumes staged on this worker (stage records).", METRICS_GAUGE,
		                    s.staged);
		for (int k = 0; k < N_FAMILIES; k++) {
			metrics_text_header(t, names[k], helps[k], METRICS_GAUGE);
			if (s.part[k].len)
				metrics_text_printf(t, "%s", s.part[k].buf);
		}
	}
	for (int k = 0; k < N_FAMILIES; k++)
		metrics_text_free(&s.part[k]);
}
