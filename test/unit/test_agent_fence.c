/* Fencing marks (agent-api.md §6) and pinned identities (§8.3–§8.4): every decision rule, the
 * file-name escaping, the JSON shape and modes, corrupt records, pin precedence. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/fence.h"
#include "agent/identity.h"
#include "agent/marklog.h"
#include "base/file.h"
#include "testutil.h"

static char sd[512];
#define VOL     "tank/pvc-1"
#define MARK    "generations/tank_2Fpvc-1.mark"
#define JOURNAL "marks.journal"
#define U1      "8d0c7a9e-3f51-4b6e-9b1d-2f7c0e5a4d11"
#define U2      "11111111-3f51-4b6e-9b1d-2f7c0e5a4d11"

static void setup(void)
{
	snprintf(sd, sizeof(sd), "%s", tu_mkdtemp());
}
static void teardown(void)
{
	tu_rmtree(sd);
}

static int check(const char *uid, uint64_t gen, enum fence_class c, struct err *e)
{
	return agent_fence_check(sd, VOL, uid, gen, c, e);
}

START_TEST(test_escape)
{
	char out[64];
	ck_assert_int_eq(agent_fence_escape("tank/pvc-1", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "tank_2Fpvc-1");
	ck_assert_int_eq(agent_fence_escape("hot_data/pvc-abc", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "hot_5Fdata_2Fpvc-abc");
	ck_assert_int_eq(agent_fence_escape("a.b/\xff", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "a.b_2F_FF");
	ck_assert_int_eq(agent_fence_escape("abcdef", out, 4), -ENAMETOOLONG);
}
END_TEST

START_TEST(test_rule1_missing_token)
{
	struct err e = {0};
	ck_assert_int_eq(check("", 3, FENCE_GRANT, &e), -ESTALE);
	ck_assert_str_eq(e.msg,
	                 "stale fencing token (uid \"\", generation 3) for volume \"tank/pvc-1\": "
	                 "missing fencing token (mark uid \"\", generation 0, ended false)");
	ck_assert_int_eq(check(NULL, 0, FENCE_REVOKE, &e), -ESTALE);
	ck_assert_str_eq(tu_read(sd, MARK), ""); /* nothing written */
}
END_TEST

START_TEST(test_rule2_adopt_shape_and_modes)
{
	struct err e = {0};
	struct stat st;
	char p[PATH_MAX];
	ck_assert_int_eq(check(U1, 7, FENCE_GRANT, &e), 0);
	ck_assert_str_eq(tu_read(sd, MARK),
	                 "{\"volumeUID\":\"" U1 "\",\"generation\":7,\"ended\":false,"
	                 "\"endedUIDs\":[]}");
	snprintf(p, sizeof(p), "%s/" MARK, sd);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	snprintf(p, sizeof(p), "%s/generations", sd);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0750);
}
END_TEST

START_TEST(test_rule7_generations)
{
	struct err e = {0};
	ck_assert_int_eq(check(U1, 7, FENCE_GRANT, &e), 0);
	ck_assert_int_eq(check(U1, 7, FENCE_GRANT, &e), 0);  /* 7' */
	ck_assert_int_eq(check(U1, 9, FENCE_REVOKE, &e), 0); /* 7'' advances */
	struct fence_mark m;
	ck_assert_int_eq(agent_fence_read(sd, VOL, &m, &e), 0);
	ck_assert_uint_eq(m.generation, 9);
	agent_fence_mark_clear(&m);
	ck_assert_int_eq(check(U1, 8, FENCE_GRANT, &e), -ESTALE); /* 7 */
	ck_assert_str_eq(e.msg, "stale fencing token (uid \"" U1 "\", generation 8) for volume "
	                        "\"tank/pvc-1\": generation is older than the mark (mark uid \"" U1
	                        "\", generation 9, ended false)");
	ck_assert(strncmp(e.msg, "stale fencing token", 19) == 0);
}
END_TEST

START_TEST(test_rule4_other_lifecycle)
{
	struct err e = {0};
	ck_assert_int_eq(check(U1, 1, FENCE_GRANT, &e), 0);
	ck_assert_int_eq(check(U2, 5, FENCE_GRANT, &e), -ESTALE);
	ck_assert_ptr_nonnull(strstr(e.msg, ": volume is owned by another lifecycle (mark uid"));
}
END_TEST

