/* node/health: the volume condition NodeGetVolumeStats reports (VOLUME_CONDITION) on the fake
 * sysfs tree: healthy while the volume's controller is live; abnormal with the state, the first
 * sighting and the seconds left before ctrl_loss_tmo (sysfs value, "off", or the kernel's 600 s
 * when the attribute is missing) while it is connecting/resetting/deleting; after the kernel
 * removed it, abnormal with the instruction to restart the workload (and no usage needed). */
#include <stdio.h>
#include <string.h>

#include "base/file.h"
#include "node/health.h"
#include "node/metrics.h"
#include "node_fixture.h"

static Csi__V1__NodeGetVolumeStatsResponse stats(struct env *v, int code)
{
	Csi__V1__NodeGetVolumeStatsRequest r = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse resp = CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT;
	struct grpc_status st = {0};
	r.volume_id = (char *)VOL;
	r.volume_path = v->staging;
	ck_assert_msg(node_get_volume_stats(v->n, &r, &resp, &st) == code, "%s", st.msg);
	return resp;
}

static void staged(struct env *v)
{
	struct sreq s;
	struct grpc_status st;
	env_init(v, 1);
	sreq_init(&s, v, 0, NULL);
	ck_assert_int_eq(stage(v, &s, &st), GRPC_OK);
}

/* A staged volume, its record and the sysfs it is read from, and a fresh node_health. */
static void health_staged(struct env *v, struct node_health *h, struct node_record *r,
                          struct nvme_ctx *c)
{
	staged(v);
	memset(r, 0, sizeof(*r));
	snprintf(r->subsys_nqn, sizeof(r->subsys_nqn), "%s", NQN);
	snprintf(r->volume_id, sizeof(r->volume_id), "%s", VOL);
	*c = (struct nvme_ctx){.sysfs_root = v->sys, .dev_root = v->dev};
	node_health_init(h);
}

START_TEST(test_live_is_healthy)
{
	struct env v;
	staged(&v);
	Csi__V1__NodeGetVolumeStatsResponse resp = stats(&v, GRPC_OK);
	ck_assert_ptr_nonnull(resp.volume_condition);
	ck_assert(!resp.volume_condition->abnormal);
	ck_assert_str_eq(resp.volume_condition->message,
	                 "NVMe controller nvme3 of " NQN " is live");
	ck_assert_uint_eq(resp.n_usage, 2);
	node_response_clear(&resp.base);
	env_done(&v);
}
END_TEST

START_TEST(test_path_down_then_back)
{
	static const char *const states[] = {"connecting", "resetting", "deleting"};
	struct env v;
	staged(&v);
	tu_write(v.sys, "class/nvme/nvme3/ctrl_loss_tmo", "30\n");
	for (int i = 0; i < 3; i++) {
		char state[64];
		snprintf(state, sizeof(state), "%s\n", states[i]);
		tu_write(v.sys, "class/nvme/nvme3/state", state);
		Csi__V1__NodeGetVolumeStatsResponse resp = stats(&v, GRPC_OK);
		ck_assert(resp.volume_condition->abnormal);
		const char *m = resp.volume_condition->message;
		char want[256];
		snprintf(want, sizeof(want), "NVMe controller nvme3 of " NQN " is %s since ",
		         states[i]);
		ck_assert_msg(!strncmp(m, want, strlen(want)), "%s", m);
		ck_assert_msg(strstr(m,
		                     "(first seen by the node plugin); I/O stalls; the kernel "
		                     "removes it in at most 30 s (ctrl_loss_tmo 30 s) unless the "
		                     "target returns") ||
		                  strstr(m, "in at most 29 s (ctrl_loss_tmo 30 s)"),
		              "%s", m);
		ck_assert_uint_eq(resp.n_usage, 2); /* usage still reported */
		node_response_clear(&resp.base);
	}
	tu_write(v.sys, "class/nvme/nvme3/ctrl_loss_tmo", "off\n");
	Csi__V1__NodeGetVolumeStatsResponse resp = stats(&v, GRPC_OK);
	ck_assert_msg(strstr(resp.volume_condition->message,
	                     "I/O stalls; the kernel retries for ever (ctrl_loss_tmo off)"),
	              "%s", resp.volume_condition->message);
	node_response_clear(&resp.base);
	fk_rm(v.sys, "class/nvme/nvme3/ctrl_loss_tmo"); /* a kernel without the attribute */
	resp = stats(&v, GRPC_OK);
	ck_assert_msg(
	    strstr(resp.volume_condition->message, "(ctrl_loss_tmo 600 s, the kernel default)"),
	    "%s", resp.volume_condition->message);
	node_response_clear(&resp.base);
	tu_write(v.sys, "class/nvme/nvme3/state", "live\n");
	resp = stats(&v, GRPC_OK);
	ck_assert(!resp.volume_condition->abnormal);
	node_response_clear(&resp.base);
	env_done(&v);
}
END_TEST

