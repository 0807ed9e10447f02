/* Our gRPC client (src/grpc/client.c) as an interop and bench peer.
 *
 *   echo_client TARGET [--ca F [--cert F --key F] [--name N]] [--cases a,b] [--expect-fail]
 *       runs the cases against a pillar.test.v1.Echo server (grpcio's or ours), printing
 *       "ok <case>" / "FAIL <case>: why"; exits 1 on any failure.
 *   echo_client TARGET --bench N --conc C [--size S]
 *       N unary calls from C threads over one channel; prints "p50_us= p99_us= rps=";
 *       with BENCH_DEBUG set, also the slowest call and the calls over 20 ms on stderr.
 * Built by build.sh from the library sources. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "echo.pb-c.h"
#include "grpc/client.h"
#include "health.pb-c.h"

#define MAX   (4 << 20)
#define UNARY "/pillar.test.v1.Echo/Unary"

static struct grpc_channel *ch;
static char why[1024];
static int failed;

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

static int call(Pillar__Test__V1__EchoRequest *rq, Pillar__Test__V1__EchoResponse **out,
                int64_t tmo, const struct grpc_md *md, struct grpc_status *st)
{
	ProtobufCMessage *r = NULL;
	int code = grpc_channel_call(ch, UNARY, &rq->base,
	                             &pillar__test__v1__echo_response__descriptor, &r, tmo, md, st);
	*out = (Pillar__Test__V1__EchoResponse *)r;
	return code;
}

static int want(int code, Pillar__Test__V1__EchoRequest *rq, int64_t tmo, const char *part)
{
	Pillar__Test__V1__EchoResponse *r;
	struct grpc_status st;
	int got = call(rq, &r, tmo, NULL, &st);
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	if (got != code)
		return fail("want %s, got %s (%s)", grpc_code_name(code), grpc_code_name(got),
		            st.msg);
	if (part && !strstr(st.msg, part))
		return fail("message \"%s\" lacks \"%s\"", st.msg, part);
	return 0;
}

static int c_unary_ok(void)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	Pillar__Test__V1__EchoResponse *r;
	struct grpc_status st;
	int rc = 0;

	rq.message = "hello";
	if (call(&rq, &r, 10000, NULL, &st) != GRPC_OK)
		return fail("%s: %s", grpc_code_name(st.code), st.msg);
	if (strcmp(r->message, "hello") != 0 || r->deadline_ms <= 0 || r->deadline_ms > 10000)
		rc = fail("bad response %s %lld", r->message, (long long)r->deadline_ms);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

static int c_statuses(void)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	char msg[128];
	int code;

	for (code = 1; code <= 16; code++) {
		Pillar__Test__V1__EchoResponse *r;
		struct grpc_status st;
		snprintf(msg, sizeof(msg), "failure %d: 100%% caf\xc3\xa9 \xe2\x9c\x93 \n end",
		         code);
		rq.status = code;
		rq.status_message = msg;
		if (call(&rq, &r, 10000, NULL, &st) != code)
			return fail("code %d: got %s (%s)", code, grpc_code_name(st.code), st.msg);
		if (strcmp(st.msg, msg) != 0)
			return fail("code %d: message \"%s\"", code, st.msg);
	}
	return 0;
}

static int c_unknown(void)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	ProtobufCMessage *r;
	struct grpc_status st;

	if (grpc_channel_call(ch, "/pillar.test.v1.Echo/Nope", &rq.base,
	                      &pillar__test__v1__echo_response__descriptor, &r, 5000, NULL,
	                      &st) != GRPC_UNIMPLEMENTED)
		return fail("got %s (%s)", grpc_code_name(st.code), st.msg);
	if (grpc_channel_call(ch, "/no.Such/Thing", &rq.base,
	                      &pillar__test__v1__echo_response__descriptor, &r, 5000, NULL,
	                      &st) != GRPC_UNIMPLEMENTED)
		return fail("got %s (%s)", grpc_code_name(st.code), st.msg);
	return 0;
}

static int stats(void)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	Pillar__Test__V1__EchoResponse *r;
	struct grpc_status st;
	int n = -1;

	rq.message = "stats";
	if (call(&rq, &r, 30000, NULL, &st) == GRPC_OK) {
		sscanf(r->message, "cancelled=%d", &n);
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	return n;
}

static int c_deadline(void)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	struct timespec a, b;
	int before = stats(), i;

	/* the handler would take 20 s: the bound lies far from both that and the 300 ms deadline,
	 * so that a loaded machine's scheduling cannot decide the verdict */
	rq.delay_ms = 20000;
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (want(GRPC_DEADLINE_EXCEEDED, &rq, 300, NULL))
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (b.tv_sec - a.tv_sec > 10)
		return fail("deadline took %ld s", (long)(b.tv_sec - a.tv_sec));
	/* the server's handler saw the end of the call (cancellation by deadline / RST_STREAM) */
	for (i = 0; i < 600; i++) {
		struct timespec ts = {0, 50000000};
		if (stats() > before)
			return 0;
		nanosleep(&ts, NULL);
	}
	return fail("server handler never saw the deadline");
}

