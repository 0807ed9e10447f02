/* The snapshot RPCs and CreateVolume from a content source as a component: file backend in a
 * temp directory, fake configfs root, real state directory.  Snapshot-time data in restores,
 * live data in clones, holes kept, idempotency and name conflicts, ID rules, fencing of
 * snapshots with their own tokens, deleting the source while restores and clones live, own
 * namespace identities kept across an agent restart, a long copy answered with progress and
 * finished by the retry, and a delete that cancels a copy and leaves no file behind. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_fixture.h"

#define MIB (1024 * 1024)

static void make_service(int copy_wait_ms)
{
	struct agent_service_opts o = af_opts();
	o.copy_wait_ms = copy_wait_ms;
	af_start(&o);
}

static void setup(void)
{
	af_setup();
	make_service(0);
}

/* CreateVolume; source: NULL, "snap:<id>" or "vol:<id>". */
static int create(const char *id, int64_t size, const char *source, const char *uid,
                  struct grpc_status *st)
{
	PB(CreateVolumeRequest) req = PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
	PB(VolumeContentSource) cs = PILLAR_CSI__AGENT__V1__VOLUME_CONTENT_SOURCE__INIT;
	PB(CreateVolumeResponse) *resp = malloc(sizeof(*resp));
	PB(FencingToken) t = af_token(uid, 1);
	pillar_csi__agent__v1__create_volume_response__init(resp);
	req.volume_id = (char *)id;
	req.capacity_bytes = size;
	req.backend_type = FILE_T;
	req.fence = &t;
	if (source && strncmp(source, "snap:", 5) == 0) {
		cs.source_case = PILLAR_CSI__AGENT__V1__VOLUME_CONTENT_SOURCE__SOURCE_SNAPSHOT_ID;
		cs.snapshot_id = (char *)source + 5;
		req.content_source = &cs;
	} else if (source) {
		cs.source_case = PILLAR_CSI__AGENT__V1__VOLUME_CONTENT_SOURCE__SOURCE_VOLUME_ID;
		cs.volume_id = (char *)source + 4;
		req.content_source = &cs;
	}
	int code = agent_create_volume(svc, &req, resp, st);
	if (code == GRPC_OK)
		ck_assert_int_ge(resp->capacity_bytes, size);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

static int snapshot(const char *id, const char *source, const char *uid, uint64_t gen,
                    struct grpc_status *st, int64_t *size)
{
	PB(CreateSnapshotRequest) req = PILLAR_CSI__AGENT__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	PB(CreateSnapshotResponse) *resp = malloc(sizeof(*resp));
	PB(FencingToken) t = af_token(uid, gen);
	pillar_csi__agent__v1__create_snapshot_response__init(resp);
	req.snapshot_id = (char *)id;
	req.source_volume_id = (char *)source;
	req.backend_type = FILE_T;
	req.fence = &t;
	int code = agent_create_snapshot(svc, &req, resp, st);
	if (getenv("TRACE_SNAP"))
		fprintf(stderr, "snapshot %s: %d %s\n", id, code, st->msg);
	if (code == GRPC_OK) {
		ck_assert_str_eq(resp->snapshot->snapshot_id, id);
		ck_assert_str_eq(resp->snapshot->source_volume_id, source);
		ck_assert(resp->snapshot->ready_to_use);
		ck_assert_int_gt(resp->snapshot->creation_time->seconds, 1700000000);
		if (size)
			*size = resp->snapshot->size_bytes;
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

static int unsnapshot(const char *id, const char *uid, uint64_t gen, struct grpc_status *st)
{
	PB(DeleteSnapshotRequest) req = PILLAR_CSI__AGENT__V1__DELETE_SNAPSHOT_REQUEST__INIT;
	PB(FencingToken) t = af_token(uid, gen);
	req.snapshot_id = (char *)id;
	req.backend_type = FILE_T;
	req.fence = &t;
	return agent_delete_snapshot(svc, &req, NULL, st);
}

static int delete_volume(const char *id, const char *uid, struct grpc_status *st)
{
	PB(DeleteVolumeRequest) req = PILLAR_CSI__AGENT__V1__DELETE_VOLUME_REQUEST__INIT;
	PB(FencingToken) t = af_token(uid, 1);
	req.volume_id = (char *)id;
	req.backend_type = FILE_T;
	req.fence = &t;
	return agent_delete_volume(svc, &req, NULL, st);
}

/* "<snapshot>:<source>,…" of ListSnapshots (source "" = every pool). */
static const char *list(const char *source)
{
	static char out[1024];
	PB(ListSnapshotsRequest) req = PILLAR_CSI__AGENT__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	PB(ListSnapshotsResponse) *resp = malloc(sizeof(*resp));
	struct grpc_status st = {0};
	pillar_csi__agent__v1__list_snapshots_response__init(resp);
	req.backend_type = FILE_T;
	req.source_volume_id = (char *)source;
	ck_assert_int_eq(agent_list_snapshots(svc, &req, resp, &st), GRPC_OK);
	out[0] = '\0';
	/* sorted, so that the directory's order does not matter */
	for (size_t i = 0; i < resp->n_snapshots; i++)
		for (size_t j = i + 1; j < resp->n_snapshots; j++)
			if (strcmp(resp->snapshots[j]->snapshot_id,
			           resp->snapshots[i]->snapshot_id) < 0) {
				PB(SnapshotInfo) *x = resp->snapshots[i];
				resp->snapshots[i] = resp->snapshots[j];
				resp->snapshots[j] = x;
			}
	for (size_t i = 0; i < resp->n_snapshots; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s:%s", i ? "," : "",
		         resp->snapshots[i]->snapshot_id, resp->snapshots[i]->source_volume_id);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return out;
}

/* Writes len bytes of c at off into a volume's file. */
static void put(const char *name, int64_t off, char c, size_t len)
{
	char p[600], *buf = malloc(len);
	snprintf(p, sizeof(p), "%s/%s.img", files, name);
	int fd = open(p, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	memset(buf, c, len);
	ck_assert_int_eq(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
	free(buf);
}

/* The byte at off of file <files>/<file>. */
static int byte_at(const char *file, int64_t off)
{
	char p[600];
	unsigned char c = 0xff;
	snprintf(p, sizeof(p), "%s/%s", files, file);
	int fd = open(p, O_RDONLY);
	ck_assert_msg(fd >= 0, "open %s", p);
	ck_assert_int_eq(pread(fd, &c, 1, off), 1);
	close(fd);
	return c;
}

static struct stat stat_of(const char *file)
{
	char p[600];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", files, file);
	ck_assert_msg(stat(p, &st) == 0, "stat %s", p);
	return st;
}

/* The files in the pool's directory, sorted, "a,b,…". */
static const char *dir_list(void)
{
	static char out[2048];
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "ls -A %s | sort | tr '\\n' ,", files);
	FILE *f = popen(cmd, "r");
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	pclose(f);
	return out;
}

START_TEST(test_restore_and_clone_data)
{
	struct grpc_status st = {0};
	int64_t size = 0;
	ck_assert_int_eq(create("fpool/v1", 4 * MIB, NULL, "uid-v1", &st), GRPC_OK);
	put("v1", 0, 'A', 4096);
	put("v1", 3 * MIB, 'A', 4096); /* a hole between */
	ck_assert_int_eq(snapshot("fpool/s1", "fpool/v1", "uid-s1", 1, &st, &size), GRPC_OK);
	ck_assert_int_eq(size, 4 * MIB);
	put("v1", 0, 'B', 4096);
	/* the snapshot: read-only, holes kept, the data of its time */
	struct stat sn = stat_of("v1@s1.snap");
	ck_assert_int_eq(sn.st_mode & 0777, 0400);
	ck_assert_int_eq(sn.st_size, 4 * MIB);
	ck_assert_int_lt((int64_t)sn.st_blocks * 512, 1 * MIB);
	/* a restore, larger than the snapshot; a clone of the live volume */
	ck_assert_int_eq(create("fpool/r1", 6 * MIB, "snap:fpool/s1", "uid-r1", &st), GRPC_OK);
	ck_assert_int_eq(create("fpool/c1", 4 * MIB, "vol:fpool/v1", "uid-c1", &st), GRPC_OK);
	ck_assert_int_eq(byte_at("r1.img", 0), 'A');
	ck_assert_int_eq(byte_at("r1.img", 3 * MIB), 'A');
	ck_assert_int_eq(byte_at("r1.img", 2 * MIB), 0);
	ck_assert_int_eq(stat_of("r1.img").st_size, 6 * MIB);
	ck_assert_int_eq(stat_of("r1.img").st_mode & 0777, 0600);
	ck_assert_int_eq(byte_at("c1.img", 0), 'B');
	/* writes to one never reach another */
	put("r1", 0, 'C', 4096);
	ck_assert_int_eq(byte_at("v1@s1.snap", 0), 'A');
	ck_assert_int_eq(byte_at("v1.img", 0), 'B');
	/* retries are idempotent; a name taken by another source is ALREADY_EXISTS */
	ck_assert_int_eq(snapshot("fpool/s1", "fpool/v1", "uid-s1", 1, &st, NULL), GRPC_OK);
	ck_assert_int_eq(create("fpool/r1", 6 * MIB, "snap:fpool/s1", "uid-r1", &st), GRPC_OK);
	ck_assert_int_eq(byte_at("r1.img", 0), 'C');
	ck_assert_int_eq(snapshot("fpool/s1", "fpool/c1", "uid-s1", 1, &st, NULL),
	                 GRPC_ALREADY_EXISTS);
	ck_assert_str_eq(st.msg, "snapshot \"s1\" exists of volume \"v1\"");
	ck_assert_int_eq(snapshot("fpool/s2", "fpool/c1", "uid-s2", 1, &st, NULL), GRPC_OK);
	ck_assert_str_eq(list(""), "fpool/s1:fpool/v1,fpool/s2:fpool/c1");
	ck_assert_str_eq(list("fpool/c1"), "fpool/s2:fpool/c1");
	/* ListVolumes never shows a snapshot */
	ck_assert_str_eq(dir_list(), "c1.img,c1@s2.snap,r1.img,v1.img,v1@s1.snap,");
}
END_TEST

START_TEST(test_refusals)
{
	struct grpc_status st = {0};
	static const char *const bad[] = {"fpool/../x", "fpool/a/b", "",         "fpool/",
	                                  "fpool/.x",   "fpool/a@b", "fpool/x y"};
	ck_assert_int_eq(create("fpool/v1", 1 * MIB, NULL, "uid-v1", &st), GRPC_OK);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[100];
		ck_assert_int_eq(snapshot(bad[i], "fpool/v1", "u", 1, &st, NULL),
		                 GRPC_INVALID_ARGUMENT);
		snprintf(want, sizeof(want), "invalid snapshot id \"%s\"", bad[i]);
		ck_assert_str_eq(st.msg, want);
		ck_assert_int_eq(unsnapshot(bad[i], "u", 1, &st), GRPC_INVALID_ARGUMENT);
	}
	char longname[300] = "fpool/";
	memset(longname + 6, 'a', 200);
	ck_assert_int_eq(snapshot(longname, "fpool/v1", "u", 1, &st, NULL), GRPC_INVALID_ARGUMENT);
	ck_assert_int_eq(snapshot("other/s1", "fpool/v1", "u", 1, &st, NULL),
	                 GRPC_FAILED_PRECONDITION);
	ck_assert_int_eq(snapshot("fpool/s1", "other/v1", "u", 1, &st, NULL),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_int_eq(snapshot("fpool/s1", "fpool/nope", "u", 1, &st, NULL), GRPC_NOT_FOUND);
	ck_assert_str_eq(st.msg, "source volume \"fpool/nope\" does not exist");
	ck_assert_int_eq(snapshot("fpool/s1", "fpool/v1", NULL, 1, &st, NULL),
	                 GRPC_FAILED_PRECONDITION);
	ck_assert_int_eq(create("fpool/r1", 1 * MIB, "snap:fpool/nope", "uid-r1", &st),
	                 GRPC_NOT_FOUND);
	ck_assert_str_eq(st.msg, "snapshot \"fpool/nope\" does not exist");
	ck_assert_int_eq(create("fpool/r1", 1 * MIB, "vol:fpool/nope", "uid-r1", &st),
	                 GRPC_NOT_FOUND);
	ck_assert_int_eq(create("fpool/r1", 1 * MIB, "vol:fpool/r1", "uid-r1", &st),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_int_eq(create("fpool/r1", MIB / 2, "vol:fpool/v1", "uid-r1", &st),
	                 GRPC_OUT_OF_RANGE);
	ck_assert_str_eq(st.msg, "volume \"fpool/r1\" of 524288 bytes is smaller than its source "
	                         "\"fpool/v1\" of 1048576 bytes");
	ck_assert_int_eq(create("fpool/r1", 1 * MIB, "snap:fpool/..", "uid-r1", &st),
	                 GRPC_INVALID_ARGUMENT);
	/* nothing of the refused calls is left */
	ck_assert_str_eq(dir_list(), "v1.img,");
}
END_TEST

START_TEST(test_snapshot_fencing)
{
	struct grpc_status st = {0};
	ck_assert_int_eq(create("fpool/v1", 1 * MIB, NULL, "uid-v1", &st), GRPC_OK);
	ck_assert_int_eq(snapshot("fpool/s1", "fpool/v1", "uid-s1", 3, &st, NULL), GRPC_OK);
	/* another lifecycle, an older generation */
	ck_assert_int_eq(unsnapshot("fpool/s1", "uid-other", 3, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_msg(strncmp(st.msg, "stale fencing token", 19) == 0, "%s", st.msg);
	ck_assert_int_eq(unsnapshot("fpool/s1", "uid-s1", 2, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(list(""), "fpool/s1:fpool/v1");
	/* the volume's token is not the snapshot's: their marks are apart */
	ck_assert_int_eq(delete_volume("fpool/s1", "uid-v1", &st), GRPC_OK);
	ck_assert_int_eq(unsnapshot("fpool/s1", "uid-s1", 3, &st), GRPC_OK);
	ck_assert_str_eq(list(""), "");
	ck_assert_int_eq(unsnapshot("fpool/s1", "uid-s1", 3, &st), GRPC_OK); /* retry */
	/* an ended lifecycle never creates again */
	ck_assert_int_eq(snapshot("fpool/s1", "fpool/v1", "uid-s1", 4, &st, NULL),
	                 GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(dir_list(), "v1.img,");
}
END_TEST

static const char *ns_attr(const char *nqn, const char *name)
{
	char p[700];
	snprintf(p, sizeof(p), "nvmet/subsystems/%s/namespaces/1/%s", nqn, name);
	return tu_read(cfs, p);
}

static int export(const char *id, const char *uid, struct grpc_status *st)
{
	PB(NvmeofTcpExportParams) tcp = PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
	PB(ExportParams) params = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
	PB(ExportVolumeRequest) req = PILLAR_CSI__AGENT__V1__EXPORT_VOLUME_REQUEST__INIT;
	PB(ExportVolumeResponse) *resp = malloc(sizeof(*resp));
	PB(FencingToken) t = af_token(uid, 1);
	pillar_csi__agent__v1__export_volume_response__init(resp);
	tcp.bind_address = "127.0.0.1";
	params.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	params.nvmeof_tcp = &tcp;
	req.volume_id = (char *)id;
	req.protocol_type = TCP;
	req.export_params = &params;
	req.fence = &t;
	int code = agent_export_volume(svc, &req, resp, st);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return code;
}

/* Opens the restore gate with a complete ReconcileState of ids (uids "uid-<name>"). */
static void restore(const char *const *ids, size_t n)
{
	PB(NvmeofTcpExportParams) tcp = PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
	PB(ExportParams) params = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
	PB(ExportDesiredState) ex = PILLAR_CSI__AGENT__V1__EXPORT_DESIRED_STATE__INIT;
	PB(ExportDesiredState) * exs[1] = {&ex};
	PB(VolumeDesiredState) vd[4], *vds[4];
	PB(FencingToken) t[4];
	char uids[4][64];
	PB(ReconcileStateRequest) req = PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PB(ReconcileStateResponse) *resp = malloc(sizeof(*resp));
	struct grpc_status st = {0};
	pillar_csi__agent__v1__reconcile_state_response__init(resp);
	tcp.bind_address = "127.0.0.1";
	params.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	params.nvmeof_tcp = &tcp;
	ex.protocol_type = TCP;
	ex.export_params = &params;
	for (size_t i = 0; i < n; i++) {
		PB(VolumeDesiredState) init = PILLAR_CSI__AGENT__V1__VOLUME_DESIRED_STATE__INIT;
		snprintf(uids[i], sizeof(uids[i]), "uid-%s", strchr(ids[i], '/') + 1);
		t[i] = af_token(uids[i], 1);
		vd[i] = init;
		vd[i].volume_id = (char *)ids[i];
		vd[i].backend_type = FILE_T;
		vd[i].exports = exs;
		vd[i].n_exports = 1;
		vd[i].fence = &t[i];
		vds[i] = &vd[i];
	}
	req.volumes = vds;
	req.n_volumes = n;
	req.complete = true;
	ck_assert_int_eq(agent_reconcile_state(svc, &req, resp, &st), GRPC_OK);
	for (size_t i = 0; i < resp->n_results; i++)
		ck_assert_msg(resp->results[i]->success, "%s", resp->results[i]->error_message);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

START_TEST(test_source_deleted_identities_kept)
{
	struct grpc_status st = {0};
	static const char *const ids[] = {"fpool/v1", "fpool/r1", "fpool/c1"};
	static const char *const nqns[] = {NQN("v1"), NQN("r1"), NQN("c1")};
	char uuid[3][64];
	ck_assert_int_eq(create("fpool/v1", 1 * MIB, NULL, "uid-v1", &st), GRPC_OK);
	put("v1", 0, 'A', 4096);
	ck_assert_int_eq(snapshot("fpool/s1", "fpool/v1", "uid-s1", 1, &st, NULL), GRPC_OK);
	ck_assert_int_eq(create("fpool/r1", 1 * MIB, "snap:fpool/s1", "uid-r1", &st), GRPC_OK);
	ck_assert_int_eq(create("fpool/c1", 1 * MIB, "vol:fpool/v1", "uid-c1", &st), GRPC_OK);
	restore(ids, 3);
	for (int i = 0; i < 3; i++)
		snprintf(uuid[i], sizeof(uuid[i]), "%s", ns_attr(nqns[i], "device_uuid"));
	/* each its own identity, never the source's */
	ck_assert_str_ne(uuid[0], uuid[1]);
	ck_assert_str_ne(uuid[0], uuid[2]);
	ck_assert_str_ne(uuid[1], uuid[2]);
	/* an agent restart: the restore brings back every export with the same identity */
	agent_service_free(svc);
	make_service(0);
	restore(ids + 1, 2);
	ck_assert_str_eq(ns_attr(nqns[1], "device_uuid"), uuid[1]);
	ck_assert_str_eq(ns_attr(nqns[2], "device_uuid"), uuid[2]);
	/* the source goes while its snapshot, restore and clone live */
	PB(UnexportVolumeRequest) un = PILLAR_CSI__AGENT__V1__UNEXPORT_VOLUME_REQUEST__INIT;
	PB(FencingToken) t = af_token("uid-v1", 1);
	un.volume_id = "fpool/v1";
	un.protocol_type = TCP;
	un.fence = &t;
	ck_assert_int_eq(agent_unexport_volume(svc, &un, NULL, &st), GRPC_OK);
	ck_assert_int_eq(delete_volume("fpool/v1", "uid-v1", &st), GRPC_OK);
	ck_assert_int_eq(byte_at("r1.img", 0), 'A');
	ck_assert_int_eq(byte_at("c1.img", 0), 'A');
	ck_assert_str_eq(list(""), "fpool/s1:fpool/v1");
	ck_assert_int_eq(create("fpool/r2", 1 * MIB, "snap:fpool/s1", "uid-r2", &st), GRPC_OK);
	ck_assert_int_eq(byte_at("r2.img", 0), 'A');
	ck_assert_int_eq(export("fpool/r2", "uid-r2", &st), GRPC_OK);
	ck_assert_str_ne(ns_attr(NQN("r2"), "device_uuid"), uuid[0]);
}
END_TEST

/* A copy that outlasts the call: progress, then the retry finishes it; a delete during a copy
 * cancels it and leaves no file. */
START_TEST(test_long_copy)
{
	struct grpc_status st = {0};
	int code, tries = 0;
	agent_service_free(svc);
	make_service(-1); /* answer at once */
	ck_assert_int_eq(create("fpool/v1", 64 * MIB, NULL, "uid-v1", &st), GRPC_OK);
	put("v1", 0, 'A', 48 * MIB);
	while ((code = snapshot("fpool/s1", "fpool/v1", "uid-s1", 1, &st, NULL)) ==
	       GRPC_UNAVAILABLE) {
		ck_assert_msg(strstr(st.msg, "copying ") && strstr(st.msg, " bytes ("), "%s",
		              st.msg);
		tries++;
		usleep(2000);
	}
	ck_assert_int_eq(code, GRPC_OK);
	ck_assert_int_eq(byte_at("v1@s1.snap", 40 * MIB), 'A');
	code = create("fpool/r1", 64 * MIB, "snap:fpool/s1", "uid-r1", &st);
	ck_assert_msg(code == GRPC_OK || code == GRPC_UNAVAILABLE, "%d %s", code, st.msg);
	ck_assert_int_eq(delete_volume("fpool/r1", "uid-r1", &st), GRPC_OK);
	ck_assert_str_eq(dir_list(), "v1.img,v1@s1.snap,");
	code = snapshot("fpool/s2", "fpool/v1", "uid-s2", 1, &st, NULL);
	ck_assert_msg(code == GRPC_OK || code == GRPC_UNAVAILABLE, "%d %s", code, st.msg);
	ck_assert_int_eq(unsnapshot("fpool/s2", "uid-s2", 1, &st), GRPC_OK);
	ck_assert_str_eq(dir_list(), "v1.img,v1@s1.snap,");
	(void)tries;
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("agent_snapshot");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, af_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_restore_and_clone_data);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_snapshot_fencing);
	tcase_add_test(tc, test_source_deleted_identities_kept);
	tcase_add_test(tc, test_long_copy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
