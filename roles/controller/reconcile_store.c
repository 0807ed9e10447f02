/* reconcile_store — PillarStore status and conditions (crds.md §5.2), capacity from the agent,
 * finalizer and deletion (§14). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "controller/agents.h"
#include "controller/reconcile.h"
#include "rules/conditions.h"

struct pool_ref {
	const char *member; /* zfs | lvm | file */
	const char *token;  /* zfs-zvol | lvm-lv | file */
	const char *what;   /* for messages */
	const char *pool;
	const char *layout_field; /* parentDataset | thinPool | NULL */
	const char *layout;       /* the store's value ("" when unset) */
};

static bool pool_of(const struct model_pst *pst, struct pool_ref *p)
{
	const struct model_backend *b = &pst->spec.backend;
	memset(p, 0, sizeof(*p));
	if (b->has_zfs + b->has_lvm + b->has_file != 1)
		return false;
	if (b->has_zfs)
		*p = (struct pool_ref){"zfs",       "zfs-zvol",      "ZFS pool",
		                       b->zfs.pool, "parentDataset", b->zfs.parent_dataset ?: ""};
	else if (b->has_lvm)
		*p = (struct pool_ref){"lvm",
		                       "lvm-lv",
		                       "LVM volume group",
		                       b->lvm.volume_group,
		                       "thinPool",
		                       b->lvm.thin_pool ?: ""};
	else
		*p = (struct pool_ref){"file", "file", "file pool", b->file.pool, NULL, NULL};
	return p->pool && *p->pool;
}

static int agent_ready(struct model_conds *cs, const char *agent, const struct model_pa *pa,
                       int64_t og)
{
	char m[1200];
	if (!pa) {
		snprintf(m, sizeof(m), "PillarAgent \"%s\" not found", agent);
		return model_cond_set(cs, RULES_COND_AGENT_READY, "False",
		                      RULES_REASON_AGENT_NOT_FOUND, m, og);
	}
	const struct model_conds *pc = &pa->status.conditions;
	if (!strcmp(model_cond_status(pc, RULES_COND_READY), "True"))
		return model_cond_set(cs, RULES_COND_AGENT_READY, "True", RULES_REASON_AGENT_READY,
		                      "", og);
	const char *reason = model_cond_reason(pc, RULES_COND_READY);
	const struct model_cond *rc = model_cond_get(pc, RULES_COND_READY);
	const char *msg = rc && rc->message ? rc->message : "";
	if (!reason[0])
		snprintf(m, sizeof(m), "PillarAgent \"%s\" is not Ready yet", agent);
	else
		snprintf(m, sizeof(m), "PillarAgent \"%s\" is not Ready: %s%s%s", agent, reason,
		         msg[0] ? ": " : "", msg);
	return model_cond_set(cs, RULES_COND_AGENT_READY, "False", RULES_REASON_AGENT_NOT_READY, m,
	                      og);
}

static const struct model_pa_pool *find_pool(const struct model_pa *pa, const struct pool_ref *p)
{
	for (size_t i = 0; i < pa->status.n_pools; i++) {
		const struct model_pa_pool *it = &pa->status.pools[i];
		if (it->name && it->type && !strcmp(it->name, p->pool) &&
		    !strcmp(it->type, p->member))
			return it;
	}
	return NULL;
}

