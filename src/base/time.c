/* time — monotonic clock readings and sleeps. */
#include "base/time.h"

#include <errno.h>

uint64_t time_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t time_real_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t time_mono_us(void)
{
	return time_mono_ns() / 1000u;
}

int64_t time_mono_ms(void)
{
	return (int64_t)(time_mono_ns() / 1000000u);
}

struct timespec time_after(clockid_t clk, int64_t ms)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

void time_sleep_us(uint64_t us)
{
	struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

void time_sleep_ms(int ms)
{
	time_sleep_us(ms > 0 ? (uint64_t)ms * 1000u : 0);
}

uint64_t time_mono_us_fn(void *arg)
{
	(void)arg;
	return time_mono_us();
}

int64_t time_real_us_fn(void *arg)
{
	(void)arg;
	return time_real_us();
}

void time_cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}