static int c_limit(void)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	uint8_t *buf = calloc(1, MAX);
	int rc = 0;

	rq.payload.data = buf;
	rq.payload.len = MAX - 5; /* packed: exactly 4 MiB */
	if (protobuf_c_message_get_packed_size(&rq.base) != MAX)
		rc =
		    fail("test bug: packed size %zu", protobuf_c_message_get_packed_size(&rq.base));
	if (!rc)
		rc = want(GRPC_OK, &rq, 20000, NULL);
	rq.payload.len = MAX - 4;
	if (!rc)
		rc = want(GRPC_RESOURCE_EXHAUSTED, &rq, 20000, "larger than max");
	rq.payload.len = 0;
	rq.response_size = MAX - 64;
	if (!rc)
		rc = want(GRPC_OK, &rq, 20000, NULL);
	rq.response_size = MAX; /* over our client's receive limit */
	if (!rc)
		rc = want(GRPC_RESOURCE_EXHAUSTED, &rq, 20000, "larger than max");
	free(buf);
	return rc;
}

static int c_metadata(void)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	Pillar__Test__V1__EchoResponse *r;
	struct grpc_md md[] = {{"x-test-key", "v1 value"}, {NULL, NULL}};
	struct grpc_md bad[] = {{"Bad Key", "v"}, {NULL, NULL}};
	struct grpc_status st;
	int rc = 0;

	rq.echo_metadata = "x-test-key";
	if (call(&rq, &r, 5000, md, &st) != GRPC_OK)
		return fail("%s: %s", grpc_code_name(st.code), st.msg);
	if (strcmp(r->metadata_value, "v1 value") != 0)
		rc = fail("metadata_value \"%s\"", r->metadata_value);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	if (!rc && call(&rq, &r, 5000, bad, &st) != GRPC_INVALID_ARGUMENT)
		rc = fail("invalid key accepted: %s", grpc_code_name(st.code));
	return rc;
}

static void *conc_thread(void *arg)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	Pillar__Test__V1__EchoResponse *r;
	struct grpc_status st;
	char m[16];
	long ok = 0;

	snprintf(m, sizeof(m), "%ld", (long)(intptr_t)arg);
	rq.message = m;
	rq.delay_ms = 100;
	if (call(&rq, &r, 30000, NULL, &st) == GRPC_OK) {
		ok = strcmp(r->message, m) == 0;
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	return (void *)ok;
}

static int c_concurrent(void)
{
	pthread_t t[100];
	int i, good = 0;

	for (i = 0; i < 100; i++)
		pthread_create(&t[i], NULL, conc_thread, (void *)(intptr_t)i);
	for (i = 0; i < 100; i++) {
		void *v;
		pthread_join(t[i], &v);
		good += v != NULL;
	}
	return good == 100 ? 0 : fail("%d of 100 concurrent calls succeeded", good);
}

