#include "nvme/host.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <nvme/fabrics.h>

#include "base/file.h"
#include "base/str.h"

#define UUID_MARK ":uuid:"

/* Bounded copy that always terminates (truncates silently; callers size their buffers). */
/* UUIDs that many machines share: all-zero / all-one placeholders and the SMBIOS default of
 * boards whose vendor never filled in a system UUID (nvme-cli derives host NQNs from it). */
static const char *const shared_uuids[] = {
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "03000200-0400-0500-0006-000700080009",
    "00020003-0004-0005-0006-000700080009",
};

bool nvme_uuid_valid(const char *s)
{
	size_t i;
	if (!s || strlen(s) != 36)
		return false;
	for (i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!isxdigit((unsigned char)s[i])) {
			return false;
		}
	}
	return true;
}

static void uuid_format(const unsigned char b[16], char out[NVME_UUID_STR])
{
	snprintf(out, NVME_UUID_STR,
	         "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
	         b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
	         b[15]);
}

int nvme_uuid_v4(char out[NVME_UUID_STR])
{
	unsigned char b[16];
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	uuid_format(b, out);
	return 0;
}

/* Reads dir/name trimmed into buf.  0, -ENOENT when missing or empty, -EINVAL when longer than
 * cap-1 bytes after trimming (the trimmed prefix is still left in buf for the message). */
static int read_trimmed(const char *path, char *buf, size_t cap, struct err *e)
{
	char *data = NULL;
	size_t len = 0, start = 0;
	int r = file_read_all(path, 4096, &data, &len, e);
	if (r == -ENOENT)
		return -ENOENT;
	if (r == -EFBIG) {
		str_copy(buf, cap, "(more than 4096 bytes)");
		return -EINVAL;
	}
	if (r < 0)
		return r;
	while (len > 0 && isspace((unsigned char)data[len - 1]))
		data[--len] = '\0';
	while (start < len && isspace((unsigned char)data[start]))
		start++;
	if (start == len) {
		free(data);
		return -ENOENT;
	}
	str_copy(buf, cap, data + start);
	r = (len - start >= cap) ? -EINVAL : 0;
	free(data);
	return r;
}

/* libnvme 1.3 reads the host identity at the paths compiled into it (the files nvme-cli uses:
 * NVME_HOST_ETC_LIBNVME/hostnqn and /hostid), with no directory parameter, answers NULL for a
 * missing, empty and unreadable file alike, and cuts a value at its buffer size (222 bytes of an
 * NQN, 36 of an ID).  So in that directory the node's value is libnvme's, and our own reader
 * (which reads the tests' temporary directories too) tells the failures apart and confirms that
 * libnvme saw the whole value: an unreadable file is an error and is never replaced. */
static int read_value(const char *etc_dir, const char *path, bool nqn, char *buf, size_t cap,
                      struct err *e)
{
	int r = read_trimmed(path, buf, cap, e);
	char *v;
	if (r < 0 || strcmp(etc_dir, NVME_HOST_ETC_LIBNVME) != 0)
		return r;
	v = nqn ? nvmf_hostnqn_from_file() : nvmf_hostid_from_file();
	if (!v || strcmp(v, buf) != 0)
		r = err_set(e, -EINVAL, "libnvme reads %s as \"%s\", not the whole value \"%s\"",
		            path, v ? v : "", buf);
	free(v);
	return r;
}

static int write_line(const char *path, const char *value, struct err *e)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "%s\n", value);
	return file_write_atomic(path, buf, (size_t)n, 0644, e);
}

/* The uuid part of a `...:uuid:<uuid>` host NQN, or NULL. */
static const char *nqn_uuid(const char *nqn)
{
	const char *p = strstr(nqn, UUID_MARK);
	if (!p)
		return NULL;
	p += strlen(UUID_MARK);
	return nvme_uuid_valid(p) ? p : NULL;
}

static bool is_shared_uuid(const char *u);

/* The UUID of a host NQN to generate: an existing host ID when it is a valid, unshared UUID
 * (so the pair the node writes is one the duplicate check accepts), else a random UUIDv4. */
static int nqn_uuid_for(const char *id_path, char out[NVME_UUID_STR])
{
	char id[4096];
	struct err ignored = {0};
	if (read_trimmed(id_path, id, sizeof(id), &ignored) == 0 && nvme_uuid_valid(id) &&
	    !is_shared_uuid(id)) {
		str_copy(out, NVME_UUID_STR, id);
		return 0;
	}
	return nvme_uuid_v4(out);
}

