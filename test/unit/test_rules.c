/* Unit tests of src/rules: one table per shared rule, with the spec's examples (csi.md §2,
 * nvmet.md §2, agent-api.md §8, crds.md §1 and §12.1). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rules/conditions.h"
#include "rules/mkfs.h"
#include "rules/nqn.h"
#include "rules/size.h"
#include "rules/volid.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- volume IDs (csi.md §2.1) --------------------------------------------------------------- */

START_TEST(test_volid_table)
{
	static const struct {
		const char *id;
		int want;
	} t[] = {
	    {"storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-abc123", 0}, /* the spec's example */
	    {"a/nvmeof-tcp/lvm-lv/data-vg/pvc-1", 0},
	    {"a/nvmeof-tcp/file/fpool/Test_Vol", 0},
	    {"a.b/nvmeof-tcp/zfs-zvol/my.pool:x_y-z/v", 0},
	    {"a/iscsi/zfs-zvol/tank/x", -EPROTONOSUPPORT}, /* well-formed, another protocol */
	    {"a/nvmeof-tcp/zfs-zvol/tank/x/y", -EINVAL},   /* agent volume ID with two "/" */
	    {"a/nvmeof-tcp/zfs-zvol/tank", -EINVAL},
	    {"a/nvmeof-tcp/zfs-zvol/tank/..", -EINVAL},
	    {"../nvmeof-tcp/zfs-zvol/tank/x", -EINVAL},
	    {"a/nvmeof-tcp/lvm-lv//x", -EINVAL},
	    {"a/nvmeof-tcp/zfs-zvol/../x", -EINVAL},
	    {"a/nvmeof-tcp/zfs-zvol/./x", -EINVAL},
	    {"storage-node-1/nvmeof-tcp/zfs-zvol/../../etc", -EINVAL},
	    {"a/nvmeof-tcp/ceph/tank/x", -EINVAL},
	    {"A/nvmeof-tcp/zfs-zvol/tank/x", -EINVAL}, /* agent: an object name */
	    {"a/nvmeof-tcp/zfs-zvol/ta nk/x", -EINVAL},
	    {"a/nvmeof-tcp/zfs-zvol/ta+nk/x", -EINVAL},
	    {"a/nvmeof-tcp/zfs-zvol/tank/a.b", -EINVAL}, /* name: no "." */
	    {"a/nvmeof-tcp/zfs-zvol/tank/-a", -EINVAL},
	    {"a/NVMEOF/zfs-zvol/tank/x", -EINVAL},
	    {"/nvmeof-tcp/zfs-zvol/tank/x", -EINVAL},
	    {"", -EINVAL},
	    {NULL, -EINVAL},
	};
	for (size_t i = 0; i < N(t); i++) {
		struct rules_volid v;
		ck_assert_msg(rules_volid_parse(t[i].id, &v) == t[i].want, "%s: want %d", t[i].id,
		              t[i].want);
	}
	struct rules_volid v;
	ck_assert_int_eq(
	    rules_volid_parse("storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-abc123", &v), 0);
	ck_assert_str_eq(v.agent, "storage-node-1");
	ck_assert_str_eq(v.protocol, "nvmeof-tcp");
	ck_assert_str_eq(v.backend, "zfs-zvol");
	ck_assert_str_eq(v.pool, "tank");
	ck_assert_str_eq(v.name, "pvc-abc123");
	ck_assert_str_eq(v.agent_volume_id, "tank/pvc-abc123");
	ck_assert_int_eq(rules_volid_parse("a/iscsi/zfs-zvol/tank/x", &v), -EPROTONOSUPPORT);
	ck_assert_str_eq(v.protocol, "iscsi");
	/* A name of 128 characters is valid, 129 is not. */
	char id[300], name[130];
	memset(name, 'n', 129);
	name[128] = '\0';
	snprintf(id, sizeof(id), "a/nvmeof-tcp/zfs-zvol/tank/%s", name);
	ck_assert_int_eq(rules_volid_parse(id, &v), 0);
	name[128] = 'n';
	name[129] = '\0';
	snprintf(id, sizeof(id), "a/nvmeof-tcp/zfs-zvol/tank/%s", name);
	ck_assert_int_eq(rules_volid_parse(id, &v), -EINVAL);
}
END_TEST

