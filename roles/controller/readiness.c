#include "controller/readiness.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/time.h"
#include "model/pillar.h"

bool ctl_readiness_check(store *st, struct err *e)
{
	void *items = NULL;
	size_t n = 0;
	int r = model_list(st, &model_pa_kind, NULL, NULL, &items, &n, NULL, e);
	model_list_free(&model_pa_kind, items, n);
	if (r < 0)
		err_prefix(e, "a list of PillarAgents failed");
	return r == 0 && store_health(st, e) == 0;
}

static uint64_t now_ms(void)
{
	int64_t t = time_mono_ms();
	return t > 0 ? (uint64_t)t : 1; /* 0 means "failed" */
}

/* The API server answers a request (GET /version); false with the reason in e. */
static bool api_answers(struct kube_client *kc, struct err *e)
{
	struct kube_status ks = {0};
	int r = kube_request(kc, "GET", "/version", NULL, NULL, 0, NULL, NULL, &ks);
	if (r < 0)
		err_set(e, r, "GET /version on the API server failed: %s", strerror(-r));
	return r == 0;
}

/* One check; logs when the answer changes. */
static void check(struct ctl_readiness *r)
{
	struct err e = {0};
	bool ok = r->kc ? api_answers(r->kc, &e) : ctl_readiness_check(r->st, &e);
	uint64_t before = atomic_exchange(&r->ok_at, ok ? now_ms() : 0);
	if (ok != (before != 0)) {
		if (ok)
			log_info("store ready: Probe and /readyz answer ready");
		else
			log_info("store not ready: Probe and /readyz answer not ready", "reason",
			         e.msg);
	}
}

static void *readiness_main(void *arg)
{
	struct ctl_readiness *r = arg;
	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		struct timespec ts = time_after(CLOCK_MONOTONIC, (int64_t)r->interval_ms);
		while (!r->stop && pthread_cond_timedwait(&r->cv, &r->mu, &ts) != ETIMEDOUT)
			;
		if (r->stop)
			break;
		pthread_mutex_unlock(&r->mu);
		check(r);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

int ctl_readiness_start(struct ctl_readiness *r, struct err *e)
{
	pthread_condattr_t ca;
	int rc;

	if (!r->interval_ms)
		r->interval_ms = CTL_READINESS_CHECK_MS;
	if (!r->stale_ms)
		r->stale_ms = CTL_READINESS_STALE_MS;
	r->stop = r->running = false;
	/* so that only a first failure logs: success is what a start is expected to find */
	atomic_init(&r->ok_at, now_ms());
	check(r);
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&r->thread, NULL, readiness_main, r);
	if (rc) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		return err_set(e, -rc, "readiness thread: %s", strerror(rc));
	}
	r->running = true;
	return 0;
}

bool ctl_readiness_ready(struct ctl_readiness *r)
{
	uint64_t at = atomic_load(&r->ok_at);
	return at != 0 && now_ms() - at <= r->stale_ms;
}

void ctl_readiness_stop(struct ctl_readiness *r)
{
	if (!r->running)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	r->running = false;
}
