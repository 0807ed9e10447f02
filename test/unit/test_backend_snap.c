/* Snapshots and clones of src/backend with fake CLIs first on PATH (test/unit/fakes/fake-cli
 * records every argv): the exact zfs and lvm commands of docs/snapshots.md, output parsing,
 * idempotency and conflicts, hidden and held names, the sweep, LVM linear refused. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "fake_cli.h"
#include "testutil.h"

#define LVMCFG                                                                         \
	"activation{udev_sync=0 udev_rules=0} devices{obtain_device_list_from_udev=0 " \
	"scan_lvs=0 global_filter=[\"r|^/dev/zd|\",\"r|^/dev/zvol/|\",\"a|.*|\"]}"
#define LVS_SNAP "lvs|--config|" LVMCFG "|--noheadings|--nosuffix|--units|b|--separator|||-o|"
#define GIB      1073741824

static const char *dir;

static void setup(void)
{
	static const char *const tools[] = {"zfs",      "lvs",      "lvcreate",
	                                    "lvextend", "lvremove", "lvchange"};
	dir = fake_cli_setup(tools, sizeof(tools) / sizeof(tools[0]));
}

static void teardown(void)
{
	fake_cli_teardown();
}

static backend *mk(enum backend_kind k, const char *pool, const char *parent, const char *thin)
{
	struct backend_config c = {.kind = k,
	                           .pool = (char *)pool,
	                           .parent_dataset = (char *)parent,
	                           .thin_pool = (char *)thin,
	                           .thin_default = thin != NULL};
	backend *b;
	ck_assert_int_eq(backend_new(&c, &b, NULL), 0);
	return b;
}

#define ZLIST \
	"zfs|list|-Hp|-t|snapshot|-o|name,volsize,creation,defer_destroy,clones|-r|tank/k8s|\n"

START_TEST(test_zfs_snapshots)
{
	backend *b = mk(BACKEND_ZFS, "tank", "k8s", NULL);
	struct backend_snap s, *all;
	struct err e = {0};
	size_t n;
	/* a new snapshot: taken, then its creation time and size read back */
	fake_cli_reply("zfs.snapshot", "", "", 0);
	fake_cli_reply("zfs.creation,volsize", "1796573731\n1073741824\n", "", 0);
	ck_assert_int_eq(b->ops->snap_create(b, "s1", "pvc-1", &s, &e), 0);
	ck_assert_str_eq(fake_cli_log(),
	                 ZLIST "zfs|snapshot|tank/k8s/pvc-1@s1|\n"
	                       "zfs|get|-Hpo|value|creation,volsize|tank/k8s/pvc-1@s1|\n");
	ck_assert_str_eq(s.name, "s1");
	ck_assert_str_eq(s.source, "pvc-1");
	ck_assert_int_eq(s.size, GIB);
	ck_assert_int_eq(s.created, 1796573731);
	fake_cli_log_clear();
	/* what the pool holds: a snapshot, a hidden clone origin, one destroyed deferred, one of a
	 * held (deleted) volume, and datasets that are no volumes of the pool */
	fake_cli_reply(
	    "zfs.snapshot",
	    "tank/k8s/pvc-1@s1\t1073741824\t1796573731\toff\t\n"
	    "tank/k8s/pvc-1@_clone.pvc-3\t1073741824\t1796573732\toff\ttank/k8s/pvc-3\n"
	    "tank/k8s/pvc-1@gone\t1073741824\t1796573733\ton\ttank/k8s/pvc-4\n"
	    "tank/k8s/_held/pvc-9.1796573000000000001@s9\t2147483648\t1796570000\toff\t\n"
	    "tank/k8s/a/b@x\t1\t1\toff\t\n"
	    "tank/k8sx/v@y\t1\t1\toff\t\n"
	    "tank/k8s/pvc-2@bad\tnot-a-number\t1\toff\t\n",
	    "", 0);
	ck_assert_int_eq(b->ops->snap_create(b, "s1", "pvc-1", &s, &e), 0); /* idempotent */
	ck_assert_str_eq(fake_cli_log(), ZLIST);
	ck_assert_int_eq(s.created, 1796573731);
	ck_assert_int_eq(b->ops->snap_create(b, "s1", "pvc-2", &s, &e), -EEXIST);
	ck_assert_str_eq(e.msg, "snapshot \"s1\" exists of volume \"pvc-1\"");
	ck_assert_int_eq(b->ops->snap_create(b, "s9", "pvc-9", &s, &e), -EEXIST); /* held */
	ck_assert_int_eq(b->ops->snap_create(b, "gone", "pvc-1", &s, &e), -EEXIST);
	ck_assert_int_eq(b->ops->snap_find(b, "gone", &s, &e), -ENOENT);
	ck_assert_int_eq(b->ops->snap_find(b, "s9", &s, &e), 0);
	ck_assert_str_eq(s.source, "pvc-9");
	ck_assert_int_eq(s.size, 2 * (int64_t)GIB);
	ck_assert_int_eq(b->ops->snap_list(b, &all, &n, &e), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(all[0].name, "s1");
	ck_assert_str_eq(all[1].name, "s9");
	free(all);
	/* delete: deferred, so that clones keep their origin; missing and deferred are done */
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->snap_destroy(b, "s1", &e), 0);
	ck_assert_str_eq(fake_cli_log(), ZLIST "zfs|destroy|-d|tank/k8s/pvc-1@s1|\n");
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->snap_destroy(b, "gone", &e), 0);
	ck_assert_int_eq(b->ops->snap_destroy(b, "never", &e), 0);
	ck_assert_str_eq(fake_cli_log(), ZLIST ZLIST);
	backend_free(b);
}
END_TEST

