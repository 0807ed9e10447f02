/* The durability tests' power-cut fault point (base/powercut.c, PILLAR_TEST_POWERCUT): the
 * durable copy of a directory that a cut restores.  Each test runs in its own process (Check's
 * fork mode): the observers the fault point installs stay in that process. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "testutil.h"

static char dir[512], control[600], copy[1200];

/* a directory d with file f ("1 MiB" of 'a'), d fsynced: f's name and data are durable */
static void setup_durable(const char *d)
{
	snprintf(dir, sizeof(dir), "%s/pool", d);
	snprintf(control, sizeof(control), "%s/cut", d);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	setenv("PILLAR_TEST_POWERCUT", control, 1);
	file_powercut_from_env();
	char p[600];
	snprintf(p, sizeof(p), "%s/f", dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	ck_assert_int_eq(file_fsync(fd, p), 0);
	close(fd);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(file_fsync(dfd, dir), 0);
	close(dfd);
	int k = snprintf(copy, sizeof(copy), "%s.durable/", control);
	for (const char *c = dir; *c; c++)
		copy[k++] = *c == '/' ? '!' : *c;
	snprintf(copy + k, sizeof(copy) - (size_t)k, "/f");
}

static long size_of(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

START_TEST(test_fsync_of_a_durable_name_keeps_its_new_data)
{
	const char *d = tu_mkdtemp();
	setup_durable(d);
	ck_assert_int_eq(size_of(copy), 4096);
	/* grown in place (a volume's expand): write-only fd, file fsync, no directory fsync */
	char p[600];
	snprintf(p, sizeof(p), "%s/f", dir);
	int fd = open(p, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 3 * 4096), 0);
	ck_assert_int_eq(file_fsync(fd, p), 0);
	close(fd);
	ck_assert_int_eq(size_of(copy), 3 * 4096);
	tu_rmtree(d);
}
END_TEST

START_TEST(test_unsynced_data_and_new_names_stay_lost)
{
	const char *d = tu_mkdtemp();
	setup_durable(d);
	char p[600], q[1300];
	snprintf(p, sizeof(p), "%s/f", dir);
	int fd = open(p, O_WRONLY);
	ck_assert_int_eq(ftruncate(fd, 2 * 4096), 0); /* no fsync: not durable */
	close(fd);
	ck_assert_int_eq(size_of(copy), 4096);
	/* a new file fsynced without its directory: its name is not durable */
	snprintf(p, sizeof(p), "%s/g", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_eq(file_fsync(fd, p), 0);
	close(fd);
	snprintf(q, sizeof(q), "%.*sg", (int)(strlen(copy) - 1), copy);
	ck_assert_int_eq(access(q, F_OK), -1);
	tu_rmtree(d);
}
END_TEST

/* fdatasync of a durable name keeps its data; a syncfs makes a renamed file and a new
 * subdirectory's files durable, names and data */
START_TEST(test_fdatasync_and_syncfs_are_durable_points)
{
	const char *d = tu_mkdtemp();
	setup_durable(d);
	char p[600], q[1300], sub[700];
	snprintf(p, sizeof(p), "%s/f", dir);
	int fd = open(p, O_WRONLY);
	ck_assert_int_eq(ftruncate(fd, 5 * 4096), 0);
	ck_assert_int_eq(file_fdatasync(fd, p), 0);
	close(fd);
	ck_assert_int_eq(size_of(copy), 5 * 4096);
	/* written and renamed without any fsync, in dir and in a new subdirectory */
	snprintf(sub, sizeof(sub), "%s/ns", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	tu_write(dir, "g.tmp", "gg");
	snprintf(p, sizeof(p), "%s/g.tmp", dir);
	snprintf(q, sizeof(q), "%s/g", dir);
	ck_assert_int_eq(rename(p, q), 0);
	tu_write(sub, "h", "hhh");
	snprintf(q, sizeof(q), "%.*sg", (int)(strlen(copy) - 1), copy);
	ck_assert_int_eq(access(q, F_OK), -1);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(file_syncfs(dfd, dir), 0);
	close(dfd);
	ck_assert_int_eq(size_of(q), 2);
	snprintf(q, sizeof(q), "%.*s!ns/h", (int)(strlen(copy) - 2), copy);
	ck_assert_int_eq(size_of(q), 3);
	tu_rmtree(d);
}
END_TEST

START_TEST(test_a_subdirectory_is_durable_by_name_only)
{
	const char *d = tu_mkdtemp();
	setup_durable(d);
	char sub[700], q[1300];
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	snprintf(q, sizeof(q), "%.*ssub", (int)(strlen(copy) - 1), copy);
	ck_assert_int_eq(access(q, F_OK), -1); /* made, its parent not fsynced: not durable */
	tu_write(sub, "g", "x");
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(file_fsync(dfd, dir), 0);
	close(dfd);
	struct stat st;
	ck_assert_int_eq(stat(q, &st), 0); /* the parent's fsync: its name is durable */
	ck_assert(S_ISDIR(st.st_mode));
	snprintf(q + strlen(q), sizeof(q) - strlen(q), "/g");
	ck_assert_int_eq(access(q, F_OK), -1); /* its content: its own copy's business */
	ck_assert_int_eq(size_of(copy), 4096); /* f unchanged beside it */
	tu_rmtree(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("powercut");
	TCase *t = tcase_create("durable copy");
	tcase_add_test(t, test_fsync_of_a_durable_name_keeps_its_new_data);
	tcase_add_test(t, test_unsynced_data_and_new_names_stay_lost);
	tcase_add_test(t, test_fdatasync_and_syncfs_are_durable_points);
	tcase_add_test(t, test_a_subdirectory_is_durable_by_name_only);
	suite_add_tcase(s, t);
	return tu_run(s);
}
