/* What the agent makes durable for a CreateVolume on the `file` backend, and what it completes
 * at start after a power cut: the fencing mark records the new image's size (imageBytes) in its
 * one durable write, so neither the sparse image nor its directory is fsync'd (the marks'
 * journal keeps the entry until a checkpoint synced the pool); an agent starting finds an
 * image a power cut left empty and gives it the recorded size, and makes again one whose name
 * a power cut took when a replayed mark records it.  An earlier agent's marks (without
 * imageBytes) and their images are left as they are. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/fence.h"
#include "agent/marklog.h"
#include "agent/service.h"
#include "agent_fixture.h"
#include "base/file.h"

#define UID1 "uid-1111"
#define UID2 "uid-2222"
#define MiB  (1 << 20)

/* stat and open calls of the path that watched names (when set), counted. */
static const char *watched;
static atomic_int stats, opens;

static bool is_watched(const char *path)
{
	const char *w = watched;
	return w && strcmp(path, w) == 0;
}

int stat(const char *path, struct stat *st)
{
	static int (*real)(const char *, struct stat *);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "stat");
	if (is_watched(path))
		atomic_fetch_add(&stats, 1);
	return real(path, st);
}

int open(const char *path, int flags, ...)
{
	static int (*real)(const char *, int, ...);
	mode_t mode = 0;
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "open");
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if (is_watched(path))
		atomic_fetch_add(&opens, 1);
	return real(path, flags, mode);
}

static void make_service(void)
{
	struct agent_service_opts o = af_opts();
	af_start(&o);
}

static void setup(void)
{
	af_setup();
	make_service();
}

static void teardown(void)
{
	file_fsync_observer = NULL;
	af_teardown();
}

/* CreateVolume of fpool/<name> at generation 1 of uid; preallocated through FileVolumeParams
 * when prealloc. */
static int create(const char *uid, const char *name, int64_t size, bool prealloc)
{
	struct grpc_status st;
	char id[64];
	PB(FencingToken) t = af_token(uid, 1);
	PB(FileVolumeParams) fp = PILLAR_CSI__AGENT__V1__FILE_VOLUME_PARAMS__INIT;
	PB(BackendParams) bp = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__INIT;
	PB(CreateVolumeRequest) req = PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	PB(CreateVolumeResponse) *resp = malloc(sizeof(*resp));
	pillar_csi__agent__v1__create_volume_response__init(resp);
	snprintf(id, sizeof(id), "fpool/%s", name);
	req.volume_id = id;
	req.capacity_bytes = size;
	req.backend_type = FILE_T;
	req.fence = &t;
	if (prealloc) {
		bp.params_case = PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE;
		bp.file = &fp;
		fp.preallocate = 1;
		req.backend_params = &bp;
	}
	int code = agent_create_volume(svc, &req, resp, &st);
	ck_assert_msg(code != GRPC_OK || resp->capacity_bytes == size, "%s", st.msg);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

static off_t image_size(const char *name)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s.img", files, name);
	return stat(p, &st) == 0 ? st.st_size : -1;
}

/* What a power cut leaves of an image whose size was never fsync'd: its name, empty. */
static void cut_image(const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s.img", files, name);
	ck_assert_int_eq(truncate(p, 0), 0);
}

static void restart(void)
{
	agent_service_free(svc);
	make_service();
}

/* ---- fsyncs --------------------------------------------------------------------------------- */

static char synced[8][PATH_MAX];
static int n_synced;
static bool files_only;

static void record_fsync(const char *path)
{
	if (files_only && strncmp(path, files, strlen(files)) != 0)
		return; /* the marks' journal's checkpoint at a restart */
	if (n_synced < 8)
		snprintf(synced[n_synced], sizeof(synced[0]), "%s", path);
	n_synced++;
}

