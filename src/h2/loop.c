/* Event loop with leader/follower threads and handler job groups (loop.h).
 *
 * Two locks.  `lk` is the loop lock: held while running loop work (fd callbacks, timers, posts);
 * it guards the timers, the fd registrations and whatever the callbacks own (connections,
 * sessions).  `mu` is an inner lock (taken under lk, never the other way round) guarding the post
 * queues, the job queue and the thread bookkeeping.  The poller never holds lk while it sleeps in
 * epoll_wait, so any thread can take the loop between two polls.
 *
 * Deferred posts (h2_loop_run_or_defer) need no wake-up: their poster queues them and then tries
 * the loop lock; a thread that drops the loop looks for deferred posts after releasing it and
 * takes it again to run them.  One of the two always sees the other's step (both are ordered by
 * full fences), so a deferred post is never stranded, and nobody waits on the lock for it.
 * Idle threads wait on a semaphore each (a condition variable hands the woken thread its mutex
 * marked contended, which costs one more futex call per wake-up), posted after mu is released so
 * that the woken thread does not block on mu at once.
 */
#include "h2/loop.h"
#include "base/time.h"
#include "h2/loop_int.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS  64
#define POST_ROUNDS 4 /* drop() runs the posts that posts queue up to this deep */

/* The loop this thread holds, and the jobs it submitted while holding it. */
static _Thread_local struct h2_loop *held_loop;
static _Thread_local struct job *held_job_head, *held_job_tail;

uint64_t h2_now_ms(void)
{
	return (uint64_t)time_mono_ms();
}

/* epoll tags of the loop's own fds (an fd's registration is tagged fd + 1) */
#define WAKE_TAG  0
#define TIMER_TAG UINT64_MAX

/* Adds the loop's eventfd and timerfd to its epoll set, edge-triggered: each write or expiry
 * wakes one poller, not every poller in turn. */
static int watch_own_fds(struct h2_loop *l)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};

	ev.data.u64 = WAKE_TAG;
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->wake_fd, &ev) < 0)
		return -errno;
	ev.data.u64 = TIMER_TAG;
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->timer_fd, &ev) < 0)
		return -errno;
	return 0;
}

int h2_loop_new(struct h2_loop **out, struct err *e)
{
	struct h2_loop *l = calloc(1, sizeof(*l));
	int rc;

	if (!l)
		return err_set(e, -ENOMEM, "event loop: out of memory");
	l->wake_fd = l->timer_fd = -1;
	l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epoll_fd < 0) {
		rc = err_set(e, -errno, "epoll_create1: %s", strerror(errno));
		goto fail;
	}
	l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->wake_fd < 0) {
		rc = err_set(e, -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	l->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (l->timer_fd < 0) {
		rc = err_set(e, -errno, "timerfd_create: %s", strerror(errno));
		goto fail;
	}
	rc = watch_own_fds(l);
	if (rc < 0) {
		err_set(e, rc, "epoll_ctl: %s", strerror(-rc));
		goto fail;
	}
	l->timer_fd_at = UINT64_MAX;
	pthread_mutex_init(&l->lk, NULL);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->done_cv, NULL);
	*out = l;
	return 0;
fail:
	if (l->timer_fd >= 0)
		close(l->timer_fd);
	if (l->wake_fd >= 0)
		close(l->wake_fd);
	if (l->epoll_fd >= 0)
		close(l->epoll_fd);
	free(l);
	return rc;
}

