/* node/sys — the kernel calls of the node service, behind a table so tests can fake them.
 *
 * Decision (brief: mount through exec or syscalls): mounts use mount(2)/umount2(2) behind
 * `struct node_sys_ops`, because the errno they return is exact ("not mounted" is EINVAL, busy
 * is EBUSY) where mount(8)/umount(8) only give exit codes and text.  The production table is
 * node_sys_ops_real; unit tests install fakes that record the calls and keep a fake
 * mountinfo file.  Mount points are always read from <proc_root>/self/mountinfo, so the same
 * code runs unchanged in tests and in the VM test bed.  Formatting and resizing tools (blkid,
 * mkfs.*, resize2fs, xfs_growfs) run through base/exec.h (fs.h).
 *
 * Every op returns 0 or a negative errno.
 */
#ifndef PILLAR_ROLES_NODE_SYS_H
#define PILLAR_ROLES_NODE_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct node_sys_ops {
	int (*mount)(void *ctx, const char *src, const char *target, const char *fstype,
	             unsigned long flags, const char *data);
	int (*umount)(void *ctx, const char *target);  /* -EINVAL: not a mount point */
	int (*blk_set_ro)(void *ctx, const char *dev); /* ioctl BLKROSET 1 */
	int (*blk_size)(void *ctx, const char *path, uint64_t *bytes); /* BLKGETSIZE64 */
	int (*stat)(void *ctx, const char *path, struct stat *st);
	void *ctx;
};

extern const struct node_sys_ops node_sys_ops_real;

struct node_mount {
	unsigned major, minor;
	char root[1024]; /* path inside the mounted filesystem */
	char source[1024];
	char fstype[64];
	bool read_only; /* per-mount option "ro" */
};

/* The topmost mount on path (the last mountinfo line for it).  0, -ENOENT when path is not a
 * mount point, or another negative errno when mountinfo cannot be read. */
int node_mount_find(const char *proc_root, const char *path, struct node_mount *m);

/* Splits comma-separated mount options into mount(2) flags and the filesystem's data string
 * (the options mount(2) does not know as flags).  0 or -ENAMETOOLONG. */
int node_mount_flags(const char *opts, unsigned long *flags, char *data, size_t cap);

#endif
