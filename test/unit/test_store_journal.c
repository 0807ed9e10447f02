/* The embedded store's write-ahead journal (src/store/dir_journal.c): a write whose writer died
 * between its journal entry and its file is applied by the next lock holder; after a reboot
 * (a foreign boot ID in the applied mark, files as a power cut leaves them) every entry is
 * applied again and checkpointed, also when the first replay was cut short; a corrupt journal
 * stops the store's open with an error naming it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "store/dir_int.h"
#include "store/store.h"
#include "testutil.h"

static char dir[512];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
}

static void teardown(void)
{
	file_fsync_observer = NULL;
	file_fsync_done_observer = NULL;
	tu_rmtree(dir);
}

static bool exists(const char *name)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

static void wait_child(pid_t pid)
{
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

/* Tests' crash points: the process ends right after its journal's fdatasync (the entry is
 * durable, its file not written), or right before a syncfs. */
static void die_after_journal_sync(int fd, const char *path)
{
	(void)fd;
	size_t n = strlen(path);
	if (n > 9 && strcmp(path + n - 9, "/.journal") == 0)
		_exit(0);
}

static void die_before_syncfs(const char *path)
{
	if (strcmp(path, dir) == 0)
		_exit(0);
}

START_TEST(test_dead_writers_entry_applied_by_the_next_lock_holder)
{
	store *st = NULL;
	struct err e = {0};
	ck_assert_int_eq(store_dir_open(dir, true, 60000, &st, &e), 0);
	tu_store_create_agent(st, "b", 1);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* the CLI's write, killed between its entry and its file */
		store *cli = NULL;
		if (store_dir_open(dir, false, 60000, &cli, NULL) < 0)
			_exit(1);
		file_fsync_done_observer = die_after_journal_sync;
		cJSON *o = tu_store_agent("a", 5);
		store_create(cli, o, NULL, NULL);
		_exit(2); /* not reached */
	}
	wait_child(pid);
	ck_assert(!exists("pillaragents/a.json"));
	/* the owner's next write takes the lock: the entry is applied first */
	tu_store_update_agent(st, "b", 2);
	ck_assert(exists("pillaragents/a.json"));
	for (int i = 0; i < 20000 && tu_store_agent_pad(st, "a") != 5; i++)
		usleep(1000); /* the index learns it by notification; generous deadline */
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), 5);
	/* a second process sees it too */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		store *other = NULL;
		_exit(store_dir_open(dir, false, 60000, &other, NULL) == 0 &&
		              tu_store_agent_pad(other, "a") == 5 && tu_store_agent_pad(other, "b") == 2
		          ? 0
		          : 1);
	}
	wait_child(pid);
	store_close(st);
}
END_TEST

/* What a power cut leaves of writes that were never checkpointed: files renamed without fsync
 * empty or gone, and the page cache's applied mark gone (another boot's). */
static void crash_with_pending_writes(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		store *st = NULL;
		if (store_dir_open(dir, true, 60000, &st, NULL) < 0)
			_exit(1);
		tu_store_create_agent(st, "a", 3);
		tu_store_create_agent(st, "b", 4);
		tu_store_update_agent(st, "a", 7);
		_exit(0); /* no close: nothing checkpointed */
	}
	wait_child(pid);
}

static void power_cut(void)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/pillaragents/a.json", dir);
	ck_assert_int_eq(truncate(p, 0), 0);
	snprintf(p, sizeof(p), "%s/pillaragents/b.json", dir);
	ck_assert_int_eq(unlink(p), 0);
	tu_store_foreign_boot(dir, 3);
}

static int syncs;
static void count_syncfs(const char *path)
{
	syncs += strcmp(path, dir) == 0;
}

