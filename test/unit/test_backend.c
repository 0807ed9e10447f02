/* src/backend with fake CLIs first on PATH (test/unit/fakes/fake-cli records every argv):
 * the exact zfs and lvm commands of agent-api.md §5.2, output parsing, error mapping; the file
 * backend; the agent config file rules of §11.2; sizes the zfs tool rounds up. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/config.h"
#include "agent/service.h"
#include "backend/backend.h"
#include "base/file.h"
#include "base/time.h"
#include "fake_cli.h"
#include "metrics/metrics.h"
#include "testutil.h"

#define LVMCFG                                                                         \
	"activation{udev_sync=0 udev_rules=0} devices{obtain_device_list_from_udev=0 " \
	"scan_lvs=0 global_filter=[\"r|^/dev/zd|\",\"r|^/dev/zvol/|\",\"a|.*|\"]}"

static const char *dir;

static void setup(void)
{
	static const char *const tools[] = {"zfs",      "zpool",    "lvs",      "vgs",
	                                    "lvcreate", "lvextend", "lvremove", "lvchange"};
	dir = fake_cli_setup(tools, sizeof(tools) / sizeof(tools[0]));
}

static void teardown(void)
{
	fake_cli_teardown();
}

static backend *mk(enum backend_kind k, const char *pool, const char *parent, const char *thin,
                   bool thin_default)
{
	struct backend_config c = {.kind = k,
	                           .pool = (char *)pool,
	                           .parent_dataset = (char *)parent,
	                           .thin_pool = (char *)thin,
	                           .thin_default = thin_default};
	backend *b;
	ck_assert_int_eq(backend_new(&c, &b, NULL), 0);
	return b;
}

START_TEST(test_zfs_commands)
{
	backend *b = mk(BACKEND_ZFS, "tank", "k8s", NULL, false);
	struct err e = {0};
	int64_t v, t, a;
	char dev[256];
	const char *props[] = {"compression=lz4"};
	struct backend_create_opts o = {.props = props, .n_props = 1};

	fake_cli_reply("zfs", "1073741824\n", "", 0);
	ck_assert_int_eq(b->ops->size(b, "pvc-1", &v, &e), 0);
	ck_assert_int_eq(v, 1073741824);
	ck_assert_str_eq(fake_cli_log(), "zfs|get|-Hpo|value|volsize|tank/k8s/pvc-1|\n");
	fake_cli_log_clear();
	fake_cli_reply("zfs", "", "", 0);
	ck_assert_int_eq(b->ops->create(b, "pvc-1", 1048576, &o, &e), 0);
	ck_assert_str_eq(fake_cli_log(),
	                 "zfs|create|-p|-V|1048576|-o|volmode=dev|-o|compression=lz4|"
	                 "tank/k8s/pvc-1|\n");
	fake_cli_log_clear();
	const char *vm[] = {"volmode=geom"};
	struct backend_create_opts o2 = {.props = vm, .n_props = 1};
	ck_assert_int_eq(b->ops->create(b, "pvc-2", 1048576, &o2, &e), 0);
	ck_assert_str_eq(fake_cli_log(),
	                 "zfs|create|-p|-V|1048576|-o|volmode=geom|tank/k8s/pvc-2|\n");
	fake_cli_log_clear();
	fake_cli_reply("zfs.volblocksize", "8192\n", "", 0);
	ck_assert_int_eq(b->ops->expand(b, "pvc-1", 2097152, &e), 0);
	ck_assert_int_eq(b->ops->destroy(b, "pvc-1", &e), 0);
	ck_assert_str_eq(fake_cli_log(), "zfs|get|-Hpo|value|volblocksize|tank/k8s/pvc-1|\n"
	                                 "zfs|set|volsize=2097152|tank/k8s/pvc-1|\n"
	                                 "zfs|destroy|tank/k8s/pvc-1|\n");
	fake_cli_log_clear();
	/* zfs set volsize refuses a size that is no multiple of the volblocksize (OpenZFS 2.1.11:
	 * "'volsize' must be a multiple of volume block size (8K)"): rounded up */
	ck_assert_int_eq(b->ops->expand(b, "pvc-1", 150000001, &e), 0);
	ck_assert_str_eq(fake_cli_log(), "zfs|get|-Hpo|value|volblocksize|tank/k8s/pvc-1|\n"
	                                 "zfs|set|volsize=150003712|tank/k8s/pvc-1|\n");
	fake_cli_log_clear();
	/* a size the volblocksize cannot round within int64_t: -ERANGE, volsize untouched */
	ck_assert_int_eq(b->ops->expand(b, "pvc-1", INT64_MAX, &e), -ERANGE);
	ck_assert_str_eq(e.msg, "capacity 9223372036854775807 bytes cannot be rounded up to a "
	                        "multiple of the volblocksize 8192 of tank/k8s/pvc-1");
	ck_assert_str_eq(fake_cli_log(), "zfs|get|-Hpo|value|volblocksize|tank/k8s/pvc-1|\n");
	fake_cli_log_clear();
	fake_cli_reply("zfs", "1000\n3000\n", "", 0);
	ck_assert_int_eq(b->ops->capacity(b, &t, &a, &e), 0);
	ck_assert_int_eq(t, 4000);
	ck_assert_int_eq(a, 3000);
	ck_assert_str_eq(fake_cli_log(), "zfs|get|-Hpo|value|used,available|tank/k8s|\n");
	fake_cli_log_clear();
	fake_cli_reply("zfs", "tank/k8s/pvc-1\t1048576\ntank/k8s/pvc-2\t2097152\n", "", 0);
	struct backend_vol *vols;
	size_t n;
	ck_assert_int_eq(b->ops->list(b, &vols, &n, &e), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(vols[1].name, "pvc-2");
	ck_assert_int_eq(vols[1].size, 2097152);
	free(vols);
	ck_assert_str_eq(fake_cli_log(), "zfs|list|-Hpo|name,volsize|-t|volume|-d|1|tank/k8s|\n");
	ck_assert_int_eq(b->ops->device_path(b, "pvc-1", dev, sizeof(dev)), 0);
	ck_assert_str_eq(dev, "/dev/zvol/tank/k8s/pvc-1");
	/* errors carry the tool's stderr */
	fake_cli_reply("zfs", "", "cannot open 'tank/k8s/x': dataset does not exist\n", 1);
	ck_assert_int_eq(b->ops->size(b, "x", &v, &e), -ENOENT);
	ck_assert_str_eq(e.msg, "zfs: cannot open 'tank/k8s/x': dataset does not exist");
	fake_cli_reply("zfs", "", "cannot create 'tank/k8s/x': out of space\n", 1);
	ck_assert_int_eq(b->ops->create(b, "x", 1, NULL, &e), -ENOSPC);
	fake_cli_reply("zfs", "", "cannot destroy 'tank/k8s/x': dataset is busy\n", 1);
	ck_assert_int_eq(b->ops->destroy(b, "x", &e), -EBUSY);
	backend_free(b);
	/* every command observed by backend and tool (zfs by subcommand), failures included */
	struct metrics_text mt = {0};
	backend_metrics_register();
	metrics_write(&mt);
	ck_assert_ptr_nonnull(strstr(
	    mt.buf, "\npillar_csi_agent_backend_command_duration_seconds_count{backend=\"zfs\","
	            "command=\"zfs get\"} "));
	ck_assert_ptr_nonnull(strstr(
	    mt.buf, "\npillar_csi_agent_backend_command_duration_seconds_count{backend=\"zfs\","
	            "command=\"zfs create\"} "));
	metrics_text_free(&mt);
}
END_TEST