/* Asserts the fsyncs since the last call, by path relative to root. */
static void expect_fsyncs(int line, int n, ...)
{
	va_list ap;
	va_start(ap, n);
	ck_assert_msg(n_synced == n, "line %d: %d fsyncs, want %d (first %s)", line, n_synced, n,
	              n_synced ? synced[0] : "-");
	for (int i = 0; i < n; i++) {
		char want[PATH_MAX];
		snprintf(want, sizeof(want), "%s/%s", root, va_arg(ap, const char *));
		ck_assert_msg(strcmp(synced[i], want) == 0, "line %d: fsync %d is %s, want %s",
		              line, i, synced[i], want);
	}
	va_end(ap);
	n_synced = 0;
}

/* A sparse create: the mark (with the size: one entry of the marks' journal) and nothing else;
 * neither the image nor the pool directory is fsync'd.  A preallocated one still fsyncs its
 * image and directory (its blocks are not in the mark); a retry that finds the image does not
 * write anything; one that makes the image under a mark an earlier try wrote fsyncs the
 * directory (that mark's entry may be retired already). */
START_TEST(test_create_fsyncs)
{
	ck_assert_int_eq(create(UID1, "a", MiB, false), GRPC_OK); /* state/ made durable once */
	file_fsync_observer = record_fsync;
	ck_assert_int_eq(create(UID1, "b", MiB, false), GRPC_OK);
	expect_fsyncs(__LINE__, 1, "state/marks.journal");
	ck_assert_str_eq(tu_read(state, "generations/fpool_2Fb.mark"),
	                 "{\"volumeUID\":\"" UID1 "\",\"generation\":1,\"ended\":false,"
	                 "\"endedUIDs\":[],\"imageBytes\":1048576}");
	ck_assert_int_eq(image_size("b"), MiB);
	ck_assert_int_eq(create(UID1, "b", MiB, false), GRPC_OK);
	expect_fsyncs(__LINE__, 0);
	ck_assert_int_eq(create(UID1, "c", MiB, true), GRPC_OK);
	expect_fsyncs(__LINE__, 3, "state/marks.journal", "files/c.img", "files");
	ck_assert_str_eq(tu_read(state, "generations/fpool_2Fc.mark"),
	                 "{\"volumeUID\":\"" UID1 "\",\"generation\":1,\"ended\":false,"
	                 "\"endedUIDs\":[]}");
	/* the create retried after a cut before the image was made: the mark has its size */
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/b.img", files);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(create(UID1, "b", MiB, false), GRPC_OK);
	expect_fsyncs(__LINE__, 1, "files");
	ck_assert_int_eq(image_size("b"), MiB);
}
END_TEST

/* A sparse create looks for its image once (the stat that finds none) and opens it once (to
 * make it): the image it made is the device, of the size asked, without another look. */
START_TEST(test_create_looks_at_its_image_once)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/d.img", files);
	watched = p;
	int code = create(UID1, "d", MiB, false);
	watched = NULL;
	ck_assert_int_eq(code, GRPC_OK);
	int looks = atomic_load(&stats), opened = atomic_load(&opens);
	ck_assert_int_eq(looks, 1);
	ck_assert_int_eq(opened, 1);
	ck_assert_int_eq(image_size("d"), MiB);
}
END_TEST

/* After a power cut the sparse image may be there without its size: the agent gives it the
 * size its mark recorded before it serves, and fsyncs it.  Images with data, preallocated
 * ones, ended lifecycles and an earlier agent's marks are left alone. */
START_TEST(test_start_completes_empty_images)
{
	ck_assert_int_eq(create(UID1, "a", MiB, false), GRPC_OK);
	ck_assert_int_eq(create(UID1, "b", 3 * MiB, false), GRPC_OK);
	ck_assert_int_eq(create(UID1, "c", MiB, true), GRPC_OK);
	ck_assert_int_eq(create(UID1, "old", MiB, false), GRPC_OK);
	cut_image("a");
	cut_image("c"); /* cannot happen (fsync'd), and nothing recorded: left as found */
	cut_image("old");
	tu_write(state, "generations/fpool_2Fold.mark",
	         "{\"volumeUID\":\"" UID1 "\",\"generation\":1,\"ended\":false,\"endedUIDs\":[]}");
	tu_write(files, "orphan.img", ""); /* no mark at all */
	files_only = true;
	file_fsync_observer = record_fsync;
	restart(); /* the close's checkpoint syncs the pool's filesystem too */
	/* the completed image's name made durable with its size (file_expand) */
	expect_fsyncs(__LINE__, 3, "files", "files/a.img", "files");
	ck_assert_int_eq(image_size("a"), MiB);
	ck_assert_int_eq(image_size("b"), 3 * MiB);
	ck_assert_int_eq(image_size("c"), 0);
	ck_assert_int_eq(image_size("old"), 0);
	ck_assert_int_eq(image_size("orphan"), 0);
	/* nothing more at the next start */
	restart();
	expect_fsyncs(__LINE__, 0);
}
END_TEST

