/* allocfail — the allocation-failure sweep's harness, shared by the test_allocfail* programs
 * (header-only: the wrappers must exist only in programs linked with
 * --wrap=malloc,calloc,realloc,strdup,strndup, see the Makefile).
 *
 * af_sweep(what, op, arg): a reference run counts the allocations op makes (N), then for every k
 * in 0..N-1 op runs again with exactly the k-th allocation failing.  Each run must end either with
 * the reference result (op returns 0) or with a clean error (-1); anything else fails the test
 * with op's reason, and so do a crash, a leak (LeakSanitizer after the sweep) and an op that does
 * not work again once memory is back.  Allocations of every thread are counted. */
#ifndef PILLAR_TEST_UNIT_ALLOCFAIL_H
#define PILLAR_TEST_UNIT_ALLOCFAIL_H

#include <limits.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "testutil.h"

/* ---- the wrappers ----------------------------------------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t m, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t m, size_t n);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static atomic_long af_left = -1; /* allocations to let through before one fails; < 0: off */
static atomic_long af_seen;      /* allocations while armed */
static int af_trace;

static int af_take(void)
{
	if (atomic_load(&af_left) < 0)
		return 1;
	atomic_fetch_add(&af_seen, 1);
	if (atomic_fetch_sub(&af_left, 1) != 0)
		return 1;
	if (af_trace) /* ALLOCFAIL_TRACE=<sweep name prefix>: where each failing allocation is */
		__sanitizer_print_stack_trace();
	return 0;
}

void *__wrap_malloc(size_t n)
{
	return af_take() ? __real_malloc(n) : NULL;
}

void *__wrap_calloc(size_t m, size_t n)
{
	return af_take() ? __real_calloc(m, n) : NULL;
}

void *__wrap_realloc(void *p, size_t n)
{
	return af_take() ? __real_realloc(p, n) : NULL;
}

char *__wrap_strdup(const char *s)
{
	return af_take() ? __real_strdup(s) : NULL;
}

char *__wrap_strndup(const char *s, size_t n)
{
	return af_take() ? __real_strndup(s, n) : NULL;
}

/* ---- the sweep -------------------------------------------------------------------------------- */

/* An operation: 0 with the reference result, -1 with a clean error; anything else (a wrong
 * result, an error without a message) is reported with its reason in why. */
typedef int (*af_op)(void *arg, char *why, size_t cap);

/* af_sweep with at most max_runs failing runs: when the reference run makes more allocations,
 * every stride-th one fails (stride = ceil(N / max_runs)), from the first one: every run of the
 * suite fails the same allocations, so its verdict does not depend on the process ID.
 * ALLOCFAIL_OFFSET=o starts at allocation o + 1 instead (to cover others by hand);
 * ALLOCFAIL_FULL=1 fails all of them. */
static inline void af_sweep_max(const char *what, af_op op, void *arg, long max_runs)
{
	char why[512] = "";
	long n, errors = 0, runs = 0, stride = 1, offset = 0;
	atomic_store(&af_seen, 0);
	atomic_store(&af_left, LONG_MAX);
	int r = op(arg, why, sizeof(why));
	atomic_store(&af_left, -1);
	n = atomic_load(&af_seen);
	ck_assert_msg(r == 0, "%s: the reference run failed: %s", what, why);
	ck_assert_msg(n > 0, "%s: no allocation seen: the wrappers are not in the path", what);
	if (getenv("ALLOCFAIL_VERBOSE"))
		fprintf(stderr, "allocfail %s: the reference run makes %ld allocations\n", what, n);
	if (n > max_runs && !getenv("ALLOCFAIL_FULL")) {
		stride = (n + max_runs - 1) / max_runs;
		offset = getenv("ALLOCFAIL_OFFSET") ? atol(getenv("ALLOCFAIL_OFFSET")) % stride : 0;
	}
	const char *t = getenv("ALLOCFAIL_TRACE");
	af_trace = t && !strncmp(what, t, strlen(t));
	for (long k = offset; k < n; k += stride, runs++) {
		why[0] = 0;
		if (af_trace)
			fprintf(stderr, "---- %s: failing allocation %ld\n", what, k + 1);
		atomic_store(&af_left, k);
		r = op(arg, why, sizeof(why));
		atomic_store(&af_left, -1);
		ck_assert_msg(r == 0 || r == -1, "%s: allocation %ld of %ld failing: %s", what,
		              k + 1, n, why);
		errors += r == -1;
		if (af_trace && r == 0) /* a failure that changed nothing: is it really optional? */
			fprintf(stderr, "---- %s: allocation %ld failed, reference result\n", what,
			        k + 1);
		if (getenv("ALLOCFAIL_LEAKS_EACH")) /* debugging: which k leaks */
			ck_assert_msg(__lsan_do_recoverable_leak_check() == 0,
			              "%s: leaks after failing allocation %ld", what, k + 1);
	}
	af_trace = 0;
	ck_assert_msg(op(arg, why, sizeof(why)) == 0, "%s: no recovery: %s", what, why);
	ck_assert_msg(__lsan_do_recoverable_leak_check() == 0, "%s: leaks (see above)", what);
	printf("allocfail %s: %ld allocations, %ld runs: %ld clean errors, %ld reference results",
	       what, n, runs, errors, runs - errors);
	if (stride > 1)
		printf(" (every %ld-th from %ld: ALLOCFAIL_OFFSET=%ld)", stride, offset + 1,
		       offset);
	printf("\n");
}

static inline void af_sweep(const char *what, af_op op, void *arg)
{
	af_sweep_max(what, op, arg, LONG_MAX);
}

/* -1 when e carries a message (a clean error), else 1 with why. */
static inline int af_err(const struct err *e, int rc, char *why, size_t cap)
{
	if (e->msg[0]) {
		snprintf(why, cap, "%s", e->msg); /* for a reference run that fails */
		return -1;
	}
	snprintf(why, cap, "error %d without a message", rc);
	return 1;
}

static inline int af_same(const char *got, const char *want, char *why, size_t cap)
{
	if (got && want && !strcmp(got, want))
		return 0;
	snprintf(why, cap, "result \"%.200s\" differs from the reference \"%.200s\"",
	         got ? got : "(null)", want ? want : "(null)");
	return 1;
}

#endif
