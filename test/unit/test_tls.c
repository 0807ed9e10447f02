/* h2/tls: certificate rotation (deploy.md §9.5) and the handshake's reasons, with throwaway
 * certificates (test/unit/fakes/mkcerts.py).  Each handshake runs over a socketpair, the server
 * side on a thread.  Rotation: the files a configuration was made from are replaced; the next
 * session uses the new ones (no restart), a session established before keeps working, a set
 * that does not load keeps the previous one, and nothing is re-read before the interval.
 * Reasons: unknown CA, expired certificate, no IP SAN for the dialled address, DNS name
 * mismatch — each in the client's message, which the controller reports. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2/tls.h"
#include "testutil.h"

static char dir[512];

static void setup(void)
{
	char cmd[5000], script[4096];
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	ck_assert_ptr_nonnull(realpath("test/unit/fakes/mkcerts.py", script));
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s'", script, dir);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

static void teardown(void)
{
	tu_rmtree(dir);
}

/* dir/name.ext */
static const char *f(const char *name, const char *ext)
{
	static char buf[4][700];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s.%s", dir, name, ext);
	return buf[i];
}

/* Replaces dir/to.ext with a copy of dir/from.ext (a new inode, as a rotation writes it). */
static void install(const char *from, const char *to, const char *ext)
{
	char cmd[1600];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s.new' && mv '%s.new' '%s'", f(from, ext), f(to, ext),
	         f(to, ext), f(to, ext));
	ck_assert_int_eq(system(cmd), 0);
}

struct side {
	struct h2_tls_cfg *cfg;
	int fd;
	struct h2_tls *t;
	int rc;
	struct err e;
};

static void *server_fn(void *arg)
{
	struct side *s = arg;
	s->rc = h2_tls_new(&s->t, s->cfg, s->fd, NULL, &s->e);
	if (s->rc == 0)
		s->rc = h2_tls_handshake(s->t, &s->e);
	return NULL;
}

struct pair {
	struct side srv, cli;
};

/* One handshake; the client verifies name.  Returns the client's result (e has the reason). */
static int handshake(struct pair *p, struct h2_tls_cfg *srv, struct h2_tls_cfg *cli,
                     const char *name)
{
	int sv[2];
	pthread_t th;
	memset(p, 0, sizeof(*p));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	p->srv.cfg = srv;
	p->srv.fd = sv[0];
	p->cli.cfg = cli;
	p->cli.fd = sv[1];
	ck_assert_int_eq(pthread_create(&th, NULL, server_fn, &p->srv), 0);
	p->cli.rc = h2_tls_new(&p->cli.t, cli, sv[1], name, &p->cli.e);
	if (p->cli.rc == 0)
		p->cli.rc = h2_tls_handshake(p->cli.t, &p->cli.e);
	if (p->cli.rc != 0)
		shutdown(sv[1], SHUT_RDWR); /* let the server side see the end */
	pthread_join(th, NULL);
	return p->cli.rc;
}

static void pair_close(struct pair *p)
{
	h2_tls_free(p->srv.t);
	h2_tls_free(p->cli.t);
	close(p->srv.fd);
	close(p->cli.fd);
}

/* A byte each way over an established pair. */
static void exchange(struct pair *p)
{
	char c = 0;
	ck_assert_int_eq(h2_tls_write(p->cli.t, "x", 1), 1);
	ck_assert_int_eq(h2_tls_read(p->srv.t, &c, 1), 1);
	ck_assert_int_eq(c, 'x');
	ck_assert_int_eq(h2_tls_write(p->srv.t, "y", 1), 1);
	ck_assert_int_eq(h2_tls_read(p->cli.t, &c, 1), 1);
	ck_assert_int_eq(c, 'y');
}

static struct h2_tls_cfg *client(const char *ca)
{
	struct h2_tls_cfg *c = NULL;
	struct err e = {0};
	ck_assert_msg(
	    h2_tls_client_cfg_new(&c, f(ca, "crt"), f("cli1", "crt"), f("cli1", "key"), &e) == 0,
	    "%s", e.msg);
	return c;
}

/* The agent's files: agent.crt/agent.key (from srv1), client CA clientca.crt (ca1). */
static struct h2_tls_cfg *agent(void)
{
	struct h2_tls_cfg *c = NULL;
	struct err e = {0};
	install("srv1", "agent", "crt");
	install("srv1", "agent", "key");
	install("ca1", "clientca", "crt");
	ck_assert_msg(h2_tls_server_cfg_new(&c, f("agent", "crt"), f("agent", "key"),
	                                    f("clientca", "crt"), &e) == 0,
	              "%s", e.msg);
	return c;
}

