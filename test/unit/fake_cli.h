/* fake_cli — the fake command-line tools of the backend tests: test/unit/fakes/fake-cli linked
 * under each tool's name into <dir>/bin, put first on PATH (FAKE_DIR=<dir>), where dir is a new
 * temporary directory.  Every call is appended to <dir>/log ("tool|arg|arg...") and a tool
 * answers what fake_cli_reply set for it.  Run from the repository's top directory. */
#ifndef PILLAR_TEST_FAKE_CLI_H
#define PILLAR_TEST_FAKE_CLI_H

#include <stddef.h>

/* Sets the n tools up; returns dir (valid until fake_cli_teardown). */
const char *fake_cli_setup(const char *const *tools, size_t n);
/* Restores PATH and removes dir. */
void fake_cli_teardown(void);
/* What tool answers from now on ("zfs", or "zfs.snapshot" for one first argument): out on
 * standard output, err on standard error, exit status rc. */
void fake_cli_reply(const char *tool, const char *out, const char *err, int rc);
/* The calls logged since the setup or the last fake_cli_log_clear. */
const char *fake_cli_log(void);
void fake_cli_log_clear(void);

#endif
