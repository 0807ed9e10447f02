/* agent_counts — the PillarAgent's status counts (reconcile.h: reconcile_agent_counts).
 *
 * Each pass lists the agent's volumes (label pillar-csi.bhyoo.com/agent) once, but a volume
 * whose resourceVersion equals the one the agent's previous pass recorded is neither parsed nor
 * decoded: its entry of that pass is carried over (model_list_each_skip), so an idle controller
 * does not decode every volume every 30 s. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/carry.h"
#include "controller/reconcile.h"
#include "model/outage.h"

/* What one volume adds to the counts. */
struct tally_entry {
	struct carry_head h;
	struct model_nvmeof_tcp tmo; /* only has_ctrl_loss_tmo / ctrl_loss_tmo */
	struct model_strs nodes;     /* publishedNodes[].nodeID */
};

struct agent_tally {
	struct agent_tally *next;
	struct tally_entry *v; /* sorted by name */
	size_t n;
	char agent[];
};

/* One pass: the previous entries and the new (carry.h), for one agent. */
struct tally_pass {
	const char *agent;
	struct carry_pass c;
};

static void entry_clear(void *entry)
{
	struct tally_entry *t = entry;
	model_strs_clear(&t->nodes);
}

static void entries_free(struct tally_entry *v, size_t n)
{
	carry_entries_free(v, n, sizeof(*v), entry_clear);
}

void reconcile_agent_tallies_free(struct agent_tally *t)
{
	while (t) {
		struct agent_tally *next = t->next;
		entries_free(t->v, t->n);
		free(t);
		t = next;
	}
}

/* A volume the previous pass saw at this version: its entry moves into the new list. */
static bool carried(const char *ns, const char *name, uint64_t rv, void *arg)
{
	struct tally_pass *p = arg;
	(void)ns;
	return carry_move(&p->c, name, rv);
}

/* The entry of volume v (which names agent in its agentRef) after the new ones of c: 0, or
 * -ENOMEM. */
static int entry_add(struct carry_pass *c, const struct model_pvst *v)
{
	struct tally_entry *t = carry_slot(c);
	if (!t || !(t->h.name = strdup(v->meta.name)))
		return -ENOMEM;
	c->n++;
	t->h.rv = model_meta_rv(&v->meta);
	const struct model_nvmeof_tcp *n = model_pvst_nvmeof_tcp(v);
	t->tmo.has_ctrl_loss_tmo = n && n->has_ctrl_loss_tmo;
	t->tmo.ctrl_loss_tmo = n ? n->ctrl_loss_tmo : 0;
	for (size_t i = 0; i < v->status.n_published; i++)
		if (v->status.published[i].node_id &&
		    model_strs_add(&t->nodes, v->status.published[i].node_id) < 0)
			return -ENOMEM;
	return 0;
}

static int fresh(void *obj, void *arg)
{
	struct tally_pass *p = arg;
	const struct model_pvst *v = obj;
	if (!v->meta.name || !v->spec.agent_ref || strcmp(v->spec.agent_ref, p->agent))
		return 0;
	return entry_add(&p->c, v);
}

static void memo_swap(struct ctl *c, const char *agent, struct tally_entry **v, size_t *n)
{
	pthread_mutex_lock(&c->memo_mu);
	struct agent_tally *t = c->tallies;
	while (t && strcmp(t->agent, agent))
		t = t->next;
	if (!t && *v && (t = calloc(1, sizeof(*t) + strlen(agent) + 1)) != NULL) {
		strcpy(t->agent, agent);
		t->next = c->tallies;
		c->tallies = t;
	}
	struct tally_entry *old = t ? t->v : NULL;
	size_t n_old = t ? t->n : 0;
	if (t) {
		t->v = *v;
		t->n = *n;
	} else {
		entries_free(*v, *n); /* out of memory: the next pass reads every volume */
	}
	pthread_mutex_unlock(&c->memo_mu);
	*v = old;
	*n = n_old;
}

