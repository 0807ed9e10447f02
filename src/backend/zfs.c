/* ZFS zvols through the zfs CLI (agent-api.md §5.2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/exec.h"

/* <pool>[/<parent>] */
int backend_zfs_base(const backend *b, char *out, size_t cap)
{
	int n = b->cfg.parent_dataset && *b->cfg.parent_dataset
	            ? snprintf(out, cap, "%s/%s", b->cfg.pool, b->cfg.parent_dataset)
	            : snprintf(out, cap, "%s", b->cfg.pool);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int backend_zfs_dataset(const backend *b, const char *name, char *out, size_t cap)
{
	char base[BACKEND_DS_MAX];
	if (backend_zfs_base(b, base, sizeof(base)) < 0)
		return -ENAMETOOLONG;
	int n = snprintf(out, cap, "%s/%s", base, name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

#define DS_OR_FAIL(b, name, ds)                                                                  \
	do {                                                                                     \
		if (backend_zfs_dataset(b, name, ds, sizeof(ds)) < 0)                            \
			return err_set(e, -EINVAL, "dataset name for \"%s\" is too long", name); \
	} while (0)

/* zfs get -Hpo value <prop> <ds>: one integer property of a volume */
static int zfs_get_i64(backend *b, const char *name, const char *prop, int64_t *v, struct err *e)
{
	char ds[BACKEND_DS_MAX];
	struct exec_result res;
	DS_OR_FAIL(b, name, ds);
	const char *argv[] = {"zfs", "get", "-Hpo", "value", prop, ds, NULL};
	int r = backend_run(b, argv, &res, e);
	if (r == 0 && backend_parse_i64(res.out, v) < 0)
		r = err_set(e, -EIO, "zfs get %s %s: unexpected output \"%s\"", prop, ds, res.out);
	exec_result_free(&res);
	return r;
}

static int zfs_size(backend *b, const char *name, int64_t *bytes, struct err *e)
{
	return zfs_get_i64(b, name, "volsize", bytes, e);
}

static int zfs_granule(backend *b, const char *name, int64_t *bytes, struct err *e)
{
	return zfs_get_i64(b, name, "volblocksize", bytes, e);
}

static int zfs_create(backend *b, const char *name, int64_t bytes,
                      const struct backend_create_opts *o, struct err *e)
{
	char ds[BACKEND_DS_MAX], size[24];
	bool has_volmode = false;
	size_t n = 0, np = o ? o->n_props : 0;
	DS_OR_FAIL(b, name, ds);
	const char **argv = calloc(10 + 2 * np, sizeof(char *));
	if (!argv)
		return err_set(e, -ENOMEM, "out of memory");
	snprintf(size, sizeof(size), "%lld", (long long)bytes);
	argv[n++] = "zfs";
	argv[n++] = "create";
	argv[n++] = "-p";
	argv[n++] = "-V";
	argv[n++] = size;
	for (size_t i = 0; i < np; i++)
		has_volmode |= strncmp(o->props[i], "volmode=", 8) == 0;
	if (!has_volmode) {
		argv[n++] = "-o";
		argv[n++] = "volmode=dev";
	}
	for (size_t i = 0; i < np; i++) {
		argv[n++] = "-o";
		argv[n++] = o->props[i];
	}
	argv[n++] = ds;
	argv[n] = NULL;
	int r = backend_run_discard(b, argv, e);
	free(argv);
	return r;
}

/* zfs create rounds -V up to the volblocksize itself, zfs set volsize refuses a size that is no
 * multiple of it: the new size is rounded up here (-ERANGE when that leaves int64_t). */
static int zfs_expand(backend *b, const char *name, int64_t bytes, struct err *e)
{
	char ds[BACKEND_DS_MAX], prop[40];
	int64_t g;
	DS_OR_FAIL(b, name, ds);
	int r = zfs_granule(b, name, &g, e);
	if (r < 0)
		return r;
	int64_t rounded = bytes;
	if (g > 0 && bytes % g && __builtin_add_overflow(bytes, g - bytes % g, &rounded))
		return err_set(e, -ERANGE,
		               "capacity %lld bytes cannot be rounded up to a multiple of the "
		               "volblocksize %lld of %s",
		               (long long)bytes, (long long)g, ds);
	bytes = rounded;
	snprintf(prop, sizeof(prop), "volsize=%lld", (long long)bytes);
	const char *argv[] = {"zfs", "set", prop, ds, NULL};
	return backend_run_discard(b, argv, e);
}

static int zfs_destroy(backend *b, const char *name, struct err *e)
{
	char ds[BACKEND_DS_MAX];
	struct exec_result res;
	DS_OR_FAIL(b, name, ds);
	const char *argv[] = {"zfs", "destroy", ds, NULL};
	int r = backend_run(b, argv, &res, e);
	/* "volume has children": snapshots of it still exist (docs/snapshots.md) */
	bool held = r == -EIO && res.err && strstr(res.err, "has children");
	exec_result_free(&res);
	return held ? backend_zfs_hold(b, name, e) : r;
}

static int zfs_capacity(backend *b, int64_t *total, int64_t *avail, struct err *e)
{
	char ds[BACKEND_DS_MAX];
	struct exec_result res;
	int64_t used = 0;
	if (backend_zfs_base(b, ds, sizeof(ds)) < 0)
		return err_set(e, -EINVAL, "dataset name too long");
	const char *argv[] = {"zfs", "get", "-Hpo", "value", "used,available", ds, NULL};
	int r = backend_run(b, argv, &res, e);
	if (r == 0) {
		char *nl = strchr(res.out, '\n');
		if (!nl || backend_parse_i64((*nl = '\0', res.out), &used) < 0 ||
		    backend_parse_i64(nl + 1, avail) < 0)
			r = err_set(e, -EIO, "zfs get used,available %s: unexpected output", ds);
		else if (__builtin_add_overflow(used, *avail, total))
			*total = INT64_MAX; /* a pool larger than int64_t bytes */
	}
	exec_result_free(&res);
	return r;
}

static int zfs_list(backend *b, struct backend_vol **out, size_t *n, struct err *e)
{
	char ds[BACKEND_DS_MAX];
	struct exec_result res;
	size_t blen;
	struct backend_vol_list l = {0};
	*out = NULL;
	*n = 0;
	if (backend_zfs_base(b, ds, sizeof(ds)) < 0)
		return err_set(e, -EINVAL, "dataset name too long");
	blen = strlen(ds);
	const char *argv[] = {"zfs", "list", "-Hpo", "name,volsize", "-t", "volume", "-d",
	                      "1",   ds,     NULL};
	int r = backend_run(b, argv, &res, e);
	for (char *save = NULL, *line = r == 0 ? strtok_r(res.out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *tab = strchr(line, '\t');
		if (!tab || strncmp(line, ds, blen) != 0 || line[blen] != '/')
			continue;
		*tab = '\0';
		if ((r = backend_vol_list_add_text(&l, line + blen + 1, tab + 1, e)) < 0)
			break;
	}
	exec_result_free(&res);
	return backend_vol_list_finish(&l, r, out, n);
}

static int zfs_device_path(const backend *b, const char *name, char *out, size_t cap)
{
	char ds[BACKEND_DS_MAX];
	if (backend_zfs_dataset(b, name, ds, sizeof(ds)) < 0)
		return -ENAMETOOLONG;
	int n = snprintf(out, cap, "%s/zvol/%s", b->dev_root, ds);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

const struct backend_ops backend_zfs_ops = {
    .create = zfs_create,
    .destroy = zfs_destroy,
    .expand = zfs_expand,
    .size = zfs_size,
    .capacity = zfs_capacity,
    .list = zfs_list,
    .device_path = zfs_device_path,
    .activate = NULL,
    .granule = zfs_granule,
    .snap_create = backend_zfs_snap_create,
    .snap_destroy = backend_zfs_snap_destroy,
    .snap_find = backend_zfs_snap_find,
    .snap_list = backend_zfs_snap_list,
    .clone = backend_zfs_clone,
    .sweep = backend_zfs_sweep,
};