START_TEST(test_rules_5_6_8_lifecycle_end)
{
	struct err e = {0};
	ck_assert_int_eq(check(U1, 4, FENCE_GRANT, &e), 0);
	ck_assert_int_eq(check(U1, 4, FENCE_DESTROY, &e), 0);
	ck_assert_int_eq(agent_fence_end(sd, VOL, &e), 0); /* rule 8 */
	ck_assert_str_eq(tu_read(sd, MARK),
	                 "{\"volumeUID\":\"" U1 "\",\"generation\":4,\"ended\":true,"
	                 "\"endedUIDs\":[]}");
	/* rule 6: retry of the final delete at exactly the mark's generation proceeds */
	ck_assert_int_eq(check(U1, 4, FENCE_DESTROY, &e), 0);
	ck_assert_int_eq(check(U1, 4, FENCE_REVOKE, &e), 0);
	ck_assert_int_eq(check(U1, 4, FENCE_GRANT, &e), -ESTALE);
	ck_assert_ptr_nonnull(strstr(e.msg, "lifecycle already ended (mark uid"));
	ck_assert_ptr_nonnull(strstr(e.msg, "ended true)"));
	ck_assert_int_eq(check(U1, 5, FENCE_DESTROY, &e), -ESTALE);
	/* rule 5: a new lifecycle takes over */
	ck_assert_int_eq(check(U2, 1, FENCE_GRANT, &e), 0);
	ck_assert_str_eq(tu_read(sd, MARK),
	                 "{\"volumeUID\":\"" U2 "\",\"generation\":1,\"ended\":false,"
	                 "\"endedUIDs\":[\"" U1 "\"]}");
	/* rule 3: an ended lifecycle is never accepted again */
	ck_assert_int_eq(check(U1, 99, FENCE_REVOKE, &e), -ESTALE);
	ck_assert_ptr_nonnull(strstr(e.msg, "lifecycle already ended"));
}
END_TEST

/* A CreateVolume's mark records the size of the file image it makes (imageBytes), in the one
 * write of the decision: rewrites keep it, the lifecycle's end drops it, a new lifecycle
 * replaces it; a mark without it (every mark an earlier agent wrote) reads and decides as
 * before, and records nothing until the agent writes it again. */
START_TEST(test_mark_records_image_size)
{
	struct err e = {0};
	struct fence_mark m;
	bool rec = true, wrote = true;
	const char *with = "{\"volumeUID\":\"" U1 "\",\"generation\":3,\"ended\":false,"
	                   "\"endedUIDs\":[],\"imageBytes\":1048576}";
	ck_assert_int_eq(agent_fence_check_create(sd, VOL, U1, 3, 1 << 20, &rec, &wrote, &e), 0);
	ck_assert(rec && wrote);
	ck_assert_str_eq(tu_read(sd, MARK), with);
	ck_assert_int_eq(agent_fence_read(sd, VOL, &m, &e), 0);
	ck_assert_int_eq(m.image_bytes, 1 << 20);
	agent_fence_mark_clear(&m);
	/* 7': the retry of the same create finds its size recorded (by the earlier write: its
	 * journal entry may be retired); another size is not */
	ck_assert_int_eq(agent_fence_check_create(sd, VOL, U1, 3, 1 << 20, &rec, &wrote, &e), 0);
	ck_assert(rec && !wrote);
	ck_assert_int_eq(agent_fence_check_create(sd, VOL, U1, 3, 2 << 20, &rec, &wrote, &e), 0);
	ck_assert(!rec);
	ck_assert_str_eq(tu_read(sd, MARK), with);
	/* a refused create records nothing */
	ck_assert_int_eq(agent_fence_check_create(sd, VOL, U2, 9, 1 << 20, &rec, &wrote, &e),
	                 -ESTALE);
	ck_assert(!rec);
	/* 7'' of another call keeps it */
	ck_assert_int_eq(check(U1, 4, FENCE_GRANT, &e), 0);
	ck_assert_str_eq(tu_read(sd, MARK),
	                 "{\"volumeUID\":\"" U1 "\",\"generation\":4,\"ended\":false,"
	                 "\"endedUIDs\":[],\"imageBytes\":1048576}");
	/* rule 8 drops it with the image */
	ck_assert_int_eq(agent_fence_end(sd, VOL, &e), 0);
	ck_assert_str_eq(tu_read(sd, MARK),
	                 "{\"volumeUID\":\"" U1 "\",\"generation\":4,\"ended\":true,"
	                 "\"endedUIDs\":[]}");
	/* rule 5: the new lifecycle's own size */
	ck_assert_int_eq(agent_fence_check_create(sd, VOL, U2, 1, 4096, &rec, &wrote, &e), 0);
	ck_assert(rec && wrote);
	ck_assert_str_eq(tu_read(sd, MARK),
	                 "{\"volumeUID\":\"" U2 "\",\"generation\":1,\"ended\":false,"
	                 "\"endedUIDs\":[\"" U1 "\"],\"imageBytes\":4096}");
	/* an earlier agent's mark: read as before; a create at its generation records nothing,
	 * one that advances it records its size */
	tu_write(sd, MARK,
	         "{\"volumeUID\":\"" U1 "\",\"generation\":7,\"ended\":false,\"endedUIDs\":[]}");
	ck_assert_int_eq(agent_fence_read(sd, VOL, &m, &e), 0);
	ck_assert_int_eq(m.image_bytes, 0);
	ck_assert_uint_eq(m.generation, 7);
	agent_fence_mark_clear(&m);
	ck_assert_int_eq(agent_fence_check_create(sd, VOL, U1, 7, 1 << 20, &rec, &wrote, &e), 0);
	ck_assert(!rec && !wrote);
	ck_assert_int_eq(agent_fence_check_create(sd, VOL, U1, 8, 1 << 20, &rec, &wrote, &e), 0);
	ck_assert(rec && wrote);
	ck_assert_str_eq(tu_read(sd, MARK),
	                 "{\"volumeUID\":\"" U1 "\",\"generation\":8,\"ended\":false,"
	                 "\"endedUIDs\":[],\"imageBytes\":1048576}");
}
END_TEST