START_TEST(test_reboot_replays_and_checkpoints)
{
	store *st = NULL;
	struct err e = {0};
	crash_with_pending_writes();
	power_cut();
	file_fsync_observer = count_syncfs;
	ck_assert_msg(store_dir_open(dir, true, 60000, &st, &e) == 0, "%s", e.msg);
	file_fsync_observer = NULL;
	ck_assert_int_eq(syncs, 1);
	ck_assert(!journal_pending(((struct dir_store *)st)->journal));
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), 7);
	ck_assert_int_eq(tu_store_agent_pad(st, "b"), 4);
	tu_store_create_agent(st, "c", 1);
	store_close(st);
}
END_TEST

START_TEST(test_replay_cut_short_is_replayed_again)
{
	store *st = NULL;
	struct err e = {0};
	crash_with_pending_writes();
	power_cut();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* replays, then the power goes before its checkpoint's sync */
		store *cut = NULL;
		file_fsync_observer = die_before_syncfs;
		store_dir_open(dir, true, 60000, &cut, NULL);
		_exit(2);
	}
	wait_child(pid);
	power_cut(); /* what it applied was not durable */
	ck_assert_msg(store_dir_open(dir, true, 60000, &st, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), 7);
	ck_assert_int_eq(tu_store_agent_pad(st, "b"), 4);
	store_close(st);
}
END_TEST

START_TEST(test_corrupt_journal_stops_the_open)
{
	store *st = NULL;
	struct err e = {0};
	char p[700];
	crash_with_pending_writes();
	snprintf(p, sizeof(p), "%s/.journal", dir);
	int fd = open(p, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "#", 1, JOURNAL_BLOCK + 100), 1); /* the first batch */
	close(fd);
	ck_assert_int_eq(store_dir_open(dir, true, 60000, &st, &e), -EBADMSG);
	ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "corrupt"), "%s", e.msg);
}
END_TEST

