/* The controller's /healthz, /readyz and /metrics endpoints (deploy.md §1.3). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include "controller/probes.h"
#include "controller/readiness.h"
#include "ctl_fixture.h"
#include "testutil.h"

static void get(int port, const char *request, char *out, size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	size_t n = 0;
	ssize_t r;
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(write(fd, request, strlen(request)), (ssize_t)strlen(request));
	while (n < cap - 1 && (r = read(fd, out + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(fd);
}

START_TEST(test_endpoints)
{
	struct probes *p;
	struct err e = {0};
	char buf[16384];
	ck_assert_int_eq(probes_start(&fx_c, "127.0.0.1:0", "127.0.0.1:0", &p, &e), 0);
	int hp = probes_port(p, 0), mp = probes_port(p, 1);
	ck_assert_int_gt(hp, 0);
	ck_assert_int_gt(mp, 0);
	get(hp, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof(buf));
	ck_assert_msg(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", buf);
	ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\nok\n"));
	get(hp, "GET /readyz HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	ck_assert_msg(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", buf);
	get(hp, "GET /metrics HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	ck_assert_msg(strncmp(buf, "HTTP/1.1 404", 12) == 0, "%s", buf);
	get(mp, "GET /metrics HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, "pillar_csi_build_info{version=\""));
	ck_assert_ptr_nonnull(strstr(buf, "pillar_csi_store_ready 1\n"));
	ck_assert_ptr_nonnull(strstr(buf, "\nprocess_resident_memory_bytes "));
	ck_assert_ptr_nonnull(strstr(buf, "\nprocess_open_fds "));
	get(mp, "POST / HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	ck_assert_msg(strncmp(buf, "HTTP/1.1 400", 12) == 0, "%s", buf);
	probes_stop(p);
	probes_stop(NULL);

	/* "0" disables a listener */
	ck_assert_int_eq(probes_start(&fx_c, "127.0.0.1:0", "0", &p, &e), 0);
	ck_assert_int_eq(probes_port(p, 1), -1);
	probes_stop(p);
	/* a bad address is an error that names it */
	ck_assert_int_lt(probes_start(&fx_c, "no-port-here", NULL, &p, &e), 0);
	ck_assert_ptr_null(p);
}
END_TEST

/* A store that cannot answer a list (a lost API server, an unreadable store directory). */
static int broken_list(store *s, const struct store_kind *k, const char *ns, const char *selector,
                       cJSON **items, uint64_t *list_rv, struct err *e)
{
	(void)s, (void)k, (void)ns, (void)selector, (void)list_rv;
	*items = NULL;
	return err_set(e, -EIO, "store unreachable");
}

START_TEST(test_readyz_when_store_broken)
{
	int status;
	struct metrics_text body = {0};
	/* one corrupt PillarAgent is that object's problem: the store still answers */
	fx_put("PillarAgent", NULL, "a1", NULL, "{}", NULL);
	char path[700];
	snprintf(path, sizeof(path), "%s/pillaragents/a1.json", fx_dir);
	FILE *f = fopen(path, "w");
	fputs("{\"trunc", f);
	fclose(f);
	probes_answer(&fx_c, false, "/readyz", &status, &body);
	ck_assert_int_eq(status, 200);
	metrics_text_free(&body);
	/* a store that cannot list is not ready */
	static const struct store_ops broken_ops = {.list = broken_list};
	struct store broken = {&broken_ops};
	store *good = fx_c.st;
	fx_c.st = &broken;
	probes_answer(&fx_c, false, "/readyz", &status, &body);
	ck_assert_int_eq(status, 503);
	metrics_text_free(&body);
	probes_answer(&fx_c, false, "/healthz", &status, &body);
	ck_assert_int_eq(status, 200);
	metrics_text_free(&body);
	probes_answer(&fx_c, true, "/metrics", &status, &body);
	ck_assert_ptr_nonnull(strstr(body.buf, "pillar_csi_store_ready 0\n"));
	metrics_text_free(&body);
	fx_c.st = good;
}
END_TEST

