/* loop — watches, work queue, workers and the periodic resync of the controller (loop.h). */
#include "controller/loop.h"
#include "controller/recovery.h"

#include "base/flags.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "controller/agentmon.h"
#include "controller/reconcile.h"
#include "controller/vdigest.h"
#include "model/kube.h"

#define KEY_MAX        320
#define WATCH_WAIT     1000 /* how soon a watcher notices the loop stopping (each wake costs CPU) */
#define MAX_WORKERS    2
#define MEM_RELEASE_MS 10000
#define WORKER_WAIT_MS 10000

static const char *const watched[] = {
    "PillarAgent",       "PillarStore",  "PillarProtocol", "PillarStorageClass",
    "PillarVolumeState", "StorageClass", "Node",           "PersistentVolumeClaim",
    "PersistentVolume",  "CSINode"};
#define NWATCH (sizeof(watched) / sizeof(watched[0]))

struct watcher {
	struct controller_loop *l;
	const struct model_kind *k;
	pthread_t th;
	bool started;
};

struct controller_loop {
	struct ctl *c;
	workqueue *q;
	int interval_ms, capacity_ms, nworkers;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	unsigned long passes;
	int64_t started_ms;   /* the loop's start */
	size_t lists, listed; /* watched kinds, and those listed once */
	bool volumes_tried;   /* the PillarVolumeState watcher's first list was tried */
	long first_pass_ms;   /* controller_loop_first_pass_ms, -1 until then */
	struct watcher w[NWATCH];
	pthread_t workers[MAX_WORKERS];
	int nstarted;
	pthread_t timer;
	bool timer_started;
	struct agentmon *mon;
	struct vdigests vd;                /* used only by the PillarVolumeState watcher thread */
	struct controller_loop_opts hooks; /* may_reconcile, observe */
};

static bool stopping(struct controller_loop *l)
{
	pthread_mutex_lock(&l->mu);
	bool s = l->stop;
	pthread_mutex_unlock(&l->mu);
	return s;
}

/* Sleeps up to ms; returns true when the loop is stopping. */
static bool nap(struct controller_loop *l, int ms)
{
	struct timespec ts = time_after(CLOCK_MONOTONIC, ms);
	pthread_mutex_lock(&l->mu);
	while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &ts) != ETIMEDOUT)
		;
	bool s = l->stop;
	pthread_mutex_unlock(&l->mu);
	return s;
}

static void enqueue(struct controller_loop *l, const char *prefix, const char *name, int delay)
{
	char key[KEY_MAX];
	if (!name || !*name)
		return;
	if ((size_t)snprintf(key, sizeof(key), "%s/%s", prefix, name) >= sizeof(key))
		return; /* object names are at most 253 characters: cannot happen */
	workqueue_add(l->q, key, delay);
}

