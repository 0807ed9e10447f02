#include "node/dhchap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "model/kube.h"
#include "model/model.h"
#include "store/store.h"

int node_dhchap_gen_make(const char *hostnqn, uint64_t generation,
                         struct model_dhchap_generation *g, struct err *e)
{
	int r;
	memset(g, 0, sizeof(*g));
	g->generation = generation;
	if ((r = nvme_dhchap_secret_generate(hostnqn, NVME_DHCHAP_SHA512, g->key, e)) < 0 ||
	    (r = nvme_dhchap_secret_generate(hostnqn, NVME_DHCHAP_SHA512, g->ctrl_key, e)) < 0)
		nvme_dhchap_wipe(g, sizeof(*g));
	return r;
}

int node_dhchap_gen_rotate(const char *hostnqn, uint64_t generation,
                           const struct model_dhchap_generation *from, bool ctrl,
                           struct model_dhchap_generation *g, struct err *e)
{
	int r;
	*g = *from;
	g->generation = generation;
	r = nvme_dhchap_secret_generate(hostnqn, NVME_DHCHAP_SHA512, ctrl ? g->ctrl_key : g->key,
	                                e);
	if (r < 0)
		nvme_dhchap_wipe(g, sizeof(*g));
	return r;
}

uint64_t node_dhchap_next_generation(const struct model_dhchap_file *k, uint64_t now)
{
	uint64_t g = now ? now : 1;
	if (k->has_current && k->current.generation >= g)
		g = k->current.generation + 1;
	if (k->has_next && k->next.generation >= g)
		g = k->next.generation + 1;
	return g;
}

const struct model_dhchap_generation *node_dhchap_connect_gen(const struct model_dhchap_file *k)
{
	return k->has_current ? &k->current : k->has_next ? &k->next : NULL;
}

int node_dhchap_keys_ensure(const char *state_dir, const char *node, const char *hostnqn,
                            uint64_t now, struct model_dhchap_file *k, bool *created, struct err *e)
{
	char gen[24];
	int r = model_dhchap_file_read(state_dir, k, e);
	if (created)
		*created = false;
	if (r == 0 && !strcmp(k->hostnqn, hostnqn))
		return 0;
	if (r < 0 && r != -ENOENT)
		return r;
	if (strlen(node) >= sizeof(k->node) || strlen(hostnqn) >= sizeof(k->hostnqn))
		return err_set(e, -EINVAL, "node name or host NQN too long for DH-HMAC-CHAP keys");
	uint64_t g = node_dhchap_next_generation(k, now);
	if (r == 0)
		log_warn("DH-HMAC-CHAP keys were made for another host NQN; making new ones", "was",
		         k->hostnqn, "hostNQN", hostnqn);
	model_dhchap_file_wipe(k);
	str_copy(k->node, sizeof(k->node), node);
	str_copy(k->hostnqn, sizeof(k->hostnqn), hostnqn);
	k->has_next = true;
	if ((r = node_dhchap_gen_make(hostnqn, g, &k->next, e)) < 0 ||
	    (r = model_dhchap_file_write(state_dir, k, e)) < 0) {
		model_dhchap_file_wipe(k);
		return r;
	}
	if (created)
		*created = true;
	snprintf(gen, sizeof(gen), "%" PRIu64, g);
	log_info("made DH-HMAC-CHAP keys", "generation", gen, "hostNQN", hostnqn);
	return 0;
}

/* The annotation key of the CSINode (kind "csinode") or Node ("node") name into buf ("" when
 * the object or the annotation is absent). */
int node_dhchap_annotation(store *s, const char *kind, const char *name, const char *key, char *buf,
                           size_t cap, struct err *e)
{
	bool csinode = !strcmp(kind, "csinode");
	struct model_csinode cn;
	struct model_node nd;
	const struct model_kind *k = csinode ? &model_csinode_kind : &model_node_kind;
	void *obj = csinode ? (void *)&cn : (void *)&nd;
	buf[0] = 0;
	int r = model_get(s, k, NULL, name, obj, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	const char *v = model_map_get(csinode ? &cn.meta.annotations : &nd.meta.annotations, key);
	if (v)
		snprintf(buf, cap, "%s", v);
	model_clear(k, obj);
	return 0;
}
