/* The production nvme_kernel_ops: the fabrics device for connect, sysfs for delete, mknod(2) for
 * device nodes.
 *
 * Connect is csi.md §7.2 steps 2-3 done directly: one write(2) of the spec's line
 * (nvme_connect_string) to /dev/nvme-fabrics opened read-write, then the kernel's answer
 * "instance=<N>,cntlid=<M>" read from the same descriptor.  The write's errno is returned as the
 * kernel gave it (ETIMEDOUT, EHOSTUNREACH, …: csi.md §7.2 step 4 reports the errno's name), which
 * is why the fabrics device is written directly rather than through a library that folds
 * failures into one code.
 * ctx, when set, is the fabrics device's path (tests); NULL is /dev/nvme-fabrics.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "nvme/initiator.h"

static int k_connect(void *ctx, const char *sysfs_root, const struct nvme_connect_args *a,
                     int *instance, struct err *e)
{
	const char *dev = ctx ? (const char *)ctx : "/dev/nvme-fabrics";
	char line[2048], ans[256];
	ssize_t n;
	size_t len;
	int fd, r;

	(void)sysfs_root;
	if (nvme_connect_string(a, line, sizeof(line)) < 0)
		return err_set(e, -ENAMETOOLONG, "connect options too long for %s", a->subsysnqn);
	len = strlen(line);
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "open %s: %s", dev, strerror(errno));
	n = write(fd, line, len);
	if (n != (ssize_t)len) {
		r = n < 0 ? -errno : -EIO;
		close(fd);
		return err_set(e, r, "write %s: %s", dev, n < 0 ? strerror(-r) : "short write");
	}
	n = read(fd, ans, sizeof(ans) - 1);
	r = n < 0 ? -errno : 0;
	close(fd);
	if (n <= 0)
		return err_set(e, n < 0 ? r : -EBADMSG, "%s gave no answer to the connect%s%s", dev,
		               n < 0 ? ": " : "", n < 0 ? strerror(-r) : "");
	ans[n] = 0;
	if (sscanf(ans, "instance=%d", instance) != 1 || *instance < 0)
		return err_set(e, -EBADMSG, "%s answered the connect with \"%.100s\"", dev, ans);
	return 0;
}

/* Deleting a controller is one write of "1" to its delete_controller attribute — what libnvme's
 * nvme_disconnect_ctrl does too, but here always under our sysfs root, so a test root can never
 * reach a real controller of the same name. */
static int k_disconnect(void *ctx, const char *sysfs_root, const char *name, struct err *e)
{
	char path[PATH_MAX];
	int fd, ret = 0;

	(void)ctx;
	snprintf(path, sizeof(path), "%s/class/nvme/%s/delete_controller", sysfs_root, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT
		                       : err_set(e, -errno, "open %s: %s", path, strerror(errno));
	if (write(fd, "1", 1) != 1)
		ret = errno == ENOENT ? -ENOENT
		                      : err_set(e, -errno, "write %s: %s", path, strerror(errno));
	close(fd);
	return ret;
}

static int k_mknod(void *ctx, const char *path, unsigned major, unsigned minor, struct err *e)
{
	(void)ctx;
	if (mknod(path, S_IFBLK | 0660, makedev(major, minor)) < 0)
		return errno == EEXIST ? -EEXIST
		                       : err_set(e, -errno, "mknod %s: %s", path, strerror(errno));
	if (chmod(path, 0660) < 0)
		return err_set(e, -errno, "chmod %s: %s", path, strerror(errno));
	return 0;
}

const struct nvme_kernel_ops nvme_kernel_ops_sys = {
    .connect = k_connect,
    .disconnect = k_disconnect,
    .mknod_blk = k_mknod,
    .ctx = NULL,
};
