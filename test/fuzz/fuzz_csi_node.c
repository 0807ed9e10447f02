/* libFuzzer target: csi.v1.Identity and csi.v1.Node requests through the gRPC server harness
 * (harness.h) into the node's handlers.  The kernel is a fake that refuses every connect
 * (ECONNREFUSED), mounts are refused (EPERM), the host identity, sysfs, /dev and /proc live in a
 * scratch directory and PATH names an empty directory (no tool can run).  The first byte picks
 * the method, the rest is the protobuf request.
 *
 * The handlers act on the paths a request names (mkdir, open, unlink, rmdir) and this runs as
 * whoever runs the tests: this target is linked with --wrap for those calls (Makefile) and the
 * wrappers below refuse, with EACCES, every change outside the scratch directory or through a
 * path with "..", so a fuzzed target_path cannot touch the machine.  The kubelet directory is
 * <scratch>/kubelet; the node walks below it with openat/mkdirat/unlinkat, wrapped the same way
 * (the directory a descriptor names must be inside the scratch directory). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "node/grpc_service.h"
#include "node/service.h"

/* ---- the jail --------------------------------------------------------------------------------- */

int __real_open(const char *path, int flags, ...);
int __real_mkdir(const char *path, mode_t mode);
int __real_rmdir(const char *path);
int __real_unlink(const char *path);
int __real_rename(const char *from, const char *to);
int __real_openat(int dirfd, const char *path, int flags, ...);
int __real_mkdirat(int dirfd, const char *path, mode_t mode);
int __real_unlinkat(int dirfd, const char *path, int flags);
int __wrap_open(const char *path, int flags, ...);
int __wrap_mkdir(const char *path, mode_t mode);
int __wrap_rmdir(const char *path);
int __wrap_unlink(const char *path);
int __wrap_rename(const char *from, const char *to);
int __wrap_openat(int dirfd, const char *path, int flags, ...);
int __wrap_mkdirat(int dirfd, const char *path, mode_t mode);
int __wrap_unlinkat(int dirfd, const char *path, int flags);

static int inside(const char *path)
{
	const char *d = fuzz_dir();
	size_t n = strlen(d);
	if (path && strncmp(path, d, n) == 0 && path[n] == '/' && !strstr(path, ".."))
		return 1;
	errno = EACCES;
	return 0;
}

int __wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	if (flags & O_CREAT) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if ((flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) && !inside(path))
		return -1;
	return __real_open(path, flags, mode);
}

int __wrap_mkdir(const char *path, mode_t mode)
{
	struct stat st;
	if (inside(path))
		return __real_mkdir(path, mode);
	if (path && stat(path, &st) == 0) /* what mkdir says about an existing path */
		errno = EEXIST;
	return -1;
}

int __wrap_rmdir(const char *path)
{
	return inside(path) ? __real_rmdir(path) : -1;
}

int __wrap_unlink(const char *path)
{
	return inside(path) ? __real_unlink(path) : -1;
}

int __wrap_rename(const char *from, const char *to)
{
	return inside(from) && inside(to) ? __real_rename(from, to) : -1;
}

/* path relative to the directory open as dirfd, resolved by name (/proc/self/fd), inside the
 * scratch directory; a single component only (the node walks one component at a time). */
static int inside_at(int dirfd, const char *path)
{
	char link[64], dir[PATH_MAX + 1], full[2 * PATH_MAX + 2];
	ssize_t n;
	if (dirfd == AT_FDCWD || (path && path[0] == '/'))
		return inside(path);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = readlink(link, dir, sizeof(dir) - 1);
	if (n <= 0 || !path || strchr(path, '/')) {
		errno = EACCES;
		return 0;
	}
	dir[n] = '\0';
	snprintf(full, sizeof(full), "%s/%s", dir, path);
	return inside(full);
}

int __wrap_openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	if (flags & O_CREAT) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if ((flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) && !inside_at(dirfd, path))
		return -1;
	return __real_openat(dirfd, path, flags, mode);
}

int __wrap_mkdirat(int dirfd, const char *path, mode_t mode)
{
	return inside_at(dirfd, path) ? __real_mkdirat(dirfd, path, mode) : -1;
}

