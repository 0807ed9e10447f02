#include "controller/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "controller/carry.h"
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

/* What one PillarVolumeState adds to the volume families.  The entries of the last scrape are
 * kept (ctl.metrics_volumes) sorted by name: a volume listed again at the same resourceVersion
 * is carried over without being parsed or decoded (model_list_each_skip), so a scrape decodes
 * only the volumes that changed since the one before. */
struct volume_entry {
	struct carry_head h;
	char *phase; /* "Unknown" when unset */
	char *agent; /* "" when none */
	/* whether its ExportReconciled counts as not True while its agent can reconcile exports,
	 * and while it cannot (model/outage.h derives the condition from the agent's) */
	bool open_available, open_unavailable;
};

struct ctl_metrics_volumes {
	struct volume_entry *v;
	size_t n;
	size_t decoded; /* by the last scrape */
};

/* One scrape's pass: the previous entries and the new (carry.h). */
struct volume_pass {
	struct carry_pass c;
	size_t decoded;
};

static void volume_entry_clear(void *entry)
{
	struct volume_entry *v = entry;
	free(v->phase);
	free(v->agent);
}

static void volume_entries_free(struct volume_entry *v, size_t n)
{
	carry_entries_free(v, n, sizeof(*v), volume_entry_clear);
}

void ctl_metrics_volumes_free(struct ctl_metrics_volumes *m)
{
	if (m)
		volume_entries_free(m->v, m->n);
	free(m);
}

/* A volume the previous scrape saw at this version: its entry moves into the new list. */
static bool volume_carried(const char *ns, const char *name, uint64_t rv, void *arg)
{
	struct volume_pass *p = arg;
	(void)ns;
	return carry_move(&p->c, name, rv);
}

static int volume_fresh(void *obj, void *arg)
{
	struct volume_pass *p = arg;
	const struct model_pvst *v = obj;
	struct volume_entry *t;
	if (!v->meta.name)
		return 0;
	if (!(t = carry_slot(&p->c)))
		return -ENOMEM;
	p->decoded++;
	t->h.rv = model_meta_rv(&v->meta);
	t->h.name = strdup(v->meta.name);
	t->phase = strdup(v->status.phase && *v->status.phase ? v->status.phase : "Unknown");
	t->agent = strdup(v->spec.agent_ref ? v->spec.agent_ref : "");
	const char *status, *reason;
	model_pvst_export_reconciled(v, false, &status, &reason);
	t->open_available = v->status.has_export_spec && strcmp(status, "True") != 0;
	model_pvst_export_reconciled(v, true, &status, &reason);
	t->open_unavailable = v->status.has_export_spec && strcmp(status, "True") != 0;
	p->c.n++;
	if (!t->h.name || !t->phase || !t->agent)
		return -ENOMEM;
	return 0;
}

/* Takes c's kept entries out (NULL, 0 when none), and puts *v, *n in their place. */
static void volumes_swap(struct ctl *c, struct volume_entry **v, size_t *n, size_t decoded)
{
	struct ctl_metrics_volumes *m;
	struct volume_entry *old = NULL;
	size_t n_old = 0;
	pthread_mutex_lock(&c->memo_mu);
	if (!(m = c->metrics_volumes) && *v)
		m = c->metrics_volumes = calloc(1, sizeof(*m));
	if (m) {
		old = m->v;
		n_old = m->n;
		m->v = *v;
		m->n = *n;
		if (*v)
			m->decoded = decoded;
	} else {
		volume_entries_free(*v,
		                    *n); /* out of memory: the next scrape decodes every volume */
	}
	pthread_mutex_unlock(&c->memo_mu);
	*v = old;
	*n = n_old;
}

size_t ctl_metrics_volumes_decoded(struct ctl *c)
{
	pthread_mutex_lock(&c->memo_mu);
	size_t n = c->metrics_volumes ? c->metrics_volumes->decoded : 0;
	pthread_mutex_unlock(&c->memo_mu);
	return n;
}

static bool tally_has(const struct tally *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->e[i].key, key) == 0)
			return t->e[i].v != 0;
	return false;
}

/* available: 1 for each PillarAgent whose exports can be reconciled now. */
static int note_agent(void *obj, void *arg)
{
	const struct model_pa *pa = obj;
	if (pa->meta.name)
		tally_add(arg, pa->meta.name, !model_pa_exports_unavailable(pa));
	return 0;
}

static void collect_volumes(struct ctl *c, struct metrics_text *t)
{
	struct volume_pass p = {.c = {.size = sizeof(struct volume_entry)}};
	struct tally phases = {0}, unreconciled = {0}, available = {0};
	struct volume_entry *old = NULL, *v;
	volumes_swap(c, &old, &p.c.n_old, 0); /* takes the entries (NULL, 0 in their place) */
	p.c.old = old;
	int r =
	    model_list_each(c->st, &model_pa_kind, NULL, NULL, note_agent, &available, NULL, NULL);
	if (r == 0)
		r = model_list_each_skip(c->st, &model_pvst_kind, NULL, NULL, volume_carried,
		                         volume_fresh, &p, NULL, NULL);
	volume_entries_free(old, p.c.n_old);
	v = p.c.v;
	if (r == 0 && p.c.err == 0) {
		for (size_t i = 0; i < p.c.n; i++) {
			const struct volume_entry *e = &v[i];
			tally_add(&phases, e->phase, 1);
			/* every agent gets a sample, 0 when all its exports are reconciled; a
			 * PillarAgent not listed counts as unavailable */
			if (*e->agent)
				tally_add(&unreconciled, e->agent,
				          tally_has(&available, e->agent) ? e->open_available
				                                          : e->open_unavailable);
		}
		metrics_text_header(t, "pillar_csi_volumes",
		                    "Volumes (PillarVolumeStates) by phase.", METRICS_GAUGE);
		tally_write(t, &phases, "pillar_csi_volumes", "phase");
		metrics_text_header(
		    t, "pillar_csi_volumes_export_unreconciled",
		    "Exported volumes of the agent whose ExportReconciled condition "
		    "is not True (the agent does not serve them as recorded yet).",
		    METRICS_GAUGE);
		tally_write(t, &unreconciled, "pillar_csi_volumes_export_unreconciled", "agent");
		carry_sort(&p.c);
	} else {
		volume_entries_free(v, p.c.n);
		v = NULL;
		p.c.n = 0;
	}
	volumes_swap(c, &v, &p.c.n, p.decoded); /* the entries were taken: nothing comes back */
	volume_entries_free(v, p.c.n);
	tally_clear(&phases);
	tally_clear(&unreconciled);
	tally_clear(&available);
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
