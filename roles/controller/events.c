/* controller/events — condition changes as Kubernetes Events (events.h). */
#include "controller/events.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hash.h"
#include "base/log.h"
#include "model/kube.h"
#include "model/pillar.h"
#include "rules/bounds.h"
#include "rules/conditions.h"

#define DIGEST_MAX 2048
/* Claims' outage Events waiting for the Events budget, at most (one reference each). */
#define OUTAGE_PENDING_MAX (1u << 20)

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

/* What the storage-node outage Events of a PillarVolumeState need from its last version. */
struct vol_outage {
	char *agent;                             /* spec.agentRef */
	char *claim_ns, *claim_name, *claim_uid; /* spec.claimRef (all set, or none) */
	bool published;                          /* publishedNodes is not empty */
	int64_t ctrl_loss_tmo;                   /* effective: resolved, or the kernel's default */
	bool tmo_default;                        /* nothing set it */
};

/* The last version seen of one object: its conditions as "type\x1fstatus\x1freason\n"... */
struct seen {
	struct seen *next, **pprev; /* the list of every object seen, in the order first seen */
	struct seen *hnext;         /* the chain of its bucket */
	const struct model_kind *k;
	char *name;
	char *digest;
	char *failed_at;       /* PillarVolumeState partialFailure.failedAt */
	struct vol_outage vol; /* PillarVolumeState */
	char *outage_since;    /* PillarAgent: unreachable since (RFC 3339), NULL while reachable */
	unsigned pins;         /* outage Events still to record for it */
	bool gone;             /* deleted: freed with its last pin */
};

/* The claims' Events of one outage's begin or end, recorded as the budget writes them. */
struct outage_batch {
	struct outage_batch *next;
	bool restored;
	char node[640], since[64];
	size_t n, done;
	struct seen *claims[]; /* the volumes, pinned */
};

struct ctl_events {
	struct kube_events *rec;
	pthread_mutex_t mu; /* the watches call from their threads */
	struct seen *seen, **seen_tail;
	struct seen **buckets; /* the objects seen by kind and name (nb buckets, n objects) */
	size_t nb, n;
	struct outage_batch *head, *tail; /* in the order the outages changed */
	size_t pending;                   /* claims' Events in them */
};

static const struct kind_conds *kind_of(const struct model_kind *k)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].k == k)
			return &kinds[i];
	return NULL;
}

static struct seen **bucket(const struct ctl_events *x, const struct model_kind *k,
                            const char *name)
{
	uint32_t h = (hash_fnv1a32(name) ^ (uint32_t)((uintptr_t)k >> 4)) * HASH_FNV1A32_PRIME;
	return &x->buckets[h % x->nb];
}