START_TEST(test_agent_volid_table)
{
	static const struct {
		const char *id;
		int want;
	} t[] = {{"tank/pvc-abc123", 0}, {"data-vg/pvc-1", 0}, {"my.pool:x/Test_Vol", 0},
	         {"tank", -EINVAL},      {"/x", -EINVAL},      {"tank/", -EINVAL},
	         {"tank/x/y", -EINVAL},  {"../x", -EINVAL},    {"./x", -EINVAL},
	         {"tank/..", -EINVAL},   {"tank/.", -EINVAL},  {"ta nk/x", -EINVAL},
	         {"tank/a.b", -EINVAL},  {"", -EINVAL},        {NULL, -EINVAL}};
	for (size_t i = 0; i < N(t); i++) {
		char pool[64], name[130];
		ck_assert_msg(rules_agent_volid_parse(t[i].id, pool, sizeof(pool), name,
		                                      sizeof(name)) == t[i].want,
		              "%s", t[i].id ? t[i].id : "NULL");
	}
	char pool[64], name[130];
	ck_assert_int_eq(
	    rules_agent_volid_parse("tank/pvc-1", pool, sizeof(pool), name, sizeof(name)), 0);
	ck_assert_str_eq(pool, "tank");
	ck_assert_str_eq(name, "pvc-1");
}
END_TEST

/* rules_volid_make: every accepted ID parses back to the same parts; every part that breaks the
 * grammar is refused, with the text kept for the message. */
START_TEST(test_volid_make_table)
{
	static const struct {
		const char *agent, *backend, *pool, *name;
		int want;
	} t[] = {
	    {"storage-1", "zfs-zvol", "tank", "pvc-1", 0},
	    {"storage-1", "lvm-lv", "vg_0", "Vol_A-1", 0},
	    {"a.b", "file", "p:1", "x", 0},
	    {"Storage", "zfs-zvol", "tank", "pvc-1", -EINVAL}, /* agent not an object name */
	    {"", "zfs-zvol", "tank", "pvc-1", -EINVAL},        /* empty agent */
	    {"s", "zfs", "tank", "pvc-1", -EINVAL},            /* unknown backend */
	    {"s", "zfs-zvol", "tank/sub", "pvc-1", -EINVAL},   /* '/' in the pool */
	    {"s", "zfs-zvol", "..", "pvc-1", -EINVAL},         /* pool ".." */
	    {"s", "zfs-zvol", "tank", "-bad", -EINVAL},        /* volume name */
	    {"s", "zfs-zvol", "tank", "a/b", -EINVAL},         /* '/' in the name */
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char id[RULES_VOLID_CAP];
		struct rules_volid v, back;
		int r = rules_volid_make(t[i].agent, t[i].backend, t[i].pool, t[i].name, id,
		                         sizeof(id), &v);
		ck_assert_msg(r == t[i].want, "%s: got %d", id, r);
		if (r == 0) {
			ck_assert_int_eq(rules_volid_parse(id, &back), 0);
			ck_assert_str_eq(back.agent_volume_id, v.agent_volume_id);
			ck_assert_str_eq(back.agent, t[i].agent);
			ck_assert_str_eq(back.backend, t[i].backend);
		}
	}
	char id[RULES_VOLID_CAP];
	struct rules_volid v;
	ck_assert_int_eq(rules_volid_make("s", "zfs-zvol", "t", "n", id, sizeof(id), &v), 0);
	ck_assert_str_eq(id, "s/nvmeof-tcp/zfs-zvol/t/n");
	ck_assert_str_eq(v.agent_volume_id, "t/n");
	ck_assert_int_eq(rules_volid_make("s", "zfs-zvol", "t", "n", id, 10, &v), -EINVAL);
}
END_TEST

