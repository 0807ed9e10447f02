/* Fake kernel for the node tests: a plain directory tree shaped like the parts of sysfs that
 * src/nvme reads, and nvme_kernel_ops that add or remove controllers in it the way the kernel
 * does.  Header-only (static inline) so that test_nvme and test_node share it. */
#ifndef PILLAR_TEST_FAKESYS_H
#define PILLAR_TEST_FAKESYS_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../testutil.h"
#include "nvme/initiator.h"

/* A controller: class/nvme/nvme<n>/{subsysnqn,state,address}. */
static inline void fk_ctrl(const char *root, int n, const char *nqn, const char *state,
                           const char *traddr, const char *port)
{
	char rel[256], val[512];
	snprintf(rel, sizeof(rel), "class/nvme/nvme%d/subsysnqn", n);
	snprintf(val, sizeof(val), "%s\n", nqn);
	tu_write(root, rel, val);
	snprintf(rel, sizeof(rel), "class/nvme/nvme%d/state", n);
	snprintf(val, sizeof(val), "%s\n", state);
	tu_write(root, rel, val);
	snprintf(rel, sizeof(rel), "class/nvme/nvme%d/address", n);
	snprintf(val, sizeof(val), "traddr=%s,trsvcid=%s,src_addr=192.0.2.99\n", traddr, port);
	tu_write(root, rel, val);
	snprintf(rel, sizeof(rel), "class/nvme/nvme%d/rescan_controller", n);
	tu_write(root, rel, "");
}

/* A subsystem: class/nvme-subsystem/nvme-subsys<s>/subsysnqn. */
static inline void fk_subsys(const char *root, int s, const char *nqn)
{
	char rel[256], val[512];
	snprintf(rel, sizeof(rel), "class/nvme-subsystem/nvme-subsys%d/subsysnqn", s);
	snprintf(val, sizeof(val), "%s\n", nqn);
	tu_write(root, rel, val);
}

/* A namespace block device <dev> listed under <parent> (a subsystem or controller directory,
 * relative to root) plus block/<dev>/{nsid,dev,uuid,nguid,size}. */
static inline void fk_ns(const char *root, const char *parent, const char *dev, int nsid,
                         const char *majmin, const char *uuid, const char *nguid,
                         unsigned long long sectors)
{
	char rel[256], val[128];
	snprintf(rel, sizeof(rel), "%s/%s/dev", parent, dev);
	snprintf(val, sizeof(val), "%s\n", majmin);
	tu_write(root, rel, val);
	snprintf(rel, sizeof(rel), "block/%s/nsid", dev);
	snprintf(val, sizeof(val), "%d\n", nsid);
	tu_write(root, rel, val);
	snprintf(rel, sizeof(rel), "block/%s/dev", dev);
	snprintf(val, sizeof(val), "%s\n", majmin);
	tu_write(root, rel, val);
	if (uuid) {
		snprintf(rel, sizeof(rel), "block/%s/uuid", dev);
		snprintf(val, sizeof(val), "%s\n", uuid);
		tu_write(root, rel, val);
	}
	if (nguid) {
		snprintf(rel, sizeof(rel), "block/%s/nguid", dev);
		snprintf(val, sizeof(val), "%s\n", nguid);
		tu_write(root, rel, val);
	}
	snprintf(rel, sizeof(rel), "block/%s/size", dev);
	snprintf(val, sizeof(val), "%llu\n", sectors);
	tu_write(root, rel, val);
}

static inline void fk_rm(const char *root, const char *rel)
{
	char p[8192];
	if (snprintf(p, sizeof(p), "%s/%s", root, rel) < (int)sizeof(p))
		tu_rmtree(p);
}

