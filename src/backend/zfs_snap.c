/* ZFS snapshots and clones (docs/snapshots.md "Agent API").
 *
 * Names beneath <base> = <pool>[/<parentDataset>]:
 *   <base>/<vol>@<snap>          snapshot <pool>/<snap>, taken of volume <pool>/<vol>
 *   <base>/<vol>@_clone.<new>    the hidden snapshot that volume <new>, a clone of the live
 *                                volume <vol>, is made from (owned by <new>)
 *   <base>/_held/<vol>.<n>       a deleted volume that snapshots still live on
 * Volume and snapshot names never start with "_" (agent-api.md §5.1), so no hidden name
 * collides with one a caller chooses, and ListVolumes / ListSnapshots never show them.
 *
 * The origin dependency.  A snapshot with clones is destroyed deferred (`zfs destroy -d`): ZFS
 * keeps it, marked defer_destroy, until its last clone goes; it counts as gone at once (find
 * and list skip it).  A volume with snapshots is renamed into _held instead of destroyed, and
 * destroyed by the sweep once no snapshot lives on it.  Decision — hold, not `zfs promote`:
 * promote moves the origin snapshot and every older one to the clone (their owner and name
 * change, and the clone then carries snapshots of another volume); the rename moves none of
 * them to another volume, never touches a clone (ZFS follows the rename in each clone's origin
 * property), and frees the volume's name at once.  A snapshot is always found by its name
 * beneath <base>, never by its dataset, so it keeps its ID, source, size and creation time
 * while its source is held.
 *
 * The sweep (after every DeleteVolume and DeleteSnapshot) destroys hidden snapshots without
 * clones and held volumes without snapshots, so a kill at any step leaves nothing behind that
 * the next sweep does not remove. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "base/exec.h"

#define HELD       "_held"
#define CLONE_SNAP "_clone."

/* One line of `zfs list -t snapshot -o name,volsize,creation,defer_destroy,clones`. */
struct zsnap {
	char *ds, *snap;       /* into the listing's text */
	char vol[132];         /* the volume it was taken of */
	bool held;             /* that volume was deleted */
	bool deferred, clones; /* defer_destroy=on; has clones */
	int64_t size, created;
};

struct zlisting {
	struct exec_result res;
	struct zsnap *s;
	size_t n;
};

static void zlisting_free(struct zlisting *l)
{
	exec_result_free(&l->res);
	free(l->s);
	memset(l, 0, sizeof(*l));
}

/* Splits a line into at most n tab-separated fields; the count found. */
static size_t fields(char *line, char **f, size_t n)
{
	size_t i = 0;
	while (i < n) {
		f[i++] = line;
		line = strchr(line, '\t');
		if (!line)
			break;
		*line++ = '\0';
	}
	return i;
}

/* The volume name a snapshot's dataset belongs to, or false when the dataset is not one of
 * the pool's volumes (rel is the dataset beneath <base>/). */
static bool volume_of(const char *rel, struct zsnap *z)
{
	z->held = strncmp(rel, HELD "/", sizeof(HELD)) == 0;
	if (z->held)
		rel += sizeof(HELD);
	size_t len = z->held ? strcspn(rel, ".") : strlen(rel);
	if (len == 0 || len >= sizeof(z->vol) || memchr(rel, '/', len) ||
	    (z->held && rel[len] != '.'))
		return false;
	memcpy(z->vol, rel, len);
	z->vol[len] = '\0';
	return true;
}

static int parse_line(char *line, const char *base, size_t blen, struct zsnap *z)
{
	char *f[5];
	memset(z, 0, sizeof(*z));
	if (fields(line, f, 5) != 5 || strncmp(f[0], base, blen) != 0 || f[0][blen] != '/')
		return -1;
	char *at = strchr(f[0], '@');
	if (!at)
		return -1;
	*at = '\0';
	z->ds = f[0];
	z->snap = at + 1;
	if (!volume_of(f[0] + blen + 1, z) || backend_parse_i64(f[1], &z->size) < 0 ||
	    backend_parse_i64(f[2], &z->created) < 0)
		return -1;
	z->deferred = strcmp(f[3], "on") == 0;
	z->clones = f[4][0] && strcmp(f[4], "-") != 0;
	return 0;
}

