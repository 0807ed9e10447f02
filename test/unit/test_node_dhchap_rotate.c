/* The node's DH-HMAC-CHAP rotation (docs/authentication.md "Rotation"): publication, the
 * controller's confirmation, two generations of one secret each, one attribute per live
 * controller and pass, a restart between the halves, and new connects between them. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/dhchap.h"
#include "node/dhchap_rotate.h"
#include "node/internal.h"
#include "node_dhchap_fixture.h"

/* Hooks of the rotation test: what the controller confirmed and the Node annotation's value,
 * and the Secrets "created". */
struct fake_api {
	uint64_t confirmed;
	char request[64];
	int publishes, publish_rc;
	uint64_t published_gen;
	char published_key[NVME_DHCHAP_SECRET_MAX];
};
static int fa_confirmed(void *ctx, const char *node, uint64_t *gen, struct err *e)
{
	(void)node;
	(void)e;
	*gen = ((struct fake_api *)ctx)->confirmed;
	return 0;
}
static int fa_requested(void *ctx, const char *node, char *buf, size_t cap, struct err *e)
{
	(void)node;
	(void)e;
	snprintf(buf, cap, "%s", ((struct fake_api *)ctx)->request);
	return 0;
}
static int fa_publish(void *ctx, const char *node, const struct model_dhchap_file *k, struct err *e)
{
	struct fake_api *a = ctx;
	ck_assert_str_eq(node, "worker-1");
	a->publishes++;
	if (a->publish_rc)
		return err_set(e, a->publish_rc, "fake publish failed");
	a->published_gen = k->next.generation;
	snprintf(a->published_key, sizeof(a->published_key), "%s", k->next.key);
	return 0;
}

/* A fake live controller nvme<i> authenticating with g. */
static void live_ctrl(struct env *v, int i, const struct model_dhchap_generation *g, bool bidi)
{
	tu_write(v->sys, fmt("class/nvme/nvme%d/dhchap_secret", i), fmt("%s\n", g->key));
	tu_write(v->sys, fmt("class/nvme/nvme%d/dhchap_ctrl_secret", i),
	         bidi ? fmt("%s\n", g->ctrl_key) : "none\n");
}

#define UNWRITTEN_MTIME 1000000000 /* the mtime of an attribute nothing wrote since marked */

/* Marks both secret attributes of nvme1 … nvme<count> unwritten: a later write (even of the same
 * value) changes the mtime, which is how a test tells which attributes the node wrote. */
static void mark_unwritten(struct env *v, int count)
{
	static const char *const attrs[] = {"dhchap_secret", "dhchap_ctrl_secret"};
	for (int i = 1; i <= count; i++)
		for (int a = 0; a < 2; a++) {
			struct timespec ts[2] = {{UNWRITTEN_MTIME, 0}, {UNWRITTEN_MTIME, 0}};
			ck_assert_int_eq(
			    utimensat(AT_FDCWD, fmt("%s/class/nvme/nvme%d/%s", v->sys, i, attrs[a]),
			              ts, 0),
			    0);
		}
}

/* Whether the node wrote nvme<i>'s attr since mark_unwritten. */
static bool written(struct env *v, int i, const char *attr)
{
	struct stat sb;
	ck_assert_int_eq(stat(fmt("%s/class/nvme/nvme%d/%s", v->sys, i, attr), &sb), 0);
	return sb.st_mtim.tv_sec != UNWRITTEN_MTIME;
}

/* Confirmed keys of generation gen (made by the first tick at gen) in *k. */
static void first_keys(struct env *v, struct fake_api *a, const struct node_dhchap_hooks *h,
                       uint64_t gen, struct model_dhchap_file *k)
{
	struct err e = {0};
	ck_assert_int_eq(node_dhchap_tick(v->n, h, gen, 0, &e), 0);
	ck_assert_int_eq(model_dhchap_file_read(v->state, k, &e), 0);
	ck_assert(k->has_next && !k->has_current);
	ck_assert_uint_eq(a->published_gen, k->next.generation);
	a->confirmed = k->next.generation;
	ck_assert_int_eq(node_dhchap_tick(v->n, h, gen + 1, 0, &e), 0);
	ck_assert_int_eq(model_dhchap_file_read(v->state, k, &e), 0);
	ck_assert(k->has_current && !k->has_next && !k->ctrl_key_due);
	ck_assert_uint_eq(k->current.generation, gen);
}

/* The key file after a step of a rotation, read into *k: its next generation, gen, is half
 * `half` of a rotation from `from` (1: a new host secret with from's controller secret, the
 * controller secret then due; 2: from's host secret with a new controller secret). */
