/* backend — volume backends behind one vtable: zfs (zvol), lvm (linear, thin), file.
 *
 * zfs and lvm exec the real CLIs through base/exec (no shell, 60 s timeout each, stderr
 * captured) with the exact commands of agent-api.md §5.2; tests put fake commands first on PATH.
 * The file backend keeps sparse files in one directory (agent-api.md §14).  A backend is
 * configured once (one entry of the agent's config file) and is safe to use from several
 * threads for different volumes.
 *
 * Every function returns 0 or a negative errno with the reason in e:
 *   -ENOENT     the volume (or for capacity, the pool/VG) does not exist
 *   -ENOSPC     out of space (tool said "out of space"/"Insufficient free space", or ENOSPC)
 *   -EBUSY      the volume is busy (delete)
 *   -ETIMEDOUT  the tool did not finish within its timeout
 *   -EIO        another tool failure; the message carries the tool's stderr
 *   -EINVAL     bad argument
 */
#ifndef PILLAR_BACKEND_BACKEND_H
#define PILLAR_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Numbers equal the wire enum BackendType (agent-api.md §3, §14). */
enum backend_kind { BACKEND_ZFS = 1, BACKEND_LVM = 3, BACKEND_FILE = 6 };

struct backend_config {
	enum backend_kind kind;
	char *pool;           /* ZFS pool, LVM VG, or file pool name */
	char *parent_dataset; /* ZFS, may be NULL */
	char *thin_pool;      /* LVM, may be NULL */
	bool thin_default;    /* LVM provisioningMode thin */
	char *directory;      /* file */
	bool preallocate;     /* file */
};

struct backend_create_opts {
	bool thin;                /* LVM: effective mode */
	const char *const *props; /* ZFS: "k=v" strings, passed as -o k=v */
	size_t n_props;
	bool preallocate; /* file */
};

struct backend_vol {
	char name[132]; /* volume name inside the pool */
	int64_t size;
};

typedef struct backend backend;

struct backend_ops {
	int (*create)(backend *b, const char *name, int64_t bytes,
	              const struct backend_create_opts *o, struct err *e);
	int (*destroy)(backend *b, const char *name, struct err *e);
	int (*expand)(backend *b, const char *name, int64_t bytes, struct err *e);
	int (*size)(backend *b, const char *name, int64_t *bytes, struct err *e);
	int (*capacity)(backend *b, int64_t *total, int64_t *avail, struct err *e);
	int (*list)(backend *b, struct backend_vol **out, size_t *n, struct err *e);
	int (*device_path)(const backend *b, const char *name, char *out, size_t cap);
	/* LVM: lvchange -ay; others NULL. */
	int (*activate)(backend *b, const char *name, struct err *e);
	/* ZFS: the volume's volblocksize; the zfs tool rounds a volume's size up to a multiple
	 * of it, so a volume up to one granule larger than requested has the requested size.
	 * NULL for the others. */
	int (*granule)(backend *b, const char *name, int64_t *bytes, struct err *e);
};

struct backend {
	const struct backend_ops *ops;
	struct backend_config cfg;
	char dev_root
	    [256];      /* "/dev"; tests point it elsewhere (then regular files count as devices) */
	int timeout_ms; /* per command, 60000 */
};

/* Deep-copies cfg.  -EINVAL for an unknown kind, -ENOMEM. */
int backend_new(const struct backend_config *cfg, backend **out, struct err *e);
void backend_free(backend *b);
void backend_config_clear(struct backend_config *c);
/* Overrides "/dev" (tests). */
void backend_set_dev_root(backend *b, const char *dev_root);
/* The token of a kind: "zfs", "lvm", "file". */
const char *backend_kind_name(enum backend_kind k);

/* Waits until path exists, is a block device (or a regular file when allow_regular) and opens
 * read-only.  Polls every poll_ms up to timeout_ms.  0 or -ENXIO. */
int backend_device_wait(const char *path, bool allow_regular, int timeout_ms, int poll_ms);
/* Whether device nodes of this backend may be regular files (file backend, or a test dev root). */
bool backend_regular_devices(const backend *b);

/* ---- shared by the implementations ------------------------------------------------------------ */

extern const struct backend_ops backend_zfs_ops;
extern const struct backend_ops backend_lvm_ops;
extern const struct backend_ops backend_file_ops;

/* Registers pillar_csi_agent_backend_command_duration_seconds{backend,command}, which
 * backend_run observes for every command it runs. */
void backend_metrics_register(void);
/* Runs argv; 0 with *res filled when the command exited 0; otherwise the errno above with
 * `<argv0>: <stderr summary>`.  Caller frees res (exec_result_free) in every case. */
struct exec_result;
int backend_run(backend *b, const char *const argv[], struct exec_result *res, struct err *e);
/* Parses a decimal int64 (trimmed); -EIO on garbage. */
int backend_parse_i64(const char *s, int64_t *out);

/* The volumes a backend's list operation has found so far. */
struct backend_vol_list {
	struct backend_vol *v;
	size_t n, cap;
};
/* Appends volume name (cut to the name's room) of size bytes: 0, or -ENOMEM with e set. */
int backend_vol_list_add(struct backend_vol_list *l, const char *name, int64_t size, struct err *e);
/* The same with the size as a command printed it: a size that does not parse
 * (backend_parse_i64) leaves the volume out. */
int backend_vol_list_add_text(struct backend_vol_list *l, const char *name, const char *size,
                              struct err *e);
/* Ends a list operation: r < 0 frees the list and returns r; 0 hands it to *out and *n. */
int backend_vol_list_finish(struct backend_vol_list *l, int r, struct backend_vol **out, size_t *n);

#endif
