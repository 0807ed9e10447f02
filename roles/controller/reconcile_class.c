/* reconcile_class — PillarProtocol (crds.md §4.2) and PillarStorageClass (§6.2, §6.3) status,
 * the generated StorageClass with its update rules and carry-over annotation, finalizers and
 * deletion (§14). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "controller/reconcile.h"
#include "controller/resolve.h"
#include "model/kube.h"
#include "rules/conditions.h"

static int add_unique_sorted(struct model_strs *l, const char *s)
{
	size_t i = 0;
	for (; i < l->n; i++) {
		int c = strcmp(l->v[i], s);
		if (c == 0)
			return 0;
		if (c > 0)
			break;
	}
	if (model_strs_add(l, s) < 0)
		return -ENOMEM;
	char *last = l->v[l->n - 1];
	memmove(&l->v[i + 1], &l->v[i], (l->n - 1 - i) * sizeof(char *));
	l->v[i] = last;
	return 0;
}

/* ---- PillarProtocol ------------------------------------------------------------------------------ */

/* The PillarAgent reachable through a PSC's store, when both objects exist. */
static int agent_of_class(struct ctl *c, const struct model_psc *psc, struct model_strs *agents)
{
	struct model_pst pst;
	struct model_pa pa;
	int r = 0;
	if (!psc->spec.store_ref ||
	    model_get(c->st, &model_pst_kind, NULL, psc->spec.store_ref, &pst, NULL) < 0)
		return 0;
	const char *aref = pst.spec.agent_ref;
	if (aref && model_get(c->st, &model_pa_kind, NULL, aref, &pa, NULL) == 0) {
		r = add_unique_sorted(agents, aref);
		model_clear(&model_pa_kind, &pa);
	}
	model_clear(&model_pst_kind, &pst);
	return r;
}

/* The PSCs naming protocol `name` and the agents reachable through them (crds.md §4.2). */
static int protocol_users(struct ctl *c, const char *name, struct model_strs *pscs,
                          struct model_strs *agents, struct err *e)
{
	struct model_psc *all = NULL;
	size_t n = 0;
	int r = model_list(c->st, &model_psc_kind, NULL, NULL, (void **)&all, &n, NULL, e);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const char *ref = all[i].spec.protocol_ref;
		if (!ref || strcmp(ref, name))
			continue;
		if ((r = model_strs_add(pscs, all[i].meta.name)) == 0)
			r = agent_of_class(c, &all[i], agents);
		if (r < 0)
			r = err_set(e, r, "out of memory");
	}
	model_list_free(&model_psc_kind, all, n);
	return r;
}

/* NodeTopology (Decision; not part of Ready): whether any node can reach NVMe/TCP storage.  The
 * provisioner builds its accessibility requirements from the topology keys kubelet registered
 * on the CSINodes (from NodeGetInfo, which reports the key only where the nvme_tcp module is
 * loaded); with none it fails with "no available topology found", which names nothing. */
static int node_topology_cond(struct ctl *c, struct model_conds *conds, int64_t og)
{
	struct model_csinode *all = NULL;
	size_t n = 0, registered = 0, reach = 0;
	char msg[512];
	if (model_list(c->st, &model_csinode_kind, NULL, NULL, (void **)&all, &n, NULL, NULL) < 0)
		return 0; /* the next pass decides */
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < all[i].spec.n_drivers; j++) {
			const struct model_csinode_driver *d = &all[i].spec.drivers[j];
			if (!d->name || strcmp(d->name, RULES_DRIVER_NAME))
				continue;
			registered++;
			for (size_t k = 0; k < d->topology_keys.n; k++)
				if (!strcmp(d->topology_keys.v[k], RULES_TOPOLOGY_KEY)) {
					reach++;
					break;
				}
		}
	model_list_free(&model_csinode_kind, all, n);
	if (!registered)
		return model_cond_set(conds, RULES_COND_NODE_TOPOLOGY, "Unknown",
		                      RULES_REASON_NO_NODE_REGISTERED,
		                      "no CSINode registers driver " RULES_DRIVER_NAME
		                      " (the node plugin is not running anywhere yet)",
		                      og) < 0
		           ? -ENOMEM
		           : 0;
	if (!reach) {
		snprintf(
		    msg, sizeof(msg),
		    "no node can reach NVMe/TCP storage: none of the %zu node(s) running the "
		    "node plugin has the kernel module nvme_tcp loaded, so no CSINode carries "
		    "topology key " RULES_TOPOLOGY_KEY " and provisioning fails with \"no "
		    "available topology found\"; run \"modprobe nvme_tcp\" on the workers (and "
		    "list it in /etc/modules-load.d), then restart the pillar-csi node pod there",
		    registered);
		return model_cond_set(conds, RULES_COND_NODE_TOPOLOGY, "False",
		                      RULES_REASON_NVME_TCP_NOT_LOADED, msg, og) < 0
		           ? -ENOMEM
		           : 0;
	}
	snprintf(msg, sizeof(msg), "%zu of %zu node(s) carry topology key " RULES_TOPOLOGY_KEY,
	         reach, registered);
	return model_cond_set(conds, RULES_COND_NODE_TOPOLOGY, "True", RULES_REASON_NODES_REACHABLE,
	                      msg, og) < 0
	           ? -ENOMEM
	           : 0;
}

