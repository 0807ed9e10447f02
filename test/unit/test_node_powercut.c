/* Power cuts at each durable write of the node plugin (issue 30): NodeStageVolume (with and
 * without DH-HMAC-CHAP keys to make), NodeUnstageVolume, NodePublishVolume,
 * NodeUnpublishVolume, and a first start (host NQN and ID, state directory) followed by a
 * NodeStageVolume.
 *
 * The node process is a child of the test: it starts a node on the fixture's roots, arms the
 * fault point of base/powercut.c (PILLAR_TEST_POWERCUT) and makes one call as kubelet makes
 * it.  Round N kills it just before its N-th fsync, N = 1, 2, ... until it survives the call;
 * the surviving round is a cut after the answer.  So a change of how many fsyncs a call makes
 * changes the number of rounds, never the verdicts.  Then the machine boots again:
 *   - the machine's directories (the fixture's root, etc, etc/nvme, the state directory) hold
 *     what the fault point kept as durable at the cut (else what they held before the call); a
 *     directory made during the call whose name no durable copy of its parent holds is gone;
 *   - the kernel has no controller, namespace device or mount any more;
 *   - a new node starts on what is left.
 * Then an acknowledged call's effect is there (a stage record after NodeStageVolume, none after
 * NodeUnstageVolume, the host NQN the connect used), and kubelet's calls after a reboot
 * converge: for a pod that still runs kubelet stages and publishes the volume again with the
 * same requests (MountDevice, SetUp); for a pod that is gone it unpublishes and unstages what
 * it reconstructed from its own directories, each call retried with the same request until it
 * answers OK.  The volume staged that way is whole (record, mount, controller) and unstages.
 * Nothing else changed: the host NQN and ID, another volume's record. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "model/dhchap_file.h"
#include "node/internal.h"
#include "node/record.h"
#include "node/service.h"
#include "node_fixture.h"
#include "testutil.h"

#define RECORD     "storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json"
#define OTHER_VOL  "storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-other"
#define OTHER      "storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-other.json"
#define HOSTNQN    "nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1"
#define ROUNDS_MAX 16
#define N_MACHINE  4

struct cut {
	struct env v;
	struct sreq s;
	char scratch[4200], control[4300], acked[4300];
	char machine[N_MACHINE][4200]; /* the machine's directories, each after its parent */
	char other[8400];              /* the other volume's record as planted */
	long round;
};

/* One kind of round: what is there before the call, the call (in the node process), and
 * whether kubelet still wants the volume on the node after the reboot. */
struct call {
	const char *name;
	bool first_start; /* the cut is armed before the node starts on an empty etc/nvme */
	bool dhchap;      /* the node runs with --dhchap: a stage makes its keys */
	bool staged, published, pod_runs;
	int (*fn)(struct cut *c, struct grpc_status *st);
};

/* ---- kubelet's requests ------------------------------------------------------------------- */

static int do_stage(struct cut *c, struct grpc_status *st)
{
	return stage(&c->v, &c->s, st);
}

static int do_unstage(struct cut *c, struct grpc_status *st)
{
	Csi__V1__NodeUnstageVolumeRequest r = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeResponse resp = CSI__V1__NODE_UNSTAGE_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.staging_target_path = c->v.staging;
	memset(st, 0, sizeof(*st));
	return node_unstage_volume(c->v.n, &r, &resp, st);
}

static int do_publish(struct cut *c, struct grpc_status *st)
{
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodePublishVolumeResponse resp = CSI__V1__NODE_PUBLISH_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.staging_target_path = c->v.staging;
	r.target_path = c->v.target;
	r.volume_capability = &c->s.cap;
	memset(st, 0, sizeof(*st));
	return node_publish_volume(c->v.n, &r, &resp, st);
}

static int do_unpublish(struct cut *c, struct grpc_status *st)
{
	Csi__V1__NodeUnpublishVolumeRequest r = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnpublishVolumeResponse resp = CSI__V1__NODE_UNPUBLISH_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.target_path = c->v.target;
	memset(st, 0, sizeof(*st));
	return node_unpublish_volume(c->v.n, &r, &resp, st);
}

/* kubelet retries a call with the same request until it answers OK (its operation executor's
 * backoff); the fakes answer at once, so a few tries are plenty. */