static int c_health(void)
{
	Grpc__Health__V1__HealthCheckRequest rq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	ProtobufCMessage *r;
	struct grpc_status st;
	const char *names[] = {"", "pillar.test.v1.Echo", "pillar.test.v1.Unhealthy"};
	int wantst[] = {1, 1, 2}, i;

	for (i = 0; i < 3; i++) {
		int s;
		rq.service = (char *)names[i];
		if (grpc_channel_call(ch, "/grpc.health.v1.Health/Check", &rq.base,
		                      &grpc__health__v1__health_check_response__descriptor, &r,
		                      5000, NULL, &st) != GRPC_OK)
			return fail("%s: %s", grpc_code_name(st.code), st.msg);
		s = ((Grpc__Health__V1__HealthCheckResponse *)r)->status;
		protobuf_c_message_free_unpacked(r, NULL);
		if (s != wantst[i])
			return fail("service \"%s\": status %d", names[i], s);
	}
	rq.service = "x.Y";
	if (grpc_channel_call(ch, "/grpc.health.v1.Health/Check", &rq.base,
	                      &grpc__health__v1__health_check_response__descriptor, &r, 5000, NULL,
	                      &st) != GRPC_NOT_FOUND)
		return fail("unknown service: %s", grpc_code_name(st.code));
	return 0;
}

/* Lock of volume pvc-7 held for 5 s: its code and message. */
struct lock_call {
	int code;
	char msg[sizeof(((struct grpc_status *)0)->msg)];
};

static void *lock_thread(void *arg)
{
	struct lock_call *lc = arg;
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	ProtobufCMessage *r = NULL;
	struct grpc_status st;
	rq.message = "pvc-7";
	rq.delay_ms = 5000;
	lc->code =
	    grpc_channel_call(ch, "/pillar.test.v1.Echo/Lock", &rq.base,
	                      &pillar__test__v1__echo_response__descriptor, &r, 30000, NULL, &st);
	snprintf(lc->msg, sizeof(lc->msg), "%s", st.msg);
	if (r)
		protobuf_c_message_free_unpacked(r, NULL);
	return NULL;
}

/* Two Locks of one volume, the second sent 300 ms after the first, each holding it for 5 s:
 * they overlap whichever reaches the server first (a loaded machine may hold up either), so
 * exactly one is refused, ABORTED with the in-progress message, and the other succeeds. */
static int c_oplock(void)
{
	static const char busy[] = "an operation on volume pvc-7 is already in progress";
	struct timespec ts = {0, 300000000};
	struct lock_call a = {0}, b = {0};
	pthread_t t;

	pthread_create(&t, NULL, lock_thread, &a);
	nanosleep(&ts, NULL);
	lock_thread(&b);
	pthread_join(t, NULL);
	struct lock_call *refused = a.code == GRPC_ABORTED ? &a : &b,
	                 *held = refused == &a ? &b : &a;
	if (refused->code != GRPC_ABORTED || strcmp(refused->msg, busy) != 0)
		return fail("no lock refused: %s (%s), %s (%s)", grpc_code_name(a.code), a.msg,
		            grpc_code_name(b.code), b.msg);
	if (held->code != GRPC_OK)
		return fail("the lock that was not refused: %s (%s)", grpc_code_name(held->code),
		            held->msg);
	return 0;
}

/* ---- bench --------------------------------------------------------------------------------- */