int reconcile_protocol(struct ctl *c, const char *name, struct err *e)
{
	struct model_pstr pstr;
	struct model_strs pscs = {0}, agents = {0};
	char *before = NULL;
	int r = model_get(c->st, &model_pstr_kind, NULL, name, &pstr, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	if ((r = protocol_users(c, name, &pscs, &agents, e)) < 0)
		goto out;
	bool deleting = pstr.meta.deletion_timestamp != NULL;
	struct reconcile_deps d = {0};
	if (deleting)
		reconcile_deps_objects(&d, "PillarStorageClass", &pscs);
	if (!deleting || !d.msg[0]) {
		r = reconcile_finalizer(c, &model_pstr_kind, &pstr, RULES_FINALIZER_PROTOCOL,
		                        !deleting, e);
		if (r < 0 || deleting) {
			r = r == STORE_NOT_FOUND ? 0 : r;
			goto out;
		}
	}
	int64_t og = pstr.meta.generation;
	before = model_encode_text(&model_pstr_kind, &pstr);
	pstr.status.has_storage_class_count = true;
	pstr.status.storage_class_count = (int64_t)pscs.n;
	model_strs_clear(&pstr.status.active_agents);
	pstr.status.active_agents = agents;
	memset(&agents, 0, sizeof(agents));
	static const char *const none[] = {NULL};
	reconcile_ready(&pstr.status.conditions, none, RULES_REASON_PROTOCOL_READY,
	                deleting ? d.msg : NULL, og);
	if (node_topology_cond(c, &pstr.status.conditions, og) < 0) {
		r = err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	r = reconcile_write_status(c, &model_pstr_kind, &pstr, before, e);
	if (r == STORE_CONFLICT || r == STORE_NOT_FOUND)
		r = 0;
out:
	free(before);
	model_strs_clear(&pscs);
	model_strs_clear(&agents);
	model_clear(&model_pstr_kind, &pstr);
	return r;
}

/* ---- the generated StorageClass (§6.3) ------------------------------------------------------------ */

static int desired_sc(const struct model_psc *psc, struct model_sc *sc)
{
	const char *psc_name = psc->meta.name;
	struct model_owner_ref *o = calloc(1, sizeof(*o));
	int r = 0;
	memset(sc, 0, sizeof(*sc));
	if (!o)
		return -ENOMEM;
	sc->meta.owner_refs = o;
	sc->meta.n_owner_refs = 1;
	r |= model_str_set(&sc->meta.name, model_psc_sc_name(psc));
	r |= model_map_set(&sc->meta.labels, RULES_LABEL_MANAGED_BY, "pillar-csi");
	r |= model_map_set(&sc->meta.labels, RULES_LABEL_PSC, psc_name);
	r |= model_str_set(&o->api_version, model_psc_kind.api_version);
	r |= model_str_set(&o->kind, model_psc_kind.kind);
	r |= model_str_set(&o->name, psc_name);
	r |= model_str_set(&o->uid, psc->meta.uid ?: "");
	o->has_controller = o->controller = true;
	r |= model_str_set(&sc->provisioner, RULES_DRIVER_NAME);
	r |= model_map_set(&sc->parameters, RULES_KEY_PREFIX "storage-class", psc_name);
	r |= model_map_set(&sc->parameters, "csi.storage.k8s.io/fstype", model_psc_fs_type(psc));
	if (psc->spec.filesystem.mount_options.n)
		r |= model_strs_copy(&sc->mount_options, &psc->spec.filesystem.mount_options);
	r |= model_str_set(&sc->reclaim_policy, model_psc_reclaim_policy(psc));
	r |= model_str_set(&sc->volume_binding_mode, model_psc_binding_mode(psc));
	sc->has_allow_volume_expansion = true;
	sc->allow_volume_expansion = model_psc_allow_expansion(psc);
	return r ? -ENOMEM : 0;
}

static bool str_eq(const char *a, const char *b)
{
	return a && b ? !strcmp(a, b) : !a && !b;
}

static bool map_eq(const struct model_map *a, const struct model_map *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (!str_eq(model_map_get(b, a->kv[i].key), a->kv[i].value))
			return false;
	return true;
}

static bool strs_eq(const struct model_strs *a, const struct model_strs *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]))
			return false;
	return true;
}

