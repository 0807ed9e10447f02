/* dhchap — the workers' DH-HMAC-CHAP keys on their way to the agents (dhchap.h). */
#include "controller/dhchap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/kube.h"

void dhchap_grant_clear(struct dhchap_grant *g)
{
	if (g)
		nvme_dhchap_wipe(g, sizeof(*g));
}

static int old_add(struct dhchap_set *set, const char *node, uint64_t generation)
{
	if (set->n_old == set->cap_old) {
		size_t cap = set->cap_old ? 2 * set->cap_old : 8;
		struct dhchap_old *a = realloc(set->old, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		set->old = a;
		set->cap_old = cap;
	}
	struct dhchap_old *o = &set->old[set->n_old++];
	snprintf(o->node, sizeof(o->node), "%s", node);
	o->generation = generation;
	return 0;
}

/* Keeps every accepted Secret that is the newest of its node and host NQN; others are logged
 * by name (never a key). */
static int consider(void *obj, void *arg)
{
	const struct model_secret *s = obj;
	struct dhchap_set *set = arg;
	struct model_dhchap_keys k;
	struct err e = {0};
	if (model_dhchap_secret_decode(s, &k, &e) < 0) {
		log_warnf("DH-HMAC-CHAP keys ignored: %s", e.msg);
		return 0;
	}
	for (size_t i = 0; i < set->n; i++) {
		struct model_dhchap_keys *o = &set->keys[i];
		if (strcmp(o->node, k.node) || strcmp(o->host_nqn, k.host_nqn))
			continue;
		uint64_t older = k.generation > o->generation ? o->generation : k.generation;
		if (k.generation > o->generation)
			*o = k;
		model_dhchap_keys_wipe(&k);
		return old_add(set, o->node, older);
	}
	if (set->n == set->cap) {
		size_t cap = set->cap ? 2 * set->cap : 8;
		struct model_dhchap_keys *a = calloc(cap, sizeof(*a));
		if (!a) {
			model_dhchap_keys_wipe(&k);
			return -ENOMEM;
		}
		if (set->n)
			memcpy(a, set->keys, set->n * sizeof(*a));
		nvme_dhchap_wipe(set->keys, set->cap * sizeof(*a));
		free(set->keys);
		set->keys = a;
		set->cap = cap;
	}
	set->keys[set->n++] = k;
	model_dhchap_keys_wipe(&k);
	return 0;
}

int dhchap_set_load(struct ctl *c, struct dhchap_set *set, struct grpc_status *gs)
{
	struct err e = {0};
	if (set->loaded)
		return GRPC_OK;
	if (!c->dhchap_enabled)
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION, DHCHAP_DISABLED_MSG);
	int r = model_list_each(c->st, &model_secret_kind, c->dhchap_ns, MODEL_DHCHAP_SELECTOR,
	                        consider, set, NULL, &e);
	if (r < 0) {
		dhchap_set_free(set);
		return grpc_status_set(gs, GRPC_UNAVAILABLE,
		                       "listing DH-HMAC-CHAP Secrets in namespace \"%s\": %s",
		                       c->dhchap_ns, e.msg);
	}
	set->loaded = true;
	return GRPC_OK;
}

void dhchap_set_free(struct dhchap_set *set)
{
	if (set->keys)
		nvme_dhchap_wipe(set->keys, set->cap * sizeof(*set->keys));
	free(set->keys);
	free(set->old);
	memset(set, 0, sizeof(*set));
}

/* The keys of node for host_nqn in a loaded set: GRPC_OK, else NOT_FOUND in gs. */
static int find(struct ctl *c, const struct dhchap_set *set, const char *node, const char *host_nqn,
                struct model_dhchap_keys *out, struct grpc_status *gs)
{
	for (size_t i = 0; i < set->n; i++)
		if (!strcmp(set->keys[i].node, node) && !strcmp(set->keys[i].host_nqn, host_nqn)) {
			*out = set->keys[i];
			return GRPC_OK;
		}
	memset(out, 0, sizeof(*out));
	return grpc_status_set(gs, GRPC_NOT_FOUND,
	                       "node \"%s\" has published no DH-HMAC-CHAP keys for host NQN "
	                       "\"%s\" (Secret " MODEL_DHCHAP_SECRET_PREFIX
	                       "%s-<generation> in namespace \"%s\"); is the node plugin running "
	                       "with dhchap enabled?",
	                       node, host_nqn, node, c->dhchap_ns);
}

int dhchap_keys_of(struct ctl *c, const char *node, const char *host_nqn,
                   struct model_dhchap_keys *out, struct grpc_status *gs)
{
	struct dhchap_set set = {0};
	memset(out, 0, sizeof(*out));
	int r = dhchap_set_load(c, &set, gs);
	if (r == GRPC_OK)
		r = find(c, &set, node, host_nqn, out, gs);
	dhchap_set_free(&set);
	return r;
}

