/* Unit tests of roles/node: the CSI Identity and Node handlers against a fake sysfs tree, fake
 * kernel ops, a fake mountinfo and fake tools on PATH (test/unit/fakes/node/).  Each test checks
 * a statement of csi.md §1.1, §6, §7, §8 or §9 (codes and messages verbatim). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "fakes/node/fakemount.h"
#include "fakes/node/fakesys.h"
#include "node/internal.h"
#include "node/record.h"
#include "node/service.h"
#include "node_fixture.h"
#include "testutil.h"
#include "version/version.h"

static int unstage(struct env *v, const char *id, struct grpc_status *st)
{
	Csi__V1__NodeUnstageVolumeRequest r = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeResponse resp = CSI__V1__NODE_UNSTAGE_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)id;
	r.staging_target_path = v->staging;
	memset(st, 0, sizeof(*st));
	return node_unstage_volume(v->n, &r, &resp, st);
}

static int publish(struct env *v, struct sreq *s, int readonly, struct grpc_status *st)
{
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodePublishVolumeResponse resp = CSI__V1__NODE_PUBLISH_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.staging_target_path = v->staging;
	r.target_path = v->target;
	r.volume_capability = &s->cap;
	r.readonly = readonly;
	memset(st, 0, sizeof(*st));
	return node_publish_volume(v->n, &r, &resp, st);
}

static int unpublish(struct env *v, struct grpc_status *st)
{
	Csi__V1__NodeUnpublishVolumeRequest r = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnpublishVolumeResponse resp = CSI__V1__NODE_UNPUBLISH_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.target_path = v->target;
	memset(st, 0, sizeof(*st));
	return node_unpublish_volume(v->n, &r, &resp, st);
}

static const char *record_text(struct env *v)
{
	return tu_read(v->state, "storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json");
}

/* ---- Identity ------------------------------------------------------------------------------ */

/* Probe's answer turns to want within 10 s (the readiness thread sees the change). */
static bool probe_becomes(struct node *n, bool want)
{
	for (int i = 0; i < 1000; i++) {
		Csi__V1__ProbeResponse probe = CSI__V1__PROBE_RESPONSE__INIT;
		struct grpc_status st = {0};
		ck_assert_int_eq(node_probe(n, NULL, &probe, &st), GRPC_OK);
		bool ready = probe.ready->value;
		node_response_clear(&probe.base);
		if (ready == want)
			return true;
		usleep(10000);
	}
	return false;
}

START_TEST(test_identity_service)
{
	struct env v;
	struct grpc_status st = {0};
	Csi__V1__GetPluginInfoResponse *info = malloc(sizeof(*info));
	Csi__V1__GetPluginCapabilitiesResponse caps =
	    CSI__V1__GET_PLUGIN_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__ProbeResponse probe = CSI__V1__PROBE_RESPONSE__INIT;
	env_init(&v, 1);
	csi__v1__get_plugin_info_response__init(info);
	ck_assert_int_eq(node_get_plugin_info(v.n, NULL, info, &st), GRPC_OK);
	ck_assert_str_eq(info->name, "pillar-csi.bhyoo.com");
	ck_assert_str_eq(info->vendor_version, version_string());
	protobuf_c_message_free_unpacked(&info->base, NULL); /* heap response: the documented way */
	ck_assert_int_eq(node_get_plugin_capabilities(v.n, NULL, &caps, &st), GRPC_OK);
	ck_assert_uint_eq(caps.n_capabilities, 3);
	ck_assert_int_eq(caps.capabilities[0]->service->type,
	                 CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE);
	ck_assert_int_eq(
	    caps.capabilities[1]->service->type,
	    CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS);
	ck_assert_int_eq(caps.capabilities[2]->volume_expansion->type,
	                 CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE);
	node_response_clear(&caps.base);
	ck_assert_int_eq(node_probe(v.n, NULL, &probe, &st), GRPC_OK);
	ck_assert(probe.ready->value);
	node_response_clear(&probe.base);
	/* no /dev/nvme-fabrics → not ready, noticed off the call path (inotify) */
	fk_rm(v.root, "dev/nvme-fabrics");
	ck_assert(probe_becomes(v.n, false));
	/* back → ready again */
	tu_write(v.root, "dev/nvme-fabrics", "");
	ck_assert(probe_becomes(v.n, true));
	env_done(&v);
}
END_TEST