/* PoolDiscovered and BackendSupported from the agent's status; true when the pool is found. */
static bool pool_conditions(struct model_conds *cs, const char *agent, const struct model_pa *pa,
                            bool have_pool, const struct pool_ref *p, int64_t og)
{
	char m[1200];
	if (!have_pool) {
		model_cond_set(cs, RULES_COND_POOL_DISCOVERED, "False", RULES_REASON_POOL_NOT_FOUND,
		               "spec.backend must set exactly one of zfs, lvm or file, naming its "
		               "pool",
		               og);
		model_cond_set(cs, RULES_COND_BACKEND_SUPPORTED, "False",
		               RULES_REASON_BACKEND_NOT_SUPPORTED,
		               "spec.backend must set exactly one of zfs, lvm or file", og);
		return false;
	}
	if (!pa || !pa->status.has_capabilities) {
		snprintf(m, sizeof(m), "PillarAgent \"%s\" has not reported its capabilities yet",
		         agent);
		model_cond_set(cs, RULES_COND_POOL_DISCOVERED, "False",
		               RULES_REASON_WAITING_FOR_AGENT_DATA, m, og);
		model_cond_set(cs, RULES_COND_BACKEND_SUPPORTED, "Unknown",
		               RULES_REASON_WAITING_FOR_AGENT_DATA, m, og);
		return false;
	}
	if (model_strs_has(&pa->status.capabilities.backends, p->token)) {
		model_cond_set(cs, RULES_COND_BACKEND_SUPPORTED, "True",
		               RULES_REASON_BACKEND_SUPPORTED, "", og);
	} else {
		snprintf(m, sizeof(m), "agent \"%s\" does not list the %s backend", agent,
		         p->token);
		model_cond_set(cs, RULES_COND_BACKEND_SUPPORTED, "False",
		               RULES_REASON_BACKEND_NOT_SUPPORTED, m, og);
	}
	const struct model_pa_pool *found = find_pool(pa, p);
	if (!found) {
		snprintf(m, sizeof(m),
		         "agent \"%s\" does not report %s \"%s\" (not in its configuration, not "
		         "imported/active, or the agent cannot see devices: check that it runs "
		         "privileged)",
		         agent, p->what, p->pool);
		model_cond_set(cs, RULES_COND_POOL_DISCOVERED, "False", RULES_REASON_POOL_NOT_FOUND,
		               m, og);
		return false;
	}
	if (p->layout_field) {
		const char *theirs = (!strcmp(p->layout_field, "thinPool") ? found->thin_pool
		                                                           : found->parent_dataset)
		                         ?: "";
		if (strcmp(p->layout, theirs)) {
			snprintf(m, sizeof(m),
			         "store %s \"%s\" does not match agent config %s \"%s\"",
			         p->layout_field, p->layout, p->layout_field, theirs);
			model_cond_set(cs, RULES_COND_POOL_DISCOVERED, "False",
			               RULES_REASON_BACKEND_LAYOUT_MISMATCH, m, og);
			return false;
		}
	}
	model_cond_set(cs, RULES_COND_POOL_DISCOVERED, "True", RULES_REASON_POOL_FOUND, "", og);
	return true;
}

static int set_qty(char **dst, uint64_t bytes)
{
	char qs[32];
	model_quantity_format((long long)bytes, qs, sizeof(qs));
	return model_str_set(dst, qs);
}