/* ---- volume names and PillarVolumeState names (csi.md §2.2) ---------------------------------- */

START_TEST(test_volname_table)
{
	static const struct {
		const char *name;
		bool valid;
	} t[] = {{"pvc-0b6f", true}, {"A_b-1", true}, {"a", true},    {"9", true},
	         {"-a", false},      {"_a", false},   {"a.b", false}, {"a/b", false},
	         {"", false},        {NULL, false},   {"a b", false}};
	for (size_t i = 0; i < N(t); i++)
		ck_assert_msg(rules_volname_valid(t[i].name) == t[i].valid, "%s",
		              t[i].name ? t[i].name : "NULL");
}
END_TEST

START_TEST(test_pvst_name_table)
{
	static const struct {
		const char *csi, *pvst;
	} t[] = {
	    {"pvc-0b6f", "pvc-0b6f"},
	    {"pvc-0b6f4e3c-9a51-4f0e-8d7e-2c1f5a9b7d11",
	     "pvc-0b6f4e3c-9a51-4f0e-8d7e-2c1f5a9b7d11"},
	    {"Test_Vol", "pillar-ae2e1779d967e10043470a56b5d9487a"},
	    {"pvc_1", "pillar-25cf4564a3557b73f7d5379c19b2fc57"},
	    {"A", "pillar-559aead08264d5795d3909718cdd05ab"},
	};
	for (size_t i = 0; i < N(t); i++) {
		char out[RULES_PVST_NAME_CAP];
		rules_pvst_name(t[i].csi, out, sizeof(out));
		ck_assert_str_eq(out, t[i].pvst);
	}
}
END_TEST

/* ---- object names (crds.md §1) --------------------------------------------------------------- */

START_TEST(test_objname_table)
{
	char longest[260];
	memset(longest, 'a', sizeof(longest));
	longest[253] = '\0';
	static const struct {
		const char *name;
		enum rules_objname want;
	} t[] = {{"storage-node-1", RULES_OBJNAME_OK},
	         {"a.b", RULES_OBJNAME_OK},
	         {"0", RULES_OBJNAME_OK},
	         {"", RULES_OBJNAME_EMPTY},
	         {NULL, RULES_OBJNAME_EMPTY},
	         {"A", RULES_OBJNAME_BAD_CHAR},
	         {"-a", RULES_OBJNAME_BAD_CHAR},
	         {"a-", RULES_OBJNAME_BAD_CHAR},
	         {".a", RULES_OBJNAME_BAD_CHAR},
	         {"a_b", RULES_OBJNAME_BAD_CHAR},
	         {"a..b", RULES_OBJNAME_DOT_DOT}};
	for (size_t i = 0; i < N(t); i++)
		ck_assert_msg(rules_objname_check(t[i].name) == t[i].want, "%s",
		              t[i].name ? t[i].name : "NULL");
	ck_assert_int_eq(rules_objname_check(longest), RULES_OBJNAME_OK);
	longest[253] = 'a';
	longest[254] = '\0';
	ck_assert_int_eq(rules_objname_check(longest), RULES_OBJNAME_TOO_LONG);
}
END_TEST

/* ---- NQNs and namespace identity (nvmet.md §2, agent-api.md §8) ----------------------------- */

#define NQN1  "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-abc123"
#define NQN2  "nqn.2026-01.com.bhyoo.pillar-csi:data-vg.pvc-0b6f4e3c-9a51-4f0e-8d7e-2c1f5a9b7d11"
#define HOSTA "nqn.2014-08.org.nvmexpress:uuid:aaaa"