START_TEST(test_removed_controller_says_restart)
{
	struct env v;
	staged(&v);
	fk_rm(v.sys, "class/nvme/nvme3");
	snprintf(v.m.blk_paths[0], sizeof(v.m.blk_paths[0]), "%s", v.staging);
	v.m.blk_size_err = -EIO; /* the device is gone */
	Csi__V1__NodeGetVolumeStatsResponse resp = stats(&v, GRPC_OK);
	ck_assert(resp.volume_condition->abnormal);
	ck_assert_str_eq(
	    resp.volume_condition->message,
	    "the kernel removed the NVMe controller of " NQN " (its ctrl_loss_tmo ran "
	    "out, or it was deleted); the volume no longer works on this node: restart "
	    "the workload so that the volume is staged on a new connection");
	ck_assert_uint_eq(resp.n_usage, 0);
	node_response_clear(&resp.base);
	env_done(&v);
}
END_TEST

/* The seconds left count from the first sighting, which is kept until the volume is live. */
START_TEST(test_seconds_left_from_first_sighting)
{
	struct env v;
	struct node_health h;
	struct node_volume_health out;
	struct node_record r;
	struct nvme_ctx c;
	struct err e = {0};
	health_staged(&v, &h, &r, &c);
	tu_write(v.sys, "class/nvme/nvme3/ctrl_loss_tmo", "600\n");
	tu_write(v.sys, "class/nvme/nvme3/state", "connecting\n");
	ck_assert_int_eq(node_health_check(&h, &c, &r, 1000000, 1764759600, &out, &e), 0);
	ck_assert_msg(strstr(out.message,
	                     "is connecting since 2025-12-03T11:00:00Z (first seen by "
	                     "the node plugin); I/O stalls; the kernel removes it in at "
	                     "most 600 s (ctrl_loss_tmo 600 s)"),
	              "%s", out.message);
	ck_assert_int_eq(node_health_check(&h, &c, &r, 1000000 + 250500, 1764759850, &out, &e), 0);
	ck_assert_msg(strstr(out.message, "since 2025-12-03T11:00:00Z (first seen by the node "
	                                  "plugin); I/O stalls; the kernel removes it in at most "
	                                  "350 s"),
	              "%s", out.message);
	ck_assert_int_eq(node_health_check(&h, &c, &r, 1000000 + 700000, 1764760300, &out, &e), 0);
	ck_assert_msg(strstr(out.message, "in at most 0 s"), "%s", out.message);
	tu_write(v.sys, "class/nvme/nvme3/state", "live\n"); /* back: the sighting is forgotten */
	ck_assert_int_eq(node_health_check(&h, &c, &r, 2000000, 1764761000, &out, &e), 0);
	ck_assert(!out.abnormal);
	tu_write(v.sys, "class/nvme/nvme3/state", "resetting\n");
	ck_assert_int_eq(node_health_check(&h, &c, &r, 2000000, 1764761000, &out, &e), 0);
	ck_assert_msg(strstr(out.message, "is resetting since 2025-12-03T11:23:20Z"), "%s",
	              out.message);
	ck_assert_msg(strstr(out.message, "in at most 600 s"), "%s", out.message);
	node_health_fini(&h);
	env_done(&v);
}
END_TEST

