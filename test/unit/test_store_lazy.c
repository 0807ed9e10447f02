/* The embedded store's lazy writes (store.h store_write_lazy, src/store/dir_commit.c): a lazy
 * update costs no fdatasync; a power cut before it is flushed leaves the object's previous
 * version (never a torn file); the next durable write of the process, or the flusher at most
 * STORE_LAZY_MS later, makes it durable; an object whose last durable entry was checkpointed,
 * a create and a delete are durable whatever the setting; the first open after such a cut
 * notes it (store_dir_lazy_lost) until the owner says it recovered.  The power cuts are base/powercut.c's
 * (tu_power_cut): the store's directories become what was durable, the journal its content as
 * of its last fdatasync. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "base/journal.h"
#include "store/dir_int.h"
#include "store/store.h"
#include "testutil.h"

static char dir[512], control[700], acked[700];
static int journal_syncs;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	snprintf(control, sizeof(control), "%s.cut", dir);
	snprintf(acked, sizeof(acked), "%s.acked", dir);
	FILE *f = fopen(control, "w"); /* no cut by count: the child cuts itself */
	ck_assert_ptr_nonnull(f);
	fputs("1000000 1\n", f);
	fclose(f);
	journal_syncs = 0;
}

static void teardown(void)
{
	char rm[1200];
	file_fsync_observer = NULL;
	snprintf(rm, sizeof(rm), "rm -rf '%s.cut'* '%s.acked'", dir, dir);
	ck_assert_int_eq(system(rm), 0);
	tu_rmtree(dir);
}

static const struct store_kind *PA(void)
{
	return store_kind_lookup("pa");
}

static void count_journal_syncs(const char *path)
{
	size_t n = strlen(path);
	journal_syncs += n > 9 && strcmp(path + n - 9, "/.journal") == 0;
}

/* An update of spec.pad to pad 'x's, lazy or not. */
static void update(store *s, const char *name, int pad, bool lazy)
{
	bool was = store_write_lazy(lazy);
	tu_store_update_agent(s, name, pad);
	store_write_lazy(was);
}

static bool lazy_pending(store *s)
{
	return journal_lazy_pending(((struct dir_store *)s)->journal);
}

/* The store opened again with the applied mark another boot's (its journal replayed whole). */
static store *reopen(void)
{
	tu_store_foreign_boot(dir, 1);
	store *st = NULL;
	struct err e = {0};
	ck_assert_msg(store_dir_open(dir, true, 60000, &st, &e) == 0, "%s", e.msg);
	return st;
}

/* The power comes back: the store's directories as durable, then reopen. */
static store *reboot(void)
{
	char p[700];
	tu_durable_restore(control, dir);
	snprintf(p, sizeof(p), "%s/pillaragents", dir);
	tu_durable_restore(control, p);
	return reopen();
}

static store *open_owner(void)
{
	store *st = NULL;
	if (store_dir_open(dir, true, 60000, &st, NULL) < 0)
		_exit(1);
	return st;
}

/* ---- a cut before the lazy entry is written ---------------------------------------------------- */

static void lazy_then_cut(int acked_fd)
{
	store *st = open_owner();
	tu_store_create_agent(st, "a", 3);
	tu_store_create_agent(st, "b", 4);
	update(st, "a", 5, false);
	file_fsync_observer = count_journal_syncs;
	update(st, "a", 7, true); /* acknowledged, not durable */
	if (journal_syncs != 0 || !lazy_pending(st) || tu_store_agent_pad(st, "a") != 7)
		_exit(1);
	tu_ack(acked_fd, 7);
	raise(SIGKILL);
}

START_TEST(test_lazy_write_lost_at_a_cut_leaves_the_previous_version)
{
	tu_power_cut(control, acked, lazy_then_cut);
	store *st = reboot();
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), 5);
	ck_assert_int_eq(tu_store_agent_pad(st, "b"), 4);
	ck_assert(store_dir_lazy_lost(st)); /* noted for the owner, until it recovered */
	store_close(st);
	st = reopen();
	ck_assert(store_dir_lazy_lost(st));
	store_dir_lazy_recovered(st);
	ck_assert(!store_dir_lazy_lost(st));
	update(st, "a", 9, true); /* the store goes on: the object's writes, lazy or not */
	update(st, "b", 1, false);
	store_close(st);
	st = reopen();
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), 9);
	ck_assert_int_eq(tu_store_agent_pad(st, "b"), 1);
	store_close(st);
}
END_TEST

/* ---- a writer killed with a lazy entry queued, no power cut ---------------------------------- */

/* The applied mark left in .oplock is behind the journal (the lock was never let go). */
static bool mark_behind(store *st)
{
	char p[700], buf[128], boot[40];
	unsigned long long seq = 0;
	snprintf(p, sizeof(p), "%s/.oplock", dir);
	int fd = open(p, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof(buf) - 1, 256);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return sscanf(buf, "J %39s %llu", boot, &seq) == 2 &&
	       seq < journal_last_seq(((struct dir_store *)st)->journal);
}

/* b's lazy share keeps the operation lock, so a's durable entry is not yet marked applied when
 * a's lazy update is acknowledged; 2 when the flusher let the lock go before (try again). */
static int lazy_then_killed(void)
{
	store *st = open_owner();
	tu_store_create_agent(st, "a", 3);
	tu_store_create_agent(st, "b", 4);
	update(st, "b", 6, true);
	update(st, "a", 5, false);
	update(st, "a", 7, true); /* acknowledged, queued */
	if (!lazy_pending(st) || tu_store_agent_pad(st, "a") != 7)
		_exit(1);
	if (!mark_behind(st))
		_exit(2);
	raise(SIGKILL);
	_exit(1);
}

