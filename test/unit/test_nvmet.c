/* src/nvmet against a fake configfs root (plain directory tree): names and test vectors of
 * nvmet.md §2 and agent-api.md §8.2, write order (K1, K3, K4), read-back, in-capsule rules and
 * conflict, online resize, removal order with pruning, listing. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvmet/fs.h"
#include "nvmet/nvmet.h"
#include "testutil.h"

#define NQN1  "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-abc123"
#define NQN2  "nqn.2026-01.com.bhyoo.pillar-csi:data-vg.pvc-0b6f4e3c-9a51-4f0e-8d7e-2c1f5a9b7d11"
#define HOSTA "nqn.2014-08.org.nvmexpress:uuid:aaaa"
#define HOSTB "nqn.2014-08.org.nvmexpress:uuid:bbbb"

/* ---- a counting readdir ---------------------------------------------------------------------
 * Interposed on libc's: every directory entry the code under test reads is counted, so a test
 * can show that an operation reads a bounded number of entries whatever the tree holds. */
static long readdir_calls;

struct dirent *readdir(DIR *d)
{
	static struct dirent *(*real)(DIR *);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "readdir");
	readdir_calls++;
	return real(d);
}

/* ---- trace log ------------------------------------------------------------------------------ */

static char tlog[64][512];
static int tn;

static void tracer(void *arg, const char *op, const char *rel, const char *value)
{
	(void)arg;
	if (tn < 64)
		snprintf(tlog[tn++], sizeof(tlog[0]), "%s %s%s%s", op, rel, value ? " " : "",
		         value ? value : "");
}

static int tfind_exact(const char *line)
{
	for (int i = 0; i < tn; i++)
		if (strcmp(tlog[i], line) == 0)
			return i;
	return -1;
}

/* Index of the first trace line starting with prefix, or -1. */
static int tfind(const char *prefix)
{
	for (int i = 0; i < tn; i++)
		if (strncmp(tlog[i], prefix, strlen(prefix)) == 0)
			return i;
	return -1;
}

static char root[512];
static nvmet *nv;