/* /metrics: the staged volume's path as the same sysfs reading sees it, and the connect. */
START_TEST(test_metrics_follow_the_path)
{
	struct env v;
	struct metrics_text t = {0};
	staged(&v);
	node_metrics_register(v.n);
	const char *lab = "{volume_id=\"" VOL "\"} ";
	char want[512];
	metrics_write(&t);
	ck_assert_ptr_nonnull(strstr(t.buf, "\npillar_csi_node_staged_volumes 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\npillar_csi_node_connects_total{result=\"success\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(t.buf, "\npillar_csi_node_connect_duration_seconds_count 1\n"));
	snprintf(want, sizeof(want), "\npillar_csi_node_volume_path_live%s1\n", lab);
	ck_assert_msg(strstr(t.buf, want), "%s", want);
	metrics_text_free(&t);
	tu_write(v.sys, "class/nvme/nvme3/ctrl_loss_tmo", "30\n");
	tu_write(v.sys, "class/nvme/nvme3/state", "connecting\n");
	metrics_write(&t);
	snprintf(want, sizeof(want), "\npillar_csi_node_volume_path_live%s0\n", lab);
	ck_assert_msg(strstr(t.buf, want), "%s", want);
	snprintf(want, sizeof(want), "\npillar_csi_node_volume_ctrl_loss_tmo_seconds%s30\n", lab);
	ck_assert_msg(strstr(t.buf, want), "%s", want);
	snprintf(want, sizeof(want), "\npillar_csi_node_volume_path_down_seconds%s", lab);
	ck_assert_msg(strstr(t.buf, want), "%s", want);
	metrics_text_free(&t);
	fk_rm(v.sys, "class/nvme/nvme3");
	metrics_write(&t);
	snprintf(want, sizeof(want), "\npillar_csi_node_volume_controller_removed%s1\n", lab);
	ck_assert_msg(strstr(t.buf, want), "%s", want);
	ck_assert_ptr_null(strstr(t.buf, "\npillar_csi_node_volume_ctrl_loss_tmo_seconds{"));
	metrics_text_free(&t);
	metrics_unregister_collector(node_metrics_collect, v.n);
	env_done(&v);
}
END_TEST

static char reported[4][1024];
static int n_reported;

static void report(void *ctx, const char *node_id, const char *json)
{
	(void)ctx;
	if (n_reported < 4)
		snprintf(reported[n_reported++], sizeof(reported[0]), "%s %s", node_id, json);
}

/* The lost set goes to the reporter when it changes: the removal adds the volume with the time
 * the node plugin first saw it gone, a repeat reports nothing, the volume live again empties it. */
START_TEST(test_lost_volumes_reported)
{
	struct env v;
	struct node_health h;
	struct node_volume_health out;
	struct node_record r;
	struct nvme_ctx c;
	struct err e = {0};
	health_staged(&v, &h, &r, &c);
	h.report = report;
	h.node_id = "worker-1";
	n_reported = 0;
	ck_assert_int_eq(node_health_check(&h, &c, &r, 1000, 1764759600, &out, &e), 0);
	ck_assert_int_eq(n_reported, 0); /* live: nothing to report */
	fk_rm(v.sys, "class/nvme/nvme3");
	ck_assert_int_eq(node_health_check(&h, &c, &r, 2000, 1764759601, &out, &e), 0);
	ck_assert_int_eq(node_health_check(&h, &c, &r, 3000, 1764759602, &out, &e), 0);
	ck_assert_int_eq(n_reported, 1);
	ck_assert_str_eq(reported[0], "worker-1 {\"" VOL "\":\"2025-12-03T11:00:01Z\"}");
	fk_ctrl(v.sys, 4, NQN, "live", "10.0.0.5", "4420"); /* restaged on a new connection */
	ck_assert_int_eq(node_health_check(&h, &c, &r, 4000, 1764759700, &out, &e), 0);
	ck_assert_int_eq(n_reported, 2);
	ck_assert_str_eq(reported[1], "worker-1 {}");
	node_health_fini(&h);
	env_done(&v);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("node_health");
	TCase *tc = tcase_create("health");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_live_is_healthy);
	tcase_add_test(tc, test_path_down_then_back);
	tcase_add_test(tc, test_removed_controller_says_restart);
	tcase_add_test(tc, test_seconds_left_from_first_sighting);
	tcase_add_test(tc, test_metrics_follow_the_path);
	tcase_add_test(tc, test_lost_volumes_reported);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
