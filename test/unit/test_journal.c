/* Unit tests of src/base/journal: append and replay, torn tails, corruption, checkpoints,
 * region reuse, group commit, a second process's view and lazy entries. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/file.h"
#include "base/journal.h"
#include "testutil.h"

static const char *dir;
static char path[512];

static void setup(void)
{
	dir = tu_mkdtemp();
	snprintf(path, sizeof(path), "%s/journal", dir);
}

static void teardown(void)
{
	file_fsync_observer = NULL;
	tu_rmtree(dir);
}

/* What a replay handed over: "seq:tag:name=data" lines. */
struct seen {
	char text[65536];
	int n, fail_at;
};

static int collect(void *arg, uint64_t seq, const struct journal_entry *en, struct err *e)
{
	struct seen *s = arg;
	if (s->fail_at && s->n + 1 == s->fail_at)
		return err_set(e, -EIO, "stopped at entry %d", s->n + 1);
	size_t at = strlen(s->text);
	snprintf(s->text + at, sizeof(s->text) - at, "%llu:%u:%s=%.*s\n", (unsigned long long)seq,
	         en->tag, en->name, (int)en->len, en->data ? (const char *)en->data : "");
	s->n++;
	return 0;
}

static const char *replayed(journal *j, uint64_t after)
{
	static struct seen s;
	struct err e = {0};
	memset(&s, 0, sizeof(s));
	ck_assert_msg(journal_replay(j, after, collect, &s, &e) == 0, "%s", e.msg);
	return s.text;
}

static void put(journal *j, const char *name, const char *data, uint64_t want_seq)
{
	struct journal_entry en = {1, name, data, strlen(data)};
	struct err e = {0};
	uint64_t seq = 0;
	ck_assert_msg(journal_append(j, &en, 1, &seq, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(seq, want_seq);
}

static journal *open_ok(size_t region)
{
	journal *j = NULL;
	struct err e = {0};
	ck_assert_msg(journal_open(path, region, 0644, &j, &e) == 0, "%s", e.msg);
	return j;
}

/* A new journal of one batch per entry "name=data" (tag 1), sequences 1, 2, … in the order
 * given (the list ends with NULL), closed. */
static void journal_of(const char *const *entries)
{
	char name[64];
	journal *j = open_ok(0);
	for (uint64_t seq = 1; entries[seq - 1]; seq++) {
		const char *eq = strchr(entries[seq - 1], '=');
		ck_assert(eq && eq - entries[seq - 1] < (ptrdiff_t)sizeof(name));
		snprintf(name, sizeof(name), "%.*s", (int)(eq - entries[seq - 1]),
		         entries[seq - 1]);
		put(j, name, eq + 1, seq);
	}
	journal_close(j);
}

static void poke(off_t off, const void *bytes, size_t len)
{
	int fd = open(path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, bytes, len, off), (ssize_t)len);
	close(fd);
}

static int sync_count;
static int count_sync(void *arg, struct err *e)
{
	(void)arg;
	(void)e;
	sync_count++;
	return 0;
}

START_TEST(test_append_replay_in_order)
{
	journal *j = open_ok(0);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 2 * JOURNAL_REGION_DEFAULT);
	ck_assert_int_ge(st.st_blocks * 512, st.st_size); /* written, not sparse */
	ck_assert(!journal_pending(j));
	put(j, "a", "one", 1);
	struct journal_entry two[] = {{2, "b", NULL, 0}, {1, "c", "three", 5}};
	uint64_t seq;
	ck_assert_int_eq(journal_append(j, two, 2, &seq, NULL), 0);
	ck_assert_uint_eq(seq, 2);
	journal_close(j);
	j = open_ok(0);
	ck_assert(journal_pending(j));
	ck_assert_uint_eq(journal_last_seq(j), 2);
	ck_assert_str_eq(replayed(j, 0), "1:1:a=one\n2:2:b=\n2:1:c=three\n");
	ck_assert_str_eq(replayed(j, 1), "2:2:b=\n2:1:c=three\n");
	put(j, "d", "four", 3);
	journal_close(j);
}
END_TEST