static void until_ok(struct cut *c, const char *what,
                     int (*fn)(struct cut *c, struct grpc_status *st))
{
	struct grpc_status st;
	int code = -1;
	for (int i = 0; i < 3 && code != GRPC_OK; i++)
		code = fn(c, &st);
	ck_assert_msg(code == GRPC_OK, "round %ld: kubelet's %s after the reboot: %d %s", c->round,
	              what, code, st.msg);
}

/* ---- the machine: its directories, their durable copies, the reboot ------------------------ */

static bool is_dir(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* <control>.<kind>/<path with '/' as '!'>: the fault point's naming of a directory's copy */
static void copy_path(const struct cut *c, const char *kind, const char *path, char *out,
                      size_t cap)
{
	int k = snprintf(out, cap, "%s.%s/", c->control, kind);
	ck_assert(k > 0 && (size_t)k < cap);
	for (const char *p = path; *p; p++) {
		ck_assert((size_t)k + 1 < cap);
		out[k++] = *p == '/' ? '!' : *p;
	}
	out[k] = '\0';
}

static char *slurp(const char *p, size_t *len)
{
	FILE *f = fopen(p, "rb");
	ck_assert_msg(f != NULL, "open %s: %s", p, strerror(errno));
	char *buf = malloc(1 << 16);
	ck_assert_ptr_nonnull(buf);
	*len = fread(buf, 1, 1 << 16, f);
	fclose(f);
	return buf;
}

static void put(const char *p, const char *data, size_t len)
{
	FILE *f = fopen(p, "wb");
	ck_assert_msg(f != NULL, "open %s: %s", p, strerror(errno));
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static void rm_rf(const char *p)
{
	char cmd[9000];
	ck_assert(snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p) < (int)sizeof(cmd));
	ck_assert_int_eq(system(cmd), 0);
}

/* The copy of the machine's directories before the call (what the call had not made durable
 * goes back to this). */
static void keep_baseline(struct cut *c)
{
	char base[4300], to[8400], from[8400];
	ck_assert(snprintf(base, sizeof(base), "%s.baseline", c->control) < (int)sizeof(base));
	rm_rf(base);
	ck_assert_int_eq(mkdir(base, 0700), 0);
	for (int i = 0; i < N_MACHINE; i++) {
		char dest[4300];
		if (!is_dir(c->machine[i]))
			continue;
		copy_path(c, "baseline", c->machine[i], dest, sizeof(dest));
		ck_assert_int_eq(mkdir(dest, 0700), 0);
		DIR *d = opendir(c->machine[i]);
		struct dirent *de;
		while ((de = readdir(d)) != NULL) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			snprintf(from, sizeof(from), "%s/%s", c->machine[i], de->d_name);
			snprintf(to, sizeof(to), "%s/%s", dest, de->d_name);
			if (is_dir(from)) {
				ck_assert_int_eq(mkdir(to, 0700), 0);
			} else if (is_file(from)) {
				size_t n;
				char *data = slurp(from, &n);
				put(to, data, n);
				free(data);
			}
		}
		closedir(d);
	}
	ck_assert(snprintf(base, sizeof(base), "%s.durable", c->control) < (int)sizeof(base));
	rm_rf(base);
}

/* dir back to the copy src: entries src does not name go (a subdirectory with its content),
 * files take src's content. */
static void restore_dir(const char *dir, const char *src)
{
	char p[8400], q[8400];
	DIR *d = opendir(dir);
	struct dirent *de;
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		snprintf(q, sizeof(q), "%s/%s", src, de->d_name);
		if (is_dir(p) && !is_dir(q))
			rm_rf(p);
		else if (is_file(p) && !is_file(q))
			ck_assert_int_eq(unlink(p), 0);
	}
	closedir(d);
	d = opendir(src);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL) {
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		snprintf(q, sizeof(q), "%s/%s", src, de->d_name);
		if (!is_file(q))
			continue;
		size_t n;
		char *data = slurp(q, &n);
		put(p, data, n);
		free(data);
	}
	closedir(d);
}

/* The power comes back: the machine's directories hold what was durable, the kernel has
 * forgotten its controllers, namespaces and mounts. */
