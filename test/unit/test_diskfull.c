/* Disk full: the durable writes of every role on a small filesystem that fills up — the node's
 * stage records, the agent's fencing marks and identity pins, the embedded store's objects.
 * Each test runs (in Check's forked child) in a private mount namespace with a 4 MiB tmpfs (room
 * for a 2 MiB journal, the agent's marks' or the embedded store's, which is written in full
 * when it is created),
 * fills it with a filler file until ENOSPC, and checks that the write fails with an error naming
 * the file and ENOSPC, that the previous record is left whole (no truncated or temporary file),
 * and that the same write succeeds once the filler is removed.  Needs root or unprivileged
 * user namespaces to mount the tmpfs; without either the tests fail (they are not skipped).
 * The real-kernel counterpart (ext4 on a loop device) is test/e2e's business. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/config.h"
#include "agent/fence.h"
#include "agent/identity.h"
#include "agent/service.h"
#include "base/json.h"
#include "ctl_fixture.h"
#include "node/record.h"
#include "node_fixture.h"
#include "rules/nqn.h"
#include "store/store.h"
#include "testutil.h"

static char root[400];

static void write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* A private mount namespace (a user namespace too when not root) with a tmpfs of 4 MiB at
 * root. */
static void setup(void)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	snprintf(root, sizeof(root), "%s", tu_mkdtemp());
	if (uid != 0) {
		char map[64];
		ck_assert_msg(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0,
		              "unshare(user, mount): %s: the disk-full tests need root or user "
		              "namespaces",
		              strerror(errno));
		write_proc("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		write_proc("/proc/self/uid_map", map);
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		write_proc("/proc/self/gid_map", map);
	} else {
		ck_assert_msg(unshare(CLONE_NEWNS) == 0, "unshare(mount): %s", strerror(errno));
	}
	ck_assert_msg(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "%s",
	              strerror(errno));
	ck_assert_msg(mount("tmpfs", root, "tmpfs", 0, "size=4m,mode=0700") == 0,
	              "mount tmpfs: %s", strerror(errno));
}

static void teardown(void)
{
	umount(root);
	rmdir(root);
}

/* Writes dir/filler until the filesystem is full. */
static void fill_dir(const char *dir)
{
	char path[PATH_MAX], block[4096];
	memset(block, 'x', sizeof(block));
	snprintf(path, sizeof(path), "%s/filler", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ssize_t w;
	while ((w = write(fd, block, sizeof(block))) > 0)
		;
	ck_assert_msg(w < 0 && errno == ENOSPC, "filling: %s", strerror(errno));
	close(fd);
}

static void unfill_dir(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/filler", dir);
	ck_assert_int_eq(unlink(path), 0);
}

static void fill(void)
{
	fill_dir(root);
}

static void unfill(void)
{
	unfill_dir(root);
}

/* The error names the file and ENOSPC. */
static void expect_enospc(int rc, const struct err *e, const char *file)
{
	ck_assert_msg(rc == -ENOSPC, "rc %d (%s), want -ENOSPC", rc, e->msg);
	ck_assert_msg(strstr(e->msg, file), "\"%s\" does not name %s", e->msg, file);
	ck_assert_msg(strstr(e->msg, "No space left on device (ENOSPC)"),
	              "\"%s\" does not say ENOSPC", e->msg);
}

/* No temporary file left behind in dir. */
static void expect_no_temp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		ck_assert_msg(!strstr(de->d_name, ".tmp."), "temporary file %s/%s left", dir,
		              de->d_name);
	closedir(d);
}

#define NVOL "storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-abc123"

static void record_init(struct node_record *r, const char *staging)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->protocol_type, sizeof(r->protocol_type), "nvmeof-tcp");
	snprintf(r->access_type, sizeof(r->access_type), "block");
	snprintf(r->subsys_nqn, sizeof(r->subsys_nqn), "nqn.2026-01.com.bhyoo.pillar-csi:tank.x");
	snprintf(r->address, sizeof(r->address), "10.0.0.5");
	snprintf(r->port, sizeof(r->port), "4420");
	snprintf(r->volume_id, sizeof(r->volume_id), NVOL);
	snprintf(r->staging_path, sizeof(r->staging_path), "%s", staging);
}