START_TEST(test_lvm_commands)
{
	backend *b = mk(BACKEND_LVM, "data-vg", NULL, "thin0", false);
	struct err e = {0};
	int64_t v, t, a;
	struct backend_create_opts lin = {0}, thin = {.thin = true};
	fake_cli_reply("lvs", "  1073741824\n", "", 0);
	ck_assert_int_eq(b->ops->size(b, "pvc-1", &v, &e), 0);
	ck_assert_int_eq(v, 1073741824);
	ck_assert_str_eq(fake_cli_log(),
	                 "lvs|--config|" LVMCFG "|--noheadings|--nosuffix|--units|b|-o|"
	                 "lv_size|data-vg/pvc-1|\n");
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->create(b, "pvc-1", 1048576, &lin, &e), 0);
	ck_assert_int_eq(b->ops->create(b, "pvc-2", 1048576, &thin, &e), 0);
	ck_assert_str_eq(fake_cli_log(), "lvcreate|--config|" LVMCFG
	                                 "|-y|--wipesignatures|y|--zero|y|-L|1048576b|-n|"
	                                 "pvc-1|data-vg|\n"
	                                 "lvcreate|--config|" LVMCFG
	                                 "|-y|-V|1048576b|--thinpool|thin0|-n|pvc-2|data-vg|\n");
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->expand(b, "pvc-1", 2097152, &e), 0);
	ck_assert_int_eq(b->ops->destroy(b, "pvc-1", &e), 0);
	ck_assert_int_eq(b->ops->activate(b, "pvc-1", &e), 0);
	ck_assert_str_eq(fake_cli_log(), "lvextend|--config|" LVMCFG "|-L|2097152b|data-vg/pvc-1|\n"
	                                 "lvremove|--config|" LVMCFG "|-y|data-vg/pvc-1|\n"
	                                 "lvchange|--config|" LVMCFG "|-ay|data-vg/pvc-1|\n");
	fake_cli_log_clear();
	fake_cli_reply("vgs", "  4000 1000\n", "", 0);
	ck_assert_int_eq(b->ops->capacity(b, &t, &a, &e), 0);
	ck_assert_int_eq(t, 4000);
	ck_assert_int_eq(a, 1000);
	ck_assert_str_eq(fake_cli_log(),
	                 "vgs|--config|" LVMCFG "|--noheadings|--nosuffix|--units|b|-o|"
	                 "vg_size,vg_free|data-vg|\n");
	fake_cli_reply("lvs", "  pvc-1 1048576 \n  thin0 8000000 \n  pvc-2 2097152 thin0\n", "", 0);
	struct backend_vol *vols;
	size_t n;
	ck_assert_int_eq(b->ops->list(b, &vols, &n, &e), 0);
	ck_assert_uint_eq(n, 2); /* the thin pool itself is not a volume */
	ck_assert_str_eq(vols[1].name, "pvc-2");
	free(vols);
	fake_cli_reply("lvcreate", "",
	               "  Volume group \"data-vg\" has insufficient free space\n"
	               "  Insufficient free space: 256 extents needed, but only 10 available\n",
	               5);
	ck_assert_int_eq(b->ops->create(b, "big", 1, &lin, &e), -ENOSPC);
	fake_cli_reply("lvs", "", "  Failed to find logical volume \"data-vg/x\"\n", 5);
	ck_assert_int_eq(b->ops->size(b, "x", &v, &e), -ENOENT);
	backend_free(b);

	b = mk(BACKEND_LVM, "data-vg", NULL, "thin0", true);
	fake_cli_log_clear();
	fake_cli_reply("lvs", "  1000000 25.00\n", "", 0);
	ck_assert_int_eq(b->ops->capacity(b, &t, &a, &e), 0);
	ck_assert_int_eq(t, 1000000);
	ck_assert_int_eq(a, 750000);
	ck_assert_str_eq(fake_cli_log(),
	                 "lvs|--config|" LVMCFG "|--noheadings|--nosuffix|--units|b|-o|"
	                 "lv_size,data_percent|data-vg/thin0|\n");
	backend_free(b);
}
END_TEST

