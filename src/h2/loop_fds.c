/* Event loop fd registrations and timers (holding the loop; loop.h). */
#include "h2/loop_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>

/* An fd is one-shot unless its owner asks for edge-triggered events (EPOLLET). */
static uint32_t watch_bits(uint32_t events)
{
	return events & EPOLLET ? events : events | EPOLLONESHOT;
}

static int set_reg(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg)
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
	l->registrations[fd]->events = events;
	return 0;
}

int h2_loop_add_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg)
{
	struct epoll_event ev = {.events = watch_bits(events)};
	int rc = set_reg(l, fd, events, fn, arg);

	if (rc)
		return rc;
	ev.data.u64 = (uint64_t)fd + 1;
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		rc = -errno;
		free(l->registrations[fd]);
		l->registrations[fd] = NULL;
		return rc;
	}
	l->registrations[fd]->armed = true;
	return 0;
}

int h2_loop_mod_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg)
{
	struct epoll_event ev = {.events = watch_bits(events)};
	int rc = set_reg(l, fd, events, fn, arg);

	if (rc)
		return rc;
	ev.data.u64 = (uint64_t)fd + 1;
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	l->registrations[fd]->armed = true;
	return 0;
}

void loop_rearm(struct h2_loop *l, int fd)
{
	struct fd_registration *r = fd < l->n_registrations ? l->registrations[fd] : NULL;
	struct epoll_event ev;

	if (!r || r->armed)
		return;
	ev.events = watch_bits(r->events);
	ev.data.u64 = (uint64_t)fd + 1;
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, fd, &ev) == 0)
		r->armed = true;
}

void loop_timer_fd_set(struct h2_loop *l, uint64_t at)
{
	struct itimerspec its = {{0, 0}, {0, 0}};

	if (at != UINT64_MAX) {
		its.it_value.tv_sec = (time_t)(at / 1000);
		its.it_value.tv_nsec = (long)(at % 1000) * 1000000;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1; /* zero would disarm it */
	}
	timerfd_settime(l->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
	l->timer_fd_at = at;
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
	/* a cancelled timer leaves timer_fd as it was: it fires early at worst */
	if (at_ms < l->timer_fd_at)
		loop_timer_fd_set(l, at_ms);
}