START_TEST(test_nqn_table)
{
	static const struct {
		const char *volume, *nqn;
	} t[] = {{"tank/pvc-abc123", NQN1},
	         {"data-vg/pvc-0b6f4e3c-9a51-4f0e-8d7e-2c1f5a9b7d11", NQN2},
	         {"my.pool/pvc-1", RULES_NQN_PREFIX "my.pool.pvc-1"}}; /* split at the last "." */
	for (size_t i = 0; i < N(t); i++) {
		char out[256];
		struct err e = {0};
		ck_assert_int_eq(rules_nqn_of_volume(t[i].volume, out, sizeof(out), &e), 0);
		ck_assert_str_eq(out, t[i].nqn);
		ck_assert_int_eq(rules_volume_of_nqn(t[i].nqn, out, sizeof(out)), 0);
		ck_assert_str_eq(out, t[i].volume);
	}
	char out[256];
	struct err e = {0};
	ck_assert_int_eq(rules_volume_of_nqn("nqn.2014-08.org.other:x.y", out, sizeof(out)),
	                 -EINVAL);
	ck_assert_int_eq(rules_volume_of_nqn(RULES_NQN_PREFIX "nodot", out, sizeof(out)), -EINVAL);
	ck_assert_int_eq(rules_nqn_of_volume("noslash", out, sizeof(out), &e), -EINVAL);
	ck_assert_str_eq(e.msg, "invalid volume id \"noslash\"");
	char longid[260];
	memset(longid, 'a', sizeof(longid));
	longid[3] = '/';
	longid[200] = '\0';
	ck_assert_int_eq(rules_nqn_of_volume(longid, out, sizeof(out), &e), -ENAMETOOLONG);
	char want[400];
	snprintf(want, sizeof(want), "NQN for volume \"%s\" is 233 bytes; the limit is 223",
	         longid);
	ck_assert_str_eq(e.msg, want);
}
END_TEST

START_TEST(test_identity_table)
{
	static const struct {
		const char *nqn, *uuid, *nguid, *serial;
	} t[] = {{NQN1, "0b661a8a-9925-5917-b52c-a5719096bc2b",
	          "2018eb84-7e27-542a-9b2a-11dd7855c3b3", "f9f732c8ef48c956e9ef"},
	         {NQN2, "caffb940-59ec-5121-bc15-1ec5c75dd90f",
	          "1f5d6109-076a-5a75-afa3-b0258b98988a", "8b2d8bcc8f6ffbfbc1f1"}};
	for (size_t i = 0; i < N(t); i++) {
		struct rules_ns_identity id, upper;
		rules_ns_identity_derive(t[i].nqn, &id);
		ck_assert_str_eq(id.uuid, t[i].uuid);
		ck_assert_str_eq(id.nguid, t[i].nguid);
		ck_assert_str_eq(id.serial, t[i].serial);
		upper = id;
		upper.uuid[0] = (char)(upper.uuid[0] == 'c' ? 'C' : upper.uuid[0]);
		ck_assert(rules_ns_identity_equal(&id, &upper));
		upper.serial[0] = upper.serial[0] == '0' ? '1' : '0';
		ck_assert(!rules_ns_identity_equal(&id, &upper));
	}
}
END_TEST

START_TEST(test_hostnqn_table)
{
	static const struct {
		const char *nqn;
		int want;
	} t[] = {{HOSTA, 0},
	         {"nqn.x", 0},
	         {"host1", -EINVAL},
	         {"nqn.", -EINVAL},
	         {"nqn.x/../../etc", -EINVAL},
	         {"nqn.a b", -EINVAL},
	         {"nqn.a\x7f", -EINVAL}};
	for (size_t i = 0; i < N(t); i++)
		ck_assert_msg(rules_hostnqn_check(t[i].nqn, NULL) == t[i].want, "%s", t[i].nqn);
	char longest[230];
	memcpy(longest, "nqn.", 4);
	memset(longest + 4, 'x', sizeof(longest) - 4);
	longest[223] = '\0';
	ck_assert_int_eq(rules_hostnqn_check(longest, NULL), 0);
	longest[223] = 'x';
	longest[224] = '\0';
	struct err e = {0};
	ck_assert_int_eq(rules_hostnqn_check(longest, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "at most 223 bytes"));
}
END_TEST

/* ---- mkfs options (crds.md §12.1) ------------------------------------------------------------ */

