/* Power cuts anywhere in a journal's life (src/base/journal), checkpoints included: appends,
 * checkpoints whose regions switch while appends go on during the user's sync, regions reused
 * cycle after cycle, a journal reopened after each cut.
 *
 * The disk is modelled beside the real file: the journal's durable content is what the file
 * held at its last completed fdatasync or at the user's last sync (a syncfs of the filesystem
 * that holds the journal too), and the user's applied state (which keys it wrote to its own
 * files) is durable as of its last sync.  At every cut point (before each fdatasync of the
 * journal, before each user sync, and at the end) a cut may leave any subset of the blocks
 * written since the last sync: each subset is tried.  After the cut the journal must open (no
 * "corrupt" verdict for a state a power cut can leave) and its replay over the durable applied
 * state must hold every key whose append was acknowledged: a lazy append (journal_append_lazy)
 * once an append after it returned. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/file.h"
#include "base/journal.h"
#include "testutil.h"

#define REGION    JOURNAL_REGION_MIN
#define FILE_SIZE (2 * REGION)
#define BLOCKS    ((int)(FILE_SIZE / JOURNAL_BLOCK))
#define KEYS      64
#define DIRTY_MAX 8

static char path[512], cut_path[512];

static struct {
	unsigned char disk[FILE_SIZE]; /* the journal as durable */
	bool applied[KEYS];            /* the user's files, page cache */
	bool durable_applied[KEYS];    /* ... as durable */
	bool acked[KEYS];              /* keys whose append returned 0 */
	int cuts, images;
} pc;

static void read_file(const char *p, unsigned char *buf)
{
	int fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, FILE_SIZE, 0), FILE_SIZE);
	close(fd);
}

static int key_of(const char *name)
{
	int k = atoi(name + 1);
	ck_assert(name[0] == 'k' && k >= 0 && k < KEYS);
	return k;
}

static int apply_to(void *arg, uint64_t seq, const struct journal_entry *en, struct err *e)
{
	(void)seq;
	(void)e;
	((bool *)arg)[key_of(en->name)] = true;
	return 0;
}

/* One disk image a cut may leave: opens, and the replay holds every acknowledged key. */
static void check_image(const unsigned char *image)
{
	int fd = open(cut_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, image, FILE_SIZE, 0), FILE_SIZE);
	close(fd);
	journal *j = NULL;
	struct err e = {0};
	ck_assert_msg(journal_open(cut_path, 0, 0600, &j, &e) == 0, "cut %d: %s", pc.cuts, e.msg);
	bool state[KEYS];
	memcpy(state, pc.durable_applied, sizeof(state));
	ck_assert_msg(journal_replay(j, 0, apply_to, state, &e) == 0, "cut %d: %s", pc.cuts, e.msg);
	journal_close(j);
	for (int k = 0; k < KEYS; k++)
		ck_assert_msg(!pc.acked[k] || state[k], "cut %d: acknowledged key k%d lost",
		              pc.cuts, k);
	pc.images++;
}

/* A cut here: every subset of the blocks written since the last sync. */
static void cut_here(void)
{
	static unsigned char now[FILE_SIZE], image[FILE_SIZE];
	int dirty[DIRTY_MAX], n = 0;
	read_file(path, now);
	for (int b = 0; b < BLOCKS; b++)
		if (memcmp(now + b * JOURNAL_BLOCK, pc.disk + b * JOURNAL_BLOCK, JOURNAL_BLOCK)) {
			ck_assert_int_lt(n, DIRTY_MAX);
			dirty[n++] = b;
		}
	pc.cuts++;
	for (unsigned mask = 0; mask < 1u << n; mask++) {
		memcpy(image, pc.disk, FILE_SIZE);
		for (int i = 0; i < n; i++)
			if (mask & (1u << i))
				memcpy(image + dirty[i] * JOURNAL_BLOCK,
				       now + dirty[i] * JOURNAL_BLOCK, JOURNAL_BLOCK);
		check_image(image);
	}
}

