#include "h2/loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct post {
	h2_fn fn;
	void *arg;
	struct post *next;
};

struct fdreg {
	h2_io_fn fn;
	void *arg;
	int fd;
};

struct h2_loop {
	int ep, evfd;
	pthread_t thr;
	bool started;
	volatile bool stop;
	pthread_mutex_t mu;
	struct post *head, *tail;
	bool wake_pending;
	struct h2_timer *timers; /* sorted by at */
	struct h2_timer *timers_tail;
	struct fdreg **regs; /* indexed by fd */
	int nregs;
};

uint64_t h2_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int h2_loop_new(struct h2_loop **out, struct err *e)
{
	struct h2_loop *l = calloc(1, sizeof(*l));
	struct epoll_event ev = {.events = EPOLLIN};

	if (!l)
		return err_set(e, -ENOMEM, "event loop: out of memory");
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	if (l->ep < 0) {
		int rc = -errno;
		free(l);
		return err_set(e, rc, "epoll_create1: %s", strerror(-rc));
	}
	l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->evfd < 0) {
		int rc = -errno;
		close(l->ep);
		free(l);
		return err_set(e, rc, "eventfd: %s", strerror(-rc));
	}
	ev.data.u64 = 0;
	epoll_ctl(l->ep, EPOLL_CTL_ADD, l->evfd, &ev);
	pthread_mutex_init(&l->mu, NULL);
	*out = l;
	return 0;
}

static void run_posts(struct h2_loop *l)
{
	struct post *p;
	uint64_t v;

	if (read(l->evfd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing counted, still drain the queue */
	}
	pthread_mutex_lock(&l->mu);
	p = l->head;
	l->head = l->tail = NULL;
	l->wake_pending = false;
	pthread_mutex_unlock(&l->mu);
	while (p) {
		struct post *n = p->next;
		p->fn(p->arg);
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

void h2_loop_run_pending(struct h2_loop *l)
{
	run_posts(l);
	run_timers(l);
}

static void *loop_main(void *arg)
{
	struct h2_loop *l = arg;
	struct epoll_event evs[64];

	while (!l->stop) {
		int timeout = -1, n, i;
		if (l->timers) {
			uint64_t now = h2_now_ms();
			timeout = l->timers->at <= now ? 0 : (int)(l->timers->at - now);
			if (timeout > 60000)
				timeout = 60000;
		}
		n = epoll_wait(l->ep, evs, 64, timeout);
		for (i = 0; i < n; i++) {
			int fd = (int)evs[i].data.u64 - 1;
			struct fdreg *r;
			if (fd < 0) {
				run_posts(l);
				continue;
			}
			/* a callback may have removed this registration: look it up again */
			r = fd < l->nregs ? l->regs[fd] : NULL;
			if (r)
				r->fn(r->arg, evs[i].events);
		}
		run_timers(l);
	}
	run_posts(l);
	return NULL;
}

int h2_loop_start(struct h2_loop *l, struct err *e)
{
	int rc = pthread_create(&l->thr, NULL, loop_main, l);
	if (rc)
		return err_set(e, -rc, "event loop thread: %s", strerror(rc));
	l->started = true;
	return 0;
}

static void stop_fn(void *arg)
{
	((struct h2_loop *)arg)->stop = true;
}

void h2_loop_free(struct h2_loop *l)
{
	int i;

	if (!l)
		return;
	if (l->started) {
		h2_loop_post(l, stop_fn, l);
		pthread_join(l->thr, NULL);
	}
	run_posts(l);
	for (i = 0; i < l->nregs; i++)
		free(l->regs[i]);
	free(l->regs);
	close(l->evfd);
	close(l->ep);
	pthread_mutex_destroy(&l->mu);
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
	return l->started && pthread_equal(pthread_self(), l->thr);
}

static int set_reg(struct h2_loop *l, int fd, h2_io_fn fn, void *arg, struct fdreg **out)
{
	if (fd >= l->nregs) {
		int n = fd + 64;
		struct fdreg **nr = realloc(l->regs, (size_t)n * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		memset(nr + l->nregs, 0, (size_t)(n - l->nregs) * sizeof(*nr));
		l->regs = nr;
		l->nregs = n;
	}
	if (!l->regs[fd]) {
		l->regs[fd] = calloc(1, sizeof(struct fdreg));
		if (!l->regs[fd])
			return -ENOMEM;
	}
	l->regs[fd]->fd = fd;
	l->regs[fd]->fn = fn;
	l->regs[fd]->arg = arg;
	*out = l->regs[fd];
	return 0;
}

int h2_loop_add_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg)
{
	struct epoll_event ev = {.events = events};
	struct fdreg *r;
	int rc = set_reg(l, fd, fn, arg, &r);

	if (rc)
		return rc;
	ev.data.u64 = (uint64_t)fd + 1;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		rc = -errno;
		free(l->regs[fd]);
		l->regs[fd] = NULL;
		return rc;
	}
	return 0;
}

int h2_loop_mod_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg)
{
	struct epoll_event ev = {.events = events};
	struct fdreg *r;
	int rc = set_reg(l, fd, fn, arg, &r);

	if (rc)
		return rc;
	ev.data.u64 = (uint64_t)fd + 1;
	(void)r;
	return epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

void h2_loop_del_fd(struct h2_loop *l, int fd)
{
	if (fd < 0)
		return;
	epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
	if (fd < l->nregs) {
		free(l->regs[fd]);
		l->regs[fd] = NULL;
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

int h2_loop_post(struct h2_loop *l, h2_fn fn, void *arg)
{
	struct post *p = malloc(sizeof(*p));
	bool wake;

	if (!p)
		return -ENOMEM;
	p->fn = fn;
	p->arg = arg;
	p->next = NULL;
	pthread_mutex_lock(&l->mu);
	if (l->tail)
		l->tail->next = p;
	else
		l->head = p;
	l->tail = p;
	wake = !l->wake_pending;
	l->wake_pending = true;
	pthread_mutex_unlock(&l->mu);
	if (wake) {
		uint64_t one = 1;
		if (write(l->evfd, &one, sizeof(one)) < 0) {
			/* counter full cannot happen with one pending wake */
		}
	}
	return 0;
}

struct sync_call {
	h2_fn fn;
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
};

static void sync_fn(void *arg)
{
	struct sync_call *s = arg;
	s->fn(s->arg);
	pthread_mutex_lock(&s->mu);
	s->done = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

int h2_loop_run_sync(struct h2_loop *l, h2_fn fn, void *arg)
{
	struct sync_call s = {.fn = fn, .arg = arg};
	int rc;

	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	rc = h2_loop_post(l, sync_fn, &s);
	if (rc == 0) {
		pthread_mutex_lock(&s.mu);
		while (!s.done)
			pthread_cond_wait(&s.cv, &s.mu);
		pthread_mutex_unlock(&s.mu);
	}
	pthread_cond_destroy(&s.cv);
	pthread_mutex_destroy(&s.mu);
	return rc;
}
