/* Unit tests of src/nvme: host identity (csi.md §6.1, §10.3), the connect line and attach rules
 * (§7.2), device resolution under both multipath namings (§7.3, §10.2) and detach (§8). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "fakes/node/fakesys.h"
#include "nvme/host.h"
#include "nvme/initiator.h"
#include "testutil.h"

#define NQN "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-abc123"

/* ---- host identity -------------------------------------------------------------------------- */

START_TEST(test_host_generated_when_missing)
{
	char dir[4096];
	struct nvme_host_identity id;
	struct err e = {0};
	struct stat st;
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &id, &e), 0);
	ck_assert(strncmp(id.hostnqn, "nqn.2014-08.org.nvmexpress:uuid:", 32) == 0);
	ck_assert(nvme_uuid_valid(id.hostnqn + 32));
	ck_assert_int_eq(id.hostnqn[32 + 14], '4');   /* version 4 */
	ck_assert_str_eq(id.hostid, id.hostnqn + 32); /* host ID = the NQN's UUID */
	char want[300];
	snprintf(want, sizeof(want), "%s\n", id.hostnqn);
	ck_assert_str_eq(tu_read(dir, "hostnqn"), want);
	snprintf(want, sizeof(want), "%s\n", id.hostid);
	ck_assert_str_eq(tu_read(dir, "hostid"), want);
	char p[4200];
	snprintf(p, sizeof(p), "%s/hostnqn", dir);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0644);
	ck_assert_int_eq(nvme_host_identity_check(&id, &e), 0);
	/* Second start: the same values, files untouched. */
	struct nvme_host_identity again;
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &again, &e), 0);
	ck_assert_str_eq(again.hostnqn, id.hostnqn);
	ck_assert_str_eq(again.hostid, id.hostid);
	tu_rmtree(dir);
}
END_TEST

START_TEST(test_host_empty_files_and_existing_values)
{
	char dir[4096];
	struct nvme_host_identity id;
	struct err e = {0};
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	/* An existing non-uuid NQN is kept; a missing host ID becomes a random UUIDv4. */
	tu_write(dir, "hostnqn", "  nqn.2020-01.example:worker-7 \n");
	tu_write(dir, "hostid", "\n");
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &id, &e), 0);
	ck_assert_str_eq(id.hostnqn, "nqn.2020-01.example:worker-7");
	ck_assert(nvme_uuid_valid(id.hostid));
	ck_assert_str_eq(tu_read(dir, "hostnqn"), "  nqn.2020-01.example:worker-7 \n");
	/* Empty host NQN is regenerated; an existing host ID is never rewritten. */
	tu_write(dir, "hostnqn", "");
	tu_write(dir, "hostid", "0b661a8a-9925-5917-b52c-a5719096bc2b\n");
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &id, &e), 0);
	ck_assert_str_eq(tu_read(dir, "hostid"), "0b661a8a-9925-5917-b52c-a5719096bc2b\n");
	/* ... and the generated NQN carries that host ID, so the node's own pair passes the check
	 * (it used to get a random UUID and refuse itself as a copied identity). */
	ck_assert_str_eq(id.hostnqn,
	                 "nqn.2014-08.org.nvmexpress:uuid:0b661a8a-9925-5917-b52c-a5719096bc2b");
	ck_assert_str_eq(tu_read(dir, "hostnqn"),
	                 "nqn.2014-08.org.nvmexpress:uuid:0b661a8a-9925-5917-b52c-a5719096bc2b\n");
	ck_assert_int_eq(nvme_host_identity_check(&id, &e), 0);
	/* a pair that disagrees because someone wrote (copied) it is still refused */
	tu_write(dir, "hostnqn",
	         "nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1\n");
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &id, &e), 0);
	ck_assert_int_eq(nvme_host_identity_check(&id, &e), -ENOTUNIQ);
	ck_assert_ptr_nonnull(strstr(e.msg, "but the host ID is 0b661a8a"));
	/* a shared well-known host ID is never copied into a new NQN */
	tu_write(dir, "hostnqn", "");
	tu_write(dir, "hostid", "00000000-0000-0000-0000-000000000000\n");
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &id, &e), 0);
	ck_assert(strstr(id.hostnqn, "00000000-0000-0000-0000-000000000000") == NULL);
	/* read never generates */
	tu_write(dir, "hostid", "");
	ck_assert_int_eq(nvme_host_identity_read(dir, &id, &e), -ENOENT);
	tu_rmtree(dir);
}
END_TEST

