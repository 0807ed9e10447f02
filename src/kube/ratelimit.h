/* kube/ratelimit — client-side rate limiting of API requests: a token bucket as client-go's
 * default limiter has it (golang.org/x/time/rate): `burst` tokens, refilled at `qps` per second,
 * full at start; a request takes one token and, when none is left, waits until its token has
 * accrued (reservations queue up, so waits grow one interval per waiting request).
 * Pure arithmetic on a caller-supplied clock, so tests are deterministic; not thread-safe (the
 * client holds a lock around it).  Defaults are the CSI sidecars' --kube-api-qps=5 and
 * --kube-api-burst=10 (external-provisioner).
 */
#ifndef PILLAR_KUBE_RATELIMIT_H
#define PILLAR_KUBE_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

#define KUBE_DEFAULT_QPS   5.0
#define KUBE_DEFAULT_BURST 10

struct kube_ratelimit {
	double qps;    /* <= 0: unlimited */
	double burst;  /* at least 1 */
	double tokens; /* may go negative: reserved by waiting requests */
	uint64_t last_us;
	bool started;
};

void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, int burst);
/* Takes a token at now_us; returns how many microseconds the request must wait (0: go now). */
uint64_t kube_ratelimit_reserve(struct kube_ratelimit *rl, uint64_t now_us);

#endif
