#include "nvme/initiator.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "nvme/host.h"

/* Bounded copy that always terminates (truncates silently; callers size their buffers). */
static int bound(int v, int dflt)
{
	return v > 0 ? v : dflt;
}

/* "30s" for whole seconds (the spec's messages), "250ms" otherwise (short test bounds). */
static const char *dur(int ms, char *buf, size_t cap)
{
	if (ms % 1000 == 0)
		snprintf(buf, cap, "%ds", ms / 1000);
	else
		snprintf(buf, cap, "%dms", ms);
	return buf;
}

/* The bytes of a block device whose sysfs size is sectors (512-byte units), at most INT64_MAX:
 * CSI carries sizes as int64, and no device is larger. */
static uint64_t sectors_bytes(unsigned long long sectors)
{
	uint64_t b;
	if (__builtin_mul_overflow(sectors, 512u, &b) || b > INT64_MAX)
		return INT64_MAX;
	return b;
}

int nvme_sysfs_read(const char *sysfs_root, const char *rel, char *buf, size_t cap)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", sysfs_root, rel) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	if (n < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	close(fd);
	buf[n] = '\0';
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	return 0;
}

static bool exists(const char *root, const char *rel)
{
	char path[PATH_MAX];
	struct stat st;
	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		return true; /* cannot tell: treat as present */
	return lstat(path, &st) == 0 || errno != ENOENT;
}

/* "nvme" digits, and when ns is set "n" digits; per-path names (nvme0c1n1) never match. */
static bool name_is(const char *s, bool ns)
{
	const char *p = s;
	if (strncmp(p, "nvme", 4) != 0)
		return false;
	p += 4;
	if (!isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p))
		p++;
	if (!ns)
		return *p == '\0';
	if (*p++ != 'n' || !isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p))
		p++;
	return *p == '\0';
}

static int connect_line(const struct nvme_connect_args *a, bool redact, char *buf, size_t cap);

int nvme_connect_string(const struct nvme_connect_args *a, char *buf, size_t cap)
{
	return connect_line(a, false, buf, cap);
}

int nvme_connect_string_redacted(const struct nvme_connect_args *a, char *buf, size_t cap)
{
	return connect_line(a, true, buf, cap);
}

/* The kernel's answers to a connect that failed in-band authentication. */
static int auth_failure(const struct nvme_connect_args *a, int r, struct err *e)
{
	if (r == -ENOKEY)
		return err_set(e, r,
		               "connect to %s:%s for %s failed: the target asks for in-band "
		               "authentication (DH-HMAC-CHAP) and this host has no secret (ENOKEY)",
		               a->traddr, a->trsvcid, a->subsysnqn);
	return err_set(e, r,
	               "connect to %s:%s for %s failed: DH-HMAC-CHAP authentication was refused "
	               "(EKEYREJECTED): the host's or the controller's secret does not match",
	               a->traddr, a->trsvcid, a->subsysnqn);
}

