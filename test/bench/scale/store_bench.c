/* store_bench — the embedded store's cost per operation with N objects stored.
 *
 *   store_bench DIR N REPS
 *
 * Writes N PillarVolumeState files (about 1 KiB each, the controller's shape) straight into a
 * fresh store directory DIR (the setup is not measured), opens the store as the controller does
 * (owner, one watch on the kind), then REPS times: K creates (deleted again afterwards so that N
 * holds), K updates, K status updates, K gets of objects spread over the store, and one list of
 * the kind.  Prints one line: the median per-operation wall microseconds of each (list: per
 * object) with the spread (min-max) over the REPS runs and the median CPU microseconds (on a
 * loaded machine the CPU figure is the steadier one), and the number of writes made, so that
 * `strace -c` of a run gives the fsyncs per write.  The open and the list are timed up to
 * malloc_trim(0): glibc defers the consolidation of the many small blocks they free to the next
 * large allocation, which would otherwise bill it to the following creates.  Exit status 1 on any failed operation. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#define K      50
#define MAXREP 9
#define KINDP  "pillarvolumestates"

static double clock_us(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double now_us(void)
{
	return clock_us(CLOCK_MONOTONIC);
}

/* Wall and CPU (the whole process: the notification thread's share included) microseconds. */
struct stamp {
	double w, c;
};

static struct stamp stamp(void)
{
	return (struct stamp){now_us(), clock_us(CLOCK_PROCESS_CPUTIME_ID)};
}

/* Adds the time since s0 to acc[0] (wall) and acc[1] (CPU). */
static void lap(double acc[2], struct stamp s0)
{
	struct stamp s1 = stamp();
	acc[0] += s1.w - s0.w;
	acc[1] += s1.c - s0.c;
}

static const char *const body =
    "\"spec\":{\"volumeId\":\"tank/%s\",\"agent\":\"storage-1\",\"pool\":\"tank\","
    "\"capacityBytes\":10737418240,\"backend\":{\"type\":\"zfs-zvol\",\"zfs\":{\"pool\":\"tank\","
    "\"volblocksize\":\"16K\",\"compression\":\"lz4\"}},\"export\":{\"protocol\":\"nvmeof-tcp\","
    "\"bindAddress\":\"10.0.0.5\",\"port\":4420,\"acl\":true},\"publications\":[{\"node\":"
    "\"worker-7\",\"hostNQN\":\"nqn.2014-08.org.nvmexpress:uuid:5b7c2f3e-1d2a-4c5b-9e8f-"
    "0a1b2c3d4e5f\",\"readOnly\":false}],\"fence\":{\"volumeUID\":\"7f3e9a2c-5b1d-4e8f-a6c0-"
    "d2b4f8e1a3c7\",\"generation\":3}},\"status\":{\"phase\":\"Published\",\"observedGeneration\":"
    "3,\"conditions\":[{\"type\":\"Exported\",\"status\":\"True\",\"reason\":\"Exported\","
    "\"message\":\"exported on 10.0.0.5:4420\",\"lastTransitionTime\":\"2026-12-03T10:00:00Z\"},"
    "{\"type\":\"Published\",\"status\":\"True\",\"reason\":\"Published\",\"message\":\"worker-7 "
    "admitted\",\"lastTransitionTime\":\"2026-12-03T10:00:01Z\"}]}";

static cJSON *object(const char *name)
{
	char text[2048], b[1600];
	snprintf(b, sizeof(b), body, name);
	snprintf(text, sizeof(text),
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\","
	         "\"metadata\":{\"name\":\"%s\"},%s}",
	         name, b);
	return cJSON_Parse(text);
}

/* The N objects as files, as a store with that history leaves them. */
static int seed(const char *dir, size_t n)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/" KINDP, dir);
	if (mkdir(dir, 0755) < 0 || mkdir(p, 0755) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "pvc-%06zu", i);
		cJSON *o = object(name);
		cJSON *m = cJSON_GetObjectItem(o, "metadata");
		char rv[24];
		snprintf(rv, sizeof(rv), "%zu", i + 1);
		cJSON_AddStringToObject(m, "uid", "00000000-0000-4000-8000-000000000000");
		cJSON_AddStringToObject(m, "resourceVersion", rv);
		cJSON_AddNumberToObject(m, "generation", 1);
		cJSON_AddStringToObject(m, "creationTimestamp", "2026-12-03T10:00:00Z");
		char *text = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		snprintf(p, sizeof(p), "%s/" KINDP "/%s.json", dir, name);
		FILE *f = fopen(p, "w");
		if (!f || !text || fputs(text, f) < 0 || fclose(f) != 0) {
			free(text);
			return -1;
		}
		free(text);
	}
	snprintf(p, sizeof(p), "%s/resourceversion", dir);
	FILE *f = fopen(p, "w");
	if (!f || fprintf(f, "%zu\n", n) < 0 || fclose(f) != 0)
		return -1;
	sync();
	return 0;
}

static int fail(const char *what, struct err *e)
{
	fprintf(stderr, "store_bench: %s: %s\n", what, e->msg);
	return -1;
}

