/* LVM logical volumes, linear and thin, through the lvm CLIs (agent-api.md §5.2).  Every
 * command carries the --config that keeps LVM away from udev and from tenant data. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/exec.h"

#define LVM_CONFIG BACKEND_LVM_CONFIG

#define LV_MAX 400

static int vg_lv(const backend *b, const char *lv, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", b->cfg.pool, lv);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

#define VGLV_OR_FAIL(b, lv, out)                                                          \
	do {                                                                              \
		if (vg_lv(b, lv, out, sizeof(out)) < 0)                                   \
			return err_set(e, -EINVAL, "LV name for \"%s\" is too long", lv); \
	} while (0)

int backend_lvm_name_check(const char *what, const char *name, const char *lv, struct err *e)
{
	static const char *const prefixes[] = {"snapshot", "pvmove"};
	static const char *const infixes[] = {"_cdata",   "_cmeta", "_corig",  "_cpool", "_cvol",
	                                      "_imeta",   "_iorig", "_mimage", "_mlog",  "_pmspare",
	                                      "_rimage",  "_rmeta", "_tdata",  "_tmeta", "_vdata",
	                                      "_vorigin", "_wcorig"};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(lv, prefixes[i], strlen(prefixes[i])))
			return err_set(e, -EINVAL,
			               "%s name \"%s\": LVM reserves LV names that begin with "
			               "\"%s\"; choose another name",
			               what, name, prefixes[i]);
	for (size_t i = 0; i < sizeof(infixes) / sizeof(infixes[0]); i++)
		if (strstr(lv, infixes[i]))
			return err_set(e, -EINVAL,
			               "%s name \"%s\": LVM reserves LV names that contain \"%s\"; "
			               "choose another name",
			               what, name, infixes[i]);
	return 0;
}

static int run(backend *b, const char *const argv[], struct exec_result *res, struct err *e)
{
	return backend_run(b, argv, res, e);
}

static int lvm_size(backend *b, const char *name, int64_t *bytes, struct err *e)
{
	char vl[LV_MAX];
	struct exec_result res;
	VGLV_OR_FAIL(b, name, vl);
	const char *argv[] = {"lvs",        "--config", LVM_CONFIG, "--noheadings",
	                      "--nosuffix", "--units",  "b",        "-o",
	                      "lv_size",    vl,         NULL};
	int r = run(b, argv, &res, e);
	if (r == 0 && backend_parse_i64(res.out, bytes) < 0)
		r = err_set(e, -EIO, "lvs %s: unexpected output \"%s\"", vl, res.out);
	exec_result_free(&res);
	return r;
}

static int lvm_create(backend *b, const char *name, int64_t bytes,
                      const struct backend_create_opts *o, struct err *e)
{
	char size[24];
	int r = backend_lvm_name_check("volume", name, name, e);
	if (r < 0)
		return r;
	snprintf(size, sizeof(size), "%lldb", (long long)bytes);
	if (o && o->thin) {
		if (!b->cfg.thin_pool || !*b->cfg.thin_pool)
			return err_set(e, -EINVAL,
			               "volume group \"%s\" has no thin pool configured",
			               b->cfg.pool);
		const char *argv[] = {"lvcreate", "--config", LVM_CONFIG,   "-y",
		                      "-V",       size,       "--thinpool", b->cfg.thin_pool,
		                      "-n",       name,       b->cfg.pool,  NULL};
		r = backend_run_discard(b, argv, e);
	} else {
		const char *argv[] = {"lvcreate", "--config", LVM_CONFIG,  "-y", "--wipesignatures",
		                      "y",        "--zero",   "y",         "-L", size,
		                      "-n",       name,       b->cfg.pool, NULL};
		r = backend_run_discard(b, argv, e);
	}
	return r;
}

static int lvm_expand(backend *b, const char *name, int64_t bytes, struct err *e)
{
	char vl[LV_MAX], size[24];
	VGLV_OR_FAIL(b, name, vl);
	snprintf(size, sizeof(size), "%lldb", (long long)bytes);
	const char *argv[] = {"lvextend", "--config", LVM_CONFIG, "-L", size, vl, NULL};
	return backend_run_discard(b, argv, e);
}

static int lvm_destroy(backend *b, const char *name, struct err *e)
{
	char vl[LV_MAX];
	VGLV_OR_FAIL(b, name, vl);
	const char *argv[] = {"lvremove", "--config", LVM_CONFIG, "-y", vl, NULL};
	return backend_run_discard(b, argv, e);
}

static int lvm_activate(backend *b, const char *name, struct err *e)
{
	char vl[LV_MAX];
	VGLV_OR_FAIL(b, name, vl);
	const char *argv[] = {"lvchange", "--config", LVM_CONFIG, "-ay", vl, NULL};
	return backend_run_discard(b, argv, e);
}

/* Two whitespace-separated numbers (the second may be a decimal percentage). */
static int two_fields(char *s, char **a, char **b2)
{
	char *save = NULL;
	*a = strtok_r(s, " \t\n", &save);
	*b2 = *a ? strtok_r(NULL, " \t\n", &save) : NULL;
	return *a && *b2 ? 0 : -EIO;
}

