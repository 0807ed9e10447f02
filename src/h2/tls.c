#include "h2/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <mbedtls/asn1.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "base/log.h"
#include "h2/loop.h"

/* One generation of certificates, key and CA with the mbedtls configuration over them.  Every
 * session holds a reference to the generation it was set up with, so a rotation never frees
 * what a handshake in progress or an established session still uses (deploy.md §9.5). */
struct tls_material {
	mbedtls_ssl_config conf;
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	mbedtls_x509_crt ca, cert;
	mbedtls_pk_context key;
	atomic_int refs;
};

#define FILES 3 /* ca, cert, key */

struct h2_tls_cfg {
	bool server;
	bool files; /* made from file names: re-read when they change */
	char *path[FILES];
	struct stat seen[FILES]; /* at the last check (st_ino 0: missing) */
	uint64_t checked_ms, interval_ms;
	pthread_mutex_t mu;
	struct tls_material *cur;
};

struct h2_tls {
	struct h2_tls_cfg *cfg;
	struct tls_material *m;
	mbedtls_ssl_context ssl;
	int fd;
	unsigned char ip[16];
	size_t ip_len; /* 4 or 16 when the verified name is an IP literal */
};

static const int suites[] = {
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    0,
};
static const char *alpn[] = {"h2", NULL};

static int tls_err(struct err *e, int code, const char *what, int mret)
{
	char buf[160];
	mbedtls_strerror(mret, buf, sizeof(buf));
	return err_set(e, code, "%s: %s (-0x%04x)", what, buf, (unsigned)-mret);
}

/* A certificate (chain) from a file, or from PEM text when pem is set. */
static int load_crt(mbedtls_x509_crt *crt, const char *src, bool pem)
{
	if (pem)
		return mbedtls_x509_crt_parse(crt, (const unsigned char *)src, strlen(src) + 1);
	return mbedtls_x509_crt_parse_file(crt, src);
}

static int load_key(mbedtls_pk_context *key, const char *src, bool pem)
{
	if (pem)
		return mbedtls_pk_parse_key(key, (const unsigned char *)src, strlen(src) + 1, NULL,
		                            0);
	return mbedtls_pk_parse_keyfile(key, src, NULL);
}

static void material_unref(struct tls_material *m)
{
	if (!m || atomic_fetch_sub(&m->refs, 1) != 1)
		return;
	mbedtls_ssl_config_free(&m->conf);
	mbedtls_x509_crt_free(&m->ca);
	mbedtls_x509_crt_free(&m->cert);
	mbedtls_pk_free(&m->key);
	mbedtls_ctr_drbg_free(&m->drbg);
	mbedtls_entropy_free(&m->entropy);
	free(m);
}

static int material_load(struct tls_material *c, bool server, const char *ca, const char *cert,
                         const char *key, bool pem, struct err *e)
{
	const char *what_cert = pem ? "client certificate" : cert;
	const char *what_key = pem ? "client key" : key;
	const char *what_ca = pem ? "CA certificate" : ca;
	int r;

	atomic_init(&c->refs, 1);
	mbedtls_ssl_config_init(&c->conf);
	mbedtls_entropy_init(&c->entropy);
	mbedtls_ctr_drbg_init(&c->drbg);
	mbedtls_x509_crt_init(&c->ca);
	mbedtls_x509_crt_init(&c->cert);
	mbedtls_pk_init(&c->key);
	r = mbedtls_ctr_drbg_seed(&c->drbg, mbedtls_entropy_func, &c->entropy,
	                          (const unsigned char *)"pillar-h2", 9);
	if (r)
		return tls_err(e, -EIO, "seeding the random generator", r);
	if (cert) {
		r = load_crt(&c->cert, cert, pem);
		if (r)
			return tls_err(e, -EINVAL, what_cert, r);
		r = load_key(&c->key, key, pem);
		if (r)
			return tls_err(e, -EINVAL, what_key, r);
		r = mbedtls_pk_check_pair(&c->cert.pk, &c->key);
		if (r) /* e.g. a rotation caught between writing the certificate and the key */
			return tls_err(e, -EINVAL, "certificate and key do not match", r);
	}
	if (ca) {
		r = load_crt(&c->ca, ca, pem);
		if (r)
			return tls_err(e, -EINVAL, what_ca, r);
	}
	r = mbedtls_ssl_config_defaults(&c->conf,
	                                server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT,
	                                MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
	if (r)
		return tls_err(e, -EINVAL, "TLS defaults", r);
	mbedtls_ssl_conf_min_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
	                             MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_max_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
	                             MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_ciphersuites(&c->conf, suites);
	mbedtls_ssl_conf_rng(&c->conf, mbedtls_ctr_drbg_random, &c->drbg);
	r = mbedtls_ssl_conf_alpn_protocols(&c->conf, alpn);
	if (r)
		return tls_err(e, -EINVAL, "ALPN", r);
	if (cert) {
		r = mbedtls_ssl_conf_own_cert(&c->conf, &c->cert, &c->key);
		if (r)
			return tls_err(e, -EINVAL, "certificate and key do not match", r);
	}
	if (ca) {
		mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
		mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
	} else {
		mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_NONE);
	}
	return 0;
}

