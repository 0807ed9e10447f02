/* h2/loop_int — the event loop's state, shared by loop.c (threads, posts, jobs) and loop_fds.c
 * (fd registrations and timers).  Internal: the locking rules are loop.c's. */
#ifndef PILLAR_H2_LOOP_INT_H
#define PILLAR_H2_LOOP_INT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "h2/loop.h"

/* An fd is watched with EPOLLONESHOT: the thread that polled its event runs the callback and
 * re-arms it (armed false in between), so no other poller sees the same readiness.  An fd
 * registered with EPOLLET is edge-triggered instead (always armed): its callback reads until
 * the fd is empty, and a later arrival wakes a poller anew. */
struct fd_registration {
	h2_io_fn fn;
	void *arg;
	int fd;
	uint32_t events; /* EPOLLIN/EPOLLOUT bits wanted, and EPOLLET */
	bool armed;      /* watched in the epoll set (false from its event until re-armed) */
};

/* Threads that may sleep in epoll_wait at once. */
#define MAX_POLLERS 2

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

/* A thread waiting for a job or the poller's place (on the loop's idle list, under mu). */
struct idle_thread {
	sem_t wake;
	struct idle_thread *next;
	bool helper; /* woken to take queued jobs (counted in waking) */
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
	/* The timers' wake-up: a timerfd in the epoll set, set to the earliest timer or earlier
	 * (then it fires early and is set again), so that no poller needs a timeout. */
	int timer_fd;
	uint64_t timer_fd_at; /* what timer_fd is set to (ms), UINT64_MAX when disarmed */

	pthread_mutex_t mu;
	struct idle_thread *idle_list;
	pthread_cond_t done_cv; /* a job ended or a thread exited */
	struct h2_post *head, *tail;
	struct h2_post *deferred_head, *deferred_tail; /* h2_loop_run_or_defer */
	atomic_uint n_deferred; /* deferred posts queued; read without mu after a fence */
	bool wake_pending;      /* an eventfd write is outstanding */
	struct job *job_head, *job_tail;
	unsigned running;   /* jobs running, all groups */
	unsigned n_threads; /* live threads */
	unsigned idle;      /* threads on idle_list */
	unsigned target;    /* threads wanted: 1 once started, plus every group's limit */
	unsigned pollers;   /* threads polling (asleep in epoll_wait or running events) */
	unsigned waking;    /* idle threads woken to take jobs, not yet running */
	bool started, stop;
	struct loop_thread *threads;
	size_t n_slots;
};

/* Holding the loop, after the callback of fd's event: watches fd again unless the callback
 * did (h2_loop_mod_fd) or removed it. */
void loop_rearm(struct h2_loop *l, int fd);
/* Holding the loop: sets timer_fd to fire at `at` (ms, CLOCK_MONOTONIC). */
void loop_timer_fd_set(struct h2_loop *l, uint64_t at);

#endif
