/* nvme/host — the worker's NVMe host identity (/etc/nvme/hostnqn, /etc/nvme/hostid).
 *
 * csi.md §6.1: missing or empty files are generated (host NQN
 * `nqn.2014-08.org.nvmexpress:uuid:<UUID>` — the existing host ID's UUID when there is a valid
 * unshared one, so that a generated pair always passes the check below, else a random UUIDv4 —
 * host ID = the NQN's uuid part, else a UUIDv4), mode
 * 0644, trailing newline, written durably; existing values are never rewritten.  The directory is
 * a parameter ("/etc/nvme" in production, a temporary directory in tests).
 *
 * csi.md §10.3 (node side, local part): a host NQN or ID that is known to be shared by cloned
 * images (well-known values) or a `:uuid:` NQN whose uuid disagrees with the host ID is refused.
 *
 * Every function returns 0 or a negative errno with a message in e: -EINVAL for an invalid value
 * in an existing file, -ENOTUNIQ for a shared identity, other errnos for I/O failures.
 */
#ifndef PILLAR_NVME_HOST_H
#define PILLAR_NVME_HOST_H

#include <stdbool.h>

#include "base/err.h"

#define NVME_HOSTNQN_MAX 223 /* bytes, NVMe base spec */
#define NVME_UUID_STR    37  /* 36 characters and NUL */

/* The directory libnvme 1.3 reads the host identity from (its compiled-in SYSCONFDIR/nvme):
 * with this etc_dir, reading goes through libnvme (nvmf_hostnqn_from_file, nvmf_hostid_from_file),
 * so the node uses the very files nvme-cli does. */
#define NVME_HOST_ETC_LIBNVME "/etc/nvme"

struct nvme_host_identity {
	char hostnqn[NVME_HOSTNQN_MAX + 1];
	char hostid[NVME_UUID_STR];
};

/* Start-up: reads both files, generating what is missing or empty. */
int nvme_host_identity_ensure(const char *etc_dir, struct nvme_host_identity *out, struct err *e);

/* Per stage: reads both files without generating anything (-ENOENT when one is missing or empty). */
int nvme_host_identity_read(const char *etc_dir, struct nvme_host_identity *out, struct err *e);

/* -ENOTUNIQ with a message naming the problem when the identity is known to be shared. */
int nvme_host_identity_check(const struct nvme_host_identity *id, struct err *e);

/* True for the canonical 8-4-4-4-12 hex form (either case). */
bool nvme_uuid_valid(const char *s);

/* A random RFC 4122 version-4 UUID in lowercase text form.  0 or -errno from getrandom. */
int nvme_uuid_v4(char out[NVME_UUID_STR]);

#endif
