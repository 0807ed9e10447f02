/* h2/loop — the process's event loop: epoll, timers, cross-thread posts and handler jobs.
 *
 * Loop work — fd callbacks, timers, posted callbacks, and everything that touches a socket, a TLS
 * session or an nghttp2 session — runs while *holding the loop*: one thread at a time, under the
 * loop lock.  Up to two of the loop's threads wait in epoll_wait at once (the pollers), on one
 * epoll set whose fds are one-shot or edge-triggered, so that one event wakes one poller: it
 * takes the loop, runs that fd's callback (re-arming a one-shot fd) and drops the loop; the other
 * poller keeps watching meanwhile.  A
 * thread that is not a poller may take the loop too (h2_loop_run), to send a response or a
 * request from where it was produced, without waking another thread.  Loop callbacks never
 * block.
 *
 * Handler jobs (h2_jobs) may block.  They run outside the loop lock on the loop's own threads: a
 * job submitted from loop work runs on the thread that did that work once it drops the loop
 * (which then sends the response itself), while the other poller keeps polling — the unary
 * request path has no thread hand-off and no wake-up.  Jobs still queued behind it wake idle
 * threads one at a time.  A group adds `limit` threads and runs at most `limit` of its jobs at
 * once, and one thread is always left to poll, so a slow handler never delays other streams or
 * connections.
 *
 * Timers are loop objects embedded in their owner.  h2_loop_default() returns a process-wide loop
 * that is created and started on first use and lives until exit.  Functions returning int give 0
 * or a negative errno.
 */
#ifndef PILLAR_H2_LOOP_H
#define PILLAR_H2_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct h2_loop;
typedef void (*h2_io_fn)(void *arg, uint32_t events);
typedef void (*h2_fn)(void *arg);

struct h2_timer {
	uint64_t at; /* CLOCK_MONOTONIC ms */
	h2_fn fn;
	void *arg;
	struct h2_timer *prev, *next;
	bool armed;
};

/* Monotonic milliseconds. */
uint64_t h2_now_ms(void);

int h2_loop_new(struct h2_loop **out, struct err *e);
/* Starts polling on a thread of the loop's own.  h2_loop_free() stops and joins every thread
 * first; callers must have removed their fds and timers and freed their job groups before. */
int h2_loop_start(struct h2_loop *l, struct err *e);
void h2_loop_free(struct h2_loop *l);
struct h2_loop *h2_loop_default(void);
/* True when the calling thread holds the loop. */
bool h2_loop_in_thread(const struct h2_loop *l);

/* fd registration (holding the loop, or before start).  events are EPOLLIN/EPOLLOUT bits:
 * the fd is one-shot, watched again after each callback.  With EPOLLET among them it is
 * edge-triggered: the callback must read until the fd is empty (or mod the fd again). */
int h2_loop_add_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg);
int h2_loop_mod_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg);
void h2_loop_del_fd(struct h2_loop *l, int fd);

/* Timers (holding the loop).  Arming an armed timer moves it; a timer earlier than the poller's
 * wake-up wakes it when the loop is dropped. */
void h2_timer_arm(struct h2_loop *l, struct h2_timer *t, uint64_t at_ms, h2_fn fn, void *arg);
void h2_timer_cancel(struct h2_loop *l, struct h2_timer *t);

/* Runs fn(arg) holding the loop, after the current loop work; callable from any thread.
 * Returns -ENOMEM. */
int h2_loop_post(struct h2_loop *l, h2_fn fn, void *arg);
/* The same with memory the caller provides (a member of the object fn works on, e.g. its
 * teardown, which must not depend on an allocation): cannot fail.  p must stay valid until fn
 * has been called and must not be queued twice at a time. */
struct h2_post {
	h2_fn fn;
	void *arg;
	struct h2_post *next;
	bool owned; /* allocated by h2_loop_post (freed after fn) */
};
void h2_loop_post_embedded(struct h2_loop *l, struct h2_post *p, h2_fn fn, void *arg);
/* Runs fn(arg) holding the loop as soon as possible: at once on the calling thread (taking the
 * loop lock) when the loop is started and this thread does not hold it; posted otherwise.
 * Never call it with a lock held that loop work may take.  Returns 0 or -ENOMEM. */
int h2_loop_run(struct h2_loop *l, h2_fn fn, void *arg);
/* Runs fn(arg) holding the loop without waiting for the loop lock: at once on the calling thread
 * when no thread holds the loop, else on the thread that holds it, when it drops it — no
 * wake-up and no lock wait either way (posted as h2_loop_post_embedded when this thread holds
 * the loop or the loop is not started).  p as for h2_loop_post_embedded.  Never call it with a
 * lock held that loop work may take. */
void h2_loop_run_or_defer(struct h2_loop *l, struct h2_post *p, h2_fn fn, void *arg);
/* Runs fn(arg) holding the loop on the calling thread and returns when it has run (directly
 * when this thread holds the loop already).  Posts queued before it run first. */
int h2_loop_run_sync(struct h2_loop *l, h2_fn fn, void *arg);
/* Runs posted callbacks and due timers on the calling thread: for tests and the fuzzer that
 * drive a loop that was never started. */
void h2_loop_run_pending(struct h2_loop *l);

/* Handler job groups.  limit 0: every job runs inline in h2_jobs_submit. */
struct h2_jobs;
int h2_jobs_new(struct h2_jobs **out, struct h2_loop *l, unsigned limit, struct err *e);
/* Queues fn(arg); callable from any thread.  Returns 0 or -ENOMEM. */
int h2_jobs_submit(struct h2_jobs *g, h2_fn fn, void *arg);
/* Runs the group's queued jobs to the end, waits for running ones and gives its threads back.
 * Never call it from one of the group's jobs.  NULL is a no-op. */
void h2_jobs_free(struct h2_jobs *g);

#endif