static void setup(void)
{
	char p[PATH_MAX + 16];
	snprintf(root, sizeof(root), "%s", tu_mkdtemp());
	snprintf(p, sizeof(p), "%s/nvmet", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/nvmet/subsystems", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/nvmet/ports", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/nvmet/hosts", root);
	mkdir(p, 0755);
	ck_assert_int_eq(nvmet_open(root, &nv, NULL), 0);
	ck_assert(nvmet_is_fake(nv));
	nvmet_set_trace(nv, tracer, NULL);
	tn = 0;
}

static void teardown(void)
{
	nvmet_free(nv);
	nv = NULL;
	tu_rmtree(root);
}

static const char *attr(const char *rel)
{
	static char v[256];
	struct err e = {0};
	if (nvmet_attr_read(nv, rel, v, sizeof(v), &e) < 0)
		return "<missing>";
	return v;
}

static bool exists(const char *rel)
{
	char p[PATH_MAX * 2];
	struct stat st;
	snprintf(p, sizeof(p), "%s/nvmet/%s", root, rel);
	return lstat(p, &st) == 0;
}

static struct nvmet_export_spec spec1(void)
{
	struct nvmet_export_spec s = {.nqn = NQN1,
	                              .device_path = "/dev/zvol/tank/pvc-abc123",
	                              .acl = false,
	                              .bind_address = "10.0.0.5",
	                              .port = 4420};
	rules_ns_identity_derive(NQN1, &s.identity);
	return s;
}

/* ---- names ---------------------------------------------------------------------------------- */

START_TEST(test_port_id_vectors)
{
	ck_assert_uint_eq(nvmet_port_hash("10.0.0.5", 4420), 1596199647u);
	ck_assert_uint_eq(nvmet_port_preferred_id("10.0.0.5", 4420), 29188);
	ck_assert_uint_eq(nvmet_port_hash("10.0.0.5", 4421), 1579422028u);
	ck_assert_uint_eq(nvmet_port_preferred_id("10.0.0.5", 4421), 28529);
	ck_assert_uint_eq(nvmet_port_hash("192.168.1.20", 4420), 152868137u);
	ck_assert_uint_eq(nvmet_port_preferred_id("192.168.1.20", 4420), 40518);
	ck_assert_uint_eq(nvmet_port_hash("fd00::10", 4420), 506398142u);
	ck_assert_uint_eq(nvmet_port_preferred_id("fd00::10", 4420), 9198);
}
END_TEST

/* Real configfs resolves symlink targets from the working directory, so the exporter turns the
 * spec's relative targets (nvmet.md §2) into root-relative ones before symlink(2). */
START_TEST(test_link_target_resolution)
{
	char out[NVMET_PATH_MAX];
	ck_assert_int_eq(nvmet_fs_link_target("ports/7/subsystems/nqn.a:b",
	                                      "../../../subsystems/nqn.a:b", out, sizeof(out)),
	                 0);
	ck_assert_str_eq(out, "subsystems/nqn.a:b");
	ck_assert_int_eq(nvmet_fs_link_target("subsystems/nqn.a:b/allowed_hosts/nqn.h",
	                                      "../../../hosts/nqn.h", out, sizeof(out)),
	                 0);
	ck_assert_str_eq(out, "hosts/nqn.h");
	ck_assert_int_eq(nvmet_fs_link_target("a/b/c", "./../x//y", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "a/x/y");
	ck_assert_int_eq(
	    nvmet_fs_link_target("ports/7/subsystems/x", "../../../../etc", out, sizeof(out)),
	    -EINVAL);
	ck_assert_int_eq(nvmet_fs_link_target("ports/x", "/abs", out, sizeof(out)), -EINVAL);
	ck_assert_int_eq(nvmet_fs_link_target("ports/x", "..", out, sizeof(out)), -EINVAL);
	ck_assert_int_eq(nvmet_fs_link_target("a/b", "c", out, 3), -ENAMETOOLONG);
}
END_TEST

/* ---- attribute I/O -------------------------------------------------------------------------- */

START_TEST(test_attr_write_readback_and_skip)
{
	struct err e = {0};
	ck_assert_int_eq(nvmet_attr_write(nv, "ports/none/x", "1", &e), -ENOENT); /* no such dir */
	mkdir(strcat(strcpy((char[PATH_MAX + 16]){0}, root), "/nvmet/ports/7"), 0755);
	ck_assert_int_eq(nvmet_attr_write(nv, "ports/7/addr_trsvcid", "4420", &e), 0);
	ck_assert_str_eq(tu_read(root, "nvmet/ports/7/addr_trsvcid"), "4420\n");
	ck_assert_int_eq(tn, 1);
	/* satisfied: skipped, not written again */
	ck_assert_int_eq(nvmet_attr_write(nv, "ports/7/addr_trsvcid", "4420", &e), 0);
	ck_assert_int_eq(tn, 1);
	/* kernel pads the serial with spaces: trimmed before comparing */
	tu_write(root, "nvmet/ports/7/attr_serial", "abc   \n");
	ck_assert_int_eq(nvmet_attr_write(nv, "ports/7/attr_serial", "abc", &e), 0);
	ck_assert_int_eq(tn, 1);
	/* UUIDs compare case-insensitively */
	tu_write(root, "nvmet/ports/7/device_uuid", "0B661A8A-9925-5917-B52C-A5719096BC2B\n");
	ck_assert_int_eq(
	    nvmet_attr_write(nv, "ports/7/device_uuid", "0b661a8a-9925-5917-b52c-a5719096bc2b", &e),
	    0);
	ck_assert_int_eq(tn, 1);
}
END_TEST

/* For an attribute of an object just made: no read first (a satisfied value is written again),
 * still read back. */
START_TEST(test_attr_write_new)
{
	struct err e = {0};
	char p[PATH_MAX + 64];
	mkdir(strcat(strcpy((char[PATH_MAX + 16]){0}, root), "/nvmet/ports/9"), 0755);
	ck_assert_int_eq(nvmet_attr_write_new(nv, "ports/9/addr_trsvcid", "4420", &e), 0);
	ck_assert_int_eq(nvmet_attr_write_new(nv, "ports/9/addr_trsvcid", "4420", &e), 0);
	ck_assert_int_eq(tn, 2);
	ck_assert_str_eq(tu_read(root, "nvmet/ports/9/addr_trsvcid"), "4420\n");
	snprintf(p, sizeof(p), "%s/nvmet/ports/9/addr_traddr", root);
	ck_assert_int_eq(symlink("/dev/null", p), 0);
	ck_assert_int_eq(nvmet_attr_write_new(nv, "ports/9/addr_traddr", "0.0.0.0", &e), -EIO);
	ck_assert_str_eq(e.msg, "nvmet ports/9/addr_traddr: wrote \"0.0.0.0\" but read back \"\"");
}
END_TEST

START_TEST(test_attr_readback_mismatch)
{
	struct err e = {0};
	char p[PATH_MAX + 64];
	/* a FIFO-free way to make the read-back differ: a symlink to a file that is replaced...
	 * simpler: make the attribute a symlink to /dev/null, which swallows the write. */
	mkdir(strcat(strcpy((char[PATH_MAX + 16]){0}, root), "/nvmet/ports/8"), 0755);
	snprintf(p, sizeof(p), "%s/nvmet/ports/8/addr_trsvcid", root);
	ck_assert_int_eq(symlink("/dev/null", p), 0);
	nvmet *real;
	ck_assert_int_eq(nvmet_open(root, &real, NULL), 0);
	ck_assert_int_eq(nvmet_attr_write(real, "ports/8/addr_trsvcid", "4420", &e), -EIO);
	ck_assert_str_eq(e.msg, "nvmet ports/8/addr_trsvcid: wrote \"4420\" but read back \"\"");
	nvmet_free(real);
}
END_TEST

/* ---- prepare + link ------------------------------------------------------------------------- */

START_TEST(test_fake_completes_entries_after_kill)
{
	/* killed after the subsystem mkdir, before the fake's emulated entries: the next prepare
	 * must find namespaces/ as on configfs, where the kernel makes them with the directory */
	char p[PATH_MAX * 2];
	struct nvmet_export_spec s = spec1();
	struct nvmet_prepared pr;
	struct err e = {0};
	snprintf(p, sizeof(p), "%s/nvmet/subsystems/" NQN1, root);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_msg(nvmet_export_prepare(nv, &s, &pr, &e) == 0, "%s", e.msg);
	ck_assert(exists("subsystems/" NQN1 "/namespaces/1/enable"));
	ck_assert_str_eq(attr("subsystems/" NQN1 "/namespaces/1/enable"), "1");
	/* completing never overwrites: a second prepare keeps the written serial */
	char serial[64];
	snprintf(serial, sizeof(serial), "%s", attr("subsystems/" NQN1 "/attr_serial"));
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &pr, &e), 0);
	ck_assert_str_eq(attr("subsystems/" NQN1 "/attr_serial"), serial);
}
END_TEST