START_TEST(test_probe_not_ready_with_shared_identity)
{
	struct env v;
	struct node *n2;
	struct err e = {0};
	struct grpc_status st;
	bool shared;
	Csi__V1__ProbeResponse probe = CSI__V1__PROBE_RESPONSE__INIT;
	struct node_config cfg = {0};
	env_init(&v, 1);
	tu_write(v.root, "etc/nvme/hostid", "00000000-0000-0000-0000-000000000000\n");
	cfg = (struct node_config){.node_id = "w",
	                           .state_dir = v.state,
	                           .etc_nvme_dir = v.etc,
	                           .sysfs_root = v.sys,
	                           .dev_root = v.dev,
	                           .proc_root = v.proc,
	                           .kubelet_dir = v.kubelet,
	                           .nvme_ops = &v.kops,
	                           .sys_ops = &v.sops};
	ck_assert_int_eq(node_new(&cfg, &n2, &e), 0);
	node_host_identity(n2, &shared);
	ck_assert(shared);
	ck_assert_int_eq(node_probe(n2, NULL, &probe, &st), GRPC_OK);
	ck_assert(!probe.ready->value);
	node_response_clear(&probe.base);
	node_free(n2);
	/* an invalid existing value is fatal at start-up */
	tu_write(v.root, "etc/nvme/hostnqn", "bogus\n");
	ck_assert_int_eq(node_new(&cfg, &n2, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "hostnqn: invalid host NQN \"bogus\""));
	env_done(&v);
}
END_TEST

START_TEST(test_node_info_and_capabilities)
{
	struct env v;
	struct grpc_status st;
	Csi__V1__NodeGetInfoResponse info = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;
	Csi__V1__NodeGetCapabilitiesResponse caps = CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT;
	env_init(&v, 1);
	ck_assert_int_eq(node_get_info(v.n, NULL, &info, &st), GRPC_OK);
	ck_assert_str_eq(info.node_id, "worker-1");
	ck_assert_int_eq(info.max_volumes_per_node, 0);
	ck_assert_ptr_nonnull(info.accessible_topology);
	ck_assert_str_eq(info.accessible_topology->segments[0]->key, "pillar-csi.bhyoo.com/nvmeof");
	ck_assert_str_eq(info.accessible_topology->segments[0]->value, "true");
	node_response_clear(&info.base);
	fk_rm(v.root, "sys/module/nvme_tcp");
	ck_assert_int_eq(node_get_info(v.n, NULL, &info, &st), GRPC_OK);
	ck_assert_ptr_null(info.accessible_topology);
	node_response_clear(&info.base);
	ck_assert_int_eq(node_get_capabilities(v.n, NULL, &caps, &st), GRPC_OK);
	ck_assert_uint_eq(caps.n_capabilities, 5);
	ck_assert_int_eq(caps.capabilities[0]->rpc->type,
	                 CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME);
	ck_assert_int_eq(caps.capabilities[1]->rpc->type,
	                 CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME);
	ck_assert_int_eq(caps.capabilities[2]->rpc->type,
	                 CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS);
	ck_assert_int_eq(caps.capabilities[3]->rpc->type,
	                 CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER);
	ck_assert_int_eq(caps.capabilities[4]->rpc->type,
	                 CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION);
	node_response_clear(&caps.base);
	env_done(&v);
}
END_TEST

/* ---- Stage ---------------------------------------------------------------------------------- */