START_TEST(test_corrupt_marks)
{
	static const char *const bad[] = {
	    "", "{", "{\"volumeUID\":\"" U1 "\",\"generation\":7,\"ended\":false}",
	    "{\"volumeUID\":\"" U1 "\",\"generation\":1.5,\"ended\":false,\"endedUIDs\":[]}",
	    "{\"volumeUID\":\"" U1 "\",\"generation\":-1,\"ended\":false,\"endedUIDs\":[]}",
	    "{\"volumeUID\":\"" U1
	    "\",\"generation\":9007199254740994,\"ended\":false,\"endedUIDs\":[]}",
	    "{\"volumeUID\":\"" U1 "\",\"generation\":\"7\",\"ended\":false,\"endedUIDs\":[]}",
	    "{\"volumeUID\":\"\",\"generation\":7,\"ended\":false,\"endedUIDs\":[]}", "[]",
	    "{\"volumeUID\":\"" U1 "\",\"generation\":7,\"ended\":0,\"endedUIDs\":[]}",
	    "{\"volumeUID\":\"" U1 "\",\"generation\":7,\"ended\":false,\"endedUIDs\":[1]}",
	    /* a UID never holds a control character, raw (invalid JSON) or escaped */
	    "{\"volumeUID\":\"" U1 "\\n\",\"generation\":7,\"ended\":false,\"endedUIDs\":[]}",
	    "{\"volumeUID\":\"" U1 "\x01\",\"generation\":7,\"ended\":false,\"endedUIDs\":[]}",
	    "{\"volumeUID\":\"" U1
	    "\",\"generation\":7,\"ended\":false,\"endedUIDs\":[\"a\\u0007\"]}",
	    /* imageBytes, when present, is a size: 1..2^53 */
	    "{\"volumeUID\":\"" U1
	    "\",\"generation\":7,\"ended\":false,\"endedUIDs\":[],\"imageBytes\":0}",
	    "{\"volumeUID\":\"" U1
	    "\",\"generation\":7,\"ended\":false,\"endedUIDs\":[],\"imageBytes\":-4096}",
	    "{\"volumeUID\":\"" U1 "\",\"generation\":7,\"ended\":false,\"endedUIDs\":[],"
	    "\"imageBytes\":9007199254740994}",
	    "{\"volumeUID\":\"" U1
	    "\",\"generation\":7,\"ended\":false,\"endedUIDs\":[],\"imageBytes\":\"1M\"}"};
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "corrupt fencing mark %s/" MARK ": ", sd);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct err e = {0};
		tu_write(sd, MARK, bad[i]);
		ck_assert_msg(check(U1, 7, FENCE_GRANT, &e) == -EBADMSG, "case %zu", i);
		ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "case %zu: %s", i, e.msg);
		ck_assert_str_eq(tu_read(sd, MARK), bad[i]); /* never overwritten */
	}
	/* 2^53 itself is fine */
	tu_write(sd, MARK,
	         "{\"volumeUID\":\"" U1 "\",\"generation\":9007199254740992,\"ended\":false,"
	         "\"endedUIDs\":[]}");
	ck_assert_int_eq(check(U1, UINT64_C(9007199254740992), FENCE_GRANT, NULL), 0);
}
END_TEST

