/* outage_text: the outage-plan / outage-status document for people (docs/cli.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/outage.h"

#define COLS 6

/* Rows of at most COLS cells, printed aligned as kubectl's tables (three spaces apart). */
struct table {
	size_t n, cap, ncol;
	char *(*rows)[COLS];
	size_t width[COLS];
};

static void table_add(struct table *t, const char *const *cells)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		char *(*grown)[COLS] = realloc(t->rows, cap * sizeof(*grown));
		if (!grown)
			return; /* the row is left out; the table stays consistent */
		t->rows = grown;
		t->cap = cap;
	}
	for (size_t c = 0; c < t->ncol; c++) {
		t->rows[t->n][c] = strdup(cells[c] ? cells[c] : "");
		size_t w = t->rows[t->n][c] ? strlen(t->rows[t->n][c]) : 0;
		if (w > t->width[c])
			t->width[c] = w;
	}
	t->n++;
}

static void table_print(FILE *f, struct table *t)
{
	for (size_t r = 0; r < t->n; r++) {
		for (size_t c = 0; c < t->ncol; c++) {
			const char *v = t->rows[r][c] ? t->rows[r][c] : "";
			if (c + 1 < t->ncol)
				fprintf(f, "%-*s   ", (int)t->width[c], v);
			else
				fprintf(f, "%s\n", v);
			free(t->rows[r][c]);
		}
	}
	free(t->rows);
}

/* "120s", "600s (kernel default)", "never (-1)". */
static void seconds(char *buf, size_t cap, int64_t v, bool kernel_default)
{
	if (v < 0)
		snprintf(buf, cap, "never (%lld)", (long long)v);
	else
		snprintf(buf, cap, "%llds%s", (long long)v,
		         kernel_default ? " (kernel default)" : "");
}

static void claim_name(char *buf, size_t cap, const struct model_outage_volume *v)
{
	if (v->has_claim)
		snprintf(buf, cap, "%s/%s", v->claim.ns ? v->claim.ns : "",
		         v->claim.name ? v->claim.name : "");
	else
		snprintf(buf, cap, "<none>");
}

/* "a,b" of a list, "<none>" when empty. */
static void joined(char *buf, size_t cap, const struct model_strs *l)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < l->n && o < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? "," : "", l->v[i]);
	if (!l->n)
		snprintf(buf, cap, "<none>");
}

static void pods_cell(char *buf, size_t cap, const struct model_outage_volume *v)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < v->n_pods && o < cap; i++) {
		const struct model_outage_pod *p = &v->pods[i];
		o += (size_t)snprintf(buf + o, cap - o, "%s%s/%s", i ? ", " : "", p->ns, p->name);
		if (o < cap)
			o += (size_t)snprintf(buf + o, cap - o,
			                      p->has_owner ? " (%s %s)" : " (no owner)",
			                      p->owner.kind, p->owner.name);
	}
	if (!v->n_pods)
		snprintf(buf, cap, "<none>");
}

static void plan_table(FILE *f, const struct model_outage *o)
{
	struct table t = {.ncol = 6};
	char c[4][1024], tmo[64], delay[64];
	table_add(
	    &t, (const char *[]){"PVC", "PV", "SIZE", "CTRL-LOSS-TMO", "RECONNECT-DELAY", "NODES"});
	for (size_t i = 0; i < o->n_volumes; i++) {
		const struct model_outage_volume *v = &o->volumes[i];
		claim_name(c[0], sizeof(c[0]), v);
		seconds(tmo, sizeof(tmo), v->ctrl_loss_tmo, v->ctrl_loss_tmo_default);
		seconds(delay, sizeof(delay), v->reconnect_delay, v->reconnect_delay_default);
		joined(c[1], sizeof(c[1]), &v->published_nodes);
		table_add(&t, (const char *[]){c[0], v->pv, v->capacity ? v->capacity : "", tmo,
		                               delay, c[1]});
	}
	table_print(f, &t);
	fprintf(f, "\n");
	for (size_t i = 0; i < o->n_volumes; i++) {
		claim_name(c[0], sizeof(c[0]), &o->volumes[i]);
		pods_cell(c[1], sizeof(c[1]), &o->volumes[i]);
		fprintf(f, "Pods of %s: %s\n", c[0], c[1]);
	}
}