START_TEST(test_stage_ext4_blank_then_idempotent)
{
	for (int mp = 0; mp <= 1; mp++) {
		struct env v;
		struct sreq s;
		struct grpc_status st;
		static const char *const extra[] = {"pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo",
		                                    "60",
		                                    "pillar-csi.bhyoo.com/mount-options",
		                                    "[\"noatime\",\"discard\"]",
		                                    "pillar-csi.bhyoo.com/mkfs-options",
		                                    "[\"-E\",\"lazy_itable_init=0\"]",
		                                    NULL};
		env_init(&v, mp);
		sreq_init(&s, &v, 0, extra);
		char *flags[] = {"nodev,noatime", "data=ordered"};
		s.mnt.n_mount_flags = 2;
		s.mnt.mount_flags = flags;
		ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
		ck_assert_int_eq(v.k.connects, 1);
		ck_assert_ptr_nonnull(strstr(v.k.last_connect, ",ctrl_loss_tmo=60"));
		ck_assert_ptr_null(strstr(v.k.last_connect, "queue_size"));
		char want[16384];
		snprintf(want, sizeof(want),
		         "blkid -p -o export %s/%s\nmkfs.ext4 -q -F -E lazy_itable_init=0 %s/%s\n",
		         v.dev, mp ? "nvme1n1" : "nvme3n1", v.dev, mp ? "nvme1n1" : "nvme3n1");
		ck_assert_str_eq(tu_read(v.root, "tools.log"), want);
		ck_assert_str_eq(v.m.last_data, "discard,data=ordered");
		ck_assert_uint_eq(v.m.last_flags, MS_NOATIME | MS_NODEV);
		/* The record, in the spec's format. */
		snprintf(want, sizeof(want),
		         "\"nvmeof\":\t{\n\t\t\"subsys_nqn\":\t\"%s\",\n\t\t\"address\":\t\"10.0.0."
		         "5\",\n"
		         "\t\t\"port\":\t\"4420\"\n\t}",
		         NQN);
		const char *rec = record_text(&v);
		ck_assert_ptr_nonnull(strstr(rec, "\"protocol_type\":\t\"nvmeof-tcp\""));
		ck_assert_ptr_nonnull(strstr(rec, "\"access_type\":\t\"filesystem\""));
		ck_assert_ptr_nonnull(strstr(rec, "\"fs_type\":\t\"ext4\""));
		ck_assert_ptr_nonnull(strstr(rec, want));
		ck_assert_ptr_nonnull(strstr(rec, "\"volume_id\":\t\"" VOL "\""));
		ck_assert_ptr_nonnull(strstr(rec, "\"namespace_uuid\":\t\"" UUID1 "\""));
		ck_assert_ptr_nonnull(strstr(rec, "\"staged_at\":\t\"20"));
		struct stat sb;
		char p[8192];
		snprintf(p, sizeof(p), "%s/storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json",
		         v.state);
		ck_assert_int_eq(stat(p, &sb), 0);
		ck_assert_int_eq(sb.st_mode & 0777, 0600);
		ck_assert_int_eq(stat(v.state, &sb), 0);
		ck_assert_int_eq(sb.st_mode & 0777, 0700);
		/* Again: OK without any work; as block: ALREADY_EXISTS. */
		ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
		ck_assert_int_eq(v.k.connects, 1);
		ck_assert_int_eq(v.m.mounts, 1);
		struct sreq b;
		sreq_init(&b, &v, 1, NULL);
		ck_assert_int_eq(stage(&v, &b, &st), GRPC_ALREADY_EXISTS);
		env_done(&v);
	}
}
END_TEST

START_TEST(test_stage_validation)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	env_init(&v, 1);
	sreq_init(&s, &v, 0, NULL);
	s.r.volume_id = (char *)"";
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "volume_id is required");
	s.r.volume_id = (char *)VOL;
	s.r.staging_target_path = (char *)"";
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "staging_target_path is required");
	s.r.staging_target_path = v.staging;
	s.r.volume_capability = NULL;
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "volume_capability is required");
	s.r.volume_capability = &s.cap;
	s.r.volume_id = (char *)"storage-node-1/nvmeof-tcp/zfs-zvol/../../etc";
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(st.msg, "is malformed"));
	s.r.volume_id = (char *)VOL;
	s.ent[3].value = (char *)"iscsi";
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, "unsupported protocol \"iscsi\"");
	s.ent[3].value = (char *)"nvmeof-tcp";
	s.ent[1].key = (char *)"addr";
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "volume_context missing required key \"address\"");
	s.ent[1].key = (char *)"address";
	static const char *const q[] = {"pillar-csi.bhyoo.com/nvmeof-max-queue-size", "8", NULL};
	sreq_init(&s, &v, 0, q);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	static const char *const rd[] = {"pillar-csi.bhyoo.com/nvmeof-reconnect-delay", "0", NULL};
	sreq_init(&s, &v, 0, rd);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	static const char *const cl[] = {"pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "-2", NULL};
	sreq_init(&s, &v, 0, cl);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	static const char *const mk[] = {"pillar-csi.bhyoo.com/mkfs-options", "[\"-F\"]", NULL};
	sreq_init(&s, &v, 0, mk);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg,
	                 "filesystem.mkfsOptions: mkfs option \"-F\" is not allowed for ext4");
	ck_assert_int_eq(v.k.connects, 1); /* validation precedes attach except for mkfs options */
	/* busy volume → ABORTED */
	sreq_init(&s, &v, 0, NULL);
	struct keylock_hold held;
	ck_assert_int_eq(node_lock_volume(v.n, &held, VOL, &st), GRPC_OK);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_ABORTED);
	ck_assert_str_eq(st.msg, "an operation on volume \"" VOL "\" is already in progress");
	keylock_release(&v.n->locks, &held);
	/* ctrlLossTmo and reconnectDelay are int32 (crds.md §4.1): the largest int32 is accepted,
	 * one more is not (the node used to stop at 2^30). */
	static const char *const clbig[] = {"pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo",
	                                    "2147483648", NULL};
	sreq_init(&s, &v, 0, clbig);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "volume_context \"pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo\" "
	                         "must be an integer of at least -1, not \"2147483648\"");
	env_done(&v);
	env_init(&v, 1); /* a fresh worker: the stage below connects */
	static const char *const clmax[] = {
	    "pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "2147483647",
	    "pillar-csi.bhyoo.com/nvmeof-reconnect-delay", "1073741825", NULL};
	sreq_init(&s, &v, 0, clmax);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_ptr_nonnull(
	    strstr(v.k.last_connect, ",ctrl_loss_tmo=2147483647,reconnect_delay=1073741825"));
	env_done(&v);
}
END_TEST