/* An object too large for the journal is refused before anything is written. */
START_TEST(test_too_large_object_refused)
{
	store *st = NULL;
	struct err e = {0};
	ck_assert_int_eq(store_dir_open(dir, true, 60000, &st, &e), 0);
	size_t n = STORE_OBJECT_MAX + 1;
	char *big = malloc(n + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', n);
	big[n] = '\0';
	cJSON *o = tu_store_agent("big", 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(o, "spec"), "pad", cJSON_CreateString(big));
	free(big);
	ck_assert_int_eq(store_create(st, o, NULL, &e), STORE_INVALID);
	ck_assert_msg(strstr(e.msg, "pillaragents/big is too large to store"), "%s", e.msg);
	cJSON_Delete(o);
	ck_assert(!exists("pillaragents/big.json"));
	ck_assert_uint_eq(journal_last_seq(((struct dir_store *)st)->journal), 0);
	tu_store_create_agent(st, "small", 1);
	store_close(st);
}
END_TEST

/* ---- a power cut in a checkpoint ------------------------------------------------------------- */

/* The checkpoint's sync runs on its own thread while writes go on.  A child process writes
 * objects one after another (each acknowledged one recorded outside the store) until the
 * journal's first checkpoint; the fault point of base/powercut.c keeps what is durable, and the
 * child dies at one of the checkpoint's cut points:
 *   SYNC     its sync, with writes acknowledged after the switch (in the new region);
 *   RETIRE   the first journal fdatasync after its sync (the retirement written, not durable);
 *   AFTER    the third one after its sync.
 * Then the store's directories become their durable copies (a power cut), and the store opened
 * again holds every acknowledged object. */
enum cut_at { CUT_SYNC, CUT_RETIRE, CUT_AFTER };
static enum cut_at cut_at;
static _Atomic int acked_n;
/* armed after the first write, which made the kind's directory (an fsync of the store's): the
 * store's directory is then synced by the checkpoint alone */
static _Atomic bool armed;
static _Atomic int synced_writes = -1; /* journal fdatasyncs since the checkpoint's sync */
static void (*keep_before)(const char *path);
static void (*keep_after_syncfs)(const char *root);

static bool is_journal(const char *path)
{
	size_t n = strlen(path);
	return n > 9 && strcmp(path + n - 9, "/.journal") == 0;
}

static void cut_before(const char *path)
{
	keep_before(path);
	if (!armed)
		return;
	if (strcmp(path, dir) == 0 && cut_at == CUT_SYNC) {
		for (int i = 0; i < 20000 && acked_n < 130 + 3; i++)
			usleep(1000); /* writes acknowledged into the new region meanwhile */
		raise(SIGKILL);
	}
	if (is_journal(path) && synced_writes >= 0 &&
	    ++synced_writes == (cut_at == CUT_RETIRE ? 1 : 3))
		raise(SIGKILL);
}

static void after_checkpoint_sync(const char *root)
{
	keep_after_syncfs(root);
	if (armed && strcmp(root, dir) == 0)
		synced_writes = 0;
}

static void write_until_cut(int acked_fd)
{
	store *st = NULL;
	keep_before = file_fsync_observer;
	keep_after_syncfs = file_syncfs_done_observer;
	file_fsync_observer = cut_before;
	file_syncfs_done_observer = after_checkpoint_sync;
	if (store_dir_open(dir, true, 60000, &st, NULL) < 0)
		_exit(1);
	for (int i = 0; i < 400; i++) {
		char name[32];
		snprintf(name, sizeof(name), "o%d", i);
		cJSON *o = tu_store_agent(name, i % 30);
		if (store_create(st, o, NULL, NULL) < 0)
			_exit(1);
		cJSON_Delete(o);
		tu_ack(acked_fd, i);
		acked_n = i + 1;
		armed = true;
	}
}

struct reopened {
	store *st;
	int at;
};

/* Acknowledged object o<i> is in the reopened store. */
static void object_kept(int i, void *arg)
{
	struct reopened *r = arg;
	char name[32];
	snprintf(name, sizeof(name), "o%d", i);
	ck_assert_msg(tu_store_agent_pad(r->st, name) == i % 30, "cut %d: acknowledged %s lost", r->at, name);
}

static void cut_round(enum cut_at at)
{
	char control[700], acked[700], p[700];
	snprintf(control, sizeof(control), "%s.cut", dir);
	snprintf(acked, sizeof(acked), "%s.acked", dir);
	cut_at = at;
	tu_power_cut(control, acked, write_until_cut);
	tu_durable_restore(control, dir);
	snprintf(p, sizeof(p), "%s/pillaragents", dir);
	tu_durable_restore(control, p);
	tu_store_foreign_boot(dir, 1);
	struct reopened r = {NULL, at};
	struct err e = {0};
	ck_assert_msg(store_dir_open(dir, true, 60000, &r.st, &e) == 0, "cut %d: %s", at, e.msg);
	ck_assert_int_gt(tu_acked_each(acked, object_kept, &r), 120); /* cut in the checkpoint */
	store_close(r.st);
	char rm[1200];
	snprintf(rm, sizeof(rm), "rm -rf '%s.cut'* '%s.acked'", dir, dir);
	ck_assert_int_eq(system(rm), 0);
}

START_TEST(test_power_cut_at_the_checkpoints_sync)
{
	cut_round(CUT_SYNC);
}
END_TEST

START_TEST(test_power_cut_before_the_retirement_is_durable)
{
	cut_round(CUT_RETIRE);
}
END_TEST

START_TEST(test_power_cut_after_a_checkpoint)
{
	cut_round(CUT_AFTER);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store_journal");
	TCase *t = tcase_create("journal");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_dead_writers_entry_applied_by_the_next_lock_holder);
	tcase_add_test(t, test_reboot_replays_and_checkpoints);
	tcase_add_test(t, test_replay_cut_short_is_replayed_again);
	tcase_add_test(t, test_corrupt_journal_stops_the_open);
	tcase_add_test(t, test_too_large_object_refused);
	tcase_add_test(t, test_power_cut_at_the_checkpoints_sync);
	tcase_add_test(t, test_power_cut_before_the_retirement_is_durable);
	tcase_add_test(t, test_power_cut_after_a_checkpoint);
	suite_add_tcase(s, t);
	return tu_run(s);
}
