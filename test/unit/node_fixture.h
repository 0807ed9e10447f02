/* Fixture of the node tests (test_node, test_diskfull): a node on a fake sysfs tree, fake kernel
 * ops, a fake mountinfo and fake tools on PATH (test/unit/fakes/node/), all below a temporary
 * directory, and NodeStageVolume requests for volume VOL.  Header-only (static inline). */
#ifndef PILLAR_TEST_UNIT_NODE_FIXTURE_H
#define PILLAR_TEST_UNIT_NODE_FIXTURE_H

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakes/node/fakemount.h"
#include "fakes/node/fakesys.h"
#include "node/service.h"
#include "testutil.h"

#define NQN   "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-abc123"
#define VOL   "storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-abc123"
#define UUID1 "0b661a8a-9925-5917-b52c-a5719096bc2b"

/* printf into one of a few rotating static buffers (for assertions). */
static inline const char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static inline const char *fmt(const char *f, ...)
{
	static char buf[4][4800];
	static int i;
	va_list ap;
	i = (i + 1) % 4;
	va_start(ap, f);
	vsnprintf(buf[i], sizeof(buf[i]), f, ap);
	va_end(ap);
	return buf[i];
}

/* ---- fixture ---------------------------------------------------------------------------------- */

struct env {
	char root[4096], sys[4200], dev[4200], proc[4200], etc[4200], state[4200], log[4200];
	char staging[4200], target[4200], kubelet[4200];
	struct fk_kernel k;
	struct fk_mounts m;
	struct nvme_kernel_ops kops;
	struct node_sys_ops sops;
	struct node *n;
};

/* A node on v's roots (the fixture's configuration): 0 or node_new's error. */
static inline int env_node_new(struct env *v, struct node **out, struct err *e)
{
	struct node_config cfg = {.node_id = "worker-1",
	                          .state_dir = v->state,
	                          .etc_nvme_dir = v->etc,
	                          .sysfs_root = v->sys,
	                          .dev_root = v->dev,
	                          .proc_root = v->proc,
	                          .kubelet_dir = v->kubelet,
	                          .nvme_ops = &v->kops,
	                          .sys_ops = &v->sops,
	                          .dying_wait_ms = 200,
	                          .device_wait_ms = 200,
	                          .delete_wait_ms = 200,
	                          .size_wait_ms = 200};
	return node_new(&cfg, out, e);
}