/* ---- fsyncs: what a mark or a pin write makes durable ---------------------------------------- */

static char synced[8][PATH_MAX]; /* the paths fsync'd since expect_fsyncs last ran */
static int n_synced;

static void record_fsync(const char *path)
{
	if (n_synced < 8)
		snprintf(synced[n_synced], sizeof(synced[0]), "%s", path);
	n_synced++;
}

/* Asserts the fsyncs since the last call, by path relative to sd ("" for sd itself). */
static void expect_fsyncs(int line, int n, ...)
{
	va_list ap;
	va_start(ap, n);
	ck_assert_msg(n_synced == n, "line %d: %d fsyncs, want %d", line, n_synced, n);
	for (int i = 0; i < n; i++) {
		char want[PATH_MAX];
		const char *rel = va_arg(ap, const char *);
		snprintf(want, sizeof(want), "%s%s%s", sd, *rel ? "/" : "", rel);
		ck_assert_msg(strcmp(synced[i], want) == 0, "line %d: fsync %d is %s, want %s",
		              line, i, synced[i], want);
	}
	va_end(ap);
	n_synced = 0;
}

/* A mark is one entry of the marks' journal (one fdatasync, marklog.h) and its file, not
 * fsync'd; the state directory (whose entry generations/ is) before the first mark and
 * whenever generations/ was created again, not after every mark. */
START_TEST(test_mark_fsyncs)
{
	char p[PATH_MAX];
	ck_assert_int_eq(agent_marklog_open(sd, NULL), 0); /* journal and generations/ durable */
	file_fsync_observer = record_fsync;
	ck_assert_int_eq(check(U1, 1, FENCE_GRANT, NULL), 0);
	expect_fsyncs(__LINE__, 1, JOURNAL);
	ck_assert_int_eq(check(U1, 2, FENCE_GRANT, NULL), 0);
	expect_fsyncs(__LINE__, 1, JOURNAL);
	ck_assert_int_eq(check(U1, 2, FENCE_GRANT, NULL), 0); /* 7': nothing written */
	expect_fsyncs(__LINE__, 0);
	snprintf(p, sizeof(p), "%s/generations", sd);
	tu_rmtree(p); /* made anew: durable in the state directory again */
	ck_assert_int_eq(check(U1, 3, FENCE_GRANT, NULL), 0);
	expect_fsyncs(__LINE__, 2, "", JOURNAL);
	ck_assert_int_eq(agent_fence_end(sd, VOL, NULL), 0);
	expect_fsyncs(__LINE__, 1, JOURNAL);
	/* a checkpoint: one syncfs of the state directory's file system (the journal's header
	 * writes ride on it and on the appends' fdatasyncs: none of their own) */
	agent_marklog_close(true);
	expect_fsyncs(__LINE__, 1, "");
	file_fsync_observer = NULL;
}
END_TEST

/* After a power cut the journal puts back what the acknowledged marks were: a mark file lost,
 * one left empty, one of an older content; replayed when the journal is opened, before any
 * mark is read.  After a checkpoint the files are durable and nothing is replayed. */