static void plan_duration(FILE *f, const struct model_outage *o)
{
	size_t risky = 0;
	char c[1024], tmo[64];
	for (size_t i = 0; i < o->n_volumes; i++)
		risky += o->volumes[i].at_risk;
	if (!risky) {
		fprintf(f,
		        "\nAn outage of %llds is within the budget: the workers' kernels keep "
		        "retrying, and I/O resumes when the storage node is back.\n",
		        (long long)o->duration);
		return;
	}
	fprintf(f,
	        "\nAn outage of %llds outlasts the ctrlLossTmo of %zu volume%s: their workers' "
	        "kernels would give up and their filesystems shut down.\n",
	        (long long)o->duration, risky, risky == 1 ? "" : "s");
	for (size_t i = 0; i < o->n_volumes; i++) {
		const struct model_outage_volume *v = &o->volumes[i];
		if (!v->at_risk)
			continue;
		claim_name(c, sizeof(c), v);
		seconds(tmo, sizeof(tmo), v->ctrl_loss_tmo, v->ctrl_loss_tmo_default);
		fprintf(f, "  %s (%s): ctrlLossTmo %s\n", c, v->pv, tmo);
	}
	if (!o->n_workloads) {
		fprintf(f, "No pod uses them; nothing to stop.\n");
		return;
	}
	fprintf(f, "Before the maintenance, stop the workloads that use them:\n");
	for (size_t i = 0; i < o->n_workloads; i++) {
		const struct model_outage_workload *w = &o->workloads[i];
		if (w->stop)
			fprintf(f, "  %s\n", w->stop);
		else
			fprintf(f, "  %s %s/%s: %s\n", w->kind, w->ns, w->name, w->note);
	}
	fprintf(f,
	        "and wait until their VolumeAttachments are gone: kubectl get volumeattachment\n");
	fprintf(f, "After the maintenance, start them again:\n");
	for (size_t i = 0; i < o->n_workloads; i++)
		if (o->workloads[i].start)
			fprintf(f, "  %s\n", o->workloads[i].start);
		else
			fprintf(f, "  %s %s/%s: see above\n", o->workloads[i].kind,
			        o->workloads[i].ns, o->workloads[i].name);
}

static void plan_text(FILE *f, const struct model_outage *o)
{
	fprintf(f, "PillarAgent %s: %lld volume%s, %lld published, %lld connected host%s\n",
	        o->agent, (long long)o->volume_count, o->volume_count == 1 ? "" : "s",
	        (long long)o->published_volumes, (long long)o->connected_hosts,
	        o->connected_hosts == 1 ? "" : "s");
	if (o->has_budget)
		fprintf(f,
		        "Outage budget: %llds (the smallest ctrlLossTmo of a published volume)\n\n",
		        (long long)o->budget);
	else
		fprintf(f, "Outage budget: none (no published volume whose kernels give up)\n\n");
	plan_table(f, o);
	if (o->has_duration)
		plan_duration(f, o);
}

static void status_text(FILE *f, const struct model_outage *o, time_t now)
{
	const struct model_outage_cond *ac = &o->agent_connected, *er = &o->exports_ready;
	char ago[64], c[2][1024], tmo[64], left[64];
	if (o->reachable) {
		fprintf(f, "PillarAgent %s: reachable (AgentConnected=True %s)\n", o->agent,
		        ac->reason ? ac->reason : "");
	} else if (o->unreachable_since) {
		cli_age(o->unreachable_since, (long long)now, ago, sizeof(ago));
		fprintf(f, "PillarAgent %s: unreachable since %s (%s ago; AgentConnected=%s %s)\n",
		        o->agent, o->unreachable_since, ago, ac->status ? ac->status : "",
		        ac->reason ? ac->reason : "");
	} else {
		fprintf(f,
		        "PillarAgent %s: not known to be reachable (no AgentConnected condition)\n",
		        o->agent);
	}
	fprintf(f, "ExportsReady: %s %s%s%s\n\n", er->status ? er->status : "<none>",
	        er->reason ? er->reason : "", er->message && *er->message ? ": " : "",
	        er->message ? er->message : "");
	struct table t = {.ncol = 6};
	table_add(&t, (const char *[]){"PVC", "PV", "NODES", "CTRL-LOSS-TMO", "KERNELS GIVE UP",
	                               "EXPORT"});
	for (size_t i = 0; i < o->n_volumes; i++) {
		const struct model_outage_volume *v = &o->volumes[i];
		claim_name(c[0], sizeof(c[0]), v);
		joined(c[1], sizeof(c[1]), &v->published_nodes);
		seconds(tmo, sizeof(tmo), v->ctrl_loss_tmo, v->ctrl_loss_tmo_default);
		if (v->given_up)
			snprintf(left, sizeof(left), "given up");
		else if (v->has_seconds_left)
			snprintf(left, sizeof(left), "in %llds", (long long)v->seconds_left);
		else if (v->has_given_up)
			snprintf(left, sizeof(left), "never");
		else
			snprintf(left, sizeof(left), "-");
		table_add(&t,
		          (const char *[]){c[0], v->pv, c[1], tmo, left,
		                           v->export_reconciled ? v->export_reconciled : "<none>"});
	}
	table_print(f, &t);
}

void outage_text(FILE *f, const struct model_outage *o, time_t now)
{
	if (o->has_reachable)
		status_text(f, o, now);
	else
		plan_text(f, o);
}