/* Every snapshot beneath <base> (the caller frees l with zlisting_free in every case). */
static int zlist(backend *b, struct zlisting *l, struct err *e)
{
	char base[BACKEND_DS_MAX];
	size_t cap = 0;
	memset(l, 0, sizeof(*l));
	if (backend_zfs_base(b, base, sizeof(base)) < 0)
		return err_set(e, -EINVAL, "dataset name too long");
	const char *argv[] = {"zfs",
	                      "list",
	                      "-Hp",
	                      "-t",
	                      "snapshot",
	                      "-o",
	                      "name,volsize,creation,defer_destroy,clones",
	                      "-r",
	                      base,
	                      NULL};
	int r = backend_run(b, argv, &l->res, e);
	if (r < 0)
		return r;
	size_t blen = strlen(base);
	for (char *save = NULL, *line = strtok_r(l->res.out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct zsnap z;
		if (parse_line(line, base, blen, &z) < 0)
			continue;
		if (l->n == cap) {
			cap = cap ? 2 * cap : 16;
			struct zsnap *grown = realloc(l->s, cap * sizeof(*grown));
			if (!grown)
				return err_set(e, -ENOMEM, "out of memory");
			l->s = grown;
		}
		l->s[l->n++] = z;
	}
	return 0;
}

/* A visible snapshot: not hidden, not destroyed deferred. */
static bool visible(const struct zsnap *z)
{
	return z->snap[0] != '_' && !z->deferred;
}

static void fill(const struct zsnap *z, struct backend_snap *info)
{
	if (!info)
		return;
	snprintf(info->name, sizeof(info->name), "%s", z->snap);
	snprintf(info->source, sizeof(info->source), "%s", z->vol);
	info->size = z->size;
	info->created = z->created;
}

/* The snapshot named snap (visible or deferred; NULL when none). */
static const struct zsnap *lookup(const struct zlisting *l, const char *snap)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->s[i].snap, snap) == 0)
			return &l->s[i];
	return NULL;
}

int backend_zfs_snap_find(backend *b, const char *snap, struct backend_snap *info, struct err *e)
{
	struct zlisting l;
	int r = zlist(b, &l, e);
	const struct zsnap *z = r == 0 ? lookup(&l, snap) : NULL;
	if (r == 0 && (!z || !visible(z)))
		r = err_set(e, -ENOENT, "snapshot \"%s\" does not exist", snap);
	if (r == 0)
		fill(z, info);
	zlisting_free(&l);
	return r;
}

int backend_zfs_snap_list(backend *b, struct backend_snap **out, size_t *n, struct err *e)
{
	struct zlisting l;
	*out = NULL;
	*n = 0;
	int r = zlist(b, &l, e);
	if (r == 0 && l.n && !(*out = calloc(l.n, sizeof(**out))))
		r = err_set(e, -ENOMEM, "out of memory");
	for (size_t i = 0; r == 0 && i < l.n; i++)
		if (visible(&l.s[i]))
			fill(&l.s[i], &(*out)[(*n)++]);
	zlisting_free(&l);
	return r;
}

/* The creation time and size of the snapshot just taken. */
static int snap_read(backend *b, const char *full, const char *snap, const char *source,
                     struct backend_snap *info, struct err *e)
{
	struct exec_result res;
	struct backend_snap s = {0};
	const char *argv[] = {"zfs", "get", "-Hpo", "value", "creation,volsize", full, NULL};
	int r = backend_run(b, argv, &res, e);
	char *nl = r == 0 ? strchr(res.out, '\n') : NULL;
	if (r == 0 && (!nl || (*nl = '\0', backend_parse_i64(res.out, &s.created)) < 0 ||
	               backend_parse_i64(nl + 1, &s.size) < 0))
		r = err_set(e, -EIO, "zfs get creation,volsize %s: unexpected output", full);
	exec_result_free(&res);
	snprintf(s.name, sizeof(s.name), "%s", snap);
	snprintf(s.source, sizeof(s.source), "%s", source);
	if (r == 0 && info)
		*info = s;
	return r;
}