/* The counts of the entries into pa's status. */
static int apply_counts(struct model_pa *pa, const struct tally_entry *v, size_t n)
{
	struct model_agent_counts counts = {0};
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		struct model_pvst one = {0};
		struct model_pvst_published *pub = calloc(v[i].nodes.n + 1, sizeof(*pub));
		if (!pub)
			return -ENOMEM;
		for (size_t k = 0; k < v[i].nodes.n; k++)
			pub[k].node_id = v[i].nodes.v[k];
		one.status.published = pub;
		one.status.n_published = v[i].nodes.n;
		r = model_agent_counts_add(&counts, &one, &v[i].tmo);
		free(pub);
	}
	__typeof__(pa->status) *st = &pa->status;
	if (r == 0) {
		st->has_volumes = st->has_published_volumes = st->has_connected_hosts = true;
		st->volumes = counts.volumes;
		st->published_volumes = counts.published;
		st->connected_hosts = (int64_t)counts.hosts.n;
		st->has_outage_budget_seconds = counts.has_budget;
		st->outage_budget_seconds = counts.has_budget ? counts.budget : 0;
	}
	model_agent_counts_clear(&counts);
	return r;
}

int reconcile_agent_counts(struct ctl *c, struct model_pa *pa, struct err *e)
{
	const char *agent = pa->meta.name ? pa->meta.name : "";
	struct tally_pass p = {.agent = agent, .c = {.size = sizeof(struct tally_entry)}};
	struct tally_entry *old = NULL, *v;
	char sel[400];
	memo_swap(c, agent, &old, &p.c.n_old); /* takes the memo (NULL, 0 in its place) */
	p.c.old = old;
	snprintf(sel, sizeof(sel), RULES_LABEL_AGENT "=%s", agent);
	int r =
	    model_list_each_skip(c->st, &model_pvst_kind, NULL, sel, carried, fresh, &p, NULL, e);
	if (r == 0 && p.c.err)
		r = err_set(e, p.c.err, "out of memory");
	entries_free(old, p.c.n_old);
	v = p.c.v;
	if (r == 0) {
		carry_sort(&p.c);
		if ((r = apply_counts(pa, v, p.c.n)) < 0)
			err_set(e, r, "out of memory");
	}
	if (r < 0) {
		entries_free(v, p.c.n);
		return r;
	}
	memo_swap(c, agent, &v, &p.c.n); /* the memo was taken: nothing comes back */
	entries_free(v, p.c.n);
	return 0;
}

/* ---- seeding from the loop's list of every volume ------------------------------------------- */

struct seed_agent {
	struct seed_agent *next;
	struct carry_pass c;
	char agent[];
};

void reconcile_agent_counts_seed_add(struct agent_counts_seed *s, const struct model_pvst *v)
{
	const char *agent = model_map_get(&v->meta.labels, RULES_LABEL_AGENT);
	/* what the agent's own pass would keep of v: listed by the label, counted by agentRef */
	if (s->err || !agent || !v->meta.name || !v->spec.agent_ref ||
	    strcmp(v->spec.agent_ref, agent))
		return;
	struct seed_agent *a = s->last;
	if (!a || strcmp(a->agent, agent)) {
		for (a = s->agents; a && strcmp(a->agent, agent); a = a->next)
			;
		if (!a && (a = calloc(1, sizeof(*a) + strlen(agent) + 1)) != NULL) {
			strcpy(a->agent, agent);
			a->c.size = sizeof(struct tally_entry);
			a->next = s->agents;
			s->agents = a;
		}
		if (!a) {
			s->err = -ENOMEM;
			return;
		}
		s->last = a;
	}
	if (entry_add(&a->c, v) < 0)
		s->err = -ENOMEM;
}

void reconcile_agent_counts_seeded(struct ctl *c, struct agent_counts_seed *s)
{
	for (struct seed_agent *a = s->agents, *next; a; a = next) {
		next = a->next;
		struct tally_entry *v = a->c.v;
		size_t n = a->c.n;
		if (!s->err) {
			carry_sort(&a->c);
			pthread_mutex_lock(&c->memo_mu);
			struct agent_tally *t = c->tallies;
			while (t && strcmp(t->agent, a->agent))
				t = t->next;
			if (!t && (t = calloc(1, sizeof(*t) + strlen(a->agent) + 1)) != NULL) {
				strcpy(t->agent, a->agent);
				t->next = c->tallies;
				c->tallies = t;
			}
			/* a pass of the agent's own that kept its entries (or holds them now)
			 * read the volumes no earlier than this list */
			if (t && !t->v && !t->n) {
				t->v = v;
				t->n = n;
				v = NULL;
				n = 0;
			}
			pthread_mutex_unlock(&c->memo_mu);
		}
		entries_free(v, n);
		free(a);
	}
	*s = (struct agent_counts_seed){0};
}
