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
/* Runs a Check suite and returns the process exit status (0 when everything passed). */
int tu_run(Suite *s);

#endif