START_TEST(test_bad_arguments)
{
	journal *j = NULL;
	struct err e = {0};
	ck_assert_int_eq(journal_open(path, 5000, 0644, &j, &e), -EINVAL);
	ck_assert_int_eq(journal_open(path, JOURNAL_BLOCK, 0644, &j, &e), -EINVAL);
	tu_write(dir, "journal", "not a journal\n");
	ck_assert_int_eq(journal_open(path, 0, 0644, &j, &e), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(e.msg, path));
	unlink(path);
	j = open_ok(JOURNAL_REGION_MIN);
	struct journal_entry noname = {1, "", "x", 1};
	ck_assert_int_eq(journal_append(j, &noname, 1, NULL, NULL), -EINVAL);
	ck_assert_int_eq(journal_append(j, NULL, 0, NULL, NULL), -EINVAL);
	static char big[JOURNAL_REGION_MIN];
	memset(big, 'x', sizeof(big) - 1);
	struct journal_entry huge = {1, "big", big, sizeof(big) - 1};
	ck_assert_int_eq(journal_append(j, &huge, 1, NULL, &e), JOURNAL_FULL);
	ck_assert_uint_eq(journal_last_seq(j), 0);
	journal_close(j);
}
END_TEST

/* The last batch torn (its payload's second block never written): dropped, and the next
 * append takes its place. */
START_TEST(test_torn_tail_dropped)
{
	static char big[6000] = "big=";
	memset(big + 4, 'b', sizeof(big) - 5);
	journal_of((const char *const[]){"a=one", "b=two", big, NULL}); /* big: blocks 3 and 4 */
	static const char zeros[JOURNAL_BLOCK];
	poke(4 * JOURNAL_BLOCK, zeros, sizeof(zeros));
	journal *j = open_ok(0);
	ck_assert_uint_eq(journal_last_seq(j), 2);
	ck_assert_str_eq(replayed(j, 0), "1:1:a=one\n2:1:b=two\n");
	put(j, "c", "three", 3);
	journal_close(j);
	j = open_ok(0);
	ck_assert_str_eq(replayed(j, 0), "1:1:a=one\n2:1:b=two\n3:1:c=three\n");
	journal_close(j);
	/* a torn header (the batch's first bytes): the same */
	poke(3 * JOURNAL_BLOCK + 3, "\xff", 1);
	j = open_ok(0);
	ck_assert_uint_eq(journal_last_seq(j), 2);
	journal_close(j);
}
END_TEST

START_TEST(test_corruption_in_the_middle_is_an_error)
{
	journal *j = NULL;
	journal_of((const char *const[]){"a=one", "b=two", "c=three", NULL});
	poke(2 * JOURNAL_BLOCK + 38, "X", 1); /* batch 2's data */
	struct err e = {0};
	ck_assert_int_eq(journal_open(path, 0, 0644, &j, &e), -EBADMSG);
	ck_assert_ptr_null(j);
	ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, "corrupt"), "%s", e.msg);
}
END_TEST

/* A replay that stops (the process died in it) leaves the journal as it was: replaying again
 * hands over everything again, in order. */
START_TEST(test_replay_again_after_a_crash_in_replay)
{
	journal_of((const char *const[]){"a=one", "b=two", "a=three", NULL});
	journal *j = open_ok(0);
	struct seen s = {.fail_at = 2};
	struct err e = {0};
	ck_assert_int_eq(journal_replay(j, 0, collect, &s, &e), -EIO);
	ck_assert_str_eq(s.text, "1:1:a=one\n");
	journal_close(j);
	j = open_ok(0);
	ck_assert_str_eq(replayed(j, 0), "1:1:a=one\n2:1:b=two\n3:1:a=three\n");
	ck_assert_str_eq(replayed(j, 0), "1:1:a=one\n2:1:b=two\n3:1:a=three\n");
	journal_close(j);
}
END_TEST