/* Whether path carries the synchronous-update attribute (chattr +S). */
static bool write_through(const char *path)
{
	int flags = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ioctl(fd, FS_IOC_GETFLAGS, &flags), 0);
	close(fd);
	return (flags & FS_SYNC_FL) != 0;
}

START_TEST(test_file_backend)
{
	char d[600];
	snprintf(d, sizeof(d), "%s/files", dir);
	mkdir(d, 0755);
	struct backend_config c = {.kind = BACKEND_FILE, .pool = "fp", .directory = d};
	backend *b;
	struct err e = {0};
	int64_t v, t, a;
	char dev[700];
	ck_assert_int_eq(backend_new(&c, &b, &e), 0);
	ck_assert_int_eq(b->ops->size(b, "v", &v, &e), -ENOENT);
	ck_assert_int_eq(b->ops->create(b, "v", 1 << 20, NULL, &e), 0);
	ck_assert_int_eq(b->ops->create(b, "v", 1 << 20, NULL, &e), -EEXIST);
	ck_assert_int_eq(b->ops->size(b, "v", &v, &e), 0);
	ck_assert_int_eq(v, 1 << 20);
	ck_assert_int_eq(b->ops->device_path(b, "v", dev, sizeof(dev)), 0);
	struct stat st;
	ck_assert_int_eq(stat(dev, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_int_lt(st.st_blocks * 512, 1 << 20); /* sparse */
	/* a write nvmet acknowledges is durable: no flush of the host is needed for it */
	ck_assert(write_through(dev));
	ck_assert_int_eq(backend_device_wait(dev, true, 100, 10), 0);
	ck_assert_int_eq(backend_device_wait(dev, false, 100, 10), -ENXIO);
	ck_assert_int_eq(b->ops->expand(b, "v", 2 << 20, &e), 0);
	ck_assert_int_eq(b->ops->expand(b, "v", 1 << 20, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "cannot shrink");
	ck_assert_int_eq(b->ops->capacity(b, &t, &a, &e), 0);
	ck_assert_int_gt(t, 0);
	struct backend_vol *vols;
	size_t n;
	ck_assert_int_eq(b->ops->list(b, &vols, &n, &e), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(vols[0].name, "v");
	ck_assert_int_eq(vols[0].size, 2 << 20);
	free(vols);
	ck_assert_int_eq(b->ops->destroy(b, "v", &e), 0);
	ck_assert_int_eq(b->ops->destroy(b, "v", &e), 0); /* missing = success */
	backend_free(b);
}
END_TEST

static char pool_dir[600];
static int pool_dir_fsyncs;

static void count_pool_dir_fsync(const char *path)
{
	if (!strcmp(path, pool_dir))
		pool_dir_fsyncs++;
}

/* A sparse image whose name only the caller's journal records (name_journaled) may be remade
 * at its create size after a power cut: growing it makes its name durable with the new size. */
START_TEST(test_file_expand_makes_the_name_durable)
{
	snprintf(pool_dir, sizeof(pool_dir), "%s/journaled", dir);
	mkdir(pool_dir, 0755);
	struct backend_config c = {.kind = BACKEND_FILE, .pool = "fp", .directory = pool_dir};
	struct backend_create_opts o = {.size_recorded = true, .name_journaled = true};
	backend *b;
	struct err e = {0};
	ck_assert_int_eq(backend_new(&c, &b, &e), 0);
	pool_dir_fsyncs = 0;
	file_fsync_observer = count_pool_dir_fsync;
	ck_assert_int_eq(b->ops->create(b, "v", 1 << 20, &o, &e), 0);
	ck_assert_int_eq(pool_dir_fsyncs, 0);
	ck_assert_int_eq(b->ops->expand(b, "v", 2 << 20, &e), 0);
	file_fsync_observer = NULL;
	ck_assert_int_eq(pool_dir_fsyncs, 1);
	backend_free(b);
}
END_TEST

/* Every image the file backend serves writes through: made by create, by a clone, or by an
 * older agent (the attribute is set before the export). */
START_TEST(test_file_images_write_through)
{
	char d[600], p[700], old[700];
	snprintf(d, sizeof(d), "%s/wt", dir);
	mkdir(d, 0755);
	struct backend_config c = {.kind = BACKEND_FILE, .pool = "fp", .directory = d};
	backend *b;
	struct err e = {0};
	ck_assert_int_eq(backend_new(&c, &b, &e), 0);
	struct backend_create_opts o = {.preallocate = true};
	ck_assert_int_eq(b->ops->create(b, "full", 1 << 20, &o, &e), 0);
	ck_assert_int_eq(b->ops->device_path(b, "full", p, sizeof(p)), 0);
	ck_assert(write_through(p));
	int r;
	while ((r = b->ops->clone(b, "copy", BACKEND_FROM_VOLUME, "full", 2 << 20, NULL, &e)) ==
	       -EINPROGRESS)
		;
	ck_assert_msg(r == 0, "clone: %s", e.msg);
	ck_assert_int_eq(b->ops->device_path(b, "copy", p, sizeof(p)), 0);
	ck_assert(write_through(p));
	snprintf(old, sizeof(old), "%s/old.img", d);
	int fd = open(old, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert(!write_through(old));
	ck_assert_ptr_nonnull(b->ops->serve);
	ck_assert_int_eq(b->ops->serve(b, old, &e), 0);
	ck_assert(write_through(old));
	ck_assert_int_eq(b->ops->serve(b, old, &e), 0); /* already set */
	char want[800];
	snprintf(old, sizeof(old), "%s/missing.img", d);
	snprintf(want, sizeof(want), "open %s: No such file or directory", old);
	ck_assert_int_eq(b->ops->serve(b, old, &e), -ENOENT);
	ck_assert_str_eq(e.msg, want);
	backend_free(b);
}
END_TEST

/* The start-time probe accepts a directory whose images can write through (the test's own, on
 * a disk file system) and refuses tmpfs, for direct I/O or, where the kernel allows direct I/O
 * on tmpfs, for the synchronous-update attribute it lacks. */
START_TEST(test_config_dir_probe)
{
	char d[600], json[1400], shm[] = "/dev/shm/pillar-csi-test-XXXXXX";
	struct agent_config c;
	struct err e = {0};
	snprintf(d, sizeof(d), "%s/probe", dir);
	mkdir(d, 0755);
	snprintf(json, sizeof(json),
	         "{\"backends\":[{\"file\":{\"pool\":\"p\",\"directory\":\"%s\"}}]}", d);
	ck_assert_int_eq(agent_config_parse(json, strlen(json), &c, &e), 0);
	ck_assert_msg(agent_config_check_dirs(&c, &e) == 0, "%s", e.msg);
	agent_config_clear(&c);
	snprintf(json, sizeof(json), "%s/.pillar-csi-probe", d);
	ck_assert_int_eq(access(json, F_OK), -1); /* the probe file is removed */
	if (!mkdtemp(shm))
		return; /* no tmpfs at /dev/shm here */
	snprintf(json, sizeof(json),
	         "{\"backends\":[{\"file\":{\"pool\":\"p\",\"directory\":\"%s\"}}]}", shm);
	ck_assert_int_eq(agent_config_parse(json, strlen(json), &c, &e), 0);
	snprintf(json, sizeof(json), "%s/direct", shm);
	int fd = open(json, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		/* a tmpfs with direct I/O is accepted although it has no synchronous-update
		 * attribute: a power cut takes all of it anyway */
		close(fd);
		unlink(json);
		ck_assert_msg(agent_config_check_dirs(&c, &e) == 0, "%s", e.msg);
		agent_config_clear(&c);
		snprintf(json, sizeof(json), "%s/.pillar-csi-probe", shm);
		ck_assert_int_eq(access(json, F_OK), -1);
	} else {
		snprintf(json, sizeof(json),
		         "backends[0].file.directory %s does not support direct I/O (tmpfs?)", shm);
		ck_assert_int_eq(agent_config_check_dirs(&c, &e), -EINVAL);
		agent_config_clear(&c);
		ck_assert_str_eq(e.msg, json);
	}
	/* the backend itself, used without the probe, still makes volumes there */
	struct backend_config fc = {.kind = BACKEND_FILE, .pool = "fp", .directory = shm};
	backend *b;
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(backend_new(&fc, &b, &e), 0);
	ck_assert_msg(b->ops->create(b, "v", 1 << 20, NULL, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(e.code, 0);
	ck_assert_int_eq(b->ops->device_path(b, "v", json, sizeof(json)), 0);
	ck_assert_int_eq(b->ops->serve(b, json, &e), 0);
	ck_assert_int_eq(b->ops->destroy(b, "v", &e), 0);
	backend_free(b);
	ck_assert_int_eq(rmdir(shm), 0);
}
END_TEST

/* ---- config file ---------------------------------------------------------------------------- */

static const char *cfg_err(const char *json)
{
	static struct err e;
	struct agent_config c;
	memset(&e, 0, sizeof(e));
	if (agent_config_parse(json, strlen(json), &c, &e) == 0) {
		agent_config_clear(&c);
		return "";
	}
	return e.msg;
}

START_TEST(test_config_rules)
{
	struct agent_config c;
	const char *ok =
	    "{\"backends\":[{\"zfs\":{\"pool\":\"tank\"}},{\"zfs\":{\"pool\":\"hot-data\","
	    "\"parentDataset\":\"k8s\"}},{\"lvm\":{\"volumeGroup\":\"data-vg\",\"thinPool\":"
	    "\"thin0\",\"provisioningMode\":\"linear\"}}]}";
	ck_assert_int_eq(agent_config_parse(ok, strlen(ok), &c, NULL), 0);
	ck_assert_uint_eq(c.n, 3);
	ck_assert_str_eq(c.backends[1].parent_dataset, "k8s");
	ck_assert_str_eq(c.backends[2].thin_pool, "thin0");
	ck_assert(!c.backends[2].thin_default);
	agent_config_clear(&c);
	ck_assert_str_eq(cfg_err("{\"backends\":[]}"),
	                 "backends: at least one backend is required");
	ck_assert_str_eq(cfg_err("{}"), "backends: at least one backend is required");
	ck_assert_str_eq(
	    cfg_err("{\"backends\":[{\"zfs\":{\"pool\":\"a\"}},{\"zfs\":{\"pool\":\"b\","
	            "\"parent\":\"x\"}}]}"),
	    "config: unknown field \"backends[1].zfs.parent\"");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"type\":\"zfs\"}]}"),
	                 "config: unknown field \"backends[0].type\"");
	ck_assert_str_eq(cfg_err("{\"backends\":{}}"), "config: backends: expected array");
	/* a pool name is the bytes written: "tank\u0000x" must not serve pool "tank" */
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"zfs\":{\"pool\":\"tank\\u0000x\"}}]}"),
	                 "config: field backends[0].zfs.pool contains a NUL byte (byte 33)");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"lvm\":{\"volumeGroup\":\"vg\xff\"}}]}"),
	                 "config: field backends[0].lvm.volumeGroup is not valid UTF-8 (byte 38)");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"zfs\":{\"pool\":7}}]}"),
	                 "config: backends[0].zfs.pool: expected string");
	ck_assert_str_eq(cfg_err("{\"backends\":[{}]}"),
	                 "backends[0]: exactly one of zfs or lvm must be set");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"zfs\":{\"pool\":\"a\"},\"lvm\":{}}]}"),
	                 "backends[0]: exactly one of zfs or lvm must be set");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"zfs\":{}}]}"),
	                 "backends[0].zfs.pool is required");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"lvm\":{}}]}"),
	                 "backends[0].lvm.volumeGroup is required");
	ck_assert_str_eq(
	    cfg_err("{\"backends\":[{\"zfs\":{\"pool\":\"a\",\"volumeType\":\"dataset\"}}]}"),
	    "backends[0].zfs.volumeType: only \"zvol\" is supported");
	ck_assert_str_eq(
	    cfg_err("{\"backends\":[{\"zfs\":{\"pool\":\"a\",\"properties\":{}}}]}"),
	    "backends[0].zfs.properties: ZFS properties are set per volume (PillarStore or "
	    "PillarStorageClass), not in the agent config");
	ck_assert_str_eq(
	    cfg_err("{\"backends\":[{\"lvm\":{\"volumeGroup\":\"v\",\"provisioningMode\":"
	            "\"thick\"}}]}"),
	    "backends[0].lvm.provisioningMode: must be \"linear\" or \"thin\"");
	ck_assert_str_eq(
	    cfg_err("{\"backends\":[{\"lvm\":{\"volumeGroup\":\"v\",\"provisioningMode\":"
	            "\"thin\"}}]}"),
	    "backends[0].lvm: provisioningMode thin requires thinPool");
	ck_assert_str_eq(
	    cfg_err("{\"backends\":[{\"zfs\":{\"pool\":\"a\"}},{\"lvm\":{\"volumeGroup\":"
	            "\"b\"}},{\"lvm\":{\"volumeGroup\":\"a\"}}]}"),
	    "duplicate pool/VG \"a\" in backends[0] and backends[2]");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"zfs\":{\"pool\":\"a\"}}]} x"),
	                 "config: invalid JSON near byte 36");
	ck_assert_str_eq(cfg_err("{\"backends\":["), "config: invalid JSON near byte 12");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"file\":{\"pool\":\"f\"}}]}"),
	                 "backends[0].file.directory is required");
	ck_assert_str_eq(cfg_err("{\"backends\":[{\"file\":{\"pool\":\"f\",\"directory\":\"/x\","
	                         "\"preallocate\":1}}]}"),
	                 "config: backends[0].file.preallocate: expected boolean");
	struct err e = {0};
	ck_assert_int_eq(agent_config_load("/nonexistent/config.json", &c, &e), -ENOENT);
	ck_assert_str_eq(e.msg,
	                 "config: cannot read /nonexistent/config.json: No such file or directory");
}
END_TEST