static void enqueue_all(struct controller_loop *l, const struct model_kind *k, const char *prefix)
{
	void *items = NULL;
	size_t n = 0;
	if (model_list(l->c->st, k, NULL, NULL, &items, &n, NULL, NULL) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		enqueue(l, prefix, MODEL_META((char *)items + i * k->type->size)->name, 0);
	model_list_free(k, items, n);
}

static void enqueue_where(struct controller_loop *l, enum reconcile_ref ref, const char *prefix,
                          const char *value)
{
	struct model_strs names = {0};
	if (!value)
		return;
	reconcile_names_where(l->c, ref, value, &names);
	for (size_t i = 0; i < names.n; i++)
		enqueue(l, prefix, names.v[i], 0);
	model_strs_clear(&names);
}

/* An agent's liveness or restore gate changed (agentmon.h, ctl.restore_kick): its pass runs
 * ahead of whatever is queued (a periodic pass queues every agent's whole-list resync, seconds
 * of work for the workers), so an agent back from a reboot gets its restore at once. */
static void kick(void *arg, const char *agent)
{
	struct controller_loop *l = arg;
	char key[KEY_MAX];
	atomic_fetch_add(&l->c->agents_epoch, 1);
	if (agent && *agent && (size_t)snprintf(key, sizeof(key), "pa/%s", agent) < sizeof(key))
		workqueue_add_first(l->q, key);
}

/* Notes the end of the first reconcile pass (loop.h) when it has come: called after each
 * kind's first list and after each reconcile. */
static void first_pass_check(struct controller_loop *l)
{
	long ms = -1;
	pthread_mutex_lock(&l->mu);
	if (l->first_pass_ms < 0 && l->listed == l->lists && workqueue_idle(l->q))
		ms = l->first_pass_ms = (long)(time_mono_ms() - l->started_ms);
	pthread_mutex_unlock(&l->mu);
	if (ms >= 0) {
		char secs[32];
		snprintf(secs, sizeof(secs), "%.3f", (double)ms / 1000);
		log_info("first reconcile pass done", "seconds", secs);
	}
}

long controller_loop_first_pass_ms(struct controller_loop *l)
{
	pthread_mutex_lock(&l->mu);
	long ms = l->first_pass_ms;
	pthread_mutex_unlock(&l->mu);
	return ms;
}

/* ---- events ------------------------------------------------------------------------------------ */

/* The PillarAgents whose nodeRef names node. */
static void enqueue_agents_of_node(struct controller_loop *l, const char *node)
{
	struct model_pa *items = NULL;
	size_t n = 0;
	if (model_list(l->c->st, &model_pa_kind, NULL, NULL, (void **)&items, &n, NULL, NULL) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *nn = items[i].spec.node_ref.name;
		if (nn && !strcmp(nn, node))
			enqueue(l, "pa", items[i].meta.name, 0);
	}
	model_list_free(&model_pa_kind, items, n);
}

static void on_pillar_event(struct controller_loop *l, const char *kind, enum store_event_type type,
                            const void *obj)
{
	const char *name = MODEL_META(obj)->name;
	bool gone = type == STORE_DELETED;
	if (!strcmp(kind, "PillarAgent")) {
		const struct model_pa *pa = obj;
		if (agentmon_set(l->mon, name, gone ? NULL : pa->status.resolved_address,
		                 gone ? AGENTMON_UNKNOWN : agentmon_recorded(pa)))
			log_warnf(
			    "agent monitor: out of memory recording %s; the next periodic pass "
			    "records it",
			    name);
		/* not for the agent's own status write (ctl.h: ctl_own_event); its dependents do */
		if (type != STORE_MODIFIED ||
		    !ctl_own_event(l->c, name, model_meta_rv(MODEL_META(obj))))
			enqueue(l, "pa", name, 0);
		enqueue_where(l, REF_PST_AGENT, "pst", name);
		enqueue_all(l, &model_pstr_kind, "pstr");
	} else if (!strcmp(kind, "PillarStore")) {
		enqueue(l, "pst", name, 0);
		enqueue_where(l, REF_PSC_STORE, "psc", name);
		enqueue_all(l, &model_pstr_kind, "pstr");
		if (gone)
			enqueue(l, "pa", ((const struct model_pst *)obj)->spec.agent_ref, 0);
	} else if (!strcmp(kind, "PillarProtocol")) {
		enqueue(l, "pstr", name, 0);
		enqueue_where(l, REF_PSC_PROTOCOL, "psc", name);
	} else if (!strcmp(kind, "PillarStorageClass")) {
		const struct model_psc *psc = obj;
		enqueue(l, "psc", name, 0);
		enqueue(l, "pstr", psc->spec.protocol_ref, 0);
		if (gone)
			enqueue(l, "pst", psc->spec.store_ref, 0);
	}
}

static void on_event(struct controller_loop *l, const struct model_kind *k,
                     enum store_event_type type, const void *obj, bool initial)
{
	const struct model_meta *m = MODEL_META(obj);
	const char *name = m->name, *kind = k->kind;
	bool gone = type == STORE_DELETED;
	if (!name)
		return;
	if (l->hooks.observe)
		l->hooks.observe(l->hooks.observe_arg, k, type, obj);
	if (!strncmp(kind, "Pillar", 6) && strcmp(kind, "PillarVolumeState")) {
		on_pillar_event(l, kind, type, obj);
	} else if (!strcmp(kind, "StorageClass")) {
		if (type == STORE_MODIFIED)
			enqueue(l, "psc", model_map_get(&m->labels, RULES_LABEL_PSC), 0);
		else
			enqueue_all(l, &model_psc_kind, "psc");
	} else if (!strcmp(kind, "Node")) {
		enqueue_agents_of_node(l, name);
	} else if (!strcmp(kind, "CSINode")) {
		enqueue_all(l, &model_pstr_kind, "pstr"); /* NodeTopology */
		if (!gone && model_map_get(&m->annotations, RULES_ANN_LOST_VOLUMES))
			enqueue(l, "lost", name, 0); /* recovery.h */
	} else if (!strcmp(kind, "PersistentVolumeClaim") || !strcmp(kind, "PersistentVolume")) {
		if (gone)
			enqueue_all(l, &model_psc_kind, "psc");
	} else if (!strcmp(kind, "PillarVolumeState")) {
		if (gone) {
			vdigests_drop(&l->vd, name);
			ctl_export_forget(l->c, name);
			enqueue(l, "pa", model_map_get(&m->labels, RULES_LABEL_AGENT), 0);
			enqueue(l, "pst", model_map_get(&m->labels, RULES_LABEL_STORE), 0);
			enqueue(l, "psc", model_map_get(&m->labels, RULES_LABEL_PSC), 0);
		} else if (vdigests_update(&l->vd, name, obj) &&
		           (!initial || vdigest_unconfirmed(obj))) {
			/* a change; at the start, one no resync confirmed (vdigest.h) */
			enqueue(l, "vol", name, 0);
		}
	}
}

/* After a (re)list: volumes that vanished while the watch was down count as deleted. */
static void relist_volumes_done(struct controller_loop *l)
{
	vdigests_drop_unseen(&l->vd);
	enqueue_all(l, &model_pa_kind, "pa");
	enqueue_all(l, &model_pst_kind, "pst");
	enqueue_all(l, &model_psc_kind, "psc");
}

struct relisting {
	struct controller_loop *l;
	const struct model_kind *k;
	bool initial;
	struct agent_counts_seed *seed; /* the first list of the volumes: the agents' counts */
};

static int relisted(void *obj, void *arg)
{
	struct relisting *x = arg;
	on_event(x->l, x->k, STORE_ADDED, obj, x->initial);
	if (x->seed)
		reconcile_agent_counts_seed_add(x->seed, obj);
	return 0;
}

/* The PillarVolumeState watcher's first list was tried: the agents' passes that wait for it go
 * on. */
static void volumes_tried(struct controller_loop *l)
{
	pthread_mutex_lock(&l->mu);
	l->volumes_tried = true;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

/* An agent's first pass counts its volumes (reconcile_agent_counts): it waits for the
 * PillarVolumeState watcher's first list, whose decoding the counts then reuse, instead of
 * decoding every volume a second time beside it. */
static void await_volumes(struct controller_loop *l)
{
	pthread_mutex_lock(&l->mu);
	while (!l->volumes_tried && !l->stop)
		pthread_cond_wait(&l->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

/* One list: every object as ADDED; the list's resourceVersion in *rv.  One object decoded at a
 * time (model_list_each): a start or a relist never holds the whole kind decoded. */
static int relist(struct watcher *w, bool initial, uint64_t *rv)
{
	struct controller_loop *l = w->l;
	const struct model_kind *k = w->k;
	bool pvst = k == &model_pvst_kind;
	struct agent_counts_seed seed = {0};
	struct relisting x = {l, k, initial, pvst && initial ? &seed : NULL};
	struct err e = {0};
	if (pvst)
		vdigests_unsee(&l->vd);
	/* the volumes' first list is decoded as the cache receives it: a volume's ADDED calls no
	 * store (the other kinds' list them) */
	bool joins = store_cache_thread_joins(pvst);
	int r = model_list_each(l->c->st, k, NULL, NULL, relisted, &x, rv, &e);
	store_cache_thread_joins(joins);
	if (r < 0)
		seed.err = r;
	if (x.seed)
		reconcile_agent_counts_seeded(l->c, &seed);
	if (pvst && initial)
		volumes_tried(l);
	if (r < 0) {
		log_warnf("listing %s: %s", model_store_kind(k)->plural, e.msg);
		return -1;
	}
	if (pvst && !initial)
		relist_volumes_done(l);
	return 0;
}

/* Follows a watch until an event was lost (STORE_EXPIRED, or one dropped for want of memory:
 * relist) or the loop stops.  Another failure (the API server unreachable) keeps the watch,
 * which resumes from the last version it delivered, as client-go's reflector does: relisting
 * would queue every object again each time the server could not be reached. */
static void follow(struct watcher *w, store_watch *sw)
{
	struct controller_loop *l = w->l;
	void *obj = calloc(1, w->k->type->size);
	if (!obj)
		return;
	while (!stopping(l)) {
		enum store_event_type type;
		struct err e = {0};
		int r = model_watch_next(sw, WATCH_WAIT, w->k, &type, obj, &e);
		if (r == 0)
			continue;
		if (r == STORE_EXPIRED || r == -ENOMEM)
			break; /* relist */
		if (r < 0) {
			log_warnf("watch of %s: %s", model_store_kind(w->k)->plural, e.msg);
			nap(l, 500);
			continue;
		}
		on_event(l, w->k, type, obj, false);
		model_clear(w->k, obj);
	}
	free(obj);
}

static void *watch_main(void *arg)
{
	struct watcher *w = arg;
	struct controller_loop *l = w->l;
	bool initial = true;
	store_cache_thread_reads(true); /* lists from the store's caches (store.h) */
	while (!stopping(l)) {
		uint64_t rv = 0;
		struct err e = {0};
		if (relist(w, initial, &rv) < 0) {
			nap(l, 1000);
			continue;
		}
		if (initial) {
			pthread_mutex_lock(&l->mu);
			l->listed++;
			pthread_mutex_unlock(&l->mu);
			first_pass_check(l);
		}
		initial = false;
		store_watch *sw = NULL;
		int r = store_watch_open(l->c->st, model_store_kind(w->k), rv, &sw, &e);
		if (r < 0) {
			if (r != STORE_EXPIRED) {
				log_warnf("watching %s: %s", model_store_kind(w->k)->plural, e.msg);
				nap(l, 1000);
			}
			continue;
		}
		follow(w, sw);
		store_watch_close(sw);
	}
	return NULL;
}

/* ---- workers and timer ---------------------------------------------------------------------------- */

/* Runs one key; false on failure (backoff).  *requeue_ms >= 0 asks for another pass. */
static bool dispatch(struct controller_loop *l, const char *key, int *requeue_ms)
{
	struct ctl *c = l->c;
	struct err e = {0};
	const char *slash = strchr(key, '/');
	int r = 0;
	*requeue_ms = -1;
	if (!slash)
		return true;
	const char *name = slash + 1;
	size_t pl = (size_t)(slash - key);
#define IS(p) (pl == strlen(p) && !strncmp(key, p, pl))
	if (IS("pa")) {
		int rq = RECONCILE_INTERVAL_MS;
		await_volumes(l);
		r = reconcile_agent(c, name, &rq, &e);
		if (r == 0 && rq == 0)
			*requeue_ms = 0; /* conflict: read the newer object (rate limited) */
		else if (r == 0 && rq < RECONCILE_INTERVAL_MS && rq < l->interval_ms)
			*requeue_ms = rq; /* the 5 s restore retry */
	} else if (IS("pst")) {
		r = reconcile_store(c, name, false, &e);
	} else if (IS("cap")) {
		r = reconcile_store(c, name, true, &e);
	} else if (IS("pstr")) {
		r = reconcile_protocol(c, name, &e);
	} else if (IS("psc")) {
		r = reconcile_psc(c, name, &e);
	} else if (IS("vol")) {
		r = reconcile_volume(c, name, &e);
	} else if (IS("sync")) {
		r = reconcile_agent_resync(c, name, &e);
	} else if (IS("lost")) {
		r = reconcile_lost(c, name, &e);
	} else if (IS("abandoned")) {
		r = reconcile_abandoned(c, (long long)time(NULL), NULL, &e);
	}
#undef IS
	pthread_mutex_lock(&l->mu);
	l->passes++;
	pthread_mutex_unlock(&l->mu);
	if (r < 0) {
		log_warnf("reconcile %s failed: %s", key, e.msg[0] ? e.msg : store_reason(r));
		return false;
	}
	return true;
}

static void *worker_main(void *arg)
{
	struct controller_loop *l = arg;
	char key[KEY_MAX];
	store_cache_thread_reads(true); /* reconcilers read from the store's caches */
	for (;;) {
		/* a key, a due delayed key or the shutdown wakes it: the timeout is only a backstop */
		int r = workqueue_get(l->q, WORKER_WAIT_MS, key, sizeof(key));
		if (r < 0)
			break;
		if (r == 0)
			continue;
		if (l->hooks.may_reconcile &&
		    !l->hooks.may_reconcile(l->hooks.may_reconcile_arg, key)) {
			workqueue_done(l->q, key, true); /* not the leader (any more): not ours */
			continue;
		}
		int rq;
		bool ok = dispatch(l, key, &rq);
		workqueue_done(l->q, key, ok);
		if (ok && rq == 0)
			workqueue_add_rate_limited(l->q, key);
		else if (ok && rq > 0)
			workqueue_add(l->q, key, rq);
		first_pass_check(l);
	}
	return NULL;
}

static void periodic(struct controller_loop *l)
{
	struct model_pa *items = NULL;
	size_t n = 0;
	enqueue_all(l, &model_pst_kind, "pst");
	enqueue_all(l, &model_pstr_kind, "pstr");
	enqueue_all(l, &model_psc_kind, "psc");
	if (model_list(l->c->st, &model_pa_kind, NULL, NULL, (void **)&items, &n, NULL, NULL) < 0)
		return;
	bool heal = agentmon_lost(l->mon); /* a watch event's recording ran out of memory */
	for (size_t i = 0; i < n; i++) {
		if (heal &&
		    agentmon_set(l->mon, items[i].meta.name, items[i].status.resolved_address,
		                 agentmon_recorded(&items[i])))
			log_warnf("agent monitor: out of memory recording %s", items[i].meta.name);
		enqueue(l, "pa", items[i].meta.name, 0);
		/* the whole-list resyncs spread over the interval, each agent at its own offset:
		 * all at once they would keep the workers (and the storage nodes) busy for seconds
		 * every interval, and a reboot's restore meeting that burst would wait behind it */
		enqueue(l, "sync", items[i].meta.name,
		        (int)((int64_t)l->interval_ms * (int64_t)i / (int64_t)n));
	}
	model_list_free(&model_pa_kind, items, n);
}

static void *timer_main(void *arg)
{
	struct controller_loop *l = arg;
	int64_t t0 = time_mono_ms(), next_p = t0 + l->interval_ms, next_c = t0 + l->capacity_ms;
	int64_t next_a = t0 + ABANDONED_PERIOD_MS, next_m = t0 + MEM_RELEASE_MS;
	unsigned long released_at = 0;
	store_cache_thread_reads(true);    /* the periodic resync lists from the caches */
	if (store_dir_lazy_lost(l->c->st)) /* creates a power cut left unfinished: at once */
		enqueue(l, "abandoned", "all", 0);
	for (;;) {
		int64_t t = time_mono_ms(), next = next_p < next_c ? next_p : next_c;
		if (next_a < next)
			next = next_a;
		if (next_m < next)
			next = next_m;
		/* asleep until the next due time (a stop wakes it): no wake-up for nothing */
		if (next > t && nap(l, (int)(next - t)))
			break;
		t = time_mono_ms();
		if (t >= next_p) {
			periodic(l);
			next_p = t + l->interval_ms;
		}
		if (t >= next_c) {
			enqueue_all(l, &model_pst_kind, "cap");
			next_c = t + l->capacity_ms;
		}
		if (t >= next_a) {
			enqueue(l, "abandoned", "all", 0);
			next_a = t + ABANDONED_PERIOD_MS;
		}
		if (t >= next_m) { /* what passes and restores freed goes back (base/mem.h) */
			unsigned long p = controller_loop_passes(l);
			if (p != released_at) /* nothing ran: nothing to give back, no heap walk */
				mem_release();
			released_at = p;
			next_m = t + MEM_RELEASE_MS;
		}
	}
	return NULL;
}

/* ---- start / stop --------------------------------------------------------------------------------- */

int controller_duration_parse(const char *s, int *ms)
{
	int64_t v;
	if (flags_parse_duration(s, &v) < 0 || v > 0x7fffffffLL)
		return -EINVAL;
	*ms = (int)v;
	return 0;
}

unsigned long controller_loop_passes(struct controller_loop *l)
{
	pthread_mutex_lock(&l->mu);
	unsigned long n = l->passes;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* *ms: given when positive, else the environment variable env (a duration such as 30s), else
 * def.  0, or -EINVAL with the message in e when env holds no positive duration. */
static int interval(int given, const char *env, int def, const char *example, int *ms,
                    struct err *e)
{
	const char *v = getenv(env);
	*ms = given > 0 ? given : def;
	if (given > 0 || !v || !*v)
		return 0;
	if (controller_duration_parse(v, ms) < 0 || *ms <= 0)
		return err_set(e, -EINVAL, "%s \"%s\" is not a positive duration such as %s", env,
		               v, example);
	return 0;
}

int controller_loop_start(struct ctl *c, const struct controller_loop_opts *o,
                          struct controller_loop **out, struct err *e)
{
	struct controller_loop_opts d = {0};
	struct controller_loop *l;
	int r;

	*out = NULL;
	o = o ? o : &d;
	if (!c || !c->st)
		return err_set(e, -EINVAL, "controller loop: no store");
	l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(e, -ENOMEM, "controller loop: out of memory");
	l->c = c;
	l->started_ms = time_mono_ms();
	l->first_pass_ms = -1;
	if ((r = interval(o->interval_ms, "PILLAR_RECONCILE_INTERVAL", RECONCILE_INTERVAL_MS, "30s",
	                  &l->interval_ms, e)) < 0 ||
	    (r = interval(o->capacity_ms, "PILLAR_CAPACITY_INTERVAL", CAPACITY_REFRESH_MS, "60s",
	                  &l->capacity_ms, e)) < 0) {
		free(l);
		return r;
	}
	l->hooks = *o;
	l->nworkers = o->workers <= 0            ? MAX_WORKERS
	              : o->workers > MAX_WORKERS ? MAX_WORKERS
	                                         : o->workers;
	if ((r = workqueue_new(o->backoff_base_ms > 0 ? o->backoff_base_ms : 5,
	                       o->backoff_max_ms > 0 ? o->backoff_max_ms : 1000000, &l->q)) < 0) {
		free(l);
		return err_set(e, r, "controller loop: out of memory");
	}
	workqueue_metrics(l->q, "pillar-csi-controller");
	pthread_mutex_init(&l->mu, NULL);
	time_cond_init_mono(&l->cv);
	c->restore_kick_arg = l;
	c->restore_kick = kick;
	if (agentmon_start(c, kick, l, &l->mon) < 0) { /* before the watches, which feed it */
		r = err_set(e, -EAGAIN, "controller loop: cannot start the agent monitor");
		goto fail;
	}
	for (size_t i = 0; i < NWATCH; i++) /* before any thread: the first pass waits for all */
		l->lists += (l->w[i].k = model_kind_find(watched[i])) != NULL;
	l->volumes_tried = true; /* unless there is a PillarVolumeState watcher to wait for */
	for (size_t i = 0; i < NWATCH; i++)
		if (l->w[i].k == &model_pvst_kind)
			l->volumes_tried = false;
	for (size_t i = 0; i < NWATCH; i++) {
		l->w[i].l = l;
		if (!l->w[i].k)
			continue;
		if (pthread_create(&l->w[i].th, NULL, watch_main, &l->w[i]) != 0) {
			r = err_set(e, -EAGAIN, "controller loop: cannot start a watch thread");
			goto fail;
		}
		l->w[i].started = true;
	}
	for (int i = 0; i < l->nworkers; i++) {
		if (pthread_create(&l->workers[i], NULL, worker_main, l) != 0) {
			r = err_set(e, -EAGAIN, "controller loop: cannot start a worker thread");
			goto fail;
		}
		l->nstarted++;
	}
	if (pthread_create(&l->timer, NULL, timer_main, l) != 0) {
		r = err_set(e, -EAGAIN, "controller loop: cannot start the timer thread");
		goto fail;
	}
	l->timer_started = true;
	log_infof("controller loop started: %d worker(s), resync every %d ms", l->nworkers,
	          l->interval_ms);
	*out = l;
	return 0;
fail:
	controller_loop_stop(l);
	return r;
}

void controller_loop_stop(struct controller_loop *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	workqueue_shutdown(l->q);
	for (size_t i = 0; i < NWATCH; i++)
		if (l->w[i].started)
			pthread_join(l->w[i].th, NULL);
	for (int i = 0; i < l->nstarted; i++)
		pthread_join(l->workers[i], NULL);
	if (l->timer_started)
		pthread_join(l->timer, NULL);
	agentmon_stop(l->mon); /* after the watches, which feed it */
	if (l->c->restore_kick == kick && l->c->restore_kick_arg == l) {
		l->c->restore_kick = NULL;
		l->c->restore_kick_arg = NULL;
	}
	vdigests_free(&l->vd);
	workqueue_free(l->q);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	free(l);
}