START_TEST(test_prepare_write_order_acl_on)
{
	struct nvmet_export_spec s = spec1();
	const char *hosts[] = {HOSTA};
	struct nvmet_prepared p;
	struct err e = {0};
	/* start from ACL off (allow_any_host=1): switching on must write 0 before any host link */
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert_int_ge(tfind("write subsystems/" NQN1 "/attr_allow_any_host 1"), 0);
	ck_assert_int_eq(tfind("mkdir ports/"), -1);
	/* ...but keep the identity-before-enable order of the first run for the checks below */
	int serial0 = tfind("write subsystems/" NQN1 "/attr_serial f9f732c8ef48c956e9ef");
	int dev = tfind("write subsystems/" NQN1 "/namespaces/1/device_path");
	int uuid = tfind("write subsystems/" NQN1 "/namespaces/1/device_uuid 0b661a8a");
	int nguid = tfind("write subsystems/" NQN1 "/namespaces/1/device_nguid 2018eb84");
	int en = tfind("write subsystems/" NQN1 "/namespaces/1/enable 1");
	ck_assert(serial0 >= 0 && dev >= 0 && uuid >= 0 && nguid >= 0 && en >= 0);
	ck_assert_int_lt(dev, en); /* K3 */
	ck_assert_int_lt(uuid, en);
	ck_assert_int_lt(nguid, en);
	tn = 0;
	s.acl = true;
	s.hosts = hosts;
	s.n_hosts = 1;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	int any = tfind("write subsystems/" NQN1 "/attr_allow_any_host 0");
	int host = tfind("symlink subsystems/" NQN1 "/allowed_hosts/" HOSTA);
	ck_assert(any >= 0 && host >= 0);
	ck_assert_int_lt(any, host);                 /* K1 */
	ck_assert_int_eq(tfind("mkdir ports/"), -1); /* phase 1 never creates a port */
	ck_assert_str_eq(p.identity.uuid, s.identity.uuid);
	ck_assert_str_eq(p.identity.serial, "f9f732c8ef48c956e9ef");
	ck_assert(exists("hosts/" HOSTA));

	/* link: port attributes before the link; serial before the link (K4, K5) */
	unsigned id = 0;
	ck_assert_int_eq(nvmet_export_link(nv, &s, p.relink, &id, &e), 0);
	ck_assert_uint_eq(id, 29188);
	int pa = tfind("write ports/29188/addr_trsvcid 4420");
	int ln = tfind("symlink ports/29188/subsystems/" NQN1);
	ck_assert(pa >= 0 && ln > pa);
	ck_assert_str_eq(attr("subsystems/" NQN1 "/attr_serial"), "f9f732c8ef48c956e9ef"); /* K4 */
	ck_assert_str_eq(attr("ports/29188/addr_trtype"), "tcp");
	ck_assert_str_eq(attr("ports/29188/addr_adrfam"), "ipv4");
	ck_assert_str_eq(attr("ports/29188/addr_traddr"), "0.0.0.0");
	ck_assert_str_eq(attr("ports/29188/addr_trsvcid"), "4420");
	ck_assert_int_eq(nvmet_subsys_linked(nv, NQN1, NULL), 1);
	/* idempotent: a second run changes nothing */
	tn = 0;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &s, p.relink, &id, &e), 0);
	ck_assert_int_eq(tn, 0);
}
END_TEST