static int count_calls(const char *tool)
{
	char pat[64];
	int n = 0;
	snprintf(pat, sizeof(pat), "%s|list|", tool);
	for (const char *p = fake_cli_log(); (p = strstr(p, pat)) != NULL; p++)
		n++;
	return n;
}

static const PillarCsi__Agent__V1__SubsystemHealth *
health_of(agent_service *a, const char *name, PillarCsi__Agent__V1__HealthCheckResponse **keep)
{
	PillarCsi__Agent__V1__HealthCheckRequest req =
	    PILLAR_CSI__AGENT__V1__HEALTH_CHECK_REQUEST__INIT;
	PillarCsi__Agent__V1__HealthCheckResponse *resp = malloc(sizeof(*resp));
	struct grpc_status st = {0};
	pillar_csi__agent__v1__health_check_response__init(resp);
	ck_assert_int_eq(agent_health_check(a, &req, resp, &st), GRPC_OK);
	*keep = resp;
	for (size_t i = 0; i < resp->n_subsystems; i++)
		if (strcmp(resp->subsystems[i]->name, name) == 0)
			return resp->subsystems[i];
	ck_abort_msg("no subsystem %s", name);
	return NULL;
}

/* One round of test_health_pool_checks_are_cached with the cache period period_ms: false when
 * the machine was too slow to tell (the second check came after the period had passed). */
