/* The allocation-failure sweep (allocfail.h) through mbedtls: this program links mbedtls
 * statically, so --wrap reaches the allocations inside it (Debian builds mbedtls without
 * MBEDTLS_PLATFORM_MEMORY: mbedtls_platform_set_calloc_free does not exist there).  With
 * throwaway certificates (test/unit/fakes/mkcerts.py):
 *  - loading a server and a client configuration (certificates, keys, CAs: X.509 and PK
 *    parsing) fails cleanly or loads;
 *  - a mutual-TLS handshake over a socketpair, the server on a thread, then one byte each way:
 *    either both sides complete and the bytes arrive, or a side ends with an error and a
 *    message, the other side too (never a hang, a crash or a leak). */
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "allocfail.h"
#include "h2/tls.h"

/* Loading the certificates alone makes about 8,000 allocations (bignum arithmetic), a few
 * milliseconds each run under ASan: the brief run samples (allocfail.h, ALLOCFAIL_FULL=1 for
 * every one). */
#define AF_TLS_RUNS 200

static char dir[512];

static const char *f(const char *name, const char *ext)
{
	static char buf[4][700];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s.%s", dir, name, ext);
	return buf[i];
}

static int op_cfg(void *arg, char *why, size_t cap)
{
	struct h2_tls_cfg *s = NULL, *c = NULL;
	struct err e = {0};
	int r = h2_tls_server_cfg_new(&s, f("srv1", "crt"), f("srv1", "key"), f("ca1", "crt"), &e);
	(void)arg;
	if (r == 0)
		r = h2_tls_client_cfg_new(&c, f("ca1", "crt"), f("cli1", "crt"), f("cli1", "key"),
		                          &e);
	h2_tls_cfg_free(s);
	h2_tls_cfg_free(c);
	return r == 0 ? 0 : af_err(&e, r, why, cap);
}

struct side {
	struct h2_tls_cfg *cfg;
	int fd;
	struct h2_tls *t;
	int rc;
	struct err e;
	char got;
};

static void *server_fn(void *arg)
{
	struct side *s = arg;
	s->rc = h2_tls_new(&s->t, s->cfg, s->fd, NULL, &s->e);
	if (s->rc == 0)
		s->rc = h2_tls_handshake(s->t, &s->e);
	if (s->rc == 0 && (h2_tls_read(s->t, &s->got, 1) != 1 || h2_tls_write(s->t, "y", 1) != 1))
		s->rc = err_set(&s->e, -EIO, "server: exchange failed");
	if (s->rc != 0)
		shutdown(s->fd, SHUT_RDWR); /* let the client see the end */
	return NULL;
}

struct cfgs {
	struct h2_tls_cfg *srv, *cli;
};

static int op_handshake(void *arg, char *why, size_t cap)
{
	struct cfgs *x = arg;
	struct side srv = {.cfg = x->srv}, cli = {.cfg = x->cli};
	int sv[2];
	pthread_t th;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return snprintf(why, cap, "socketpair: %s", strerror(errno)), 1;
	srv.fd = sv[0];
	cli.fd = sv[1];
	if (pthread_create(&th, NULL, server_fn, &srv) != 0) {
		close(sv[0]);
		close(sv[1]);
		return -1; /* a thread needs memory too */
	}
	cli.rc = h2_tls_new(&cli.t, x->cli, sv[1], "127.0.0.1", &cli.e);
	if (cli.rc == 0)
		cli.rc = h2_tls_handshake(cli.t, &cli.e);
	if (cli.rc == 0 &&
	    (h2_tls_write(cli.t, "x", 1) != 1 || h2_tls_read(cli.t, &cli.got, 1) != 1))
		cli.rc = err_set(&cli.e, -EIO, "client: exchange failed");
	if (cli.rc != 0)
		shutdown(sv[1], SHUT_RDWR);
	pthread_join(th, NULL);
	h2_tls_free(srv.t);
	h2_tls_free(cli.t);
	close(sv[0]);
	close(sv[1]);
	if (cli.rc == 0 && srv.rc == 0)
		return cli.got == 'y' && srv.got == 'x'
		           ? 0
		           : (snprintf(why, cap, "bytes changed: %c %c", cli.got, srv.got), 1);
	if ((cli.rc && !cli.e.msg[0]) || (srv.rc && !srv.e.msg[0]))
		return snprintf(why, cap, "an error without a message (client %d, server %d)",
		                cli.rc, srv.rc),
		       1;
	return -1;
}

START_TEST(test_tls_out_of_memory)
{
	char cmd[5000], script[4096];
	struct cfgs x = {0};
	struct err e = {0};
	snprintf(dir, sizeof(dir), "%s", tu_mkdtemp());
	ck_assert_ptr_nonnull(realpath("test/unit/fakes/mkcerts.py", script));
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s'", script, dir);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
	af_sweep_max("TLS configuration load (mbedtls)", op_cfg, NULL, AF_TLS_RUNS);
	ck_assert_msg(h2_tls_server_cfg_new(&x.srv, f("srv1", "crt"), f("srv1", "key"),
	                                    f("ca1", "crt"), &e) == 0,
	              "%s", e.msg);
	ck_assert_msg(h2_tls_client_cfg_new(&x.cli, f("ca1", "crt"), f("cli1", "crt"),
	                                    f("cli1", "key"), &e) == 0,
	              "%s", e.msg);
	af_sweep_max("TLS handshake and exchange (mbedtls)", op_handshake, &x, AF_TLS_RUNS);
	h2_tls_cfg_free(x.srv);
	h2_tls_cfg_free(x.cli);
	tu_rmtree(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("allocfail_tls");
	TCase *tc = tcase_create("sweep");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_tls_out_of_memory);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