static void expect_half(struct env *v, int half, uint64_t gen,
                        const struct model_dhchap_generation *from, struct model_dhchap_file *k)
{
	struct err e = {0};
	ck_assert_msg(model_dhchap_file_read(v->state, k, &e) == 0, "%s", e.msg);
	ck_assert_msg(k->has_next && k->next.generation == gen,
	              "half %d: want next generation %llu, have %s%llu", half,
	              (unsigned long long)gen, k->has_next ? "" : "none, ",
	              (unsigned long long)k->next.generation);
	bool host_new = strcmp(k->next.key, from->key) != 0,
	     ctrl_new = strcmp(k->next.ctrl_key, from->ctrl_key) != 0;
	ck_assert_msg(host_new == (half == 1) && ctrl_new == (half == 2) &&
	                  k->ctrl_key_due == (half == 1),
	              "generation %llu, half %d: new host secret %d, new controller secret %d, "
	              "controller secret due %d",
	              (unsigned long long)gen, half, host_new, ctrl_new, k->ctrl_key_due);
}

/* docs/authentication.md "Rotation": a rotation is two generations, each changing one secret,
 * and each live controller gets one attribute per generation, so that every re-authentication
 * pairs secrets the target holds (with both at once, the first of two writes pairs the new host
 * secret with the old controller secret, which the target refuses). */
START_TEST(test_rotation_publish_confirm_live)
{
	struct env v;
	struct fake_api a = {0};
	struct node_dhchap_hooks h = {fa_confirmed, fa_requested, fa_publish, &a};
	struct model_dhchap_file k0, k1, k2, k;
	struct model_dhchap_generation other;
	struct err e = {0};
	env_dhchap(&v);
	int fd = log_to(&v);
	first_keys(&v, &a, &h, 1000, &k0);
	ck_assert_int_eq(a.publishes, 1);
	/* two live controllers with the current keys (one bidirectional), one with other keys */
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 5, &other, &e), 0);
	live_ctrl(&v, 1, &k0.current, true);
	live_ctrl(&v, 2, &k0.current, false);
	live_ctrl(&v, 3, &other, true);
	mark_unwritten(&v, 3);
	/* a request: the first half, a new host secret with the current controller secret,
	 * published; nothing live changes before the confirmation */
	snprintf(a.request, sizeof(a.request), "2026-12-06T19:00:00Z");
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1003, 0, &e), 0);
	expect_half(&v, 1, 1003, &k0.current, &k1);
	ck_assert(k1.has_current);
	ck_assert_str_eq(k1.rotate_request, a.request);
	ck_assert_ptr_nonnull(strstr(tu_read(v.state, "dhchap.key"), "\"ctrlKeyDue\":true}"));
	ck_assert_int_eq(a.publishes, 2);
	ck_assert_str_eq(a.published_key, k1.next.key);
	/* the same request again does nothing */
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1004, 0, &e), 0);
	ck_assert_int_eq(a.publishes, 2);
	for (int i = 1; i <= 3; i++)
		ck_assert(!written(&v, i, "dhchap_secret") &&
		          !written(&v, i, "dhchap_ctrl_secret"));
	/* confirmed: the live controllers of the current keys get the host secret only; the
	 * second half (a new controller secret, the same host secret) is made and published */
	a.confirmed = 1003;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1005, 0, &e), 0);
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme1/dhchap_secret"),
	                 fmt("%s\n", k1.next.key));
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme2/dhchap_secret"),
	                 fmt("%s\n", k1.next.key));
	ck_assert(!written(&v, 1, "dhchap_ctrl_secret") && !written(&v, 2, "dhchap_ctrl_secret"));
	ck_assert(!written(&v, 3, "dhchap_secret") && !written(&v, 3, "dhchap_ctrl_secret"));
	expect_half(&v, 2, 1005, &k1.next, &k2);
	ck_assert(k2.has_current);
	ck_assert_int_eq(memcmp(&k2.current, &k1.next, sizeof(k2.current)), 0);
	ck_assert_str_eq(k2.rotate_request, a.request);
	ck_assert_int_eq(a.publishes, 3);
	ck_assert_uint_eq(a.published_gen, 1005);
	/* confirmed: the bidirectional controller gets the controller secret only */
	mark_unwritten(&v, 3);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1006, 0, &e), 0);
	ck_assert(!written(&v, 1, "dhchap_ctrl_secret"));
	a.confirmed = 1005;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1007, 0, &e), 0);
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme1/dhchap_ctrl_secret"),
	                 fmt("%s\n", k2.next.ctrl_key));
	ck_assert(!written(&v, 1, "dhchap_secret"));
	ck_assert(!written(&v, 2, "dhchap_secret") && !written(&v, 2, "dhchap_ctrl_secret"));
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme2/dhchap_ctrl_secret"), "none\n");
	ck_assert(!written(&v, 3, "dhchap_secret") && !written(&v, 3, "dhchap_ctrl_secret"));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k, &e), 0);
	ck_assert(k.has_current && !k.has_next && !k.ctrl_key_due);
	ck_assert_int_eq(memcmp(&k.current, &k2.next, sizeof(k.current)), 0);
	/* done: the same request starts no third generation */
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1008, 0, &e), 0);
	ck_assert_int_eq(a.publishes, 3);
	/* a failed publish is retried at the next step; AlreadyExists counts as published */
	snprintf(a.request, sizeof(a.request), "2026-12-06T20:00:00Z");
	a.publish_rc = -EIO;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 5000, 0, &e), -EIO);
	a.publish_rc = -EEXIST;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 5001, 0, &e), 0);
	a.publish_rc = 0;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 5002, 0, &e), 0);
	ck_assert_int_eq(a.publishes, 5);
	log_back(fd);
	/* no generation's key in the log of all this at --v=5 */
	ck_assert_ptr_nonnull(strstr(tu_read(v.root, "node.log"), "written to a live controller"));
	no_key_in(v.root, "node.log", &k0.current);
	no_key_in(v.root, "node.log", &k1.next);
	no_key_in(v.root, "node.log", &k2.next);
	env_done(&v);
}
END_TEST