int __wrap_unlinkat(int dirfd, const char *path, int flags)
{
	return inside_at(dirfd, path) ? __real_unlinkat(dirfd, path, flags) : -1;
}

/* ---- fakes ------------------------------------------------------------------------------------ */

static int k_connect(void *ctx, const char *sysfs_root, const struct nvme_connect_args *a,
                     int *instance, struct err *e)
{
	(void)ctx, (void)sysfs_root, (void)a, (void)instance;
	return err_set(e, -ECONNREFUSED, "failed to write to nvme-fabrics device");
}

static int k_disconnect(void *ctx, const char *sysfs_root, const char *name, struct err *e)
{
	(void)ctx, (void)sysfs_root, (void)name, (void)e;
	return -ENOENT;
}

static int k_mknod(void *ctx, const char *path, unsigned major, unsigned minor, struct err *e)
{
	(void)ctx, (void)path, (void)major, (void)minor;
	return err_set(e, -EACCES, "mknod refused");
}

static int s_mount(void *ctx, const char *src, const char *target, const char *fstype,
                   unsigned long flags, const char *data)
{
	(void)ctx, (void)src, (void)target, (void)fstype, (void)flags, (void)data;
	return -EPERM;
}

static int s_umount(void *ctx, const char *target)
{
	(void)ctx, (void)target;
	return -EINVAL;
}

static int s_blk_ro(void *ctx, const char *dev)
{
	(void)ctx, (void)dev;
	return -ENOTTY;
}

static int s_blk_size(void *ctx, const char *path, uint64_t *bytes)
{
	(void)ctx, (void)path, (void)bytes;
	return -ENOTTY;
}

static int s_stat(void *ctx, const char *path, struct stat *st)
{
	(void)ctx;
	return inside(path) && stat(path, st) == 0 ? 0 : -ENOENT;
}

static const struct nvme_kernel_ops kops = {k_connect, k_disconnect, k_mknod, NULL};
static const struct node_sys_ops sops = {s_mount, s_umount, s_blk_ro, s_blk_size, s_stat, NULL};

/* ---- target ----------------------------------------------------------------------------------- */

static struct node *node;
static struct grpc_service identity, nodesvc;

static void node_start(void)
{
	char p[7][300];
	static const char *const sub[] = {"state", "etc", "sys", "dev", "proc", "bin", "kubelet"};
	struct err e = {0};
	for (int i = 0; i < 7; i++)
		snprintf(p[i], sizeof(p[i]), "%s/%s", fuzz_dir(), sub[i]);
	fuzz_write("etc/hostnqn",
	           "nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1\n", 69);
	fuzz_write("etc/hostid", "6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1\n", 37);
	fuzz_write("proc/self/mountinfo", "", 0);
	fuzz_write("dev/nvme-fabrics", "", 0);
	fuzz_write("sys/module/nvme_tcp/refcnt", "0\n", 2);
	fuzz_write("bin/.keep", "", 0);
	fuzz_write("kubelet/pods/.keep", "", 0);
	setenv("PATH", p[5], 1);
	struct node_config cfg = {.node_id = "worker-1",
	                          .state_dir = p[0],
	                          .etc_nvme_dir = p[1],
	                          .sysfs_root = p[2],
	                          .dev_root = p[3],
	                          .proc_root = p[4],
	                          .kubelet_dir = p[6],
	                          .nvme_ops = &kops,
	                          .sys_ops = &sops,
	                          .dying_wait_ms = 1,
	                          .device_wait_ms = 1,
	                          .delete_wait_ms = 1,
	                          .size_wait_ms = 1};
	if (node_new(&cfg, &node, &e) < 0) {
		fprintf(stderr, "fuzz_csi_node: node_new: %s\n", e.msg);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned n;
	char path[128];

	if (!node) {
		node_start();
		node_grpc_identity_service(node, &identity);
		node_grpc_node_service(node, &nodesvc);
		fuzz_rpc_add(&identity);
		fuzz_rpc_add(&nodesvc);
	} else if (++n % 256 == 0) {
		node_free(node);
		fuzz_dir_reset();
		node_start();
		identity.ctx = nodesvc.ctx = node;
	}
	if (size < 1)
		return 0;
	fuzz_rpc_call(fuzz_rpc_pick(data[0], path, sizeof(path)), data + 1, size - 1);
	return 0;
}
