/* Unit tests of src/h2: address forms, unix socket replacement rules, the event loop's timers and
 * cross-thread posts, and TLS configuration errors (missing files, mismatched pairs). */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "h2/loop.h"
#include "h2/net.h"
#include "h2/tls.h"
#include "testutil.h"

START_TEST(test_addr_forms)
{
	struct h2_addr a;
	struct err e = {0};

	ck_assert_int_eq(h2_addr_parse("unix:///run/pillar/csi.sock", true, &a, &e), 0);
	ck_assert_int_eq(a.family, AF_UNIX);
	ck_assert_str_eq(((struct sockaddr_un *)&a.sa)->sun_path, "/run/pillar/csi.sock");
	ck_assert_int_eq(h2_addr_parse("unix:/run/x.sock", true, &a, &e), 0);
	ck_assert_int_eq(h2_addr_parse("tcp://127.0.0.1:9500", false, &a, &e), 0);
	ck_assert_int_eq(a.family, AF_INET);
	ck_assert_int_eq(ntohs(((struct sockaddr_in *)&a.sa)->sin_port), 9500);
	ck_assert_str_eq(a.host, "127.0.0.1");
	ck_assert_int_eq(h2_addr_parse("[::1]:9500", false, &a, &e), 0);
	ck_assert_int_eq(a.family, AF_INET6);
	ck_assert_str_eq(a.host, "::1");
	ck_assert_int_eq(h2_addr_parse(":9500", true, &a, &e), 0);
	ck_assert_int_eq(a.family, AF_INET6); /* dual-stack wildcard */

	ck_assert_int_eq(h2_addr_parse("unix://relative.sock", true, &a, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "absolute"));
	ck_assert_int_eq(h2_addr_parse("localhost", false, &a, &e), -EINVAL);
	ck_assert_int_eq(h2_addr_parse("127.0.0.1:70000", false, &a, &e), -EINVAL);
	ck_assert_int_eq(h2_addr_parse(":9500", false, &a, &e), -EINVAL); /* dial needs a host */
	ck_assert_int_eq(h2_addr_parse("::1:9500", false, &a, &e), -EINVAL);
	ck_assert_int_eq(h2_addr_parse("", false, &a, &e), -EINVAL);
}
END_TEST

START_TEST(test_unix_stale_socket)
{
	const char *dir = tu_mkdtemp();
	char url[600], path[512];
	struct h2_addr a;
	struct err e = {0};
	struct stat st;
	int fd, fd2;

	snprintf(path, sizeof(path), "%s/s.sock", dir);
	snprintf(url, sizeof(url), "unix://%s", path);
	ck_assert_int_eq(h2_addr_parse(url, true, &a, &e), 0);
	fd = h2_listen(&a, 0600, &e);
	ck_assert_msg(fd >= 0, "%s", e.msg);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	/* a live listener is not replaced */
	ck_assert_int_eq(h2_listen(&a, 0600, &e), -EADDRINUSE);
	close(fd);
	/* now stale: replaced */
	fd2 = h2_listen(&a, 0660, &e);
	ck_assert_msg(fd2 >= 0, "%s", e.msg);
	close(fd2);
	unlink(path);
	/* a regular file is never removed */
	tu_write(dir, "s.sock", "data");
	ck_assert_int_eq(h2_listen(&a, 0600, &e), -EEXIST);
	ck_assert_str_eq(tu_read(dir, "s.sock"), "data");
	tu_rmtree(dir);
}
END_TEST

static int order[8], norder;
static void note(void *arg)
{
	order[norder++] = (int)(intptr_t)arg;
}

START_TEST(test_loop_timers_and_posts)
{
	struct h2_loop *l;
	struct h2_timer t1 = {0}, t2 = {0}, t3 = {0};
	struct err e = {0};
	uint64_t now = h2_now_ms();

	ck_assert_int_eq(h2_loop_new(&l, &e), 0);
	norder = 0;
	h2_timer_arm(l, &t1, now + 30, note, (void *)1);
	h2_timer_arm(l, &t2, now, note, (void *)2);
	h2_timer_arm(l, &t3, now + 10, note, (void *)3);
	h2_timer_cancel(l, &t1);
	h2_loop_post(l, note, (void *)4);
	usleep(20000);
	h2_loop_run_pending(l);
	ck_assert_int_eq(norder, 3);
	ck_assert_int_eq(order[0], 4); /* posts first, then due timers in time order */
	ck_assert_int_eq(order[1], 2);
	ck_assert_int_eq(order[2], 3);
	/* a started loop runs posts from other threads */
	ck_assert_int_eq(h2_loop_start(l, &e), 0);
	ck_assert_int_eq(h2_loop_run_sync(l, note, (void *)5), 0);
	ck_assert_int_eq(order[3], 5);
	h2_loop_free(l);
	h2_loop_free(NULL);
}
END_TEST

START_TEST(test_tls_config_errors)
{
	const char *dir = tu_mkdtemp();
	struct h2_tls_cfg *c = NULL;
	struct err e = {0};
	char junk[512];

	ck_assert_int_eq(
	    h2_tls_server_cfg_new(&c, "/nonexistent/cert.pem", "/nonexistent/key.pem", NULL, &e),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/cert.pem"));
	ck_assert_int_eq(h2_tls_server_cfg_new(&c, NULL, "/k", NULL, &e), -EINVAL);
	ck_assert_int_eq(h2_tls_client_cfg_new(&c, NULL, NULL, NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "CA"));
	ck_assert_int_eq(h2_tls_client_cfg_new(&c, "/ca", "/cert", NULL, &e), -EINVAL);
	tu_write(dir, "junk.pem",
	         "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
	snprintf(junk, sizeof(junk), "%s/junk.pem", dir);
	ck_assert_int_eq(h2_tls_client_cfg_new(&c, junk, NULL, NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "junk.pem"));
	h2_tls_cfg_free(NULL);
	tu_rmtree(dir);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("h2");
	TCase *t = tcase_create("h2");
	tcase_add_test(t, test_addr_forms);
	tcase_add_test(t, test_unix_stale_socket);
	tcase_add_test(t, test_loop_timers_and_posts);
	tcase_add_test(t, test_tls_config_errors);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