static atomic_long next_i;
static long bench_n;
static int bench_size;
static uint64_t *lat;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void *bench_thread(void *arg)
{
	Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
	uint8_t *buf = calloc(1, (size_t)bench_size + 1);
	long i;
	(void)arg;
	rq.payload.data = buf;
	rq.payload.len = (size_t)bench_size;
	rq.response_size = bench_size;
	while ((i = atomic_fetch_add(&next_i, 1)) < bench_n) {
		Pillar__Test__V1__EchoResponse *r;
		struct grpc_status st;
		uint64_t t0 = now_us();
		if (call(&rq, &r, 10000, NULL, &st) != GRPC_OK) {
			fprintf(stderr, "bench call failed: %s %s\n", grpc_code_name(st.code),
			        st.msg);
			exit(1);
		}
		lat[i] = now_us() - t0;
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	free(buf);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int bench(long n, int conc)
{
	pthread_t t[256];
	uint64_t t0, t1;
	int i;

	bench_n = n;
	lat = calloc((size_t)n, sizeof(*lat));
	/* warm-up: connect */
	atomic_store(&next_i, n - 1);
	bench_thread(NULL);
	atomic_store(&next_i, 0);
	t0 = now_us();
	for (i = 0; i < conc && i < 256; i++)
		pthread_create(&t[i], NULL, bench_thread, NULL);
	for (i = 0; i < conc && i < 256; i++)
		pthread_join(t[i], NULL);
	t1 = now_us();
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	if (getenv("BENCH_DEBUG")) {
		long slow = 0;
		for (long k = 0; k < n; k++)
			slow += lat[k] > 20000;
		fprintf(stderr, "max_us=%llu over_20ms=%ld\n", (unsigned long long)lat[n - 1],
		        slow);
	}
	printf("p50_us=%llu p99_us=%llu rps=%.0f\n", (unsigned long long)lat[n / 2],
	       (unsigned long long)lat[n * 99 / 100], (double)n * 1e6 / (double)(t1 - t0));
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} cases[] = {
	    {"unary_ok", c_unary_ok},     {"statuses", c_statuses},   {"unknown", c_unknown},
	    {"deadline", c_deadline},     {"limit", c_limit},         {"metadata", c_metadata},
	    {"concurrent", c_concurrent}, {"health_check", c_health}, {"oplock", c_oplock},
	};
	struct grpc_channel_opts o;
	struct err e = {0};
	const char *only = NULL;
	long bn = 0;
	int conc = 1, expect_fail = 0, i;

	if (argc < 2) {
		fprintf(stderr, "usage: echo_client TARGET [options]\n");
		return 2;
	}
	grpc_channel_opts_init(&o);
	for (i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(argv[i], "--expect-fail")) {
			expect_fail = 1;
			continue;
		}
		if (!strcmp(argv[i], "--ca"))
			o.tls_ca = v;
		else if (!strcmp(argv[i], "--cert"))
			o.tls_cert = v;
		else if (!strcmp(argv[i], "--key"))
			o.tls_key = v;
		else if (!strcmp(argv[i], "--name"))
			o.server_name = v;
		else if (!strcmp(argv[i], "--cases"))
			only = v;
		else if (!strcmp(argv[i], "--bench"))
			bn = atol(v);
		else if (!strcmp(argv[i], "--conc"))
			conc = atoi(v);
		else if (!strcmp(argv[i], "--size"))
			bench_size = atoi(v);
		else {
			fprintf(stderr, "echo_client: unknown option %s\n", argv[i]);
			return 2;
		}
		i++;
	}
	if (grpc_channel_new(&ch, argv[1], &o, &e) < 0) {
		fprintf(stderr, "echo_client: %s\n", e.msg);
		return 1;
	}
	if (bn > 0) {
		bench(bn, conc);
		grpc_channel_free(ch);
		return 0;
	}
	if (expect_fail) {
		Pillar__Test__V1__EchoRequest rq = PILLAR__TEST__V1__ECHO_REQUEST__INIT;
		Pillar__Test__V1__EchoResponse *r;
		struct grpc_status st;
		int code = call(&rq, &r, 5000, NULL, &st);
		if (r)
			protobuf_c_message_free_unpacked(&r->base, NULL);
		grpc_channel_free(ch);
		if (code == GRPC_OK) {
			printf("FAIL call succeeded although it should be refused\n");
			return 1;
		}
		printf("ok   refused: %s: %s\n", grpc_code_name(code), st.msg);
		return 0;
	}
	for (i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
		if (only && !strstr(only, cases[i].name))
			continue;
		why[0] = '\0';
		if (cases[i].fn() == 0) {
			printf("ok   %s\n", cases[i].name);
		} else {
			printf("FAIL %s: %s\n", cases[i].name, why);
			failed++;
		}
		fflush(stdout);
	}
	grpc_channel_free(ch);
	return failed ? 1 : 0;
}
