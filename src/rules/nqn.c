/* rules/nqn — subsystem NQNs and namespace identity (nvmet.md §2, agent-api.md §8). */
#include "rules/nqn.h"

#include <errno.h>
#include <mbedtls/sha1.h>
#include <mbedtls/sha256.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int rules_nqn_of_volume(const char *volume_id, char *out, size_t cap, struct err *e)
{
	size_t plen = strlen(RULES_NQN_PREFIX), vlen = strlen(volume_id);
	if (!strchr(volume_id, '/'))
		return err_set(e, -EINVAL, "invalid volume id \"%s\"", volume_id);
	if (plen + vlen > RULES_NQN_MAX)
		return err_set(e, -ENAMETOOLONG,
		               "NQN for volume \"%s\" is %zu bytes; the limit is %d", volume_id,
		               plen + vlen, RULES_NQN_MAX);
	if (plen + vlen + 1 > cap)
		return err_set(e, -ENAMETOOLONG, "NQN buffer too small");
	memcpy(out, RULES_NQN_PREFIX, plen);
	for (size_t i = 0; i <= vlen; i++)
		out[plen + i] = volume_id[i] == '/' ? '.' : volume_id[i];
	return 0;
}

int rules_volume_of_nqn(const char *nqn, char *out, size_t cap)
{
	size_t plen = strlen(RULES_NQN_PREFIX);
	if (strncmp(nqn, RULES_NQN_PREFIX, plen) != 0)
		return -EINVAL;
	const char *rest = nqn + plen, *dot = strrchr(rest, '.');
	if (!dot || dot == rest || !dot[1] || strlen(rest) + 1 > cap)
		return -EINVAL;
	memcpy(out, rest, strlen(rest) + 1);
	out[dot - rest] = '/';
	return 0;
}

int rules_hostnqn_check(const char *hostnqn, struct err *e)
{
	size_t n = strlen(hostnqn);
	if (strncmp(hostnqn, "nqn.", 4) != 0 || n < 5 || n > RULES_NQN_MAX)
		return err_set(
		    e, -EINVAL,
		    "invalid initiator id \"%s\": a host NQN starts with \"nqn.\" and is at "
		    "most 223 bytes",
		    hostnqn);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)hostnqn[i];
		if (c == '/' || c <= ' ' || c >= 0x7f)
			return err_set(e, -EINVAL, "invalid initiator id \"%s\": invalid character",
			               hostnqn);
	}
	return 0;
}

int rules_nqn_check(const char *nqn, struct err *e)
{
	size_t n = strlen(nqn);
	if (strncmp(nqn, "nqn.", 4) != 0 || n < 5 || n > RULES_NQN_MAX)
		return err_set(e, -EINVAL,
		               "a subsystem NQN starts with \"nqn.\" and is at most 223 bytes");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)nqn[i];
		if (c <= ' ' || c >= 0x7f)
			return err_set(e, -EINVAL,
			               "a subsystem NQN is printable ASCII without spaces");
		if (c == '/' || c == ',' || c == '=')
			return err_set(e, -EINVAL, "a subsystem NQN has no '%c'", c);
	}
	return 0;
}

/* Namespace UUID of agent-api.md §8.2: 3c6e0b8a-6a0f-5c1d-9f5e-8d2b7a4e1c90. */
static const unsigned char ident_ns[16] = {0x3c, 0x6e, 0x0b, 0x8a, 0x6a, 0x0f, 0x5c, 0x1d,
                                           0x9f, 0x5e, 0x8d, 0x2b, 0x7a, 0x4e, 0x1c, 0x90};

static void uuid_v5(const char *prefix, const char *nqn, char out[37])
{
	unsigned char dig[20];
	mbedtls_sha1_context c;
	mbedtls_sha1_init(&c);
	mbedtls_sha1_starts_ret(&c);
	mbedtls_sha1_update_ret(&c, ident_ns, sizeof(ident_ns));
	mbedtls_sha1_update_ret(&c, (const unsigned char *)prefix, strlen(prefix));
	mbedtls_sha1_update_ret(&c, (const unsigned char *)nqn, strlen(nqn));
	mbedtls_sha1_update_ret(&c, (const unsigned char *)"/namespaces/1", 13);
	mbedtls_sha1_finish_ret(&c, dig);
	mbedtls_sha1_free(&c);
	dig[6] = (unsigned char)((dig[6] & 0x0f) | 0x50);
	dig[8] = (unsigned char)((dig[8] & 0x3f) | 0x80);
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         dig[0], dig[1], dig[2], dig[3], dig[4], dig[5], dig[6], dig[7], dig[8], dig[9],
	         dig[10], dig[11], dig[12], dig[13], dig[14], dig[15]);
}

void rules_ns_identity_derive(const char *nqn, struct rules_ns_identity *out)
{
	unsigned char dig[32];
	mbedtls_sha256_context c;
	uuid_v5("uuid:", nqn, out->uuid);
	uuid_v5("nguid:", nqn, out->nguid);
	mbedtls_sha256_init(&c);
	mbedtls_sha256_starts_ret(&c, 0);
	mbedtls_sha256_update_ret(&c, (const unsigned char *)"serial:", 7);
	mbedtls_sha256_update_ret(&c, (const unsigned char *)nqn, strlen(nqn));
	mbedtls_sha256_finish_ret(&c, dig);
	mbedtls_sha256_free(&c);
	for (int i = 0; i < 10; i++)
		snprintf(out->serial + 2 * i, 3, "%02x", dig[i]);
}

bool rules_ns_identity_equal(const struct rules_ns_identity *a, const struct rules_ns_identity *b)
{
	return strcasecmp(a->uuid, b->uuid) == 0 && strcasecmp(a->nguid, b->nguid) == 0 &&
	       strcmp(a->serial, b->serial) == 0;
}
