/* Dispatch of the multi-call binary: by argv[0], by subcommand, unknown roles and flags, --help,
 * --version and `version --output=json`.  applet_find is checked in process; the exit codes and
 * messages are checked by running the real static binary (PILLAR_BIN) through base/exec. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "applets.h"
#include "base/exec.h"
#include "base/json.h"
#include "testutil.h"

static const char *bin(void)
{
	const char *b = getenv("PILLAR_BIN");
	return b && *b ? b : "build/pillar-csi";
}

START_TEST(test_find_by_argv0_and_subcommand)
{
	int shift;
	char *a1[] = {"/usr/bin/pillar-agent", "--config=/x"};
	char *a2[] = {"pillar-node"};
	char *a3[] = {"/usr/bin/pillar-csi", "controller", "--v=2"};
	char *a4[] = {"./anything", "version"};
	char *a5[] = {"pillar-csi", "frobnicate"};
	char *a6[] = {"pillar-csi"};
	char *a7[] = {"pillar-csi", "--help"};
	char *a8[] = {"pillar-controller", "agent"}; /* a symlink name wins over argv[1] */
	const struct applet *a;

	a = applet_find(2, a1, &shift);
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a->name, "agent");
	ck_assert_int_eq(shift, 0);
	a = applet_find(1, a2, &shift);
	ck_assert_str_eq(a->name, "node");
	a = applet_find(3, a3, &shift);
	ck_assert_str_eq(a->name, "controller");
	ck_assert_int_eq(shift, 1);
	a = applet_find(2, a4, &shift);
	ck_assert_str_eq(a->name, "version");
	ck_assert_ptr_null(applet_find(2, a5, &shift));
	ck_assert_int_eq(shift, 1);
	ck_assert_ptr_null(applet_find(1, a6, &shift));
	ck_assert_int_eq(shift, -1);
	ck_assert_ptr_null(applet_find(2, a7, &shift));
	ck_assert_int_eq(shift, -1);
	a = applet_find(2, a8, &shift);
	ck_assert_str_eq(a->name, "controller");
	ck_assert_int_eq(shift, 0);
}
END_TEST