#define END ((const char *)"")

/* Runs the allowlist over a list ended by END; returns the index named, or -1 when allowed. */
static int mkfs(const char *fs, const char *const *list, struct err *e)
{
	size_t n = 0, bad;
	while (list[n] != END)
		n++;
	int r = rules_mkfs_check(fs, list, n, &bad, e);
	return r == 0 ? -1 : (int)bad;
}

/* crds.md §3.3, §4.2, §5.2, §6.2, §7.3: every condition type and reason the controller writes,
 * spelled as the spec's tables spell them, and CamelCase (crds.md §1). */
START_TEST(test_conditions_table)
{
	static const struct {
		const char *got, *spec;
	} tab[] = {
	    {RULES_COND_NODE_EXISTS, "NodeExists"},
	    {RULES_COND_AGENT_CONNECTED, "AgentConnected"},
	    {RULES_COND_EXPORTS_READY, "ExportsReady"},
	    {RULES_COND_READY, "Ready"},
	    {RULES_REASON_NODE_FOUND, "NodeFound"},
	    {RULES_REASON_EXTERNAL_MODE, "ExternalMode"},
	    {RULES_REASON_NODE_NOT_FOUND, "NodeNotFound"},
	    {RULES_REASON_ADDRESS_NOT_RESOLVED, "AddressNotResolved"},
	    {RULES_REASON_NODE_LOOKUP_ERROR, "NodeLookupError"},
	    {RULES_REASON_MISSING_SPEC, "MissingSpec"},
	    {RULES_REASON_AUTHENTICATED, "Authenticated"},
	    {RULES_REASON_DIALED, "Dialed"},
	    {RULES_REASON_AGENT_DEGRADED, "AgentDegraded"},
	    {RULES_REASON_TLS_HANDSHAKE_FAILED, "TLSHandshakeFailed"},
	    {RULES_REASON_HEALTH_CHECK_FAILED, "HealthCheckFailed"},
	    {RULES_REASON_DIALER_NOT_CONFIGURED, "DialerNotConfigured"},
	    {RULES_REASON_EXPORTS_SERVING, "ExportsServing"},
	    {RULES_REASON_EXPORT_RESTORE_PENDING, "ExportRestorePending"},
	    {RULES_REASON_EXPORT_RESTORE_FAILED, "ExportRestoreFailed"},
	    {RULES_REASON_AGENT_NOT_CONNECTED, "AgentNotConnected"},
	    {RULES_REASON_AGENT_CONNECTED, "AgentConnected"},
	    {RULES_REASON_DELETION_BLOCKED, "DeletionBlocked"},
	    {RULES_COND_NODE_TOPOLOGY, "NodeTopology"},
	    {RULES_REASON_PROTOCOL_READY, "ProtocolReady"},
	    {RULES_REASON_NO_NODE_REGISTERED, "NoNodeRegistered"},
	    {RULES_REASON_NVME_TCP_NOT_LOADED, "NvmeTcpNotLoaded"},
	    {RULES_REASON_NODES_REACHABLE, "NodesReachable"},
	    {RULES_COND_AGENT_READY, "AgentReady"},
	    {RULES_COND_POOL_DISCOVERED, "PoolDiscovered"},
	    {RULES_COND_BACKEND_SUPPORTED, "BackendSupported"},
	    {RULES_REASON_AGENT_READY, "AgentReady"},
	    {RULES_REASON_AGENT_NOT_FOUND, "AgentNotFound"},
	    {RULES_REASON_AGENT_NOT_READY, "AgentNotReady"},
	    {RULES_REASON_POOL_FOUND, "PoolFound"},
	    {RULES_REASON_WAITING_FOR_AGENT_DATA, "WaitingForAgentData"},
	    {RULES_REASON_POOL_NOT_FOUND, "PoolNotFound"},
	    {RULES_REASON_BACKEND_LAYOUT_MISMATCH, "BackendLayoutMismatch"},
	    {RULES_REASON_BACKEND_SUPPORTED, "BackendSupported"},
	    {RULES_REASON_BACKEND_NOT_SUPPORTED, "BackendNotSupported"},
	    {RULES_REASON_STORE_READY, "StoreReady"},
	    {RULES_COND_STORE_READY, "StoreReady"},
	    {RULES_COND_PROTOCOL_VALID, "ProtocolValid"},
	    {RULES_COND_COMPATIBLE, "Compatible"},
	    {RULES_COND_STORAGE_CLASS_CREATED, "StorageClassCreated"},
	    {RULES_REASON_POOL_NOT_READY, "PoolNotReady"},
	    {RULES_REASON_PROTOCOL_VALID, "ProtocolValid"},
	    {RULES_REASON_PROTOCOL_NOT_FOUND, "ProtocolNotFound"},
	    {RULES_REASON_COMPATIBLE, "Compatible"},
	    {RULES_REASON_BACKEND_OVERRIDE_MISMATCH, "BackendOverrideMismatch"},
	    {RULES_REASON_PROTOCOL_OVERRIDE_MISMATCH, "ProtocolOverrideMismatch"},
	    {RULES_REASON_THIN_POOL_REQUIRED, "ThinPoolRequired"},
	    {RULES_REASON_INVALID_FILESYSTEM, "InvalidFilesystem"},
	    {RULES_REASON_WAITING_FOR_STORE, "WaitingForStore"},
	    {RULES_REASON_STORAGE_CLASS_CREATED, "StorageClassCreated"},
	    {RULES_REASON_STORAGE_CLASS_ERROR, "StorageClassError"},
	    {RULES_REASON_STORAGE_CLASS_CONFLICT, "StorageClassConflict"},
	    {RULES_REASON_STORAGE_CLASS_AVAILABLE, "StorageClassAvailable"},
	    {RULES_COND_BACKEND_CREATED, "BackendCreated"},
	    {RULES_COND_EXPORT_CREATED, "ExportCreated"},
	    {RULES_COND_EXPORT_RECONCILED, "ExportReconciled"},
	    {RULES_REASON_BACKEND_CREATED, "BackendCreated"},
	    {RULES_REASON_BACKEND_PENDING, "BackendPending"},
	    {RULES_REASON_EXPORT_CREATED, "ExportCreated"},
	    {RULES_REASON_EXPORT_PENDING, "ExportPending"},
	    {RULES_REASON_VOLUME_READY, "VolumeReady"},
	    {RULES_REASON_PROVISIONING, "Provisioning"},
	    {RULES_REASON_CREATE_PARTIAL, "CreatePartial"},
	    {RULES_REASON_DELETING, "Deleting"},
	    {RULES_REASON_RECONCILED, "Reconciled"},
	    {RULES_REASON_EXPORT_SPEC_MISSING, "ExportSpecMissing"},
	    {RULES_REASON_AGENT_UNAVAILABLE, "AgentUnavailable"},
	    {RULES_REASON_RECONCILE_FAILED, "ReconcileFailed"},
	    {RULES_REASON_STALE_GENERATION, "StaleGeneration"},
	};
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		ck_assert_str_eq(tab[i].got, tab[i].spec);
		ck_assert_msg(tab[i].got[0] >= 'A' && tab[i].got[0] <= 'Z', "%s", tab[i].got);
		ck_assert_msg(strspn(tab[i].got,
		                     "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                     "0123456789") == strlen(tab[i].got),
		              "%s", tab[i].got);
	}
}
END_TEST