static void refresh_capacity(struct ctl *c, const char *name, struct model_pst *pst,
                             const struct model_pa *pa, const struct pool_ref *p)
{
	const char *addr = pa->status.resolved_address;
	if (!c->ac || !addr || !*addr)
		return;
	PillarCsi__Agent__V1__GetCapacityRequest q =
	    PILLAR_CSI__AGENT__V1__GET_CAPACITY_REQUEST__INIT;
	PillarCsi__Agent__V1__GetCapacityResponse *resp = NULL;
	struct grpc_status ast = {0};
	q.backend_type = agents_backend_enum(p->token);
	q.pool_name = (char *)p->pool;
	if (agentclient_get_capacity(c->ac, addr, &q, &resp, &ast) != GRPC_OK) {
		log_warnf("PillarStore %s: GetCapacity of %s \"%s\" failed: %s", name, p->what,
		          p->pool, ast.msg);
		return;
	}
	__typeof__(pst->status.capacity) *cap = &pst->status.capacity;
	pst->status.has_capacity = true;
	if (set_qty(&cap->total, resp->total_bytes) < 0 ||
	    set_qty(&cap->available, resp->available_bytes) < 0 ||
	    set_qty(&cap->used, resp->used_bytes) < 0)
		log_warnf("PillarStore %s: out of memory recording the capacity", name);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* crds.md §14: "" when nothing depends on the store, else the DeletionBlocked message. */
static int store_dependents(struct ctl *c, const char *name, struct reconcile_deps *d)
{
	struct model_strs pscs = {0}, vols = {0};
	int r = reconcile_names_where(c, REF_PSC_STORE, name, &pscs);
	if (r == 0)
		r = reconcile_names_labeled(c, &model_pvst_kind, RULES_LABEL_STORE, name, &vols);
	reconcile_deps_objects(d, "PillarStorageClass", &pscs);
	reconcile_deps_volumes(d, &vols);
	model_strs_clear(&pscs);
	model_strs_clear(&vols);
	return r;
}

/* Finalizer and deletion; 1 when the pass is over (released, gone), else 0 or an error. */
static int store_finalizer(struct ctl *c, struct model_pst *pst, bool deleting,
                           struct reconcile_deps *d, struct err *e)
{
	int r;
	if (deleting) {
		if ((r = store_dependents(c, pst->meta.name, d)) < 0)
			return err_set(e, r, "out of memory");
		if (d->msg[0])
			return 0;
		r = reconcile_finalizer(c, &model_pst_kind, pst, RULES_FINALIZER_STORE, false, e);
		return r == STORE_NOT_FOUND || r == 0 ? 1 : r;
	}
	r = reconcile_finalizer(c, &model_pst_kind, pst, RULES_FINALIZER_STORE, true, e);
	return r == STORE_NOT_FOUND ? 1 : r;
}

int reconcile_store(struct ctl *c, const char *name, bool refresh, struct err *e)
{
	static const char *const types[] = {RULES_COND_AGENT_READY, RULES_COND_POOL_DISCOVERED,
	                                    RULES_COND_BACKEND_SUPPORTED, NULL};
	struct model_pst pst;
	struct model_pa pa = {0};
	struct reconcile_deps d = {0};
	char *before = NULL;
	int r = model_get(c->st, &model_pst_kind, NULL, name, &pst, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	bool deleting = pst.meta.deletion_timestamp != NULL;
	if ((r = store_finalizer(c, &pst, deleting, &d, e)) != 0) {
		model_clear(&model_pst_kind, &pst);
		return r > 0 ? 0 : r;
	}
	int64_t og = pst.meta.generation;
	before = model_encode_text(&model_pst_kind, &pst);
	char agent[254];
	snprintf(agent, sizeof(agent), "%s", pst.spec.agent_ref ?: "");
	struct err ae = {0};
	int ar =
	    agent[0] ? model_get(c->st, &model_pa_kind, NULL, agent, &pa, &ae) : STORE_NOT_FOUND;
	if (ar < 0 && ar != STORE_NOT_FOUND && ar != STORE_INVALID) {
		r = err_set(e, ar, "reading PillarAgent \"%s\": %s", agent, ae.msg);
		goto out;
	}
	const struct model_pa *pap = ar == 0 ? &pa : NULL;
	struct model_conds *cs = &pst.status.conditions;
	struct pool_ref p;
	bool have_pool = pool_of(&pst, &p);
	agent_ready(cs, agent, pap, og);
	bool found = pool_conditions(cs, agent, pap, have_pool, &p, og);
	if (found && (refresh || !pst.status.has_capacity))
		refresh_capacity(c, name, &pst, pap, &p);
	reconcile_ready(cs, types, RULES_REASON_STORE_READY, deleting ? d.msg : NULL, og);
	r = reconcile_write_status(c, &model_pst_kind, &pst, before, e);
	if (r == STORE_CONFLICT || r == STORE_NOT_FOUND)
		r = 0; /* the watch brings the newer object back */
out:
	free(before);
	model_clear(&model_pa_kind, &pa);
	model_clear(&model_pst_kind, &pst);
	return r;
}