START_TEST(test_zfs_clones_and_holding)
{
	backend *b = mk(BACKEND_ZFS, "tank", "k8s", NULL);
	struct err e = {0};
	const char *props[] = {"compression=lz4", "volblocksize=16384"};
	struct backend_create_opts o = {.props = props, .n_props = 2};
	fake_cli_reply("zfs.snapshot", "tank/k8s/pvc-1@s1\t1073741824\t1796573731\toff\t\n", "", 0);
	fake_cli_reply("zfs.volblocksize", "8192\n", "", 0);
	/* a restore, larger than the snapshot: clone, then volsize (volblocksize is the origin's) */
	ck_assert_int_eq(
	    b->ops->clone(b, "pvc-r", BACKEND_FROM_SNAPSHOT, "s1", 2 * (int64_t)GIB, &o, &e), 0);
	ck_assert_str_eq(fake_cli_log(), ZLIST "zfs|clone|-o|volmode=dev|-o|compression=lz4|"
	                                       "tank/k8s/pvc-1@s1|tank/k8s/pvc-r|\n"
	                                       "zfs|get|-Hpo|value|volblocksize|tank/k8s/pvc-r|\n"
	                                       "zfs|set|volsize=2147483648|tank/k8s/pvc-r|\n");
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->clone(b, "pvc-r", BACKEND_FROM_SNAPSHOT, "nope", GIB, NULL, &e),
	                 -ENOENT);
	ck_assert_str_eq(e.msg, "snapshot \"nope\" does not exist");
	/* a clone of a live volume: a hidden snapshot the clone owns */
	fake_cli_log_clear();
	fake_cli_reply("zfs.volsize", "1073741824\n", "", 0);
	ck_assert_int_eq(b->ops->clone(b, "pvc-c", BACKEND_FROM_VOLUME, "pvc-1", GIB, NULL, &e), 0);
	ck_assert_str_eq(fake_cli_log(), "zfs|get|-Hpo|value|volsize|tank/k8s/pvc-1|\n"
	                                 "zfs|snapshot|tank/k8s/pvc-1@_clone.pvc-c|\n"
	                                 "zfs|clone|-o|volmode=dev|tank/k8s/pvc-1@_clone.pvc-c|"
	                                 "tank/k8s/pvc-c|\n");
	/* a volume with snapshots is held, not destroyed; others as before */
	fake_cli_log_clear();
	fake_cli_reply("zfs.destroy", "", "cannot destroy 'tank/k8s/pvc-1': volume has children\n",
	               1);
	ck_assert_int_eq(b->ops->destroy(b, "pvc-1", &e), 0);
	const char *l = fake_cli_log();
	ck_assert_msg(strncmp(l,
	                      "zfs|destroy|tank/k8s/pvc-1|\n"
	                      "zfs|create|-p|-o|canmount=off|tank/k8s/_held|\n"
	                      "zfs|rename|tank/k8s/pvc-1|tank/k8s/_held/pvc-1.",
	                      strlen("zfs|destroy|tank/k8s/pvc-1|\n"
	                             "zfs|create|-p|-o|canmount=off|tank/k8s/_held|\n"
	                             "zfs|rename|tank/k8s/pvc-1|tank/k8s/_held/pvc-1.")) == 0,
	              "%s", l);
	fake_cli_log_clear();
	fake_cli_reply("zfs.destroy", "", "cannot destroy 'tank/k8s/pvc-1': dataset is busy\n", 1);
	ck_assert_int_eq(b->ops->destroy(b, "pvc-1", &e), -EBUSY);
	ck_assert_str_eq(fake_cli_log(), "zfs|destroy|tank/k8s/pvc-1|\n");
	backend_free(b);
}
END_TEST

