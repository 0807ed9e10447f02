/* h2/loop_int — the event loop's state, shared by loop.c (threads, posts, jobs) and loop_fds.c
 * (fd registrations and timers).  Internal: the locking rules are loop.c's. */
#ifndef PILLAR_H2_LOOP_INT_H
#define PILLAR_H2_LOOP_INT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "h2/loop.h"

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

/* A thread waiting for a job or the poller's place (on the loop's idle list, under mu). */
struct idle_thread {
	sem_t wake;
	struct idle_thread *next;
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
	bool started, polling, stop;
	struct loop_thread *threads;
	size_t n_slots;
};

#endif