START_TEST(test_marks_replayed_after_power_cut)
{
	struct err e = {0};
	const char *m1 = "{\"volumeUID\":\"" U1 "\",\"generation\":5,\"ended\":false,"
	                 "\"endedUIDs\":[]}";
	ck_assert_int_eq(check(U1, 4, FENCE_GRANT, &e), 0);
	ck_assert_int_eq(check(U1, 5, FENCE_GRANT, &e), 0);
	ck_assert_int_eq(agent_fence_check(sd, "tank/pvc-2", U2, 1, FENCE_GRANT, &e), 0);
	ck_assert_int_eq(agent_fence_check(sd, "tank/pvc-3", U2, 1, FENCE_GRANT, &e), 0);
	agent_marklog_close(false); /* the power goes: the files were never fsync'd */
	tu_write(sd, MARK,
	         "{\"volumeUID\":\"" U1 "\",\"generation\":4,\"ended\":false,\"endedUIDs\":[]}");
	tu_write(sd, "generations/tank_2Fpvc-2.mark", "");
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/generations/tank_2Fpvc-3.mark", sd);
	ck_assert_int_eq(unlink(p), 0);
	struct fence_mark m;
	ck_assert_int_eq(agent_fence_read(sd, VOL, &m, &e), 0); /* opens: replayed first */
	ck_assert_uint_eq(m.generation, 5);
	agent_fence_mark_clear(&m);
	ck_assert_str_eq(tu_read(sd, MARK), m1);
	ck_assert_int_eq(agent_fence_check(sd, "tank/pvc-2", U2, 1, FENCE_GRANT, &e), 0);
	ck_assert_int_eq(agent_fence_check(sd, "tank/pvc-3", U1, 1, FENCE_GRANT, &e), -ESTALE);
	/* retired by the checkpoint: a file changed afterwards stays as it is */
	agent_marklog_close(true);
	tu_write(sd, MARK,
	         "{\"volumeUID\":\"" U1 "\",\"generation\":9,\"ended\":false,\"endedUIDs\":[]}");
	ck_assert_int_eq(agent_fence_read(sd, VOL, &m, &e), 0);
	ck_assert_uint_eq(m.generation, 9);
	agent_fence_mark_clear(&m);
}
END_TEST

/* Group commit of marks: marks of different volumes written at the same time share the
 * journal's fdatasync.  The first fdatasync waits until the other marks wait for the next
 * batch, which then holds all of them. */
#define MARKERS 8
static atomic_int journal_syncs;

static int marks_in_place(void)
{
	char p[PATH_MAX];
	int n = 0;
	for (int i = 0; i < MARKERS; i++) {
		snprintf(p, sizeof(p), "%s/generations/tank_2Fpvc-c%d.mark", sd, i);
		n += access(p, F_OK) == 0;
	}
	return n;
}

static void count_fsync(const char *path)
{
	size_t n = strlen(path), g = strlen("/" JOURNAL);
	if (n < g || strcmp(path + n - g, "/" JOURNAL) != 0)
		return;
	if (atomic_fetch_add(&journal_syncs, 1) == 0) /* generous: the machine may be loaded */
		for (int i = 0; i < 20000 && agent_marklog_waiting() < MARKERS - 1; i++)
			usleep(1000);
}

static void *marker(void *arg)
{
	char vol[64];
	snprintf(vol, sizeof(vol), "tank/pvc-c%d", (int)(intptr_t)arg);
	return (void *)(intptr_t)agent_fence_check(sd, vol, U1, 1, FENCE_GRANT, NULL);
}

START_TEST(test_marks_share_journal_sync)
{
	pthread_t t[MARKERS];
	ck_assert_int_eq(check(U1, 1, FENCE_GRANT, NULL), 0); /* generations/ durable already */
	file_fsync_observer = count_fsync;
	for (int i = 0; i < MARKERS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, marker, (void *)(intptr_t)i), 0);
	for (int i = 0; i < MARKERS; i++) {
		void *r;
		pthread_join(t[i], &r);
		ck_assert_int_eq((int)(intptr_t)r, 0);
	}
	file_fsync_observer = NULL;
	/* 8 without group commit: the first mark's batch, then one of the other seven */
	ck_assert_int_le(atomic_load(&journal_syncs), 2);
	ck_assert_int_eq(marks_in_place(), MARKERS);
	for (int i = 0; i < MARKERS; i++) { /* each mark whole, its own */
		char vol[64];
		struct fence_mark m;
		snprintf(vol, sizeof(vol), "tank/pvc-c%d", i);
		ck_assert_int_eq(agent_fence_read(sd, vol, &m, NULL), 0);
		ck_assert_str_eq(m.uid, U1);
		agent_fence_mark_clear(&m);
	}
}
END_TEST

/* ---- identity pins ------------------------------------------------------------------------- */

#define NQN "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-1"
#define PIN "nvmet-identity/tank_2Fpvc-1.json"

