/* dhchap_confirm — which generation of each worker's keys every agent holds, and the CSINode
 * annotation that tells the worker a generation is installed everywhere (dhchap.h;
 * docs/authentication.md "Keys", rotation). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "controller/dhchap.h"
#include "kube/client.h"

/* A record of node "" marks an agent whose records are complete: a whole pass since this
 * controller started, or its PillarAgent's status.dhchap read at start. */
#define COMPLETE ""

struct dhchap_record {
	char agent[254];
	char node[MODEL_DHCHAP_NODE_MAX + 1];
	uint64_t generation; /* 0: the agent was meant to admit the node but holds no keys of it */
};

static struct dhchap_record *record_find(struct ctl *c, const char *agent, const char *node)
{
	for (size_t i = 0; i < c->n_dh_records; i++)
		if (!strcmp(c->dh_records[i].agent, agent) && !strcmp(c->dh_records[i].node, node))
			return &c->dh_records[i];
	return NULL;
}

/* Sets (agent, node) to generation, lowering an entry set earlier in the same request (two
 * volumes of one node: the node is confirmed only when both items succeeded). */
static void record_set(struct ctl *c, const char *agent, const char *node, uint64_t generation,
                       bool first)
{
	struct dhchap_record *r = record_find(c, agent, node);
	if (!r) {
		struct dhchap_record *a =
		    realloc(c->dh_records, (c->n_dh_records + 1) * sizeof(*a));
		if (!a)
			return; /* unrecorded: the next whole pass records it */
		c->dh_records = a;
		r = &a[c->n_dh_records++];
		snprintf(r->agent, sizeof(r->agent), "%s", agent);
		snprintf(r->node, sizeof(r->node), "%s", node);
		r->generation = generation;
		return;
	}
	if (first || generation < r->generation)
		r->generation = generation;
}

static int status_fill(struct ctl *c, const char *agent, struct model_pa_dhchap *d)
{
	int r = 0;
	model_pa_dhchap_clear(d);
	for (size_t i = 0; i < c->n_dh_records && r == 0; i++) {
		const struct dhchap_record *x = &c->dh_records[i];
		if (strcmp(x->agent, agent) || !strcmp(x->node, COMPLETE))
			continue;
		void *v = realloc(d->installed, (d->n_installed + 1) * sizeof(*d->installed));
		if (!v) {
			r = -ENOMEM;
			break;
		}
		d->installed = v;
		size_t at = d->n_installed;
		while (at > 0 && strcmp(d->installed[at - 1].node, x->node) > 0) {
			d->installed[at] = d->installed[at - 1];
			at--;
		}
		memset(&d->installed[at], 0, sizeof(d->installed[at]));
		d->n_installed++;
		d->installed[at].has_generation = true;
		d->installed[at].generation = (int64_t)x->generation;
		if (!(d->installed[at].node = strdup(x->node)))
			r = -ENOMEM;
	}
	return r;
}

int dhchap_status_fill(struct ctl *c, struct model_pa *pa)
{
	int r = 0;
	if (!c->dhchap_enabled || !pa->meta.name)
		return 0;
	pthread_mutex_lock(&c->memo_mu);
	if (record_find(c, pa->meta.name, COMPLETE)) {
		pa->status.has_dhchap = true;
		r = status_fill(c, pa->meta.name, &pa->status.dhchap);
	}
	pthread_mutex_unlock(&c->memo_mu);
	return r;
}

void dhchap_record(struct ctl *c, const char *agent, bool whole, const struct dhchap_pass *p,
                   const bool *item_ok, size_t n_items)
{
	pthread_mutex_lock(&c->memo_mu);
	if (whole) { /* the agent's record is this request's */
		size_t w = 0;
		for (size_t i = 0; i < c->n_dh_records; i++)
			if (strcmp(c->dh_records[i].agent, agent))
				c->dh_records[w++] = c->dh_records[i];
		c->n_dh_records = w;
		record_set(c, agent, COMPLETE, 0, true);
	}
	for (size_t i = 0; i < p->n; i++) {
		const struct dhchap_sent *s = &p->v[i];
		bool ok = s->item < n_items && item_ok[s->item];
		bool first = true;
		for (size_t j = 0; j < i && first; j++)
			first = strcmp(p->v[j].node, s->node) != 0;
		record_set(c, agent, s->node, ok ? s->generation : 0, first);
	}
	pthread_mutex_unlock(&c->memo_mu);
}

void dhchap_records_free(struct ctl *c)
{
	free(c->dh_records);
	c->dh_records = NULL;
	c->n_dh_records = 0;
}

/* Every existing agent that admits node holds generation (none admitting it counts as all). */
static bool installed_everywhere(struct ctl *c, const struct model_pa *agents, size_t n_agents,
                                 const char *node, uint64_t generation)
{
	bool all = true;
	pthread_mutex_lock(&c->memo_mu);
	for (size_t i = 0; i < c->n_dh_records && all; i++) {
		const struct dhchap_record *x = &c->dh_records[i];
		bool exists = false;
		for (size_t j = 0; j < n_agents && !exists; j++)
			exists = agents[j].meta.name && !strcmp(agents[j].meta.name, x->agent);
		if (exists && !strcmp(x->node, node))
			all = x->generation == generation;
	}
	pthread_mutex_unlock(&c->memo_mu);
	return all;
}