static void reboot(struct cut *c)
{
	char dur[4300], base[4300];
	for (int i = 0; i < N_MACHINE; i++) {
		if (!is_dir(c->machine[i]))
			continue; /* gone with its parent's entry */
		copy_path(c, "durable", c->machine[i], dur, sizeof(dur));
		copy_path(c, "baseline", c->machine[i], base, sizeof(base));
		if (is_dir(dur)) {
			restore_dir(c->machine[i], dur);
		} else if (is_dir(base)) {
			restore_dir(c->machine[i], base);
		} else { /* made during the call and named durably in its parent, never fsynced
		          * itself: no entry of it is durable */
			struct err e = {0};
			ck_assert_int_eq(file_mkdir_p(dur, 0700, &e), 0);
			restore_dir(c->machine[i], dur);
		}
	}
	fk_rm(c->v.sys, "class/nvme");
	fk_rm(c->v.sys, "class/nvme-subsystem");
	fk_rm(c->v.sys, "block");
	tu_write(c->v.root, "proc/self/mountinfo", "");
	DIR *d = opendir(c->v.dev);
	struct dirent *de;
	char p[8400];
	while (d && (de = readdir(d)) != NULL)
		if (!strncmp(de->d_name, "nvme", 4) && strcmp(de->d_name, "nvme-fabrics") != 0) {
			snprintf(p, sizeof(p), "%s/%s", c->v.dev, de->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
}

/* ---- one round ---------------------------------------------------------------------------- */

enum outcome { CUT_IN_CALL, ANSWERED_OK, SURVIVED };

/* The node process: starts, makes the call, exits 0 when it answered OK (after noting the host
 * NQN in c->acked, outside the machine: what kubelet and the cluster learned). */
static void node_process(struct cut *c, const struct call *k)
{
	struct err e = {0};
	struct grpc_status st;
	setenv("PILLAR_TEST_POWERCUT", c->control, 1);
	if (k->first_start)
		file_powercut_from_env();
	if (env_node_new(&c->v, &c->v.n, &e) < 0) {
		fprintf(stderr, "node start: %s\n", e.msg);
		_exit(4);
	}
	if (!k->first_start)
		file_powercut_from_env();
	c->v.n->dhchap = k->dhchap;
	int code = k->fn(c, &st);
	if (code != GRPC_OK) {
		fprintf(stderr, "%s: %d %s\n", k->name, code, st.msg);
		_exit(3);
	}
	put(c->acked, c->v.n->id.hostnqn, strlen(c->v.n->id.hostnqn));
	_exit(0);
}

static enum outcome run_node(struct cut *c, const struct call *k, long n)
{
	char hit[4300];
	FILE *f = fopen(c->control, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%ld %ld\n", n, ++c->round);
	fclose(f);
	ck_assert(snprintf(hit, sizeof(hit), "%s.hit", c->control) < (int)sizeof(hit));
	unlink(hit);
	unlink(c->acked);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		node_process(c, k);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status)) {
		ck_assert_msg(WTERMSIG(status) == SIGKILL && is_file(hit),
		              "%s round %ld: the node died of signal %d, not at its fault point",
		              k->name, n, WTERMSIG(status));
		return CUT_IN_CALL;
	}
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	              "%s round %ld: the node process failed (status %d)", k->name, n, status);
	return is_file(hit) ? ANSWERED_OK : SURVIVED;
}

