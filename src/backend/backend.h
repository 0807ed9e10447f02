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
#include <sys/types.h>

#include "base/err.h"
#include "base/file.h"

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
	/* file, sparse: the caller has made the size durable elsewhere (the fencing mark's
	 * imageBytes) and gives an image found empty after a power cut that size again, so the
	 * new file is not fsync'd */
	bool size_recorded;
	/* file, with size_recorded: the record was written by this call into a journal that
	 * stays unretired until a sync of the pool's filesystem (the marks' journal, held by
	 * the caller: agent_marklog_hold), and whose replay after a power cut makes an image it
	 * records again: the directory is not fsync'd either */
	bool name_journaled;
};

struct backend_vol {
	char name[132]; /* volume name inside the pool */
	int64_t size;
};

/* A snapshot as the backend finds it (docs/snapshots.md "Agent API"). */
struct backend_snap {
	char name[132];   /* snapshot name inside the pool */
	char source[132]; /* name of the volume it was taken of (also after that was deleted) */
	int64_t size;     /* the source's size when it was taken */
	int64_t created;  /* Unix seconds */
};

/* Where a new volume's content comes from (backend_ops.clone). */
enum backend_source { BACKEND_FROM_SNAPSHOT, BACKEND_FROM_VOLUME };

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
	/* Before each export of the volume whose device is path: the file backend makes the image
	 * write-through (backend_file_write_through); NULL for the others. */
	int (*serve)(backend *b, const char *path, struct err *e);
	/* ZFS: the volume's volblocksize; the zfs tool rounds a volume's size up to a multiple
	 * of it, so a volume up to one granule larger than requested has the requested size.
	 * NULL for the others. */
	int (*granule)(backend *b, const char *name, int64_t *bytes, struct err *e);

	/* ---- snapshots and clones (docs/snapshots.md "Agent API"); NULL = not supported ---- */
	/* Takes snapshot snap of volume source and fills *info.  Idempotent: an existing snapshot
	 * of the same source is success.  -EEXIST when snap names a snapshot of another source,
	 * -ENOENT when source is missing, -EOPNOTSUPP "snapshots need a thin pool" (LVM linear),
	 * -EINPROGRESS while a copy runs (file; the message tells the progress, a retry goes on). */
	int (*snap_create)(backend *b, const char *snap, const char *source,
	                   struct backend_snap *info, struct err *e);
	/* Removes snapshot snap (missing = 0; a copy still running is cancelled first).  Volumes
	 * made from it stay as they are. */
	int (*snap_destroy)(backend *b, const char *snap, struct err *e);
	/* -ENOENT when there is no snapshot snap. */
	int (*snap_find)(backend *b, const char *snap, struct backend_snap *info, struct err *e);
	/* Every snapshot of the pool (caller frees *out). */
	int (*snap_list)(backend *b, struct backend_snap **out, size_t *n, struct err *e);
	/* Creates volume name as a copy of snapshot or volume `source`, then grows it to bytes when
	 * that is more than the source's size.  -ENOENT source missing, -EINPROGRESS as above,
	 * -EEXIST when name exists. */
	int (*clone)(backend *b, const char *name, enum backend_source kind, const char *source,
	             int64_t bytes, const struct backend_create_opts *o, struct err *e);
	/* Removes what deleted volumes and snapshots left behind once nothing depends on it any
	 * more (ZFS: held origins, hidden snapshots).  NULL when there is never anything. */
	int (*sweep)(backend *b, struct err *e);
	/* Stops work still making volume name (file: a restore or clone copying into it) and
	 * removes what it left, also what a killed agent left.  NULL when there is none. */
	void (*cancel)(backend *b, const char *name);
};