/* The next holder of the lock, in the same boot, applies the journal's entries past the mark:
 * a's durable entry (pad 5) over the file the lazy write left (pad 7).  Either the acknowledged
 * version stays, or the loss is noted for the owner's recovery, as after a power cut. */
START_TEST(test_writer_killed_with_a_lazy_entry_queued)
{
	int status = 0;
	for (int attempt = 0; attempt < 20; attempt++) {
		tu_rmtree(dir);
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			lazy_then_killed();
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 2)
			break;
	}
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
	store *st = NULL;
	struct err e = {0};
	ck_assert_msg(store_dir_open(dir, true, 60000, &st, &e) == 0, "%s", e.msg);
	int pad = tu_store_agent_pad(st, "a");
	ck_assert_int_eq(tu_store_agent_pad(st, "b"), 6);
	ck_assert_msg(pad == 7 || (pad == 5 && store_dir_lazy_lost(st)),
	              "a has pad %d, the loss of the acknowledged pad 7 %s", pad,
	              store_dir_lazy_lost(st) ? "noted" : "not noted");
	store_close(st);
}
END_TEST

/* ---- flushed by the next durable write -------------------------------------------------------- */

static void lazy_then_durable(int acked_fd)
{
	store *st = open_owner();
	tu_store_create_agent(st, "a", 3);
	tu_store_create_agent(st, "b", 4);
	update(st, "a", 7, true);
	file_fsync_observer = count_journal_syncs;
	update(st, "b", 2, false); /* one fdatasync for both */
	if (journal_syncs != 1 || lazy_pending(st))
		_exit(1);
	tu_ack(acked_fd, 2);
	raise(SIGKILL);
}

START_TEST(test_lazy_write_durable_with_the_next_durable_write)
{
	tu_power_cut(control, acked, lazy_then_durable);
	store *st = reboot();
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), 7);
	ck_assert_int_eq(tu_store_agent_pad(st, "b"), 2);
	store_close(st);
}
END_TEST

/* ---- flushed by the flusher ------------------------------------------------------------------- */

static void lazy_then_wait(int acked_fd)
{
	store *st = open_owner();
	tu_store_create_agent(st, "a", 3);
	for (int pad = 6; pad <= 7; pad++) { /* the flusher's first lazy entries, and later ones */
		update(st, "a", pad, true);
		/* STORE_LAZY_MS; the deadline only keeps a stuck flusher from hanging the test */
		for (int i = 0; i < 5000 && lazy_pending(st); i++)
			usleep(1000);
		if (lazy_pending(st))
			_exit(1);
	}
	tu_ack(acked_fd, 7);
	raise(SIGKILL);
}

START_TEST(test_lazy_write_durable_by_the_flusher)
{
	tu_power_cut(control, acked, lazy_then_wait);
	store *st = reboot();
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), 7);
	store_close(st);
}
END_TEST

/* ---- durable whatever the setting ------------------------------------------------------------- */

START_TEST(test_lazy_only_where_the_previous_entry_is_in_the_journal)
{
	store *st = NULL;
	struct err e = {0};
	ck_assert_int_eq(store_dir_open(dir, true, 60000, &st, &e), 0);
	bool was = store_write_lazy(true);
	tu_store_create_agent(st, "a", 3); /* a create: durable */
	ck_assert(!lazy_pending(st));
	store_write_lazy(was);
	store_close(st); /* checkpointed: a's entry retired */
	ck_assert_int_eq(store_dir_open(dir, true, 60000, &st, &e), 0);
	update(st, "a", 5, true); /* no entry of it in the journal: durable */
	ck_assert(!lazy_pending(st));
	update(st, "a", 6, true); /* its last entry is: lazy */
	ck_assert(lazy_pending(st));
	ck_assert_int_eq(store_dir_flush(st, &e), 0); /* made durable on demand */
	ck_assert(!lazy_pending(st));
	update(st, "a", 6, true);
	ck_assert(lazy_pending(st));
	was = store_write_lazy(true);
	ck_assert_int_eq(store_delete(st, PA(), NULL, "a", NULL, NULL, &e), 0); /* durable */
	store_write_lazy(was);
	ck_assert(!lazy_pending(st));
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), -1);
	store_close(st);
}
END_TEST

/* A close writes what is queued: the next open has nothing to replay. */
START_TEST(test_close_writes_the_lazy_entries)
{
	store *st = NULL;
	struct err e = {0};
	ck_assert_int_eq(store_dir_open(dir, true, 60000, &st, &e), 0);
	tu_store_create_agent(st, "a", 3);
	update(st, "a", 7, true);
	ck_assert(lazy_pending(st));
	store_close(st);
	st = reopen();
	ck_assert(!journal_pending(((struct dir_store *)st)->journal));
	ck_assert(!store_dir_lazy_lost(st)); /* another boot, nothing pending: nothing lost */
	ck_assert_int_eq(tu_store_agent_pad(st, "a"), 7);
	store_close(st);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store_lazy");
	TCase *t = tcase_create("lazy");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_lazy_write_lost_at_a_cut_leaves_the_previous_version);
	tcase_add_test(t, test_lazy_write_durable_with_the_next_durable_write);
	tcase_add_test(t, test_writer_killed_with_a_lazy_entry_queued);
	tcase_add_test(t, test_lazy_write_durable_by_the_flusher);
	tcase_add_test(t, test_lazy_only_where_the_previous_entry_is_in_the_journal);
	tcase_add_test(t, test_close_writes_the_lazy_entries);
	suite_add_tcase(s, t);
	return tu_run(s);
}