static void wake_poller(struct h2_loop *l)
{
	uint64_t one = 1;
	if (write(l->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow with one outstanding wake */
	}
}

/* Holding the loop: the event of the loop's eventfd (tag WAKE_TAG) or timerfd (TIMER_TAG). */
static void consume_fd(struct h2_loop *l, uint64_t tag)
{
	uint64_t v;

	if (tag == TIMER_TAG) {
		l->timer_fd_at = UINT64_MAX; /* run_timers sets it for the next timer */
		if (read(l->timer_fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: set again since it expired */
		}
		return;
	}
	pthread_mutex_lock(&l->mu);
	l->wake_pending = false;
	pthread_mutex_unlock(&l->mu);
	if (read(l->wake_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing counted */
	}
}

/* Under mu: takes one idle thread (or all) off the idle list, to be woken by wake_idle(). */
static struct idle_thread *pick_idle(struct h2_loop *l, bool all)
{
	struct idle_thread *t = l->idle_list;

	if (!t)
		return NULL;
	if (all) {
		l->idle_list = NULL;
		l->idle = 0;
	} else {
		l->idle_list = t->next;
		t->next = NULL;
		l->idle--;
	}
	return t;
}

/* Wakes threads taken with pick_idle() (best after releasing mu). */
static void wake_idle(struct idle_thread *t)
{
	while (t) {
		struct idle_thread *n = t->next; /* t may be back on the list once posted */
		sem_post(&t->wake);
		t = n;
	}
}

/* Holding lk: runs the posts queued so far, the deferred ones first (not those they queue).
 * False when there was none. */
static bool run_posts(struct h2_loop *l)
{
	struct h2_post *p;

	pthread_mutex_lock(&l->mu);
	p = l->head;
	if (l->deferred_head) {
		l->deferred_tail->next = l->head;
		p = l->deferred_head;
		l->deferred_head = l->deferred_tail = NULL;
		atomic_store(&l->n_deferred, 0);
	}
	l->head = l->tail = NULL;
	pthread_mutex_unlock(&l->mu);
	if (!p)
		return false;
	while (p) {
		struct h2_post *n = p->next;
		bool owned = p->owned; /* an embedded post may be freed by its fn */
		p->fn(p->arg);
		if (owned)
			free(p);
		p = n;
	}
	return true;
}

/* Holding the loop: runs the due timers and sets timer_fd for the next one. */
static void run_timers(struct h2_loop *l)
{
	uint64_t now = h2_now_ms();

	while (l->timers && l->timers->at <= now) {
		struct h2_timer *t = l->timers;
		h2_timer_cancel(l, t);
		t->fn(t->arg);
	}
	if (l->timers && l->timers->at < l->timer_fd_at)
		loop_timer_fd_set(l, l->timers->at);
}

static void hold(struct h2_loop *l)
{
	pthread_mutex_lock(&l->lk);
	held_loop = l;
}

/* Under mu: moves the jobs this thread submitted while holding the loop to the queue. */
static bool flush_jobs(struct h2_loop *l)
{
	if (!held_job_head)
		return false;
	if (l->job_tail)
		l->job_tail->next = held_job_head;
	else
		l->job_head = held_job_head;
	l->job_tail = held_job_tail;
	held_job_head = held_job_tail = NULL;
	return true;
}

/* After releasing the loop: takes it again (without waiting) when posts were deferred to its
 * holder meanwhile; true when this thread holds it now and must run them. */
static bool retake(struct h2_loop *l)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load(&l->n_deferred) || pthread_mutex_trylock(&l->lk) != 0)
		return false;
	held_loop = l;
	return true;
}

/* Drops the loop: runs the posts queued by this turn and those they queue (a few rounds: a
 * response's post queues its connection's write), queues its jobs, and wakes a poller when
 * posts are left.  A poller runs the jobs of its own turn itself (thread_main), so only other
 * threads signal an idle one.
 * Then runs what was deferred to this holder (retake). */
static void drop(struct h2_loop *l, bool poller)
{
	do {
		bool wake = false;
		struct idle_thread *idle = NULL;
		for (int round = 0; round < POST_ROUNDS && run_posts(l); round++)
			;
		pthread_mutex_lock(&l->mu);
		if (flush_jobs(l) && !poller) {
			idle = pick_idle(l, false);
			wake = !idle; /* every other thread polls: one of them takes the job */
		}
		if (l->head)
			wake = true;
		wake = wake && !l->wake_pending;
		if (wake)
			l->wake_pending = true;
		pthread_mutex_unlock(&l->mu);
		held_loop = NULL;
		pthread_mutex_unlock(&l->lk);
		wake_idle(idle);
		if (wake)
			wake_poller(l);
	} while (retake(l));
}

void h2_loop_run_pending(struct h2_loop *l)
{
	hold(l);
	consume_fd(l, WAKE_TAG);
	run_posts(l);
	run_timers(l);
	drop(l, false);
}

/* One turn of a poller: sleep in epoll_wait without the loop (no timeout: timer_fd wakes a
 * poller for the timers), then run what is ready, re-arming each fd after its callback
 * (EPOLLONESHOT: the other poller does not see it meanwhile). */
static void poll_once(struct h2_loop *l)
{
	struct epoll_event evs[MAX_EVENTS];
	int timeout = -1, n, i;

	pthread_mutex_lock(&l->mu);
	if (l->head)
		timeout = 0; /* posts queued before the loop started */
	pthread_mutex_unlock(&l->mu);
	n = epoll_wait(l->epoll_fd, evs, MAX_EVENTS, timeout);

	hold(l);
	for (i = 0; i < n; i++) {
		uint64_t tag = evs[i].data.u64;
		struct fd_registration *r;
		int fd;
		if (tag == WAKE_TAG || tag == TIMER_TAG) {
			consume_fd(l, tag);
			continue;
		}
		fd = (int)(tag - 1);
		/* loop work (here or on another thread) may have removed this registration */
		r = fd < l->n_registrations ? l->registrations[fd] : NULL;
		if (!r)
			continue;
		r->armed = (r->events & EPOLLET) != 0; /* one-shot otherwise */
		r->fn(r->arg, evs[i].events);
		loop_rearm(l, fd);
	}
	run_posts(l);
	run_timers(l);
	drop(l, true);
}

/* Under mu: the first queued job whose group has room, when a thread is left to poll. */
static struct job *take_job(struct h2_loop *l)
{
	struct job *j, *prev = NULL;

	if (l->started && l->running + 1 >= l->n_threads)
		return NULL;
	for (j = l->job_head; j; prev = j, j = j->next) {
		if (j->g->running >= j->g->limit)
			continue;
		if (prev)
			prev->next = j->next;
		else
			l->job_head = j->next;
		if (l->job_tail == j)
			l->job_tail = prev;
		j->g->queued--;
		j->g->running++;
		l->running++;
		return j;
	}
	return NULL;
}

struct thread_start {
	struct h2_loop *l;
	size_t slot;
};

/* Under mu, before this thread runs a job: the idle thread to wake (after mu), when no thread
 * is left polling, or when jobs are still queued and no helper is on its way already (a woken
 * helper that finds more queued wakes the next, so blocking handlers still get a thread each up
 * to their group's limit). */
static struct idle_thread *before_job(struct h2_loop *l)
{
	struct idle_thread *idle = NULL;

	if (l->started && (l->pollers == 0 || (l->job_head && l->waking == 0))) {
		idle = pick_idle(l, false);
		if (idle) {
			idle->helper = true;
			l->waking++;
		}
	}
	return idle;
}

/* Under mu: runs j (dropping mu meanwhile). */
static void run_job(struct h2_loop *l, struct job *j)
{
	struct idle_thread *idle = before_job(l);

	pthread_mutex_unlock(&l->mu);
	wake_idle(idle);
	j->fn(j->arg);
	pthread_mutex_lock(&l->mu);
	j->g->running--;
	l->running--;
	free(j);
	pthread_cond_broadcast(&l->done_cv);
}

/* Under mu: polls once as one of the MAX_POLLERS (dropping mu meanwhile). */
static void poll_turn(struct h2_loop *l)
{
	l->pollers++;
	pthread_mutex_unlock(&l->mu);
	poll_once(l);
	pthread_mutex_lock(&l->mu);
	l->pollers--;
}

/* Every thread of the loop runs this: it takes queued jobs first, else polls while fewer than
 * MAX_POLLERS do, else waits on the idle list.  A poller that read a request runs its handler
 * job itself and polls again afterwards, while another poller keeps watching the fds: at one
 * call in flight nothing is handed between threads. */
static void *thread_main(void *arg)
{
	struct thread_start a = *(struct thread_start *)arg;
	struct h2_loop *l = a.l;
	struct idle_thread me = {.next = NULL}, *next_poller = NULL;

	free(arg);
	sem_init(&me.wake, 0, 0);
	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		struct job *j = take_job(l);
		if (j) {
			run_job(l, j);
			continue;
		}
		if (l->n_threads > l->target)
			break;
		if (l->started && l->pollers < MAX_POLLERS) {
			poll_turn(l);
			continue;
		}
		me.next = l->idle_list;
		me.helper = false;
		l->idle_list = &me;
		l->idle++;
		pthread_mutex_unlock(&l->mu);
		while (sem_wait(&me.wake) < 0) /* EINTR */
			;
		pthread_mutex_lock(&l->mu);
		if (me.helper)
			l->waking--;
	}
	l->n_threads--;
	l->threads[a.slot].exited = true;
	if (l->started && l->pollers == 0) /* this thread may have been the next poller */
		next_poller = pick_idle(l, false);
	pthread_cond_broadcast(&l->done_cv);
	pthread_mutex_unlock(&l->mu);
	wake_idle(next_poller);
	/* a sleeping poller may be the next to leave (stop, or a group freed): one wake-up each */
	wake_poller(l);
	sem_destroy(&me.wake);
	return NULL;
}