START_TEST(test_acl_off_removes_links_first)
{
	struct nvmet_export_spec s = spec1();
	const char *hosts[] = {HOSTA, HOSTB};
	struct nvmet_prepared p;
	struct err e = {0};
	s.acl = true;
	s.hosts = hosts;
	s.n_hosts = 2;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	tn = 0;
	s.acl = false;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	int u1 = tfind("unlink subsystems/" NQN1 "/allowed_hosts/");
	int any = tfind("write subsystems/" NQN1 "/attr_allow_any_host 1");
	ck_assert(u1 >= 0 && any > u1);                                /* K2 */
	ck_assert(!exists("hosts/" HOSTA) && !exists("hosts/" HOSTB)); /* pruned */
	ck_assert_str_eq(attr("subsystems/" NQN1 "/attr_allow_any_host"), "1");
}
END_TEST

START_TEST(test_exact_hosts_revokes_unlisted)
{
	struct nvmet_export_spec s = spec1();
	const char *two[] = {HOSTA, HOSTB}, *one[] = {HOSTB};
	struct nvmet_prepared p;
	struct err e = {0};
	s.acl = true;
	s.hosts = two;
	s.n_hosts = 2;
	s.exact_hosts = true;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &s, p.relink, NULL, &e), 0);
	s.hosts = one;
	s.n_hosts = 1;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert(!exists("subsystems/" NQN1 "/allowed_hosts/" HOSTA));
	ck_assert(exists("subsystems/" NQN1 "/allowed_hosts/" HOSTB));
	ck_assert(!exists("hosts/" HOSTA));
	ck_assert(!p.relink); /* a host remains admitted: no relink */
	s.n_hosts = 0;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert(p.relink); /* linked and nobody left: drop live associations in phase 2 */
	tn = 0;
	ck_assert_int_eq(nvmet_export_link(nv, &s, p.relink, NULL, &e), 0);
	ck_assert_int_ge(tfind("unlink ports/29188/subsystems/" NQN1), 0);
	ck_assert_int_ge(tfind("symlink ports/29188/subsystems/" NQN1), 0);
}
END_TEST

START_TEST(test_live_identity_wins)
{
	struct nvmet_export_spec s = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	/* a live export made by older software: random identity, enabled, linked */
	tu_write(root, "nvmet/subsystems/" NQN1 "/attr_allow_any_host", "1\n");
	tu_write(root, "nvmet/subsystems/" NQN1 "/attr_serial", "0123456789abcdef\n");
	tu_write(root, "nvmet/subsystems/" NQN1 "/namespaces/1/device_path",
	         "/dev/zvol/tank/pvc-abc123\n");
	tu_write(root, "nvmet/subsystems/" NQN1 "/namespaces/1/device_uuid",
	         "11111111-2222-4333-8444-555555555555\n");
	tu_write(root, "nvmet/subsystems/" NQN1 "/namespaces/1/device_nguid",
	         "66666666-2222-4333-8444-555555555555\n");
	tu_write(root, "nvmet/subsystems/" NQN1 "/namespaces/1/enable", "1\n");
	mkdir(strcat(strcpy((char[PATH_MAX + 64]){0}, root),
	             "/nvmet/subsystems/" NQN1 "/allowed_hosts"),
	      0755);
	tu_write(root, "nvmet/ports/29188/addr_trtype", "tcp\n");
	tu_write(root, "nvmet/ports/29188/addr_adrfam", "ipv4\n");
	tu_write(root, "nvmet/ports/29188/addr_traddr", "0.0.0.0\n");
	tu_write(root, "nvmet/ports/29188/addr_trsvcid", "4420\n");
	tu_write(root, "nvmet/ports/29188/param_inline_data_size", "-1\n");
	char l[PATH_MAX + 128];
	snprintf(l, sizeof(l), "%s/nvmet/ports/29188/subsystems", root);
	mkdir(l, 0755);
	strcat(l, "/" NQN1);
	ck_assert_int_eq(symlink("../../../subsystems/" NQN1, l), 0);

	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert(p.linked);
	ck_assert_str_eq(p.identity.serial, "0123456789abcdef");
	ck_assert_str_eq(p.identity.uuid, "11111111-2222-4333-8444-555555555555");
	ck_assert_str_eq(p.identity.nguid, "66666666-2222-4333-8444-555555555555");
	ck_assert_int_eq(nvmet_export_link(nv, &s, p.relink, NULL, &e), 0);
	ck_assert_int_eq(tn, 0); /* nothing was unlinked, disabled or rewritten */

	/* enabled with another device: refused, never disabled */
	s.device_path = "/dev/zvol/tank/other";
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), -EBUSY);
	ck_assert_str_eq(
	    e.msg, "namespace 1 of " NQN1 " is enabled with device "
	           "/dev/zvol/tank/pvc-abc123; refusing to switch it to /dev/zvol/tank/other");
	ck_assert_str_eq(attr("subsystems/" NQN1 "/namespaces/1/enable"), "1");
}
END_TEST