/* The production connect writes the spec's line to the fabrics device itself and returns the
 * write's errno as the kernel gave it (csi.md §7.2): libnvme 1.3 turned every write failure but
 * three into EIO.  /dev/full stands in for a device whose write fails (ENOSPC), a regular file
 * for one that answers nothing. */
START_TEST(test_kernel_connect_errno_passes_through)
{
	struct nvme_connect_args a = {.traddr = "10.0.0.5",
	                              .trsvcid = "4420",
	                              .subsysnqn = "nqn.2026-01.com.bhyoo.pillar-csi:tank.v",
	                              .hostnqn = "nqn.2014-08.org.nvmexpress:uuid:h",
	                              .hostid = "6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1"};
	struct nvme_kernel_ops ops = nvme_kernel_ops_sys;
	struct err e = {0};
	char dir[4096], file[4200];
	int inst = -1;

	ops.ctx = (void *)"/dev/full";
	ck_assert_int_eq(ops.connect(ops.ctx, "/sys", &a, &inst, &e), -ENOSPC);
	ck_assert_str_eq(e.msg, "write /dev/full: No space left on device");
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	snprintf(file, sizeof(file), "%s/nvme-fabrics", dir);
	ops.ctx = file;
	ck_assert_int_eq(ops.connect(ops.ctx, "/sys", &a, &inst, &e), -ENOENT);
	tu_write(dir, "nvme-fabrics", "");
	ck_assert_int_eq(ops.connect(ops.ctx, "/sys", &a, &inst, &e), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(e.msg, "gave no answer to the connect"));
	/* what was written is the spec's line, in one write */
	ck_assert_str_eq(tu_read(dir, "nvme-fabrics"),
	                 "transport=tcp,traddr=10.0.0.5,trsvcid=4420,"
	                 "nqn=nqn.2026-01.com.bhyoo.pillar-csi:tank.v,"
	                 "hostnqn=nqn.2014-08.org.nvmexpress:uuid:h,"
	                 "hostid=6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1");
	tu_rmtree(dir);
}
END_TEST

START_TEST(test_host_invalid_values_are_fatal)
{
	char dir[4096], want[4300];
	struct nvme_host_identity id;
	struct err e = {0};
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	tu_write(dir, "hostnqn", "iqn.1993-08.org.debian:01:abc\n");
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &id, &e), -EINVAL);
	snprintf(want, sizeof(want),
	         "%s/hostnqn: invalid host NQN \"iqn.1993-08.org.debian:01:abc\"", dir);
	ck_assert_str_eq(e.msg, want);
	char longnqn[300];
	memset(longnqn, 'a', sizeof(longnqn));
	memcpy(longnqn, "nqn.", 4);
	longnqn[224] = '\0'; /* 224 bytes: one too many */
	tu_write(dir, "hostnqn", longnqn);
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &id, &e), -EINVAL);
	longnqn[223] = '\0';
	tu_write(dir, "hostnqn", longnqn);
	tu_write(dir, "hostid", "not-a-uuid\n");
	ck_assert_int_eq(nvme_host_identity_ensure(dir, &id, &e), -EINVAL);
	snprintf(want, sizeof(want), "%s/hostid: invalid host ID \"not-a-uuid\"", dir);
	ck_assert_str_eq(e.msg, want);
	ck_assert_str_eq(tu_read(dir, "hostid"), "not-a-uuid\n"); /* never rewritten */
	tu_rmtree(dir);
}
END_TEST