/* Under mu: starts one more thread. */
static int spawn(struct h2_loop *l)
{
	struct thread_start *a;
	size_t i;
	int rc;

	for (i = 0; i < l->n_slots && !l->threads[i].joined; i++)
		;
	if (i == l->n_slots) {
		struct loop_thread *grown = realloc(l->threads, (l->n_slots + 8) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		memset(grown + l->n_slots, 0, 8 * sizeof(*grown));
		for (size_t k = l->n_slots; k < l->n_slots + 8; k++)
			grown[k].joined = true; /* free slot */
		l->threads = grown;
		l->n_slots += 8;
	}
	a = malloc(sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->l = l;
	a->slot = i;
	l->threads[i].exited = l->threads[i].joined = false;
	rc = pthread_create(&l->threads[i].t, NULL, thread_main, a);
	if (rc) {
		l->threads[i].joined = true;
		free(a);
		return -rc;
	}
	l->n_threads++;
	return 0;
}

/* Joins the threads that have exited (not holding mu; slots are claimed under it). */
static void reap(struct h2_loop *l, bool all)
{
	for (;;) {
		pthread_t t;
		size_t i;
		pthread_mutex_lock(&l->mu);
		for (i = 0; i < l->n_slots; i++)
			if (!l->threads[i].joined && (all || l->threads[i].exited))
				break;
		if (i == l->n_slots) {
			pthread_mutex_unlock(&l->mu);
			return;
		}
		l->threads[i].joined = true;
		t = l->threads[i].t;
		pthread_mutex_unlock(&l->mu);
		pthread_join(t, NULL);
	}
}

int h2_loop_start(struct h2_loop *l, struct err *e)
{
	int rc;

	pthread_mutex_lock(&l->mu);
	l->started = true;
	l->target++;
	rc = spawn(l);
	if (rc < 0) {
		l->target--;
		l->started = false;
	}
	wake_idle(pick_idle(l, true));
	pthread_mutex_unlock(&l->mu);
	if (rc < 0)
		return err_set(e, rc, "event loop thread: %s", strerror(-rc));
	return 0;
}

void h2_loop_free(struct h2_loop *l)
{
	int i;

	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	wake_idle(pick_idle(l, true));
	pthread_mutex_unlock(&l->mu);
	wake_poller(l);
	reap(l, true);
	hold(l);
	run_posts(l);
	held_loop = NULL;
	pthread_mutex_unlock(&l->lk);
	for (i = 0; i < l->n_registrations; i++)
		free(l->registrations[i]);
	while (l->job_head) {
		struct job *j = l->job_head;
		l->job_head = j->next;
		free(j);
	}
	free(l->registrations);
	free(l->threads);
	close(l->timer_fd);
	close(l->wake_fd);
	close(l->epoll_fd);
	pthread_cond_destroy(&l->done_cv);
	pthread_mutex_destroy(&l->mu);
	pthread_mutex_destroy(&l->lk);
	free(l);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static struct h2_loop *default_loop;

static void default_init(void)
{
	struct h2_loop *l;
	if (h2_loop_new(&l, NULL) == 0) {
		if (h2_loop_start(l, NULL) == 0)
			default_loop = l;
		else
			h2_loop_free(l);
	}
}

struct h2_loop *h2_loop_default(void)
{
	pthread_once(&default_once, default_init);
	return default_loop;
}

bool h2_loop_in_thread(const struct h2_loop *l)
{
	return held_loop == l;
}

static void post_enqueue(struct h2_loop *l, struct h2_post *p, h2_fn fn, void *arg)
{
	bool wake = false;

	p->fn = fn;
	p->arg = arg;
	p->next = NULL;
	pthread_mutex_lock(&l->mu);
	if (l->tail)
		l->tail->next = p;
	else
		l->head = p;
	l->tail = p;
	/* the holder runs its posts when it drops the loop */
	if (held_loop != l && !l->wake_pending) {
		l->wake_pending = true;
		wake = true;
	}
	pthread_mutex_unlock(&l->mu);
	if (wake)
		wake_poller(l);
}

int h2_loop_post(struct h2_loop *l, h2_fn fn, void *arg)
{
	struct h2_post *p = malloc(sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->owned = true;
	post_enqueue(l, p, fn, arg);
	return 0;
}

void h2_loop_post_embedded(struct h2_loop *l, struct h2_post *p, h2_fn fn, void *arg)
{
	p->owned = false;
	post_enqueue(l, p, fn, arg);
}

static bool loop_started(struct h2_loop *l)
{
	bool s;
	pthread_mutex_lock(&l->mu);
	s = l->started;
	pthread_mutex_unlock(&l->mu);
	return s;
}

int h2_loop_run(struct h2_loop *l, h2_fn fn, void *arg)
{
	if (held_loop == l || !loop_started(l))
		return h2_loop_post(l, fn, arg);
	hold(l);
	fn(arg);
	drop(l, false);
	return 0;
}

void h2_loop_run_or_defer(struct h2_loop *l, struct h2_post *p, h2_fn fn, void *arg)
{
	if (held_loop == l || !loop_started(l)) {
		h2_loop_post_embedded(l, p, fn, arg);
		return;
	}
	p->owned = false;
	p->fn = fn;
	p->arg = arg;
	p->next = NULL;
	pthread_mutex_lock(&l->mu);
	if (l->deferred_tail)
		l->deferred_tail->next = p;
	else
		l->deferred_head = p;
	l->deferred_tail = p;
	atomic_fetch_add(&l->n_deferred, 1);
	pthread_mutex_unlock(&l->mu);
	if (retake(l))
		drop(l, false);
}

int h2_loop_run_sync(struct h2_loop *l, h2_fn fn, void *arg)
{
	if (held_loop == l) {
		fn(arg);
		return 0;
	}
	hold(l);
	run_posts(l);
	fn(arg);
	drop(l, false);
	return 0;
}

/* ---- job groups ---------------------------------------------------------------------------- */

int h2_jobs_new(struct h2_jobs **out, struct h2_loop *l, unsigned limit, struct err *e)
{
	struct h2_jobs *g = calloc(1, sizeof(*g));
	unsigned i;
	int rc = 0;

	if (!g)
		return err_set(e, -ENOMEM, "worker threads: out of memory");
	g->l = l;
	pthread_mutex_lock(&l->mu);
	for (i = 0; i < limit && rc == 0; i++) {
		rc = spawn(l);
		if (rc == 0) {
			l->target++;
			g->limit++;
		}
	}
	pthread_mutex_unlock(&l->mu);
	if (rc < 0) {
		h2_jobs_free(g);
		return err_set(e, rc, "worker thread: %s", strerror(-rc));
	}
	*out = g;
	return 0;
}

int h2_jobs_submit(struct h2_jobs *g, h2_fn fn, void *arg)
{
	struct h2_loop *l = g->l;
	struct job *j;

	if (g->limit == 0) {
		fn(arg);
		return 0;
	}
	j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->arg = arg;
	j->g = g;
	j->next = NULL;
	pthread_mutex_lock(&l->mu);
	g->queued++;
	if (held_loop == l) {
		/* queued when this thread drops the loop: it may run the job itself */
		if (held_job_tail)
			held_job_tail->next = j;
		else
			held_job_head = j;
		held_job_tail = j;
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	if (l->job_tail)
		l->job_tail->next = j;
	else
		l->job_head = j;
	l->job_tail = j;
	struct idle_thread *idle = pick_idle(l, false);
	bool wake = !idle && !l->wake_pending; /* every thread polls: one of them takes it */
	if (wake)
		l->wake_pending = true;
	pthread_mutex_unlock(&l->mu);
	wake_idle(idle);
	if (wake)
		wake_poller(l);
	return 0;
}

void h2_jobs_free(struct h2_jobs *g)
{
	struct h2_loop *l;

	if (!g)
		return;
	l = g->l;
	pthread_mutex_lock(&l->mu);
	while (g->queued || g->running)
		pthread_cond_wait(&l->done_cv, &l->mu);
	l->target -= g->limit;
	wake_idle(pick_idle(l, true));
	wake_poller(l); /* a poller may be one of the threads to leave */
	if (!l->stop)
		while (l->n_threads > l->target)
			pthread_cond_wait(&l->done_cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	reap(l, false);
	free(g);
}