/* A new generation: 0 with *out, or a negative errno with e. */
static int material_new(struct tls_material **out, bool server, const char *ca, const char *cert,
                        const char *key, bool pem, struct err *e)
{
	struct tls_material *m = calloc(1, sizeof(*m));
	int rc;
	if (!m)
		return err_set(e, -ENOMEM, "TLS: out of memory");
	rc = material_load(m, server, ca, cert, key, pem, e);
	if (rc) {
		material_unref(m);
		return rc;
	}
	*out = m;
	return 0;
}

static void stat_files(const struct h2_tls_cfg *c, struct stat st[FILES])
{
	for (int i = 0; i < FILES; i++)
		if (!c->path[i] || stat(c->path[i], &st[i]) < 0)
			memset(&st[i], 0, sizeof(st[i]));
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* H2_TLS_RELOAD_MS, or PILLAR_TLS_RELOAD_MS when that is a number of milliseconds. */
static uint64_t reload_default(void)
{
	const char *env = getenv("PILLAR_TLS_RELOAD_MS");
	char *end;
	if (!env || !*env)
		return H2_TLS_RELOAD_MS;
	errno = 0;
	unsigned long long ms = strtoull(env, &end, 10);
	if (errno || *end || *env == '-') {
		log_warnf("PILLAR_TLS_RELOAD_MS \"%s\" is not a number of milliseconds; using %d",
		          env, H2_TLS_RELOAD_MS);
		return H2_TLS_RELOAD_MS;
	}
	return ms;
}

/* A cfg over a first generation; files: remember the names to re-read them. */
static int cfg_new(struct h2_tls_cfg **out, bool server, const char *ca, const char *cert,
                   const char *key, bool pem, struct err *e)
{
	struct h2_tls_cfg *c = calloc(1, sizeof(*c));
	const char *names[FILES] = {ca, cert, key};
	int rc;
	if (!c)
		return err_set(e, -ENOMEM, "TLS: out of memory");
	c->server = server;
	c->files = !pem;
	c->interval_ms = reload_default();
	pthread_mutex_init(&c->mu, NULL);
	for (int i = 0; c->files && i < FILES; i++)
		if (names[i] && !(c->path[i] = strdup(names[i]))) {
			h2_tls_cfg_free(c);
			return err_set(e, -ENOMEM, "TLS: out of memory");
		}
	stat_files(c, c->seen);
	c->checked_ms = h2_now_ms();
	rc = material_new(&c->cur, server, ca, cert, key, pem, e);
	if (rc) {
		h2_tls_cfg_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Holding c->mu: re-reads the files when one changed since the last check (at most every
 * interval_ms).  A set that does not load (a rotation caught half-written) keeps the current
 * generation and is tried again when a file changes again. */
static void maybe_reload(struct h2_tls_cfg *c)
{
	struct stat st[FILES];
	struct tls_material *m = NULL;
	struct err e = {0};
	uint64_t now = h2_now_ms();
	bool changed = false;
	if (!c->files || now - c->checked_ms < c->interval_ms)
		return;
	c->checked_ms = now;
	stat_files(c, st);
	for (int i = 0; i < FILES; i++)
		changed |= !same_file(&st[i], &c->seen[i]);
	if (!changed)
		return;
	memcpy(c->seen, st, sizeof(st));
	if (material_new(&m, c->server, c->path[0], c->path[1], c->path[2], false, &e) < 0) {
		log_error("TLS certificate files changed but do not load; keeping the current ones",
		          "err", e.msg);
		return;
	}
	log_info("TLS certificate files changed: new connections use them", "cert",
	         c->path[1] ? c->path[1] : "", "ca", c->path[0] ? c->path[0] : "");
	material_unref(c->cur);
	c->cur = m;
}

void h2_tls_cfg_set_reload_interval(struct h2_tls_cfg *c, uint64_t ms)
{
	pthread_mutex_lock(&c->mu);
	c->interval_ms = ms;
	pthread_mutex_unlock(&c->mu);
}

int h2_tls_server_cfg_new(struct h2_tls_cfg **out, const char *cert, const char *key,
                          const char *client_ca, struct err *e)
{
	if (!cert || !key)
		return err_set(e, -EINVAL, "TLS server needs both a certificate and a key");
	return cfg_new(out, true, client_ca, cert, key, false, e);
}

static int client_cfg_new(struct h2_tls_cfg **out, const char *ca, const char *cert,
                          const char *key, bool pem, struct err *e)
{
	if (!ca)
		return err_set(e, -EINVAL, "TLS client needs a CA to verify the server");
	if (!cert != !key)
		return err_set(e, -EINVAL, "TLS client certificate and key go together");
	return cfg_new(out, false, ca, cert, key, pem, e);
}

int h2_tls_client_cfg_new(struct h2_tls_cfg **out, const char *ca, const char *cert,
                          const char *key, struct err *e)
{
	return client_cfg_new(out, ca, cert, key, false, e);
}

int h2_tls_client_cfg_new_pem(struct h2_tls_cfg **out, const char *ca, const char *cert,
                              const char *key, struct err *e)
{
	return client_cfg_new(out, ca, cert, key, true, e);
}

void h2_tls_cfg_free(struct h2_tls_cfg *c)
{
	if (!c)
		return;
	material_unref(c->cur); /* sessions still open keep their generation */
	for (int i = 0; i < FILES; i++)
		free(c->path[i]);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
	struct h2_tls *t = ctx;
	ssize_t n = send(t->fd, buf, len, MSG_NOSIGNAL);
	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return MBEDTLS_ERR_SSL_WANT_WRITE;
	return MBEDTLS_ERR_NET_SEND_FAILED;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
	struct h2_tls *t = ctx;
	ssize_t n = recv(t->fd, buf, len, 0);
	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return MBEDTLS_ERR_SSL_WANT_READ;
	return MBEDTLS_ERR_NET_RECV_FAILED;
}

int h2_tls_new(struct h2_tls **out, struct h2_tls_cfg *c, int fd, const char *verify_name,
               struct err *e)
{
	struct h2_tls *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return err_set(e, -ENOMEM, "TLS: out of memory");
	t->cfg = c;
	t->fd = fd;
	pthread_mutex_lock(&c->mu);
	maybe_reload(c); /* before each new handshake (deploy.md §9.5) */
	t->m = c->cur;
	atomic_fetch_add(&t->m->refs, 1);
	pthread_mutex_unlock(&c->mu);
	mbedtls_ssl_init(&t->ssl);
	r = mbedtls_ssl_setup(&t->ssl, &t->m->conf);
	if (r) {
		h2_tls_free(t);
		return tls_err(e, -ENOMEM, "TLS session", r);
	}
	if (!c->server) {
		if (!verify_name || !*verify_name) {
			h2_tls_free(t);
			return err_set(e, -EINVAL, "TLS client needs a server name to verify");
		}
		if (inet_pton(AF_INET, verify_name, t->ip) == 1)
			t->ip_len = 4;
		else if (inet_pton(AF_INET6, verify_name, t->ip) == 1)
			t->ip_len = 16;
		r = mbedtls_ssl_set_hostname(&t->ssl, t->ip_len ? NULL : verify_name);
		if (r) {
			h2_tls_free(t);
			return tls_err(e, -EINVAL, "TLS server name", r);
		}
	}
	mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
	*out = t;
	return 0;
}

void h2_tls_free(struct h2_tls *t)
{
	if (!t)
		return;
	mbedtls_ssl_free(&t->ssl);
	material_unref(t->m);
	free(t);
}

/* Looks for an iPAddress subjectAltName equal to ip in the certificate's extensions. */
static bool cert_has_ip(const mbedtls_x509_crt *crt, const unsigned char *ip, size_t ip_len)
{
	static const unsigned char oid[] = {0x06, 0x03, 0x55, 0x1d, 0x11};
	const unsigned char *p = crt->v3_ext.p, *end = p + crt->v3_ext.len;
	size_t len;

	for (; p && p + sizeof(oid) <= end; p++) {
		const unsigned char *q, *seq_end;
		if (memcmp(p, oid, sizeof(oid)) != 0)
			continue;
		q = p + sizeof(oid);
		if (q < end && *q == MBEDTLS_ASN1_BOOLEAN) {
			if (mbedtls_asn1_get_tag((unsigned char **)&q, end, &len,
			                         MBEDTLS_ASN1_BOOLEAN) != 0)
				return false;
			q += len;
		}
		if (mbedtls_asn1_get_tag((unsigned char **)&q, end, &len,
		                         MBEDTLS_ASN1_OCTET_STRING))
			return false;
		if (mbedtls_asn1_get_tag((unsigned char **)&q, q + len, &len,
		                         MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
			return false;
		seq_end = q + len;
		while (q < seq_end) {
			unsigned char tag = *q++;
			if (mbedtls_asn1_get_len((unsigned char **)&q, seq_end, &len))
				return false;
			if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) && len == ip_len &&
			    memcmp(q, ip, ip_len) == 0)
				return true;
			q += len;
		}
		return false;
	}
	return false;
}

int h2_tls_handshake(struct h2_tls *t, struct err *e)
{
	int r = mbedtls_ssl_handshake(&t->ssl);
	const char *proto;

	if (r == MBEDTLS_ERR_SSL_WANT_READ)
		return H2_TLS_WANT_READ;
	if (r == MBEDTLS_ERR_SSL_WANT_WRITE)
		return H2_TLS_WANT_WRITE;
	if (r) {
		uint32_t flags = mbedtls_ssl_get_verify_result(&t->ssl);
		if (r == MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE)
			return err_set(e, -EACCES,
			               "TLS handshake: peer certificate refused: no client certificate");
		if (r == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED && flags != (uint32_t)-1 && flags) {
			char buf[256];
			int n = mbedtls_x509_crt_verify_info(buf, sizeof(buf), "", flags);
			if (n > 0 && buf[n - 1] == '\n')
				buf[n - 1] = '\0';
			for (char *s = buf; *s; s++)
				if (*s == '\n')
					*s = ';';
			return err_set(e, -EACCES, "TLS handshake: peer certificate refused: %s",
			               buf);
		}
		return tls_err(e, -ECONNABORTED, "TLS handshake", r);
	}
	proto = mbedtls_ssl_get_alpn_protocol(&t->ssl);
	if (!proto || strcmp(proto, "h2") != 0)
		return err_set(e, -EPROTO, "TLS peer did not negotiate ALPN h2");
	if (!t->cfg->server && t->ip_len) {
		const mbedtls_x509_crt *peer = mbedtls_ssl_get_peer_cert(&t->ssl);
		if (!peer || !cert_has_ip(peer, t->ip, t->ip_len))
			return err_set(
			    e, -EACCES,
			    "TLS handshake: server certificate has no IP SAN for the target");
	}
	return 0;
}

ssize_t h2_tls_read(struct h2_tls *t, void *buf, size_t len)
{
	int r = mbedtls_ssl_read(&t->ssl, buf, len);
	if (r > 0)
		return r;
	if (r == 0 || r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
		return 0;
	if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
		return -EAGAIN;
	return -ECONNRESET;
}

ssize_t h2_tls_write(struct h2_tls *t, const void *buf, size_t len)
{
	int r = mbedtls_ssl_write(&t->ssl, buf, len);
	if (r >= 0)
		return r;
	if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
		return -EAGAIN;
	return -EPIPE;
}

void h2_tls_close_notify(struct h2_tls *t)
{
	(void)mbedtls_ssl_close_notify(&t->ssl);
}
