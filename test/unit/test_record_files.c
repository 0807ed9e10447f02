/* Durable records as files: the agent's fencing marks (agent-api.md §6) and identity pins
 * (§8.3), the node's stage records (csi.md §7.5), read and written byte for byte as the fixtures under test/unit/fixtures/records/ hold
 * them.  The fixtures were written by the roles' code; whatever codec writes the records, a
 * file an older agent left must read the same and a write must produce the same bytes. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fence.h"
#include "agent/identity.h"
#include "node/record.h"
#include "testutil.h"

#define FIXTURES "test/unit/fixtures/records/"
#define VOL      "tank/pvc-1"
#define MARK     "generations/tank_2Fpvc-1.mark"
#define PIN      "nvmet-identity/tank_2Fpvc-1.json"
#define NQN      "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-1"
#define U1       "8d0c7a9e-3f51-4b6e-9b1d-2f7c0e5a4d11"
#define U2       "11111111-3f51-4b6e-9b1d-2f7c0e5a4d11"
/* a UID with bytes JSON escapes: quote, backslash, slash, and UTF-8 */
#define U3 "u\"3\\/\xc3\xa9"

static char sd[512];

static void setup(void)
{
	snprintf(sd, sizeof(sd), "%s", tu_mkdtemp());
}
static void teardown(void)
{
	tu_rmtree(sd);
}

/* The fixture's bytes (static buffer). */
static const char *fixture(const char *name)
{
	static char buf[4096];
	char path[PATH_MAX];
	snprintf(path, sizeof(path), FIXTURES "%s", name);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "fixture %s missing", path);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return buf;
}

static void expect_file(const char *rel, const char *name)
{
	char want[4096];
	snprintf(want, sizeof(want), "%s", fixture(name));
	ck_assert_msg(strcmp(tu_read(sd, rel), want) == 0, "%s differs from fixture %s:\n%s\n%s",
	              rel, name, tu_read(sd, rel), want);
}

static void expect_mark(const char *uid, uint64_t gen, bool ended, size_t n_ended,
                        const char *const *ended_uids)
{
	struct fence_mark m;
	struct err e = {0};
	ck_assert_msg(agent_fence_read(sd, VOL, &m, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(m.uid, uid);
	ck_assert_uint_eq(m.generation, gen);
	ck_assert(m.ended == ended);
	ck_assert_uint_eq(m.n_ended, n_ended);
	for (size_t i = 0; i < n_ended; i++)
		ck_assert_str_eq(m.ended_uids[i], ended_uids[i]);
	agent_fence_mark_clear(&m);
}

/* Every state a mark goes through, written by the rules and compared with the fixtures. */
START_TEST(test_mark_writes)
{
	struct err e = {0};
	ck_assert_int_eq(agent_fence_check(sd, VOL, U1, 7, FENCE_GRANT, &e), 0);
	expect_file(MARK, "mark_adopted.mark");
	ck_assert_int_eq(
	    agent_fence_check(sd, VOL, U1, UINT64_C(9007199254740992), FENCE_REVOKE, &e), 0);
	expect_file(MARK, "mark_max_generation.mark");
	ck_assert_int_eq(agent_fence_end(sd, VOL, &e), 0);
	expect_file(MARK, "mark_ended.mark");
	ck_assert_int_eq(agent_fence_check(sd, VOL, U3, 1, FENCE_GRANT, &e), 0);
	expect_file(MARK, "mark_second_lifecycle.mark");
	ck_assert_int_eq(agent_fence_end(sd, VOL, &e), 0);
	ck_assert_int_eq(agent_fence_check(sd, VOL, U2, 3, FENCE_GRANT, &e), 0);
	expect_file(MARK, "mark_third_lifecycle.mark");
}
END_TEST

/* The fixtures read back as the records they are; a mark formatted or ordered differently, with
 * a member this agent does not know, reads the same. */
START_TEST(test_mark_reads)
{
	static const char *const one[] = {U1}, *const two[] = {U1, U3};
	tu_write(sd, MARK, fixture("mark_adopted.mark"));
	expect_mark(U1, 7, false, 0, NULL);
	tu_write(sd, MARK, fixture("mark_max_generation.mark"));
	expect_mark(U1, UINT64_C(9007199254740992), false, 0, NULL);
	tu_write(sd, MARK, fixture("mark_ended.mark"));
	expect_mark(U1, UINT64_C(9007199254740992), true, 0, NULL);
	tu_write(sd, MARK, fixture("mark_second_lifecycle.mark"));
	expect_mark(U3, 1, false, 1, one);
	tu_write(sd, MARK, fixture("mark_third_lifecycle.mark"));
	expect_mark(U2, 3, false, 2, two);
	tu_write(sd, MARK, fixture("mark_other_layout.mark"));
	expect_mark(U2, 12, true, 1, one);
}
END_TEST

START_TEST(test_pin_write_and_read)
{
	struct rules_ns_identity odd = {.uuid = "11111111-2222-4333-8444-555555555555",
	                                .nguid = "66666666-2222-4333-8444-555555555555",
	                                .serial = "0123456789abcdef"},
	                         tricky = {.uuid = "ABCDEF01-2222-4333-8444-555555555555",
	                                   .nguid = "66666666-2222-4333-8444-55555555555f",
	                                   .serial = "a \"q\" \\ /~"},
	                         id;
	struct err e = {0};
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U1, NQN, &odd, &e), 0);
	expect_file(PIN, "pin.json");
	ck_assert_int_eq(agent_identity_settle(sd, VOL, U3, NQN, &tricky, &e), 0);
	expect_file(PIN, "pin_escapes.json");
	/* the fixtures read back */
	tu_write(sd, PIN, fixture("pin.json"));
	ck_assert_int_eq(agent_identity_start(sd, VOL, U1, NQN, &id, &e), 0);
	ck_assert(rules_ns_identity_equal(&id, &odd));
	tu_write(sd, PIN, fixture("pin_escapes.json"));
	ck_assert_int_eq(agent_identity_start(sd, VOL, U3, NQN, &id, &e), 0);
	ck_assert(rules_ns_identity_equal(&id, &tricky));
	tu_write(sd, PIN, fixture("pin_other_layout.json"));
	ck_assert_int_eq(agent_identity_start(sd, VOL, U1, NQN, &id, &e), 0);
	ck_assert(rules_ns_identity_equal(&id, &odd));
}
END_TEST