/* One repetition; t[m] receives wall and CPU of create, update, status, get (us/op) and list
 * (us/object). */
static int rep(store *st, size_t n, int r, double t[5][2], long *writes)
{
	const struct store_kind *k = store_kind_lookup("pvst");
	struct err e = {0};
	char name[32];
	struct stamp t0 = stamp();
	memset(t, 0, 5 * sizeof(t[0]));
	for (int i = 0; i < K; i++) {
		snprintf(name, sizeof(name), "new-%d-%d", r, i);
		cJSON *o = object(name), *out = NULL;
		int rc = store_create(st, o, &out, &e);
		cJSON_Delete(o);
		cJSON_Delete(out);
		if (rc < 0)
			return fail("create", &e);
	}
	lap(t[0], t0);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < K; i++) {
			cJSON *cur = NULL, *out = NULL;
			snprintf(name, sizeof(name), "new-%d-%d", r, i);
			if (n > 0)
				snprintf(name, sizeof(name), "pvc-%06zu",
				         ((size_t)i * 7919 + r) % n);
			if (store_get(st, k, NULL, name, &cur, &e) < 0)
				return fail("get", &e);
			cJSON *spec = cJSON_GetObjectItem(cur, pass ? "status" : "spec");
			cJSON_DeleteItemFromObject(spec, "bench");
			cJSON_AddNumberToObject(spec, "bench", r * K + i);
			struct stamp s0 = stamp();
			int rc = pass ? store_update_status(st, cur, &out, &e)
			              : store_update(st, cur, &out, &e);
			lap(t[1 + pass], s0);
			cJSON_Delete(cur);
			cJSON_Delete(out);
			if (rc < 0)
				return fail(pass ? "update status" : "update", &e);
		}
	}
	t0 = stamp();
	for (int i = 0; i < K; i++) {
		cJSON *cur = NULL;
		snprintf(name, sizeof(name), "new-%d-%d", r, i);
		if (n > 0)
			snprintf(name, sizeof(name), "pvc-%06zu", ((size_t)i * 104729 + r) % n);
		if (store_get(st, k, NULL, name, &cur, &e) < 0)
			return fail("get", &e);
		cJSON_Delete(cur);
	}
	lap(t[3], t0);
	for (int m = 0; m < 4; m++)
		t[m][0] /= K, t[m][1] /= K;
	cJSON *items = NULL;
	t0 = stamp();
	if (store_list(st, k, NULL, NULL, &items, NULL, &e) < 0)
		return fail("list", &e);
	int nitems = cJSON_GetArraySize(items);
	cJSON_Delete(items);
	malloc_trim(0); /* the list's freed nodes, which the next large malloc would consolidate */
	lap(t[4], t0);
	t[4][0] /= nitems;
	t[4][1] /= nitems;
	for (int i = 0; i < K; i++) {
		snprintf(name, sizeof(name), "new-%d-%d", r, i);
		if (store_delete(st, k, NULL, name, NULL, NULL, &e) < 0)
			return fail("delete", &e);
	}
	*writes += 4 * K;
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct err e = {0};
	store *st = NULL;
	store_watch *w = NULL;
	double t[MAXREP][5][2];
	long writes = 0;
	struct statfs sf;
	if (argc != 4) {
		fprintf(stderr, "usage: store_bench DIR N REPS\n");
		return 2;
	}
	size_t n = strtoul(argv[2], NULL, 10);
	int reps = atoi(argv[3]);
	if (reps < 1 || reps > MAXREP || seed(argv[1], n) < 0) {
		fprintf(stderr, "store_bench: cannot seed %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	double o0 = now_us();
	if (store_dir_open(argv[1], true, 0, &st, &e) < 0 ||
	    store_watch_open(st, store_kind_lookup("pvst"), 0, &w, &e) < 0)
		return fail("open", &e) < 0;
	malloc_trim(0); /* likewise for the index build */
	double open_ms = (now_us() - o0) / 1000;
	for (int r = 0; r < reps; r++)
		if (rep(st, n, r, t[r], &writes) < 0)
			return 1;
	store_watch_close(w);
	store_close(st);
	const char *fs = statfs(argv[1], &sf) == 0 && sf.f_type == 0x01021994 ? "tmpfs" : "disk";
	printf("store n=%-6zu %-5s open %.1f ms |", n, fs, open_ms);
	static const char *const names[] = {"create", "update", "status", "get", "list/obj"};
	for (int m = 0; m < 5; m++) {
		double v[MAXREP], c[MAXREP];
		for (int r = 0; r < reps; r++)
			v[r] = t[r][m][0], c[r] = t[r][m][1];
		qsort(v, (size_t)reps, sizeof(v[0]), cmp_d);
		qsort(c, (size_t)reps, sizeof(c[0]), cmp_d);
		printf(" %s %.1f us (%.1f-%.1f) cpu %.1f%s", names[m], v[reps / 2], v[0],
		       v[reps - 1], c[reps / 2], m < 4 ? " |" : "");
	}
	printf(" | writes=%ld\n", writes);
	return 0;
}