/* A power cut took the name of an image whose create was acknowledged (its directory never
 * fsync'd): the agent replays the mark and makes the image again, of its size, before it
 * serves; the next start finds nothing to do.  An ended lifecycle's image stays gone. */
START_TEST(test_start_makes_an_image_a_power_cut_took)
{
	char p[PATH_MAX];
	ck_assert_int_eq(create(UID1, "a", 2 * MiB, false), GRPC_OK);
	ck_assert_int_eq(create(UID1, "b", MiB, false), GRPC_OK);
	struct err e = {0};
	ck_assert_int_eq(agent_fence_end(state, "fpool/b", &e), 0);
	snprintf(p, sizeof(p), "%s/a.img", files);
	ck_assert_int_eq(unlink(p), 0);
	snprintf(p, sizeof(p), "%s/b.img", files);
	ck_assert_int_eq(unlink(p), 0);
	agent_marklog_close(false); /* the power went: no checkpoint */
	files_only = true;
	file_fsync_observer = record_fsync;
	restart(); /* made durably, then the checkpoint after the replay syncs the pool */
	expect_fsyncs(__LINE__, 3, "files/a.img", "files", "files");
	ck_assert_int_eq(image_size("a"), 2 * MiB);
	ck_assert_int_eq(image_size("b"), -1);
	restart();
	expect_fsyncs(__LINE__, 0);
	ck_assert_int_eq(image_size("a"), 2 * MiB);
}
END_TEST

/* An ended lifecycle recorded no size; a corrupt mark does not stop the start (the RPCs of
 * that volume report it). */
START_TEST(test_start_skips_ended_and_corrupt)
{
	ck_assert_int_eq(create(UID1, "a", MiB, false), GRPC_OK);
	ck_assert_int_eq(create(UID1, "b", MiB, false), GRPC_OK);
	struct err e = {0};
	ck_assert_int_eq(agent_fence_end(state, "fpool/a", &e), 0);
	cut_image("a");
	cut_image("b");
	tu_write(state, "generations/fpool_2Fb.mark", "{\"volumeUID\":");
	restart();
	ck_assert_int_eq(image_size("a"), 0);
	ck_assert_int_eq(image_size("b"), 0);
	/* a new lifecycle of a records its own size */
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/a.img", files);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(create(UID2, "a", 2 * MiB, false), GRPC_OK);
	cut_image("a");
	restart();
	ck_assert_int_eq(image_size("a"), 2 * MiB);
}
END_TEST

/* ---- a power cut in a checkpoint of the marks' journal ------------------------------------ */

/* The checkpoint a create finds due syncs on its own thread while creates go on.  A child
 * process creates sparse volumes one after another (each acknowledged one recorded outside the
 * machine's directories) until that checkpoint; the fault point of base/powercut.c keeps what
 * is durable, and the child dies at one of the checkpoint's cut points:
 *   STATE    the syncfs of the state directory, with creates acknowledged after the switch;
 *   POOL     the syncfs of the pool (the marks durable, the images' names not);
 *   RETIRE   the first journal fdatasync after both (the retirement not durable).
 * Then the machine's directories become their durable copies, and the agent started again has
 * every acknowledged volume: its mark and its image of its size. */
enum cut_at { CUT_STATE, CUT_POOL, CUT_RETIRE };
static enum cut_at cut_at;
static _Atomic int acked_n, after_sync = -1;
static _Atomic bool
    armed; /* after the first create: state/ and files/ synced by the checkpoint alone */
static void (*keep_before)(const char *path);
static void (*keep_after_syncfs)(const char *root);