int backend_zfs_snap_create(backend *b, const char *snap, const char *source,
                            struct backend_snap *info, struct err *e)
{
	char ds[BACKEND_DS_MAX], full[BACKEND_DS_MAX + 140];
	struct zlisting l;
	if (backend_zfs_dataset(b, source, ds, sizeof(ds)) < 0 ||
	    snprintf(full, sizeof(full), "%s@%s", ds, snap) >= (int)sizeof(full))
		return err_set(e, -EINVAL, "snapshot name for \"%s\" is too long", snap);
	int r = zlist(b, &l, e);
	const struct zsnap *z = r == 0 ? lookup(&l, snap) : NULL;
	if (z && (z->held || z->deferred || strcmp(z->vol, source) != 0))
		r = err_set(e, -EEXIST, "snapshot \"%s\" exists of volume \"%s\"%s", snap, z->vol,
		            z->deferred ? " (deleted, clones still depend on it)" : "");
	else if (z)
		fill(z, info);
	zlisting_free(&l);
	if (r < 0 || z)
		return r;
	const char *argv[] = {"zfs", "snapshot", full, NULL};
	if ((r = backend_run_discard(b, argv, e)) < 0)
		return r;
	return snap_read(b, full, snap, source, info, e);
}

int backend_zfs_snap_destroy(backend *b, const char *snap, struct err *e)
{
	char full[BACKEND_DS_MAX + 140];
	struct zlisting l;
	int r = zlist(b, &l, e);
	const struct zsnap *z = r == 0 ? lookup(&l, snap) : NULL;
	bool destroy = z && !z->deferred;
	if (destroy)
		snprintf(full, sizeof(full), "%s@%s", z->ds, z->snap);
	zlisting_free(&l);
	if (r < 0 || !destroy)
		return r;
	const char *argv[] = {"zfs", "destroy", "-d", full, NULL};
	r = backend_run_discard(b, argv, e);
	return r == -ENOENT ? 0 : r;
}

/* zfs clone -o volmode=dev [-o k=v …] origin ds; volblocksize is the origin's and cannot be
 * set on a clone, so it is left out. */
static int zfs_clone_cmd(backend *b, const char *origin, const char *ds,
                         const struct backend_create_opts *o, struct err *e)
{
	size_t n = 0, np = o ? o->n_props : 0;
	bool has_volmode = false;
	const char **argv = calloc(8 + 2 * np, sizeof(char *));
	if (!argv)
		return err_set(e, -ENOMEM, "out of memory");
	argv[n++] = "zfs";
	argv[n++] = "clone";
	for (size_t i = 0; i < np; i++)
		has_volmode |= strncmp(o->props[i], "volmode=", 8) == 0;
	if (!has_volmode) {
		argv[n++] = "-o";
		argv[n++] = "volmode=dev";
	}
	for (size_t i = 0; i < np; i++)
		if (strncmp(o->props[i], "volblocksize=", 13) != 0) {
			argv[n++] = "-o";
			argv[n++] = o->props[i];
		}
	argv[n++] = origin;
	argv[n++] = ds;
	argv[n] = NULL;
	struct exec_result res;
	int r = backend_run(b, argv, &res, e);
	if (r == -EIO && res.err && strstr(res.err, "already exists"))
		r = -EEXIST;
	exec_result_free(&res);
	free(argv);
	return r;
}

/* The snapshot a new volume is cloned from, in origin, and its size: a snapshot by name, or a
 * hidden snapshot of a live volume taken now (one left by an earlier try is used again). */
static int origin_of(backend *b, const char *name, enum backend_source kind, const char *source,
                     char *origin, size_t cap, int64_t *size, struct err *e)
{
	char ds[BACKEND_DS_MAX];
	int r;
	if (kind == BACKEND_FROM_SNAPSHOT) {
		struct zlisting l;
		r = zlist(b, &l, e);
		const struct zsnap *z = r == 0 ? lookup(&l, source) : NULL;
		if (r == 0 && (!z || !visible(z)))
			r = err_set(e, -ENOENT, "snapshot \"%s\" does not exist", source);
		if (r == 0) {
			snprintf(origin, cap, "%s@%s", z->ds, z->snap);
			*size = z->size;
		}
		zlisting_free(&l);
		return r;
	}
	if (backend_zfs_dataset(b, source, ds, sizeof(ds)) < 0 ||
	    snprintf(origin, cap, "%s@" CLONE_SNAP "%s", ds, name) >= (int)cap)
		return err_set(e, -EINVAL, "snapshot name for \"%s\" is too long", name);
	if ((r = b->ops->size(b, source, size, e)) < 0)
		return r;
	const char *argv[] = {"zfs", "snapshot", origin, NULL};
	struct exec_result res;
	r = backend_run(b, argv, &res, e);
	if (r == -EIO && res.err && strstr(res.err, "already exists"))
		r = 0;
	exec_result_free(&res);
	return r;
}