int dhchap_grant_for(struct ctl *c, const char *agent, const struct model_resolved *res,
                     const char *node, const char *host_nqn, struct dhchap_grant *g,
                     struct grpc_status *gs)
{
	const struct model_nvmeof_tcp *t = &res->protocol.nvmeof_tcp;
	memset(g, 0, sizeof(*g));
	if (!t->has_dhchap)
		return GRPC_OK;
	if (!agentclient_mtls(c->ac) && !c->dhchap_plaintext)
		return grpc_status_set(gs, GRPC_FAILED_PRECONDITION, DHCHAP_PLAINTEXT_FMT, agent);
	int r = c->dhchap_enabled
	            ? dhchap_keys_of(c, node, host_nqn, &g->keys, gs)
	            : grpc_status_set(gs, GRPC_FAILED_PRECONDITION, DHCHAP_DISABLED_MSG);
	if (r == GRPC_NOT_FOUND)
		r = gs->code = GRPC_FAILED_PRECONDITION;
	if (r != GRPC_OK)
		return r;
	pillar_csi__agent__v1__host_auth__init(&g->auth);
	g->on = true;
	g->auth.host_nqn = g->keys.host_nqn;
	g->auth.hash = (char *)model_dhchap_hash(&t->dhchap);
	g->auth.dh_group = (char *)model_dhchap_dh_group(&t->dhchap);
	g->auth.dhchap_key = g->keys.key;
	g->auth.dhchap_ctrl_key = model_dhchap_bidirectional(&t->dhchap) ? g->keys.ctrl_key : "";
	g->auth.generation = g->keys.generation;
	return GRPC_OK;
}

static void auth_free(PillarCsi__Agent__V1__HostAuth *a)
{
	if (!a)
		return;
	char *keys[] = {a->dhchap_key, a->dhchap_ctrl_key};
	for (int i = 0; i < 2; i++)
		if (keys[i])
			nvme_dhchap_wipe(keys[i], strlen(keys[i]));
	pillar_csi__agent__v1__host_auth__free_unpacked(a, NULL);
}

/* A HostAuth owned as an unpacked message (strings and struct malloc'd). */
static PillarCsi__Agent__V1__HostAuth *auth_new(const struct model_dhchap_keys *k, const char *hash,
                                                const char *group, bool bidir)
{
	PillarCsi__Agent__V1__HostAuth *a = malloc(sizeof(*a));
	if (!a)
		return NULL;
	pillar_csi__agent__v1__host_auth__init(a);
	a->host_nqn = strdup(k->host_nqn);
	a->hash = strdup(hash);
	a->dh_group = strdup(group);
	a->dhchap_key = strdup(k->key);
	a->dhchap_ctrl_key = strdup(bidir ? k->ctrl_key : "");
	a->generation = k->generation;
	if (!a->host_nqn || !a->hash || !a->dh_group || !a->dhchap_key || !a->dhchap_ctrl_key) {
		auth_free(a);
		return NULL;
	}
	return a;
}

static int sent_add(struct dhchap_pass *p, const char *node, uint64_t generation, size_t item)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		struct dhchap_sent *a = realloc(p->v, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		p->v = a;
		p->cap = cap;
	}
	struct dhchap_sent *s = &p->v[p->n++];
	snprintf(s->node, sizeof(s->node), "%s", node);
	s->generation = generation;
	s->item = item;
	return 0;
}

void dhchap_pass_free(struct dhchap_pass *p)
{
	dhchap_set_free(&p->set);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

int dhchap_attach(struct ctl *c, struct dhchap_pass *p, size_t item, const char *agent,
                  const char *volume, const char *hash, const char *group, bool bidir,
                  const char *nodes, PillarCsi__Agent__V1__ExportDesiredState *x)
{
	struct dhchap_set *set = &p->set;
	size_t n = x->n_allowed_initiators, kept = 0;
	bool mtls = agentclient_mtls(c->ac) || c->dhchap_plaintext;
	x->host_auth = calloc(n ? n : 1, sizeof(*x->host_auth));
	if (!x->host_auth)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++, nodes += strlen(nodes) + 1) {
		char *nqn = x->allowed_initiators[i];
		struct model_dhchap_keys k;
		struct grpc_status gs = {0};
		int r = !mtls ? grpc_status_set(&gs, GRPC_FAILED_PRECONDITION, DHCHAP_PLAINTEXT_FMT,
		                                agent)
		              : dhchap_set_load(c, set, &gs);
		if (r == GRPC_OK)
			r = find(c, set, nodes, nqn, &k, &gs);
		else
			memset(&k, 0, sizeof(k));
		PillarCsi__Agent__V1__HostAuth *a =
		    r == GRPC_OK ? auth_new(&k, hash, group, bidir) : NULL;
		model_dhchap_keys_wipe(&k);
		if (r == GRPC_OK && a && sent_add(p, nodes, a->generation, item) < 0) {
			auth_free(a);
			a = NULL;
		}
		if (r == GRPC_OK && !a) { /* x stays one message that frees as unpacked */
			for (size_t j = i; j < n; j++)
				x->allowed_initiators[kept++] = x->allowed_initiators[j];
			x->n_allowed_initiators = kept;
			return -ENOMEM;
		}
		if (!a) { /* fail closed: the host is not admitted without its key */
			log_warnf("volume %s: host %s of node \"%s\" left out of the export: %s",
			          volume, nqn, nodes, gs.msg);
			free(nqn);
			if (sent_add(p, nodes, 0, item) < 0) { /* the node is then not confirmed */
				for (size_t j = i + 1; j < n; j++)
					x->allowed_initiators[kept++] = x->allowed_initiators[j];
				x->n_allowed_initiators = kept;
				return -ENOMEM;
			}
			continue;
		}
		x->allowed_initiators[kept++] = nqn;
		x->host_auth[x->n_host_auth++] = a;
	}
	x->n_allowed_initiators = kept;
	return 0;
}

void dhchap_detach(PillarCsi__Agent__V1__ExportDesiredState *x)
{
	for (size_t i = 0; i < x->n_host_auth; i++)
		auth_free(x->host_auth[i]);
	free(x->host_auth);
	x->host_auth = NULL;
	x->n_host_auth = 0;
}
