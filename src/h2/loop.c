/* Event loop with leader/follower threads and handler job groups (loop.h).
 *
 * Two locks.  `lk` is the loop lock: held while running loop work (fd callbacks, timers, posts);
 * it guards the timers, the fd registrations and whatever the callbacks own (connections,
 * sessions).  `mu` is an inner lock (taken under lk, never the other way round) guarding the post
 * queue, the job queue and the thread bookkeeping.  The poller never holds lk while it sleeps in
 * epoll_wait, so any thread can take the loop between two polls.
 */
#include "h2/loop.h"
#include "base/time.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 64

struct fd_registration {
	h2_io_fn fn;
	void *arg;
	int fd;
};

struct job {
	h2_fn fn;
	void *arg;
	struct h2_jobs *g;
	struct job *next;
};

struct h2_jobs {
	struct h2_loop *l;
	unsigned limit;   /* const */
	unsigned running; /* under mu */
	unsigned queued;  /* under mu */
};

struct loop_thread {
	pthread_t t;
	bool exited, joined;
};

struct h2_loop {
	int epoll_fd, wake_fd;

	pthread_mutex_t lk;      /* the loop lock */
	struct h2_timer *timers; /* sorted by at */
	struct h2_timer *timers_tail;
	struct fd_registration **registrations; /* indexed by fd */
	int n_registrations;
	uint64_t sleep_until; /* the poller's wake-up while it sleeps; 0 when none sleeps */
	bool need_wake;       /* a timer earlier than sleep_until was armed */

	pthread_mutex_t mu;
	pthread_cond_t idle_cv; /* idle threads wait for a job or the poller's place */
	pthread_cond_t done_cv; /* a job ended or a thread exited */
	struct h2_post *head, *tail;
	bool wake_pending; /* an eventfd write is outstanding */
	struct job *job_head, *job_tail;
	unsigned running;   /* jobs running, all groups */
	unsigned n_threads; /* live threads */
	unsigned idle;      /* threads waiting on idle_cv */
	unsigned target;    /* threads wanted: 1 once started, plus every group's limit */
	bool started, polling, stop;
	struct loop_thread *threads;
	size_t n_slots;
};

/* The loop this thread holds, and the jobs it submitted while holding it. */
static _Thread_local struct h2_loop *held_loop;
static _Thread_local struct job *held_job_head, *held_job_tail;

uint64_t h2_now_ms(void)
{
	return (uint64_t)time_mono_ms();
}

int h2_loop_new(struct h2_loop **out, struct err *e)
{
	struct h2_loop *l = calloc(1, sizeof(*l));
	struct epoll_event ev = {.events = EPOLLIN};

	if (!l)
		return err_set(e, -ENOMEM, "event loop: out of memory");
	l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epoll_fd < 0) {
		int rc = -errno;
		free(l);
		return err_set(e, rc, "epoll_create1: %s", strerror(-rc));
	}
	l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->wake_fd < 0) {
		int rc = -errno;
		close(l->epoll_fd);
		free(l);
		return err_set(e, rc, "eventfd: %s", strerror(-rc));
	}
	ev.data.u64 = 0;
	epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->wake_fd, &ev);
	pthread_mutex_init(&l->lk, NULL);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->idle_cv, NULL);
	pthread_cond_init(&l->done_cv, NULL);
	*out = l;
	return 0;
}