START_TEST(test_icds_rules_and_conflict)
{
	struct nvmet_export_spec a = spec1(), b = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	unsigned id;
	a.icds = 8192;
	ck_assert_int_eq(nvmet_export_prepare(nv, &a, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &a, false, &id, &e), 0);
	ck_assert_str_eq(attr("ports/29188/param_inline_data_size"), "8192");
	/* another export on the same port asking nothing: accepts the port's value */
	b.nqn = NQN2;
	b.device_path = "/dev/data-vg/x";
	rules_ns_identity_derive(NQN2, &b.identity);
	ck_assert_int_eq(nvmet_export_prepare(nv, &b, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &b, false, &id, &e), 0);
	ck_assert_uint_eq(id,
	                  29188); /* the existing wildcard port is reused, whatever its number */
	/* same value: links */
	b.icds = 8192;
	ck_assert_int_eq(nvmet_export_link(nv, &b, false, &id, &e), 0);
	/* different value on a linked port: conflict */
	b.icds = 16384;
	ck_assert_int_eq(nvmet_export_link(nv, &b, false, &id, &e), -EBUSY);
	ck_assert_str_eq(e.msg, "param_inline_data_size is 8192 but the export requires 16384 "
	                        "(port 29188, ipv4 4420)");
	ck_assert_str_eq(attr("ports/29188/param_inline_data_size"), "8192");
}
END_TEST

/* A batch links its later exports into the port an earlier one selected: nothing of the port
 * is written again, the in-capsule rule still holds, and a port that lost its links is
 * selected and configured as usual. */