#define NVOL    "storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-abc123"
#define NRECORD "storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json"

static void stage_record(struct node_record *r, const char *access)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->protocol_type, sizeof(r->protocol_type), "nvmeof-tcp");
	snprintf(r->access_type, sizeof(r->access_type), "%s", access);
	snprintf(r->fs_type, sizeof(r->fs_type), "xfs");
	snprintf(r->subsys_nqn, sizeof(r->subsys_nqn), "nqn.2026-01.com.bhyoo.pillar-csi:tank.x");
	snprintf(r->address, sizeof(r->address), "fd00::5");
	snprintf(r->port, sizeof(r->port), "4420");
	snprintf(r->volume_id, sizeof(r->volume_id), NVOL);
	snprintf(
	    r->staging_path, sizeof(r->staging_path),
	    "/var/lib/kubelet/plugins/kubernetes.io/csi/pillar-csi.bhyoo.com/\"q\"/globalmount");
	snprintf(r->namespace_uuid, sizeof(r->namespace_uuid),
	         "11111111-2222-4333-8444-555555555555");
	snprintf(r->namespace_nguid, sizeof(r->namespace_nguid),
	         "66666666-2222-4333-8444-555555555555");
	snprintf(r->staged_at, sizeof(r->staged_at), "2026-12-06T13:00:00Z");
}

static void expect_stage_record(const struct node_record *got, const struct node_record *want)
{
	ck_assert(got->legacy == want->legacy);
	ck_assert_str_eq(got->protocol_type, want->protocol_type);
	ck_assert_str_eq(got->access_type, want->access_type);
	ck_assert_str_eq(got->fs_type, want->fs_type);
	ck_assert_str_eq(got->subsys_nqn, want->subsys_nqn);
	ck_assert_str_eq(got->address, want->address);
	ck_assert_str_eq(got->port, want->port);
	ck_assert_str_eq(got->volume_id, want->volume_id);
	ck_assert_str_eq(got->staging_path, want->staging_path);
	ck_assert_str_eq(got->namespace_uuid, want->namespace_uuid);
	ck_assert_str_eq(got->namespace_nguid, want->namespace_nguid);
	ck_assert_str_eq(got->staged_at, want->staged_at);
}

/* A filesystem record, a block one (no fs_type), and the legacy flat form read as NVMe/TCP. */
START_TEST(test_stage_records)
{
	struct node_record w, r, legacy = {.legacy = true};
	struct err e = {0};
	stage_record(&w, "filesystem");
	ck_assert_msg(node_record_write(sd, &w, &e) == 0, "%s", e.msg);
	expect_file(NRECORD, "stage_filesystem.json");
	ck_assert_msg(node_record_read(sd, NVOL, &r, &e) == 0, "%s", e.msg);
	expect_stage_record(&r, &w);
	stage_record(&w, "block");
	ck_assert_msg(node_record_write(sd, &w, &e) == 0, "%s", e.msg);
	expect_file(NRECORD, "stage_block.json");
	w.fs_type[0] = 0;
	ck_assert_msg(node_record_read(sd, NVOL, &r, &e) == 0, "%s", e.msg);
	expect_stage_record(&r, &w);
	/* the fixtures read back, and the legacy form */
	tu_write(sd, NRECORD, fixture("stage_filesystem.json"));
	stage_record(&w, "filesystem");
	ck_assert_msg(node_record_read(sd, NVOL, &r, &e) == 0, "%s", e.msg);
	expect_stage_record(&r, &w);
	tu_write(sd, NRECORD, fixture("stage_legacy.json"));
	ck_assert_msg(node_record_read(sd, NVOL, &r, &e) == 0, "%s", e.msg);
	snprintf(legacy.protocol_type, sizeof(legacy.protocol_type), "nvmeof-tcp");
	snprintf(legacy.subsys_nqn, sizeof(legacy.subsys_nqn),
	         "nqn.2026-01.com.bhyoo.pillar-csi:old");
	expect_stage_record(&r, &legacy);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("record_files");
	TCase *t = tcase_create("records");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_mark_writes);
	tcase_add_test(t, test_mark_reads);
	tcase_add_test(t, test_pin_write_and_read);
	tcase_add_test(t, test_stage_records);
	suite_add_tcase(s, t);
	return tu_run(s);
}