START_TEST(test_host_shared_identities_refused)
{
	struct nvme_host_identity id = {0};
	struct err e = {0};
	strcpy(id.hostnqn, "nqn.2014-08.org.nvmexpress:uuid:03000200-0400-0500-0006-000700080009");
	strcpy(id.hostid, "03000200-0400-0500-0006-000700080009");
	ck_assert_int_eq(nvme_host_identity_check(&id, &e), -ENOTUNIQ);
	ck_assert_ptr_nonnull(strstr(e.msg, "well-known"));
	ck_assert_ptr_nonnull(strstr(e.msg, "give every worker a unique /etc/nvme/hostnqn and "
	                                    "/etc/nvme/hostid"));
	strcpy(id.hostnqn, "nqn.2020-01.example:w1");
	strcpy(id.hostid, "00000000-0000-0000-0000-000000000000");
	ck_assert_int_eq(nvme_host_identity_check(&id, &e), -ENOTUNIQ);
	strcpy(id.hostnqn, "nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1");
	strcpy(id.hostid, "6F1C1A57-5A8E-4BB9-A7A4-0D1F2CFBD3A1"); /* same UUID, other case */
	ck_assert_int_eq(nvme_host_identity_check(&id, &e), 0);
	strcpy(id.hostid, "2d7c5c0e-5f35-4b52-8d59-0c4f1f8e2a11");
	ck_assert_int_eq(nvme_host_identity_check(&id, &e), -ENOTUNIQ);
}
END_TEST

/* ---- connect line, attach ------------------------------------------------------------------- */

static struct nvme_connect_args args(void)
{
	struct nvme_connect_args a = {.traddr = "10.0.0.5",
	                              .trsvcid = "4420",
	                              .subsysnqn = NQN,
	                              .hostnqn = "nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-"
	                                         "4bb9-a7a4-0d1f2cfbd3a1",
	                              .hostid = "6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1"};
	return a;
}