START_TEST(test_mkfs_table)
{
	static const struct {
		const char *fs;
		const char *list[6];
		int bad; /* index named, -1 allowed */
	} t[] = {
	    {"ext4", {"-L", "data", END}, -1},
	    {"ext4", {"-Ldata", "-q", "-j", END}, -1},
	    {"ext4", {"-E", "stride=4,stripe-width=8,nodiscard", END}, -1},
	    {"ext4", {"-Elazy_itable_init=0", END}, -1},
	    {"ext4", {"-Jsize=64", END}, -1},
	    {"xfs", {"-d", "su=64k,sw=4", "-m", "crc=1", "-K", END}, -1},
	    {"xfs", {"-i", "size=512", "-l", "lazy-count=1", END}, -1},
	    {"xfs", {"-d", "noalign", END}, -1},
	    {"ext4", {"-Fq", END}, 0}, /* clustered */
	    {"ext4", {"-qj", END}, 0}, /* flag-only with a suffix */
	    {"ext4", {"-c", END}, 0},
	    {"ext4", {"-l", "x", END}, 0},
	    {"ext4", {"--lazy", END}, 0},
	    {"ext4", {"data", END}, 0}, /* positional */
	    {"ext4", {"-d", "x", END}, 0},
	    {"ext4", {"-J", "device=/dev/sdb", END}, 1},
	    {"ext4", {"-E", "foo=1", END}, 1},
	    {"ext4", {"-E", "stride=", END}, 1}, /* key= needs a value */
	    {"ext4", {"-E", "discard=1", END}, 1},
	    {"ext4", {"-E", "stride=1,,resize=2", END}, 1},
	    {"ext4", {"-L", "-x", END}, 1}, /* values must not start with - */
	    {"ext4", {"-L", END}, 0},       /* value missing */
	    {"ext4", {"-z", "u", END}, 0},
	    {"ext4", {"-S", END}, 0},
	    {"ext4", {"-n", END}, 0},
	    {"ext4", {"-F", END}, 0},
	    {"ext4", {"-L", "ok", "-E", "stride=1,bogus", END}, 3},
	    {"xfs", {"-d", "file=1", END}, 1},
	    {"xfs", {"-c", "options=x", END}, 0},
	    {"xfs", {"-f", END}, 0},
	    {"xfs", {"-l", "logdev=/x", END}, 1},
	    {"xfs", {"-r", "rtdev=/x", END}, 0},
	    {"xfs", {"-p", "x", END}, 0},
	    {"xfs", {"-N", END}, 0},
	    {"xfs", {"-j", END}, 0},
	    {"xfs", {"-b", "size=", END}, 1},
	};
	for (size_t i = 0; i < N(t); i++) {
		struct err e = {0};
		ck_assert_msg(mkfs(t[i].fs, t[i].list, &e) == t[i].bad, "%s case %zu: want %d",
		              t[i].fs, i, t[i].bad);
		if (t[i].bad >= 0) {
			char want[256];
			snprintf(want, sizeof(want),
			         "filesystem.mkfsOptions: mkfs option \"%s\" is not allowed for %s",
			         t[i].list[t[i].bad], t[i].fs);
			ck_assert_str_eq(e.msg, want);
		}
	}
}
END_TEST