static void before_sync(const char *p)
{
	if (strcmp(p, path) == 0)
		cut_here();
}

static void after_sync(int fd, const char *p)
{
	(void)fd;
	if (strcmp(p, path) == 0)
		read_file(path, pc.disk);
}

/* The user's sync: a syncfs of the filesystem holding its files and the journal. */
static int user_sync(void *arg, struct err *e)
{
	(void)arg;
	(void)e;
	cut_here();
	read_file(path, pc.disk);
	memcpy(pc.durable_applied, pc.applied, sizeof(pc.applied));
	return 0;
}

static int next_key;
static int lazy_keys[KEYS], n_lazy; /* queued lazily, acknowledged with the next append */

/* An append of the next key, then its apply (page cache only); every third key a lazy one,
 * acknowledged once an append after it returned. */
static int put_next(journal *j)
{
	char name[16];
	int k = next_key++;
	ck_assert_int_lt(k, KEYS);
	snprintf(name, sizeof(name), "k%d", k);
	struct journal_entry en = {1, name, "v", 1};
	struct err e = {0};
	if (k % 3 == 1) {
		ck_assert_int_eq(journal_append_lazy(j, &en, 1, &e), 0);
		pc.applied[k] = true;
		lazy_keys[n_lazy++] = k;
		return 0;
	}
	int r = journal_append(j, &en, 1, NULL, &e);
	if (r == JOURNAL_FULL) {
		next_key--;
		return r;
	}
	ck_assert_msg(r == 0, "%s", e.msg);
	pc.acked[k] = pc.applied[k] = true;
	for (int i = 0; i < n_lazy; i++)
		pc.acked[lazy_keys[i]] = true;
	n_lazy = 0;
	return 0;
}

START_TEST(test_power_cut_anywhere_keeps_every_acknowledged_append)
{
	const char *dir = tu_mkdtemp();
	snprintf(path, sizeof(path), "%s/journal", dir);
	snprintf(cut_path, sizeof(cut_path), "%s/cut", dir);
	memset(&pc, 0, sizeof(pc));
	next_key = n_lazy = 0;
	journal *j = NULL;
	struct err e = {0};
	ck_assert_msg(journal_open(path, REGION, 0600, &j, &e) == 0, "%s", e.msg);
	read_file(path, pc.disk); /* created durably */
	file_fsync_observer = before_sync;
	file_fsync_done_observer = after_sync;
	for (int cycle = 0; next_key < KEYS - 4; cycle++) {
		/* the region filled (a checkpoint forced by a full journal) or a few appends */
		for (int i = 0; i < (cycle % 3 == 0 ? 4 : 1 + cycle % 2); i++)
			if (put_next(j) == JOURNAL_FULL)
				break;
		uint64_t ticket;
		int begun = journal_checkpoint_begin(j, &ticket, &e);
		ck_assert_msg(begun >= 0, "%s", e.msg);
		if (!ticket)
			continue;
		/* appends go on during the user's sync, as the stores' writers do */
		for (int i = 0; i < cycle % 3; i++)
			if (put_next(j) == JOURNAL_FULL)
				break;
		if (cycle % 5 == 4) { /* a sync that failed: the checkpoint ends later */
			cut_here();
			continue;
		}
		ck_assert_int_eq(user_sync(NULL, &e), 0);
		ck_assert_msg(journal_checkpoint_end(j, ticket, &e) == 0, "%s", e.msg);
		cut_here(); /* the retirement not yet durable */
	}
	cut_here();
	file_fsync_observer = NULL;
	file_fsync_done_observer = NULL;
	journal_close(j);
	ck_assert_int_gt(pc.cuts, 3 * KEYS / 4);
	ck_assert_int_gt(pc.images, pc.cuts);
	tu_rmtree(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("journal_powercut");
	TCase *t = tcase_create("journal_powercut");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_power_cut_anywhere_keeps_every_acknowledged_append);
	suite_add_tcase(s, t);
	return tu_run(s);
}