START_TEST(test_connect_string_options)
{
	char buf[1024];
	struct nvme_connect_args a = args();
	ck_assert_int_eq(nvme_connect_string(&a, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "transport=tcp,traddr=10.0.0.5,trsvcid=4420,nqn=" NQN
	                      ",hostnqn=nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-4bb9-a7a4-"
	                      "0d1f2cfbd3a1,hostid=6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1");
	a.has_queue_size = true;
	a.queue_size = 128;
	a.has_ctrl_loss_tmo = true;
	a.ctrl_loss_tmo = -1;
	a.has_reconnect_delay = true;
	a.reconnect_delay = 2;
	ck_assert_int_eq(nvme_connect_string(&a, buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(
	    strstr(buf, "0d1f2cfbd3a1,ctrl_loss_tmo=-1,reconnect_delay=2,queue_size=128"));
	ck_assert_int_eq(nvme_connect_string(&a, buf, 40), -ENAMETOOLONG);
}
END_TEST

struct fix {
	char root[4096], dev[4200];
	struct fk_kernel k;
	struct nvme_kernel_ops ops;
	struct nvme_ctx c;
};

static void fix_init(struct fix *f)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->root, sizeof(f->root), "%s", tu_mkdtemp());
	ck_assert(snprintf(f->dev, sizeof(f->dev), "%s/dev", f->root) < (int)sizeof(f->dev));
	mkdir(f->dev, 0755);
	ck_assert(snprintf(f->k.root, sizeof(f->k.root), "%s/sys", f->root) <
	          (int)sizeof(f->k.root));
	mkdir(f->k.root, 0755);
	f->k.instance = 3;
	f->k.subsys = 1;
	f->ops = (struct nvme_kernel_ops){fk_connect, fk_disconnect, fk_mknod, &f->k};
	f->c = (struct nvme_ctx){.sysfs_root = f->k.root,
	                         .dev_root = f->dev,
	                         .ops = &f->ops,
	                         .dying_wait_ms = 300,
	                         .device_wait_ms = 300,
	                         .delete_wait_ms = 300,
	                         .size_wait_ms = 300};
}

START_TEST(test_attach_reuses_live_controller)
{
	struct fix f;
	char ctrl[NVME_NAME_MAX];
	struct nvme_connect_args a = args();
	struct err e = {0};
	fix_init(&f);
	fk_ctrl(f.k.root, 0, "nqn.other", "live", "10.0.0.5", "4420");
	fk_ctrl(f.k.root, 2, NQN, "connecting", "10.0.0.5", "4420");
	ck_assert_int_eq(nvme_attach(&f.c, &a, ctrl, &e), 0);
	ck_assert_str_eq(ctrl, "nvme2");
	ck_assert_int_eq(f.k.connects, 0);
	ck_assert_int_eq(f.k.disconnects, 0);
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_attach_connects_with_spec_line)
{
	struct fix f;
	char ctrl[NVME_NAME_MAX];
	struct nvme_connect_args a = args();
	struct err e = {0};
	fix_init(&f);
	a.has_ctrl_loss_tmo = true;
	a.ctrl_loss_tmo = 30;
	ck_assert_int_eq(nvme_attach(&f.c, &a, ctrl, &e), 0);
	ck_assert_str_eq(ctrl, "nvme3");
	ck_assert_int_eq(f.k.connects, 1);
	ck_assert_ptr_nonnull(strstr(f.k.last_connect,
	                             "hostid=6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1,"
	                             "ctrl_loss_tmo=30"));
	ck_assert_ptr_null(strstr(f.k.last_connect, "queue_size"));
	ck_assert_ptr_null(strstr(f.k.last_connect, "reconnect_delay"));
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_attach_ealready_rescans)
{
	struct fix f;
	char ctrl[NVME_NAME_MAX];
	struct nvme_connect_args a = args();
	struct err e = {0};
	fix_init(&f);
	f.k.connect_rc = -EALREADY;
	f.k.instance = 7;
	ck_assert_int_eq(nvme_attach(&f.c, &a, ctrl, &e), 0);
	ck_assert_str_eq(ctrl, "nvme7");
	tu_rmtree(f.root);
}
END_TEST

/* docs/authentication.md: the secrets go to the fabrics device only; the log line at --v=5
 * shows "(secret)"; the kernel's ENOKEY and EKEYREJECTED are named with what they mean. */
#define SECRET  "DHHC-1:01:87YWYvNzas5i06zu/TTeHdORutGuVSnRxrGxeu6cLtwfL5KR:"
#define CSECRET "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"
START_TEST(test_attach_with_secrets_never_logged)
{
	struct fix f;
	struct nvme_connect_args a = args();
	struct err e = {0};
	char logpath[4200], line[1024];
	fix_init(&f);
	snprintf(logpath, sizeof(logpath), "%s/log", f.root);
	int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	log_set_verbosity(5);
	log_set_fd(fd);
	f.k.connect_rc = -ENOKEY;
	ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), -ENOKEY);
	ck_assert_ptr_nonnull(strstr(e.msg, "this host has no secret (ENOKEY)"));
	a.dhchap_secret = SECRET;
	a.dhchap_ctrl_secret = CSECRET;
	f.k.connect_rc = -EKEYREJECTED;
	ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), -EKEYREJECTED);
	ck_assert_ptr_nonnull(
	    strstr(e.msg, "DH-HMAC-CHAP authentication was refused (EKEYREJECTED)"));
	ck_assert_ptr_null(strstr(e.msg, "DHHC-1"));
	f.k.connect_rc = 0;
	ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), 0);
	ck_assert_ptr_nonnull(
	    strstr(f.k.last_connect, ",dhchap_secret=" SECRET ",dhchap_ctrl_secret=" CSECRET));
	ck_assert_int_eq(nvme_connect_string_redacted(&a, line, sizeof(line)), 0);
	ck_assert_ptr_nonnull(strstr(line, ",dhchap_secret=(secret),dhchap_ctrl_secret=(secret)"));
	log_set_fd(2);
	log_set_verbosity(0);
	close(fd);
	const char *logtext = tu_read(f.root, "log");
	ck_assert_ptr_nonnull(strstr(logtext, "dhchap_secret=(secret)"));
	ck_assert_ptr_null(strstr(logtext, "DHHC-1"));
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_attach_errors)
{
	struct fix f;
	struct nvme_connect_args a = args();
	struct err e = {0};
	fix_init(&f);
	f.k.connect_rc = -ECONNREFUSED;
	ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), -EAGAIN);
	ck_assert_str_eq(e.msg, "connect to 10.0.0.5:4420 for " NQN " failed: ECONNREFUSED");
	f.k.connect_rc = -EHOSTUNREACH;
	ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), -EAGAIN);
	ck_assert_str_eq(e.msg, "connect to 10.0.0.5:4420 for " NQN " failed: EHOSTUNREACH");
	f.k.connect_rc = -EINVAL;
	ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "kernel rejected the connect to 10.0.0.5:4420 (EINVAL); check that "
	                        "/etc/nvme/hostnqn and /etc/nvme/hostid match the host's other "
	                        "NVMe connections");
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_attach_waits_for_dying_controller)
{
	struct fix f;
	struct nvme_connect_args a = args();
	struct err e = {0};
	fix_init(&f);
	fk_ctrl(f.k.root, 4, NQN, "deleting (no IO)", "10.0.0.5", "4420");
	ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), -EAGAIN);
	ck_assert_str_eq(e.msg, "controller nvme4 of " NQN " is still being deleted");
	ck_assert_int_eq(f.k.connects, 0);
	ck_assert_int_eq(f.k.disconnects, 0); /* never a second delete */
	tu_rmtree(f.root);
}
END_TEST