static int connect_line(const struct nvme_connect_args *a, bool redact, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "transport=tcp,traddr=%s,trsvcid=%s,nqn=%s,hostnqn=%s,hostid=%s",
	                 a->traddr, a->trsvcid, a->subsysnqn, a->hostnqn, a->hostid);
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	if (a->has_ctrl_loss_tmo)
		n += snprintf(buf + n, cap - (size_t)n, ",ctrl_loss_tmo=%d", a->ctrl_loss_tmo);
	if ((size_t)n < cap && a->has_reconnect_delay)
		n += snprintf(buf + n, cap - (size_t)n, ",reconnect_delay=%d", a->reconnect_delay);
	if ((size_t)n < cap && a->has_queue_size)
		n += snprintf(buf + n, cap - (size_t)n, ",queue_size=%d", a->queue_size);
	if ((size_t)n < cap && a->dhchap_secret && *a->dhchap_secret)
		n += snprintf(buf + n, cap - (size_t)n, ",dhchap_secret=%s",
		              redact ? "(secret)" : a->dhchap_secret);
	if ((size_t)n < cap && a->dhchap_ctrl_secret && *a->dhchap_ctrl_secret)
		n += snprintf(buf + n, cap - (size_t)n, ",dhchap_ctrl_secret=%s",
		              redact ? "(secret)" : a->dhchap_ctrl_secret);
	return (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

int nvme_ctrls_of_subsys(const struct nvme_ctx *c, const char *nqn, struct nvme_ctrl_info **out,
                         size_t *n, struct err *e)
{
	char dir[PATH_MAX], rel[PATH_MAX], val[512];
	struct nvme_ctrl_info *v = NULL;
	size_t cnt = 0;
	struct dirent *de;
	DIR *d;

	*out = NULL;
	*n = 0;
	snprintf(dir, sizeof(dir), "%s/class/nvme", c->sysfs_root);
	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0; /* nvme_core not loaded: no controllers */
		return err_set(e, -errno, "read %s: %s", dir, strerror(errno));
	}
	while ((de = readdir(d)) != NULL) {
		struct nvme_ctrl_info *nv;
		if (!name_is(de->d_name, false))
			continue;
		snprintf(rel, sizeof(rel), "class/nvme/%s/subsysnqn", de->d_name);
		if (nvme_sysfs_read(c->sysfs_root, rel, val, sizeof(val)) < 0 || strcmp(val, nqn))
			continue; /* vanished meanwhile, or another subsystem */
		nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv) {
			closedir(d);
			free(v);
			return err_set(e, -ENOMEM, "out of memory");
		}
		v = nv;
		memset(&v[cnt], 0, sizeof(v[cnt]));
		str_copy(v[cnt].name, sizeof(v[cnt].name), de->d_name);
		snprintf(rel, sizeof(rel), "class/nvme/%s/state", de->d_name);
		if (nvme_sysfs_read(c->sysfs_root, rel, val, sizeof(val)) == 0)
			str_copy(v[cnt].state, sizeof(v[cnt].state), val);
		snprintf(rel, sizeof(rel), "class/nvme/%s/address", de->d_name);
		if (nvme_sysfs_read(c->sysfs_root, rel, val, sizeof(val)) == 0)
			str_copy(v[cnt].address, sizeof(v[cnt].address), val);
		cnt++;
	}
	closedir(d);
	*out = v;
	*n = cnt;
	return 0;
}

static bool state_usable(const char *s)
{
	return !strcmp(s, "live") || !strcmp(s, "connecting") || !strcmp(s, "resetting") ||
	       !strcmp(s, "new");
}

static bool state_deleting(const char *s)
{
	return !strcmp(s, "deleting") || !strcmp(s, "deleting (no IO)");
}

static bool has_token(const char *list, const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value);
	const char *p = list;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		while (len > 0 && *p == ' ') {
			p++;
			len--;
		}
		if (len == kl + 1 + vl && !strncmp(p, key, kl) && p[kl] == '=' &&
		    !strncmp(p + kl + 1, value, vl))
			return true;
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

static bool same_address(const struct nvme_ctrl_info *ci, const struct nvme_connect_args *a)
{
	return has_token(ci->address, "traddr", a->traddr) &&
	       has_token(ci->address, "trsvcid", a->trsvcid);
}

/* Polls until class/nvme/<name> is gone.  0 or -ETIME. */
static int wait_gone(const struct nvme_ctx *c, const char *name, int limit_ms, int poll_ms)
{
	char rel[PATH_MAX];
	long long end = time_mono_ms() + limit_ms;
	snprintf(rel, sizeof(rel), "class/nvme/%s", name);
	for (;;) {
		if (!exists(c->sysfs_root, rel))
			return 0;
		if (time_mono_ms() >= end)
			return -ETIME;
		time_sleep_ms(poll_ms);
	}
}

static const char *errname(int neg)
{
	const char *s = strerrorname_np(-neg);
	return s ? s : "unknown error";
}

static bool network_errno(int r)
{
	return r == -ECONNREFUSED || r == -ETIMEDOUT || r == -EHOSTUNREACH || r == -ENETUNREACH ||
	       r == -ECONNRESET;
}

/* One scan for a reusable controller to the same address. */
static int find_reusable(const struct nvme_ctx *c, const struct nvme_connect_args *a,
                         char ctrl[NVME_NAME_MAX], struct err *e)
{
	struct nvme_ctrl_info *v;
	size_t n, i;
	int r = nvme_ctrls_of_subsys(c, a->subsysnqn, &v, &n, e);
	if (r < 0)
		return r;
	r = -ENOENT;
	for (i = 0; i < n; i++) {
		if (state_usable(v[i].state) && same_address(&v[i], a)) {
			if (ctrl)
				str_copy(ctrl, NVME_NAME_MAX, v[i].name);
			r = 0;
			break;
		}
	}
	free(v);
	return r;
}

