/* stop — a stop flag threads sleep on (stop.h). */
#include "base/stop.h"

#include <errno.h>

#include "base/time.h"

void stop_init(struct stop *s)
{
	pthread_condattr_t ca;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	s->stopped = false;
}

void stop_fini(struct stop *s)
{
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
}

void stop_set(struct stop *s)
{
	pthread_mutex_lock(&s->mu);
	s->stopped = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

bool stop_isset(struct stop *s)
{
	pthread_mutex_lock(&s->mu);
	bool v = s->stopped;
	pthread_mutex_unlock(&s->mu);
	return v;
}

bool stop_wait_ms(struct stop *s, int64_t ms)
{
	struct timespec ts = time_after(CLOCK_MONOTONIC, ms);
	pthread_mutex_lock(&s->mu);
	while (!s->stopped && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT)
		;
	bool v = s->stopped;
	pthread_mutex_unlock(&s->mu);
	return v;
}