static void prepare(struct cut *c, const struct call *k)
{
	struct grpc_status st;
	struct err e = {0};
	env_init(&c->v, 1);
	sreq_init(&c->s, &c->v, 0, NULL);
	snprintf(c->scratch, sizeof(c->scratch), "%s", tu_mkdtemp());
	ck_assert(snprintf(c->control, sizeof(c->control), "%s/cut", c->scratch) <
	          (int)sizeof(c->control));
	ck_assert(snprintf(c->acked, sizeof(c->acked), "%s/acked", c->scratch) <
	          (int)sizeof(c->acked));
	ck_assert(snprintf(c->machine[0], sizeof(c->machine[0]), "%s", c->v.root) <
	          (int)sizeof(c->machine[0]));
	ck_assert(snprintf(c->machine[1], sizeof(c->machine[1]), "%s/etc", c->v.root) <
	          (int)sizeof(c->machine[1]));
	ck_assert(snprintf(c->machine[2], sizeof(c->machine[2]), "%s", c->v.etc) <
	          (int)sizeof(c->machine[2]));
	ck_assert(snprintf(c->machine[3], sizeof(c->machine[3]), "%s", c->v.state) <
	          (int)sizeof(c->machine[3]));
	/* another volume staged on this node: its record is nobody's business in these calls */
	char other_staging[4300];
	snprintf(other_staging, sizeof(other_staging), "%s/kubelet/plugins/other/globalmount",
	         c->v.root);
	ck_assert_int_eq(file_mkdir_p(other_staging, 0750, &e), 0);
	struct node_record r = {0};
	snprintf(r.protocol_type, sizeof(r.protocol_type), "nvmeof-tcp");
	snprintf(r.access_type, sizeof(r.access_type), "filesystem");
	snprintf(r.fs_type, sizeof(r.fs_type), "ext4");
	snprintf(r.subsys_nqn, sizeof(r.subsys_nqn), "%s", NQN "-other");
	snprintf(r.address, sizeof(r.address), "10.0.0.5");
	snprintf(r.port, sizeof(r.port), "4420");
	snprintf(r.volume_id, sizeof(r.volume_id), "%s", OTHER_VOL);
	ck_assert(snprintf(r.staging_path, sizeof(r.staging_path), "%s", other_staging) <
	          (int)sizeof(r.staging_path));
	ck_assert_int_eq(node_record_write(c->v.state, &r, &e), 0);
	snprintf(c->other, sizeof(c->other), "%s", tu_read(c->v.state, OTHER));
	if (k->staged)
		ck_assert_int_eq(do_stage(c, &st), GRPC_OK);
	if (k->published)
		ck_assert_int_eq(do_publish(c, &st), GRPC_OK);
	node_free(c->v.n); /* the node process is the child's (no thread of it across fork) */
	c->v.n = NULL;
	if (k->first_start) { /* a new machine: no host identity, no state directory */
		rm_rf(c->v.state);
		tu_write(c->v.root, "etc/nvme/.keep", "");
		ck_assert_int_eq(unlink(fmt("%s/hostnqn", c->v.etc)), 0);
		ck_assert_int_eq(unlink(fmt("%s/hostid", c->v.etc)), 0);
	}
	keep_baseline(c);
}

static bool mounted(struct cut *c, const char *path)
{
	struct node_mount m;
	return node_mount_find(c->v.proc, path, &m) == 0;
}

/* What the reboot left: an acknowledged call's effect, a whole identity, nothing foreign. */
static void check_after_reboot(struct cut *c, const struct call *k, enum outcome o)
{
	struct node_record r;
	struct model_dhchap_file keys;
	struct err e = {0};
	char nqn[512] = "", id[512] = "";
	bool acked = o != CUT_IN_CALL;
	int rc = node_record_read(c->v.state, VOL, &r, &e);
	ck_assert_msg(rc == 0 || rc == -ENOENT, "%s round %ld: the record reads back as %d %s",
	              k->name, c->round, rc, e.msg);
	if (acked && (k->fn == do_stage))
		ck_assert_msg(rc == 0, "%s round %ld: the acknowledged stage's record is gone",
		              k->name, c->round);
	if (acked && k->fn == do_unstage)
		ck_assert_msg(rc == -ENOENT,
		              "%s round %ld: the acknowledged unstage's record is back", k->name,
		              c->round);
	if (rc == 0)
		ck_assert_str_eq(r.staging_path, c->v.staging);
	snprintf(nqn, sizeof(nqn), "%s", tu_read(c->v.etc, "hostnqn"));
	snprintf(id, sizeof(id), "%s", tu_read(c->v.etc, "hostid"));
	if (!k->first_start) {
		ck_assert_str_eq(nqn, HOSTNQN "\n");
	} else if (acked) { /* the host NQN the connect used is the one the node has */
		char used[600];
		size_t n;
		char *data = slurp(c->acked, &n);
		snprintf(used, sizeof(used), "%.*s\n", (int)n, data);
		free(data);
		ck_assert_msg(!strcmp(nqn, used),
		              "%s round %ld: host NQN %s after the reboot, %s "
		              "before",
		              k->name, c->round, nqn, used);
	}
	if (nqn[0] && id[0]) /* a host ID goes with its host NQN */
		ck_assert_msg(strstr(nqn, id) != NULL && strlen(id) == 37, "hostnqn %s, hostid %s",
		              nqn, id);
	rc = model_dhchap_file_read(c->v.state, &keys, &e);
	ck_assert_msg(rc == 0 || rc == -ENOENT, "%s round %ld: the key file reads back as %d %s",
	              k->name, c->round, rc, e.msg);
	if (rc == 0)
		model_dhchap_file_wipe(&keys);
	if (acked && k->dhchap)
		ck_assert_msg(rc == 0, "%s round %ld: the keys of an acknowledged stage are gone",
		              k->name, c->round);
}

