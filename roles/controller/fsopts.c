/* fsopts — mkfs option allowlist (crds.md §12.1). */
#include "controller/fsopts.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct vflag {
	char flag;
	const char *const *subs; /* NULL: any value */
};

static const char *const ext4_J[] = {"size=", NULL};
static const char *const ext4_E[] = {"stride=",
                                     "stripe_width=",
                                     "stripe-width=",
                                     "resize=",
                                     "lazy_itable_init=",
                                     "lazy_journal_init=",
                                     "packed_meta_blocks=",
                                     "root_owner=",
                                     "discard",
                                     "nodiscard",
                                     "num_backup_sb=",
                                     "encoding=",
                                     "encoding_flags=",
                                     "quotatype=",
                                     "assume_storage_prezeroed=",
                                     NULL};
static const struct vflag ext4_v[] = {
    {'b', NULL}, {'C', NULL}, {'e', NULL},   {'E', ext4_E}, {'g', NULL}, {'G', NULL},
    {'i', NULL}, {'I', NULL}, {'J', ext4_J}, {'L', NULL},   {'m', NULL}, {'M', NULL},
    {'N', NULL}, {'O', NULL}, {'T', NULL},   {'U', NULL},   {0, NULL}};

static const char *const xfs_size[] = {"size=", NULL};
static const char *const xfs_m[] = {
    "crc=", "finobt=", "rmapbt=", "reflink=", "bigtime=", "inobtcount=", "uuid=", NULL};
static const char *const xfs_d[] = {
    "agcount=", "agsize=", "su=", "sw=", "sunit=", "swidth=", "noalign", NULL};
static const char *const xfs_i[] = {
    "size=", "maxpct=", "align=", "sparse=", "nrext64=", "projid32bit=", NULL};
static const char *const xfs_l[] = {"size=", "version=", "sunit=", "su=", "lazy-count=", NULL};
static const char *const xfs_n[] = {"size=", "version=", "ftype=", NULL};
static const struct vflag xfs_v[] = {{'b', xfs_size}, {'m', xfs_m}, {'d', xfs_d},
                                     {'i', xfs_i},    {'l', xfs_l}, {'n', xfs_n},
                                     {'s', xfs_size}, {'L', NULL},  {0, NULL}};

static const struct vflag *find_v(const struct vflag *t, char f)
{
	for (; t->flag; t++)
		if (t->flag == f)
			return t;
	return NULL;
}

static bool sub_ok(const char *const *subs, const char *item, size_t len)
{
	for (; *subs; subs++) {
		size_t n = strlen(*subs);
		if ((*subs)[n - 1] == '=') {
			if (len > n && !strncmp(item, *subs, n))
				return true;
		} else if (len == n && !strncmp(item, *subs, n)) {
			return true;
		}
	}
	return false;
}

static bool value_ok(const struct vflag *v, const char *val)
{
	if (!*val || *val == '-')
		return false;
	if (!v->subs)
		return true;
	const char *p = val;
	for (;;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (!sub_ok(v->subs, p, len))
			return false;
		if (!c)
			return true;
		p = c + 1;
	}
}

static int reject(struct err *e, const char *elem, const char *fstype)
{
	return err_set(e, -EINVAL,
	               "filesystem.mkfsOptions: mkfs option \"%s\" is not allowed for %s", elem,
	               fstype);
}

int fsopts_mkfs_check(const char *fstype, const cJSON *list, struct err *e)
{
	const char *flags;
	const struct vflag *vt;
	if (!strcmp(fstype, "ext4")) {
		flags = "jq";
		vt = ext4_v;
	} else if (!strcmp(fstype, "xfs")) {
		flags = "Kq";
		vt = xfs_v;
	} else {
		return err_set(e, -EINVAL, "filesystem.fsType \"%s\" is not supported", fstype);
	}
	if (!list)
		return 0;
	int n = cJSON_GetArraySize(list);
	for (int i = 0; i < n; i++) {
		const cJSON *it = cJSON_GetArrayItem(list, i);
		if (!cJSON_IsString(it)) {
			char *t = cJSON_PrintUnformatted(it);
			int r = reject(e, t ? t : "?", fstype);
			free(t);
			return r;
		}
		const char *s = it->valuestring;
		if (s[0] != '-' || !s[1] || s[1] == '-')
			return reject(e, s, fstype);
		char f = s[1];
		const struct vflag *v = find_v(vt, f);
		if (strchr(flags, f)) {
			if (s[2])
				return reject(e, s, fstype); /* -qj, -Fq: clustered/suffixed */
			continue;
		}
		if (!v)
			return reject(e, s, fstype);
		if (s[2]) {
			if (!value_ok(v, s + 2))
				return reject(e, s, fstype);
			continue;
		}
		const cJSON *nx = cJSON_GetArrayItem(list, i + 1);
		if (!nx)
			return reject(e, s, fstype);
		if (!cJSON_IsString(nx) || !value_ok(v, nx->valuestring))
			return reject(e, cJSON_IsString(nx) ? nx->valuestring : s, fstype);
		i++;
	}
	return 0;
}