START_TEST(test_checkpoint_retires_what_was_applied)
{
	journal *j = open_ok(JOURNAL_REGION_MIN);
	struct err e = {0};
	sync_count = 0;
	ck_assert_int_eq(journal_checkpoint(j, count_sync, NULL, &e), 0);
	ck_assert_int_eq(sync_count, 0); /* nothing pending: no sync */
	put(j, "a", "one", 1);
	put(j, "b", "two", 2);
	ck_assert_int_eq(journal_checkpoint(j, count_sync, NULL, &e), 0);
	ck_assert_int_eq(sync_count, 1);
	ck_assert(!journal_pending(j));
	put(j, "c", "three", 3);
	journal_close(j);
	j = open_ok(JOURNAL_REGION_MIN);
	ck_assert_str_eq(replayed(j, 0), "3:1:c=three\n");
	/* a checkpoint that never ended (the process died after the switch): its region is
	 * replayed first, then what came after; the next checkpoint completes it first */
	uint64_t ticket;
	ck_assert_int_eq(journal_checkpoint_begin(j, &ticket, &e), 1);
	ck_assert_uint_eq(ticket, 3);
	put(j, "d", "four", 4);
	journal_close(j);
	j = open_ok(JOURNAL_REGION_MIN);
	ck_assert_str_eq(replayed(j, 0), "3:1:c=three\n4:1:d=four\n");
	ck_assert_int_eq(journal_checkpoint_begin(j, &ticket, &e), 0); /* no switch */
	ck_assert_uint_eq(ticket, 3);
	ck_assert_int_eq(journal_checkpoint_end(j, ticket, &e), 0);
	ck_assert_str_eq(replayed(j, 0), "4:1:d=four\n");
	sync_count = 0;
	ck_assert_int_eq(journal_checkpoint(j, count_sync, NULL, &e), 0);
	ck_assert_int_eq(sync_count, 1);
	ck_assert(!journal_pending(j));
	journal_close(j);
}
END_TEST

/* Regions reused many times with the smallest size: stale batches of earlier cycles (valid
 * checksums, older sequence numbers) never count, even behind a torn first batch. */
START_TEST(test_regions_reused)
{
	journal *j = open_ok(JOURNAL_REGION_MIN);
	struct err e = {0};
	uint64_t seq = 0;
	char name[32], want[256];
	for (int cycle = 0; cycle < 7; cycle++) {
		int fill = 3; /* blocks 1..3 of a region of 4 */
		for (int i = 0; i < fill; i++) {
			snprintf(name, sizeof(name), "n%d", i);
			put(j, name, "v", ++seq);
		}
		snprintf(name, sizeof(name), "over");
		struct journal_entry en = {1, name, "v", 1};
		ck_assert_int_eq(journal_append(j, &en, 1, NULL, &e), JOURNAL_FULL);
		ck_assert(journal_should_checkpoint(j));
		journal_close(j);
		j = open_ok(JOURNAL_REGION_MIN);
		ck_assert_uint_eq(journal_last_seq(j), seq);
		ck_assert_int_eq(journal_checkpoint(j, count_sync, NULL, &e), 0);
	}
	/* the next region's first batch torn: behind it are its earlier cycle's batches */
	put(j, "x", "y", ++seq);
	journal_close(j);
	journal *k = open_ok(JOURNAL_REGION_MIN);
	snprintf(want, sizeof(want), "%llu:1:x=y\n", (unsigned long long)seq);
	ck_assert_str_eq(replayed(k, 0), want);
	journal_close(k);
	/* find batch seq's block (block 1 of one region) and tear it */
	for (int r = 0; r < 2; r++) {
		int fd = open(path, O_RDONLY);
		uint64_t s = 0;
		ck_assert_int_eq(pread(fd, &s, 8, r * JOURNAL_REGION_MIN + JOURNAL_BLOCK + 8), 8);
		close(fd);
		if (s == seq)
			poke(r * JOURNAL_REGION_MIN + JOURNAL_BLOCK + 30, "#", 1);
	}
	k = open_ok(JOURNAL_REGION_MIN);
	ck_assert_uint_eq(journal_last_seq(k), seq - 1);
	ck_assert_str_eq(replayed(k, 0), "");
	journal_close(k);
}
END_TEST