START_TEST(test_stage_record)
{
	char state[600], path[700];
	struct node_record w, r;
	struct err e = {0};
	snprintf(state, sizeof(state), "%s/node", root);
	ck_assert_int_eq(node_record_path(state, NVOL, path, sizeof(path), &e), 0);
	record_init(&w, "/var/lib/kubelet/first");
	ck_assert_msg(node_record_write(state, &w, &e) == 0, "%s", e.msg);
	fill();
	record_init(&w, "/var/lib/kubelet/second");
	expect_enospc(node_record_write(state, &w, &e), &e, path);
	ck_assert_msg(node_record_read(state, NVOL, &r, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(r.staging_path, "/var/lib/kubelet/first"); /* the old record, whole */
	expect_no_temp(state);
	unfill();
	ck_assert_msg(node_record_write(state, &w, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(node_record_read(state, NVOL, &r, &e), 0);
	ck_assert_str_eq(r.staging_path, "/var/lib/kubelet/second");
}
END_TEST

/* NodeStageVolume whose stage record cannot be written for want of space: RESOURCE_EXHAUSTED
 * naming the file and ENOSPC (it answered INTERNAL), and the retry once space is back records
 * the volume (the mount is found and kept, csi.md §7.1 step 5). */
START_TEST(test_node_stage_disk_full)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	char path[PATH_MAX];
	struct err e = {0};
	env_init(&v, 0);
	ck_assert_msg(mount("tmpfs", v.state, "tmpfs", 0, "size=64k,mode=0700") == 0,
	              "mount tmpfs: %s", strerror(errno));
	fill_dir(v.state);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_RESOURCE_EXHAUSTED);
	ck_assert_int_eq(node_record_path(v.state, VOL, path, sizeof(path), &e), 0);
	ck_assert_msg(strstr(st.msg, path) && strstr(st.msg, "No space left on device (ENOSPC)"),
	              "%s", st.msg);
	expect_no_temp(v.state);
	unfill_dir(v.state);
	ck_assert_msg(stage(&v, &s, &st) == GRPC_OK, "%s", st.msg);
	ck_assert_int_eq(v.m.mounts, 1);
	struct node_record r;
	ck_assert_msg(node_record_read(v.state, VOL, &r, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(r.staging_path, v.staging);
	ck_assert_int_eq(umount(v.state), 0);
	env_done(&v);
}
END_TEST

START_TEST(test_fencing_mark)
{
	char state[600], path[700];
	struct fence_mark m = {0};
	struct err e = {0};
	snprintf(state, sizeof(state), "%s/agent", root);
	snprintf(path, sizeof(path), "%s/generations/fpool_2Fpvc-1.mark", state);
	ck_assert_msg(agent_fence_check(state, "fpool/pvc-1", "uid-1", 1, FENCE_GRANT, &e) == 0,
	              "%s", e.msg);
	fill();
	/* the mark must be on disk before the grant it authorises: no write, no grant */
	expect_enospc(agent_fence_check(state, "fpool/pvc-1", "uid-1", 2, FENCE_GRANT, &e), &e,
	              path);
	ck_assert_int_eq(agent_fence_read(state, "fpool/pvc-1", &m, &e), 0);
	ck_assert_uint_eq(m.generation, 1);
	agent_fence_mark_clear(&m);
	snprintf(path, sizeof(path), "%s/generations", state);
	expect_no_temp(path);
	unfill();
	ck_assert_msg(agent_fence_check(state, "fpool/pvc-1", "uid-1", 2, FENCE_GRANT, &e) == 0,
	              "%s", e.msg);
	ck_assert_int_eq(agent_fence_read(state, "fpool/pvc-1", &m, &e), 0);
	ck_assert_uint_eq(m.generation, 2);
	agent_fence_mark_clear(&m);
}
END_TEST

START_TEST(test_identity_pin)
{
	char state[600], path[700];
	const char *nqn = RULES_NQN_PREFIX "fpool.pvc-1";
	struct rules_ns_identity a = {"0b661a8a-9925-5917-b52c-a5719096bc2b",
	                              "0b661a8a-9925-5917-b52c-a5719096bc2b", "serial-a"},
	                         b = a, got;
	struct err e = {0};
	snprintf(b.serial, sizeof(b.serial), "serial-b");
	snprintf(state, sizeof(state), "%s/agent", root);
	snprintf(path, sizeof(path), "%s/nvmet-identity/fpool_2Fpvc-1.json", state);
	ck_assert_msg(agent_identity_settle(state, "fpool/pvc-1", "uid-1", nqn, &a, &e) == 0, "%s",
	              e.msg);
	fill();
	expect_enospc(agent_identity_settle(state, "fpool/pvc-1", "uid-1", nqn, &b, &e), &e, path);
	ck_assert_int_eq(agent_identity_start(state, "fpool/pvc-1", "uid-1", nqn, &got, &e), 0);
	ck_assert_str_eq(got.serial, "serial-a");
	unfill();
	ck_assert_int_eq(agent_identity_settle(state, "fpool/pvc-1", "uid-1", nqn, &b, &e), 0);
	ck_assert_int_eq(agent_identity_start(state, "fpool/pvc-1", "uid-1", nqn, &got, &e), 0);
	ck_assert_str_eq(got.serial, "serial-b");
}
END_TEST

static cJSON *agent_obj(const char *name, const char *address)
{
	char buf[512];
	cJSON *o = NULL;
	snprintf(buf, sizeof(buf),
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\","
	         "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"external\":{\"address\":\"%s\","
	         "\"port\":9500}}}",
	         name, address);
	ck_assert_int_eq(json_parse_strict(buf, strlen(buf), &o, NULL), 0);
	return o;
}

static const char *agent_address(store *s, const char *name)
{
	static char buf[64];
	cJSON *o = NULL;
	if (store_get(s, store_kind_lookup("PillarAgent"), NULL, name, &o, NULL) < 0)
		return "(none)";
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(o, "spec"), "external");
	snprintf(buf, sizeof(buf), "%s", json_get_str(ext, "address") ?: "?");
	cJSON_Delete(o);
	return buf;
}

START_TEST(test_embedded_store)
{
	char dir[600], file[700];
	store *s = NULL;
	cJSON *a = agent_obj("a", "10.0.0.1"), *b = agent_obj("b", "10.0.0.2"), *out = NULL;
	struct err e = {0};
	snprintf(dir, sizeof(dir), "%s/store", root);
	ck_assert_msg(store_dir_open(dir, true, 50, &s, &e) == 0, "%s", e.msg);
	ck_assert_msg(store_create(s, a, &out, &e) == 0, "%s", e.msg);
	fill();
	/* a new object: refused with the file that could not be written (the object's, or the
	 * store's resource version persisted before it) and ENOSPC, not in the store afterwards */
	ck_assert_int_lt(store_create(s, b, NULL, &e), 0);
	ck_assert_msg(strstr(e.msg, dir) && strstr(e.msg, "(ENOSPC)"), "%s", e.msg);
	ck_assert_str_eq(agent_address(s, "b"), "(none)");
	/* an update: refused, the stored object unchanged */
	cJSON_ReplaceItemInObjectCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(out, "spec"),
	                                     "external"),
	    "address", cJSON_CreateString("10.0.0.9"));
	ck_assert_int_lt(store_update(s, out, NULL, &e), 0);
	ck_assert_msg(strstr(e.msg, dir) && strstr(e.msg, "(ENOSPC)"), "%s", e.msg);
	ck_assert_str_eq(agent_address(s, "a"), "10.0.0.1");
	snprintf(file, sizeof(file), "%s/pillaragents", dir);
	expect_no_temp(file);
	/* space returns: the refused writes stay refused (another process opening the store, which
	 * applies what the journal holds, finds neither), then both succeed, and a reopened store
	 * reads them back */
	unfill();
	store *other = NULL;
	ck_assert_msg(store_dir_open(dir, false, 50, &other, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(agent_address(other, "b"), "(none)");
	ck_assert_str_eq(agent_address(other, "a"), "10.0.0.1");
	store_close(other);
	ck_assert_msg(store_create(s, b, NULL, &e) == 0, "%s", e.msg);
	ck_assert_msg(store_update(s, out, NULL, &e) == 0, "%s", e.msg);
	store_close(s);
	ck_assert_msg(store_dir_open(dir, true, 50, &s, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(agent_address(s, "a"), "10.0.0.9");
	ck_assert_str_eq(agent_address(s, "b"), "10.0.0.2");
	store_close(s);
	cJSON_Delete(out);
	cJSON_Delete(a);
	cJSON_Delete(b);
}
END_TEST

static const char *const PSC_PARAMS[] = {"pillar-csi.bhyoo.com/storage-class", "fast", NULL};

/* CreateVolume whose PillarVolumeState cannot be written to the full embedded store:
 * RESOURCE_EXHAUSTED naming the store's file and ENOSPC (it answered UNAVAILABLE), nothing
 * recorded and the agent not called; once space is back the same request provisions. */
START_TEST(test_controller_create_disk_full)
{
	struct grpc_status gs = {0};
	char vid[256];
	snprintf(fx_dir, sizeof(fx_dir), "%s/store", root);
	ck_assert_int_eq(mkdir(fx_dir, 0700), 0);
	ck_assert_int_eq(store_dir_open(fx_dir, true, 50, &fx_st, NULL), 0);
	fx_fa = fake_agent_new();
	ctl_init(&fx_c, fx_st, fake_agent_client(fx_fa));
	fx_objects(true);
	fill();
	ck_assert_int_eq(fx_create("pvc-1", PSC_PARAMS, false, vid, sizeof(vid), &gs),
	                 GRPC_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(gs.msg, fx_dir) && strstr(gs.msg, "(ENOSPC)"), "%s", gs.msg);
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-1"));
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 0);
	unfill();
	ck_assert_msg(fx_create("pvc-1", PSC_PARAMS, false, vid, sizeof(vid), &gs) == 0, "%s",
	              gs.msg);
	ctl_fini(&fx_c);
	fake_agent_free(fx_fa);
	store_close(fx_st);
}
END_TEST

/* The agent's own state on a full file system: the fencing mark DeleteVolume ends and the
 * drain mark answer RESOURCE_EXHAUSTED naming the file (they answered INTERNAL); the delete
 * is retried once space is back. */
START_TEST(test_agent_state_disk_full)
{
	char dir[600], mark[800];
	struct agent_config cfg;
	agent_service *svc = NULL;
	struct grpc_status st;
	struct err e = {0};
	/* configfs and the volumes' files elsewhere: only the agent's state is on the tmpfs */
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	tu_agent_layout(dir, &cfg);
	char cfs[700], state[700];
	snprintf(cfs, sizeof(cfs), "%s/cfs", dir);
	snprintf(state, sizeof(state), "%s/agent", root);
	struct agent_service_opts o = {.state_dir = state,
	                               .configfs_root = cfs,
	                               .host_root = dir, /* never the machine's /dev, /sys */
	                               .version = "0.1.0-test",
	                               .device_wait_ms = 300,
	                               .create_wait_ms = 300,
	                               .addr_wait_ms = 300,
	                               .busy_retry_ms = 10,
	                               .drain_wait_ms = 100};
	ck_assert_msg(agent_service_new(&cfg, &o, &svc, &e) == 0, "%s", e.msg);
	PillarCsi__Agent__V1__FencingToken t = PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
	t.volume_uid = "uid-1";
	t.generation = 1;
	PillarCsi__Agent__V1__CreateVolumeRequest cq =
	    PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	PillarCsi__Agent__V1__CreateVolumeResponse cr =
	    PILLAR_CSI__AGENT__V1__CREATE_VOLUME_RESPONSE__INIT;
	cq.volume_id = "fpool/pvc-1";
	cq.capacity_bytes = 1 << 20;
	cq.backend_type = 6; /* FILE */
	cq.fence = &t;
	ck_assert_msg(agent_create_volume(svc, &cq, &cr, &st) == 0, "%s", st.msg);
	free(cr.device_path);
	PillarCsi__Agent__V1__ReconcileStateRequest rq =
	    PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PillarCsi__Agent__V1__ReconcileStateResponse *rr = malloc(sizeof(*rr));
	pillar_csi__agent__v1__reconcile_state_response__init(rr);
	rq.complete = true;
	ck_assert_int_eq(agent_reconcile_state(svc, &rq, rr, &st), 0); /* the gate opens */
	protobuf_c_message_free_unpacked(&rr->base, NULL);
	fill();
	/* DeleteVolume ends the volume's fencing mark: that write fails */
	PillarCsi__Agent__V1__DeleteVolumeRequest dq =
	    PILLAR_CSI__AGENT__V1__DELETE_VOLUME_REQUEST__INIT;
	dq.volume_id = "fpool/pvc-1";
	dq.backend_type = 6;
	dq.fence = &t;
	snprintf(mark, sizeof(mark), "%s/generations/fpool_2Fpvc-1.mark", state);
	ck_assert_int_eq(agent_delete_volume(svc, &dq, NULL, &st), GRPC_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(st.msg, mark) && strstr(st.msg, "(ENOSPC)"), "%s", st.msg);
	unfill();
	ck_assert_msg(agent_delete_volume(svc, &dq, NULL, &st) == 0, "%s", st.msg);
	fill();
	PillarCsi__Agent__V1__DrainResponse dr = PILLAR_CSI__AGENT__V1__DRAIN_RESPONSE__INIT;
	ck_assert_int_eq(agent_drain(svc, NULL, &dr, &st), GRPC_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(st.msg, "/.drained") && strstr(st.msg, "(ENOSPC)"), "%s", st.msg);
	unfill();
	agent_service_free(svc);
	agent_config_clear(&cfg);
	tu_rmtree(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("diskfull");
	TCase *tc = tcase_create("tmpfs");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_stage_record);
	tcase_add_test(tc, test_node_stage_disk_full);
	tcase_add_test(tc, test_fencing_mark);
	tcase_add_test(tc, test_identity_pin);
	tcase_add_test(tc, test_embedded_store);
	tcase_add_test(tc, test_controller_create_disk_full);
	tcase_add_test(tc, test_agent_state_disk_full);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