static bool owners_eq(const struct model_meta *a, const struct model_meta *b)
{
	if (a->n_owner_refs != b->n_owner_refs)
		return false;
	for (size_t i = 0; i < a->n_owner_refs; i++) {
		const struct model_owner_ref *x = &a->owner_refs[i], *y = &b->owner_refs[i];
		if (!str_eq(x->api_version, y->api_version) || !str_eq(x->kind, y->kind) ||
		    !str_eq(x->name, y->name) || !str_eq(x->uid, y->uid) ||
		    x->has_controller != y->has_controller || x->controller != y->controller ||
		    x->has_block_owner_deletion != y->has_block_owner_deletion)
			return false;
	}
	return true;
}

/* Kubernetes forbids changing these: a difference means delete and recreate. */
static bool needs_recreate(const struct model_sc *cur, const struct model_sc *want)
{
	return !str_eq(cur->provisioner, want->provisioner) ||
	       !map_eq(&cur->parameters, &want->parameters) ||
	       !str_eq(cur->reclaim_policy, want->reclaim_policy) ||
	       !str_eq(cur->volume_binding_mode, want->volume_binding_mode);
}

/* Sets the PSC-owned fields that can change in place on cur; 1 when anything changed, 0 when
 * not, -ENOMEM.  Labels and annotations users added are kept. */
static int patch_in_place(struct model_sc *cur, const struct model_sc *want)
{
	int changed = 0, r = 0;
	if (!strs_eq(&cur->mount_options, &want->mount_options)) {
		r |= model_strs_copy(&cur->mount_options, &want->mount_options);
		changed = 1;
	}
	if (cur->has_allow_volume_expansion != want->has_allow_volume_expansion ||
	    cur->allow_volume_expansion != want->allow_volume_expansion) {
		cur->has_allow_volume_expansion = want->has_allow_volume_expansion;
		cur->allow_volume_expansion = want->allow_volume_expansion;
		changed = 1;
	}
	for (size_t i = 0; i < want->meta.labels.n; i++) {
		const struct model_kv *kv = &want->meta.labels.kv[i];
		if (str_eq(model_map_get(&cur->meta.labels, kv->key), kv->value))
			continue;
		r |= model_map_set(&cur->meta.labels, kv->key, kv->value);
		changed = 1;
	}
	if (!owners_eq(&cur->meta, &want->meta)) {
		struct model_sc tmp = {0};
		r |= model_copy(&model_sc_kind, &tmp, want);
		struct model_owner_ref *o = cur->meta.owner_refs;
		size_t n = cur->meta.n_owner_refs;
		cur->meta.owner_refs = tmp.meta.owner_refs;
		cur->meta.n_owner_refs = tmp.meta.n_owner_refs;
		tmp.meta.owner_refs = o;
		tmp.meta.n_owner_refs = n;
		model_clear(&model_sc_kind, &tmp);
		changed = 1;
	}
	return r ? -ENOMEM : changed;
}

static bool own_key(const char *k)
{
	return !strncmp(k, RULES_KEY_PREFIX, strlen(RULES_KEY_PREFIX));
}

/* The carry-over record of the StorageClass being replaced: every label and annotation except
 * the controller's own (the pillar-csi.bhyoo.com/ prefix and the managed-by label), and its
 * allowedTopologies. */