static int run(struct exec_result *r, const char *const *argv)
{
	int rc = exec_run(argv, NULL, r, NULL);
	ck_assert_msg(rc == 0, "could not run %s (rc %d): build it first with make", argv[0], rc);
	return r->exit_code;
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(test_binary_usage_errors)
{
	struct exec_result r;
	const char *none[] = {bin(), NULL};
	const char *unknown[] = {bin(), "frobnicate", NULL};
	const char *badflag[] = {bin(), "agent", "--config=/x", "--bogus", NULL};
	const char *novalue[] = {bin(), "node", "--node-id", NULL};
	const char *positional[] = {bin(), "controller", "extra", NULL};

	ck_assert_int_eq(run(&r, none), 2);
	ck_assert_ptr_nonnull(strstr(r.err, "Usage: pillar-csi <role> [flags]"));
	exec_result_free(&r);

	ck_assert_int_eq(run(&r, unknown), 2);
	ck_assert_str_eq(r.err,
	                 "pillar-csi: unknown role \"frobnicate\"; accepted: controller, node, "
	                 "agent, version, apply, get, delete, dhchap, call, modprobe, outage-plan, "
	                 "outage-status, kubectl-pillar\n");
	ck_assert_str_eq(r.out, "");
	exec_result_free(&r);

	ck_assert_int_eq(run(&r, badflag), 2);
	ck_assert_int_eq(count_lines(r.err), 1);
	ck_assert_ptr_nonnull(strstr(r.err, "pillar-csi agent: unknown flag --bogus; accepted: "
	                                    "--listen-address, --config,"));
	exec_result_free(&r);

	ck_assert_int_eq(run(&r, novalue), 2);
	ck_assert_str_eq(r.err, "pillar-csi node: flag --node-id needs a value\n");
	exec_result_free(&r);

	ck_assert_int_eq(run(&r, positional), 2);
	ck_assert_int_eq(count_lines(r.err), 1);
	exec_result_free(&r);
}
END_TEST

START_TEST(test_binary_help_and_version_on_every_role)
{
	static const char *const roles[] = {"controller", "node", "agent", "version"};
	struct exec_result r;
	for (int i = 0; i < 4; i++) {
		const char *help[] = {bin(), roles[i], "--help", NULL};
		const char *ver[] = {bin(), roles[i], "--version", NULL};
		char usage[64];
		ck_assert_int_eq(run(&r, help), 0);
		snprintf(usage, sizeof(usage), "Usage: pillar-csi %s [flags]", roles[i]);
		ck_assert_msg(strstr(r.out, usage) != NULL, "%s --help printed %s", roles[i],
		              r.out);
		ck_assert_ptr_nonnull(strstr(r.out, "  --help\n"));
		exec_result_free(&r);
		ck_assert_int_eq(run(&r, ver), 0);
		ck_assert_msg(strncmp(r.out, "pillar-csi ", 11) == 0 && count_lines(r.out) == 1,
		              "%s --version printed %s", roles[i], r.out);
		exec_result_free(&r);
	}
	const char *top[] = {bin(), "--help", NULL};
	ck_assert_int_eq(run(&r, top), 0);
	ck_assert_ptr_nonnull(strstr(r.out, "Roles:"));
	exec_result_free(&r);
}
END_TEST

START_TEST(test_binary_by_symlink)
{
	const char *d = tu_mkdtemp();
	char dir[256], link[PATH_MAX], target[PATH_MAX];
	struct exec_result r;
	snprintf(dir, sizeof(dir), "%s", d);
	ck_assert_ptr_nonnull(realpath(bin(), target));
	static const char *const names[] = {"pillar-controller", "pillar-node", "pillar-agent"};
	static const char *const roles[] = {"controller", "node", "agent"};
	for (int i = 0; i < 3; i++) {
		snprintf(link, sizeof(link), "%s/%s", dir, names[i]);
		ck_assert_int_eq(symlink(target, link), 0);
		const char *help[] = {link, "--help", NULL};
		char usage[64];
		ck_assert_int_eq(run(&r, help), 0);
		snprintf(usage, sizeof(usage), "Usage: pillar-csi %s [flags]", roles[i]);
		ck_assert_msg(strstr(r.out, usage) != NULL, "%s --help printed %s", names[i],
		              r.out);
		exec_result_free(&r);
	}
	/* the agent's TLS flags are all or none, with the spec's message */
	snprintf(link, sizeof(link), "%s/pillar-agent", dir);
	const char *tls[] = {link, "--config=/x", "--tls-cert=/c.pem", NULL};
	ck_assert_int_eq(run(&r, tls), 1);
	ck_assert_str_eq(r.err, "--tls-cert, --tls-key and --tls-ca must be set together\n");
	exec_result_free(&r);
	tu_rmtree(dir);
}
END_TEST

START_TEST(test_binary_version_json)
{
	struct exec_result r;
	cJSON *v;
	const char *argv[] = {bin(), "version", "--output=json", NULL};
	const char *bad[] = {bin(), "version", "--output=yaml", NULL};
	const char *text[] = {bin(), "version", NULL};
	ck_assert_int_eq(run(&r, argv), 0);
	ck_assert_int_eq(json_parse_strict(r.out, r.out_len, &v, NULL), 0);
	ck_assert_ptr_nonnull(json_get_str(v, "version"));
	ck_assert_ptr_nonnull(json_get_str(v, "gitCommit"));
	ck_assert_ptr_nonnull(json_get_str(v, "buildDate"));
	const cJSON *libs = cJSON_GetObjectItemCaseSensitive(v, "libraries");
	static const char *const names[] = {"protobuf-c", "nghttp2", "mbedtls",
	                                    "cJSON",      "libyaml", "libnvme"};
	for (int i = 0; i < 6; i++) {
		const char *ver = json_get_str(libs, names[i]);
		ck_assert_msg(ver && ver[0] >= '0' && ver[0] <= '9', "%s version %s", names[i],
		              ver ? ver : "(missing)");
	}
	char line[128];
	snprintf(line, sizeof(line), "pillar-csi %s (%s)\n", json_get_str(v, "version"),
	         json_get_str(v, "gitCommit"));
	exec_result_free(&r);
	ck_assert_int_eq(run(&r, text), 0);
	ck_assert_msg(strncmp(r.out, line, strlen(line)) == 0, "version printed %s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "\nnghttp2: "));
	ck_assert_ptr_nonnull(strstr(r.out, "\nlibnvme: 1."));
	exec_result_free(&r);
	cJSON_Delete(v);
	ck_assert_int_eq(run(&r, bad), 2);
	exec_result_free(&r);
}
END_TEST

START_TEST(test_modprobe_always_exits_zero)
{
	char d[256], fake[300];
	struct exec_result r;
	snprintf(d, sizeof(d), "%s", tu_mkdtemp());
	/* a fake modprobe that knows only nvmet */
	tu_write(d, "modprobe",
	         "#!/bin/sh\n[ \"$1\" = nvmet ] && exit 0\n"
	         "echo \"modprobe: FATAL: Module $1 not found\" >&2; exit 1\n");
	snprintf(fake, sizeof(fake), "--modprobe=%s/modprobe", d);
	chmod(fake + 11, 0755);
	const char *argv[] = {bin(), "modprobe", fake, "nvmet", "nvmet_tcp", "../evil", NULL};
	ck_assert_int_eq(run(&r, argv), 0);
	ck_assert_ptr_nonnull(strstr(r.err, "\"module loaded\" module=\"nvmet\""));
	ck_assert_ptr_nonnull(strstr(r.err,
	                             "\"module not loaded\" module=\"nvmet_tcp\" "
	                             "error=\"modprobe: FATAL: Module nvmet_tcp not found\""));
	ck_assert_ptr_nonnull(strstr(r.err, "\"not a module name; skipped\" module=\"../evil\""));
	exec_result_free(&r);
	tu_rmtree(d);
}
END_TEST

/* An AGENT name given on the command line is echoed escaped: a control byte (here ESC, which a
 * terminal would act on) and a C1 byte never reach the output raw; nor in any other argument
 * the command line's messages echo. */
START_TEST(test_outage_commands_escape_the_agent_name)
{
	char d[256], store[300];
	struct exec_result r;
	snprintf(d, sizeof(d), "%s", tu_mkdtemp());
	snprintf(store, sizeof(store), "--store=dir:%s", d);
	const char *plan[] = {bin(), "outage-plan", "ag\x1b[2Jent", store, NULL};
	const char *status[] = {bin(), "outage-status",
	                        "ag\x07"
	                        "ent\xc2\x9b",
	                        store, NULL};
	const char *plugin[] = {bin(), "kubectl-pillar", "outage-plan", "x\ty", store, NULL};
	ck_assert_int_eq(run(&r, plan), 1);
	ck_assert_str_eq(r.err,
	                 "Error from server (Invalid): PillarAgent \"ag\\x1b[2Jent\": a name "
	                 "must consist of lower case alphanumeric characters, '-' or '.', "
	                 "and must start and end with an alphanumeric character\n");
	exec_result_free(&r);
	ck_assert_int_eq(run(&r, status), 1);
	ck_assert_ptr_nonnull(strstr(r.err, "PillarAgent \"ag\\x07ent\\xc2\\x9b\": a name"));
	exec_result_free(&r);
	ck_assert_int_eq(run(&r, plugin), 1);
	ck_assert_ptr_nonnull(strstr(r.err, "PillarAgent \"x\\ty\": a name"));
	exec_result_free(&r);
	/* and every other argument a message echoes: a value, a flag, a command, a role */
	const struct {
		const char *argv[6], *want;
	} echo[] = {
	    {{bin(), "outage-plan", "x", "-o", "\x1b[2J", NULL},
	     "pillar-csi outage-plan: -o takes json or yaml, not \"\\x1b[2J\"\n"},
	    {{bin(), "outage-plan", "x", "--duration=\x07", NULL},
	     "pillar-csi outage-plan: --duration takes a duration such as 10m or 1h30m, not "
	     "\"\\x07\"\n"},
	    {{bin(), "outage-status", "x", "--\x1b[2J", NULL},
	     "pillar-csi outage-status: unknown flag \"--\\x1b[2J\"; accepted: "},
	    {{bin(), "kubectl-pillar", "out\x1b[2Jage", NULL},
	     "kubectl pillar: unknown command \"out\\x1b[2Jage\"\n"},
	    {{bin(), "--\x1b[2J", NULL}, "pillar-csi: unknown flag \"--\\x1b[2J\" before the role"},
	    {{bin(), "ro\x1b[2Jle", NULL}, "pillar-csi: unknown role \"ro\\x1b[2Jle\""},
	    {{bin(), "controller", "--leader-elect=\x1b[2J", NULL},
	     "pillar-csi controller: --leader-elect takes true or false, not \"\\x1b[2J\"\n"},
	};
	for (size_t i = 0; i < sizeof(echo) / sizeof(echo[0]); i++) {
		ck_assert_int_eq(run(&r, echo[i].argv), 2);
		ck_assert_msg(!strncmp(r.err, echo[i].want, strlen(echo[i].want)) &&
		                  !strchr(r.err, '\x1b') && !strchr(r.err, '\x07'),
		              "%zu: %s", i, r.err);
		exec_result_free(&r);
	}
	tu_rmtree(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("applets");
	TCase *t = tcase_create("dispatch");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_find_by_argv0_and_subcommand);
	tcase_add_test(t, test_binary_usage_errors);
	tcase_add_test(t, test_binary_help_and_version_on_every_role);
	tcase_add_test(t, test_binary_by_symlink);
	tcase_add_test(t, test_binary_version_json);
	tcase_add_test(t, test_modprobe_always_exits_zero);
	tcase_add_test(t, test_outage_commands_escape_the_agent_name);
	suite_add_tcase(s, t);
	return tu_run(s);
}
