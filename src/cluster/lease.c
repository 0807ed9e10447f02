/* kube/lease — leader election on a Lease (lease.h). */
#include "cluster/lease.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/stop.h"
#include "base/time.h"
#include "model/kube.h"

#define JITTER 1.2 /* client-go's JitterFactor for acquire attempts */

static const struct kube_resource leases = {"coordination.k8s.io", "v1", "leases", true};

struct kube_lease {
	struct kube_client *kc;
	struct kube_lease_opts o;
	char ns[254], name[254], identity[256];
	pthread_mutex_t mu;
	struct stop stop; /* kube_lease_free: wakes the thread */
	bool thread;
	pthread_t th;
	/* Under mu (written by the attempting thread). */
	bool leading;
	uint64_t renewed_us; /* monotonic start of the last successful acquire or renew */
	/* The attempting thread's own: the last record seen and when it changed. */
	char observed[1024];
	uint64_t observed_us;
	int64_t observed_dur_s, observed_transitions;
	bool observed_mine;
	struct model_lease cur; /* the Lease as last read or written (its resourceVersion) */
};

void kube_microtime(int64_t wall_us, char *buf, size_t cap)
{
	time_t s = (time_t)(wall_us / 1000000);
	struct tm tm;
	char day[32];

	gmtime_r(&s, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, cap, "%s.%06dZ", day, (int)(wall_us % 1000000));
}

int kube_lease_identity_make(char *buf, size_t cap)
{
	unsigned char r[16];
	char host[254] = "";
	const char *pod = getenv("POD_NAME");

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -EIO;
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40); /* version 4 */
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	if (pod && *pod)
		snprintf(host, sizeof(host), "%s", pod);
	else if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "unknown");
	snprintf(buf, cap,
	         "%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", host,
	         r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
	         r[13], r[14], r[15]);
	return 0;
}

int kube_lease_new(struct kube_lease **out, struct kube_client *kc, const struct kube_lease_opts *o,
                   struct err *e)
{
	struct kube_lease *l;

	if (!o->ns || !*o->ns || !o->name || !*o->name || !o->identity || !*o->identity)
		return err_set(e, -EINVAL,
		               "leader election: lease namespace, name and identity are "
		               "required (set POD_NAMESPACE)");
	l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(e, -ENOMEM, "out of memory");
	l->kc = kc;
	l->o = *o;
	l->o.lease_ms = o->lease_ms > 0 ? o->lease_ms : KUBE_LEASE_DURATION_MS;
	l->o.renew_deadline_ms =
	    o->renew_deadline_ms > 0 ? o->renew_deadline_ms : KUBE_LEASE_RENEW_DEADLINE_MS;
	l->o.retry_ms = o->retry_ms > 0 ? o->retry_ms : KUBE_LEASE_RETRY_PERIOD_MS;
	if (!l->o.now_us)
		l->o.now_us = time_mono_us_fn;
	if (!l->o.wall_us)
		l->o.wall_us = time_real_us_fn;
	if (l->o.lease_ms <= l->o.renew_deadline_ms ||
	    (double)l->o.renew_deadline_ms <= JITTER * (double)l->o.retry_ms ||
	    l->o.lease_ms % 1000) {
		free(l);
		return err_set(
		    e, -EINVAL,
		    "leader election: the lease duration (whole seconds) must be greater "
		    "than the renew deadline, and the renew deadline greater than %.1f "
		    "times the retry period",
		    JITTER);
	}
	snprintf(l->ns, sizeof(l->ns), "%s", o->ns);
	snprintf(l->name, sizeof(l->name), "%s", o->name);
	snprintf(l->identity, sizeof(l->identity), "%s", o->identity);
	pthread_mutex_init(&l->mu, NULL);
	stop_init(&l->stop);
	*out = l;
	return 0;
}

const char *kube_lease_identity(const struct kube_lease *l)
{
	return l->identity;
}

bool kube_lease_held(struct kube_lease *l)
{
	uint64_t now = l->o.now_us(l->o.clock_arg);
	pthread_mutex_lock(&l->mu);
	bool held = l->leading && now < l->renewed_us + (uint64_t)l->o.renew_deadline_ms * 1000;
	pthread_mutex_unlock(&l->mu);
	return held;
}

/* ---- one attempt --------------------------------------------------------------------------- */

static int fail(struct err *e, int rc, const char *what, const struct kube_status *st)
{
	return err_set(e, rc, "lease %s: %s", what,
	               st->message[0] ? st->message : kube_reason_name(st->kind));
}