START_TEST(test_mkfs_non_strings_and_fstypes)
{
	const char *flag_null[] = {NULL, "-q"}, *value_null[] = {"-L", NULL};
	size_t bad;
	struct err e = {0};
	ck_assert_int_eq(rules_mkfs_check("ext4", flag_null, 2, &bad, &e), -EINVAL);
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(rules_mkfs_check("ext4", value_null, 2, &bad, &e), -EINVAL);
	ck_assert_uint_eq(bad, 0); /* the flag whose value is not a string is named */
	ck_assert_int_eq(rules_mkfs_check("btrfs", NULL, 0, &bad, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "filesystem.fsType \"btrfs\" is not supported");
	ck_assert_int_eq(rules_mkfs_check("xfs", NULL, 0, &bad, &e), 0);
	ck_assert(rules_fstype_supported("ext4"));
	ck_assert(rules_fstype_supported("xfs"));
	ck_assert(!rules_fstype_supported("ext3"));
	ck_assert(!rules_fstype_supported(NULL));
	ck_assert_int_eq(rules_mkfs_refuse(&e, "1", "xfs"), -EINVAL);
	ck_assert_str_eq(e.msg, "filesystem.mkfsOptions: mkfs option \"1\" is not allowed for xfs");
}
END_TEST

/* Sizes round up to their granule with checked arithmetic; beyond RULES_CAPACITY_MAX nothing
 * is rounded. */
START_TEST(test_size_round_up)
{
	int64_t out = -1;
	char buf[200];
	ck_assert_int_eq(rules_size_round_up(1, RULES_SIZE_MIB, &out), 0);
	ck_assert_int_eq(out, RULES_SIZE_MIB);
	ck_assert_int_eq(rules_size_round_up(RULES_SIZE_MIB, RULES_SIZE_MIB, &out), 0);
	ck_assert_int_eq(out, RULES_SIZE_MIB);
	ck_assert_int_eq(rules_size_round_up(1000000000, 8192, &out), 0);
	ck_assert_int_eq(out, 1000005632);
	ck_assert_int_eq(rules_size_round_up(RULES_CAPACITY_MAX, 1LL << 30, &out), 0);
	ck_assert_int_eq(out, RULES_CAPACITY_MAX);
	ck_assert_int_eq(rules_size_round_up(RULES_CAPACITY_MAX - 5, 4LL << 20, &out), 0);
	ck_assert_int_eq(out, RULES_CAPACITY_MAX);
	ck_assert_int_eq(rules_size_round_up(7, 0, &out), 0);
	ck_assert_int_eq(out, 7);
	out = 42;
	ck_assert_int_eq(rules_size_round_up(INT64_MAX, RULES_SIZE_MIB, &out), -ERANGE);
	ck_assert_int_eq(rules_size_round_up(RULES_CAPACITY_MAX + 1, 1, &out), -ERANGE);
	ck_assert_int_eq(rules_size_round_up(0, RULES_SIZE_MIB, &out), -ERANGE);
	ck_assert_int_eq(rules_size_round_up(-1, RULES_SIZE_MIB, &out), -ERANGE);
	ck_assert_int_eq(out, 42);
	/* a granule that does not divide the bound (not a power of two, or above 1 GiB) */
	ck_assert_int_eq(rules_size_largest(3), RULES_CAPACITY_MAX / 3 * 3);
	ck_assert_int_eq(rules_size_round_up(rules_size_largest(3), 3, &out), 0);
	ck_assert_int_eq(rules_size_round_up(rules_size_largest(3) + 1, 3, &out), -ERANGE);
	ck_assert_int_eq(rules_size_largest(INT64_MAX), 0);
	ck_assert_int_eq(rules_size_round_up(1, INT64_MAX, &out), -ERANGE);
	ck_assert_str_eq(rules_size_refusal(INT64_MAX, RULES_SIZE_MIB, buf, sizeof(buf)),
	                 "capacity 9223372036854775807 bytes cannot be rounded up to a multiple of "
	                 "1048576 bytes; the largest size accepted is 9223372035781033984 bytes");
	ck_assert_str_eq(rules_size_refusal(INT64_MAX, 0, buf, sizeof(buf)),
	                 "capacity 9223372036854775807 bytes exceeds the largest size accepted, "
	                 "9223372035781033984 bytes");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rules");
	TCase *t = tcase_create("volid");
	tcase_add_test(t, test_volid_table);
	tcase_add_test(t, test_size_round_up);
	tcase_add_test(t, test_agent_volid_table);
	tcase_add_test(t, test_volid_make_table);
	tcase_add_test(t, test_volname_table);
	tcase_add_test(t, test_pvst_name_table);
	tcase_add_test(t, test_objname_table);
	suite_add_tcase(s, t);
	t = tcase_create("nqn");
	tcase_add_test(t, test_nqn_table);
	tcase_add_test(t, test_identity_table);
	tcase_add_test(t, test_hostnqn_table);
	suite_add_tcase(s, t);
	t = tcase_create("mkfs");
	tcase_add_test(t, test_mkfs_table);
	tcase_add_test(t, test_mkfs_non_strings_and_fstypes);
	tcase_add_test(t, test_conditions_table);
	suite_add_tcase(s, t);
	return tu_run(s);
}
