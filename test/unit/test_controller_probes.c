/* The controller's /healthz, /readyz and /metrics endpoints (deploy.md §1.3). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "controller/probes.h"
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

int main(void)
{
	Suite *s = suite_create("controller_probes");
	TCase *t = tcase_create("probes");
	tcase_add_checked_fixture(t, fx_setup, fx_teardown);
	tcase_set_timeout(t, 20);
	tcase_add_test(t, test_endpoints);
	tcase_add_test(t, test_readyz_when_store_broken);
	suite_add_tcase(s, t);
	return tu_run(s);
}
