/* nvmet — the kernel NVMe-oF target driven through configfs (spec/nvmet.md).
 *
 * Every attribute write goes through nvmet_attr_write(): skip when already satisfied, one
 * write(2) of "value\n" on a fresh open, then a read-back compared after trimming (UUIDs
 * case-insensitively).  All paths live under the root given to nvmet_open() (the
 * `--configfs-root`), so tests run the same code against a plain directory tree.  When the root
 * is not a configfs mount ("fake" mode) the layer emulates what the kernel does by itself: mkdir
 * of a subsystem, namespace or port creates its default attribute files and child directories
 * (with random serial/UUID like the kernel, K11), and rmdir removes them again.  Kernel ordering
 * rules are not enforced by the fake; tests check the order through the trace hook.
 *
 * Errors: functions return 0 or a negative errno with a message naming the configfs path.  The
 * errno is the kernel's where the kernel refused (nvmet.md §9 maps it), otherwise:
 *   -ENOENT  nvmet not available (message `nvmet configfs not available at <root>/nvmet`) or
 *            subsystem missing where required
 *   -EIO     read-back mismatch (`nvmet <path>: wrote "<w>" but read back "<r>"`)
 *   -EBUSY   conflict: in-capsule size, enabled namespace with another device
 *   -EOPNOTSUPP  no revalidate_size attribute (old kernel)
 *   -EINVAL  malformed input (bad NQN, bad address)
 * Not thread-safe: the caller serialises operations on one handle (the agent's configfs lock).
 */
#ifndef PILLAR_NVMET_NVMET_H
#define PILLAR_NVMET_NVMET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "rules/nqn.h"

#define NVMET_PATH_MAX 1024

typedef struct nvmet nvmet;

/* ---- names (pure) ---------------------------------------------------------------------------- */

/* FNV-1a over the textual address, then the port as one 32-bit value (nvmet.md §2.2). */
uint32_t nvmet_port_hash(const char *bind_address, uint32_t port);
/* h mod 65535 + 1. */
unsigned nvmet_port_preferred_id(const char *bind_address, uint32_t port);

/* Subsystem NQNs, host NQN checks and namespace identity (uuid, nguid, serial) are the shared
 * rules of rules/nqn.h. */

/* ---- handle and attribute I/O ---------------------------------------------------------------- */

/* Opens a handle on <root>/nvmet.  The tree need not exist yet (nvmet_available says).  -ENOMEM. */
int nvmet_open(const char *configfs_root, nvmet **out, struct err *e);
void nvmet_free(nvmet *nv);
bool nvmet_available(const nvmet *nv);
bool nvmet_is_fake(const nvmet *nv);
/* "<root>/nvmet". */
const char *nvmet_dir(const nvmet *nv);

/* Called for every change made to the tree: op is "write", "mkdir", "symlink", "unlink" or
 * "rmdir"; rel is relative to <root>/nvmet; value is the written value (write) or the link
 * target (symlink), NULL otherwise.  Skipped writes are not reported.  For tests and -v logs. */
typedef void (*nvmet_trace_fn)(void *arg, const char *op, const char *rel, const char *value);
void nvmet_set_trace(nvmet *nv, nvmet_trace_fn fn, void *arg);
/* System calls the handle has made on the tree so far (opens, reads, writes, closes, stats,
 * directory reads, mkdir, symlink, unlink, rmdir); a fake root's emulation of what the kernel
 * does by itself is not counted.  For tests. */
unsigned long nvmet_calls(const nvmet *nv);

/* THE write: skip when satisfied, write "value\n", read back and compare.  rel is relative to
 * <root>/nvmet.  0, -EIO on mismatch, or the kernel's errno. */
int nvmet_attr_write(nvmet *nv, const char *rel, const char *value, struct err *e);
/* Reads an attribute, trimmed of trailing newline/spaces.  -ENOENT when missing. */
int nvmet_attr_read(nvmet *nv, const char *rel, char *buf, size_t cap, struct err *e);

/* ---- exports (nvmet.md §5–§7) ------------------------------------------------------------------ */

struct nvmet_export_spec {
	const char *nqn;
	const char *device_path;
	bool acl;                 /* true: admit exactly/at least `hosts`; false: any host */
	const char *const *hosts; /* desired hosts when acl */
	size_t n_hosts;
	bool exact_hosts; /* ReconcileState: revoke hosts not listed; else keep existing */
	struct rules_ns_identity identity; /* wanted (pinned or derived) */
	int32_t icds;                      /* requested in-capsule data size, 0 = none */
	const char *bind_address;          /* IP literal (selects the family and the port ID) */
	uint32_t port;                     /* TCP port (4420 when the RPC said 0) */
	/* ports_listed: the port directories (nvmet_port_names) as listed after the caller took
	 * this export's lock, which a batch lists once for all its exports; prepare then looks
	 * for the subsystem's links in these only.  A port made later links no subsystem whose
	 * lock the caller holds (every link is made under its export's lock).  Else listed now. */
	bool ports_listed;
	char *const *ports;
	size_t n_ports;
};

struct nvmet_prepared {
	struct rules_ns_identity identity; /* the identity the subsystem now has (live wins) */
	bool relink; /* hosts were revoked and none is left: drop live associations in phase 2 */
	bool linked; /* the subsystem was already linked to a port */
};

/* Phase 1 (§5.1 steps 2–7): never creates or links a port.  The device check (§10.1) is the
 * caller's.  -EBUSY `namespace 1 of <nqn> is enabled with device <cur>; refusing to switch it to
 * <new>`. */