/* The schedule rotates the same way: two generations, one secret each. */
START_TEST(test_rotation_interval_two_halves)
{
	struct env v;
	struct fake_api a = {0};
	struct node_dhchap_hooks h = {fa_confirmed, fa_requested, fa_publish, &a};
	struct model_dhchap_file k0, k1, k2;
	struct err e = {0};
	env_dhchap(&v);
	first_keys(&v, &a, &h, 1000, &k0);
	live_ctrl(&v, 1, &k0.current, true);
	mark_unwritten(&v, 1);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1099, 100, &e), 0);
	ck_assert_int_eq(a.publishes, 1);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1100, 100, &e), 0);
	ck_assert_int_eq(a.publishes, 2);
	expect_half(&v, 1, 1100, &k0.current, &k1);
	ck_assert_str_eq(k1.rotate_request, ""); /* no request was acted on */
	a.confirmed = 1100;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1101, 100, &e), 0);
	ck_assert(written(&v, 1, "dhchap_secret") && !written(&v, 1, "dhchap_ctrl_secret"));
	expect_half(&v, 2, 1101, &k1.next, &k2);
	mark_unwritten(&v, 1);
	a.confirmed = 1101;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1102, 100, &e), 0);
	ck_assert(!written(&v, 1, "dhchap_secret") && written(&v, 1, "dhchap_ctrl_secret"));
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k0, &e), 0);
	ck_assert(k0.has_current && !k0.has_next && !k0.ctrl_key_due);
	ck_assert_uint_eq(k0.current.generation, 1101);
	ck_assert_int_eq(a.publishes, 3);
	/* the interval counts from the generation that finished the rotation */
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1200, 100, &e), 0);
	ck_assert_int_eq(a.publishes, 3);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 1201, 100, &e), 0);
	ck_assert_int_eq(a.publishes, 4);
	env_done(&v);
}
END_TEST

/* A node plugin restarted between the halves (the key file says the controller secret is due)
 * finishes the rotation with the second half: it neither starts a third generation for the
 * request it already acted on nor changes the host secret again. */