/* Under x->mu: the object of kind k named name seen last, or NULL. */
static struct seen *find(const struct ctl_events *x, const struct model_kind *k, const char *name)
{
	if (!x->nb)
		return NULL;
	for (struct seen *s = *bucket(x, k, name); s; s = s->hnext)
		if (s->k == k && strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

/* Under x->mu: doubles the buckets when the objects outnumber them; out of memory: stays
 * (longer chains).  False when there is no bucket at all. */
static bool grow(struct ctl_events *x)
{
	if (x->n < x->nb)
		return true;
	size_t nb = x->nb ? x->nb * 2 : 256, onb = x->nb;
	struct seen **b = calloc(nb, sizeof(*b)), **old = x->buckets;
	if (!b)
		return x->nb != 0;
	x->buckets = b;
	x->nb = nb;
	for (size_t i = 0; i < onb; i++)
		while (old[i]) {
			struct seen *s = old[i], **to = bucket(x, s->k, s->name);
			old[i] = s->hnext;
			s->hnext = *to;
			*to = s;
		}
	free(old);
	return true;
}

/* Under x->mu: s (k and name set) becomes the object seen of its kind and name, last in the
 * list.  False when out of memory (s is not linked). */
static bool link_seen(struct ctl_events *x, struct seen *s)
{
	if (!grow(x))
		return false;
	struct seen **b = bucket(x, s->k, s->name);
	s->hnext = *b;
	*b = s;
	if (!x->seen_tail)
		x->seen_tail = &x->seen;
	s->next = NULL;
	s->pprev = x->seen_tail;
	*x->seen_tail = s;
	x->seen_tail = &s->next;
	x->n++;
	return true;
}

/* Under x->mu: s is no longer in the table nor the list (its pins may keep it). */
static void unlink_seen(struct ctl_events *x, struct seen *s)
{
	struct seen **p = bucket(x, s->k, s->name);
	while (*p && *p != s)
		p = &(*p)->hnext;
	if (*p)
		*p = s->hnext;
	*s->pprev = s->next;
	if (s->next)
		s->next->pprev = s->pprev;
	else
		x->seen_tail = s->pprev;
	s->next = s->hnext = NULL;
	x->n--;
}

static void vol_outage_clear(struct vol_outage *o)
{
	free(o->agent);
	free(o->claim_ns);
	free(o->claim_name);
	free(o->claim_uid);
	*o = (struct vol_outage){0};
}

static void seen_free(struct seen *s)
{
	free(s->name);
	free(s->digest);
	free(s->failed_at);
	vol_outage_clear(&s->vol);
	free(s->outage_since);
	free(s);
}

/* crds.md §3.3, §5.2, §6.2, §7.3: a False condition with one of these reasons is a step of normal
 * progress (provisioning, deletion, a restore after an agent restart, start-up order), not
 * something to act on: its Event is Normal and stays on the object.  A failure behind a pending
 * step is reported by its own Warning (a volume's partialFailure, the agent's HealthCheckFailed):
 * so is an agent's behind a PillarStore's AgentNotReady, and a store's behind a
 * PillarStorageClass's PoolNotReady (which objects applied together pass through before the
 * agent's first contact). */
static const char *const progress_reasons[] = {
    RULES_REASON_PROVISIONING,
    RULES_REASON_CREATE_PARTIAL,
    RULES_REASON_DELETING,
    RULES_REASON_BACKEND_PENDING,
    RULES_REASON_EXPORT_PENDING,
    RULES_REASON_EXPORT_RESTORE_PENDING,
    RULES_REASON_WAITING_FOR_AGENT_DATA,
    RULES_REASON_WAITING_FOR_STORE,
    RULES_REASON_AGENT_NOT_READY,
    RULES_REASON_POOL_NOT_READY,
};

static bool progress(const char *reason)
{
	for (size_t i = 0; i < sizeof(progress_reasons) / sizeof(progress_reasons[0]); i++)
		if (!strcmp(reason, progress_reasons[i]))
			return true;
	return false;
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
	const struct seen *pv = v->meta.name ? find(x, &model_pv_kind, v->meta.name) : NULL;

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
	struct seen *s = find(x, &model_pv_kind, m->name);
	char *uid = type == STORE_DELETED ? NULL : strdup(m->uid ? m->uid : "");

	if (s && !uid) {
		unlink_seen(x, s);
		seen_free(s);
	} else if (s) {
		free(s->digest);
		s->digest = uid;
	} else if (uid && (s = calloc(1, sizeof(*s))) && (s->name = strdup(m->name))) {
		s->k = &model_pv_kind;
		s->digest = uid;
		if (!link_seen(x, s))
			seen_free(s);
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
		bool ok = (c->status && strcmp(c->status, "True") == 0) || progress(c->reason);
		const char *type = ok ? KUBE_EVENT_NORMAL : KUBE_EVENT_WARNING;
		/* an unreachable agent is told on the claim by the outage Event (outage_begin) */
		bool copy = !ok && strcmp(c->reason, RULES_REASON_AGENT_UNAVAILABLE) != 0;
		if (c->message && *c->message) {
			kube_events_record(x->rec, &r, type, c->reason, "%s", c->message);
			for (size_t j = 0; j < n_more && copy; j++)
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

/* ---- storage-node outages on the claims of published volumes ------------------------------- */

/* Under x->mu: what v's outage Events need (a claim left out when out of memory: the volume then
 * gets none). */
static void track_volume(struct seen *s, const struct model_pvst *v)
{
	struct vol_outage *o = &s->vol;
	const struct model_resolved *rs = &v->spec.resolved;
	bool set = v->spec.has_resolved && rs->has_protocol && rs->protocol.has_nvmeof_tcp &&
	           rs->protocol.nvmeof_tcp.has_ctrl_loss_tmo;

	vol_outage_clear(o);
	o->published = v->status.n_published > 0;
	o->ctrl_loss_tmo = set ? rs->protocol.nvmeof_tcp.ctrl_loss_tmo : RULES_KERNEL_CTRL_LOSS_TMO;
	o->tmo_default = !set;
	o->agent = v->spec.agent_ref ? strdup(v->spec.agent_ref) : NULL;
	if (!v->spec.has_claim_ref || !v->spec.claim_ref.ns || !v->spec.claim_ref.name)
		return;
	o->claim_ns = strdup(v->spec.claim_ref.ns);
	o->claim_name = strdup(v->spec.claim_ref.name);
	o->claim_uid = strdup(v->spec.claim_ref.uid ? v->spec.claim_ref.uid : "");
	if (!o->claim_ns || !o->claim_name || !o->claim_uid) {
		free(o->claim_ns);
		free(o->claim_name);
		free(o->claim_uid);
		o->claim_ns = o->claim_name = o->claim_uid = NULL;
	}
}

/* "workers' kernels give up ... at <since + ctrlLossTmo>" for one volume. */
static void give_up_text(const char *since, const char *volume, const struct vol_outage *o,
                         char *buf, size_t cap)
{
	const char *dflt = o->tmo_default ? ", the kernel default" : "";
	struct tm tm = {0}, at_tm;
	const char *end = strptime(since, "%Y-%m-%dT%H:%M:%SZ", &tm);
	char at[32] = "";

	if (o->ctrl_loss_tmo < 0) {
		snprintf(buf, cap,
		         "workers' kernels retry volume \"%s\" for ever (ctrlLossTmo %lld)", volume,
		         (long long)o->ctrl_loss_tmo);
		return;
	}
	time_t t = end && !*end ? timegm(&tm) + (time_t)o->ctrl_loss_tmo : (time_t)-1;
	if (t != (time_t)-1 && gmtime_r(&t, &at_tm))
		strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &at_tm);
	snprintf(buf, cap,
	         "workers' kernels give up on volume \"%s\" at %s (ctrlLossTmo %lld s%s) unless "
	         "its exports are restored by then",
	         volume, at[0] ? at : "the end of ctrlLossTmo", (long long)o->ctrl_loss_tmo, dflt);
}

static void node_text(const struct model_pa *a, char *buf, size_t cap)
{
	if (a->spec.has_node_ref && a->spec.node_ref.name)
		snprintf(buf, cap, "storage node \"%s\" (PillarAgent \"%s\")",
		         a->spec.node_ref.name, a->meta.name);
	else
		snprintf(buf, cap, "the storage node of PillarAgent \"%s\" (%s)", a->meta.name,
		         a->status.resolved_address ? a->status.resolved_address : "no address");
}

/* Under x->mu: the outage Event of batch b on the claim of volume s. */
static void outage_record(struct ctl_events *x, const struct outage_batch *b, const struct seen *s)
{
	const struct vol_outage *o = &s->vol;
	struct kube_event_ref r = {"v1", "PersistentVolumeClaim", o->claim_ns, o->claim_name,
	                           o->claim_uid};
	char when[600];

	if (!o->claim_name)
		return;
	if (b->restored) {
		kube_events_record(x->rec, &r, KUBE_EVENT_NORMAL, RULES_EVENT_STORAGE_NODE_RESTORED,
		                   "the exports of %s are restored; it was unreachable since %s",
		                   b->node, b->since);
		return;
	}
	give_up_text(b->since, s->name, o, when, sizeof(when));
	kube_events_record(x->rec, &r, KUBE_EVENT_WARNING, RULES_EVENT_STORAGE_NODE_UNREACHABLE,
	                   "%s is unreachable since %s; %s", b->node, b->since, when);
}

/* Under x->mu: releases a volume's pin (freeing it when deleted and no longer pinned). */
static void unpin(struct seen *s)
{
	if (--s->pins == 0 && s->gone)
		seen_free(s);
}

/* Under x->mu: records the waiting claims' Events, in order, while the recorder's queue is short,
 * so a burst of them waits here in compact form (a pinned reference per claim) instead of as
 * formatted Events in the recorder's bounded queue. */
static void feed_locked(struct ctl_events *x)
{
	while (x->head && kube_events_backlog(x->rec) < KUBE_EVENTS_FEED_HIGH) {
		struct outage_batch *b = x->head;
		struct seen *s = b->claims[b->done++];
		outage_record(x, b, s);
		unpin(s);
		x->pending--;
		if (b->done == b->n) {
			x->head = b->next;
			if (!x->head)
				x->tail = NULL;
			free(b);
		}
	}
}

/* The recorder's feeder (kube_events_set_feeder). */
static void feed(void *arg)
{
	struct ctl_events *x = arg;
	pthread_mutex_lock(&x->mu);
	feed_locked(x);
	pthread_mutex_unlock(&x->mu);
}

static bool outage_claim(const struct seen *s, const char *agent)
{
	const struct vol_outage *o = &s->vol;
	return s->k == &model_pvst_kind && !s->gone && o->published && o->claim_name && o->agent &&
	       strcmp(o->agent, agent) == 0;
}

/* Under x->mu: one Event on the claim of each published volume of agent a: the Warning that its
 * storage node is unreachable since `since`, or (restored) the Normal that it is back.  A full
 * pass over the volumes seen, once per outage; the Events are recorded as the Events budget
 * writes them (feed_locked), after those of earlier outages. */
static void outage_each(struct ctl_events *x, const struct model_pa *a, const char *since,
                        bool restored)
{
	size_t n = 0, kept = 0;
	for (const struct seen *s = x->seen; s; s = s->next)
		n += outage_claim(s, a->meta.name);
	size_t room = OUTAGE_PENDING_MAX - x->pending;
	size_t want = n < room ? n : room;
	struct outage_batch *b = want ? calloc(1, sizeof(*b) + want * sizeof(b->claims[0])) : NULL;
	for (struct seen *s = x->seen; b && s && kept < want; s = s->next)
		if (outage_claim(s, a->meta.name)) {
			s->pins++;
			b->claims[kept++] = s;
		}
	if (n > kept)
		kube_events_drop(x->rec, (unsigned long)(n - kept));
	if (!b)
		return;
	b->restored = restored;
	b->n = kept;
	node_text(a, b->node, sizeof(b->node));
	snprintf(b->since, sizeof(b->since), "%s", since);
	*(x->tail ? &x->tail->next : &x->head) = b;
	x->tail = b;
	x->pending += kept;
	feed_locked(x);
}

static bool cond_is(const struct model_cond *c, const char *status)
{
	return c && c->status && !strcmp(c->status, status);
}

/* Under x->mu: an agent's outage begins when AgentConnected turns False because the agent did
 * not answer (HealthCheckFailed, TLSHandshakeFailed) and ends when it is connected and its
 * ExportsReady is True again.  A baseline only records an outage in progress (its Warnings were
 * a predecessor's), so that its end is still told. */
static void outage_observe(struct ctl_events *x, struct seen *s, const struct model_pa *a,
                           bool baseline)
{
	const struct model_conds *cs = &a->status.conditions;
	const struct model_cond *conn = model_cond_get(cs, RULES_COND_AGENT_CONNECTED);
	const struct model_cond *exports = model_cond_get(cs, RULES_COND_EXPORTS_READY);
	bool down = cond_is(conn, "False") && conn->reason &&
	            (!strcmp(conn->reason, RULES_REASON_HEALTH_CHECK_FAILED) ||
	             !strcmp(conn->reason, RULES_REASON_TLS_HANDSHAKE_FAILED));
	char now[32];

	if (down && !s->outage_since) {
		const char *since = conn->last_transition_time;
		if (!since || !*since) {
			store_timestamp(now, sizeof(now));
			since = now;
		}
		s->outage_since = strdup(since);
		if (!baseline && s->outage_since)
			outage_each(x, a, s->outage_since, false);
	} else if (s->outage_since && cond_is(conn, "True") && cond_is(exports, "True")) {
		if (!baseline)
			outage_each(x, a, s->outage_since, true);
		free(s->outage_since);
		s->outage_since = NULL;
	}
}

/* Under x->mu: what a kind's own bookkeeping takes from each version (baseline or not). */
static void track(struct ctl_events *x, struct seen *s, const void *obj, bool baseline)
{
	if (s->k == &model_pvst_kind)
		track_volume(s, obj);
	else if (s->k == &model_pa_kind)
		outage_observe(x, s, obj, baseline);
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
	struct seen *s = find(x, k, name);
	if (type == STORE_DELETED) {
		if (s) {
			unlink_seen(x, s);
			s->gone = true;
			if (!s->pins)
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
			if (link_seen(x, s))
				track(x, s, obj, true);
			else
				seen_free(s);
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
	track(x, s, obj, false);
	pthread_mutex_unlock(&x->mu);
}

int ctl_events_new(struct kube_events *rec, struct ctl_events **out, struct err *e)
{
	struct ctl_events *x = calloc(1, sizeof(*x));
	if (!x)
		return err_set(e, -ENOMEM, "out of memory");
	x->rec = rec;
	pthread_mutex_init(&x->mu, NULL);
	if (rec)
		kube_events_set_feeder(rec, feed, x);
	*out = x;
	return 0;
}

void ctl_events_free(struct ctl_events *x)
{
	if (!x)
		return;
	if (x->rec)
		kube_events_set_feeder(x->rec, NULL, NULL);
	while (x->head) {
		struct outage_batch *b = x->head;
		x->head = b->next;
		for (size_t i = b->done; i < b->n; i++)
			unpin(b->claims[i]);
		free(b);
	}
	while (x->seen) {
		struct seen *s = x->seen;
		x->seen = s->next;
		seen_free(s);
	}
	free(x->buckets);
	pthread_mutex_destroy(&x->mu);
	free(x);
}
