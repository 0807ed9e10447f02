/* time — clock arithmetic for timeouts, deadlines and backoff, written once.
 *
 * Durations are measured on CLOCK_MONOTONIC (the wall clock jumps); the wall clock only dates
 * what is written for others (time_real_us).  None of these fails.
 */
#ifndef PILLAR_BASE_TIME_H
#define PILLAR_BASE_TIME_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds, microseconds and nanoseconds of CLOCK_MONOTONIC. */
int64_t time_mono_ms(void);
uint64_t time_mono_us(void);
uint64_t time_mono_ns(void);
/* Microseconds of CLOCK_REALTIME since the epoch (timestamps written for others to read). */
int64_t time_real_us(void);
/* time_mono_us and time_real_us in the shape of an injectable clock (arg unused): the defaults
 * of the components whose tests pass a clock of their own. */
uint64_t time_mono_us_fn(void *arg);
int64_t time_real_us_fn(void *arg);
/* The instant ms milliseconds from now on clock clk, for pthread_cond_timedwait (whose condition
 * variable measures CLOCK_REALTIME unless its attributes chose CLOCK_MONOTONIC). */
struct timespec time_after(clockid_t clk, int64_t ms);
/* Initialises cv to measure CLOCK_MONOTONIC (pair with time_after(CLOCK_MONOTONIC, ...)). */
void time_cond_init_mono(pthread_cond_t *cv);
/* Sleeps ms milliseconds (restarted after signals). */
void time_sleep_ms(int ms);
/* Sleeps us microseconds (restarted after signals). */
void time_sleep_us(uint64_t us);

#endif