START_TEST(test_rotation_resumes_after_restart)
{
	struct env v;
	struct fake_api a = {0};
	struct node_dhchap_hooks h = {fa_confirmed, fa_requested, fa_publish, &a};
	struct model_dhchap_file k, k2;
	struct model_dhchap_generation g18;
	struct err e = {0};
	/* restarted after the first half became current */
	env_dhchap(&v);
	keys_confirmed(&v, false, &k);
	k.ctrl_key_due = true;
	snprintf(k.rotate_request, sizeof(k.rotate_request), "r1");
	ck_assert_int_eq(model_dhchap_file_write(v.state, &k, &e), 0);
	snprintf(a.request, sizeof(a.request), "r1");
	a.confirmed = 17;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 100, 0, &e), 0);
	expect_half(&v, 2, 100, &k.current, &k2);
	ck_assert_str_eq(k2.rotate_request, "r1");
	ck_assert_int_eq(a.publishes, 1);
	a.confirmed = 100;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 101, 0, &e), 0);
	ck_assert_int_eq(model_dhchap_file_read(v.state, &k2, &e), 0);
	ck_assert(k2.has_current && !k2.has_next && !k2.ctrl_key_due);
	ck_assert_int_eq(a.publishes, 1);
	env_done(&v);
	/* restarted while the first half waited for its confirmation: published again (the Secret
	 * exists), confirmed, live controllers get the host secret, then the second half */
	env_dhchap(&v);
	keys_confirmed(&v, false, &k);
	ck_assert_int_eq(node_dhchap_gen_rotate(HOSTNQN, 18, &k.current, false, &g18, &e), 0);
	k.next = g18;
	k.has_next = true;
	k.ctrl_key_due = true;
	snprintf(k.rotate_request, sizeof(k.rotate_request), "r1");
	ck_assert_int_eq(model_dhchap_file_write(v.state, &k, &e), 0);
	live_ctrl(&v, 1, &k.current, true);
	mark_unwritten(&v, 1);
	memset(&a, 0, sizeof(a));
	snprintf(a.request, sizeof(a.request), "r1");
	a.publish_rc = -EEXIST;
	a.confirmed = 18;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 19, 0, &e), 0);
	ck_assert(written(&v, 1, "dhchap_secret") && !written(&v, 1, "dhchap_ctrl_secret"));
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme1/dhchap_secret"), fmt("%s\n", g18.key));
	expect_half(&v, 2, 19, &g18, &k2);
	ck_assert(k2.has_current);
	ck_assert_uint_eq(k2.current.generation, 18);
	ck_assert_int_eq(a.publishes, 2);
	env_done(&v);
}
END_TEST

/* A `next` that changes both secrets (a key file written before rotations had two halves)
 * becomes a first half at a higher generation; the other half follows. */
START_TEST(test_rotation_splits_a_next_of_both_secrets)
{
	struct env v;
	struct fake_api a = {0};
	struct node_dhchap_hooks h = {fa_confirmed, fa_requested, fa_publish, &a};
	struct model_dhchap_file k, k2;
	struct err e = {0};
	env_dhchap(&v);
	keys_confirmed(&v, true, &k); /* current 17, next 18 with two new secrets */
	a.confirmed = 18;             /* confirmed before the upgrade: now outranked */
	live_ctrl(&v, 1, &k.current, true);
	mark_unwritten(&v, 1);
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 5, 0, &e), 0);
	ck_assert(!written(&v, 1, "dhchap_secret") && !written(&v, 1, "dhchap_ctrl_secret"));
	expect_half(&v, 1, 19, &k.current, &k2);
	ck_assert_str_eq(k2.next.key, k.next.key); /* the host secret of the old next */
	ck_assert_uint_eq(a.published_gen, 19);
	a.confirmed = 19;
	ck_assert_int_eq(node_dhchap_tick(v.n, &h, 6, 0, &e), 0);
	ck_assert(written(&v, 1, "dhchap_secret") && !written(&v, 1, "dhchap_ctrl_secret"));
	struct model_dhchap_generation first = k2.next;
	expect_half(&v, 2, 20, &first, &k2);
	ck_assert_uint_eq(k2.current.generation, 19);
	env_done(&v);
}
END_TEST

/* node_dhchap_live_rotate writes one attribute per controller and pass: the one secret from and
 * to differ in, where the controller holds from's (and, for the controller secret, already to's
 * host secret); keys that differ in both are refused with nothing written. */
