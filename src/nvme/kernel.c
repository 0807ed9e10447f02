/* The production nvme_kernel_ops: libnvme for connect and delete, mknod(2) for device nodes.
 *
 * What libnvme 1.3 cannot express (csi.md §7.2 asks to say so in code):
 * - option order: libnvme builds the option string itself (nqn/transport first, then its own
 *   order for queue_size, reconnect_delay, ctrl_loss_tmo); the kernel parses options by name, so
 *   the observable set of options is the spec's and the order is libnvme's;
 * - errno: nvmf_add_ctrl reports ENVME_CONNECT_* codes; EALREADY, EINVAL and ECONNREFUSED map
 *   back, but other write(2) failures (ETIMEDOUT, EHOSTUNREACH, ...) all arrive as
 *   ENVME_CONNECT_WRITE and are reported as EIO with that explanation.
 * Options the volume context does not set are left out of the string: queue_size and
 * reconnect_delay 0 and ctrl_loss_tmo below -1 are skipped by libnvme's option builder.
 */
#include <errno.h>
#include <fcntl.h>
#include <libnvme.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <unistd.h>

#include "nvme/initiator.h"

static int map_connect_errno(int v)
{
	switch (v) {
	case ENVME_CONNECT_ALREADY: return -EALREADY;
	case ENVME_CONNECT_INVAL: return -EINVAL;
	case ENVME_CONNECT_CONNREFUSED: return -ECONNREFUSED;
	case ENVME_CONNECT_ADDRINUSE: return -EADDRINUSE;
	case ENVME_CONNECT_NODEV: return -ENODEV;
	case ENVME_CONNECT_OPNOTSUPP: return -EOPNOTSUPP;
	case ENVME_CONNECT_OPEN: return -ENOENT;
	default: return v > 0 && v < 1000 ? -v : -EIO;
	}
}

static int k_connect(void *ctx, const char *sysfs_root, const struct nvme_connect_args *a,
                     int *instance, struct err *e)
{
	struct nvme_fabrics_config *cfg;
	nvme_root_t r;
	nvme_host_t h;
	nvme_ctrl_t c;
	const char *name;
	int ret, saved;

	(void)ctx;
	(void)sysfs_root;
	r = nvme_create_root(NULL, LOG_ERR);
	if (!r)
		return err_set(e, -ENOMEM, "libnvme: cannot create root");
	h = nvme_lookup_host(r, a->hostnqn, a->hostid);
	c = h ? nvme_create_ctrl(r, a->subsysnqn, "tcp", a->traddr, NULL, NULL, a->trsvcid) : NULL;
	if (!c) {
		nvme_free_tree(r);
		return err_set(e, -ENOMEM, "libnvme: cannot create controller object");
	}
	cfg = nvme_ctrl_get_config(c);
	nvmf_default_config(cfg);
	cfg->ctrl_loss_tmo = a->has_ctrl_loss_tmo ? a->ctrl_loss_tmo : -2; /* -2: not written */
	cfg->reconnect_delay = a->has_reconnect_delay ? a->reconnect_delay : 0;
	cfg->queue_size = a->has_queue_size ? a->queue_size : 0;
	errno = 0;
	ret = nvmf_add_ctrl(h, c, cfg);
	saved = errno;
	if (ret < 0) {
		int code = map_connect_errno(saved);
		nvme_free_ctrl(c);
		nvme_free_tree(r);
		if (saved == ENVME_CONNECT_WRITE)
			return err_set(
			    e, code,
			    "the kernel refused the connect (libnvme 1.3 does not pass on "
			    "the kernel's error number)");
		return err_set(e, code, "%s", nvme_errno_to_string(saved));
	}
	name = nvme_ctrl_get_name(c);
	ret = (name && sscanf(name, "nvme%d", instance) == 1) ? 0 : -EBADMSG;
	nvme_free_tree(r);
	if (ret < 0)
		return err_set(e, ret, "libnvme returned no controller name");
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

const struct nvme_kernel_ops nvme_kernel_ops_libnvme = {
    .connect = k_connect,
    .disconnect = k_disconnect,
    .mknod_blk = k_mknod,
    .ctx = NULL,
};
