/* nvme/initiator — the worker side of NVMe/TCP: attach, find the namespace device, detach.
 *
 * Everything this layer reads comes from sysfs below ctx->sysfs_root ("/sys" in production, a
 * plain directory tree in tests) and device nodes go below ctx->dev_root ("/dev").  libnvme 1.3
 * (Debian 12) has its sysfs paths compiled in and does not read LIBNVME_SYSFS_PATH (added in
 * later releases) and hides the connect's errno, so the kernel calls sit behind
 * `struct nvme_kernel_ops`: the production table (nvme_kernel_ops_sys) connects by writing to
 * /dev/nvme-fabrics itself (kernel.c), the interface libnvme uses inside, and deletes controllers
 * through sysfs; libnvme is not linked at all; tests substitute fakes that add and remove entries in the fake sysfs tree.
 *
 * Error codes (negative errno, message in e), chosen so that a role maps them to CSI codes:
 *   -EAGAIN     the target or a dying controller is in the way: UNAVAILABLE (csi.md §7.2)
 *   -ETIME      a bounded wait ran out (namespace, size): DEADLINE_EXCEEDED
 *   -EINVAL     the kernel rejected the connect's arguments (csi.md §10.4): INVALID_ARGUMENT
 *   -ESTALE     the device no longer carries the recorded identity: FAILED_PRECONDITION
 *   -EBUSY      a controller was not removed in time (csi.md §8 step 5): INTERNAL
 *   -ENOENT     (find only) nothing found yet
 *   other       INTERNAL
 */
#ifndef PILLAR_NVME_INITIATOR_H
#define PILLAR_NVME_INITIATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define NVME_NAME_MAX 32

struct nvme_connect_args {
	const char *traddr, *trsvcid, *subsysnqn, *hostnqn, *hostid;
	bool has_ctrl_loss_tmo, has_reconnect_delay, has_queue_size;
	int ctrl_loss_tmo, reconnect_delay, queue_size;
	/* DH-HMAC-CHAP (docs/authentication.md): the host's DHHC-1 secret and, for bidirectional
	 * authentication, the controller's; NULL or "" for none.  Key material: only the line
	 * written to the fabrics device carries them (nvme_connect_string), never a log line or an
	 * error message (nvme_connect_string_redacted). */
	const char *dhchap_secret, *dhchap_ctrl_secret;
};

struct nvme_kernel_ops {
	/* Creates a controller; on success *instance is N of the new nvme<N>.  0, -EALREADY (the
	 * kernel already has this connection), -EINVAL, a network errno (-ECONNREFUSED, ...), or
	 * another negative errno; e explains. */
	int (*connect)(void *ctx, const char *sysfs_root, const struct nvme_connect_args *a,
	               int *instance, struct err *e);
	/* Asks the kernel to delete controller `name` (delete_controller).  0 or -ENOENT when it is
	 * already gone; may block while the kernel tears the controller down. */
	int (*disconnect)(void *ctx, const char *sysfs_root, const char *name, struct err *e);
	/* Creates block device node path (mode 0660) for major:minor. */
	int (*mknod_blk)(void *ctx, const char *path, unsigned major, unsigned minor,
	                 struct err *e);
	void *ctx;
};

extern const struct nvme_kernel_ops nvme_kernel_ops_sys;

struct nvme_ctx {
	const char *sysfs_root; /* "/sys" */
	const char *dev_root;   /* "/dev" */
	const struct nvme_kernel_ops *ops;
	/* Bounds in milliseconds; 0 selects the spec's value. */
	int dying_wait_ms;  /* a dying controller disappears (30 s, poll 100 ms) */
	int device_wait_ms; /* the namespace device appears (30 s, poll 500 ms) */
	int delete_wait_ms; /* a deleted controller disappears (10 s, poll 50 ms) */
	int size_wait_ms;   /* the device reaches a size (10 s, poll 200 ms) */
};

struct nvme_ctrl_info {
	char name[NVME_NAME_MAX]; /* nvme<N> */
	char state[32];           /* live, connecting, deleting, ... ("" when unreadable) */
	char address[256];        /* traddr=...,trsvcid=...,... */
};

struct nvme_ns_dev {
	char name[NVME_NAME_MAX]; /* nvme<X>n<Y> */
	char path[4096];          /* <dev_root>/<name> */
	unsigned major, minor;
	char uuid[48], nguid[48]; /* "" when the attribute is absent */
	uint64_t size_bytes;
};

/* The spec's connect line (csi.md §7.2 step 2), for logs and tests.  0 or -ENAMETOOLONG. */
int nvme_connect_string(const struct nvme_connect_args *a, char *buf, size_t cap);
/* The same line with each secret replaced by "(secret)", for logs. */
int nvme_connect_string_redacted(const struct nvme_connect_args *a, char *buf, size_t cap);

/* Rotation (docs/authentication.md): writes a new host secret (ctrl false: dhchap_secret) or
 * controller secret (ctrl true: dhchap_ctrl_secret) to <sysfs_root>/class/nvme/<name>/, so that
 * the kernel re-authenticates the live controller with it without dropping I/O.  0, -EINVAL for
 * a malformed secret or name, -EOPNOTSUPP when the attribute is missing (a kernel without
 * CONFIG_NVME_HOST_AUTH), else the write's errno; messages never contain the secret. */
int nvme_ctrl_dhchap_set(const char *sysfs_root, const char *name, bool ctrl, const char *secret,
                         struct err *e);

/* Every /sys/class/nvme/nvme<N> whose subsysnqn equals nqn (malloc'd array, caller frees). */
int nvme_ctrls_of_subsys(const struct nvme_ctx *c, const char *nqn, struct nvme_ctrl_info **out,
                         size_t *n, struct err *e);

/* csi.md §7.2: reuse a live controller to the same address, wait out dying ones, delete one to
 * another address, connect.  On success ctrl (may be NULL) names the controller used. */
int nvme_attach(const struct nvme_ctx *c, const struct nvme_connect_args *a,
                char ctrl[NVME_NAME_MAX], struct err *e);

/* csi.md §7.3 steps 1-4 once: 0 with *out filled (device node created if missing) or -ENOENT. */
int nvme_ns_find(const struct nvme_ctx *c, const char *nqn, struct nvme_ns_dev *out, struct err *e);

/* nvme_ns_find polled until found; -ETIME "namespace 1 of <nqn> did not appear within 30s". */
int nvme_ns_wait(const struct nvme_ctx *c, const char *nqn, struct nvme_ns_dev *out, struct err *e);

/* Writes 1 to rescan_controller of every controller of nqn.  0 or a negative errno. */
int nvme_rescan_subsys(const struct nvme_ctx *c, const char *nqn, struct err *e);

/* Re-reads /sys/block/<dev>/size until size*512 >= bytes (-ETIME after the bound). */
int nvme_ns_wait_size(const struct nvme_ctx *c, struct nvme_ns_dev *d, uint64_t bytes,
                      struct err *e);

/* csi.md §8 steps 4-5: delete every controller of nqn (never twice: ones already deleting are
 * only waited for), then wait until each sysfs entry is gone.  No controller = success. */
int nvme_detach_subsys(const struct nvme_ctx *c, const char *nqn, struct err *e);

/* Reads <sysfs_root>/<rel> trimmed into buf.  0, -ENOENT, or another negative errno. */
int nvme_sysfs_read(const char *sysfs_root, const char *rel, char *buf, size_t cap);

#endif