START_TEST(test_live_rotate_one_secret_per_pass)
{
	struct env v;
	struct model_dhchap_generation g, host, ctrl, both;
	struct err e = {0};
	env_dhchap(&v);
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 17, &g, &e), 0);
	ck_assert_int_eq(node_dhchap_gen_rotate(HOSTNQN, 18, &g, false, &host, &e), 0);
	ck_assert_int_eq(node_dhchap_gen_rotate(HOSTNQN, 19, &host, true, &ctrl, &e), 0);
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 20, &both, &e), 0);
	ck_assert_str_eq(host.ctrl_key, g.ctrl_key);
	ck_assert_str_ne(host.key, g.key);
	ck_assert_str_eq(ctrl.key, host.key);
	ck_assert_str_ne(ctrl.ctrl_key, host.ctrl_key);
	live_ctrl(&v, 1, &g, true);
	live_ctrl(&v, 2, &g, false);
	mark_unwritten(&v, 2);
	ck_assert_int_eq(node_dhchap_live_rotate(v.sys, &g, &both, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "differ in both secrets"));
	ck_assert_ptr_null(strstr(e.msg, "DHHC"));
	for (int i = 1; i <= 2; i++)
		ck_assert(!written(&v, i, "dhchap_secret") &&
		          !written(&v, i, "dhchap_ctrl_secret"));
	ck_assert_int_eq(node_dhchap_live_rotate(v.sys, &g, &g, &e), 0);
	/* the host secret: both controllers, their controller secret untouched */
	ck_assert_int_eq(node_dhchap_live_rotate(v.sys, &g, &host, &e), 2);
	for (int i = 1; i <= 2; i++) {
		ck_assert_str_eq(tu_read(v.sys, fmt("class/nvme/nvme%d/dhchap_secret", i)),
		                 fmt("%s\n", host.key));
		ck_assert(!written(&v, i, "dhchap_ctrl_secret"));
	}
	/* the controller secret: the bidirectional controller only, its host secret untouched;
	 * a controller still on the old host secret is left alone */
	live_ctrl(&v, 3, &g, true);
	mark_unwritten(&v, 3);
	ck_assert_int_eq(node_dhchap_live_rotate(v.sys, &host, &ctrl, &e), 1);
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme1/dhchap_ctrl_secret"),
	                 fmt("%s\n", ctrl.ctrl_key));
	ck_assert(!written(&v, 1, "dhchap_secret"));
	for (int i = 2; i <= 3; i++)
		ck_assert(!written(&v, i, "dhchap_secret") &&
		          !written(&v, i, "dhchap_ctrl_secret"));
	env_done(&v);
}
END_TEST

/* New connects between the halves: current first, next on EKEYREJECTED.  In the first half the
 * target may hold the new host secret; in the second it may present the new controller secret
 * (the host refuses it with the old one), and a unidirectional connect needs no fallback. */
START_TEST(test_stage_between_the_halves)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	struct model_dhchap_file k;
	struct err e = {0};
	for (int half = 1; half <= 2; half++) {
		env_dhchap(&v);
		keys_confirmed(&v, false, &k);
		if (half == 2) { /* current: a first half's keys */
			struct model_dhchap_generation first;
			ck_assert_int_eq(
			    node_dhchap_gen_rotate(HOSTNQN, 17, &k.current, false, &first, &e), 0);
			k.current = first;
		}
		ck_assert_int_eq(
		    node_dhchap_gen_rotate(HOSTNQN, 18, &k.current, half == 2, &k.next, &e), 0);
		k.has_next = true;
		k.ctrl_key_due = half == 1;
		ck_assert_int_eq(model_dhchap_file_write(v.state, &k, &e), 0);
		if (half == 1)
			v.k.reject_secret = k.current.key;
		else
			v.k.reject_ctrl_secret = k.current.ctrl_key;
		sreq_init(&s, &v, 0, ctx_bi);
		ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
		ck_assert_int_eq(v.k.connects, 2);
		ck_assert_ptr_nonnull(
		    strstr(v.k.last_connect, fmt(",dhchap_secret=%s", k.next.key)));
		ck_assert_ptr_nonnull(
		    strstr(v.k.last_connect, fmt(",dhchap_ctrl_secret=%s", k.next.ctrl_key)));
		env_done(&v);
	}
	/* the second half, unidirectional: the host secret did not change */
	env_dhchap(&v);
	keys_confirmed(&v, false, &k);
	ck_assert_int_eq(node_dhchap_gen_rotate(HOSTNQN, 18, &k.current, true, &k.next, &e), 0);
	k.has_next = true;
	ck_assert_int_eq(model_dhchap_file_write(v.state, &k, &e), 0);
	v.k.reject_ctrl_secret = k.current.ctrl_key;
	sreq_init(&s, &v, 0, ctx_uni);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(v.k.connects, 1);
	ck_assert_ptr_nonnull(strstr(v.k.last_connect, fmt(",dhchap_secret=%s", k.current.key)));
	env_done(&v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_dhchap_rotate");
	TCase *t = tcase_create("rotation");
	tcase_add_test(t, test_rotation_publish_confirm_live);
	tcase_add_test(t, test_rotation_interval_two_halves);
	tcase_add_test(t, test_rotation_resumes_after_restart);
	tcase_add_test(t, test_rotation_splits_a_next_of_both_secrets);
	tcase_add_test(t, test_live_rotate_one_secret_per_pass);
	tcase_add_test(t, test_stage_between_the_halves);
	suite_add_tcase(s, t);
	return tu_run(s);
}
