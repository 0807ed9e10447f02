/* nvme/dhchap — DH-HMAC-CHAP secrets in the NVMe representation ("DHHC-1"), for NVMe in-band
 * authentication (docs/authentication.md).
 *
 * A secret is `DHHC-1:<hh>:<base64 of key || CRC-32 of key, little endian>:` where <hh> is the
 * transformation hash (01 SHA-256, 02 SHA-384, 03 SHA-512; 00 none) and the key is 32, 48 or 64
 * bytes (the hash's digest size).  This is the text the Linux host takes as `dhchap_secret=` and
 * `dhchap_ctrl_secret=`, and the nvmet target in `hosts/<hostnqn>/dhchap_key`/`dhchap_ctrl_key`;
 * nvme-cli's gen-dhchap-key prints the same format.
 *
 * Secrets are key material: callers never log them, and clear buffers that held one with
 * nvme_dhchap_wipe before freeing them.
 *
 * Functions return 0 or a negative errno with a message in e (a message never contains the
 * secret).
 */
#ifndef PILLAR_NVME_DHCHAP_H
#define PILLAR_NVME_DHCHAP_H

#include <stddef.h>

#include "base/err.h"

/* "DHHC-1:03:" + base64 of 68 bytes (92 characters) + ":" and NUL. */
#define NVME_DHCHAP_SECRET_MAX 104

enum nvme_dhchap_hash {
	NVME_DHCHAP_SHA256 = 1,
	NVME_DHCHAP_SHA384 = 2,
	NVME_DHCHAP_SHA512 = 3,
};

/* The hash's name as the kernel and the PillarProtocol field spell it ("sha256" …), or NULL. */
const char *nvme_dhchap_hash_name(enum nvme_dhchap_hash h);

/* The hash of a name ("sha256", "sha384", "sha512"): 0 and *out, or -EINVAL. */
int nvme_dhchap_hash_parse(const char *name, enum nvme_dhchap_hash *out);

/* The kernel's name of the hash (configfs dhchap_hash): "hmac(sha256)" …, or NULL. */
const char *nvme_dhchap_hash_kernel(enum nvme_dhchap_hash h);

/* A new secret for nqn: a key of the hash's digest size from the kernel's cryptographic RNG
 * (getrandom), transformed with nqn by libnvme's nvme_gen_dhchap_key, written to out in the
 * DHHC-1 representation.  -EINVAL for a bad hash or NQN, -EIO when libnvme fails, other errnos
 * from getrandom. */
int nvme_dhchap_secret_generate(const char *nqn, enum nvme_dhchap_hash h,
                                char out[NVME_DHCHAP_SECRET_MAX], struct err *e);

/* The same from a given random secret of the hash's digest size (deterministic: tests compare
 * it with nvme-cli's `gen-dhchap-key --secret=`). */
int nvme_dhchap_secret_from_key(const char *nqn, enum nvme_dhchap_hash h,
                                const unsigned char *secret, char out[NVME_DHCHAP_SECRET_MAX],
                                struct err *e);

/* 0 when s is a well-formed DHHC-1 secret (prefix, hash 00-03, key length 32/48/64, CRC),
 * -EINVAL otherwise with a message that names the defect (never the secret). */
int nvme_dhchap_secret_check(const char *s, struct err *e);

/* Clears n bytes in a way the compiler keeps. */
void nvme_dhchap_wipe(void *p, size_t n);

#endif
