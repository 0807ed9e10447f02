#include "node/fs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exec.h"
#include "base/log.h"

#define TOOL_TIMEOUT_MS (10 * 60 * 1000) /* mkfs of a large volume can take minutes */

int node_fs_probe(const char *dev, const char *volume_id, int *blank, char *type, size_t cap,
                  struct node_status *st)
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
		code = node_status_set(st, NODE_INTERNAL, "probe %s with blkid: %s", dev, e.msg);
		goto out;
	}
	if (res.exit_code == 2) {
		*blank = 1;
		code = NODE_OK;
		goto out;
	}
	if (res.exit_code != 0) {
		code =
		    node_status_set(st, NODE_INTERNAL, "probe %s with blkid failed (exit %d): %s",
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
		code = NODE_OK;
	else if (pt)
		code =
		    node_status_set(st, NODE_FAILED_PRECONDITION,
		                    "volume \"%s\" contains a partition table; refusing to format "
		                    "or mount it",
		                    volume_id);
	else
		code = node_status_set(st, NODE_INTERNAL,
		                       "probe %s with blkid: exit 0 without TYPE= or PTTYPE=", dev);
out:
	exec_result_free(&res);
	return code;
}

struct opt_rule {
	char flag;
	bool value;
	const char *subs; /* NULL: any value; else space-separated allowed items ("key=" or word) */
};

static const struct opt_rule ext4_rules[] = {
    {'j', false, NULL},
    {'q', false, NULL},
    {'b', true, NULL},
    {'C', true, NULL},
    {'e', true, NULL},
    {'E', true,
     "stride= stripe_width= stripe-width= resize= lazy_itable_init= "
     "lazy_journal_init= packed_meta_blocks= root_owner= discard nodiscard "
     "num_backup_sb= encoding= encoding_flags= quotatype= "
     "assume_storage_prezeroed="},
    {'g', true, NULL},
    {'G', true, NULL},
    {'i', true, NULL},
    {'I', true, NULL},
    {'J', true, "size="},
    {'L', true, NULL},
    {'m', true, NULL},
    {'M', true, NULL},
    {'N', true, NULL},
    {'O', true, NULL},
    {'T', true, NULL},
    {'U', true, NULL},
    {0, false, NULL}};

static const struct opt_rule xfs_rules[] = {
    {'K', false, NULL},
    {'q', false, NULL},
    {'b', true, "size="},
    {'s', true, "size="},
    {'m', true, "crc= finobt= rmapbt= reflink= bigtime= inobtcount= uuid="},
    {'d', true, "agcount= agsize= su= sw= sunit= swidth= noalign"},
    {'i', true, "size= maxpct= align= sparse= nrext64= projid32bit="},
    {'l', true, "size= version= sunit= su= lazy-count="},
    {'n', true, "size= version= ftype="},
    {'L', true, NULL},
    {0, false, NULL}};

static bool item_allowed(const char *item, size_t len, const char *subs)
{
	const char *eq = memchr(item, '=', len);
	const char *p = subs;
	while (*p) {
		const char *end = strchr(p, ' ');
		size_t l = end ? (size_t)(end - p) : strlen(p);
		if (p[l - 1] == '=') {
			if (eq && (size_t)(eq - item) + 1 == l && !strncmp(item, p, l))
				return true;
		} else if (!eq && len == l && !strncmp(item, p, l)) {
			return true;
		}
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

static bool value_allowed(const char *v, const char *subs)
{
	const char *p = v;
	if (!*v || v[0] == '-')
		return false;
	if (!subs)
		return true;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t l = end ? (size_t)(end - p) : strlen(p);
		if (!l || !item_allowed(p, l, subs))
			return false;
		if (!end)
			break;
		p = end + 1;
	}
	return true;
}

int node_mkfs_options_check(const char *fs, char *const *opts, size_t n, struct err *e)
{
	const struct opt_rule *rules = !strcmp(fs, "xfs") ? xfs_rules : ext4_rules;
	size_t i;
	for (i = 0; i < n; i++) {
		const char *o = opts[i];
		const struct opt_rule *r;
		if (o[0] != '-' || !o[1] || o[1] == '-')
			goto bad;
		for (r = rules; r->flag && r->flag != o[1]; r++)
			;
		if (!r->flag)
			goto bad;
		if (!r->value) {
			if (o[2])
				goto bad;
			continue;
		}
		if (o[2]) {
			if (!value_allowed(o + 2, r->subs))
				goto bad;
			continue;
		}
		if (i + 1 >= n || !value_allowed(opts[i + 1], r->subs)) {
			if (i + 1 < n) {
				o = opts[i + 1];
			}
			goto bad;
		}
		i++;
		continue;
	bad:
		return err_set(e, -EINVAL,
		               "filesystem.mkfsOptions: mkfs option \"%s\" is not allowed for %s",
		               o, fs);
	}
	return 0;
}

static int run_tool(const char *const *argv, const char *what, struct node_status *st)
{
	struct exec_opts o = {.timeout_ms = TOOL_TIMEOUT_MS};
	struct exec_result res = {0};
	struct err e = {0};
	int r = exec_run(argv, &o, &res, &e), code = NODE_OK;
	if (r < 0)
		code = node_status_set(st, NODE_INTERNAL, "%s: %s", what, e.msg);
	else if (res.exit_code != 0)
		code = node_status_set(st, NODE_INTERNAL, "%s failed (exit %d): %s", what,
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
                 struct node_status *st)
{
	const char **argv = calloc(n + 16, sizeof(*argv));
	struct err e = {0};
	size_t a = 0, i;
	char what[512];
	int code;

	if (!argv)
		return node_status_set(st, NODE_INTERNAL, "out of memory");
	if (node_mkfs_options_check(fs, opts, n, &e) < 0) {
		free(argv);
		return node_status_set(st, NODE_INVALID_ARGUMENT, "%s", e.msg);
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
		return node_status_set(st, NODE_INVALID_ARGUMENT, "unsupported fsType \"%s\"", fs);
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

int node_fs_grow(const char *fs, const char *dev, const char *mountpoint, struct node_status *st)
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
