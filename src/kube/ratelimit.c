#include "kube/ratelimit.h"

void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, int burst)
{
	rl->qps = qps;
	rl->burst = burst < 1 ? 1 : burst;
	rl->tokens = rl->burst;
	rl->last_us = 0;
	rl->started = false;
}

uint64_t kube_ratelimit_reserve(struct kube_ratelimit *rl, uint64_t now_us)
{
	if (rl->qps <= 0)
		return 0;
	if (!rl->started) {
		rl->started = true;
		rl->last_us = now_us;
	}
	if (now_us > rl->last_us) {
		rl->tokens += (double)(now_us - rl->last_us) * rl->qps / 1e6;
		if (rl->tokens > rl->burst)
			rl->tokens = rl->burst;
		rl->last_us = now_us;
	}
	rl->tokens -= 1;
	if (rl->tokens >= 0)
		return 0;
	/* round up: never let a request go before its token has fully accrued */
	return (uint64_t)(-rl->tokens * 1e6 / rl->qps + 0.999999);
}
