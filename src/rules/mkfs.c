/* rules/mkfs — mkfs option allowlist (crds.md §12.1). */
#include "rules/mkfs.h"

#include <errno.h>
#include <string.h>

struct opt_rule {
	char flag;
	bool value;       /* takes a value */
	const char *subs; /* NULL: any value; else space-separated items ("key=" or word) */
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

bool rules_fstype_supported(const char *fs)
{
	return fs && (!strcmp(fs, "ext4") || !strcmp(fs, "xfs"));
}

/* item (len bytes) is `key=<non-empty>` for a "key=" of subs, or equals a word of subs. */
static bool item_allowed(const char *item, size_t len, const char *subs)
{
	const char *p = subs;
	for (;;) {
		const char *end = strchr(p, ' ');
		size_t l = end ? (size_t)(end - p) : strlen(p);
		if (p[l - 1] == '=' ? len > l && !strncmp(item, p, l)
		                    : len == l && !strncmp(item, p, l))
			return true;
		if (!end)
			return false;
		p = end + 1;
	}
}

static bool value_allowed(const char *v, const char *subs)
{
	if (!v || !*v || v[0] == '-')
		return false;
	if (!subs)
		return true;
	for (const char *p = v;;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (!item_allowed(p, len, subs))
			return false;
		if (!c)
			return true;
		p = c + 1;
	}
}

int rules_mkfs_refuse(struct err *e, const char *element, const char *fstype)
{
	return err_set(e, -EINVAL,
	               "filesystem.mkfsOptions: mkfs option \"%s\" is not allowed for %s", element,
	               fstype);
}

/* Index of the element to name when opts[i] is refused, or n when it is allowed (then *used is
 * how many elements it took). */
static size_t check_one(const struct opt_rule *rules, const char *const *opts, size_t n, size_t i,
                        size_t *used)
{
	const char *o = opts[i];
	const struct opt_rule *r;
	*used = 1;
	if (!o || o[0] != '-' || !o[1] || o[1] == '-')
		return i;
	for (r = rules; r->flag && r->flag != o[1]; r++)
		;
	if (!r->flag || (!r->value && o[2]))
		return i;
	if (!r->value)
		return n;
	if (o[2])
		return value_allowed(o + 2, r->subs) ? n : i;
	if (i + 1 >= n || !opts[i + 1])
		return i;
	*used = 2;
	return value_allowed(opts[i + 1], r->subs) ? n : i + 1;
}

int rules_mkfs_check(const char *fstype, const char *const *opts, size_t n, size_t *bad,
                     struct err *e)
{
	size_t used;
	*bad = n;
	if (!rules_fstype_supported(fstype))
		return err_set(e, -EINVAL, "filesystem.fsType \"%s\" is not supported",
		               fstype ? fstype : "");
	const struct opt_rule *rules = !strcmp(fstype, "xfs") ? xfs_rules : ext4_rules;
	for (size_t i = 0; i < n; i += used) {
		size_t b = check_one(rules, opts, n, i, &used);
		if (b < n) {
			*bad = b;
			return rules_mkfs_refuse(e, opts[b] ? opts[b] : "?", fstype);
		}
	}
	return 0;
}
