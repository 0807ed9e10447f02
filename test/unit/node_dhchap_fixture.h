/* Fixture of the DH-HMAC-CHAP node tests (test_node_dhchap, test_node_dhchap_rotate): the node
 * fixture with --dhchap, confirmed keys in its key file, logs at --v=5 and the check that a log
 * or record holds no key.  Header-only (static inline). */
#ifndef PILLAR_TEST_UNIT_NODE_DHCHAP_FIXTURE_H
#define PILLAR_TEST_UNIT_NODE_DHCHAP_FIXTURE_H

#include <check.h>
#include <fcntl.h>
#include <mbedtls/base64.h>
#include <unistd.h>

#include "base/log.h"
#include "node/dhchap.h"
#include "node_fixture.h"

#define HOSTNQN         "nqn.2014-08.org.nvmexpress:uuid:6f1c1a57-5a8e-4bb9-a7a4-0d1f2cfbd3a1"
#define OTHERNQN        "nqn.2014-08.org.nvmexpress:uuid:0d3b7e5a-9a43-4f0e-8f3b-5b1e2c7d9e22"
#define VOL_RECORD_NAME "storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json"

static const char *const ctx_bi[] = {"pillar-csi.bhyoo.com/dhchap", "bidirectional", NULL};
static const char *const ctx_uni[] = {"pillar-csi.bhyoo.com/dhchap", "unidirectional", NULL};

/* Logs at --v=5 into <root>/node.log for the test's duration. */
static inline int log_to(const struct env *v)
{
	char p[8192];
	snprintf(p, sizeof(p), "%s/node.log", v->root);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	log_set_fd(fd);
	log_set_verbosity(5);
	return fd;
}

static inline void log_back(int fd)
{
	log_set_fd(2);
	log_set_verbosity(0);
	close(fd);
}

/* The base64 body of a DHHC-1 secret (between the second and the last colon). */
static const char *body(const char *secret)
{
	static char b[NVME_DHCHAP_SECRET_MAX];
	snprintf(b, sizeof(b), "%s", secret + 10);
	b[strlen(b) - 1] = 0;
	return b;
}

/* The raw key of a secret (its base64 body without the CRC) in lowercase hex. */
static const char *hexkey(const char *secret)
{
	static char hex[2 * 68 + 1];
	unsigned char raw[80];
	size_t n = 0;
	const char *b = body(secret);
	ck_assert_int_eq(
	    mbedtls_base64_decode(raw, sizeof(raw), &n, (const unsigned char *)b, strlen(b)), 0);
	ck_assert_uint_ge(n, 36);
	for (size_t i = 0; i + 4 < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	return hex;
}

/* Neither secret of k (DHHC-1 text, base64, raw key in hex) in <dir>/<name> (missing is fine). */
static inline void no_key_in(const char *dir, const char *name,
                             const struct model_dhchap_generation *g)
{
	char p[8192];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (access(p, F_OK) != 0)
		return;
	const char *t = tu_read(dir, name);
	ck_assert_msg(!strstr(t, "DHHC-1"), "%s holds a DHHC-1 secret", name);
	ck_assert_msg(!strstr(t, body(g->key)), "%s holds the host key", name);
	ck_assert_msg(!strstr(t, body(g->ctrl_key)), "%s holds the controller key", name);
	ck_assert_msg(!strstr(t, hexkey(g->key)), "%s holds the host key in hex", name);
	ck_assert_msg(!strstr(t, hexkey(g->ctrl_key)), "%s holds the controller key in hex", name);
}

/* The node fixture with --dhchap. */
static inline void env_dhchap(struct env *v)
{
	env_init(v, 1);
	v->n->dhchap = true;
}

/* Writes confirmed keys of generation 17 (and next keys of 18 when next) for the fixture's
 * host into the fixture's key file. */
static inline void keys_confirmed(struct env *v, bool next, struct model_dhchap_file *k)
{
	struct err e = {0};
	memset(k, 0, sizeof(*k));
	snprintf(k->node, sizeof(k->node), "worker-1");
	snprintf(k->hostnqn, sizeof(k->hostnqn), HOSTNQN);
	k->has_current = true;
	ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 17, &k->current, &e), 0);
	k->has_next = next;
	if (next)
		ck_assert_int_eq(node_dhchap_gen_make(HOSTNQN, 18, &k->next, &e), 0);
	ck_assert_int_eq(model_dhchap_file_write(v->state, k, &e), 0);
}

#endif