static bool health_cache_round(int period_ms)
{
	struct agent_config c;
	struct agent_service_opts o = {0};
	agent_service *a;
	char state[600], cfs[600], host[600];
	PillarCsi__Agent__V1__HealthCheckResponse *resp;
	const char *json = "{\"backends\":[{\"zfs\":{\"pool\":\"tank\"}}]}";
	int64_t t0, checked, t1;
	bool judged = false;
	ck_assert_int_eq(agent_config_parse(json, strlen(json), &c, NULL), 0);
	tu_write(dir, "host/dev/zfs", "");
	tu_write(dir, "cfs/nvmet/subsystems/.keep", "");
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(cfs, sizeof(cfs), "%s/cfs", dir);
	snprintf(host, sizeof(host), "%s/host", dir);
	o.state_dir = state;
	o.configfs_root = cfs;
	o.host_root = host;
	o.health_cache_ms = period_ms;
	ck_assert_int_eq(agent_service_new(&c, &o, &a, NULL), 0);
	fake_cli_log_clear();
	fake_cli_reply("zpool", "ONLINE\n", "", 0);
	t0 = time_mono_ms();
	const PillarCsi__Agent__V1__SubsystemHealth *h = health_of(a, "zfs", &resp);
	checked = time_mono_ms(); /* the cached result is from between t0 and now */
	ck_assert(h->healthy);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ck_assert_int_eq(count_calls("zpool"), 1);
	/* within the cache period: no new zpool call, the old answer */
	fake_cli_reply("zpool", "FAULTED\n", "", 0);
	h = health_of(a, "zfs", &resp);
	t1 = time_mono_ms();
	if (t1 - t0 < period_ms) {
		ck_assert(h->healthy);
		ck_assert_int_eq(count_calls("zpool"), 1);
		judged = true;
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	/* after it: checked again */
	while (time_mono_ms() - checked < period_ms)
		usleep(10000);
	h = health_of(a, "zfs", &resp);
	ck_assert(!h->healthy);
	ck_assert_str_eq(h->message, "pool \"tank\" is FAULTED");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	if (judged)
		ck_assert_int_eq(count_calls("zpool"), 2);
	agent_service_free(a);
	agent_config_clear(&c);
	return judged;
}

/* agent-api.md §9: pool/VG checks are cached for 10 s (here 300 ms, longer when the machine is
 * too slow to make two checks within it) so HealthCheck stays cheap. */
START_TEST(test_health_pool_checks_are_cached)
{
	int period = 300;
	while (!health_cache_round(period)) {
		period *= 2;
		ck_assert_msg(period <= 20000, "two HealthChecks never came within %d ms", period);
	}
}
END_TEST

/* CreateVolume (or with expand, ExpandVolume) of the zvol tank/pvc-1 to BYTES; *cap is the
 * capacity answered. */
static int zvol_call(agent_service *a, bool expand, int64_t bytes, int64_t *cap,
                     struct grpc_status *st)
{
	PillarCsi__Agent__V1__FencingToken t = PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
	t.volume_uid = "uid-1";
	t.generation = 1;
	int code;
	if (expand) {
		PillarCsi__Agent__V1__ExpandVolumeRequest req =
		    PILLAR_CSI__AGENT__V1__EXPAND_VOLUME_REQUEST__INIT;
		PillarCsi__Agent__V1__ExpandVolumeResponse *resp = malloc(sizeof(*resp));
		pillar_csi__agent__v1__expand_volume_response__init(resp);
		req.volume_id = "tank/pvc-1";
		req.requested_bytes = bytes;
		req.backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL;
		req.fence = &t;
		code = agent_expand_volume(a, &req, resp, st);
		*cap = resp->capacity_bytes;
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		return code;
	}
	PillarCsi__Agent__V1__CreateVolumeRequest req =
	    PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	PillarCsi__Agent__V1__CreateVolumeResponse *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__create_volume_response__init(resp);
	req.volume_id = "tank/pvc-1";
	req.capacity_bytes = bytes;
	req.backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL;
	req.fence = &t;
	code = agent_create_volume(a, &req, resp, st);
	*cap = resp->capacity_bytes;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

/* An agent service on the backends of json (parsed into *c: agent_config_clear after
 * agent_service_free), its state, configfs and device roots below the test's directory (never
 * the machine's /dev, /sys). */
static agent_service *agent_on(const char *json, struct agent_config *c)
{
	struct agent_service_opts o = {0};
	agent_service *a;
	char state[600], cfs[600], dev[600];
	ck_assert_int_eq(agent_config_parse(json, strlen(json), c, NULL), 0);
	tu_write(dir, "cfs/nvmet/subsystems/.keep", "");
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(cfs, sizeof(cfs), "%s/cfs", dir);
	snprintf(dev, sizeof(dev), "%s/dev", dir);
	o.state_dir = state;
	o.configfs_root = cfs;
	o.dev_root = dev;
	o.host_root = dir;
	o.create_wait_ms = 300;
	ck_assert_int_eq(agent_service_new(c, &o, &a, NULL), 0);
	return a;
}

/* The zfs tool rounds a zvol's size up to its volblocksize (OpenZFS 2.1.11 on the real kernel:
 * 10^8 bytes became 100007936, 12208 blocks of 8 KiB).  A retried CreateVolume or ExpandVolume
 * of the same request must find it the same size: not ALREADY_EXISTS, not a shrink. */
START_TEST(test_zfs_rounded_size_is_the_same)
{
	struct agent_config c;
	struct grpc_status st = {0};
	tu_write(dir, "dev/zvol/tank/pvc-1", "");
	agent_service *a = agent_on("{\"backends\":[{\"zfs\":{\"pool\":\"tank\"}}]}", &c);
	fake_cli_reply("zfs", "100007936\n", "", 0); /* volsize: the volume exists, rounded up */
	fake_cli_reply("zfs.volblocksize", "8192\n", "", 0);
	int64_t cap = 0;
	ck_assert_msg(zvol_call(a, false, 100000000, &cap, &st) == GRPC_OK, "%s", st.msg);
	ck_assert_int_eq(cap, 100007936);
	/* a whole block (or more) smaller is a different size */
	ck_assert_int_eq(zvol_call(a, false, 100007936 - 8192, &cap, &st), GRPC_ALREADY_EXISTS);
	ck_assert_str_eq(st.msg,
	                 "volume \"tank/pvc-1\" exists with 100007936 bytes; requested 99999744");
	/* ExpandVolume retried after the tool rounded the new size up */
	ck_assert_msg(zvol_call(a, true, 100000000, &cap, &st) == GRPC_OK, "%s", st.msg);
	ck_assert_int_eq(cap, 100007936);
	ck_assert_ptr_null(strstr(fake_cli_log(), "zfs|set|"));
	agent_service_free(a);
	agent_config_clear(&c);
}
END_TEST

/* A CreateVolume whose name LVM reserves (lvm(8) VALID NAMES) is the caller's mistake: the agent
 * answers INVALID_ARGUMENT with the backend's rule, and lvcreate never runs. */
START_TEST(test_lvm_reserved_name_invalid_argument)
{
	struct agent_config c;
	struct grpc_status st = {0};
	agent_service *a = agent_on("{\"backends\":[{\"lvm\":{\"volumeGroup\":\"data-vg\"}}]}", &c);
	PillarCsi__Agent__V1__FencingToken t = PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
	t.volume_uid = "uid-1";
	t.generation = 1;
	PillarCsi__Agent__V1__CreateVolumeRequest req =
	    PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	PillarCsi__Agent__V1__CreateVolumeResponse *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__create_volume_response__init(resp);
	req.volume_id = "data-vg/pvmove-1";
	req.capacity_bytes = 1048576;
	req.backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_LVM;
	req.fence = &t;
	fake_cli_reply("lvs", "", "  Failed to find logical volume \"data-vg/pvmove-1\"\n", 5);
	fake_cli_reply("vgs", "  4294967296 4294967296\n", "", 0);
	fake_cli_log_clear();
	int code = agent_create_volume(a, &req, resp, &st);
	ck_assert_msg(code == GRPC_INVALID_ARGUMENT, "%d %s", code, st.msg);
	ck_assert_str_eq(st.msg, "volume name \"pvmove-1\": LVM reserves LV names that begin with "
	                         "\"pvmove\"; choose another name");
	ck_assert_ptr_null(strstr(fake_cli_log(), "lvcreate"));
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	agent_service_free(a);
	agent_config_clear(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("backend");
	TCase *t = tcase_create("backend");
	tcase_set_timeout(t, 30);
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_zfs_commands);
	tcase_add_test(t, test_lvm_commands);
	tcase_add_test(t, test_file_backend);
	tcase_add_test(t, test_file_expand_makes_the_name_durable);
	tcase_add_test(t, test_file_images_write_through);
	tcase_add_test(t, test_config_dir_probe);
	tcase_add_test(t, test_config_rules);
	tcase_add_test(t, test_health_pool_checks_are_cached);
	tcase_add_test(t, test_zfs_rounded_size_is_the_same);
	tcase_add_test(t, test_lvm_reserved_name_invalid_argument);
	suite_add_tcase(s, t);
	return tu_run(s);
}