START_TEST(test_stage_refuses_foreign_content)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	env_init(&v, 1);
	sreq_init(&s, &v, 0, NULL);
	setenv("FAKE_BLKID_RC", "0", 1);
	setenv("FAKE_BLKID_OUT", "TYPE=xfs", 1);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg,
	                 "volume \"" VOL "\" holds a xfs filesystem but ext4 was requested");
	setenv("FAKE_BLKID_OUT", "PTTYPE=gpt", 1);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, "volume \"" VOL "\" contains a partition table; refusing to "
	                         "format or mount it");
	setenv("FAKE_BLKID_RC", "4", 1);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INTERNAL);
	ck_assert_ptr_null(strstr(tu_read(v.root, "tools.log"), "mkfs"));
	/* blank + read-only mode */
	setenv("FAKE_BLKID_RC", "2", 1);
	unsetenv("FAKE_BLKID_OUT");
	s.mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, "volume \"" VOL "\" has no filesystem and is staged read-only");
	/* existing filesystem + read-only: ro,noload */
	setenv("FAKE_BLKID_RC", "0", 1);
	setenv("FAKE_BLKID_OUT", "UUID=1\nTYPE=ext4", 1);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_uint_eq(v.m.last_flags, MS_RDONLY);
	ck_assert_str_eq(v.m.last_data, "noload");
	ck_assert_ptr_null(strstr(tu_read(v.root, "tools.log"), "mkfs"));
	env_done(&v);
}
END_TEST

START_TEST(test_stage_xfs_profile)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	static const char *const x[] = {"pillar-csi.bhyoo.com/fs-type", "xfs", NULL};
	env_init(&v, 1);
	sreq_init(&s, &v, 0, x);
	setenv("FAKE_XFS_NREXT64", "1", 1);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	char want[8192];
	snprintf(want, sizeof(want),
	         "mkfs.xfs -q -m bigtime=0,crc=1,finobt=1,inobtcount=0,reflink=1,rmapbt=0 -i "
	         "sparse=1 -i nrext64=0 %s/nvme1n1\n",
	         v.dev);
	ck_assert_ptr_nonnull(strstr(tu_read(v.root, "tools.log"), want));
	unsetenv("FAKE_XFS_NREXT64");
	env_done(&v);
}
END_TEST

START_TEST(test_stage_block_publish_unpublish)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	char p[8192];
	struct stat sb;
	env_init(&v, 0);
	sreq_init(&s, &v, 1, NULL);
	s.mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY;
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(v.m.blk_ro, 1);
	snprintf(p, sizeof(p), "%s/device", v.staging);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode));
	ck_assert_ptr_nonnull(strstr(record_text(&v), "\"access_type\":\t\"block\""));
	ck_assert_ptr_null(strstr(record_text(&v), "fs_type"));
	ck_assert_str_eq(tu_read(v.root, "tools.log"), ""); /* never probed or formatted */
	/* publish block: a file, bound read-only */
	ck_assert_int_eq(publish(&v, &s, 0, &st), GRPC_OK);
	ck_assert_int_eq(stat(v.target, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode));
	ck_assert_uint_eq(v.m.last_flags, MS_REMOUNT | MS_BIND | MS_RDONLY);
	ck_assert_int_eq(publish(&v, &s, 0, &st), GRPC_OK);
	ck_assert_int_eq(unpublish(&v, &st), GRPC_OK);
	ck_assert_int_eq(stat(v.target, &sb), -1);
	ck_assert_int_eq(unpublish(&v, &st), GRPC_OK);
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_OK);
	ck_assert_int_eq(stat(p, &sb), -1);
	env_done(&v);
}
END_TEST

