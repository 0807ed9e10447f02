#include "controller/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/outage.h"
#include "model/pillar.h"
#include "rules/conditions.h"

static const char *const agent_label[] = {"agent", NULL};
static const double restore_buckets[] = {.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, -1};
/* Label sets: one per PillarAgent. */
#define AGENTS_CAP 512
static struct metrics_family restore_seconds = METRICS_FAMILY(
    "pillar_csi_restore_duration_seconds",
    "Time a complete export restore of an agent took (ReconcileState with every export).",
    METRICS_HISTOGRAM, NULL, restore_buckets, 1);
static struct metrics_family restore_volumes = METRICS_FAMILY(
    "pillar_csi_restore_last_volumes", "Exports sent in the last complete restore of the agent.",
    METRICS_GAUGE, agent_label, NULL, AGENTS_CAP);

void ctl_metrics_register(void)
{
	metrics_register(&restore_seconds);
	metrics_register(&restore_volumes);
}

void ctl_metrics_restore(const char *agent, size_t volumes, double seconds)
{
	metrics_set(&restore_volumes, (const char *[]){agent}, (int64_t)volumes);
	metrics_observe(&restore_seconds, NULL, seconds);
}

/* A small table of counts by text (phases, agents). */
struct tally {
	size_t n;
	struct tally_entry {
		char *key;
		double v;
	} * e;
};

static void tally_add(struct tally *t, const char *key, double v)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->e[i].key, key) == 0) {
			t->e[i].v += v;
			return;
		}
	struct tally_entry *ne = realloc(t->e, (t->n + 1) * sizeof(*ne));
	if (!ne)
		return;
	t->e = ne;
	if ((t->e[t->n].key = strdup(key)))
		t->e[t->n++].v = v;
}

static void tally_write(struct metrics_text *t, const struct tally *ty, const char *name,
                        const char *label)
{
	for (size_t i = 0; i < ty->n; i++) {
		const char *labels[] = {label, ty->e[i].key, NULL};
		metrics_text_sample(t, name, labels, ty->e[i].v);
	}
}

static void tally_clear(struct tally *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->e[i].key);
	free(t->e);
	*t = (struct tally){0};
}

struct volume_counts {
	struct tally phases, unreconciled;
	struct tally available; /* 1 for each agent whose exports can be reconciled now */
};

static bool tally_has(const struct tally *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->e[i].key, key) == 0)
			return t->e[i].v != 0;
	return false;
}

static int note_agent(void *obj, void *arg)
{
	const struct model_pa *pa = obj;
	struct volume_counts *vc = arg;
	if (pa->meta.name)
		tally_add(&vc->available, pa->meta.name, !model_pa_exports_unavailable(pa));
	return 0;
}

static int count_volume(void *obj, void *arg)
{
	const struct model_pvst *v = obj;
	struct volume_counts *vc = arg;
	const char *agent = v->spec.agent_ref ? v->spec.agent_ref : "";
	tally_add(&vc->phases, v->status.phase && *v->status.phase ? v->status.phase : "Unknown",
	          1);
	/* every agent gets a sample, 0 when all its exports are reconciled; ExportReconciled as
	 * derived from the agent's (model/outage.h), a PillarAgent not listed counting as
	 * unavailable */
	const char *status, *reason;
	model_pvst_export_reconciled(v, *agent && !tally_has(&vc->available, agent), &status,
	                             &reason);
	bool open = v->status.has_export_spec && strcmp(status, "True") != 0;
	if (*agent)
		tally_add(&vc->unreconciled, agent, open ? 1 : 0);
	return 0;
}

static void collect_volumes(struct ctl *c, struct metrics_text *t)
{
	struct volume_counts vc = {0};
	if (model_list_each(c->st, &model_pa_kind, NULL, NULL, note_agent, &vc, NULL, NULL) == 0 &&
	    model_list_each(c->st, &model_pvst_kind, NULL, NULL, count_volume, &vc, NULL, NULL) ==
	        0) {
		metrics_text_header(t, "pillar_csi_volumes",
		                    "Volumes (PillarVolumeStates) by phase.", METRICS_GAUGE);
		tally_write(t, &vc.phases, "pillar_csi_volumes", "phase");
		metrics_text_header(
		    t, "pillar_csi_volumes_export_unreconciled",
		    "Exported volumes of the agent whose ExportReconciled condition "
		    "is not True (the agent does not serve them as recorded yet).",
		    METRICS_GAUGE);
		tally_write(t, &vc.unreconciled, "pillar_csi_volumes_export_unreconciled", "agent");
	}
	tally_clear(&vc.phases);
	tally_clear(&vc.unreconciled);
	tally_clear(&vc.available);
}

struct agent_states {
	struct tally connected, ready;
	struct metrics_text reasons; /* samples of pillar_csi_agent_exports_ready */
};

static int agent_state(void *obj, void *arg)
{
	const struct model_pa *pa = obj;
	struct agent_states *as = arg;
	const struct model_conds *cs = &pa->status.conditions;
	const char *name = pa->meta.name ? pa->meta.name : "";
	tally_add(&as->connected, name,
	          strcmp(model_cond_status(cs, RULES_COND_AGENT_CONNECTED), "True") == 0);
	const char *reason = model_cond_reason(cs, RULES_COND_EXPORTS_READY);
	const char *labels[] = {"agent", name, "reason", *reason ? reason : "Unknown", NULL};
	metrics_text_sample(&as->reasons, "pillar_csi_agent_exports_ready", labels,
	                    strcmp(model_cond_status(cs, RULES_COND_EXPORTS_READY), "True") == 0);
	return 0;
}

static void collect_agents(struct ctl *c, struct metrics_text *t)
{
	struct agent_states as = {0};
	if (model_list_each(c->st, &model_pa_kind, NULL, NULL, agent_state, &as, NULL, NULL) == 0) {
		metrics_text_header(t, "pillar_csi_agent_connected",
		                    "Whether the controller reaches the agent (the PillarAgent's "
		                    "AgentConnected condition is True).",
		                    METRICS_GAUGE);
		tally_write(t, &as.connected, "pillar_csi_agent_connected", "agent");
		metrics_text_header(
		    t, "pillar_csi_agent_exports_ready",
		    "Whether the agent serves its exports (ExportsReady True), with "
		    "the condition's reason (ExportRestorePending while a restore "
		    "waits).",
		    METRICS_GAUGE);
		if (as.reasons.len)
			metrics_text_printf(t, "%s", as.reasons.buf);
	}
	tally_clear(&as.connected);
	metrics_text_free(&as.reasons);
}

void ctl_metrics_collect(struct ctl *c, struct metrics_text *t)
{
	metrics_text_single(t, "pillar_csi_store_ready",
	                    "Whether the object store answers (1) or not (0).", METRICS_GAUGE,
	                    ctl_store_ready(c) ? 1 : 0);
	collect_agents(c, t);
	collect_volumes(c, t);
}