static int carry_of(const struct model_sc *sc, struct model_sc_carry *co)
{
	int r = 0;
	memset(co, 0, sizeof(*co));
	for (size_t i = 0; i < sc->meta.labels.n; i++) {
		const struct model_kv *kv = &sc->meta.labels.kv[i];
		if (!own_key(kv->key) && strcmp(kv->key, RULES_LABEL_MANAGED_BY))
			r |= model_map_set(&co->labels, kv->key, kv->value);
	}
	for (size_t i = 0; i < sc->meta.annotations.n; i++) {
		const struct model_kv *kv = &sc->meta.annotations.kv[i];
		if (!own_key(kv->key))
			r |= model_map_set(&co->annotations, kv->key, kv->value);
	}
	r |= model_sc_topologies_copy(&co->topologies, &co->n_topologies, sc->topologies,
	                              sc->n_topologies);
	return r ? -ENOMEM : 0;
}

/* Adds the carried labels, annotations and allowedTopologies to a new StorageClass; the
 * controller's labels win. */
static int apply_carry(struct model_sc *sc, const struct model_sc_carry *co)
{
	int r = 0;
	for (size_t i = 0; i < co->labels.n; i++)
		if (!model_map_get(&sc->meta.labels, co->labels.kv[i].key))
			r |= model_map_set(&sc->meta.labels, co->labels.kv[i].key,
			                   co->labels.kv[i].value);
	r |= model_map_copy(&sc->meta.annotations, &co->annotations);
	if (co->n_topologies)
		r |= model_sc_topologies_copy(&sc->topologies, &sc->n_topologies, co->topologies,
		                              co->n_topologies);
	return r ? -ENOMEM : 0;
}

/* Sets (value) or removes (NULL) the carry-over annotation on the PSC with an update. */
static int set_carry_ann(struct ctl *c, struct model_psc *psc, const char *value, struct err *e)
{
	struct model_psc out;
	if (!value && !model_map_get(&psc->meta.annotations, RULES_ANN_SC_CARRY_OVER))
		return 0;
	if (model_map_set(&psc->meta.annotations, RULES_ANN_SC_CARRY_OVER, value) < 0)
		return err_set(e, -ENOMEM, "out of memory");
	int r = model_update(c->st, &model_psc_kind, psc, &out, e);
	if (r == 0) { /* the metadata follows the write */
		struct model_meta m = psc->meta;
		psc->meta = out.meta;
		out.meta = m;
		model_clear(&model_psc_kind, &out);
	}
	return r;
}

static bool ours(const struct model_sc *sc, const char *psc_name)
{
	return str_eq(model_map_get(&sc->meta.labels, RULES_LABEL_PSC), psc_name);
}

/* One sync of the generated StorageClass in progress. */
struct sc_sync {
	struct ctl *c;
	struct model_psc *psc;
	struct model_conds *cs;
	int64_t og;
	char scname[254], m[1400];
	struct model_sc cur, want;
	bool have_cur, have_carry;
	struct model_sc_carry carry;
};

static int sc_error(struct sc_sync *s, int r, struct err *e)
{
	model_cond_set(s->cs, RULES_COND_STORAGE_CLASS_CREATED, "False",
	               RULES_REASON_STORAGE_CLASS_ERROR, s->m, s->og);
	return err_set(e, r, "%s", s->m);
}

/* Recreation (§6.3): the carry-over annotation first, then delete. */
static int sc_recreate(struct sc_sync *s, struct err *e)
{
	struct err se = {0};
	int r;
	if (!s->have_carry) {
		if (carry_of(&s->cur, &s->carry) < 0)
			return err_set(e, -ENOMEM, "out of memory");
		s->have_carry = true;
		char *text = model_type_encode_text(&model_sc_carry_type, &s->carry);
		r = text ? set_carry_ann(s->c, s->psc, text, e) : -ENOMEM;
		free(text);
		if (r < 0)
			return r;
	}
	r = store_delete(s->c->st, model_store_kind(&model_sc_kind), NULL, s->scname,
	                 s->cur.meta.uid, NULL, &se);
	if (r < 0 && r != STORE_NOT_FOUND) {
		snprintf(s->m, sizeof(s->m), "deleting StorageClass \"%s\" to recreate it: %s",
		         s->scname, se.msg);
		return sc_error(s, r, e);
	}
	model_clear(&model_sc_kind, &s->cur);
	s->have_cur = false;
	return 0;
}