int nvme_attach(const struct nvme_ctx *c, const struct nvme_connect_args *a,
                char ctrl[NVME_NAME_MAX], struct err *e)
{
	struct nvme_ctrl_info *v;
	size_t n, i;
	char line[1024];
	int r, instance = -1;

	r = nvme_ctrls_of_subsys(c, a->subsysnqn, &v, &n, e);
	if (r < 0)
		return r;
	for (i = 0; i < n; i++) {
		if (state_usable(v[i].state) && same_address(&v[i], a)) {
			log_info("reusing NVMe controller", "controller", v[i].name, "nqn",
			         a->subsysnqn);
			if (ctrl)
				str_copy(ctrl, NVME_NAME_MAX, v[i].name);
			free(v);
			return 0;
		}
	}
	for (i = 0; i < n; i++) {
		int limit;
		if (state_usable(v[i].state)) {
			/* Live to another address: the PV pins the address, so it is stale. */
			log_warn("deleting NVMe controller to another address", "controller",
			         v[i].name, "address", v[i].address, "nqn", a->subsysnqn);
			r = c->ops->disconnect(c->ops->ctx, c->sysfs_root, v[i].name, e);
			if (r < 0 && r != -ENOENT) {
				err_prefix(e, "delete stale controller %s of %s", v[i].name,
				           a->subsysnqn);
				free(v);
				return r;
			}
		}
		limit = bound(c->dying_wait_ms, 30000);
		if (wait_gone(c, v[i].name, limit, 100) < 0) {
			r = err_set(e, -EAGAIN, "controller %s of %s is still being deleted",
			            v[i].name, a->subsysnqn);
			free(v);
			return r;
		}
	}
	free(v);

	if (nvme_connect_string_redacted(a, line, sizeof(line)) < 0)
		return err_set(e, -ENAMETOOLONG, "connect options too long for %s", a->subsysnqn);
	log_info("connecting NVMe/TCP controller", "options", line);
	r = c->ops->connect(c->ops->ctx, c->sysfs_root, a, &instance, e);
	if (r == 0) {
		if (ctrl)
			snprintf(ctrl, NVME_NAME_MAX, "nvme%d", instance);
		return 0;
	}
	if (r == -EALREADY) {
		err_clear(e);
		if (find_reusable(c, a, ctrl, e) == 0)
			return 0;
		return err_set(e, -EIO,
		               "kernel reports an existing connection to %s:%s for %s but no live "
		               "controller was found",
		               a->traddr, a->trsvcid, a->subsysnqn);
	}
	if (network_errno(r))
		return err_set(e, -EAGAIN, "connect to %s:%s for %s failed: %s", a->traddr,
		               a->trsvcid, a->subsysnqn, errname(r));
	if (r == -ENOKEY || r == -EKEYREJECTED)
		return auth_failure(a, r, e);
	if (r == -EINVAL)
		return err_set(e, -EINVAL,
		               "kernel rejected the connect to %s:%s (EINVAL); check that "
		               "/etc/nvme/hostnqn and /etc/nvme/hostid match the host's other NVMe "
		               "connections",
		               a->traddr, a->trsvcid);
	err_prefix(e, "connect to %s:%s for %s failed", a->traddr, a->trsvcid, a->subsysnqn);
	return r;
}

static int find_subsys_dir(const struct nvme_ctx *c, const char *nqn, char *rel, size_t cap)
{
	char dir[PATH_MAX], p[PATH_MAX], val[512];
	struct dirent *de;
	DIR *d;
	int r = -ENOENT;

	snprintf(dir, sizeof(dir), "%s/class/nvme-subsystem", c->sysfs_root);
	d = opendir(dir);
	if (!d)
		return -ENOENT;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "nvme-subsys", 11) != 0)
			continue;
		snprintf(p, sizeof(p), "class/nvme-subsystem/%s/subsysnqn", de->d_name);
		if (nvme_sysfs_read(c->sysfs_root, p, val, sizeof(val)) == 0 && !strcmp(val, nqn)) {
			snprintf(rel, cap, "class/nvme-subsystem/%s", de->d_name);
			r = 0;
			break;
		}
	}
	closedir(d);
	return r;
}