static inline void env_init(struct env *v, int multipath)
{
	char path[PATH_MAX], fakes[PATH_MAX];
	struct err e = {0};
	memset(v, 0, sizeof(*v));
	snprintf(v->root, sizeof(v->root), "%s", tu_mkdtemp());
#define SUB(f, s) ck_assert(snprintf(v->f, sizeof(v->f), "%s/" s, v->root) < (int)sizeof(v->f))
	SUB(sys, "sys");
	SUB(dev, "dev");
	SUB(proc, "proc");
	SUB(etc, "etc/nvme");
	SUB(state, "state");
	SUB(log, "tools.log");
	SUB(kubelet, "kubelet");
	SUB(staging,
	    "kubelet/plugins/kubernetes.io/csi/pillar-csi.bhyoo.com/"
	    "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0/globalmount");
	SUB(target, "kubelet/pods/uid1/volumes/kubernetes.io~csi/pv1/mount");
#undef SUB
	tu_write(v->root, "proc/self/mountinfo", "");
	tu_write(v->root, "dev/nvme-fabrics", "");
	tu_write(v->root, "kubelet/.keep", "");
	tu_write(v->root, "sys/module/nvme_tcp/refcnt", "0\n");
	tu_write(v->root, "etc/nvme/hostnqn",
	         "nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1\n");
	tu_write(v->root, "etc/nvme/hostid", "6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1\n");
	ck_assert(snprintf(v->k.root, sizeof(v->k.root), "%s", v->sys) < (int)sizeof(v->k.root));
	v->k.instance = 3;
	v->k.subsys = 1;
	v->k.multipath = multipath;
	v->k.create_ns = 1;
	v->k.uuid = UUID1;
	ck_assert(snprintf(v->m.mountinfo, sizeof(v->m.mountinfo), "%s/self/mountinfo", v->proc) <
	          (int)sizeof(v->m.mountinfo));
	v->kops = (struct nvme_kernel_ops){fk_connect, fk_disconnect, fk_mknod, &v->k};
	v->sops =
	    (struct node_sys_ops){fm_mount, fm_umount, fm_blk_ro, fm_blk_size, fm_stat, &v->m};
	ck_assert_ptr_nonnull(realpath("test/unit/fakes/node", fakes));
	ck_assert(snprintf(path, sizeof(path), "%s:%s", fakes,
	                   getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin") < (int)sizeof(path));
	setenv("PATH", path, 1);
	setenv("FAKE_NODE_LOG", v->log, 1);
	unsetenv("FAKE_BLKID_OUT");
	unsetenv("FAKE_BLKID_RC");
	unsetenv("FAKE_TOOL_FAIL");
	ck_assert_int_eq(env_node_new(v, &v->n, &e), 0);
}

static inline void env_done(struct env *v)
{
	node_free(v->n);
	tu_rmtree(v->root);
}

/* A stage request; ctx pairs end with NULL. */
struct sreq {
	Csi__V1__NodeStageVolumeRequest r;
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__AccessMode mode;
	Csi__V1__VolumeCapability__MountVolume mnt;
	Csi__V1__VolumeCapability__BlockVolume blk;
	Csi__V1__NodeStageVolumeRequest__VolumeContextEntry ent[12], *ents[12];
};

static inline void sreq_init(struct sreq *s, struct env *v, int block, const char *const *extra)
{
	static const char *const base[] = {"target_id",
	                                   NQN,
	                                   "address",
	                                   "10.0.0.5",
	                                   "port",
	                                   "4420",
	                                   "pillar-csi.bhyoo.com/protocol-type",
	                                   "nvmeof-tcp",
	                                   NULL};
	size_t i = 0, j;
	csi__v1__node_stage_volume_request__init(&s->r);
	csi__v1__volume_capability__init(&s->cap);
	csi__v1__volume_capability__access_mode__init(&s->mode);
	csi__v1__volume_capability__mount_volume__init(&s->mnt);
	csi__v1__volume_capability__block_volume__init(&s->blk);
	s->mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	s->cap.access_mode = &s->mode;
	if (block) {
		s->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		s->cap.block = &s->blk;
	} else {
		s->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		s->cap.mount = &s->mnt;
	}
	for (j = 0; base[j]; j += 2, i++) {
		csi__v1__node_stage_volume_request__volume_context_entry__init(&s->ent[i]);
		s->ent[i].key = (char *)base[j];
		s->ent[i].value = (char *)base[j + 1];
		s->ents[i] = &s->ent[i];
	}
	for (j = 0; extra && extra[j]; j += 2, i++) {
		csi__v1__node_stage_volume_request__volume_context_entry__init(&s->ent[i]);
		s->ent[i].key = (char *)extra[j];
		s->ent[i].value = (char *)extra[j + 1];
		s->ents[i] = &s->ent[i];
	}
	s->r.volume_id = (char *)VOL;
	s->r.staging_target_path = v->staging;
	s->r.volume_capability = &s->cap;
	s->r.n_volume_context = i;
	s->r.volume_context = s->ents;
}

static inline int stage(struct env *v, struct sreq *s, struct grpc_status *st)
{
	Csi__V1__NodeStageVolumeResponse resp = CSI__V1__NODE_STAGE_VOLUME_RESPONSE__INIT;
	memset(st, 0, sizeof(*st));
	return node_stage_volume(v->n, &s->r, &resp, st);
}

#endif