static void wake_poller(struct h2_loop *l)
{
	uint64_t one = 1;
	if (write(l->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow with one outstanding wake */
	}
}

static void consume_wake(struct h2_loop *l)
{
	uint64_t v;

	pthread_mutex_lock(&l->mu);
	l->wake_pending = false;
	pthread_mutex_unlock(&l->mu);
	if (read(l->wake_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing counted */
	}
}

/* Holding lk: runs the posts queued so far (not those they queue). */
static void run_posts(struct h2_loop *l)
{
	struct h2_post *p;

	pthread_mutex_lock(&l->mu);
	p = l->head;
	l->head = l->tail = NULL;
	pthread_mutex_unlock(&l->mu);
	while (p) {
		struct h2_post *n = p->next;
		bool owned = p->owned; /* an embedded post may be freed by its fn */
		p->fn(p->arg);
		if (owned)
			free(p);
		p = n;
	}
}

static void run_timers(struct h2_loop *l)
{
	uint64_t now = h2_now_ms();

	while (l->timers && l->timers->at <= now) {
		struct h2_timer *t = l->timers;
		h2_timer_cancel(l, t);
		t->fn(t->arg);
	}
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

/* Drops the loop: runs the posts queued by this turn, queues its jobs, and wakes the poller when
 * posts are left or (for a thread other than the poller) an earlier timer was armed.  The poller
 * runs the jobs of its own turn itself (thread_main), so only other threads signal an idle one. */
static void drop(struct h2_loop *l, bool poller)
{
	bool wake;

	run_posts(l);
	wake = l->need_wake && !poller;
	l->need_wake = false;
	pthread_mutex_lock(&l->mu);
	if (flush_jobs(l) && !poller && l->idle)
		pthread_cond_signal(&l->idle_cv);
	if (l->head && !l->wake_pending)
		wake = true;
	if (wake)
		l->wake_pending = true;
	pthread_mutex_unlock(&l->mu);
	held_loop = NULL;
	pthread_mutex_unlock(&l->lk);
	if (wake)
		wake_poller(l);
}

void h2_loop_run_pending(struct h2_loop *l)
{
	hold(l);
	consume_wake(l);
	run_posts(l);
	run_timers(l);
	drop(l, false);
}

/* One turn of the poller: sleep in epoll_wait without the loop, then run what is ready. */
static void poll_once(struct h2_loop *l)
{
	struct epoll_event evs[MAX_EVENTS];
	int timeout = -1, n, i;
	uint64_t now = h2_now_ms();

	hold(l);
	if (l->timers) {
		uint64_t at = l->timers->at;
		timeout = at <= now ? 0 : at - now > 60000 ? 60000 : (int)(at - now);
	}
	pthread_mutex_lock(&l->mu);
	if (l->head)
		timeout = 0; /* posts queued before the loop started */
	pthread_mutex_unlock(&l->mu);
	l->sleep_until = timeout < 0 ? UINT64_MAX : now + (uint64_t)timeout;
	l->need_wake = false;
	held_loop = NULL;
	pthread_mutex_unlock(&l->lk);

	n = epoll_wait(l->epoll_fd, evs, MAX_EVENTS, timeout);

	hold(l);
	l->sleep_until = 0;
	for (i = 0; i < n; i++) {
		int fd = (int)evs[i].data.u64 - 1;
		struct fd_registration *r;
		if (fd < 0) {
			consume_wake(l);
			continue;
		}
		/* loop work (here or on another thread) may have removed this registration */
		r = fd < l->n_registrations ? l->registrations[fd] : NULL;
		if (r)
			r->fn(r->arg, evs[i].events);
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

static void *thread_main(void *arg)
{
	struct thread_start a = *(struct thread_start *)arg;
	struct h2_loop *l = a.l;

	free(arg);
	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		struct job *j = take_job(l);
		if (j) {
			/* someone must poll while this thread runs the job */
			if (l->started && !l->polling && l->idle)
				pthread_cond_signal(&l->idle_cv);
			pthread_mutex_unlock(&l->mu);
			j->fn(j->arg);
			pthread_mutex_lock(&l->mu);
			j->g->running--;
			l->running--;
			free(j);
			pthread_cond_broadcast(&l->done_cv);
			continue;
		}
		if (l->n_threads > l->target)
			break;
		if (l->started && !l->polling) {
			l->polling = true;
			pthread_mutex_unlock(&l->mu);
			poll_once(l);
			pthread_mutex_lock(&l->mu);
			l->polling = false;
			continue;
		}
		l->idle++;
		pthread_cond_wait(&l->idle_cv, &l->mu);
		l->idle--;
	}
	l->n_threads--;
	l->threads[a.slot].exited = true;
	if (l->started && !l->polling && l->idle)
		pthread_cond_signal(&l->idle_cv); /* this thread may have been the next poller */
	pthread_cond_broadcast(&l->done_cv);
	pthread_mutex_unlock(&l->mu);
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
	pthread_cond_broadcast(&l->idle_cv);
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
	pthread_cond_broadcast(&l->idle_cv);
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
	close(l->wake_fd);
	close(l->epoll_fd);
	pthread_cond_destroy(&l->done_cv);
	pthread_cond_destroy(&l->idle_cv);
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

static int set_reg(struct h2_loop *l, int fd, h2_io_fn fn, void *arg)
{
	if (fd >= l->n_registrations) {
		int n = fd + 64;
		struct fd_registration **grown =
		    realloc(l->registrations, (size_t)n * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		memset(grown + l->n_registrations, 0,
		       (size_t)(n - l->n_registrations) * sizeof(*grown));
		l->registrations = grown;
		l->n_registrations = n;
	}
	if (!l->registrations[fd]) {
		l->registrations[fd] = calloc(1, sizeof(struct fd_registration));
		if (!l->registrations[fd])
			return -ENOMEM;
	}
	l->registrations[fd]->fd = fd;
	l->registrations[fd]->fn = fn;
	l->registrations[fd]->arg = arg;
	return 0;
}

int h2_loop_add_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg)
{
	struct epoll_event ev = {.events = events};
	int rc = set_reg(l, fd, fn, arg);

	if (rc)
		return rc;
	ev.data.u64 = (uint64_t)fd + 1;
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		rc = -errno;
		free(l->registrations[fd]);
		l->registrations[fd] = NULL;
		return rc;
	}
	return 0;
}

int h2_loop_mod_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg)
{
	struct epoll_event ev = {.events = events};
	int rc = set_reg(l, fd, fn, arg);

	if (rc)
		return rc;
	ev.data.u64 = (uint64_t)fd + 1;
	return epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

void h2_loop_del_fd(struct h2_loop *l, int fd)
{
	if (fd < 0)
		return;
	epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
	if (fd < l->n_registrations) {
		free(l->registrations[fd]);
		l->registrations[fd] = NULL;
	}
}

void h2_timer_cancel(struct h2_loop *l, struct h2_timer *t)
{
	if (!t->armed)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		l->timers = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		l->timers_tail = t->prev;
	t->prev = t->next = NULL;
	t->armed = false;
}

void h2_timer_arm(struct h2_loop *l, struct h2_timer *t, uint64_t at_ms, h2_fn fn, void *arg)
{
	struct h2_timer *p;

	h2_timer_cancel(l, t);
	t->at = at_ms;
	t->fn = fn;
	t->arg = arg;
	t->armed = true;
	if (at_ms < l->sleep_until)
		l->need_wake = true;
	/* most timers are later than all others: search from the tail */
	for (p = l->timers_tail; p && p->at > at_ms; p = p->prev)
		;
	t->prev = p;
	t->next = p ? p->next : l->timers;
	if (t->next)
		t->next->prev = t;
	else
		l->timers_tail = t;
	if (p)
		p->next = t;
	else
		l->timers = t;
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
	} else {
		if (l->job_tail)
			l->job_tail->next = j;
		else
			l->job_head = j;
		l->job_tail = j;
		if (l->idle)
			pthread_cond_signal(&l->idle_cv);
	}
	pthread_mutex_unlock(&l->mu);
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
	pthread_cond_broadcast(&l->idle_cv);
	if (!l->stop)
		while (l->n_threads > l->target)
			pthread_cond_wait(&l->done_cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	reap(l, false);
	free(g);
}