struct backend {
	const struct backend_ops *ops;
	struct backend_config cfg;
	char dev_root
	    [256];      /* "/dev"; tests point it elsewhere (then regular files count as devices) */
	int timeout_ms; /* per command, 60000 */
	/* file: how long a snapshot/clone call waits for its copy before answering -EINPROGRESS
	 * (the copy goes on; 10000), and the running copies. */
	int copy_wait_ms;
	struct backend_copies *copies;
	/* file: concurrent creates and deletes share the fsync of the directory */
	struct file_dir_group dir_sync;
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
/* Sets the synchronous-update attribute (FS_SYNC_FL, `chattr +S`) of the open file fd (named
 * path in messages): every write to it is then durable before it completes, also one the
 * kernel target makes for a host.  A file-backed namespace so acknowledges a host's write only
 * once the storage node's file system has it for good; its volatile state (dirty pages,
 * uncommitted block allocations) would otherwise die in a power cut of the storage node while
 * the host's outstanding flush is retried on the rebooted target and succeeds there
 * (docs/architecture.md, "The data path").  0 once set; 1 with e set when the file system has no
 * such attribute (the agent's start probe, agent_config_check_dirs, refuses such a directory);
 * -errno with e set on another error. */
int backend_file_write_through(int fd, const char *path, struct err *e);

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
/* backend_run for the command's status alone (its output freed): 0 or the errno above. */
int backend_run_discard(backend *b, const char *const argv[], struct err *e);
/* Parses a decimal int64 (trimmed); -EIO on garbage. */
int backend_parse_i64(const char *s, int64_t *out);

/* ZFS (zfs.c, zfs_snap.c): <pool>[/<parent>] and <pool>[/<parent>]/<name>; -ENAMETOOLONG. */
#define BACKEND_DS_MAX 512
int backend_zfs_base(const backend *b, char *out, size_t cap);
int backend_zfs_dataset(const backend *b, const char *name, char *out, size_t cap);
/* Moves a deleted volume that snapshots still depend on out of the way (zfs_snap.c). */
int backend_zfs_hold(backend *b, const char *name, struct err *e);
int backend_zfs_snap_create(backend *b, const char *snap, const char *source,
                            struct backend_snap *info, struct err *e);
int backend_zfs_snap_destroy(backend *b, const char *snap, struct err *e);
int backend_zfs_snap_find(backend *b, const char *snap, struct backend_snap *info, struct err *e);
int backend_zfs_snap_list(backend *b, struct backend_snap **out, size_t *n, struct err *e);
int backend_zfs_clone(backend *b, const char *name, enum backend_source kind, const char *source,
                      int64_t bytes, const struct backend_create_opts *o, struct err *e);
int backend_zfs_sweep(backend *b, struct err *e);

/* LVM (lvm.c, lvm_snap.c): the --config of every LVM command (agent-api.md §5.2). */
#define BACKEND_LVM_CONFIG                                                             \
	"activation{udev_sync=0 udev_rules=0} devices{obtain_device_list_from_udev=0 " \
	"scan_lvs=0 global_filter=[\"r|^/dev/zd|\",\"r|^/dev/zvol/|\",\"a|.*|\"]}"
/* 0 when lvm2 accepts lv as the name of a new LV, else -EINVAL with a message naming what to
 * change: lvm2 reserves names that begin with "snapshot" or "pvmove" and names containing the
 * suffixes of its internal LVs (_tmeta, _rimage, ...: lvm(8) "VALID NAMES"), and would refuse
 * them only inside lvcreate.  what is "volume" or "snapshot", for the message. */
int backend_lvm_name_check(const char *what, const char *name, const char *lv, struct err *e);
int backend_lvm_snap_create(backend *b, const char *snap, const char *source,
                            struct backend_snap *info, struct err *e);
int backend_lvm_snap_destroy(backend *b, const char *snap, struct err *e);
int backend_lvm_snap_find(backend *b, const char *snap, struct backend_snap *info, struct err *e);
int backend_lvm_snap_list(backend *b, struct backend_snap **out, size_t *n, struct err *e);
int backend_lvm_clone(backend *b, const char *name, enum backend_source kind, const char *source,
                      int64_t bytes, const struct backend_create_opts *o, struct err *e);

/* file (file_snap.c, file_copy.c). */
int backend_file_snap_create(backend *b, const char *snap, const char *source,
                             struct backend_snap *info, struct err *e);
int backend_file_snap_destroy(backend *b, const char *snap, struct err *e);
int backend_file_snap_find(backend *b, const char *snap, struct backend_snap *info, struct err *e);
int backend_file_snap_list(backend *b, struct backend_snap **out, size_t *n, struct err *e);
int backend_file_clone(backend *b, const char *name, enum backend_source kind, const char *source,
                       int64_t bytes, const struct backend_create_opts *o, struct err *e);
/* Copies src to dst (mode, at least grow_to bytes long) through dst's temporary name on a
 * thread of its own and waits up to copy_wait_ms: 0 once dst is complete (also when an earlier
 * call completed it), -EINPROGRESS with the progress in e while it runs (a later call for dst
 * waits for the same copy), another errno when it failed (no temporary file left).  Calls for
 * one dst must not overlap (the agent holds dst's volume or snapshot lock). */
int backend_file_copy(backend *b, const char *src, const char *dst, mode_t mode, int64_t grow_to,
                      struct err *e);
/* Stops a copy to dst and removes dst's temporary file (also one a killed agent left). */
void backend_file_copy_cancel(backend *b, const char *dst);
/* .<name>.tmp beside dst. */
int backend_temp_name(const char *dst, char *out, size_t cap);
int backend_copies_new(struct backend_copies **out);
void backend_copies_free(struct backend_copies *l);

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