START_TEST(test_publish_rules)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	struct stat sb;
	env_init(&v, 1);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(publish(&v, &s, 0, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, "volume \"" VOL "\" is not staged on this node");
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(publish(&v, &s, 0, &st), GRPC_OK);
	ck_assert_int_eq(stat(v.target, &sb), 0);
	ck_assert(S_ISDIR(sb.st_mode));
	ck_assert_int_eq(sb.st_mode & 0777, 0750);
	ck_assert_uint_eq(v.m.last_flags, MS_BIND);
	ck_assert_int_eq(publish(&v, &s, 0, &st), GRPC_OK);
	ck_assert_int_eq(publish(&v, &s, 1, &st), GRPC_ALREADY_EXISTS);
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)VOL;
	r.staging_target_path = v.staging;
	r.volume_capability = &s.cap;
	ck_assert_int_eq(node_publish_volume(v.n, &r, NULL, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "target_path is required");
	ck_assert_int_eq(unpublish(&v, &st), GRPC_OK);
	ck_assert_int_eq(stat(v.target, &sb), -1);
	ck_assert_int_eq(unpublish(&v, &st), GRPC_OK);
	env_done(&v);
}
END_TEST

/* ---- Unstage -------------------------------------------------------------------------------- */

START_TEST(test_unstage_disconnects_and_deletes_record)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	env_init(&v, 1);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_OK);
	ck_assert_int_eq(v.m.umounts, 1);
	ck_assert_str_eq(v.k.disconnected, "nvme3 ");
	ck_assert_str_eq(record_text(&v), "");
	ck_assert_str_eq(tu_read(v.root, "proc/self/mountinfo"), "");
	/* again: nothing staged, nothing mounted → OK */
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_OK);
	ck_assert_int_eq(unstage(&v, "not/a/valid/id", &st), GRPC_OK);
	/* an immediate restage connects afresh */
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(v.k.connects, 2);
	/* stuck controller: INTERNAL, record kept for the retry */
	v.k.stuck = 1;
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_INTERNAL);
	ck_assert_str_eq(st.msg, "controller nvme3 of " NQN " was not removed within 200ms");
	ck_assert_str_ne(record_text(&v), "");
	env_done(&v);
}
END_TEST

START_TEST(test_unstage_missing_record_while_mounted)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	char p[8192];
	env_init(&v, 1);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	snprintf(p, sizeof(p), "%s/storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json",
	         v.state);
	unlink(p);
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_INTERNAL);
	snprintf(p, sizeof(p),
	         "stage state for \"" VOL "\" is missing but \"%s\" is still mounted; "
	         "refusing to report the volume unstaged",
	         v.staging);
	ck_assert_str_eq(st.msg, p);
	ck_assert_int_eq(v.m.umounts, 0);
	ck_assert_int_eq(v.k.disconnects, 0);
	/* Restaging repairs the record: already a mount of the resolved device. */
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(v.m.mounts, 1);
	ck_assert_str_ne(record_text(&v), "");
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_OK);
	/* mountinfo unreadable: probe error → INTERNAL */
	fk_rm(v.root, "proc/self/mountinfo");
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_INTERNAL);
	env_done(&v);
}
END_TEST

