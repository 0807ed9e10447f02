/* cluster/lease — leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection
 * package does it with a LeaseLock and ReleaseOnCancel (deploy.md §1.3: Lease
 * `pillar-csi-controller` in POD_NAMESPACE, lease duration 15 s, renew deadline 10 s, retry
 * period 2 s).
 *
 * One attempt (kube_lease_tick) reads the Lease; a missing Lease is created with this
 * candidate as holder.  A Lease held by another identity is taken only once its record (holder,
 * times, duration, transitions) has stayed unchanged for its leaseDurationSeconds as measured on
 * this process's monotonic clock from when the record was first seen — never from the
 * renewTime written by another machine's clock.  Taking it over writes holderIdentity, a new
 * acquireTime and leaseTransitions + 1; renewing keeps acquireTime and leaseTransitions and
 * writes renewTime.  Every write is a PUT with the resourceVersion read, so two candidates never
 * both win.  Times are MicroTime (`2026-12-02T21:50:05.123456Z`, six digits: the API server
 * rejects other forms).
 *
 * Leading starts with a successful acquire and ends when no renewal has succeeded for the renew
 * deadline (counted from the start of the last successful attempt), or at once when another
 * holder is seen.  kube_lease_held() is a pure clock check, so a caller that resumes after being
 * stopped (SIGSTOP, a long GC-like stall) learns it no longer leads before its elector thread has
 * run: with lease duration > renew deadline, a leader stops acting before any other candidate
 * may acquire.
 *
 * kube_lease_start runs attempts on a thread: every retry period while a candidate (with
 * client-go's jitter of up to 1.2 × the period) and while leading.  The callbacks run on that
 * thread: started() when leading begins, stopped() when it ends.  kube_lease_free stops the
 * thread and, when leading, calls stopped() and then releases the Lease as ReleaseOnCancel does
 * (holderIdentity "", leaseDurationSeconds 1, renewTime = acquireTime = now), so a successor does
 * not wait for the lease to expire.
 *
 * Functions return 0 or a negative errno with a message in e; kube_lease_tick returns whether
 * this candidate leads after the attempt (1/0).  Thread-safe: held()/leading() may be called from
 * any thread.
 */
#ifndef PILLAR_KUBE_LEASE_H
#define PILLAR_KUBE_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "kube/client.h"

#define KUBE_LEASE_NAME              "pillar-csi-controller"
#define KUBE_LEASE_DURATION_MS       15000
#define KUBE_LEASE_RENEW_DEADLINE_MS 10000
#define KUBE_LEASE_RETRY_PERIOD_MS   2000

struct kube_lease_opts {
	const char *ns, *name, *identity; /* required (name: KUBE_LEASE_NAME in the controller) */
	int64_t lease_ms, renew_deadline_ms, retry_ms; /* 0: the defaults above */
	/* Callbacks (optional), on the elector's thread. */
	void (*started)(void *arg);
	void (*stopped)(void *arg);
	void *arg;
	/* Tests: monotonic microseconds and wall-clock microseconds since the epoch (defaults
	 * CLOCK_MONOTONIC and CLOCK_REALTIME). */
	uint64_t (*now_us)(void *arg);
	int64_t (*wall_us)(void *arg);
	void *clock_arg;
};

struct kube_lease;

/* Checks the durations (lease > renew deadline > 1.2 × retry period, as client-go requires)
 * and the names; -EINVAL with the reason.  kc must outlive the elector. */
int kube_lease_new(struct kube_lease **out, struct kube_client *kc, const struct kube_lease_opts *o,
                   struct err *e);
/* One acquire-or-renew attempt now: 1 when leading afterwards, 0 when not (e says why when an
 * API request failed).  Calls started()/stopped() on a change. */
int kube_lease_tick(struct kube_lease *l, struct err *e);
/* Runs kube_lease_tick on a thread until kube_lease_free. */
int kube_lease_start(struct kube_lease *l, struct err *e);
/* Leading and the last successful renewal is younger than the renew deadline. */
bool kube_lease_held(struct kube_lease *l);
/* The identity written as holderIdentity. */
const char *kube_lease_identity(const struct kube_lease *l);
/* Stops the thread; when leading: stopped(), then the release write.  NULL is a no-op. */
void kube_lease_free(struct kube_lease *l);

/* A candidate identity as client-go programs make it: "<host>_<random UUID>", host being
 * POD_NAME or the hostname.  0 or -EIO. */
int kube_lease_identity_make(char *buf, size_t cap);
/* MicroTime of wall-clock microseconds into buf (at least 28 bytes). */
void kube_microtime(int64_t wall_us, char *buf, size_t cap);

#endif
