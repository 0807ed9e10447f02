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
/* Waits up to 5 s for the next event of a store_watch * and checks its type (enum
 * store_event_type), metadata.name, that it has a kind and, when field is not NULL, that the
 * object has that top-level field. */
void tu_expect_event(void *watch, int t, const char *name, const char *field);
/* Runs a Check suite and returns the process exit status (0 when everything passed). */
int tu_run(Suite *s);

#endif