START_TEST(test_records_legacy_corrupt_and_sweep)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	struct node_record r;
	struct err e = {0};
	char name[] = "storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json";
	env_init(&v, 1);
	/* legacy flat form: read as NVMe/TCP; the next stage rewrites it in the new form */
	tu_write(v.state, name, "{\"subsys_nqn\":\"" NQN "\"}\n");
	ck_assert_int_eq(node_record_read(v.state, VOL, &r, &e), 0);
	ck_assert(r.legacy);
	ck_assert_str_eq(r.subsys_nqn, NQN);
	ck_assert_str_eq(r.protocol_type, "nvmeof-tcp");
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(node_record_read(v.state, VOL, &r, &e), 0);
	ck_assert(!r.legacy);
	ck_assert_str_eq(r.access_type, "filesystem");
	ck_assert_str_eq(r.staging_path, v.staging);
	/* legacy record is unstaged too */
	tu_write(v.state, name, "{\"subsys_nqn\":\"" NQN "\"}\n");
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_OK);
	ck_assert_int_eq(v.k.disconnects, 1);
	/* corrupt records: INTERNAL, no defaults */
	tu_write(v.state, name, "{\"subsys_nqn\":");
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_INTERNAL);
	ck_assert(strncmp(st.msg, "corrupt stage record ", 21) == 0);
	tu_write(v.state, name, "{\"protocol_type\":\"nvmeof-tcp\",\"access_type\":\"block\"}");
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INTERNAL);
	ck_assert_ptr_nonnull(strstr(st.msg, "\"nvmeof\" is missing or not an object"));
	/* a path never holds a control character, not even an escaped one */
	tu_write(v.state, name,
	         "{\"protocol_type\":\"nvmeof-tcp\",\"access_type\":\"block\",\"nvmeof\":"
	         "{\"subsys_nqn\":\"n\",\"address\":\"a\",\"port\":\"1\"},"
	         "\"staging_path\":\"/x\\n/y\"}");
	ck_assert_int_eq(unstage(&v, VOL, &st), GRPC_INTERNAL);
	ck_assert_ptr_nonnull(strstr(st.msg, "staging_path contains a control character"));
	/* sweep: a record whose staging directory is gone is deleted */
	char body[16384];
	snprintf(body, sizeof(body),
	         "{\"protocol_type\":\"nvmeof-tcp\",\"access_type\":\"block\",\"nvmeof\":"
	         "{\"subsys_nqn\":\"%s\",\"address\":\"a\",\"port\":\"1\"},\"volume_id\":\"%s\","
	         "\"staging_path\":\"%s/gone\"}",
	         NQN, VOL, v.root);
	tu_write(v.state, name, body);
	ck_assert_int_eq(node_records_sweep(v.state, &e), 1);
	ck_assert_str_eq(record_text(&v), "");
	env_done(&v);
}
END_TEST

/* ---- Stats and expand ----------------------------------------------------------------------- */

START_TEST(test_stats)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	Csi__V1__NodeGetVolumeStatsRequest r = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse resp = CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT;
	env_init(&v, 1);
	r.volume_id = (char *)VOL;
	ck_assert_int_eq(node_get_volume_stats(v.n, &r, &resp, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "volume_path is required");
	r.volume_path = v.target;
	ck_assert_int_eq(node_get_volume_stats(v.n, &r, &resp, &st), GRPC_NOT_FOUND);
	char want[8192];
	snprintf(want, sizeof(want), "path %s does not exist", v.target);
	ck_assert_str_eq(st.msg, want);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(file_mkdir_p(v.staging, 0750, NULL), 0);
	r.volume_path = v.staging;
	ck_assert_int_eq(node_get_volume_stats(v.n, &r, &resp, &st), GRPC_NOT_FOUND);
	ck_assert_str_eq(st.msg, "volume \"" VOL "\" is not staged on this node");
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(node_get_volume_stats(v.n, &r, &resp, &st), GRPC_OK);
	ck_assert_uint_eq(resp.n_usage, 2);
	ck_assert_int_eq(resp.usage[0]->unit, CSI__V1__VOLUME_USAGE__UNIT__BYTES);
	ck_assert(resp.usage[0]->total > 0);
	ck_assert_int_eq(resp.usage[1]->unit, CSI__V1__VOLUME_USAGE__UNIT__INODES);
	node_response_clear(&resp.base);
	snprintf(v.m.blk_paths[0], sizeof(v.m.blk_paths[0]), "%s", v.staging);
	ck_assert_int_eq(node_get_volume_stats(v.n, &r, &resp, &st), GRPC_OK);
	ck_assert_uint_eq(resp.n_usage, 1);
	ck_assert_int_eq(resp.usage[0]->total, 1073741824);
	node_response_clear(&resp.base);
	env_done(&v);
}
END_TEST