/* Looks in <sysfs_root>/<rel> for a namespace head with nsid 1. */
static int pick_in(const struct nvme_ctx *c, const char *rel, char name[NVME_NAME_MAX])
{
	char dir[PATH_MAX], p[PATH_MAX], val[64];
	struct dirent *de;
	DIR *d;
	int r = -ENOENT;

	snprintf(dir, sizeof(dir), "%s/%s", c->sysfs_root, rel);
	d = opendir(dir);
	if (!d)
		return -ENOENT;
	while ((de = readdir(d)) != NULL) {
		if (!name_is(de->d_name, true) || strlen(de->d_name) >= NVME_NAME_MAX)
			continue;
		snprintf(p, sizeof(p), "block/%s/nsid", de->d_name);
		if (nvme_sysfs_read(c->sysfs_root, p, val, sizeof(val)) == 0 && !strcmp(val, "1")) {
			str_copy(name, NVME_NAME_MAX, de->d_name);
			r = 0;
			break;
		}
	}
	closedir(d);
	return r;
}

static int fill_dev(const struct nvme_ctx *c, const char *name, struct nvme_ns_dev *out,
                    struct err *e)
{
	char rel[PATH_MAX], val[128];
	unsigned long long sectors;
	struct stat st;
	int r;

	memset(out, 0, sizeof(*out));
	str_copy(out->name, sizeof(out->name), name);
	snprintf(rel, sizeof(rel), "block/%s/dev", name);
	if ((r = nvme_sysfs_read(c->sysfs_root, rel, val, sizeof(val))) < 0)
		return r == -ENOENT ? -ENOENT
		                    : err_set(e, r, "read /sys/%s: %s", rel, strerror(-r));
	if (sscanf(val, "%u:%u", &out->major, &out->minor) != 2)
		return err_set(e, -EBADMSG, "/sys/%s: unexpected \"%s\"", rel, val);
	snprintf(rel, sizeof(rel), "block/%s/uuid", name);
	nvme_sysfs_read(c->sysfs_root, rel, out->uuid, sizeof(out->uuid));
	snprintf(rel, sizeof(rel), "block/%s/nguid", name);
	nvme_sysfs_read(c->sysfs_root, rel, out->nguid, sizeof(out->nguid));
	snprintf(rel, sizeof(rel), "block/%s/size", name);
	if (nvme_sysfs_read(c->sysfs_root, rel, val, sizeof(val)) == 0 &&
	    sscanf(val, "%llu", &sectors) == 1)
		out->size_bytes = sectors_bytes(sectors);
	snprintf(out->path, sizeof(out->path), "%s/%s", c->dev_root, name);
	if (lstat(out->path, &st) < 0) {
		if (errno != ENOENT)
			return err_set(e, -errno, "stat %s: %s", out->path, strerror(errno));
		/* No udev in the container: create the node from sysfs. */
		r = c->ops->mknod_blk(c->ops->ctx, out->path, out->major, out->minor, e);
		if (r < 0 && r != -EEXIST) {
			err_prefix(e, "create device node %s", out->path);
			return r;
		}
		log_info("created device node", "path", out->path);
	}
	return 0;
}

int nvme_ns_find(const struct nvme_ctx *c, const char *nqn, struct nvme_ns_dev *out, struct err *e)
{
	char rel[PATH_MAX], name[NVME_NAME_MAX];
	struct nvme_ctrl_info *v;
	size_t n, i;
	int r = -ENOENT;

	if (find_subsys_dir(c, nqn, rel, sizeof(rel)) == 0)
		r = pick_in(c, rel, name); /* multipath=Y: the head under the subsystem */
	if (r < 0) {
		if ((r = nvme_ctrls_of_subsys(c, nqn, &v, &n, e)) < 0)
			return r;
		r = -ENOENT;
		for (i = 0; i < n && r < 0; i++) { /* multipath=N: under the controller */
			snprintf(rel, sizeof(rel), "class/nvme/%s", v[i].name);
			r = pick_in(c, rel, name);
		}
		free(v);
	}
	if (r < 0)
		return -ENOENT;
	return fill_dev(c, name, out, e);
}

