#include "node/fs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exec.h"
#include "base/log.h"
#include "rules/mkfs.h"

#define TOOL_TIMEOUT_MS (10 * 60 * 1000) /* mkfs of a large volume can take minutes */

int node_fs_probe(const char *dev, const char *volume_id, int *blank, char *type, size_t cap,
                  struct grpc_status *st)
{
	const char *argv[] = {"blkid", "-p", "-o", "export", dev, NULL};
	struct exec_opts o = {.timeout_ms = 60000};
	struct exec_result res = {0};
	struct err e = {0};
	int r = exec_run(argv, &o, &res, &e), code;
	char *line, *sp = NULL;
	bool pt = false;

	*blank = 0;
	type[0] = '\0';
	if (r < 0) {
		code = grpc_status_set(st, GRPC_INTERNAL, "probe %s with blkid: %s", dev, e.msg);
		goto out;
	}
	if (res.exit_code == 2) {
		*blank = 1;
		code = GRPC_OK;
		goto out;
	}
	if (res.exit_code != 0) {
		code =
		    grpc_status_set(st, GRPC_INTERNAL, "probe %s with blkid failed (exit %d): %s",
		                    dev, res.exit_code, exec_result_summary(&res));
		goto out;
	}
	for (line = strtok_r(res.out, "\n", &sp); line; line = strtok_r(NULL, "\n", &sp)) {
		if (!strncmp(line, "TYPE=", 5))
			snprintf(type, cap, "%s", line + 5);
		else if (!strncmp(line, "PTTYPE=", 7))
			pt = true;
	}
	if (type[0])
		code = GRPC_OK;
	else if (pt)
		code =
		    grpc_status_set(st, GRPC_FAILED_PRECONDITION,
		                    "volume \"%s\" contains a partition table; refusing to format "
		                    "or mount it",
		                    volume_id);
	else
		code = grpc_status_set(st, GRPC_INTERNAL,
		                       "probe %s with blkid: exit 0 without TYPE= or PTTYPE=", dev);
out:
	exec_result_free(&res);
	return code;
}

static int run_tool(const char *const *argv, const char *what, struct grpc_status *st)
{
	struct exec_opts o = {.timeout_ms = TOOL_TIMEOUT_MS};
	struct exec_result res = {0};
	struct err e = {0};
	int r = exec_run(argv, &o, &res, &e), code = GRPC_OK;
	if (r < 0)
		code = grpc_status_set(st, GRPC_INTERNAL, "%s: %s", what, e.msg);
	else if (res.exit_code != 0)
		code = grpc_status_set(st, GRPC_INTERNAL, "%s failed (exit %d): %s", what,
		                       res.exit_code, exec_result_summary(&res));
	exec_result_free(&res);
	return code;
}

/* Whether the installed mkfs.xfs knows -i nrext64 (its usage text lists the option). */
static bool xfs_knows_nrext64(void)
{
	const char *argv[] = {"mkfs.xfs", NULL};
	struct exec_opts o = {.timeout_ms = 10000};
	struct exec_result res = {0};
	bool yes = false;
	if (exec_run(argv, &o, &res, NULL) == 0)
		yes = strstr(res.err, "nrext64") || strstr(res.out, "nrext64");
	exec_result_free(&res);
	return yes;
}

int node_fs_mkfs(const char *fs, char *const *opts, size_t n, const char *dev,
                 struct grpc_status *st)
{
	const char **argv = calloc(n + 16, sizeof(*argv));
	struct err e = {0};
	size_t a = 0, i, bad;
	char what[512];
	int code;

	if (!argv)
		return grpc_status_oom(st);
	if (rules_mkfs_check(fs, (const char *const *)opts, n, &bad, &e) < 0) {
		free(argv);
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s", e.msg);
	}
	if (!strcmp(fs, "ext4")) {
		argv[a++] = "mkfs.ext4";
		argv[a++] = "-q";
		argv[a++] = "-F";
	} else if (!strcmp(fs, "xfs")) {
		argv[a++] = "mkfs.xfs";
		argv[a++] = "-q";
		argv[a++] = "-m";
		argv[a++] = "bigtime=0,crc=1,finobt=1,inobtcount=0,reflink=1,rmapbt=0";
		argv[a++] = "-i";
		argv[a++] = "sparse=1";
		if (xfs_knows_nrext64()) {
			argv[a++] = "-i";
			argv[a++] = "nrext64=0";
		}
	} else {
		free(argv);
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "unsupported fsType \"%s\"", fs);
	}
	for (i = 0; i < n; i++)
		argv[a++] = opts[i];
	argv[a++] = dev;
	argv[a] = NULL;
	snprintf(what, sizeof(what), "format %s as %s", dev, fs);
	log_info("formatting blank device", "device", dev, "fsType", fs);
	code = run_tool(argv, what, st);
	free(argv);
	return code;
}

int node_fs_grow(const char *fs, const char *dev, const char *mountpoint, struct grpc_status *st)
{
	char what[512];
	if (!strcmp(fs, "xfs")) {
		const char *argv[] = {"xfs_growfs", mountpoint, NULL};
		snprintf(what, sizeof(what), "xfs_growfs %s", mountpoint);
		return run_tool(argv, what, st);
	}
	const char *argv[] = {"resize2fs", dev, NULL};
	snprintf(what, sizeof(what), "resize2fs %s", dev);
	return run_tool(argv, what, st);
}
