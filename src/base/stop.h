/* stop — a stop flag that a worker thread sleeps on: its waits end at once when another thread
 * stops it (the elector, the CSINode publisher and alike background threads).  The condition
 * variable measures CLOCK_MONOTONIC.  None of these fails.
 */
#ifndef PILLAR_BASE_STOP_H
#define PILLAR_BASE_STOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct stop {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stopped;
};

void stop_init(struct stop *s);
void stop_fini(struct stop *s);
/* Sets the flag and wakes every waiter. */
void stop_set(struct stop *s);
bool stop_isset(struct stop *s);
/* Waits up to ms; true when the flag is (or becomes) set. */
bool stop_wait_ms(struct stop *s, int64_t ms);

#endif