static void *remove_later(void *arg)
{
	struct fix *f = arg;
	struct timespec ts = {0, 100 * 1000000L};
	nanosleep(&ts, NULL);
	fk_rm(f->k.root, "class/nvme/nvme4");
	return NULL;
}

START_TEST(test_attach_connects_after_dying_controller_is_gone)
{
	struct fix f;
	struct nvme_connect_args a = args();
	struct err e = {0};
	pthread_t t;
	char ctrl[NVME_NAME_MAX];
	fix_init(&f);
	f.c.dying_wait_ms = 5000;
	fk_ctrl(f.k.root, 4, NQN, "dead", "10.0.0.5", "4420");
	pthread_create(&t, NULL, remove_later, &f);
	ck_assert_int_eq(nvme_attach(&f.c, &a, ctrl, &e), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(f.k.connects, 1);
	ck_assert_str_eq(ctrl, "nvme3");
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_attach_deletes_controller_to_other_address)
{
	struct fix f;
	struct nvme_connect_args a = args();
	struct err e = {0};
	fix_init(&f);
	fk_ctrl(f.k.root, 1, NQN, "live", "10.0.0.6", "4420");
	ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), 0);
	ck_assert_str_eq(f.k.disconnected, "nvme1 ");
	ck_assert_int_eq(f.k.connects, 1);
	tu_rmtree(f.root);
}
END_TEST

/* ---- device resolution ---------------------------------------------------------------------- */