/* Remembers the record of cur and, when it differs from the last one seen, when it changed. */
static void observe(struct kube_lease *l, uint64_t now)
{
	const __typeof__(l->cur.spec) *s = &l->cur.spec;
	char rec[sizeof(l->observed)];

	snprintf(rec, sizeof(rec), "%s|%s|%s|%" PRId64 "|%" PRId64,
	         s->holder_identity ? s->holder_identity : "",
	         s->acquire_time ? s->acquire_time : "", s->renew_time ? s->renew_time : "",
	         s->lease_duration_seconds, s->lease_transitions);
	if (strcmp(rec, l->observed) != 0 || !l->observed_us) {
		snprintf(l->observed, sizeof(l->observed), "%s", rec);
		l->observed_us = now;
	}
	l->observed_dur_s = s->has_lease_duration_seconds ? s->lease_duration_seconds : 0;
	l->observed_transitions = s->lease_transitions;
	l->observed_mine = s->holder_identity && strcmp(s->holder_identity, l->identity) == 0;
}

/* PUT (or POST when create) of cur; on success cur becomes the stored Lease. */
static int write_lease(struct kube_lease *l, bool create, struct err *e)
{
	char path[1024], *body, *resp = NULL;
	struct kube_status st;
	struct model_lease nl = {0};
	size_t n = 0;
	int rc = kube_path(path, sizeof(path), &leases, l->ns, create ? NULL : l->name, NULL);

	if (rc < 0)
		return err_set(e, rc, "lease %s/%s: invalid namespace or name", l->ns, l->name);
	if (!(body = model_encode_text(&model_lease_kind, &l->cur)))
		return err_set(e, -ENOMEM, "out of memory");
	rc = kube_request(l->kc, create ? "POST" : "PUT", path, "application/json", body,
	                  strlen(body), &resp, &n, &st);
	free(body);
	if (rc < 0)
		return fail(e, rc, create ? "create" : "update", &st);
	rc = model_decode_text(&model_lease_kind, resp, &nl, e);
	free(resp);
	if (rc < 0)
		return rc;
	model_clear(&model_lease_kind, &l->cur);
	l->cur = nl;
	return 0;
}

/* Fills cur's spec as this candidate holding it at wall time `at`. */
static int hold_record(struct kube_lease *l, bool takeover, const char *at)
{
	__typeof__(l->cur.spec) *s = &l->cur.spec;

	if (model_str_set(&s->holder_identity, l->identity) < 0 ||
	    model_str_set(&s->renew_time, at) < 0 ||
	    (takeover && model_str_set(&s->acquire_time, at) < 0))
		return -ENOMEM;
	s->has_lease_duration_seconds = true;
	s->lease_duration_seconds = l->o.lease_ms / 1000;
	s->has_lease_transitions = true;
	if (takeover)
		s->lease_transitions = l->observed_transitions + (l->observed_us ? 1 : 0);
	return 0;
}

/* client-go's tryAcquireOrRenew: 1 acquired or renewed, 0 held by another, < 0 failure. */
static int try_acquire_or_renew(struct kube_lease *l, uint64_t now, struct err *e)
{
	char path[1024], *resp = NULL, at[40];
	struct kube_status st;
	struct model_lease got = {0};
	size_t n = 0;
	int rc = kube_path(path, sizeof(path), &leases, l->ns, l->name, NULL);

	if (rc < 0)
		return err_set(e, rc, "lease %s/%s: invalid namespace or name", l->ns, l->name);
	kube_microtime(l->o.wall_us(l->o.clock_arg), at, sizeof(at));
	rc = kube_request(l->kc, "GET", path, NULL, NULL, 0, &resp, &n, &st);
	if (rc == -ENOENT && st.kind == KUBE_NOT_FOUND) {
		model_clear(&model_lease_kind, &l->cur);
		l->observed_us = 0;
		l->observed_transitions = 0;
		if (model_str_set(&l->cur.meta.name, l->name) < 0 ||
		    model_str_set(&l->cur.meta.ns, l->ns) < 0 || hold_record(l, true, at) < 0)
			return err_set(e, -ENOMEM, "out of memory");
		rc = write_lease(l, true, e);
		if (rc == 0)
			observe(l, now);
		return rc < 0 ? rc : 1;
	}
	if (rc < 0)
		return fail(e, rc, "get", &st);
	rc = model_decode_text(&model_lease_kind, resp, &got, e);
	free(resp);
	if (rc < 0)
		return rc;
	model_clear(&model_lease_kind, &l->cur);
	l->cur = got;
	observe(l, now);
	const char *holder = l->cur.spec.holder_identity;
	if (holder && *holder && !l->observed_mine &&
	    l->observed_us + (uint64_t)l->observed_dur_s * 1000000 > now)
		return 0;
	if (hold_record(l, !l->observed_mine, at) < 0)
		return err_set(e, -ENOMEM, "out of memory");
	rc = write_lease(l, false, e);
	if (rc == 0)
		observe(l, now);
	return rc < 0 ? rc : 1;
}