/* kubelet after the reboot, then the volume's teardown; nothing else changed. */
static void converge(struct cut *c, const struct call *k)
{
	struct node_record r;
	struct err e = {0};
	if (k->pod_runs) {
		until_ok(c, "NodeStageVolume", do_stage);
		until_ok(c, "NodePublishVolume", do_publish);
		ck_assert_int_eq(node_record_read(c->v.state, VOL, &r, &e), 0);
		ck_assert_str_eq(r.volume_id, VOL);
		ck_assert_str_eq(r.subsys_nqn, NQN);
		ck_assert_str_eq(r.namespace_uuid, UUID1);
		ck_assert_msg(mounted(c, c->v.staging) && mounted(c, c->v.target),
		              "round %ld: staged and published, yet not mounted", c->round);
		until_ok(c, "NodeUnpublishVolume", do_unpublish);
	} else if (k->published) {
		until_ok(c, "NodeUnpublishVolume", do_unpublish);
	}
	until_ok(c, "NodeUnstageVolume", do_unstage);
	ck_assert_int_eq(node_record_read(c->v.state, VOL, &r, &e), -ENOENT);
	ck_assert(!mounted(c, c->v.staging) && !mounted(c, c->v.target));
	ck_assert_msg(!is_dir(fmt("%s/class/nvme/nvme3", c->v.sys)),
	              "round %ld: the volume's controller is still there", c->round);
	if (!k->first_start) /* a new machine has no other volume */
		ck_assert_str_eq(tu_read(c->v.state, OTHER), c->other);
	DIR *d = opendir(c->v.state);
	struct dirent *de;
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL)
		ck_assert_msg(!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		                  !strcmp(de->d_name, OTHER) ||
		                  (k->dhchap && !strcmp(de->d_name, MODEL_DHCHAP_FILE)),
		              "%s round %ld: %s in the state directory", k->name, c->round,
		              de->d_name);
	closedir(d);
}

static void rounds(const struct call *k)
{
	struct cut *c = calloc(1, sizeof(*c));
	struct err e = {0};
	long n;
	ck_assert_ptr_nonnull(c);
	for (n = 1; n <= ROUNDS_MAX; n++) {
		prepare(c, k);
		enum outcome o = run_node(c, k, n);
		reboot(c);
		ck_assert_int_eq(env_node_new(&c->v, &c->v.n, &e), 0);
		c->v.n->dhchap = k->dhchap;
		check_after_reboot(c, k, o);
		converge(c, k);
		env_done(&c->v);
		tu_rmtree(c->scratch);
		if (o == SURVIVED)
			break;
	}
	ck_assert_msg(n <= ROUNDS_MAX, "%s: the fault point never stopped firing", k->name);
	fprintf(stderr, "%s: cut before each of its %ld fsyncs and after the answer\n", k->name,
	        n - 1);
	free(c);
}

/* ---- the calls ---------------------------------------------------------------------------- */

static const struct call calls[] = {
    {"NodeStageVolume", .pod_runs = true, .fn = do_stage},
    {"NodeStageVolume --dhchap", .dhchap = true, .pod_runs = true, .fn = do_stage},
    {"first start + NodeStageVolume", .first_start = true, .pod_runs = true, .fn = do_stage},
    {"NodeUnstageVolume", .staged = true, .fn = do_unstage},
    {"NodePublishVolume", .staged = true, .pod_runs = true, .fn = do_publish},
    {"NodeUnpublishVolume", .staged = true, .published = true, .fn = do_unpublish},
};

/* Call _i of calls[], cut at each of its fsyncs. */
START_TEST(test_cut_each_fsync)
{
	rounds(&calls[_i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_powercut");
	TCase *t = tcase_create("cut at each fsync");
	tcase_set_timeout(t, 120);
	tcase_add_loop_test(t, test_cut_each_fsync, 0, (int)(sizeof(calls) / sizeof(calls[0])));
	suite_add_tcase(s, t);
	return tu_run(s);
}
