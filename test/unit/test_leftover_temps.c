/* A process killed between creating a temporary file and renaming it over its record leaves the
 * file behind.  Each role removes, when it starts, the temporary files of its own pattern in the
 * directories it owns, and nothing else (look-alike names, symlinks, FIFOs and directories of
 * the pattern; other directories): the node in its state directory, the agent in its state
 * directory and the directories of its marks and identity pins.  (The embedded store's owner
 * does the same at open: test_store_dir.) */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/config.h"
#include "agent/service.h"
#include "base/file.h"
#include "node_fixture.h"
#include "testutil.h"

/* The node's start: its state directory swept, /etc/nvme (not its own) left alone. */
START_TEST(test_node_start_removes_temps)
{
	struct env v;
	struct err e = {0};
	env_init(&v, 0);
	node_free(v.n);
	v.n = NULL;
	tu_leftovers_plant(v.state);
	tu_leftovers_plant(v.etc);
	tu_log_begin();
	int r = env_node_new(&v, &v.n, &e);
	const char *logged = tu_log_end();
	ck_assert_msg(r == 0, "%s", e.msg);
	tu_leftovers_check(v.state, 1);
	tu_leftovers_check(v.etc, 0);
	ck_assert_msg(strstr(logged, "removed temporary files of writes a killed process left") &&
	                  strstr(logged, fmt("dir=\"%s\" count=\"2\"", v.state)),
	              "%s", logged);
	env_done(&v);
}
END_TEST

/* The agent's start: its state directory, generations/ (with the marks' slot files) and
 * nvmet-identity/ swept, the backend's directory left alone. */
START_TEST(test_agent_start_removes_temps)
{
	static const char *const subdirs[] = {"", "/generations", "/nvmet-identity"};
	char root[400], state[480], files[480], cfs[480], p[600];
	struct agent_config cfg;
	agent_service *svc = NULL;
	struct err e = {0};
	snprintf(root, sizeof(root), "%s", tu_mkdtemp());
	snprintf(cfs, sizeof(cfs), "%s/cfs", root);
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(files, sizeof(files), "%s/files", root);
	tu_agent_layout(root, &cfg);
	for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", state, subdirs[i]);
		tu_leftovers_plant(p);
	}
	tu_write(state, "generations/" FILE_SPARE ".3", "{\"half\":");
	tu_write(state, "generations/" FILE_SPARE ".x", "keep");
	tu_write(state, FILE_SPARE ".3", "keep"); /* no mark is written there */
	tu_leftovers_plant(files);
	struct agent_service_opts o = {.state_dir = state,
	                               .configfs_root = cfs,
	                               .host_root = root,
	                               .version = "0.1.0-test",
	                               .device_wait_ms = 300,
	                               .create_wait_ms = 300};
	tu_log_begin();
	int r = agent_service_new(&cfg, &o, &svc, &e);
	const char *logged = tu_log_end();
	ck_assert_msg(r == 0, "%s", e.msg);
	for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", state, subdirs[i]);
		tu_leftovers_check(p, 1);
		ck_assert_msg(strstr(logged, fmt("dir=\"%s\" count=\"%d\"", p, i == 1 ? 3 : 2)),
		              "%s", logged);
	}
	ck_assert_str_eq(tu_read(state, "generations/" FILE_SPARE ".3"), "");
	ck_assert_str_eq(tu_read(state, "generations/" FILE_SPARE ".x"), "keep");
	ck_assert_str_eq(tu_read(state, FILE_SPARE ".3"), "keep");
	tu_leftovers_check(files, 0);
	agent_service_free(svc);
	agent_config_clear(&cfg);
	tu_rmtree(root);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("leftover_temps");
	TCase *t = tcase_create("start");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_node_start_removes_temps);
	tcase_add_test(t, test_agent_start_removes_temps);
	suite_add_tcase(s, t);
	return tu_run(s);
}