/* ---- group commit ---------------------------------------------------------------------------- */

#define APPENDERS 8
static journal *shared;
static atomic_int journal_syncs, started;

/* The first sync of the journal waits until every other appender is queued behind it. */
static void hold_first_sync(const char *p)
{
	if (strcmp(p, path) != 0)
		return;
	if (atomic_fetch_add(&journal_syncs, 1) != 0)
		return;
	for (int i = 0; i < 60000 && journal_waiting(shared) < APPENDERS; i++)
		usleep(1000); /* generous: the machine may be loaded */
}

static void *appender(void *arg)
{
	char name[16];
	snprintf(name, sizeof(name), "w%d", (int)(intptr_t)arg);
	struct journal_entry en = {1, name, "v", 1};
	atomic_fetch_add(&started, 1);
	return (void *)(intptr_t)journal_append(shared, &en, 1, NULL, NULL);
}

static void *first_appender(void *arg)
{
	(void)arg;
	struct journal_entry en = {1, "first", "v", 1};
	return (void *)(intptr_t)journal_append(shared, &en, 1, NULL, NULL);
}

START_TEST(test_concurrent_appenders_share_fdatasync)
{
	pthread_t first, t[APPENDERS];
	shared = open_ok(0);
	atomic_store(&journal_syncs, 0);
	file_fsync_observer = hold_first_sync;
	ck_assert_int_eq(pthread_create(&first, NULL, first_appender, NULL), 0);
	while (atomic_load(&journal_syncs) == 0) /* the first batch is in its sync */
		usleep(1000);
	for (int i = 0; i < APPENDERS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, appender, (void *)(intptr_t)i), 0);
	void *r;
	pthread_join(first, &r);
	ck_assert_int_eq((int)(intptr_t)r, 0);
	for (int i = 0; i < APPENDERS; i++) {
		pthread_join(t[i], &r);
		ck_assert_int_eq((int)(intptr_t)r, 0);
	}
	file_fsync_observer = NULL;
	/* one sync for the first, one for all the others: APPENDERS + 1 without group commit */
	ck_assert_int_eq(atomic_load(&journal_syncs), 2);
	ck_assert_uint_eq(journal_last_seq(shared), 2);
	journal_close(shared);
	shared = open_ok(0);
	const char *text = replayed(shared, 1);
	for (int i = 0; i < APPENDERS; i++) {
		char want[32];
		snprintf(want, sizeof(want), "2:1:w%d=v\n", i);
		ck_assert_msg(strstr(text, want), "%s missing from\n%s", want, text);
	}
	journal_close(shared);
}
END_TEST

/* ---- a second process -------------------------------------------------------------------------- */