int nvme_ns_wait(const struct nvme_ctx *c, const char *nqn, struct nvme_ns_dev *out, struct err *e)
{
	int limit = bound(c->device_wait_ms, 30000);
	long long end = time_mono_ms() + limit;
	char d[16];
	for (;;) {
		int r = nvme_ns_find(c, nqn, out, e);
		if (r != -ENOENT)
			return r;
		if (time_mono_ms() >= end)
			return err_set(e, -ETIME, "namespace 1 of %s did not appear within %s", nqn,
			               dur(limit, d, sizeof(d)));
		time_sleep_ms(limit < 500 ? 20 : 500);
	}
}

static int write_attr(const char *root, const char *rel, struct err *e)
{
	char path[PATH_MAX];
	int fd;
	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		return err_set(e, -ENAMETOOLONG, "path too long: %s", rel);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT
		                       : err_set(e, -errno, "open %s: %s", path, strerror(errno));
	if (write(fd, "1", 1) != 1) {
		int r = -errno;
		close(fd);
		return err_set(e, r, "write %s: %s", path, strerror(-r));
	}
	close(fd);
	return 0;
}

int nvme_rescan_subsys(const struct nvme_ctx *c, const char *nqn, struct err *e)
{
	struct nvme_ctrl_info *v;
	size_t n, i;
	char rel[PATH_MAX];
	int r = nvme_ctrls_of_subsys(c, nqn, &v, &n, e);
	if (r < 0)
		return r;
	for (i = 0; i < n && r >= 0; i++) {
		snprintf(rel, sizeof(rel), "class/nvme/%s/rescan_controller", v[i].name);
		r = write_attr(c->sysfs_root, rel, e);
		if (r == -ENOENT)
			r = 0;
	}
	free(v);
	return r < 0 ? r : 0;
}

int nvme_ns_wait_size(const struct nvme_ctx *c, struct nvme_ns_dev *d, uint64_t bytes,
                      struct err *e)
{
	int limit = bound(c->size_wait_ms, 10000);
	long long end = time_mono_ms() + limit;
	char rel[PATH_MAX], val[64], db[16];
	unsigned long long sectors;
	snprintf(rel, sizeof(rel), "block/%s/size", d->name);
	for (;;) {
		if (nvme_sysfs_read(c->sysfs_root, rel, val, sizeof(val)) == 0 &&
		    sscanf(val, "%llu", &sectors) == 1)
			d->size_bytes = sectors_bytes(sectors);
		if (d->size_bytes >= bytes)
			return 0;
		if (time_mono_ms() >= end)
			return err_set(e, -ETIME,
			               "device %s is %llu bytes, not the requested %llu, after %s",
			               d->name, (unsigned long long)d->size_bytes,
			               (unsigned long long)bytes, dur(limit, db, sizeof(db)));
		time_sleep_ms(limit < 200 ? 10 : 200);
	}
}

int nvme_detach_subsys(const struct nvme_ctx *c, const char *nqn, struct err *e)
{
	struct nvme_ctrl_info *v;
	size_t n, i;
	char d[16];
	int limit = bound(c->delete_wait_ms, 10000);
	int r = nvme_ctrls_of_subsys(c, nqn, &v, &n, e);
	if (r < 0)
		return r;
	for (i = 0; i < n; i++) {
		if (state_deleting(v[i].state))
			continue; /* never a second delete_controller */
		log_info("deleting NVMe controller", "controller", v[i].name, "nqn", nqn);
		r = c->ops->disconnect(c->ops->ctx, c->sysfs_root, v[i].name, e);
		if (r < 0 && r != -ENOENT) {
			err_prefix(e, "delete controller %s of %s", v[i].name, nqn);
			free(v);
			return r;
		}
	}
	r = 0;
	for (i = 0; i < n; i++) {
		if (wait_gone(c, v[i].name, limit, 50) < 0) {
			r = err_set(e, -EBUSY, "controller %s of %s was not removed within %s",
			            v[i].name, nqn, dur(limit, d, sizeof(d)));
			break;
		}
	}
	free(v);
	return r;
}
