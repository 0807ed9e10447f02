/* LVM thin snapshots and clones (docs/snapshots.md "Agent API").
 *
 * Snapshot <vg>/<snap> is the thin snapshot LV snap.<snap> (a "." never appears in a volume
 * name, agent-api.md §5.1, so ListVolumes leaves these out and no name collides; a prefix, not a
 * suffix, because LVM refuses LV names that begin with "snapshot" or "pvmove", and
 * csi-snapshotter names every snapshot "snapshot-<uid>"), tagged
 * pillar.source.<volume> with the volume it was taken of; it keeps LVM's activation skip flag,
 * so it is never active and never exported.  A restore or clone is a thin snapshot of the
 * snapshot or of the live volume with the skip flag off (-kn), activated read-write
 * (`lvchange -ay -K`).  Thin snapshots share blocks but do not depend on each other: any of
 * them, and the source, can be removed in any order.  A linear volume has no thin pool to
 * share blocks in: -EOPNOTSUPP "snapshots need a thin pool". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "base/exec.h"

#define SNAP_PREFIX "snap."
#define SOURCE_TAG  "pillar.source."
#define LV_MAX      400

/* <vg>/[prefix]<lv> */
static int lv_path(const backend *b, const char *prefix, const char *lv, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s%s", b->cfg.pool, prefix, lv);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* lv_time as lvs prints it, "2026-12-06 16:15:31 +0000", in Unix seconds. */
static int parse_time(const char *s, int64_t *out)
{
	struct tm tm = {0};
	char sign;
	int off;
	while (*s == ' ')
		s++;
	if (sscanf(s, "%d-%d-%d %d:%d:%d %c%4d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
	           &tm.tm_min, &tm.tm_sec, &sign, &off) != 8 ||
	    (sign != '+' && sign != '-'))
		return -EIO;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	int64_t t = (int64_t)timegm(&tm), secs = (off / 100) * 3600 + (off % 100) * 60;
	*out = sign == '+' ? t - secs : t + secs;
	return 0;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
		s[--n] = '\0';
	return s;
}

/* One line "name|size|time|tags" of lvs: a snapshot when name begins with snap. */
static int parse_snap(char *line, struct backend_snap *info)
{
	char *f[4], *save = NULL;
	for (int i = 0; i < 4; i++)
		if (!(f[i] = strtok_r(i ? NULL : line, "|\n", &save)) && i < 3)
			return -1;
	if (!f[3]) /* no tags */
		f[3] = "";
	char *name = trim(f[0]);
	size_t len = strlen(name), pl = strlen(SNAP_PREFIX);
	if (len <= pl || strncmp(name, SNAP_PREFIX, pl) != 0 || len - pl >= sizeof(info->name))
		return -1;
	memset(info, 0, sizeof(*info));
	memcpy(info->name, name + pl, len - pl);
	if (backend_parse_i64(f[1], &info->size) < 0 || parse_time(f[2], &info->created) < 0)
		return -1;
	for (char *s2 = NULL, *tag = strtok_r(trim(f[3]), ",", &s2); tag;
	     tag = strtok_r(NULL, ",", &s2))
		if (strncmp(tag, SOURCE_TAG, strlen(SOURCE_TAG)) == 0)
			snprintf(info->source, sizeof(info->source), "%s",
			         tag + strlen(SOURCE_TAG));
	return 0;
}

/* lvs of target (a VG or one LV): the columns, sizes in bytes, separated by '|'. */
static int lvs_columns(backend *b, const char *columns, const char *target, struct exec_result *res,
                       struct err *e)
{
	const char *argv[] = {"lvs",
	                      "--config",
	                      BACKEND_LVM_CONFIG,
	                      "--noheadings",
	                      "--nosuffix",
	                      "--units",
	                      "b",
	                      "--separator",
	                      "|",
	                      "-o",
	                      columns,
	                      target,
	                      NULL};
	return backend_run(b, argv, res, e);
}

/* lvs of target (a VG or one LV) with the snapshot columns. */
static int lvs_snaps(backend *b, const char *target, struct exec_result *res, struct err *e)
{
	return lvs_columns(b, "lv_name,lv_size,lv_time,lv_tags", target, res, e);
}

int backend_lvm_snap_find(backend *b, const char *snap, struct backend_snap *info, struct err *e)
{
	char vl[LV_MAX];
	struct exec_result res;
	struct backend_snap tmp;
	if (lv_path(b, SNAP_PREFIX, snap, vl, sizeof(vl)) < 0)
		return err_set(e, -EINVAL, "LV name for \"%s\" is too long", snap);
	int r = lvs_snaps(b, vl, &res, e);
	if (r == -ENOENT)
		r = err_set(e, -ENOENT, "snapshot \"%s\" does not exist", snap);
	else if (r == 0 && parse_snap(res.out, info ? info : &tmp) < 0)
		r = err_set(e, -EIO, "lvs %s: unexpected output", vl);
	exec_result_free(&res);
	return r;
}

int backend_lvm_snap_list(backend *b, struct backend_snap **out, size_t *n, struct err *e)
{
	struct exec_result res;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	int r = lvs_snaps(b, b->cfg.pool, &res, e);
	for (char *save = NULL, *line = r == 0 ? strtok_r(res.out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct backend_snap s;
		if (parse_snap(line, &s) < 0)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			struct backend_snap *grown = realloc(*out, cap * sizeof(*grown));
			if (!grown) {
				r = err_set(e, -ENOMEM, "out of memory");
				break;
			}
			*out = grown;
		}
		(*out)[(*n)++] = s;
	}
	exec_result_free(&res);
	if (r < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return r;
}

/* The size of LV lv and whether it lives in a thin pool. */
static int lv_thin_size(backend *b, const char *vl, int64_t *size, bool *thin, struct err *e)
{
	struct exec_result res;
	int r = lvs_columns(b, "lv_size,pool_lv", vl, &res, e);
	char *bar = r == 0 ? strchr(res.out, '|') : NULL;
	if (r == 0 && (!bar || (*bar = '\0', backend_parse_i64(res.out, size)) < 0))
		r = err_set(e, -EIO, "lvs %s: unexpected output", vl);
	if (r == 0)
		*thin = *trim(bar + 1) != '\0';
	exec_result_free(&res);
	return r;
}

/* The creation time of the snapshot just taken, with its name, source and size. */
static int snap_read(backend *b, const char *snap, const char *source, int64_t size,
                     struct backend_snap *info, struct err *e)
{
	char vl[LV_MAX];
	struct exec_result res;
	struct backend_snap s = {0};
	if (lv_path(b, SNAP_PREFIX, snap, vl, sizeof(vl)) < 0)
		return err_set(e, -EINVAL, "LV name for \"%s\" is too long", snap);
	const char *argv[] = {
	    "lvs", "--config", BACKEND_LVM_CONFIG, "--noheadings", "-o", "lv_time", vl, NULL};
	int r = backend_run(b, argv, &res, e);
	if (r == 0 && parse_time(res.out, &s.created) < 0)
		r = err_set(e, -EIO, "lvs %s: unexpected output \"%s\"", vl, res.out);
	exec_result_free(&res);
	snprintf(s.name, sizeof(s.name), "%s", snap);
	snprintf(s.source, sizeof(s.source), "%s", source);
	s.size = size;
	if (r == 0 && info)
		*info = s;
	return r;
}

int backend_lvm_snap_create(backend *b, const char *snap, const char *source,
                            struct backend_snap *info, struct err *e)
{
	char vl[LV_MAX], lv[LV_MAX], tag[200];
	struct backend_snap have;
	int64_t size;
	bool thin;
	int r = backend_lvm_snap_find(b, snap, &have, e);
	if (r == 0 && strcmp(have.source, source) != 0)
		return err_set(e, -EEXIST, "snapshot \"%s\" exists of volume \"%s\"", snap,
		               have.source);
	if (r == 0 && info)
		*info = have;
	if (r != -ENOENT)
		return r;
	if (lv_path(b, "", source, vl, sizeof(vl)) < 0 ||
	    snprintf(lv, sizeof(lv), SNAP_PREFIX "%s", snap) >= (int)sizeof(lv))
		return err_set(e, -EINVAL, "LV name for \"%s\" is too long", snap);
	if ((r = backend_lvm_name_check("snapshot", snap, lv, e)) < 0)
		return r;
	if ((r = lv_thin_size(b, vl, &size, &thin, e)) < 0)
		return r;
	if (!thin)
		return err_set(e, -EOPNOTSUPP,
		               "snapshots need a thin pool: volume \"%s\" is linear", source);
	snprintf(tag, sizeof(tag), SOURCE_TAG "%s", source);
	const char *argv[] = {"lvcreate", "--config", BACKEND_LVM_CONFIG, "-y", "-s",
	                      "-n",       lv,         "--addtag",         tag,  vl,
	                      NULL};
	if ((r = backend_run_discard(b, argv, e)) < 0)
		return r;
	return snap_read(b, snap, source, size, info, e);
}

int backend_lvm_snap_destroy(backend *b, const char *snap, struct err *e)
{
	char vl[LV_MAX];
	if (lv_path(b, SNAP_PREFIX, snap, vl, sizeof(vl)) < 0)
		return err_set(e, -EINVAL, "LV name for \"%s\" is too long", snap);
	const char *argv[] = {"lvremove", "--config", BACKEND_LVM_CONFIG, "-y", vl, NULL};
	int r = backend_run_discard(b, argv, e);
	return r == -ENOENT ? 0 : r;
}

int backend_lvm_clone(backend *b, const char *name, enum backend_source kind, const char *source,
                      int64_t bytes, const struct backend_create_opts *o, struct err *e)
{
	char from[LV_MAX], vl[LV_MAX];
	int64_t size;
	bool thin;
	(void)o;
	if (lv_path(b, kind == BACKEND_FROM_SNAPSHOT ? SNAP_PREFIX : "", source, from,
	            sizeof(from)) < 0 ||
	    lv_path(b, "", name, vl, sizeof(vl)) < 0)
		return err_set(e, -EINVAL, "LV name for \"%s\" is too long", name);
	int r = backend_lvm_name_check("volume", name, name, e);
	if (r < 0)
		return r;
	r = lv_thin_size(b, from, &size, &thin, e);
	if (r == -ENOENT)
		return err_set(e, -ENOENT, "%s \"%s\" does not exist",
		               kind == BACKEND_FROM_SNAPSHOT ? "snapshot" : "volume", source);
	if (r < 0)
		return r;
	if (!thin)
		return err_set(e, -EOPNOTSUPP,
		               "snapshots need a thin pool: volume \"%s\" is linear", source);
	const char *mk[] = {
	    "lvcreate", "--config", BACKEND_LVM_CONFIG, "-y", "-s", "-kn", "-n", name, from, NULL};
	struct exec_result res;
	r = backend_run(b, mk, &res, e);
	if (r == -EIO && res.err && strstr(res.err, "already exists"))
		r = -EEXIST;
	exec_result_free(&res);
	if (r < 0)
		return r;
	const char *up[] = {"lvchange", "--config", BACKEND_LVM_CONFIG, "-ay", "-K", vl, NULL};
	if ((r = backend_run_discard(b, up, e)) < 0)
		return r;
	return bytes > size ? b->ops->expand(b, name, bytes, e) : 0;
}