START_TEST(test_zfs_sweep)
{
	backend *b = mk(BACKEND_ZFS, "tank", NULL, NULL);
	struct err e = {0};
	/* nothing held yet: the holding place does not exist */
	fake_cli_reply("zfs.snapshot", "tank/pvc-1@s1\t1073741824\t1796573731\toff\t\n", "", 0);
	fake_cli_reply("zfs.name", "", "cannot open 'tank/_held': dataset does not exist\n", 1);
	ck_assert_int_eq(b->ops->sweep(b, &e), 0);
	ck_assert_str_eq(
	    fake_cli_log(),
	    "zfs|list|-Hp|-t|snapshot|-o|name,volsize,creation,defer_destroy,clones|-r|"
	    "tank|\n"
	    "zfs|list|-Hpo|name|-t|volume|-d|1|tank/_held|\n");
	/* a hidden origin whose clone is gone; a held volume with a live snapshot, one whose last
	 * snapshot waits for a clone, one with none left */
	fake_cli_log_clear();
	fake_cli_reply("zfs.snapshot",
	               "tank/pvc-1@_clone.gone\t1073741824\t1796573731\toff\t\n"
	               "tank/pvc-1@_clone.live\t1073741824\t1796573731\toff\ttank/live\n"
	               "tank/_held/pvc-7.1@s7\t1073741824\t1796573731\toff\t\n"
	               "tank/_held/pvc-8.1@s8\t1073741824\t1796573731\ton\ttank/r8\n",
	               "", 0);
	fake_cli_reply("zfs.name", "tank/_held/pvc-7.1\ntank/_held/pvc-8.1\ntank/_held/pvc-9.1\n",
	               "", 0);
	ck_assert_int_eq(b->ops->sweep(b, &e), 0);
	const char *pass = "zfs|list|-Hp|-t|snapshot|-o|name,volsize,creation,defer_destroy,clones|"
	                   "-r|tank|\n"
	                   "zfs|destroy|-d|tank/pvc-1@_clone.gone|\n"
	                   "zfs|list|-Hpo|name|-t|volume|-d|1|tank/_held|\n"
	                   "zfs|destroy|tank/_held/pvc-9.1|\n";
	ck_assert_msg(strncmp(fake_cli_log(), pass, strlen(pass)) == 0, "%s", fake_cli_log());
	backend_free(b);
}
END_TEST