START_TEST(test_server_rotation)
{
	struct h2_tls_cfg *srv = agent(), *c1 = client("ca1"), *c2 = client("ca2");
	struct pair before, p;
	h2_tls_cfg_set_reload_interval(srv, 0);
	ck_assert_msg(handshake(&before, srv, c1, "127.0.0.1") == 0, "%s", before.cli.e.msg);
	/* the agent's certificate renewed by another CA (files replaced, no restart) */
	install("srv2", "agent", "crt");
	install("srv2", "agent", "key");
	ck_assert_msg(handshake(&p, srv, c2, "127.0.0.1") == 0, "new certificate: %s", p.cli.e.msg);
	pair_close(&p);
	ck_assert_int_eq(handshake(&p, srv, c1, "127.0.0.1"), -EACCES);
	ck_assert_msg(strstr(p.cli.e.msg, "not correctly signed by the trusted CA"), "%s",
	              p.cli.e.msg);
	pair_close(&p);
	/* the session made before the rotation keeps working on its own generation */
	exchange(&before);
	pair_close(&before);
	h2_tls_cfg_free(srv);
	h2_tls_cfg_free(c1);
	h2_tls_cfg_free(c2);
}
END_TEST

START_TEST(test_rotation_waits_for_interval_and_complete_files)
{
	struct h2_tls_cfg *srv = agent(), *c1 = client("ca1");
	struct pair p;
	/* within the interval nothing is re-read */
	h2_tls_cfg_set_reload_interval(srv, 3600000);
	install("srv2", "agent", "crt");
	install("srv2", "agent", "key");
	ck_assert_msg(handshake(&p, srv, c1, "127.0.0.1") == 0, "%s", p.cli.e.msg);
	pair_close(&p);
	/* a rotation caught half-way (certificate of CA2, key still srv1's) does not load: the
	 * current generation stays */
	h2_tls_cfg_set_reload_interval(srv, 0);
	install("srv1", "agent", "key");
	ck_assert_msg(handshake(&p, srv, c1, "127.0.0.1") == 0, "%s", p.cli.e.msg);
	pair_close(&p);
	h2_tls_cfg_free(srv);
	h2_tls_cfg_free(c1);
}
END_TEST

START_TEST(test_client_rotation)
{
	struct h2_tls_cfg *srv = agent(), *cli = NULL;
	struct pair p;
	struct err e = {0};
	install("ca1", "trust", "crt");
	ck_assert_int_eq(
	    h2_tls_client_cfg_new(&cli, f("trust", "crt"), f("cli1", "crt"), f("cli1", "key"), &e),
	    0);
	h2_tls_cfg_set_reload_interval(cli, 0);
	h2_tls_cfg_set_reload_interval(srv, 0);
	ck_assert_msg(handshake(&p, srv, cli, "127.0.0.1") == 0, "%s", p.cli.e.msg);
	pair_close(&p);
	/* both sides move to CA2: the controller's trust file first, then the agent's pair */
	install("ca2", "trust", "crt");
	install("srv2", "agent", "crt");
	install("srv2", "agent", "key");
	ck_assert_msg(handshake(&p, srv, cli, "127.0.0.1") == 0, "%s", p.cli.e.msg);
	pair_close(&p);
	h2_tls_cfg_free(srv);
	h2_tls_cfg_free(cli);
}
END_TEST

/* The handshake's reason, as the controller gets it. */
static void expect_refused(const char *srv_name, const char *trust, const char *verify,
                           const char *reason)
{
	struct h2_tls_cfg *srv = NULL, *cli = client(trust);
	struct pair p;
	struct err e = {0};
	ck_assert_int_eq(h2_tls_server_cfg_new(&srv, f(srv_name, "crt"), f(srv_name, "key"),
	                                       f("ca1", "crt"), &e),
	                 0);
	ck_assert_int_eq(handshake(&p, srv, cli, verify), -EACCES);
	ck_assert_msg(strstr(p.cli.e.msg, reason), "\"%s\" lacks \"%s\"", p.cli.e.msg, reason);
	pair_close(&p);
	h2_tls_cfg_free(srv);
	h2_tls_cfg_free(cli);
}

START_TEST(test_handshake_reasons)
{
	expect_refused("srv1", "ca2", "127.0.0.1", "not correctly signed by the trusted CA");
	expect_refused("srv-expired", "ca1", "127.0.0.1", "validity has expired");
	expect_refused("srv-noip", "ca1", "127.0.0.1", "no IP SAN for the target");
	expect_refused("srv1", "ca1", "agent.example", "does not match with the expected CN");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("tls");
	tcase_add_unchecked_fixture(tc, setup, teardown); /* certificates made once */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_server_rotation);
	tcase_add_test(tc, test_rotation_waits_for_interval_and_complete_files);
	tcase_add_test(tc, test_client_rotation);
	tcase_add_test(tc, test_handshake_reasons);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