struct fk_kernel {
	char root[4096];
	int connect_rc;   /* what connect returns (0, -EALREADY, -ECONNREFUSED, ...) */
	int instance;     /* the nvme<N> a successful connect creates */
	int subsys;       /* nvme-subsys<S> it belongs to */
	int multipath;    /* 1: namespace nvme<S>n1 under the subsystem; 0: nvme<N>n1 under ctrl */
	int create_ns;    /* connect also creates namespace 1 */
	const char *uuid; /* identity of that namespace */
	int stuck;        /* disconnect leaves the controller in place */
	int no_host_auth; /* a kernel without CONFIG_NVME_HOST_AUTH: no dhchap_* attributes */
	const char *reject_secret; /* a connect with this dhchap_secret: EKEYREJECTED */
	/* a connect with this dhchap_ctrl_secret: EKEYREJECTED (the target presents another) */
	const char *reject_ctrl_secret;
	int connects, disconnects, mknods;
	char last_connect[1024];
	char disconnected[256];
};

static inline int fk_connect(void *ctx, const char *sysfs_root, const struct nvme_connect_args *a,
                             int *instance, struct err *e)
{
	struct fk_kernel *k = ctx;
	(void)sysfs_root;
	k->connects++;
	nvme_connect_string(a, k->last_connect, sizeof(k->last_connect));
	if (k->connect_rc != 0 && k->connect_rc != -EALREADY)
		return err_set(e, k->connect_rc, "fake connect failed");
	if (k->reject_secret && a->dhchap_secret && !strcmp(k->reject_secret, a->dhchap_secret))
		return err_set(e, -EKEYREJECTED, "fake connect: key rejected");
	if (k->reject_ctrl_secret && a->dhchap_ctrl_secret &&
	    !strcmp(k->reject_ctrl_secret, a->dhchap_ctrl_secret))
		return err_set(e, -EKEYREJECTED, "fake connect: controller key rejected");
	fk_ctrl(k->root, k->instance, a->subsysnqn, "live", a->traddr, a->trsvcid);
	if (!k->no_host_auth) { /* the kernel shows the connect's secrets (mode 0600 there) */
		char rel[256];
		snprintf(rel, sizeof(rel), "class/nvme/nvme%d/dhchap_secret", k->instance);
		tu_write(k->root, rel, a->dhchap_secret ? a->dhchap_secret : "none");
		snprintf(rel, sizeof(rel), "class/nvme/nvme%d/dhchap_ctrl_secret", k->instance);
		tu_write(k->root, rel, a->dhchap_ctrl_secret ? a->dhchap_ctrl_secret : "none");
	}
	fk_subsys(k->root, k->subsys, a->subsysnqn);
	if (k->create_ns) {
		char parent[128], dev[64];
		if (k->multipath) {
			snprintf(parent, sizeof(parent), "class/nvme-subsystem/nvme-subsys%d",
			         k->subsys);
			snprintf(dev, sizeof(dev), "nvme%dn1", k->subsys);
		} else {
			snprintf(parent, sizeof(parent), "class/nvme/nvme%d", k->instance);
			snprintf(dev, sizeof(dev), "nvme%dn1", k->instance);
		}
		fk_ns(k->root, parent, dev, 1, "259:0", k->uuid, NULL, 2097152);
	}
	if (k->connect_rc == -EALREADY)
		return err_set(e, -EALREADY, "already connected");
	*instance = k->instance;
	return 0;
}

static inline int fk_disconnect(void *ctx, const char *sysfs_root, const char *name, struct err *e)
{
	struct fk_kernel *k = ctx;
	char rel[256];
	(void)sysfs_root;
	(void)e;
	k->disconnects++;
	strncat(k->disconnected, name, sizeof(k->disconnected) - strlen(k->disconnected) - 2);
	strcat(k->disconnected, " ");
	if (!k->stuck) {
		snprintf(rel, sizeof(rel), "class/nvme/%s", name);
		fk_rm(k->root, rel);
	}
	return 0;
}

static inline int fk_mknod(void *ctx, const char *path, unsigned major, unsigned minor,
                           struct err *e)
{
	struct fk_kernel *k = ctx;
	FILE *f = fopen(path, "w");
	if (!f)
		return err_set(e, -errno, "fake mknod %s", path);
	fprintf(f, "%u:%u\n", major, minor);
	fclose(f);
	k->mknods++;
	return 0;
}

#endif