START_TEST(test_lvm_thin_snapshots)
{
	backend *b = mk(BACKEND_LVM, "data-vg", NULL, "thin0");
	struct backend_snap s, *all;
	struct backend_vol *vols;
	struct err e = {0};
	size_t n;
	fake_cli_reply("lvs.lv_name,lv_size,lv_time,lv_tags", "",
	               "  Failed to find logical volume \"data-vg/snap.s1\"\n", 5);
	fake_cli_reply("lvs.lv_size,pool_lv", "  1073741824|thin0\n", "", 0);
	fake_cli_reply("lvs.lv_time", "  2026-12-06 17:15:31 +0100\n", "", 0);
	ck_assert_int_eq(b->ops->snap_create(b, "s1", "pvc-1", &s, &e), 0);
	ck_assert_str_eq(fake_cli_log(), LVS_SNAP
	                 "lv_name,lv_size,lv_time,lv_tags|data-vg/snap.s1|\n" LVS_SNAP
	                 "lv_size,pool_lv|data-vg/pvc-1|\n"
	                 "lvcreate|--config|" LVMCFG "|-y|-s|-n|snap.s1|--addtag|"
	                 "pillar.source.pvc-1|data-vg/pvc-1|\n"
	                 "lvs|--config|" LVMCFG "|--noheadings|-o|lv_time|data-vg/snap.s1|\n");
	ck_assert_int_eq(s.created, 1796573731);
	ck_assert_int_eq(s.size, GIB);
	ck_assert_str_eq(s.source, "pvc-1");
	/* LVM linear: refused */
	fake_cli_reply("lvs.lv_size,pool_lv", "  1073741824|\n", "", 0);
	ck_assert_int_eq(b->ops->snap_create(b, "s1", "pvc-1", &s, &e), -EOPNOTSUPP);
	ck_assert_str_eq(e.msg, "snapshots need a thin pool: volume \"pvc-1\" is linear");
	ck_assert_int_eq(b->ops->clone(b, "pvc-c", BACKEND_FROM_VOLUME, "pvc-1", GIB, NULL, &e),
	                 -EOPNOTSUPP);
	/* found: idempotent by source, a conflict by another */
	fake_cli_reply("lvs.lv_name,lv_size,lv_time,lv_tags",
	               "  snap.s1|1073741824|2026-12-06 16:15:31 +0000|pillar.source.pvc-1,other\n",
	               "", 0);
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->snap_create(b, "s1", "pvc-1", &s, &e), 0);
	ck_assert_int_eq(b->ops->snap_create(b, "s1", "pvc-2", &s, &e), -EEXIST);
	ck_assert_str_eq(fake_cli_log(),
	                 LVS_SNAP "lv_name,lv_size,lv_time,lv_tags|data-vg/snap.s1|\n" LVS_SNAP
	                          "lv_name,lv_size,lv_time,lv_tags|"
	                          "data-vg/snap.s1|\n");
	fake_cli_reply("lvs.lv_name,lv_size,lv_time,lv_tags",
	               "  pvc-1|1073741824|2026-12-06 16:15:31 +0000|\n"
	               "  snap.s1|1073741824|2026-12-06 16:15:31 +0000|pillar.source.pvc-1\n"
	               "  thin0|8000000|2026-12-06 16:15:31 +0000|\n",
	               "", 0);
	ck_assert_int_eq(b->ops->snap_list(b, &all, &n, &e), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(all[0].name, "s1");
	free(all);
	/* ListVolumes never shows a snapshot LV */
	fake_cli_reply("lvs",
	               "  pvc-1 1048576 thin0\n  snap.s1 1048576 thin0\n  pvc-r 1048576 thin0\n",
	               "", 0);
	ck_assert_int_eq(b->ops->list(b, &vols, &n, &e), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(vols[1].name, "pvc-r");
	free(vols);
	/* restore: a thin snapshot of the snapshot, activation skip off, activated read-write,
	 * then grown */
	fake_cli_log_clear();
	fake_cli_reply("lvs.lv_size,pool_lv", "  1073741824|thin0\n", "", 0);
	ck_assert_int_eq(
	    b->ops->clone(b, "pvc-r", BACKEND_FROM_SNAPSHOT, "s1", 2 * (int64_t)GIB, NULL, &e), 0);
	ck_assert_str_eq(fake_cli_log(),
	                 LVS_SNAP "lv_size,pool_lv|data-vg/snap.s1|\n"
	                          "lvcreate|--config|" LVMCFG "|-y|-s|-kn|-n|pvc-r|"
	                          "data-vg/snap.s1|\n"
	                          "lvchange|--config|" LVMCFG "|-ay|-K|data-vg/pvc-r|\n"
	                          "lvextend|--config|" LVMCFG "|-L|2147483648b|"
	                          "data-vg/pvc-r|\n");
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->snap_destroy(b, "s1", &e), 0);
	ck_assert_str_eq(fake_cli_log(), "lvremove|--config|" LVMCFG "|-y|data-vg/snap.s1|\n");
	fake_cli_reply("lvremove", "", "  Failed to find logical volume \"data-vg/snap.s1\"\n", 5);
	ck_assert_int_eq(b->ops->snap_destroy(b, "s1", &e), 0);
	backend_free(b);
}
END_TEST

/* csi-snapshotter names every snapshot "snapshot-<uid>", and LVM refuses an LV whose name
 * begins with "snapshot" or "pvmove" (lvcreate: 'Names starting "snapshot" are reserved'). */
START_TEST(test_lvm_snapshot_lv_name_not_reserved)
{
	backend *b = mk(BACKEND_LVM, "data-vg", NULL, "thin0");
	struct backend_snap s;
	struct err e = {0};
	const char *names[] = {"snapshot-0d6b61e9-3d71-4d6c-8f5e-6d9e8b7c2a10", "pvmove-1"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		fake_cli_reply("lvs.lv_name,lv_size,lv_time,lv_tags", "",
		               "  Failed to find logical volume\n", 5);
		fake_cli_reply("lvs.lv_size,pool_lv", "  1073741824|thin0\n", "", 0);
		fake_cli_reply("lvs.lv_time", "  2026-12-06 17:15:31 +0100\n", "", 0);
		fake_cli_log_clear();
		ck_assert_int_eq(b->ops->snap_create(b, names[i], "pvc-1", &s, &e), 0);
		const char *n = strstr(fake_cli_log(), "lvcreate|");
		ck_assert_ptr_nonnull(n);
		n = strstr(n, "|-n|");
		ck_assert_ptr_nonnull(n);
		n += strlen("|-n|");
		ck_assert_msg(strncmp(n, "snapshot", 8) != 0 && strncmp(n, "pvmove", 6) != 0,
		              "LV name of snapshot %s is reserved by LVM: %s", names[i], n);
		ck_assert_str_eq(s.name, names[i]);
		/* found again under that LV name, and restored from it */
		char lv[200];
		snprintf(lv, sizeof(lv), "%.*s", (int)strcspn(n, "|"), n);
		char line[300];
		snprintf(line, sizeof(line),
		         "  %s|1073741824|2026-12-06 16:15:31 +0000|pillar.source.pvc-1\n", lv);
		fake_cli_reply("lvs.lv_name,lv_size,lv_time,lv_tags", line, "", 0);
		ck_assert_int_eq(b->ops->snap_find(b, names[i], &s, &e), 0);
		ck_assert_str_eq(s.name, names[i]);
		ck_assert_str_eq(s.source, "pvc-1");
	}
	backend_free(b);
}
END_TEST