int backend_zfs_clone(backend *b, const char *name, enum backend_source kind, const char *source,
                      int64_t bytes, const struct backend_create_opts *o, struct err *e)
{
	char ds[BACKEND_DS_MAX], origin[BACKEND_DS_MAX + 140];
	int64_t size;
	if (backend_zfs_dataset(b, name, ds, sizeof(ds)) < 0)
		return err_set(e, -EINVAL, "dataset name for \"%s\" is too long", name);
	int r = origin_of(b, name, kind, source, origin, sizeof(origin), &size, e);
	if (r == 0)
		r = zfs_clone_cmd(b, origin, ds, o, e);
	if (r == 0 && bytes > size)
		r = b->ops->expand(b, name, bytes, e);
	return r;
}

int backend_zfs_hold(backend *b, const char *name, struct err *e)
{
	char base[BACKEND_DS_MAX], ds[BACKEND_DS_MAX], held[BACKEND_DS_MAX + 64];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (backend_zfs_base(b, base, sizeof(base)) < 0 ||
	    backend_zfs_dataset(b, name, ds, sizeof(ds)) < 0 ||
	    snprintf(held, sizeof(held), "%s/" HELD "/%s.%lld%09ld", base, name,
	             (long long)ts.tv_sec, (long)ts.tv_nsec) >= (int)sizeof(held))
		return err_set(e, -EINVAL, "dataset name for \"%s\" is too long", name);
	char parent[BACKEND_DS_MAX + 8];
	snprintf(parent, sizeof(parent), "%s/" HELD, base);
	const char *mk[] = {"zfs", "create", "-p", "-o", "canmount=off", parent, NULL};
	const char *mv[] = {"zfs", "rename", ds, held, NULL};
	struct exec_result res;
	int r = backend_run(b, mk, &res, e);
	if (r == -EIO && res.err && strstr(res.err, "already exists"))
		r = 0;
	exec_result_free(&res);
	return r < 0 ? r : backend_run_discard(b, mv, e);
}

/* One pass of the sweep: destroys hidden snapshots without clones, then held volumes without
 * snapshots.  *done counts what it destroyed. */
static int sweep_pass(backend *b, int *done, struct err *e)
{
	char base[BACKEND_DS_MAX], parent[BACKEND_DS_MAX + 8], full[BACKEND_DS_MAX + 140];
	struct zlisting l;
	struct exec_result res;
	int r = zlist(b, &l, e);
	for (size_t i = 0; r == 0 && i < l.n; i++) {
		struct zsnap *z = &l.s[i];
		if (z->snap[0] != '_' || z->clones || z->deferred)
			continue;
		snprintf(full, sizeof(full), "%s@%s", z->ds, z->snap);
		const char *argv[] = {"zfs", "destroy", "-d", full, NULL};
		if ((r = backend_run_discard(b, argv, e)) == 0)
			(*done)++, z->deferred = true; /* gone: no clones */
	}
	if (r < 0 || backend_zfs_base(b, base, sizeof(base)) < 0) {
		zlisting_free(&l);
		return r;
	}
	snprintf(parent, sizeof(parent), "%s/" HELD, base);
	const char *argv[] = {"zfs",    "list", "-Hpo", "name", "-t",
	                      "volume", "-d",   "1",    parent, NULL};
	r = backend_run(b, argv, &res, e);
	bool none = r == -ENOENT || !res.out; /* no volume was ever held */
	if (r == -ENOENT)
		r = 0;
	for (char *save = NULL, *line = r == 0 && !none ? strtok_r(res.out, "\n", &save) : NULL;
	     line; line = strtok_r(NULL, "\n", &save)) {
		bool lives = false;
		for (size_t i = 0; i < l.n && !lives; i++)
			lives =
			    strcmp(l.s[i].ds, line) == 0 && !(l.s[i].deferred && !l.s[i].clones);
		if (lives || strncmp(line, parent, strlen(parent)) != 0)
			continue;
		const char *rm[] = {"zfs", "destroy", line, NULL};
		if ((r = backend_run_discard(b, rm, e)) == 0)
			(*done)++;
	}
	exec_result_free(&res);
	zlisting_free(&l);
	return r;
}

int backend_zfs_sweep(backend *b, struct err *e)
{
	/* a held volume destroyed may leave its own hidden origin without clones: a few passes */
	for (int pass = 0; pass < 4; pass++) {
		int done = 0, r = sweep_pass(b, &done, e);
		if (r < 0 || done == 0)
			return r;
	}
	return 0;
}