int kube_lease_tick(struct kube_lease *l, struct err *e)
{
	uint64_t start = l->o.now_us(l->o.clock_arg);
	int r = try_acquire_or_renew(l, start, e);
	uint64_t now = l->o.now_us(l->o.clock_arg);
	bool began = false, ended = false;

	pthread_mutex_lock(&l->mu);
	if (r == 1) {
		l->renewed_us = start;
		began = !l->leading;
		l->leading = true;
	} else if (l->leading &&
	           (r == 0 || now >= l->renewed_us + (uint64_t)l->o.renew_deadline_ms * 1000)) {
		l->leading = false;
		ended = true;
	}
	bool leading = l->leading;
	pthread_mutex_unlock(&l->mu);
	if (began) {
		log_info("successfully acquired lease", "lease", l->name, "namespace", l->ns,
		         "identity", l->identity);
		if (l->o.started)
			l->o.started(l->o.arg);
	}
	if (ended) {
		log_error("leader election lost", "lease", l->name, "namespace", l->ns, "reason",
		          r == 0 ? "another holder took the lease" : e->msg);
		if (l->o.stopped)
			l->o.stopped(l->o.arg);
	}
	return leading ? 1 : 0;
}

/* ---- the elector thread ---------------------------------------------------------------------- */

static void *elector_main(void *arg)
{
	struct kube_lease *l = arg;
	bool was = false;

	log_info("attempting to acquire leader lease", "lease", l->name, "namespace", l->ns,
	         "identity", l->identity);
	do {
		struct err e = {0};
		int r = kube_lease_tick(l, &e);
		if (r == 0 && e.msg[0] && log_verbosity() >= 2)
			log_warn("lease attempt failed", "lease", l->name, "error", e.msg);
		if (was && r == 0)
			log_info("attempting to acquire leader lease", "lease", l->name);
		was = r == 1;
		int64_t ms = l->o.retry_ms;
		if (!was) { /* acquire attempts are jittered: period × [1, 1 + JITTER) */
			unsigned j = 0;
			if (getrandom(&j, sizeof(j), 0) == (ssize_t)sizeof(j))
				ms +=
				    (int64_t)((double)l->o.retry_ms * JITTER * (j / 4294967296.0));
		}
		if (stop_wait_ms(&l->stop, ms))
			break;
	} while (1);
	return NULL;
}

int kube_lease_start(struct kube_lease *l, struct err *e)
{
	int rc = pthread_create(&l->th, NULL, elector_main, l);
	if (rc)
		return err_set(e, -rc, "leader election thread: %s", strerror(rc));
	l->thread = true;
	return 0;
}

/* ReleaseOnCancel: an empty holder so that the next candidate acquires at once. */
static void release(struct kube_lease *l)
{
	char at[40];
	struct err e = {0};
	__typeof__(l->cur.spec) *s = &l->cur.spec;

	kube_microtime(l->o.wall_us(l->o.clock_arg), at, sizeof(at));
	if (model_str_set(&s->holder_identity, "") < 0 || model_str_set(&s->renew_time, at) < 0 ||
	    model_str_set(&s->acquire_time, at) < 0) {
		log_error("lease not released", "lease", l->name, "error", "out of memory");
		return;
	}
	s->has_lease_duration_seconds = true;
	s->lease_duration_seconds = 1;
	if (write_lease(l, false, &e) < 0)
		log_error("lease not released", "lease", l->name, "error", e.msg);
	else
		log_info("lease released", "lease", l->name, "namespace", l->ns);
}

void kube_lease_free(struct kube_lease *l)
{
	if (!l)
		return;
	stop_set(&l->stop);
	if (l->thread)
		pthread_join(l->th, NULL);
	pthread_mutex_lock(&l->mu);
	bool was = l->leading;
	l->leading = false;
	pthread_mutex_unlock(&l->mu);
	if (was) {
		if (l->o.stopped)
			l->o.stopped(l->o.arg);
		release(l);
	}
	model_clear(&model_lease_kind, &l->cur);
	stop_fini(&l->stop);
	pthread_mutex_destroy(&l->mu);
	free(l);
}