START_TEST(test_pin_precedence)
{
	struct rules_ns_identity id, derived,
	    odd = {.uuid = "11111111-2222-4333-8444-555555555555",
	           .nguid = "66666666-2222-4333-8444-555555555555",
	           .serial = "0123456789abcdef"};
	struct err e = {0};
	rules_ns_identity_derive(NQN, &derived);
	/* no record: derived */
	ck_assert_int_eq(agent_identity_start(sd, VOL, U1, NQN, &id, &e), 0);
	ck_assert(rules_ns_identity_equal(&id, &derived));
	/* a live identity that is not the derived one is pinned ... */
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U1, NQN, &odd, &e), 0);
	ck_assert_str_eq(tu_read(sd, PIN), "{\"volumeUID\":\"" U1 "\",\"identity\":{\"uuid\":"
	                                   "\"11111111-2222-4333-8444-555555555555\",\"nguid\":"
	                                   "\"66666666-2222-4333-8444-555555555555\",\"serial\":"
	                                   "\"0123456789abcdef\"}}");
	/* ... and reproduced on the next re-creation */
	ck_assert_int_eq(agent_identity_start(sd, VOL, U1, NQN, &id, &e), 0);
	ck_assert(rules_ns_identity_equal(&id, &odd));
	/* another lifecycle's record is deleted and ignored */
	ck_assert_int_eq(agent_identity_start(sd, VOL, U2, NQN, &id, &e), 0);
	ck_assert(rules_ns_identity_equal(&id, &derived));
	ck_assert_str_eq(tu_read(sd, PIN), "");
	/* settling on the derived identity removes any record */
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U1, NQN, &odd, &e), 0);
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U1, NQN, &derived, &e), 0);
	ck_assert_str_eq(tu_read(sd, PIN), "");
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U1, NQN, &odd, &e), 0);
	ck_assert_int_eq(agent_identity_forget(sd, VOL, &e), 0);
	ck_assert_str_eq(tu_read(sd, PIN), "");
	ck_assert_int_eq(agent_identity_forget(sd, VOL, &e), 0); /* missing = OK */
}
END_TEST

/* §8.3: a pin as a mark; nvmet-identity/ made durable in the state directory once. */
START_TEST(test_pin_fsyncs)
{
	struct rules_ns_identity odd = {.uuid = "11111111-2222-4333-8444-555555555555",
	                                .nguid = "66666666-2222-4333-8444-555555555555",
	                                .serial = "0123456789abcdef"};
	char p[PATH_MAX];
	file_fsync_observer = record_fsync;
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U1, NQN, &odd, NULL), 0);
	expect_fsyncs(__LINE__, 3, "", PIN, "nvmet-identity");
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U1, NQN, &odd, NULL), 0);
	expect_fsyncs(__LINE__, 2, PIN, "nvmet-identity");
	snprintf(p, sizeof(p), "%s/nvmet-identity", sd);
	tu_rmtree(p);
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U1, NQN, &odd, NULL), 0);
	expect_fsyncs(__LINE__, 3, "", PIN, "nvmet-identity");
	file_fsync_observer = NULL;
}
END_TEST

START_TEST(test_pin_corrupt)
{
	struct rules_ns_identity id;
	struct err e = {0};
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "corrupt identity record %s/" PIN ": ", sd);
	tu_write(sd, PIN, "{\"volumeUID\":\"" U1 "\",\"identity\":{\"uuid\":\"nope\"}}");
	ck_assert_int_eq(agent_identity_start(sd, VOL, U1, NQN, &id, &e), -EBADMSG);
	ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
	tu_write(sd, PIN, "{\"volumeUID\":");
	ck_assert_int_eq(agent_identity_start(sd, VOL, U1, NQN, &id, &e), -EBADMSG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_fence");
	TCase *t = tcase_create("fence");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_escape);
	tcase_add_test(t, test_rule1_missing_token);
	tcase_add_test(t, test_rule2_adopt_shape_and_modes);
	tcase_add_test(t, test_rule7_generations);
	tcase_add_test(t, test_rule4_other_lifecycle);
	tcase_add_test(t, test_rules_5_6_8_lifecycle_end);
	tcase_add_test(t, test_mark_records_image_size);
	tcase_add_test(t, test_corrupt_marks);
	tcase_add_test(t, test_mark_fsyncs);
	tcase_add_test(t, test_marks_share_journal_sync);
	tcase_add_test(t, test_marks_replayed_after_power_cut);
	tcase_add_test(t, test_pin_fsyncs);
	tcase_add_test(t, test_pin_precedence);
	tcase_add_test(t, test_pin_corrupt);
	suite_add_tcase(s, t);
	return tu_run(s);
}
