/* fake_cli — fake command-line tools first on PATH (fake_cli.h). */
#include "fake_cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char dir[400], oldpath[8192];

const char *fake_cli_setup(const char *const *tools, size_t n)
{
	char cwd[PATH_MAX], p[PATH_MAX + 8700], target[PATH_MAX + 64];
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	snprintf(target, sizeof(target), "%s/test/unit/fakes/fake-cli", cwd);
	snprintf(p, sizeof(p), "%s/bin", dir);
	mkdir(p, 0755);
	for (size_t i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/bin/%s", dir, tools[i]);
		ck_assert_int_eq(symlink(target, p), 0);
	}
	snprintf(oldpath, sizeof(oldpath), "%s", getenv("PATH"));
	snprintf(p, sizeof(p), "%s/bin:%s", dir, oldpath);
	setenv("PATH", p, 1);
	setenv("FAKE_DIR", dir, 1);
	return dir;
}

void fake_cli_teardown(void)
{
	setenv("PATH", oldpath, 1);
	tu_rmtree(dir);
}

void fake_cli_reply(const char *tool, const char *out, const char *err, int rc)
{
	char n[128], v[16];
	snprintf(n, sizeof(n), "%s.out", tool);
	tu_write(dir, n, out);
	snprintf(n, sizeof(n), "%s.err", tool);
	tu_write(dir, n, err);
	snprintf(n, sizeof(n), "%s.rc", tool);
	snprintf(v, sizeof(v), "%d", rc);
	tu_write(dir, n, v);
}

const char *fake_cli_log(void)
{
	return tu_read(dir, "log");
}

void fake_cli_log_clear(void)
{
	tu_write(dir, "log", "");
}