/* Whether every agent's records are complete; an agent without records of this process takes
 * those of its status.dhchap (written by an earlier controller) when there are. */
static bool records_complete(struct ctl *c, const struct model_pa *agents, size_t n_agents)
{
	bool all = true;
	pthread_mutex_lock(&c->memo_mu);
	for (size_t i = 0; i < n_agents; i++) {
		const struct model_pa *pa = &agents[i];
		if (!pa->meta.name || record_find(c, pa->meta.name, COMPLETE))
			continue;
		if (!pa->status.has_dhchap) {
			all = false; /* held back until the agent's first whole pass */
			continue;
		}
		record_set(c, pa->meta.name, COMPLETE, 0, true);
		for (size_t j = 0; j < pa->status.dhchap.n_installed; j++) {
			const struct model_pa_dhchap_node *d = &pa->status.dhchap.installed[j];
			if (d->node && *d->node && d->generation >= 0 &&
			    !record_find(c, pa->meta.name, d->node)) /* this process's is newer */
				record_set(c, pa->meta.name, d->node, (uint64_t)d->generation,
				           true);
		}
	}
	pthread_mutex_unlock(&c->memo_mu);
	return all;
}

/* The CSINode annotation: a merge patch on the API server (the node plugin patches the same
 * object's other annotations), an update of the embedded store's object.  A CSINode that does
 * not exist (yet) is left: the next pass writes it. */
static int annotate(struct ctl *c, const char *node, uint64_t generation, struct err *e)
{
	char gen[24];
	struct model_csinode cn;
	snprintf(gen, sizeof(gen), "%" PRIu64, generation);
	int r = model_get(c->st, &model_csinode_kind, NULL, node, &cn, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	const char *have = model_map_get(&cn.meta.annotations, MODEL_DHCHAP_ANN_INSTALLED);
	if (have && !strcmp(have, gen)) {
		model_clear(&model_csinode_kind, &cn);
		return 0;
	}
	if (c->kc) {
		static const struct kube_resource csinodes = {"storage.k8s.io", "v1", "csinodes",
		                                              false};
		struct kube_status st = {0};
		char body[160];
		snprintf(body, sizeof(body), "{\"metadata\":{\"annotations\":{\"%s\":\"%s\"}}}",
		         MODEL_DHCHAP_ANN_INSTALLED, gen);
		r = kube_patch(c->kc, &csinodes, NULL, node, KUBE_PATCH_MERGE, false, body, NULL,
		               &st);
		if (r < 0 && st.kind != KUBE_NOT_FOUND)
			r = err_set(e, r, "annotate CSINode \"%s\": %s", node,
			            st.message[0] ? st.message : kube_reason_name(st.kind));
		else
			r = 0;
	} else if ((r = model_map_set(&cn.meta.annotations, MODEL_DHCHAP_ANN_INSTALLED, gen)) ==
	           0) {
		r = model_update(c->st, &model_csinode_kind, &cn, NULL, e);
	}
	model_clear(&model_csinode_kind, &cn);
	if (r == 0)
		log_info("DH-HMAC-CHAP keys installed on every agent", "node", node, "generation",
		         gen);
	return r;
}

/* The node's Secrets of generations below the confirmed one. */
static void forget_older(struct ctl *c, const struct dhchap_set *set, const char *node,
                         uint64_t generation)
{
	for (size_t i = 0; i < set->n_old; i++) {
		char name[300];
		struct err e = {0};
		const struct dhchap_old *o = &set->old[i];
		if (strcmp(o->node, node) || o->generation >= generation ||
		    model_dhchap_secret_name(node, o->generation, name, sizeof(name), &e) < 0)
			continue;
		int r = store_delete(c->st, store_kind_lookup("Secret"), c->dhchap_ns, name, NULL,
		                     NULL, &e);
		if (r < 0 && r != STORE_NOT_FOUND)
			log_warnf("deleting DH-HMAC-CHAP Secret %s/%s: %s", c->dhchap_ns, name,
			          e.msg);
	}
}

int dhchap_confirm(struct ctl *c, struct err *e)
{
	struct dhchap_set set = {0};
	struct grpc_status gs = {0};
	struct model_pa *agents = NULL;
	size_t n_agents = 0;
	int r = 0;
	if (!c->dhchap_enabled) /* no Secret is read (nor may be: the chart grants nothing) */
		return 0;
	if ((r = model_list(c->st, &model_pa_kind, NULL, NULL, (void **)&agents, &n_agents, NULL,
	                    e)) < 0)
		return r;
	if (!records_complete(c, agents, n_agents)) {
		model_list_free(&model_pa_kind, agents, n_agents);
		return 0;
	}
	if (dhchap_set_load(c, &set, &gs) != GRPC_OK) {
		model_list_free(&model_pa_kind, agents, n_agents);
		return err_set(e, -EIO, "%s", gs.msg);
	}
	for (size_t i = 0; i < set.n && r == 0; i++) {
		const struct model_dhchap_keys *k = &set.keys[i];
		if (!installed_everywhere(c, agents, n_agents, k->node, k->generation))
			continue;
		if ((r = annotate(c, k->node, k->generation, e)) == 0)
			forget_older(c, &set, k->node, k->generation);
	}
	dhchap_set_free(&set);
	model_list_free(&model_pa_kind, agents, n_agents);
	return r;
}