/* Creates or patches; 1 when the StorageClass waits for its prerequisites. */
static int sc_write(struct sc_sync *s, bool create_ok, struct err *e)
{
	struct err se = {0};
	int r;
	if (!s->have_cur) {
		if (!create_ok && !s->have_carry) {
			model_cond_set(
			    s->cs, RULES_COND_STORAGE_CLASS_CREATED, "Unknown",
			    RULES_REASON_WAITING_FOR_STORE,
			    "the StorageClass is created once the store and protocol exist and "
			    "Compatible is True",
			    s->og);
			return 1;
		}
		if (s->have_carry && apply_carry(&s->want, &s->carry) < 0)
			return err_set(e, -ENOMEM, "out of memory");
		if ((r = model_create(s->c->st, &model_sc_kind, &s->want, NULL, &se)) < 0) {
			snprintf(s->m, sizeof(s->m), "creating StorageClass \"%s\": %s", s->scname,
			         se.msg);
			return sc_error(s, r, e);
		}
		return 0;
	}
	if ((r = patch_in_place(&s->cur, &s->want)) < 0)
		return err_set(e, r, "out of memory");
	if (r && (r = model_update(s->c->st, &model_sc_kind, &s->cur, NULL, &se)) < 0) {
		snprintf(s->m, sizeof(s->m), "updating StorageClass \"%s\": %s", s->scname, se.msg);
		return sc_error(s, r, e);
	}
	return 0;
}

/* The current StorageClass and the carry-over record; 1 when the pass is over (conflict,
 * read error: reported in the condition). */
static int sc_read(struct sc_sync *s)
{
	const char *psc_name = s->psc->meta.name;
	const char *ann = model_map_get(&s->psc->meta.annotations, RULES_ANN_SC_CARRY_OVER);
	struct err se = {0};
	if (ann && model_type_decode_text(&model_sc_carry_type, ann, &s->carry, NULL) < 0)
		log_warnf("PillarStorageClass %s: ignoring an unreadable %s annotation", psc_name,
		          RULES_ANN_SC_CARRY_OVER);
	else
		s->have_carry = ann != NULL;
	int r = model_get(s->c->st, &model_sc_kind, NULL, s->scname, &s->cur, &se);
	s->have_cur = r == 0;
	if (r < 0 && r != STORE_NOT_FOUND) {
		snprintf(s->m, sizeof(s->m), "reading StorageClass \"%s\": %s", s->scname, se.msg);
		model_cond_set(s->cs, RULES_COND_STORAGE_CLASS_CREATED, "False",
		               RULES_REASON_STORAGE_CLASS_ERROR, s->m, s->og);
		return 1;
	}
	if (r == 0 && !ours(&s->cur, psc_name)) {
		snprintf(s->m, sizeof(s->m),
		         "StorageClass \"%s\" exists and was not generated for PillarStorageClass "
		         "\"%s\"; it is never adopted or overwritten",
		         s->scname, psc_name);
		model_cond_set(s->cs, RULES_COND_STORAGE_CLASS_CREATED, "False",
		               RULES_REASON_STORAGE_CLASS_CONFLICT, s->m, s->og);
		return 1;
	}
	return 0;
}

/* Brings the generated StorageClass in line; sets StorageClassCreated.  create_ok: the
 * prerequisites for creating it hold.  Returns 0 or a negative errno to retry. */
static int sync_sc(struct ctl *c, struct model_psc *psc, bool create_ok, struct err *e)
{
	struct sc_sync s = {.c = c, .psc = psc, .cs = &psc->status.conditions};
	int r;
	s.og = psc->meta.generation;
	snprintf(s.scname, sizeof(s.scname), "%s", model_psc_sc_name(psc));
	if ((r = desired_sc(psc, &s.want)) < 0) {
		r = err_set(e, r, "out of memory");
		goto out;
	}
	if ((r = sc_read(&s)) != 0 ||
	    (s.have_cur && needs_recreate(&s.cur, &s.want) && (r = sc_recreate(&s, e)) < 0) ||
	    (r = sc_write(&s, create_ok, e)) != 0 || (r = set_carry_ann(c, psc, NULL, e)) < 0)
		goto out;
	model_cond_set(s.cs, RULES_COND_STORAGE_CLASS_CREATED, "True",
	               RULES_REASON_STORAGE_CLASS_CREATED, "", s.og);
	r = model_str_set(&psc->status.storage_class_name, s.scname);
out:
	model_type_clear(&model_sc_carry_type, &s.carry);
	model_clear(&model_sc_kind, &s.cur);
	model_clear(&model_sc_kind, &s.want);
	return r > 0 ? 0 : r;
}

