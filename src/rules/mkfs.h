/* rules/mkfs — the filesystem types and the mkfs option allowlist of crds.md §12.1, checked by
 * the controller when a class or volume is configured and by the node again before it formats.
 *
 * Each list element is one flag or one value.  A value is attached (`-Ldata`) or follows as the
 * next element (`["-L","data"]`); values must not be empty or start with `-`; flags with
 * restricted sub-options take a comma-separated list whose items are `key=<non-empty value>` or
 * a bare word, each from the table.  Refused: positional arguments, long options, clustered
 * flags (`-Fq`), a flag-only option with a suffix (`-qj`) and every flag not in the table.
 * Message: `filesystem.mkfsOptions: mkfs option "<element>" is not allowed for <fsType>`.
 * The functions are pure and thread-safe.
 */
#ifndef PILLAR_RULES_MKFS_H
#define PILLAR_RULES_MKFS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define RULES_FS_DEFAULT "ext4"
/* XFS needs at least 300 MiB (csi.md §7.4): a smaller xfs volume is refused at CreateVolume with
 * INVALID_ARGUMENT RULES_XFS_MIN_MSG instead of failing later at mkfs on the node. */
#define RULES_XFS_MIN_BYTES (300LL * 1024 * 1024)
#define RULES_XFS_MIN_MSG   "xfs volumes must be at least 300 MiB"

/* true for "ext4" and "xfs". */
bool rules_fstype_supported(const char *fstype);

/* Checks opts[0..n) for fstype.  Returns 0 when all are allowed.  Otherwise -EINVAL, *bad the
 * index of the element the message names (a NULL element — a value that is not a string in
 * the caller's input — is refused too; then e names "?" and the caller may reword it with
 * rules_mkfs_refuse) and e set; for an unsupported fstype *bad = n and e is
 * `filesystem.fsType "<fs>" is not supported`. */
int rules_mkfs_check(const char *fstype, const char *const *opts, size_t n, size_t *bad,
                     struct err *e);

/* Sets e to the refusal message naming element; returns -EINVAL. */
int rules_mkfs_refuse(struct err *e, const char *element, const char *fstype);

#endif
