/* reconcile_common — helpers shared by the reconcilers: finalizers, dependents and the
 * "Deletion blocked: ..." message of crds.md §14, status writes without churn. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile.h"
#include "rules/conditions.h"

int reconcile_finalizer(struct ctl *c, const struct model_kind *k, void *obj, const char *fin,
                        bool present, struct err *e)
{
	struct model_meta *m = MODEL_META(obj);
	if (present == model_strs_has(&m->finalizers, fin))
		return 0;
	if (present ? model_strs_add(&m->finalizers, fin) < 0
	            : !model_strs_remove(&m->finalizers, fin))
		return err_set(e, -ENOMEM, "out of memory");
	void *out = calloc(1, k->type->size);
	if (!out)
		return err_set(e, -ENOMEM, "out of memory");
	int r = model_update(c->st, k, obj, out, e);
	if (r == 0) {
		model_clear(k, obj);
		memcpy(obj, out, k->type->size);
	}
	free(out);
	return r;
}

static const char *ref_of(enum reconcile_ref ref, const void *obj)
{
	switch (ref) {
	case REF_PSC_STORE: return ((const struct model_psc *)obj)->spec.store_ref;
	case REF_PSC_PROTOCOL: return ((const struct model_psc *)obj)->spec.protocol_ref;
	case REF_PST_AGENT: return ((const struct model_pst *)obj)->spec.agent_ref;
	}
	return NULL;
}

void reconcile_unreadable_dependent(void *arg, const struct store_kind *k, const char *ns,
                                    const char *name, const char *error)
{
	char nn[520];
	(void)k;
	(void)error;
	snprintf(nn, sizeof(nn), "%s%s%s", ns ? ns : "", ns ? "/" : "", name);
	model_strs_add(arg, nn);
}

static int names_of(struct ctl *c, const struct model_kind *k, const char *sel,
                    enum reconcile_ref ref, const char *value, struct model_strs *out)
{
	void *items = NULL;
	size_t n = 0;
	int r = 0;
	memset(out, 0, sizeof(*out));
	struct store_unreadable catch = {reconcile_unreadable_dependent, out}, prev;
	store_unreadable_catch(&catch, &prev);
	int l = model_list(c->st, k, NULL, sel, &items, &n, NULL, NULL);
	store_unreadable_catch(&prev, NULL);
	if (l < 0)
		return 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		const void *it = (const char *)items + i * k->type->size;
		const char *v = sel ? value : ref_of(ref, it);
		if (v && !strcmp(v, value))
			r = model_strs_add(out, MODEL_META(it)->name);
	}
	model_list_free(k, items, n);
	return r;
}

int reconcile_names_where(struct ctl *c, enum reconcile_ref ref, const char *value,
                          struct model_strs *out)
{
	return names_of(c, ref == REF_PST_AGENT ? &model_pst_kind : &model_psc_kind, NULL, ref,
	                value, out);
}

int reconcile_names_labeled(struct ctl *c, const struct model_kind *k, const char *label,
                            const char *value, struct model_strs *out)
{
	char sel[600];
	snprintf(sel, sizeof(sel), "%s=%s", label, value);
	return names_of(c, k, sel, REF_PST_AGENT, value, out);
}

static void put(struct reconcile_deps *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(struct reconcile_deps *d, const char *fmt, ...)
{
	va_list ap;
	size_t cap = sizeof(d->msg);
	va_start(ap, fmt);
	int n =
	    vsnprintf(d->msg + (d->o < cap ? d->o : cap - 1), d->o < cap ? cap - d->o : 1, fmt, ap);
	va_end(ap);
	if (n > 0)
		d->o += (size_t)n;
}

static void lead(struct reconcile_deps *d)
{
	put(d, "%s", d->o ? "; " : "Deletion blocked: ");
}

void reconcile_deps_objects(struct reconcile_deps *d, const char *kind,
                            const struct model_strs *names)
{
	size_t n = names->n;
	if (n == 0)
		return;
	lead(d);
	put(d, "%s ", kind);
	for (size_t k = 0; k < n && k < RECONCILE_DEPS_MAX_NAMES; k++)
		put(d, "%s\"%s\"", k ? ", " : "", names->v[k]);
	if (n > RECONCILE_DEPS_MAX_NAMES)
		put(d, " and %zu more", n - RECONCILE_DEPS_MAX_NAMES);
}

void reconcile_deps_volumes(struct reconcile_deps *d, const struct model_strs *names)
{
	size_t n = names->n;
	if (n == 0)
		return;
	lead(d);
	put(d, "%zu volume%s (", n, n == 1 ? "" : "s");
	for (size_t k = 0; k < n && k < RECONCILE_DEPS_MAX_NAMES; k++)
		put(d, "%s%s", k ? ", " : "", names->v[k]);
	if (n > RECONCILE_DEPS_MAX_NAMES)
		put(d, " and %zu more", n - RECONCILE_DEPS_MAX_NAMES);
	put(d, ")");
}

int reconcile_write_status(struct ctl *c, const struct model_kind *k, void *obj, const char *before,
                           struct err *e)
{
	if (model_same(k, obj, before, "status"))
		return 0;
	void *out = calloc(1, k->type->size);
	if (!out)
		return err_set(e, -ENOMEM, "out of memory");
	int r = model_update_status(c->st, k, obj, out, e);
	if (r == 0) { /* later writes stay conditional on the new resourceVersion */
		struct model_meta *m = MODEL_META(obj);
		r = model_str_set(&m->resource_version, MODEL_META(out)->resource_version);
		model_clear(k, out);
	}
	free(out);
	return r;
}

/* Ready from the conditions: DeletionBlocked first, then the first failing type. */
int reconcile_ready(struct model_conds *conds, const char *const *types, const char *ok_reason,
                    const char *blocked, int64_t og)
{
	int r;
	if (blocked) {
		r = model_cond_set(conds, RULES_COND_READY, "False", RULES_REASON_DELETION_BLOCKED,
		                   blocked, og);
		return r < 0 ? r : 0;
	}
	const struct model_cond *bad = NULL;
	bool any = false;
	for (size_t i = 0; types[i]; i++) {
		const struct model_cond *cd = model_cond_get(conds, types[i]);
		if (!cd || !cd->status || strcmp(cd->status, "True")) {
			bad = cd;
			any = true;
			break;
		}
	}
	if (!any) {
		r = model_cond_set(conds, RULES_COND_READY, "True", ok_reason, "", og);
	} else {
		char reason[128], msg[1024];
		snprintf(reason, sizeof(reason), "%s",
		         bad && bad->reason ? bad->reason : "Unknown");
		snprintf(msg, sizeof(msg), "%s", bad && bad->message ? bad->message : "");
		r = model_cond_set(conds, RULES_COND_READY, "False", reason, msg, og);
	}
	return r < 0 ? r : 0;
}
