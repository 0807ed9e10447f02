#include "nvme/dhchap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mbedtls/base64.h>
#include <nvme/linux.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nvme/initiator.h"

#define PREFIX  "DHHC-1:"
#define KEY_MAX 64

static const struct {
	const char *name, *kernel;
	size_t key_len;
} hashes[] = {
    [NVME_DHCHAP_SHA256] = {"sha256", "hmac(sha256)", 32},
    [NVME_DHCHAP_SHA384] = {"sha384", "hmac(sha384)", 48},
    [NVME_DHCHAP_SHA512] = {"sha512", "hmac(sha512)", 64},
};

static int hash_known(enum nvme_dhchap_hash h)
{
	return h >= NVME_DHCHAP_SHA256 && h <= NVME_DHCHAP_SHA512;
}

const char *nvme_dhchap_hash_name(enum nvme_dhchap_hash h)
{
	return hash_known(h) ? hashes[h].name : NULL;
}

const char *nvme_dhchap_hash_kernel(enum nvme_dhchap_hash h)
{
	return hash_known(h) ? hashes[h].kernel : NULL;
}

int nvme_dhchap_hash_parse(const char *name, enum nvme_dhchap_hash *out)
{
	for (int h = NVME_DHCHAP_SHA256; name && h <= NVME_DHCHAP_SHA512; h++)
		if (strcmp(name, hashes[h].name) == 0) {
			*out = (enum nvme_dhchap_hash)h;
			return 0;
		}
	return -EINVAL;
}

void nvme_dhchap_wipe(void *p, size_t n)
{
	volatile unsigned char *b = p;
	while (n--)
		*b++ = 0;
}

/* CRC-32 (IEEE 802.3, reflected, the checksum of the DHHC-1 representation). */
static uint32_t crc32_ieee(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
	}
	return ~c;
}

static int random_fill(unsigned char *b, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = getrandom(b + got, n - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)r;
	}
	return 0;
}

/* key (len bytes) in the DHHC-1 representation with hash id h. */
static int encode(int h, const unsigned char *key, size_t len, char out[NVME_DHCHAP_SECRET_MAX])
{
	unsigned char raw[KEY_MAX + 4];
	size_t olen = 0, head = strlen(PREFIX) + 3;
	uint32_t crc = crc32_ieee(key, len);
	int r;

	memcpy(raw, key, len);
	for (int i = 0; i < 4; i++)
		raw[len + (size_t)i] = (unsigned char)(crc >> (8 * i));
	snprintf(out, NVME_DHCHAP_SECRET_MAX, PREFIX "%02x:", h);
	r = mbedtls_base64_encode((unsigned char *)out + head, NVME_DHCHAP_SECRET_MAX - head - 1,
	                          &olen, raw, len + 4);
	nvme_dhchap_wipe(raw, sizeof(raw));
	if (r != 0 || head + olen + 2 > NVME_DHCHAP_SECRET_MAX)
		return -EOVERFLOW;
	out[head + olen] = ':';
	out[head + olen + 1] = '\0';
	return 0;
}

int nvme_dhchap_secret_from_key(const char *nqn, enum nvme_dhchap_hash h,
                                const unsigned char *secret, char out[NVME_DHCHAP_SECRET_MAX],
                                struct err *e)
{
	unsigned char key[KEY_MAX];
	char nqn_copy[224];
	int r;

	if (!hash_known(h))
		return err_set(e, -EINVAL, "unknown DH-HMAC-CHAP hash %d", (int)h);
	if (!nqn || !*nqn || strlen(nqn) >= sizeof(nqn_copy))
		return err_set(e, -EINVAL, "a DH-HMAC-CHAP secret needs an NQN of 1-223 bytes");
	/* libnvme's signature takes mutable arguments; it only reads them. */
	snprintf(nqn_copy, sizeof(nqn_copy), "%s", nqn);
	errno = 0;
	if (nvme_gen_dhchap_key(nqn_copy, (enum nvme_hmac_alg)h, (unsigned int)hashes[h].key_len,
	                        (unsigned char *)secret, key) != 0) {
		int saved = errno;
		nvme_dhchap_wipe(key, sizeof(key));
		return err_set(e, -EIO, "libnvme nvme_gen_dhchap_key failed: %s",
		               saved ? strerror(saved) : "unknown error");
	}
	r = encode(h, key, hashes[h].key_len, out);
	nvme_dhchap_wipe(key, sizeof(key));
	if (r < 0)
		return err_set(e, r, "encoding the DH-HMAC-CHAP secret failed");
	return 0;
}