START_TEST(test_find_multipath_y)
{
	struct fix f;
	struct nvme_ns_dev d;
	struct err e = {0};
	fix_init(&f);
	/* nvme_core.multipath=Y: head nvme1n1 under nvme-subsys1; the controller holds only the
	 * hidden per-path device nvme3c3n1, which must never be used. */
	fk_ctrl(f.k.root, 3, NQN, "live", "10.0.0.5", "4420");
	fk_subsys(f.k.root, 1, NQN);
	fk_subsys(f.k.root, 0, "nqn.other");
	fk_ns(f.k.root, "class/nvme-subsystem/nvme-subsys0", "nvme0n1", 1, "259:9", NULL, NULL, 8);
	fk_ns(f.k.root, "class/nvme/nvme3", "nvme3c3n1", 1, "259:1", "x", NULL, 8);
	fk_ns(f.k.root, "class/nvme-subsystem/nvme-subsys1", "nvme1n1", 1, "259:2",
	      "0b661a8a-9925-5917-b52c-a5719096bc2b", "2018eb84-7e27-542a-9b2a-11dd7855c3b3",
	      2097152);
	ck_assert_int_eq(nvme_ns_find(&f.c, NQN, &d, &e), 0);
	ck_assert_str_eq(d.name, "nvme1n1");
	ck_assert_uint_eq(d.major, 259);
	ck_assert_uint_eq(d.minor, 2);
	ck_assert_str_eq(d.uuid, "0b661a8a-9925-5917-b52c-a5719096bc2b");
	ck_assert_str_eq(d.nguid, "2018eb84-7e27-542a-9b2a-11dd7855c3b3");
	ck_assert(d.size_bytes == 1073741824ull);
	ck_assert_int_eq(f.k.mknods, 1); /* no udev: node created from sysfs dev */
	ck_assert_str_eq(tu_read(f.dev, "nvme1n1"), "259:2\n");
	ck_assert_int_eq(nvme_ns_find(&f.c, NQN, &d, &e), 0);
	ck_assert_int_eq(f.k.mknods, 1); /* existing node kept */
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_find_multipath_n)
{
	struct fix f;
	struct nvme_ns_dev d;
	struct err e = {0};
	fix_init(&f);
	/* nvme_core.multipath=N: nvme5n1 hangs off controller nvme5; the subsystem directory lists
	 * no namespace.  A namespace with another NSID is ignored. */
	fk_ctrl(f.k.root, 5, NQN, "live", "10.0.0.5", "4420");
	fk_subsys(f.k.root, 2, NQN);
	fk_ns(f.k.root, "class/nvme/nvme5", "nvme5n2", 2, "259:7", NULL, NULL, 8);
	fk_ns(f.k.root, "class/nvme/nvme5", "nvme5n1", 1, "259:6", "u", NULL, 8);
	ck_assert_int_eq(nvme_ns_find(&f.c, NQN, &d, &e), 0);
	ck_assert_str_eq(d.name, "nvme5n1");
	ck_assert_str_eq(d.nguid, "");
	/* not found for another NQN */
	ck_assert_int_eq(nvme_ns_find(&f.c, "nqn.none", &d, &e), -ENOENT);
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_wait_deadline)
{
	struct fix f;
	struct nvme_ns_dev d;
	struct err e = {0};
	fix_init(&f);
	f.c.device_wait_ms = 1000;
	fk_ctrl(f.k.root, 5, NQN, "live", "10.0.0.5", "4420");
	ck_assert_int_eq(nvme_ns_wait(&f.c, NQN, &d, &e), -ETIME);
	ck_assert_str_eq(e.msg, "namespace 1 of " NQN " did not appear within 1s");
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_attach_then_find_both_namings)
{
	for (int mp = 0; mp <= 1; mp++) {
		struct fix f;
		struct nvme_ns_dev d;
		struct nvme_connect_args a = args();
		struct err e = {0};
		fix_init(&f);
		f.k.multipath = mp;
		f.k.create_ns = 1;
		f.k.instance = 8;
		f.k.subsys = 4;
		ck_assert_int_eq(nvme_attach(&f.c, &a, NULL, &e), 0);
		ck_assert_int_eq(nvme_ns_wait(&f.c, NQN, &d, &e), 0);
		ck_assert_str_eq(d.name, mp ? "nvme4n1" : "nvme8n1");
		tu_rmtree(f.root);
	}
}
END_TEST

START_TEST(test_rescan_and_size_wait)
{
	struct fix f;
	struct nvme_ns_dev d;
	struct err e = {0};
	fix_init(&f);
	fk_ctrl(f.k.root, 5, NQN, "live", "10.0.0.5", "4420");
	fk_ns(f.k.root, "class/nvme/nvme5", "nvme5n1", 1, "259:6", "u", NULL, 2048);
	ck_assert_int_eq(nvme_rescan_subsys(&f.c, NQN, &e), 0);
	ck_assert_str_eq(tu_read(f.k.root, "class/nvme/nvme5/rescan_controller"), "1");
	ck_assert_int_eq(nvme_ns_find(&f.c, NQN, &d, &e), 0);
	ck_assert_int_eq(nvme_ns_wait_size(&f.c, &d, 1048576, &e), 0);
	ck_assert_int_eq(nvme_ns_wait_size(&f.c, &d, 2097152, &e), -ETIME);
	ck_assert_ptr_nonnull(strstr(e.msg, "device nvme5n1 is 1048576 bytes, not the requested "
	                                    "2097152"));
	tu_rmtree(f.root);
}
END_TEST