static int lvm_capacity(backend *b, int64_t *total, int64_t *avail, struct err *e)
{
	struct exec_result res;
	char *f1, *f2, vl[LV_MAX];
	int r;
	if (b->cfg.thin_default && b->cfg.thin_pool && *b->cfg.thin_pool) {
		VGLV_OR_FAIL(b, b->cfg.thin_pool, vl);
		const char *argv[] = {
		    "lvs",     "--config", LVM_CONFIG, "--noheadings",         "--nosuffix",
		    "--units", "b",        "-o",       "lv_size,data_percent", vl,
		    NULL};
		r = run(b, argv, &res, e);
		if (r == 0) {
			char *end;
			double pct;
			if (two_fields(res.out, &f1, &f2) < 0 || backend_parse_i64(f1, total) < 0 ||
			    (pct = strtod(f2, &end), end == f2) || pct < 0 || pct > 100)
				r = err_set(e, -EIO, "lvs %s: unexpected output", vl);
			else
				*avail = (int64_t)((double)*total * (100.0 - pct) / 100.0);
		}
	} else {
		const char *argv[] = {
		    "vgs", "--config", LVM_CONFIG,        "--noheadings", "--nosuffix", "--units",
		    "b",   "-o",       "vg_size,vg_free", b->cfg.pool,    NULL};
		r = run(b, argv, &res, e);
		if (r == 0 &&
		    (two_fields(res.out, &f1, &f2) < 0 || backend_parse_i64(f1, total) < 0 ||
		     backend_parse_i64(f2, avail) < 0))
			r = err_set(e, -EIO, "vgs %s: unexpected output", b->cfg.pool);
	}
	exec_result_free(&res);
	return r;
}

static int lvm_list(backend *b, struct backend_vol **out, size_t *n, struct err *e)
{
	struct exec_result res;
	struct backend_vol_list l = {0};
	*out = NULL;
	*n = 0;
	const char *argv[] = {"lvs",
	                      "--config",
	                      LVM_CONFIG,
	                      "--noheadings",
	                      "--nosuffix",
	                      "--units",
	                      "b",
	                      "-o",
	                      "lv_name,lv_size,pool_lv",
	                      b->cfg.pool,
	                      NULL};
	int r = run(b, argv, &res, e);
	for (char *save = NULL, *line = r == 0 ? strtok_r(res.out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *s2 = NULL, *name = strtok_r(line, " \t", &s2),
		     *size = strtok_r(NULL, " \t", &s2);
		/* "[…]" hidden LVs, "<snap>.snap" snapshots (lvm_snap.c) */
		if (!name || !size || name[0] == '[' || strchr(name, '.') ||
		    (b->cfg.thin_pool && strcmp(name, b->cfg.thin_pool) == 0))
			continue;
		if ((r = backend_vol_list_add_text(&l, name, size, e)) < 0)
			break;
	}
	exec_result_free(&res);
	return backend_vol_list_finish(&l, r, out, n);
}

static int lvm_device_path(const backend *b, const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s/%s", b->dev_root, b->cfg.pool, name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

const struct backend_ops backend_lvm_ops = {
    .create = lvm_create,
    .destroy = lvm_destroy,
    .expand = lvm_expand,
    .size = lvm_size,
    .capacity = lvm_capacity,
    .list = lvm_list,
    .device_path = lvm_device_path,
    .activate = lvm_activate,
    .snap_create = backend_lvm_snap_create,
    .snap_destroy = backend_lvm_snap_destroy,
    .snap_find = backend_lvm_snap_find,
    .snap_list = backend_lvm_snap_list,
    .clone = backend_lvm_clone,
};