int nvmet_export_prepare(nvmet *nv, const struct nvmet_export_spec *spec,
                         struct nvmet_prepared *out, struct err *e);
/* Phase 2 (§5.2 steps 2–7): select/create the port, apply the in-capsule rule (-EBUSY
 * `param_inline_data_size is <cur> but the export requires <S> (port <id>, <family> <port>)`),
 * link (relinking first when relink).  *port_id receives the port directory number. */
int nvmet_export_link(nvmet *nv, const struct nvmet_export_spec *spec, bool relink,
                      unsigned *port_id, struct err *e);
/* Phase 2 into port_id, the port an earlier nvmet_export_link of the same batch (same bind
 * address and TCP port) linked subsystem linked_nqn to, while the caller still holds that
 * export's lock: skips the port selection and configuration of steps 2–4.  A port with a link
 * keeps its attributes (K5) and cannot be removed, and the earlier link stays while its export
 * is locked.  If that link is gone after all, this is nvmet_export_link.  Returns as
 * nvmet_export_link. */
int nvmet_export_link_known(nvmet *nv, const struct nvmet_export_spec *spec, bool relink,
                            unsigned port_id, const char *linked_nqn, struct err *e);
/* Removal order of §7 steps 1–6; a missing subsystem is success. */
int nvmet_export_remove(nvmet *nv, const char *nqn, struct err *e);
bool nvmet_subsys_exists(nvmet *nv, const char *nqn);
/* The names of the port directories, sorted; free with nvmet_names_free.  0 or a negative
 * errno (a missing ports/ is an empty list). */
int nvmet_port_names(nvmet *nv, char ***names, size_t *n, struct err *e);
void nvmet_names_free(char **names, size_t n);
/* Whether any port links the subsystem: 1, 0, or a negative errno (e says why). */
int nvmet_subsys_linked(nvmet *nv, const char *nqn, struct err *e);
/* §6.1; -ENOENT when the subsystem does not exist. */
int nvmet_host_allow(nvmet *nv, const char *nqn, const char *hostnqn, struct err *e);
/* §6.3 including the relink of step 3; a missing subsystem or host is success. */
int nvmet_host_deny(nvmet *nv, const char *nqn, const char *hostnqn, struct err *e);
/* §6.4: 0 when nothing to do or done; -EOPNOTSUPP when the attribute is missing. */
int nvmet_ns_revalidate(nvmet *nv, const char *nqn, struct err *e);

struct nvmet_export_entry {
	char nqn[RULES_NQN_MAX + 1];
	char volume_id[RULES_NQN_MAX + 1];
	int32_t port; /* addr_trsvcid of the lowest-numbered linked port, 0 when unlinked */
};
/* ---- in-band authentication (DH-HMAC-CHAP, docs/authentication.md) ----------------------------
 * The secrets of a host live in its entry hosts/<hostnqn> (the one its ACL links), shared by every
 * subsystem that admits it.  A kernel without CONFIG_NVME_TARGET_AUTH makes no dhchap_* files.
 * Secrets never appear in messages or the trace. */
struct nvmet_host_auth {
	const char *hash;     /* the kernel's name: hmac(sha256) | hmac(sha384) | hmac(sha512) */
	const char *dh_group; /* null | ffdhe2048 ... ffdhe8192 */
	const char *key;      /* DHHC-1 host secret */
	const char *ctrl_key; /* DHHC-1 controller secret (bidirectional), or NULL */
};
#define NVMET_AUTH_MISSING_MSG                                                                     \
	"the storage node's kernel has no NVMe in-band authentication (CONFIG_NVME_TARGET_AUTH): " \
	"host entries have no dhchap_key"
/* 1 when the target supports authentication (hosts/<hostnqn> has dhchap_key; the entry is made
 * when missing), 0 when it does not, or a negative errno. */
int nvmet_host_auth_supported(nvmet *nv, const char *hostnqn, struct err *e);
/* The host entry the probe below makes (an NQN no initiator of ours uses). */
#define NVMET_AUTH_PROBE_NQN RULES_NQN_PREFIX "auth-probe"
/* 1 when the kernel has target authentication, 0 when not, or a negative errno: the entry
 * hosts/NVMET_AUTH_PROBE_NQN is made, looked at, and removed again unless it was there before.
 * No subsystem ever admits it. */
int nvmet_host_auth_probe(nvmet *nv, struct err *e);
/* Writes dhchap_hash, dhchap_dhgroup, dhchap_key and (when set) dhchap_ctrl_key of
 * hosts/<hostnqn>, making the entry when missing; each write is skipped when satisfied.
 * -EOPNOTSUPP NVMET_AUTH_MISSING_MSG on a kernel without authentication, -EINVAL for a malformed
 * host NQN or secret, else as nvmet_attr_write. */
int nvmet_host_auth_set(nvmet *nv, const char *hostnqn, const struct nvmet_host_auth *a,
                        struct err *e);
/* Fake roots only: host entries get the dhchap_* files with the kernel's defaults, as on a
 * kernel with CONFIG_NVME_TARGET_AUTH (off by default, as Debian 12's 6.1).  For tests. */
void nvmet_set_fake_auth(nvmet *nv, bool on);

/* Every subsystem with our prefix (others are ignored).  *out is malloc'd (caller frees).  */
int nvmet_export_list(nvmet *nv, struct nvmet_export_entry **out, size_t *n, struct err *e);

#endif