/* ---- PillarStorageClass ---------------------------------------------------------------------------- */

/* Dependents of a PSC being deleted (crds.md §14): PVCs of its StorageClass, and volumes until
 * both their PV and their PillarVolumeState are gone. */
static void psc_dependents(struct ctl *c, const char *name, const char *scname,
                           struct reconcile_deps *d)
{
	struct model_strs pvcs = {0}, vols = {0};
	struct model_pvc *claims = NULL;
	struct model_pv *pvs = NULL;
	size_t n = 0;
	struct store_unreadable catch = {reconcile_unreadable_dependent, &pvcs}, prev;
	store_unreadable_catch(&catch, &prev);
	int l = model_list(c->st, &model_pvc_kind, NULL, NULL, (void **)&claims, &n, NULL, NULL);
	store_unreadable_catch(&prev, NULL);
	if (l == 0)
		for (size_t i = 0; i < n; i++) {
			char nn[520];
			if (!str_eq(claims[i].spec.storage_class_name, scname))
				continue;
			snprintf(nn, sizeof(nn), "%s/%s", claims[i].meta.ns ?: "",
			         claims[i].meta.name);
			model_strs_add(&pvcs, nn);
		}
	model_list_free(&model_pvc_kind, claims, n);
	reconcile_names_labeled(c, &model_pvst_kind, RULES_LABEL_PSC, name, &vols);
	catch.arg = &vols;
	store_unreadable_catch(&catch, &prev);
	l = model_list(c->st, &model_pv_kind, NULL, NULL, (void **)&pvs, &n, NULL, NULL);
	store_unreadable_catch(&prev, NULL);
	if (l == 0)
		for (size_t i = 0; i < n; i++)
			if (str_eq(pvs[i].spec.storage_class_name, scname))
				add_unique_sorted(&vols, pvs[i].meta.name);
	model_list_free(&model_pv_kind, pvs, n);
	reconcile_deps_objects(d, "PersistentVolumeClaim", &pvcs);
	reconcile_deps_volumes(d, &vols);
	model_strs_clear(&pvcs);
	model_strs_clear(&vols);
}

static int psc_release(struct ctl *c, struct model_psc *psc, const char *scname, struct err *e)
{
	struct model_sc sc;
	int r = model_get(c->st, &model_sc_kind, NULL, scname, &sc, e);
	if (r == 0 && ours(&sc, psc->meta.name))
		r = store_delete(c->st, model_store_kind(&model_sc_kind), NULL, scname, sc.meta.uid,
		                 NULL, e);
	model_clear(&model_sc_kind, &sc);
	if (r < 0 && r != STORE_NOT_FOUND)
		return r;
	r = reconcile_finalizer(c, &model_psc_kind, psc, RULES_FINALIZER_PSC, false, e);
	return r == STORE_NOT_FOUND ? 0 : r;
}

/* StoreReady and ProtocolValid (crds.md §6.2). */
static void ref_conditions(struct model_conds *cs, const struct model_psc *psc,
                           const struct model_pst *pst, const struct model_pstr *pstr, int64_t og)
{
	const char *sref = psc->spec.store_ref ?: "", *pref = psc->spec.protocol_ref ?: "";
	char m[1400];
	if (!pst) {
		snprintf(m, sizeof(m), "PillarStore \"%s\" not found", sref);
		model_cond_set(cs, RULES_COND_STORE_READY, "False", RULES_REASON_POOL_NOT_FOUND, m,
		               og);
	} else if (strcmp(model_cond_status(&pst->status.conditions, RULES_COND_READY), "True")) {
		const char *reason = model_cond_reason(&pst->status.conditions, RULES_COND_READY);
		snprintf(m, sizeof(m), "PillarStore \"%s\" is not Ready%s%s", sref,
		         reason[0] ? ": " : " yet", reason);
		model_cond_set(cs, RULES_COND_STORE_READY, "False", RULES_REASON_POOL_NOT_READY, m,
		               og);
	} else {
		model_cond_set(cs, RULES_COND_STORE_READY, "True", RULES_REASON_STORE_READY, "",
		               og);
	}
	if (!pstr) {
		snprintf(m, sizeof(m), "PillarProtocol \"%s\" not found", pref);
		model_cond_set(cs, RULES_COND_PROTOCOL_VALID, "False",
		               RULES_REASON_PROTOCOL_NOT_FOUND, m, og);
	} else {
		model_cond_set(cs, RULES_COND_PROTOCOL_VALID, "True", RULES_REASON_PROTOCOL_VALID,
		               "", og);
	}
}

