/* controller/events — condition changes as Kubernetes Events (events.h). */
#include "controller/events.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/kube.h"
#include "model/pillar.h"

#define DIGEST_MAX 2048

struct kind_conds {
	const struct model_kind *k;
	size_t conds_off; /* offsetof the struct model_conds */
};

static const struct kind_conds kinds[] = {
    {&model_pa_kind, offsetof(struct model_pa, status.conditions)},
    {&model_pst_kind, offsetof(struct model_pst, status.conditions)},
    {&model_pstr_kind, offsetof(struct model_pstr, status.conditions)},
    {&model_psc_kind, offsetof(struct model_psc, status.conditions)},
    {&model_pvst_kind, offsetof(struct model_pvst, status.conditions)},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* The last version seen of one object: its conditions as "type\x1fstatus\x1freason\n"... */
struct seen {
	struct seen *next;
	const struct model_kind *k;
	char *name;
	char *digest;
	char *failed_at; /* PillarVolumeState partialFailure.failedAt */
};

struct ctl_events {
	struct kube_events *rec;
	pthread_mutex_t mu; /* the watches call from their threads */
	struct seen *seen;
};

static const struct kind_conds *kind_of(const struct model_kind *k)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].k == k)
			return &kinds[i];
	return NULL;
}

static struct seen **find(struct ctl_events *x, const struct model_kind *k, const char *name)
{
	struct seen **p = &x->seen;
	for (; *p; p = &(*p)->next)
		if ((*p)->k == k && strcmp((*p)->name, name) == 0)
			return p;
	return p;
}

static void seen_free(struct seen *s)
{
	free(s->name);
	free(s->digest);
	free(s->failed_at);
	free(s);
}

/* The line of condition c in a digest ("" when digest lacks it). */
static const char *line_of(const char *digest, const char *type, char *buf, size_t cap)
{
	size_t tl = strlen(type);
	buf[0] = '\0';
	for (const char *p = digest; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		if (n > tl && strncmp(p, type, tl) == 0 && p[tl] == '\x1f') {
			snprintf(buf, cap, "%.*s", (int)n, p);
			break;
		}
		p = nl ? nl + 1 : NULL;
	}
	return buf;
}

static void digest_of(const struct model_conds *cs, char *buf, size_t cap)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < cs->n && o < cap; i++) {
		const struct model_cond *c = &cs->v[i];
		int n = snprintf(buf + o, cap - o, "%s\x1f%s\x1f%s\n", c->type ? c->type : "",
		                 c->status ? c->status : "", c->reason ? c->reason : "");
		if (n < 0 || (size_t)n >= cap - o)
			break;
		o += (size_t)n;
	}
}

/* The involved object of obj (a struct of kind k). */
static struct kube_event_ref ref_of(const struct model_kind *k, const void *obj)
{
	const struct model_meta *m = MODEL_META(obj);
	return (struct kube_event_ref){k->api_version, k->kind, NULL, m->name, m->uid};
}

/* Under x->mu: the objects a volume's Warnings are also recorded on — its PersistentVolumeClaim
 * (spec.claimRef) and its PersistentVolume (named as the volume, uid as last watched). */
static size_t volume_refs(struct ctl_events *x, const struct model_pvst *v,
                          struct kube_event_ref out[2])
{
	size_t n = 0;
	const struct seen *pv = v->meta.name ? *find(x, &model_pv_kind, v->meta.name) : NULL;

	if (v->spec.has_claim_ref && v->spec.claim_ref.name && v->spec.claim_ref.ns)
		out[n++] =
		    (struct kube_event_ref){"v1", "PersistentVolumeClaim", v->spec.claim_ref.ns,
		                            v->spec.claim_ref.name, v->spec.claim_ref.uid};
	if (pv)
		out[n++] =
		    (struct kube_event_ref){"v1", "PersistentVolume", NULL, pv->name, pv->digest};
	return n;
}

/* Under x->mu: remembers a PersistentVolume's uid (in `digest`) or forgets it. */
static void track_pv(struct ctl_events *x, enum store_event_type type, const void *obj)
{
	const struct model_meta *m = MODEL_META(obj);
	struct seen **p = find(x, &model_pv_kind, m->name), *s = *p;
	char *uid = type == STORE_DELETED ? NULL : strdup(m->uid ? m->uid : "");

	if (s && !uid) {
		*p = s->next;
		seen_free(s);
	} else if (s) {
		free(s->digest);
		s->digest = uid;
	} else if (uid && (s = calloc(1, sizeof(*s))) && (s->name = strdup(m->name))) {
		s->k = &model_pv_kind;
		s->digest = uid;
		*p = s;
	} else {
		free(uid);
		free(s);
	}
}