/* lvm2 refuses, only inside lvcreate, a new LV whose name begins with "snapshot" or "pvmove" or
 * contains the suffix of one of its internal LVs (lvm(8) "VALID NAMES"): a volume, a restore
 * or clone, or a snapshot with such a name is refused before any LVM command runs, with a
 * message that names the rule, -EINVAL (the agent's INVALID_ARGUMENT). */
START_TEST(test_lvm_reserved_volume_names_refused)
{
	backend *b = mk(BACKEND_LVM, "data-vg", NULL, "thin0");
	struct backend_create_opts thin = {.thin = true};
	struct backend_snap s;
	struct err e = {0};
	const char *reserved[] = {"snapshot-1", "pvmove", "pvc_tmeta", "a_rimage_0", "x_vorigin",
	                          "db_cdata",   "y_mlog", "z_pmspare", "w_tdata",    "v_corig"};
	fake_cli_log_clear();
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		ck_assert_int_eq(b->ops->create(b, reserved[i], 1048576, &thin, &e), -EINVAL);
		ck_assert_msg(strstr(e.msg, "LVM reserves LV names that") &&
		                  strstr(e.msg, "choose another name") &&
		                  strstr(e.msg, reserved[i]),
		              "%s", e.msg);
		ck_assert_int_eq(
		    b->ops->clone(b, reserved[i], BACKEND_FROM_SNAPSHOT, "s1", 1048576, &thin, &e),
		    -EINVAL);
	}
	ck_assert_str_eq(fake_cli_log(), "");
	ck_assert_int_eq(b->ops->create(b, "pvmove-1", 1048576, &thin, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "volume name \"pvmove-1\": LVM reserves LV names that begin with "
	                        "\"pvmove\"; choose another name");
	ck_assert_int_eq(b->ops->create(b, "pvc_tmeta", 1048576, &thin, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "volume name \"pvc_tmeta\": LVM reserves LV names that contain "
	                        "\"_tmeta\"; choose another name");
	/* a snapshot LV is snap.<name>: the prefix rule cannot hit it, the infix rule can */
	fake_cli_reply("lvs.lv_name,lv_size,lv_time,lv_tags", "",
	               "  Failed to find logical volume\n", 5);
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->snap_create(b, "s_rmeta_1", "pvc-1", &s, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "snapshot name \"s_rmeta_1\": LVM reserves LV names that contain "
	                        "\"_rmeta\"; choose another name");
	ck_assert_ptr_null(strstr(fake_cli_log(), "lvcreate"));
	/* names near the rules are fine */
	fake_cli_log_clear();
	ck_assert_int_eq(b->ops->create(b, "Snapshot-1", 1048576, &thin, &e), 0);
	ck_assert_int_eq(b->ops->create(b, "pvc-pvmove_x", 1048576, &thin, &e), 0);
	ck_assert_int_eq(b->ops->create(b, "pvc_tmet", 1048576, &thin, &e), 0);
	ck_assert_ptr_nonnull(strstr(fake_cli_log(), "|-n|pvc_tmet|"));
	backend_free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("backend_snap");
	TCase *t = tcase_create("core");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t,
	                  60); /* each test execs the fake tools (shell scripts) dozens of times */
	tcase_add_test(t, test_zfs_snapshots);
	tcase_add_test(t, test_zfs_clones_and_holding);
	tcase_add_test(t, test_zfs_sweep);
	tcase_add_test(t, test_lvm_thin_snapshots);
	tcase_add_test(t, test_lvm_snapshot_lv_name_not_reserved);
	tcase_add_test(t, test_lvm_reserved_volume_names_refused);
	suite_add_tcase(s, t);
	return tu_run(s);
}
