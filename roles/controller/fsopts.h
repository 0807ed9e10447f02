/* fsopts — the mkfs option allowlist of crds.md §12.1 (rules/mkfs.h) over a JSON list.
 *
 * fsopts_mkfs_check(fstype, list) checks a JSON array of strings against the allowlist for
 * "ext4" or "xfs".  Returns 0 when every element is allowed, else -EINVAL with e->msg
 * `filesystem.mkfsOptions: mkfs option "<element>" is not allowed for <fsType>` naming the
 * first offending element (also for a non-string element, shown as its JSON text), or
 * `filesystem.fsType "<fs>" is not supported`; -ENOMEM when out of memory.
 */
#ifndef PILLAR_ROLES_CONTROLLER_FSOPTS_H
#define PILLAR_ROLES_CONTROLLER_FSOPTS_H

#include <cjson/cJSON.h>

#include "base/err.h"

int fsopts_mkfs_check(const char *fstype, const cJSON *list, struct err *e);

#endif