static int load(const char *etc_dir, bool generate, struct nvme_host_identity *out, struct err *e)
{
	char nqn_path[PATH_MAX], id_path[PATH_MAX], val[4096];
	int r;

	memset(out, 0, sizeof(*out));
	if (snprintf(nqn_path, sizeof(nqn_path), "%s/hostnqn", etc_dir) >= (int)sizeof(nqn_path) ||
	    snprintf(id_path, sizeof(id_path), "%s/hostid", etc_dir) >= (int)sizeof(id_path))
		return err_set(e, -ENAMETOOLONG, "host identity directory too long: %s", etc_dir);

	r = read_value(etc_dir, nqn_path, true, val, sizeof(val), e);
	if (r == -ENOENT) {
		char uuid[NVME_UUID_STR];
		if (!generate)
			return err_set(e, -ENOENT, "%s is missing or empty", nqn_path);
		/* Not libnvme's nvmf_hostnqn_generate: in 1.3 it derives the NQN from the DMI
		 * product UUID, which cloned VMs and boards with a default SMBIOS UUID share;
		 * csi.md §6.1 asks for the host ID's UUID or a random UUIDv4 instead. */
		if ((r = nqn_uuid_for(id_path, uuid)) < 0)
			return err_set(e, r, "generate host NQN: getrandom: %s", strerror(-r));
		snprintf(val, sizeof(val), "nqn.2014-08.org.nvmexpress:uuid:%s", uuid);
		if ((r = write_line(nqn_path, val, e)) < 0) {
			err_prefix(e, "write %s", nqn_path);
			return r;
		}
	} else if (r < 0 && r != -EINVAL) {
		return r;
	}
	if (r == -EINVAL || strncmp(val, "nqn.", 4) != 0 || strlen(val) > NVME_HOSTNQN_MAX)
		return err_set(e, -EINVAL, "%s: invalid host NQN \"%s\"", nqn_path, val);
	str_copy(out->hostnqn, sizeof(out->hostnqn), val);

	r = read_value(etc_dir, id_path, false, val, sizeof(val), e);
	if (r == -ENOENT) {
		const char *u = nqn_uuid(out->hostnqn);
		if (!generate)
			return err_set(e, -ENOENT, "%s is missing or empty", id_path);
		if (u) {
			str_copy(val, sizeof(val), u);
		} else if ((r = nvme_uuid_v4(val)) < 0) {
			return err_set(e, r, "generate host ID: getrandom: %s", strerror(-r));
		}
		if ((r = write_line(id_path, val, e)) < 0) {
			err_prefix(e, "write %s", id_path);
			return r;
		}
	} else if (r < 0 && r != -EINVAL) {
		return r;
	}
	if (r == -EINVAL || !nvme_uuid_valid(val))
		return err_set(e, -EINVAL, "%s: invalid host ID \"%s\"", id_path, val);
	str_copy(out->hostid, sizeof(out->hostid), val);
	return 0;
}

int nvme_host_identity_ensure(const char *etc_dir, struct nvme_host_identity *out, struct err *e)
{
	return load(etc_dir, true, out, e);
}

int nvme_host_identity_read(const char *etc_dir, struct nvme_host_identity *out, struct err *e)
{
	return load(etc_dir, false, out, e);
}

static bool is_shared_uuid(const char *u)
{
	size_t i;
	for (i = 0; i < sizeof(shared_uuids) / sizeof(shared_uuids[0]); i++)
		if (strncasecmp(u, shared_uuids[i], 36) == 0)
			return true;
	return false;
}

int nvme_host_identity_check(const struct nvme_host_identity *id, struct err *e)
{
	const char *u = nqn_uuid(id->hostnqn);
	static const char fix[] =
	    "give every worker a unique /etc/nvme/hostnqn and /etc/nvme/hostid";

	if (u && is_shared_uuid(u))
		return err_set(e, -ENOTUNIQ,
		               "host NQN \"%s\" uses the well-known UUID %.36s that cloned images "
		               "share; %s",
		               id->hostnqn, u, fix);
	if (is_shared_uuid(id->hostid))
		return err_set(e, -ENOTUNIQ,
		               "host ID %s is a well-known value that cloned images share; %s",
		               id->hostid, fix);
	if (u && strncasecmp(u, id->hostid, 36) != 0)
		return err_set(e, -ENOTUNIQ,
		               "host NQN \"%s\" carries UUID %.36s but the host ID is %s (a copied "
		               "identity); %s",
		               id->hostnqn, u, id->hostid, fix);
	return 0;
}
