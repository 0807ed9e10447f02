/* h2/loop — the process's event loop: one thread, epoll, timers and cross-thread posts.
 *
 * Everything that touches a socket, a TLS session or an nghttp2 session runs on the loop thread.
 * Other threads hand work to it with h2_loop_post() (a queue plus an eventfd wake-up).  Timers
 * are loop-thread objects embedded in their owner; a callback never blocks.
 * h2_loop_default() returns a process-wide loop that is created and started on first use and
 * lives until exit.  Functions returning int give 0 or a negative errno.
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
/* Starts the loop thread.  h2_loop_free() stops and joins it first; callers must have removed
 * their fds and timers (or be done with them) before. */
int h2_loop_start(struct h2_loop *l, struct err *e);
void h2_loop_free(struct h2_loop *l);
struct h2_loop *h2_loop_default(void);
bool h2_loop_in_thread(const struct h2_loop *l);

/* fd registration (loop thread, or before start).  events are EPOLLIN/EPOLLOUT bits. */
int h2_loop_add_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg);
int h2_loop_mod_fd(struct h2_loop *l, int fd, uint32_t events, h2_io_fn fn, void *arg);
void h2_loop_del_fd(struct h2_loop *l, int fd);

/* Timers (loop thread only).  Arming an armed timer moves it. */
void h2_timer_arm(struct h2_loop *l, struct h2_timer *t, uint64_t at_ms, h2_fn fn, void *arg);
void h2_timer_cancel(struct h2_loop *l, struct h2_timer *t);

/* Runs fn(arg) on the loop thread soon; callable from any thread.  Returns -ENOMEM. */
int h2_loop_post(struct h2_loop *l, h2_fn fn, void *arg);
/* Runs posted callbacks and due timers on the calling thread: for tests and the fuzzer that
 * drive a loop that was never started. */
void h2_loop_run_pending(struct h2_loop *l);
/* Posts fn and waits for it to have run (never call it from the loop thread). */
int h2_loop_run_sync(struct h2_loop *l, h2_fn fn, void *arg);

#endif