/* ---- detach --------------------------------------------------------------------------------- */

START_TEST(test_detach_every_controller_and_wait)
{
	struct fix f;
	struct err e = {0};
	fix_init(&f);
	fk_ctrl(f.k.root, 1, NQN, "live", "10.0.0.5", "4420");
	fk_ctrl(f.k.root, 2, NQN, "resetting", "10.0.0.7", "4420");
	fk_ctrl(f.k.root, 9, "nqn.other", "live", "10.0.0.5", "4420");
	ck_assert_int_eq(nvme_detach_subsys(&f.c, NQN, &e), 0);
	ck_assert_int_eq(f.k.disconnects, 2);
	ck_assert_str_eq(tu_read(f.k.root, "class/nvme/nvme9/state"), "live\n");
	/* Nothing left: success without any delete (OPS-23). */
	ck_assert_int_eq(nvme_detach_subsys(&f.c, NQN, &e), 0);
	ck_assert_int_eq(f.k.disconnects, 2);
	tu_rmtree(f.root);
}
END_TEST

START_TEST(test_detach_timeout_and_no_second_delete)
{
	struct fix f;
	struct err e = {0};
	fix_init(&f);
	f.k.stuck = 1;
	fk_ctrl(f.k.root, 1, NQN, "live", "10.0.0.5", "4420");
	ck_assert_int_eq(nvme_detach_subsys(&f.c, NQN, &e), -EBUSY);
	ck_assert_str_eq(e.msg, "controller nvme1 of " NQN " was not removed within 300ms");
	/* The retry finds it deleting: waits, but does not write delete_controller again. */
	fk_ctrl(f.k.root, 1, NQN, "deleting", "10.0.0.5", "4420");
	ck_assert_int_eq(nvme_detach_subsys(&f.c, NQN, &e), -EBUSY);
	ck_assert_int_eq(f.k.disconnects, 1);
	f.c.delete_wait_ms = 10000;
	fk_rm(f.k.root, "class/nvme/nvme1");
	ck_assert_int_eq(nvme_detach_subsys(&f.c, NQN, &e), 0);
	tu_rmtree(f.root);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nvme");
	TCase *tc = tcase_create("nvme");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_host_generated_when_missing);
	tcase_add_test(tc, test_host_empty_files_and_existing_values);
	tcase_add_test(tc, test_host_invalid_values_are_fatal);
	tcase_add_test(tc, test_kernel_connect_errno_passes_through);
	tcase_add_test(tc, test_host_shared_identities_refused);
	tcase_add_test(tc, test_connect_string_options);
	tcase_add_test(tc, test_attach_with_secrets_never_logged);
	tcase_add_test(tc, test_attach_reuses_live_controller);
	tcase_add_test(tc, test_attach_connects_with_spec_line);
	tcase_add_test(tc, test_attach_ealready_rescans);
	tcase_add_test(tc, test_attach_errors);
	tcase_add_test(tc, test_attach_waits_for_dying_controller);
	tcase_add_test(tc, test_attach_connects_after_dying_controller_is_gone);
	tcase_add_test(tc, test_attach_deletes_controller_to_other_address);
	tcase_add_test(tc, test_find_multipath_y);
	tcase_add_test(tc, test_find_multipath_n);
	tcase_add_test(tc, test_wait_deadline);
	tcase_add_test(tc, test_attach_then_find_both_namings);
	tcase_add_test(tc, test_rescan_and_size_wait);
	tcase_add_test(tc, test_detach_every_controller_and_wait);
	tcase_add_test(tc, test_detach_timeout_and_no_second_delete);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