/* Compatible (crds.md §6.2); true when it is True. */
static bool compatible(struct ctl *c, struct model_psc *psc, int64_t og)
{
	struct model_pst pst;
	struct model_pstr pstr;
	struct model_conds *cs = &psc->status.conditions;
	bool have_pst = psc->spec.store_ref && model_get(c->st, &model_pst_kind, NULL,
	                                                 psc->spec.store_ref, &pst, NULL) == 0;
	bool have_pstr =
	    psc->spec.protocol_ref &&
	    model_get(c->st, &model_pstr_kind, NULL, psc->spec.protocol_ref, &pstr, NULL) == 0;
	bool ok = false;
	ref_conditions(cs, psc, have_pst ? &pst : NULL, have_pstr ? &pstr : NULL, og);
	if (!have_pst || !have_pstr) {
		model_cond_set(cs, RULES_COND_COMPATIBLE, "Unknown", RULES_REASON_WAITING_FOR_STORE,
		               "the PillarStore or the PillarProtocol does not exist", og);
	} else {
		char reason[64], msg[1024];
		ok = resolve_psc_compatible(psc, &pst, &pstr, reason, sizeof(reason), msg,
		                            sizeof(msg)) == 0;
		model_cond_set(cs, RULES_COND_COMPATIBLE, ok ? "True" : "False",
		               ok ? RULES_REASON_COMPATIBLE : reason, ok ? "" : msg, og);
	}
	if (have_pst)
		model_clear(&model_pst_kind, &pst);
	if (have_pstr)
		model_clear(&model_pstr_kind, &pstr);
	return ok;
}

int reconcile_psc(struct ctl *c, const char *name, struct err *e)
{
	static const char *const types[] = {RULES_COND_STORE_READY, RULES_COND_PROTOCOL_VALID,
	                                    RULES_COND_COMPATIBLE, RULES_COND_STORAGE_CLASS_CREATED,
	                                    NULL};
	struct model_psc psc;
	char scname[254], *before = NULL;
	struct reconcile_deps d = {0};
	int r = model_get(c->st, &model_psc_kind, NULL, name, &psc, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	snprintf(scname, sizeof(scname), "%s", model_psc_sc_name(&psc));
	bool deleting = psc.meta.deletion_timestamp != NULL;
	if (deleting) {
		psc_dependents(c, name, scname, &d);
		if (!d.msg[0]) {
			r = psc_release(c, &psc, scname, e);
			goto out;
		}
	} else if ((r = reconcile_finalizer(c, &model_psc_kind, &psc, RULES_FINALIZER_PSC, true,
	                                    e)) < 0) {
		r = r == STORE_NOT_FOUND ? 0 : r;
		goto out;
	}
	int64_t og = psc.meta.generation;
	before = model_encode_text(&model_psc_kind, &psc);
	bool ok = compatible(c, &psc, og);
	int sr = 0;
	if (!deleting)
		sr = sync_sc(c, &psc, ok, e);
	reconcile_ready(&psc.status.conditions, types, RULES_REASON_STORAGE_CLASS_AVAILABLE,
	                deleting ? d.msg : NULL, og);
	r = reconcile_write_status(c, &model_psc_kind, &psc, before, e);
	if (r == STORE_CONFLICT || r == STORE_NOT_FOUND)
		r = 0;
	if (r == 0)
		r = sr;
out:
	free(before);
	model_clear(&model_psc_kind, &psc);
	return r;
}