START_TEST(test_link_known_port)
{
	struct nvmet_export_spec a = spec1(), b = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	unsigned id = 0;
	ck_assert_int_eq(nvmet_export_prepare(nv, &a, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &a, false, &id, &e), 0);
	ck_assert_uint_eq(id, 29188);
	b.nqn = NQN2;
	b.device_path = "/dev/data-vg/x";
	rules_ns_identity_derive(NQN2, &b.identity);
	ck_assert_int_eq(nvmet_export_prepare(nv, &b, &p, &e), 0);
	tn = 0;
	ck_assert_msg(nvmet_export_link_known(nv, &b, false, id, NQN1, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(tn, 1);
	ck_assert_str_eq(tlog[0],
	                 "symlink ports/29188/subsystems/" NQN2 " ../../../subsystems/" NQN2);
	b.icds = 16384;
	ck_assert_int_eq(nvmet_export_link_known(nv, &b, false, id, NQN1, &e), -EBUSY);
	ck_assert_str_eq(e.msg, "param_inline_data_size is -1 but the export requires 16384 "
	                        "(port 29188, ipv4 4420)");
	/* the port lost its links (and its attributes): configured again before the link */
	b.icds = 0;
	ck_assert_int_eq(nvmet_export_remove(nv, NQN1, &e), 0);
	ck_assert_int_eq(nvmet_export_remove(nv, NQN2, &e), 0);
	ck_assert(!exists("ports/29188"));
	ck_assert_int_eq(nvmet_export_prepare(nv, &b, &p, &e), 0);
	ck_assert_msg(nvmet_export_link_known(nv, &b, false, id, NQN1, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(attr("ports/29188/addr_trsvcid"), "4420");
	ck_assert_str_eq(attr("ports/29188/addr_adrfam"), "ipv4");
	ck_assert(exists("ports/29188/subsystems/" NQN2));
}
END_TEST

START_TEST(test_icds_default_port_conflicts_with_request)
{
	struct nvmet_export_spec a = spec1(), b = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	ck_assert_int_eq(nvmet_export_prepare(nv, &a, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &a, false, NULL, &e), 0);
	b.nqn = NQN2;
	b.icds = 16384;
	ck_assert_int_eq(nvmet_export_link(nv, &b, false, NULL, &e), -EBUSY);
	ck_assert_str_eq(e.msg, "param_inline_data_size is -1 but the export requires 16384 "
	                        "(port 29188, ipv4 4420)");
}
END_TEST

START_TEST(test_port_collision_and_ipv6)
{
	struct nvmet_export_spec s = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	unsigned id;
	/* a foreign port already holds the preferred number */
	tu_write(root, "nvmet/ports/29188/addr_trtype", "rdma\n");
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &s, false, &id, &e), 0);
	ck_assert_uint_eq(id, 29189);
	s.bind_address = "fd00::10";
	ck_assert_int_eq(nvmet_export_link(nv, &s, false, &id, &e), 0);
	ck_assert_uint_eq(id, 9198);
	ck_assert_str_eq(attr("ports/9198/addr_adrfam"), "ipv6");
	ck_assert_str_eq(attr("ports/9198/addr_traddr"), "::");
	s.bind_address = "storage-1";
	ck_assert_int_eq(nvmet_export_link(nv, &s, false, &id, &e), -EINVAL);
}
END_TEST

START_TEST(test_port_left_unconfigured_is_reused)
{
	/* killed right after mkdir ports/<preferred>: no address, nothing linked — the next link
	 * takes that number (the export keeps its port ID) instead of moving to id+1 */
	struct nvmet_export_spec s = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	unsigned id;
	ck_assert_int_eq(nvmet_fs_mkdir(nv, "ports/29188", NULL, &e), 0);
	ck_assert_str_eq(attr("ports/29188/addr_trsvcid"), "");
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert_msg(nvmet_export_link(nv, &s, false, &id, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(id, 29188);
	ck_assert_str_eq(attr("ports/29188/addr_trsvcid"), "4420");
	ck_assert(!exists("ports/29189"));
}
END_TEST

START_TEST(test_allow_deny_and_relink)
{
	struct nvmet_export_spec s = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	ck_assert_int_eq(nvmet_host_allow(nv, NQN1, HOSTA, &e), -ENOENT);
	s.acl = true;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &s, false, NULL, &e), 0);
	ck_assert_int_eq(nvmet_host_allow(nv, NQN1, HOSTA, &e), 0);
	ck_assert_int_eq(nvmet_host_allow(nv, NQN1, HOSTA, &e), 0); /* EEXIST = success */
	ck_assert_int_eq(nvmet_host_allow(nv, NQN1, HOSTB, &e), 0);
	ck_assert(exists("subsystems/" NQN1 "/allowed_hosts/" HOSTA));
	tn = 0;
	ck_assert_int_eq(nvmet_host_deny(nv, NQN1, HOSTA, &e), 0);
	ck_assert(!exists("hosts/" HOSTA));
	ck_assert_int_eq(tfind("unlink ports/"), -1); /* HOSTB remains: no relink */
	ck_assert_int_eq(nvmet_host_deny(nv, NQN1, HOSTB, &e), 0);
	ck_assert_int_ge(tfind("unlink ports/29188/subsystems/" NQN1), 0);
	ck_assert_int_eq(nvmet_subsys_linked(nv, NQN1, NULL), 1);  /* linked again */
	ck_assert_int_eq(nvmet_host_deny(nv, NQN1, HOSTB, &e), 0); /* missing host = OK */
	ck_assert_int_eq(nvmet_host_deny(nv, NQN2, HOSTB, &e), 0); /* missing export = OK */
}
END_TEST

START_TEST(test_host_kept_when_used_elsewhere)
{
	struct nvmet_export_spec a = spec1(), b = spec1();
	const char *hosts[] = {HOSTA};
	struct nvmet_prepared p;
	struct err e = {0};
	a.acl = b.acl = true;
	a.hosts = b.hosts = hosts;
	a.n_hosts = b.n_hosts = 1;
	b.nqn = "nqn.2014-08.org.someone-else:vol";
	ck_assert_int_eq(nvmet_export_prepare(nv, &a, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_prepare(nv, &b, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_remove(nv, NQN1, &e), 0);
	ck_assert(exists("hosts/" HOSTA)); /* still linked by a foreign subsystem */
}
END_TEST

/* A host is pruned only when the full scan finds no link: links made through the handle,
 * made by someone else, or removed behind the handle's back all count as the tree says. */
START_TEST(test_host_refs_follow_the_tree)
{
	struct nvmet_export_spec a = spec1(), b = spec1();
	const char *hosts[] = {HOSTA}, *hosts_b[] = {HOSTB};
	struct nvmet_prepared p;
	struct err e = {0};
	char link[PATH_MAX * 3], dir[PATH_MAX * 2];
	a.acl = b.acl = true;
	a.hosts = b.hosts = hosts;
	a.n_hosts = b.n_hosts = 1;
	b.nqn = NQN2;
	ck_assert_int_eq(nvmet_export_prepare(nv, &a, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_prepare(nv, &b, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_remove(nv, NQN1, &e), 0);
	ck_assert(exists("hosts/" HOSTA)); /* NQN2 links it */
	/* Someone else links HOSTA; the handle never saw that link. */
	snprintf(dir, sizeof(dir), "%s/nvmet/subsystems/nqn.2014-08.org.other:v/allowed_hosts",
	         root);
	*strrchr(dir, '/') = '\0';
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	strcat(dir, "/allowed_hosts");
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	snprintf(link, sizeof(link), "%s/" HOSTA, dir);
	ck_assert_int_eq(symlink("../../../hosts/" HOSTA, link), 0);
	ck_assert_int_eq(nvmet_export_remove(nv, NQN2, &e), 0);
	ck_assert(exists("hosts/" HOSTA)); /* found by the scan */
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(nvmet_export_prepare(nv, &a, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_remove(nv, NQN1, &e), 0);
	ck_assert(!exists("hosts/" HOSTA)); /* nobody links it any more */
	/* A remembered link removed behind the handle's back is not trusted. */
	b.hosts = hosts_b;
	ck_assert_int_eq(nvmet_export_prepare(nv, &b, &p, &e), 0);
	snprintf(link, sizeof(link), "%s/nvmet/subsystems/" NQN2 "/allowed_hosts/" HOSTB, root);
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(nvmet_host_deny(nv, NQN2, HOSTB, &e), 0);
	ck_assert(!exists("hosts/" HOSTB));
}
END_TEST

/* Linking, unexporting and pruning read a bounded number of directory entries however many
 * subsystems share the port and the host (they listed every link and every subsystem: 48
 * exports are enough to tell, and stay quick under ASan on a loaded machine). */
START_TEST(test_cost_independent_of_exports)
{
	enum { N = 48 };
	static char nqns[N][128];
	const char *hosts[] = {HOSTA};
	struct nvmet_prepared p;
	struct err e = {0};
	for (int i = 0; i < N; i++) {
		struct nvmet_export_spec s = spec1();
		snprintf(nqns[i], sizeof(nqns[i]), RULES_NQN_PREFIX "tank.pvc-%04d", i);
		s.nqn = nqns[i];
		s.acl = true;
		s.hosts = hosts;
		s.n_hosts = 1;
		rules_ns_identity_derive(s.nqn, &s.identity);
		readdir_calls = 0;
		ck_assert_msg(nvmet_export_prepare(nv, &s, &p, &e) == 0, "%s", e.msg);
		ck_assert_msg(nvmet_export_link(nv, &s, false, NULL, &e) == 0, "%s", e.msg);
		ck_assert_int_le(readdir_calls, 16); /* 8 here; the old code read every link */
	}
	for (int i = 0; i < N - 1; i++) {
		readdir_calls = 0;
		ck_assert_int_eq(nvmet_export_remove(nv, nqns[i], &e), 0);
		ck_assert_int_le(readdir_calls, 32); /* 24 here; the old code read N subsystems */
		ck_assert(exists("hosts/" HOSTA) && exists("ports/29188"));
	}
	ck_assert_int_eq(nvmet_export_remove(nv, nqns[N - 1], &e), 0);
	ck_assert(!exists("hosts/" HOSTA) && !exists("ports/29188"));
}
END_TEST

START_TEST(test_remove_order_and_pruning)
{
	struct nvmet_export_spec s = spec1();
	const char *hosts[] = {HOSTA};
	struct nvmet_prepared p;
	struct err e = {0};
	s.acl = true;
	s.hosts = hosts;
	s.n_hosts = 1;
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &s, false, NULL, &e), 0);
	tn = 0;
	ck_assert_int_eq(nvmet_export_remove(nv, NQN1, &e), 0);
	int unl = tfind("unlink ports/29188/subsystems/" NQN1);
	int prm = tfind("rmdir ports/29188");
	int dis = tfind("write subsystems/" NQN1 "/namespaces/1/enable 0");
	int nsr = tfind("rmdir subsystems/" NQN1 "/namespaces/1");
	int hl = tfind("unlink subsystems/" NQN1 "/allowed_hosts/" HOSTA);
	int hr = tfind("rmdir hosts/" HOSTA);
	int sr = tfind_exact("rmdir subsystems/" NQN1);
	ck_assert(unl >= 0 && prm > unl && dis > prm && nsr > dis && hl > nsr && hr > hl);
	ck_assert_int_gt(sr, hr);
	ck_assert(!exists("subsystems/" NQN1) && !exists("ports/29188") && !exists("hosts/" HOSTA));
	ck_assert_int_eq(nvmet_export_remove(nv, NQN1, &e), 0); /* missing = OK */
}
END_TEST

START_TEST(test_port_kept_while_others_linked)
{
	struct nvmet_export_spec a = spec1(), b = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	b.nqn = NQN2;
	ck_assert_int_eq(nvmet_export_prepare(nv, &a, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &a, false, NULL, &e), 0);
	ck_assert_int_eq(nvmet_export_prepare(nv, &b, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &b, false, NULL, &e), 0);
	ck_assert_int_eq(nvmet_export_remove(nv, NQN1, &e), 0);
	ck_assert(exists("ports/29188/subsystems/" NQN2));
}
END_TEST

START_TEST(test_revalidate)
{
	struct nvmet_export_spec s = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	ck_assert_int_eq(nvmet_ns_revalidate(nv, NQN1, &e), 0); /* not exported: nothing */
	ck_assert_int_eq(nvmet_export_prepare(nv, &s, &p, &e), 0);
	tn = 0;
	ck_assert_int_eq(nvmet_ns_revalidate(nv, NQN1, &e), 0);
	ck_assert_int_eq(tn, 1);
	ck_assert_str_eq(tlog[0], "write subsystems/" NQN1 "/namespaces/1/revalidate_size 1");
	ck_assert_str_eq(attr("subsystems/" NQN1 "/namespaces/1/enable"), "1"); /* never toggled */
	char path[PATH_MAX + 128];
	snprintf(path, sizeof(path), "%s/nvmet/subsystems/%s/namespaces/1/revalidate_size", root,
	         NQN1);
	unlink(path);
	ck_assert_int_eq(nvmet_ns_revalidate(nv, NQN1, &e), -EOPNOTSUPP);
	ck_assert_str_eq(e.msg,
	                 "kernel nvmet has no revalidate_size; online resize is not supported "
	                 "on this storage node");
}
END_TEST

START_TEST(test_list_exports)
{
	struct nvmet_export_spec a = spec1(), b = spec1();
	struct nvmet_prepared p;
	struct nvmet_export_entry *v;
	size_t n;
	struct err e = {0};
	b.nqn = NQN2;
	ck_assert_int_eq(nvmet_export_prepare(nv, &a, &p, &e), 0);
	ck_assert_int_eq(nvmet_export_link(nv, &a, false, NULL, &e), 0);
	ck_assert_int_eq(nvmet_export_prepare(nv, &b, &p, &e), 0);
	tu_write(root, "nvmet/subsystems/nqn.2014-08.org.other:foreign/attr_serial", "x\n");
	ck_assert_int_eq(nvmet_export_list(nv, &v, &n, &e), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0].volume_id, "data-vg/pvc-0b6f4e3c-9a51-4f0e-8d7e-2c1f5a9b7d11");
	ck_assert_int_eq(v[0].port, 0);
	ck_assert_str_eq(v[1].volume_id, "tank/pvc-abc123");
	ck_assert_int_eq(v[1].port, 4420);
	free(v);
}
END_TEST

START_TEST(test_no_tree)
{
	struct nvmet_export_spec s = spec1();
	struct nvmet_prepared p;
	struct err e = {0};
	nvmet *none;
	char r2[PATH_MAX + 16];
	snprintf(r2, sizeof(r2), "%s/empty", root);
	mkdir(r2, 0755);
	ck_assert_int_eq(nvmet_open(r2, &none, NULL), 0);
	ck_assert(!nvmet_available(none));
	ck_assert_int_eq(nvmet_export_prepare(none, &s, &p, &e), -ENOENT);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof(want), "nvmet configfs not available at %s/nvmet", r2);
	ck_assert_str_eq(e.msg, want);
	nvmet_free(none);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nvmet");
	TCase *t = tcase_create("names");
	tcase_add_test(t, test_port_id_vectors);
	tcase_add_test(t, test_link_target_resolution);
	suite_add_tcase(s, t);
	t = tcase_create("tree");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_attr_write_readback_and_skip);
	tcase_add_test(t, test_attr_readback_mismatch);
	tcase_add_test(t, test_attr_write_new);
	tcase_add_test(t, test_fake_completes_entries_after_kill);
	tcase_add_test(t, test_prepare_write_order_acl_on);
	tcase_add_test(t, test_acl_off_removes_links_first);
	tcase_add_test(t, test_exact_hosts_revokes_unlisted);
	tcase_add_test(t, test_live_identity_wins);
	tcase_add_test(t, test_icds_rules_and_conflict);
	tcase_add_test(t, test_icds_default_port_conflicts_with_request);
	tcase_add_test(t, test_link_known_port);
	tcase_add_test(t, test_port_collision_and_ipv6);
	tcase_add_test(t, test_port_left_unconfigured_is_reused);
	tcase_add_test(t, test_allow_deny_and_relink);
	tcase_add_test(t, test_host_kept_when_used_elsewhere);
	tcase_add_test(t, test_host_refs_follow_the_tree);
	tcase_add_test(t, test_cost_independent_of_exports);
	tcase_add_test(t, test_remove_order_and_pruning);
	tcase_add_test(t, test_port_kept_while_others_linked);
	tcase_add_test(t, test_revalidate);
	tcase_add_test(t, test_list_exports);
	tcase_add_test(t, test_no_tree);
	suite_add_tcase(s, t);
	return tu_run(s);
}