START_TEST(test_second_process_view)
{
	journal *j = open_ok(JOURNAL_REGION_MIN);
	struct err e = {0};
	put(j, "a", "one", 1);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* another writer of the same journal (the users' lock excludes them) */
		journal *k = NULL;
		struct journal_entry en = {1, "b", "two", 3};
		int ok = journal_open(path, 0, 0644, &k, NULL) == 0 &&
		         journal_append(k, &en, 1, NULL, NULL) == 0;
		journal_close(k);
		_exit(ok ? 0 : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(journal_last_seq(j), 1);
	ck_assert_int_eq(journal_refresh(j, &e), 0);
	ck_assert_uint_eq(journal_last_seq(j), 2);
	ck_assert_str_eq(replayed(j, 1), "2:1:b=two\n");
	/* the other process checkpoints: this one finds the switched regions */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		journal *k = NULL;
		int ok = journal_open(path, 0, 0644, &k, NULL) == 0 &&
		         journal_checkpoint(k, count_sync, NULL, NULL) == 0;
		journal_close(k);
		_exit(ok ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(journal_refresh(j, &e), 0);
	ck_assert(!journal_pending(j));
	put(j, "c", "three", 3);
	journal_close(j);
	j = open_ok(0);
	ck_assert_str_eq(replayed(j, 0), "3:1:c=three\n");
	journal_close(j);
}
END_TEST

static void lazy(journal *j, const char *name, const char *data)
{
	struct journal_entry en = {1, name, data, strlen(data)};
	struct err e = {0};
	ck_assert_msg(journal_append_lazy(j, &en, 1, &e) == 0, "%s", e.msg);
}

static int journal_fsyncs;
static void count_journal_fsync(const char *p)
{
	journal_fsyncs += strcmp(p, path) == 0;
}

/* Lazy entries: nothing written until the next append or flush, then in that batch ahead of
 * its own entries; one that does not fit waits, with what follows it, for the next region;
 * closed unwritten, they are gone. */
START_TEST(test_lazy_entries_ride_on_the_next_batch)
{
	static char big[2 * JOURNAL_BLOCK];
	memset(big, 'b', sizeof(big) - 1);
	journal *j = open_ok(JOURNAL_REGION_MIN);
	struct err e = {0};
	journal_fsyncs = 0;
	file_fsync_observer = count_journal_fsync;
	ck_assert_int_eq(journal_flush(j, &e), 0); /* nothing queued: no sync */
	lazy(j, "a", "one");
	lazy(j, "b", "two");
	ck_assert(journal_lazy_pending(j));
	ck_assert_int_eq(journal_fsyncs, 0);
	ck_assert_uint_eq(journal_last_seq(j), 0);
	put(j, "c", "three", 1);
	ck_assert_int_eq(journal_fsyncs, 1);
	ck_assert(!journal_lazy_pending(j));
	ck_assert_str_eq(replayed(j, 0), "1:1:a=one\n1:1:b=two\n1:1:c=three\n");
	lazy(j, "d", "four");
	ck_assert_int_eq(journal_flush(j, &e), 0);
	ck_assert_int_eq(journal_fsyncs, 2);
	ck_assert_str_eq(replayed(j, 1), "2:1:d=four\n");
	ck_assert_uint_eq(journal_active_first(j), 1);
	/* one block of the region is left: big does not fit, nor e behind it */
	lazy(j, "big", big);
	lazy(j, "e", "five");
	ck_assert_int_eq(journal_flush(j, &e), JOURNAL_FULL);
	ck_assert(journal_lazy_pending(j));
	ck_assert_str_eq(replayed(j, 2), "");
	ck_assert_int_eq(journal_checkpoint(j, count_sync, NULL, &e), 0);
	ck_assert_uint_eq(journal_active_first(j), 3);
	ck_assert_int_eq(journal_flush(j, &e), 0);
	ck_assert(!journal_lazy_pending(j));
	ck_assert_int_eq(journal_checkpoint(j, count_sync, NULL, &e), 0);
	lazy(j, "f", "six"); /* never written */
	file_fsync_observer = NULL;
	journal_close(j);
	j = open_ok(JOURNAL_REGION_MIN);
	ck_assert_str_eq(replayed(j, 0), "");
	journal_close(j);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("journal");
	TCase *t = tcase_create("journal");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_append_replay_in_order);
	tcase_add_test(t, test_bad_arguments);
	tcase_add_test(t, test_torn_tail_dropped);
	tcase_add_test(t, test_corruption_in_the_middle_is_an_error);
	tcase_add_test(t, test_replay_again_after_a_crash_in_replay);
	tcase_add_test(t, test_checkpoint_retires_what_was_applied);
	tcase_add_test(t, test_regions_reused);
	tcase_add_test(t, test_concurrent_appenders_share_fdatasync);
	tcase_add_test(t, test_second_process_view);
	tcase_add_test(t, test_lazy_entries_ride_on_the_next_batch);
	suite_add_tcase(s, t);
	return tu_run(s);
}