static void cut_before(const char *path)
{
	keep_before(path);
	if (!armed)
		return;
	if (strcmp(path, state) == 0 && cut_at == CUT_STATE) {
		int at = acked_n;
		for (int i = 0; i < 20000 && acked_n < at + 3; i++)
			usleep(1000); /* creates acknowledged into the new region meanwhile */
		raise(SIGKILL);
	}
	if (strcmp(path, files) == 0 && cut_at == CUT_POOL)
		raise(SIGKILL);
	size_t n = strlen(path);
	if (n > 14 && strcmp(path + n - 14, "/marks.journal") == 0 && after_sync >= 0 &&
	    ++after_sync == 1 && cut_at == CUT_RETIRE)
		raise(SIGKILL);
}

static void after_syncfs(const char *dir)
{
	keep_after_syncfs(dir);
	if (armed && strcmp(dir, files) == 0)
		after_sync = 0;
}

static void create_until_cut(int acked_fd)
{
	keep_before = file_fsync_observer;
	keep_after_syncfs = file_syncfs_done_observer;
	file_fsync_observer = cut_before;
	file_syncfs_done_observer = after_syncfs;
	make_service();
	for (int i = 0; i < 400; i++) {
		char name[32];
		snprintf(name, sizeof(name), "v%d", i);
		if (create(UID1, name, MiB, false) != GRPC_OK)
			_exit(1);
		tu_ack(acked_fd, i);
		acked_n = i + 1;
		armed = true;
	}
}

/* Acknowledged volume v<i> has its mark and its image of its size. */
static void volume_kept(int i, void *at)
{
	char id[32], name[32];
	struct fence_mark m;
	struct err e = {0};
	snprintf(name, sizeof(name), "v%d", i);
	snprintf(id, sizeof(id), "fpool/v%d", i);
	ck_assert_msg(agent_fence_read(state, id, &m, &e) == 0, "cut %d: %s: %s", *(int *)at, id,
	              e.msg);
	ck_assert_str_eq(m.uid, UID1);
	agent_fence_mark_clear(&m);
	ck_assert_msg(image_size(name) == MiB, "cut %d: the image of acknowledged %s: %ld",
	              *(int *)at, id, (long)image_size(name));
}

static void cut_round(enum cut_at at)
{
	char control[700], acked[700], generations[700];
	snprintf(control, sizeof(control), "%s/cut", root);
	snprintf(acked, sizeof(acked), "%s/acked", root);
	snprintf(generations, sizeof(generations), "%s/generations", state);
	agent_service_free(svc); /* the child's agent is the machine's */
	svc = NULL;
	const char *const machine[] = {state, generations, files};
	for (size_t i = 0; i < 3; i++)
		tu_durable_baseline(control, machine[i]);
	cut_at = at;
	tu_power_cut(control, acked, create_until_cut);
	for (size_t i = 0; i < 3; i++)
		tu_durable_restore(control, machine[i]);
	make_service();
	int cut = at;
	ck_assert_int_gt(tu_acked_each(acked, volume_kept, &cut), 120); /* cut in the checkpoint */
}

START_TEST(test_power_cut_at_the_state_sync)
{
	cut_round(CUT_STATE);
}
END_TEST

START_TEST(test_power_cut_at_the_pool_sync)
{
	cut_round(CUT_POOL);
}
END_TEST

START_TEST(test_power_cut_before_the_retirement_is_durable)
{
	cut_round(CUT_RETIRE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_durable");
	TCase *t = tcase_create("durable");
	tcase_set_timeout(t, 120);
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_create_fsyncs);
	tcase_add_test(t, test_create_looks_at_its_image_once);
	tcase_add_test(t, test_start_completes_empty_images);
	tcase_add_test(t, test_start_skips_ended_and_corrupt);
	tcase_add_test(t, test_start_makes_an_image_a_power_cut_took);
	tcase_add_test(t, test_power_cut_at_the_state_sync);
	tcase_add_test(t, test_power_cut_at_the_pool_sync);
	tcase_add_test(t, test_power_cut_before_the_retirement_is_durable);
	suite_add_tcase(s, t);
	return tu_run(s);
}