START_TEST(test_expand)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	Csi__V1__NodeExpandVolumeRequest r = CSI__V1__NODE_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__NodeExpandVolumeResponse resp = CSI__V1__NODE_EXPAND_VOLUME_RESPONSE__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	env_init(&v, 1);
	r.volume_id = (char *)VOL;
	r.volume_path = v.staging;
	ck_assert_int_eq(node_expand_volume(v.n, &r, &resp, &st), GRPC_NOT_FOUND);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	tu_write(v.sys, "block/nvme1n1/size", "4194304\n"); /* grown to 2 GiB */
	cr.required_bytes = 2147483648;
	r.capacity_range = &cr;
	ck_assert_int_eq(node_expand_volume(v.n, &r, &resp, &st), GRPC_OK);
	ck_assert_int_eq(resp.capacity_bytes, 2147483648);
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme3/rescan_controller"), "1");
	char want[8192];
	snprintf(want, sizeof(want), "resize2fs %s/nvme1n1\n", v.dev);
	ck_assert_ptr_nonnull(strstr(tu_read(v.root, "tools.log"), want));
	cr.required_bytes = 4294967296;
	ck_assert_int_eq(node_expand_volume(v.n, &r, &resp, &st), GRPC_DEADLINE_EXCEEDED);
	/* a size beyond what any role accepts is refused at once, not waited for */
	cr.required_bytes = INT64_MAX;
	ck_assert_int_eq(node_expand_volume(v.n, &r, &resp, &st), GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(st.msg, "capacity 9223372036854775807 bytes exceeds the largest size "
	                         "accepted, 9223372035781033984 bytes");
	/* a sysfs size whose bytes leave 64 bits reads as the largest int64_t, never negative */
	tu_write(v.sys, "block/nvme1n1/size", "18446744073709551615\n");
	cr.required_bytes = 0;
	ck_assert_int_eq(node_expand_volume(v.n, &r, &resp, &st), GRPC_OK);
	ck_assert_int_eq(resp.capacity_bytes, INT64_MAX);
	tu_write(v.sys, "block/nvme1n1/size", "4194304\n");
	setenv("FAKE_TOOL_FAIL", "resize2fs", 1);
	ck_assert_int_eq(node_expand_volume(v.n, &r, &resp, &st), GRPC_INTERNAL);
	ck_assert_ptr_nonnull(strstr(st.msg, "resize2fs: fake failure"));
	unsetenv("FAKE_TOOL_FAIL");
	/* the device no longer carries the recorded namespace */
	tu_write(v.sys, "block/nvme1n1/uuid", "11111111-2222-4333-8444-555555555555\n");
	ck_assert_int_eq(node_expand_volume(v.n, &r, &resp, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, "device nvme1n1 no longer carries namespace " UUID1 " of " NQN);
	env_done(&v);
}
END_TEST

START_TEST(test_stage_connect_errors_map_to_codes)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	env_init(&v, 1);
	sreq_init(&s, &v, 0, NULL);
	v.k.connect_rc = -ECONNREFUSED;
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_UNAVAILABLE);
	ck_assert_str_eq(st.msg, "connect to 10.0.0.5:4420 for " NQN " failed: ECONNREFUSED");
	v.k.connect_rc = -EINVAL;
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	v.k.connect_rc = 0;
	v.k.create_ns = 0;
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_DEADLINE_EXCEEDED);
	ck_assert_str_eq(st.msg, "namespace 1 of " NQN " did not appear within 200ms");
	ck_assert_str_eq(record_text(&v), "");
	env_done(&v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node");
	TCase *tc = tcase_create("node");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_identity_service);
	tcase_add_test(tc, test_probe_not_ready_with_shared_identity);
	tcase_add_test(tc, test_node_info_and_capabilities);
	tcase_add_test(tc, test_stage_ext4_blank_then_idempotent);
	tcase_add_test(tc, test_stage_validation);
	tcase_add_test(tc, test_stage_refuses_foreign_content);
	tcase_add_test(tc, test_stage_xfs_profile);
	tcase_add_test(tc, test_stage_block_publish_unpublish);
	tcase_add_test(tc, test_publish_rules);
	tcase_add_test(tc, test_unstage_disconnects_and_deletes_record);
	tcase_add_test(tc, test_unstage_missing_record_while_mounted);
	tcase_add_test(tc, test_records_legacy_corrupt_and_sweep);
	tcase_add_test(tc, test_stats);
	tcase_add_test(tc, test_expand);
	tcase_add_test(tc, test_stage_connect_errors_map_to_codes);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