/* A store in front of the fixture's that counts lists and fails (broken) or hangs (hang) them on
 * demand: what the readiness thread sees of an API server that refuses or stops answering. */
static atomic_int switch_lists;
static atomic_bool switch_broken, switch_hang;

static int switch_list(store *s, const struct store_kind *k, const char *ns, const char *selector,
                       cJSON **items, uint64_t *list_rv, struct err *e)
{
	(void)s;
	atomic_fetch_add(&switch_lists, 1);
	while (atomic_load(&switch_hang))
		usleep(1000);
	if (atomic_load(&switch_broken)) {
		*items = NULL;
		return err_set(e, -EIO, "store unreachable");
	}
	return store_list(fx_st, k, ns, selector, items, list_rv, e);
}

static const struct store_ops switch_ops = {.list = switch_list};
static struct store switch_store = {&switch_ops};

/* The controller's store becomes the switch, its readiness r (started by the test). */
static void switch_reset(void)
{
	atomic_store(&switch_lists, 0);
	atomic_store(&switch_broken, false);
	atomic_store(&switch_hang, false);
	fx_c.st = &switch_store;
}

static void switch_done(struct ctl_readiness *r)
{
	fx_c.readiness = NULL;
	fx_c.st = fx_st;
	ctl_readiness_stop(r);
}

static bool probe_says_ready(void)
{
	Csi__V1__ProbeResponse resp = CSI__V1__PROBE_RESPONSE__INIT;
	struct grpc_status gs = {0};
	ck_assert_int_eq(csi_probe(&fx_c, NULL, &resp, &gs), GRPC_OK);
	ck_assert_ptr_nonnull(resp.ready);
	bool ready = resp.ready->value;
	free(resp.ready);
	return ready;
}

/* Probe's answer turns to want within 10 s (the readiness thread's next checks see the change;
 * generous for a loaded machine: the thread checks every 20 ms). */
static bool probe_becomes(bool want)
{
	for (int i = 0; i < 1000; i++) {
		if (probe_says_ready() == want)
			return true;
		usleep(10000);
	}
	return false;
}

/* Probe, /readyz and the store_ready gauge answer from the readiness thread's last check: no
 * store call on the call path, so no file, network or lock of the store's per call. */
START_TEST(test_probe_makes_no_store_call)
{
	struct ctl_readiness r = {.st = &switch_store, .interval_ms = 3600 * 1000};
	struct err e = {0};
	int status;
	switch_reset();
	fx_put("PillarAgent", NULL, "a1", NULL, "{}", NULL);
	ck_assert_int_eq(ctl_readiness_start(&r, &e), 0);
	int lists = atomic_load(&switch_lists);
	ck_assert_int_eq(lists, 1); /* the first check, at start */
	fx_c.readiness = &r;
	for (int i = 0; i < 1000; i++)
		ck_assert(probe_says_ready());
	for (int i = 0; i < 100; i++) {
		struct metrics_text body = {0};
		probes_answer(&fx_c, false, "/readyz", &status, &body);
		ck_assert_int_eq(status, 200);
		metrics_text_free(&body);
	}
	lists = atomic_load(&switch_lists);
	ck_assert_int_eq(lists, 1);
	switch_done(&r);
	ctl_readiness_stop(&r); /* stopped: a no-op */
}
END_TEST

/* A store that stops answering turns Probe and /readyz to not ready within a few checks, and
 * back to ready once it answers again. */
START_TEST(test_readiness_follows_store)
{
	struct ctl_readiness r = {.st = &switch_store, .interval_ms = 20};
	struct err e = {0};
	int status;
	struct metrics_text body = {0};
	switch_reset();
	ck_assert_int_eq(ctl_readiness_start(&r, &e), 0);
	fx_c.readiness = &r;
	ck_assert(probe_says_ready());
	atomic_store(&switch_broken, true);
	ck_assert(probe_becomes(false));
	probes_answer(&fx_c, false, "/readyz", &status, &body);
	ck_assert_int_eq(status, 503);
	metrics_text_free(&body);
	probes_answer(&fx_c, true, "/metrics", &status, &body);
	ck_assert_ptr_nonnull(strstr(body.buf, "pillar_csi_store_ready 0\n"));
	metrics_text_free(&body);
	atomic_store(&switch_broken, false);
	ck_assert(probe_becomes(true));
	probes_answer(&fx_c, false, "/readyz", &status, &body);
	ck_assert_int_eq(status, 200);
	metrics_text_free(&body);
	switch_done(&r);
}
END_TEST