/* Records an Event for each condition of obj whose status or reason differs from old. */
static void emit_changes(struct ctl_events *x, const struct kind_conds *kc, const void *obj,
                         const char *old)
{
	const struct model_conds *cs = (const void *)((const char *)obj + kc->conds_off);
	struct kube_event_ref r = ref_of(kc->k, obj), more[2];
	size_t n_more = kc->k == &model_pvst_kind ? volume_refs(x, obj, more) : 0;
	char was[512], now[512];

	for (size_t i = 0; i < cs->n; i++) {
		const struct model_cond *c = &cs->v[i];
		if (!c->type || !c->reason || !*c->reason)
			continue;
		snprintf(now, sizeof(now), "%s\x1f%s\x1f%s", c->type, c->status ? c->status : "",
		         c->reason);
		if (strcmp(line_of(old, c->type, was, sizeof(was)), now) == 0)
			continue;
		bool ok = c->status && strcmp(c->status, "True") == 0;
		const char *type = ok ? KUBE_EVENT_NORMAL : KUBE_EVENT_WARNING;
		if (c->message && *c->message) {
			kube_events_record(x->rec, &r, type, c->reason, "%s", c->message);
			for (size_t j = 0; j < n_more && !ok; j++)
				kube_events_record(x->rec, &more[j], type, c->reason, "%s",
				                   c->message);
		} else {
			kube_events_record(x->rec, &r, type, c->reason, "%s is %s", c->type,
			                   c->status ? c->status : "Unknown");
		}
	}
}

/* A new partialFailure of a volume: a Warning on the volume, its claim and its PV. */
static void emit_partial_failure(struct ctl_events *x, const struct model_pvst *v, struct seen *s)
{
	const __typeof__(v->status.partial_failure) *pf = &v->status.partial_failure;
	struct kube_event_ref r = ref_of(&model_pvst_kind, v), more[2];
	size_t n_more = volume_refs(x, v, more);
	const char *at = v->status.has_partial_failure && pf->failed_at ? pf->failed_at : "";

	if (strcmp(at, s->failed_at ? s->failed_at : "") == 0)
		return;
	char *copy = strdup(at);
	if (!copy)
		return;
	free(s->failed_at);
	s->failed_at = copy;
	if (!*at || !pf->reason)
		return;
	kube_events_record(x->rec, &r, KUBE_EVENT_WARNING, pf->reason, "%s",
	                   pf->message ? pf->message : "");
	for (size_t j = 0; j < n_more; j++)
		kube_events_record(x->rec, &more[j], KUBE_EVENT_WARNING, pf->reason, "%s",
		                   pf->message ? pf->message : "");
}

void ctl_events_observe(void *arg, const struct model_kind *k, enum store_event_type type,
                        const void *obj)
{
	struct ctl_events *x = arg;
	const struct kind_conds *kc = kind_of(k);
	const char *name = MODEL_META(obj)->name;
	char digest[DIGEST_MAX];

	if (k == &model_pv_kind && name) {
		pthread_mutex_lock(&x->mu);
		track_pv(x, type, obj);
		pthread_mutex_unlock(&x->mu);
		return;
	}
	if (!kc || !name)
		return;
	pthread_mutex_lock(&x->mu);
	struct seen **p = find(x, k, name), *s = *p;
	if (type == STORE_DELETED) {
		if (s) {
			*p = s->next;
			seen_free(s);
		}
		pthread_mutex_unlock(&x->mu);
		return;
	}
	digest_of((const void *)((const char *)obj + kc->conds_off), digest, sizeof(digest));
	if (!s) { /* the baseline */
		s = calloc(1, sizeof(*s));
		if (s && (s->name = strdup(name)) && (s->digest = strdup(digest))) {
			s->k = k;
			if (k == &model_pvst_kind) {
				const struct model_pvst *v = obj;
				s->failed_at = v->status.has_partial_failure &&
				                       v->status.partial_failure.failed_at
				                   ? strdup(v->status.partial_failure.failed_at)
				                   : NULL;
			}
			*p = s;
		} else if (s) {
			seen_free(s);
		}
		pthread_mutex_unlock(&x->mu);
		return;
	}
	if (strcmp(s->digest, digest) != 0) {
		emit_changes(x, kc, obj, s->digest);
		char *d = strdup(digest);
		if (d) {
			free(s->digest);
			s->digest = d;
		}
	}
	if (k == &model_pvst_kind)
		emit_partial_failure(x, obj, s);
	pthread_mutex_unlock(&x->mu);
}

int ctl_events_new(struct kube_events *rec, struct ctl_events **out, struct err *e)
{
	struct ctl_events *x = calloc(1, sizeof(*x));
	if (!x)
		return err_set(e, -ENOMEM, "out of memory");
	x->rec = rec;
	pthread_mutex_init(&x->mu, NULL);
	*out = x;
	return 0;
}

void ctl_events_free(struct ctl_events *x)
{
	if (!x)
		return;
	while (x->seen) {
		struct seen *s = x->seen;
		x->seen = s->next;
		seen_free(s);
	}
	pthread_mutex_destroy(&x->mu);
	free(x);
}
