/* Helpers shared by the Check unit tests: temporary directories and small file helpers. */
#ifndef PILLAR_TEST_UNIT_TESTUTIL_H
#define PILLAR_TEST_UNIT_TESTUTIL_H

#include <check.h>
#include <stddef.h>

/* Creates a fresh directory under $TMPDIR (or /tmp) and returns its path (static storage per
 * call slot; copy it if you need two).  Fails the test on error. */
const char *tu_mkdtemp(void);
/* rm -rf of a directory made by tu_mkdtemp (no-op for NULL). */
void tu_rmtree(const char *path);
/* Writes text to dir/name (creating parents), failing the test on error. */
void tu_write(const char *dir, const char *name, const char *text);
/* Reads dir/name into a static buffer ("" when missing). */
const char *tu_read(const char *dir, const char *name);
/* The agent's test layout below root: root/cfs with nvmet/{subsystems,ports,hosts} (a plain
 * directory standing in for configfs), root/files, and a configuration with one file backend
 * (pool "fpool" in root/files) parsed into *cfg (agent_config_clear).  Fails the test on error. */
struct agent_config;
void tu_agent_layout(const char *root, struct agent_config *cfg);
/* A store object {apiVersion, kind, metadata{name}, spec} of kind (any name store_kind_lookup
 * knows) with spec_json as its spec (a cJSON *, caller owns); fails the test on bad JSON. */
void *tu_store_obj(const char *kind, const char *name, const char *spec_json);
/* A PillarAgent named name whose spec.pad is pad 'x's (a cJSON *, caller owns), and its
 * store_create into a store * (fails the test on error). */
void *tu_store_agent(const char *name, size_t pad);
void tu_store_create_agent(void *into, const char *name, size_t pad);
/* store_update of the PillarAgent name in a store * with spec.pad set to pad 'x's (pad <= 32),
 * and the length of its stored spec.pad (-1: no such object, -2: no pad); both fail the test on
 * any other error (never a corrupt object). */
void tu_store_update_agent(void *s, const char *name, int pad);
int tu_store_agent_pad(void *s, const char *name);
/* The applied mark of the operation lock of the embedded store in dir as another boot left it,
 * at journal sequence seq: the next owner's open replays the journal from the start. */
void tu_store_foreign_boot(const char *dir, int seq);
/* Waits up to 5 s for the next event of a store_watch * and checks its type (enum
 * store_event_type), metadata.name, that it has a kind and, when field is not NULL, that the
 * object has that top-level field. */
void tu_expect_event(void *watch, int t, const char *name, const char *field);
/* base/powercut.c's durable copy of directory d (<control>.durable/<d with '/' as '!'>), as a
 * test that cuts the power restores the machine: tu_durable_baseline makes it what d holds now
 * (all of it durable: before the process under test starts); tu_durable_restore makes each
 * regular file of d its copy's, dropping those the copy lacks (all of them when there is no
 * copy).  Fail the test on error. */
void tu_durable_baseline(const char *control, const char *d);
void tu_durable_restore(const char *control, const char *d);
/* A power cut in a child process: tu_power_cut forks a child that turns base/powercut.c's
 * fault point on (control: PILLAR_TEST_POWERCUT) and runs work(acked_fd); work records each
 * call acknowledged to it with tu_ack and is to be killed (SIGKILL) at the cut point its
 * observers choose: the test fails when the child ends otherwise.  After the machine's
 * directories are restored (tu_durable_restore), tu_acked_each calls check(i, arg) for each
 * call i the child recorded, in order, and returns how many there were. */
void tu_power_cut(const char *control, const char *acked, void (*work)(int acked_fd));
void tu_ack(int acked_fd, int i);
int tu_acked_each(const char *acked, void (*check)(int i, void *arg), void *arg);
/* Leftovers of writes a killed process never finished, planted in dir (made if missing): two
 * temporary files of file_temp_create's pattern (base/file.h), and what a sweep of them must
 * keep: look-alike names, a symlink of the pattern to the file <dir>.outside, a FIFO and a
 * directory of the pattern.  tu_leftovers_check asserts that the two temporary files are gone
 * (swept) or both there (!swept), and that everything else is as planted. */
void tu_leftovers_plant(const char *dir);
void tu_leftovers_check(const char *dir, int swept);
/* The log (base/log.h) goes to a temporary file from tu_log_begin until tu_log_end, which
 * returns what was logged (static buffer). */
void tu_log_begin(void);
const char *tu_log_end(void);
/* Runs a Check suite and returns the process exit status (0 when everything passed). */
int tu_run(Suite *s);

#endif