int nvme_dhchap_secret_generate(const char *nqn, enum nvme_dhchap_hash h,
                                char out[NVME_DHCHAP_SECRET_MAX], struct err *e)
{
	unsigned char secret[KEY_MAX];
	int r;

	if (!hash_known(h))
		return err_set(e, -EINVAL, "unknown DH-HMAC-CHAP hash %d", (int)h);
	if ((r = random_fill(secret, hashes[h].key_len)) < 0)
		return err_set(e, r, "getrandom: %s", strerror(-r));
	r = nvme_dhchap_secret_from_key(nqn, h, secret, out, e);
	nvme_dhchap_wipe(secret, sizeof(secret));
	return r;
}

int nvme_dhchap_secret_check(const char *s, struct err *e)
{
	unsigned char raw[KEY_MAX + 8];
	size_t len, olen = 0, head = strlen(PREFIX) + 3;
	unsigned h;
	uint32_t crc = 0;
	int r;

	if (!s || strncmp(s, PREFIX, strlen(PREFIX)) != 0)
		return err_set(e, -EINVAL, "a DH-HMAC-CHAP secret starts with \"DHHC-1:\"");
	len = strlen(s);
	if (len < head + 2 || len > NVME_DHCHAP_SECRET_MAX - 1 || s[head - 1] != ':' ||
	    s[len - 1] != ':' || sscanf(s + strlen(PREFIX), "%2x", &h) != 1 || h > 3 ||
	    !strchr("0123456789abcdefABCDEF", s[strlen(PREFIX)]) ||
	    !strchr("0123456789abcdefABCDEF", s[strlen(PREFIX) + 1]))
		return err_set(e, -EINVAL, "a DH-HMAC-CHAP secret is \"DHHC-1:<00-03>:<base64>:\"");
	r = mbedtls_base64_decode(raw, sizeof(raw), &olen, (const unsigned char *)s + head,
	                          len - head - 1);
	if (r != 0 || (olen != 36 && olen != 52 && olen != 68)) {
		nvme_dhchap_wipe(raw, sizeof(raw));
		return err_set(e, -EINVAL,
		               "a DH-HMAC-CHAP secret holds a key of 32, 48 or 64 bytes and its "
		               "CRC-32 in base64");
	}
	for (int i = 0; i < 4; i++)
		crc |= (uint32_t)raw[olen - 4 + (size_t)i] << (8 * i);
	r = crc32_ieee(raw, olen - 4) == crc ? 0 : -EINVAL;
	nvme_dhchap_wipe(raw, sizeof(raw));
	if (r < 0)
		return err_set(e, r, "the DH-HMAC-CHAP secret's CRC-32 does not match its key");
	return 0;
}

/* The controller's name is nvme<N>: nothing else may reach the path. */
static bool ctrl_name_ok(const char *name)
{
	if (!name || strncmp(name, "nvme", 4) != 0 || !name[4] || strlen(name) > 16)
		return false;
	for (const char *p = name + 4; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

int nvme_ctrl_dhchap_set(const char *sysfs_root, const char *name, bool ctrl, const char *secret,
                         struct err *e)
{
	const char *attr = ctrl ? "dhchap_ctrl_secret" : "dhchap_secret";
	char path[PATH_MAX];
	ssize_t w;
	int fd, r;

	if (!ctrl_name_ok(name))
		return err_set(e, -EINVAL, "not an NVMe controller name: \"%.32s\"",
		               name ? name : "");
	if ((r = nvme_dhchap_secret_check(secret, e)) < 0)
		return r;
	if (snprintf(path, sizeof(path), "%s/class/nvme/%s/%s", sysfs_root, name, attr) >=
	    (int)sizeof(path))
		return err_set(e, -ENAMETOOLONG, "sysfs root too long");
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (r == -ENOENT)
			return err_set(e, -EOPNOTSUPP,
			               "%s has no %s: the worker's kernel has no NVMe in-band "
			               "authentication (CONFIG_NVME_HOST_AUTH)",
			               name, attr);
		return err_set(e, r, "open %s: %s", path, strerror(-r));
	}
	do
		w = write(fd, secret, strlen(secret));
	while (w < 0 && errno == EINTR);
	r = w < 0 ? -errno : ((size_t)w != strlen(secret) ? -EIO : 0);
	close(fd);
	if (r < 0)
		return err_set(e, r, "writing a new secret to %s/%s failed: %s", name, attr,
		               strerror(-r));
	return 0;
}