/* A check that hangs (an API server that accepts and never answers) turns the answer to not
 * ready once stale_ms have passed since the last success; the check's return brings it back. */
START_TEST(test_readiness_stale_when_check_hangs)
{
	struct ctl_readiness r = {.st = &switch_store, .interval_ms = 20, .stale_ms = 200};
	struct err e = {0};
	switch_reset();
	/* starting with a store that is down: not ready from the first call */
	atomic_store(&switch_broken, true);
	ck_assert_int_eq(ctl_readiness_start(&r, &e), 0);
	fx_c.readiness = &r;
	ck_assert(!probe_says_ready());
	atomic_store(&switch_broken, false);
	ck_assert(probe_becomes(true));
	atomic_store(&switch_hang, true);
	ck_assert(probe_becomes(false));
	atomic_store(&switch_hang, false);
	ck_assert(probe_becomes(true));
	switch_done(&r);
}
END_TEST

/* The embedded store answers the list from memory: its directory and its lock are checked
 * apart (csi.md §1.1).  A directory that goes away turns the controller not ready, and ready
 * again when it is back; so does a lock file replaced under it (another controller could lock
 * the new one).  Renames and links, not modes: the tests run as root, which passes mode bits. */
START_TEST(test_readiness_follows_store_dir)
{
	struct ctl_readiness r = {.st = fx_st, .interval_ms = 20};
	struct err e = {0};
	char away[600], lock[600], kept[600];
	snprintf(away, sizeof(away), "%s.away", fx_dir);
	snprintf(lock, sizeof(lock), "%s/.lock", fx_dir);
	snprintf(kept, sizeof(kept), "%s/.lock.kept", fx_dir);
	ck_assert_int_eq(ctl_readiness_start(&r, &e), 0);
	fx_c.readiness = &r;
	ck_assert(probe_says_ready());
	ck_assert_int_eq(store_health(fx_st, &e), 0);

	ck_assert_int_eq(rename(fx_dir, away), 0);
	ck_assert(probe_becomes(false));
	ck_assert_int_eq(store_health(fx_st, &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "is not readable and writable"));
	ck_assert_int_eq(rename(away, fx_dir), 0);
	ck_assert(probe_becomes(true));

	/* .lock replaced: the new file is not locked, another controller's flock succeeds */
	ck_assert_int_eq(link(lock, kept), 0);
	ck_assert_int_eq(unlink(lock), 0);
	int other = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(other, 0);
	ck_assert_int_eq(flock(other, LOCK_EX | LOCK_NB), 0);
	ck_assert(probe_becomes(false));
	ck_assert_int_eq(store_health(fx_st, &e), -ENOLCK);
	ck_assert_ptr_nonnull(strstr(e.msg, "no longer holds its lock"));
	close(other);
	ck_assert_int_eq(rename(kept, lock), 0);
	ck_assert(probe_becomes(true));
	fx_c.readiness = NULL;
	ctl_readiness_stop(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_probes");
	TCase *t = tcase_create("probes");
	tcase_add_checked_fixture(t, fx_setup, fx_teardown);
	tcase_set_timeout(t, 20);
	tcase_add_test(t, test_endpoints);
	tcase_add_test(t, test_readyz_when_store_broken);
	tcase_add_test(t, test_probe_makes_no_store_call);
	tcase_add_test(t, test_readiness_follows_store);
	tcase_add_test(t, test_readiness_stale_when_check_hangs);
	tcase_add_test(t, test_readiness_follows_store_dir);
	suite_add_tcase(s, t);
	return tu_run(s);
}
