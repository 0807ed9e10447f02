/* The handle, THE attribute write with read-back, and tree operations with fake-root emulation. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "nvmet/fs.h"

#define CONFIGFS_MAGIC 0x62656570

struct nvmet {
	char *dir; /* <root>/nvmet */
	bool fake;
	bool fake_auth; /* fake root: host entries have the dhchap_* attributes */
	nvmet_trace_fn trace;
	void *trace_arg;
	struct nvmet_hostrefs *refs; /* hostref.c, made on first use */
	unsigned long calls;         /* nvmet_calls */
};

unsigned long nvmet_calls(const nvmet *nv)
{
	return nv->calls;
}

/* k more system calls on the tree (the fake's emulation is not counted).  The count is the
 * handle's own bookkeeping, so functions that only read the tree take a const handle. */
static void nv_calls_add(const nvmet *nv, unsigned long k)
{
	((nvmet *)nv)->calls += k;
}
#define CALL(nv) nv_calls_add((nv), 1)

struct nvmet_hostrefs *nvmet_fs_hostrefs(nvmet *nv)
{
	if (!nv->refs)
		nv->refs = nvmet_hostrefs_new();
	return nv->refs;
}

const char *nvmet_fs_errname(int err)
{
	switch (err < 0 ? -err : err) {
	case ENOENT: return "ENOENT";
	case EEXIST: return "EEXIST";
	case EBUSY: return "EBUSY";
	case EINVAL: return "EINVAL";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case EADDRINUSE: return "EADDRINUSE";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case ENOSPC: return "ENOSPC";
	case ENOMEM: return "ENOMEM";
	case ENODEV: return "ENODEV";
	case ENXIO: return "ENXIO";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EIO: return "EIO";
	case EROFS: return "EROFS";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	default: return strerror(err < 0 ? -err : err);
	}
}

int nvmet_open(const char *configfs_root, nvmet **out, struct err *e)
{
	struct statfs sf;
	nvmet *nv = calloc(1, sizeof(*nv));
	*out = NULL;
	if (!nv)
		goto oom;
	if (asprintf(&nv->dir, "%s/nvmet", configfs_root) < 0) {
		nv->dir = NULL;
		goto oom;
	}
	nv->fake = !(statfs(configfs_root, &sf) == 0 && sf.f_type == CONFIGFS_MAGIC);
	*out = nv;
	return 0;
oom:
	free(nv);
	return err_set(e, -ENOMEM, "nvmet: out of memory");
}

void nvmet_free(nvmet *nv)
{
	if (!nv)
		return;
	nvmet_hostrefs_free(nv->refs);
	free(nv->dir);
	free(nv);
}

bool nvmet_available(const nvmet *nv)
{
	struct stat st;
	CALL(nv);
	return stat(nv->dir, &st) == 0 && S_ISDIR(st.st_mode);
}

bool nvmet_is_fake(const nvmet *nv)
{
	return nv->fake;
}
const char *nvmet_dir(const nvmet *nv)
{
	return nv->dir;
}

void nvmet_set_trace(nvmet *nv, nvmet_trace_fn fn, void *arg)
{
	nv->trace = fn;
	nv->trace_arg = arg;
}

static void trace(nvmet *nv, const char *op, const char *rel, const char *value)
{
	if (nv->trace)
		nv->trace(nv->trace_arg, op, rel, value);
}

int nvmet_fs_path(const nvmet *nv, const char *rel, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", nv->dir, rel);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int nvmet_fs_rel(char *out, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, NVMET_PATH_MAX, fmt, ap);
	va_end(ap);
	return n < 0 || n >= NVMET_PATH_MAX ? -ENAMETOOLONG : 0;
}

bool nvmet_fs_exists(const nvmet *nv, const char *rel)
{
	char p[NVMET_PATH_MAX + 256];
	struct stat st;
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0)
		return false;
	CALL(nv);
	return lstat(p, &st) == 0;
}

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
}

/* Reads fd from offset 0 into buf (cap - 1 bytes at most), trimmed.  0 or -errno. */
static int read_fd(nvmet *nv, int fd, char *buf, size_t cap)
{
	size_t n = 0;
	/* A short read is the end: configfs returns an attribute's whole text from one show()
	 * and a regular file (the fake) returns less than asked only at its end, so the read
	 * that would return 0 is saved (one syscall of every attribute read). */
	for (;;) {
		size_t want = cap - 1 - n;
		CALL(nv);
		ssize_t r = pread(fd, buf + n, want, (off_t)n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		n += (size_t)r;
		if ((size_t)r < want || n == cap - 1)
			break;
	}
	buf[n] = '\0';
	trim(buf);
	return 0;
}

int nvmet_attr_read(nvmet *nv, const char *rel, char *buf, size_t cap, struct err *e)
{
	char p[NVMET_PATH_MAX + 256];
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet read %s: path too long", rel);
	CALL(nv);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "nvmet read %s: %s", rel, nvmet_fs_errname(errno));
	int r = read_fd(nv, fd, buf, cap);
	CALL(nv);
	close(fd);
	return r < 0 ? err_set(e, r, "nvmet read %s: %s", rel, nvmet_fs_errname(r)) : 0;
}

/* secret: the value is key material; messages and the trace never show it. */
static int raw_write(nvmet *nv, const char *rel, const char *value, bool secret, struct err *e)
{
	char p[NVMET_PATH_MAX + 256], line[NVMET_PATH_MAX + 2];
	int n = snprintf(line, sizeof(line), "%s\n", value);
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0 || n < 0 || (size_t)n >= sizeof(line))
		return err_set(e, -ENAMETOOLONG, "nvmet write %s: too long", rel);
	/* Fake mode creates the file: a plain directory has no kernel-made attributes. */
	nv_calls_add(nv, 3); /* open, write, close */
	int fd = nv->fake ? open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, secret ? 0600 : 0644)
	                  : open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "nvmet write %s: %s", rel, nvmet_fs_errname(errno));
	ssize_t w;
	do
		w = write(fd, line, (size_t)n);
	while (w < 0 && errno == EINTR);
	int er = w < 0 ? -errno : (w != n ? -EIO : 0);
	close(fd);
	memset(line, 0, sizeof(line));
	if (er && secret)
		return err_set(e, er, "nvmet write %s (a secret): %s", rel, nvmet_fs_errname(er));
	if (er)
		return err_set(e, er, "nvmet write %s=\"%s\": %s", rel, value,
		               nvmet_fs_errname(er));
	trace(nv, "write", rel, secret ? "(secret)" : value);
	return 0;
}

static bool is_uuid_attr(const char *rel)
{
	const char *b = strrchr(rel, '/');
	b = b ? b + 1 : rel;
	return strcmp(b, "device_uuid") == 0 || strcmp(b, "device_nguid") == 0;
}

static bool same_value(const char *rel, const char *a, const char *b)
{
	return is_uuid_attr(rel) ? strcasecmp(a, b) == 0 : strcmp(a, b) == 0;
}

/* Write, then read back and compare. */
static int write_checked(nvmet *nv, const char *rel, const char *value, struct err *e)
{
	char cur[NVMET_PATH_MAX];
	int r = raw_write(nv, rel, value, false, e);
	if (r < 0)
		return r;
	r = nvmet_attr_read(nv, rel, cur, sizeof(cur), e);
	if (r < 0)
		return r;
	if (!same_value(rel, cur, value))
		return err_set(e, -EIO, "nvmet %s: wrote \"%s\" but read back \"%s\"", rel, value,
		               cur);
	return 0;
}

int nvmet_attr_write(nvmet *nv, const char *rel, const char *value, struct err *e)
{
	char cur[NVMET_PATH_MAX];
	int r = nvmet_attr_read(nv, rel, cur, sizeof(cur), NULL);
	if (r == 0 && same_value(rel, cur, value))
		return 0;
	return write_checked(nv, rel, value, e);
}

int nvmet_attr_write_new(nvmet *nv, const char *rel, const char *value, struct err *e)
{
	return write_checked(nv, rel, value, e);
}

int nvmet_fs_write_only(nvmet *nv, const char *rel, const char *value, struct err *e)
{
	return raw_write(nv, rel, value, false, e);
}

int nvmet_fs_write_secret(nvmet *nv, const char *rel, const char *value, struct err *e)
{
	char cur[NVMET_PATH_MAX];
	int r = nvmet_attr_read(nv, rel, cur, sizeof(cur), NULL);
	bool same = r == 0 && strcmp(cur, value) == 0;
	if (!same && (r = raw_write(nv, rel, value, true, e)) == 0 &&
	    (r = nvmet_attr_read(nv, rel, cur, sizeof(cur), e)) == 0 && strcmp(cur, value) != 0)
		r = err_set(e, -EIO, "nvmet %s: the secret read back differs from the one written",
		            rel);
	memset(cur, 0, sizeof(cur));
	return same ? 0 : r;
}

void nvmet_set_fake_auth(nvmet *nv, bool on)
{
	nv->fake_auth = on;
}

/* ---- fake-root emulation of what the kernel creates by itself ---------------------------------- */

static int count_parts(const char *rel)
{
	int n = 1;
	for (const char *s = rel; *s; s++)
		n += *s == '/';
	return n;
}

static void fake_file(nvmet *nv, const char *dir, const char *name, const char *value)
{
	char p[NVMET_PATH_MAX + 256];
	if (snprintf(p, sizeof(p), "%s/%s/%s", nv->dir, dir, name) >= (int)sizeof(p))
		return;
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return; /* EEXIST: completing an entry (fake_populate), keep what is there */
	if (write(fd, value, strlen(value)) < 0) {
		/* best effort: a missing default only makes the fake less faithful */
	}
	close(fd);
}

static void fake_subdir(nvmet *nv, const char *dir, const char *name)
{
	char p[NVMET_PATH_MAX + 256];
	if (snprintf(p, sizeof(p), "%s/%s/%s", nv->dir, dir, name) < (int)sizeof(p))
		mkdir(p, 0755);
}

static void random_hex(char *out, size_t nbytes)
{
	unsigned char b[16] = {0};
	if (nbytes > sizeof(b))
		nbytes = sizeof(b);
	if (getrandom(b, nbytes, 0) < 0)
		memset(b, 0x5a, nbytes);
	for (size_t i = 0; i < nbytes; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void fake_populate(nvmet *nv, const char *rel)
{
	int parts = count_parts(rel);
	char v[64];
	if (strncmp(rel, "subsystems/", 11) == 0 && parts == 2) {
		fake_file(nv, rel, "attr_allow_any_host", "0\n");
		random_hex(v, 8);
		strcat(v, "\n");
		fake_file(nv, rel, "attr_serial", v);
		fake_file(nv, rel, "attr_model", "Linux\n");
		fake_subdir(nv, rel, "allowed_hosts");
		fake_subdir(nv, rel, "namespaces");
	} else if (strncmp(rel, "subsystems/", 11) == 0 && parts == 4 &&
	           strstr(rel, "/namespaces/")) {
		char h[33];
		random_hex(h, 16);
		snprintf(v, sizeof(v), "%.8s-%.4s-4%.3s-8%.3s-%.12s\n", h, h + 8, h + 12, h + 15,
		         h + 18);
		fake_file(nv, rel, "device_path", "\n");
		fake_file(nv, rel, "device_uuid", v);
		fake_file(nv, rel, "device_nguid", "00000000-0000-0000-0000-000000000000\n");
		fake_file(nv, rel, "enable", "0\n");
		fake_file(nv, rel, "revalidate_size", "");
	} else if (strncmp(rel, "hosts/", 6) == 0 && parts == 2 && nv->fake_auth) {
		/* the kernel's defaults with CONFIG_NVME_TARGET_AUTH */
		fake_file(nv, rel, "dhchap_key", "\n");
		fake_file(nv, rel, "dhchap_ctrl_key", "\n");
		fake_file(nv, rel, "dhchap_hash", "hmac(sha256)\n");
		fake_file(nv, rel, "dhchap_dhgroup", "null\n");
	} else if (strncmp(rel, "ports/", 6) == 0 && parts == 2) {
		fake_file(nv, rel, "addr_trtype", "\n");
		fake_file(nv, rel, "addr_adrfam", "\n");
		fake_file(nv, rel, "addr_traddr", "\n");
		fake_file(nv, rel, "addr_trsvcid", "\n");
		fake_file(nv, rel, "param_inline_data_size", "-1\n");
		fake_subdir(nv, rel, "subsystems");
		fake_subdir(nv, rel, "referrals");
	}
}

int nvmet_fs_mkdir(nvmet *nv, const char *rel, bool *created, struct err *e)
{
	char p[NVMET_PATH_MAX + 256];
	if (created)
		*created = false;
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet mkdir %s: path too long", rel);
	CALL(nv);
	if (mkdir(p, 0755) < 0) {
		if (errno != EEXIST)
			return err_set(e, -errno, "nvmet mkdir %s: %s", rel,
			               nvmet_fs_errname(errno));
		/* the kernel creates a directory's entries with it; the fake after it, so a
		 * process killed in between leaves them missing: complete what is absent */
		if (nv->fake)
			fake_populate(nv, rel);
		return 0;
	}
	if (nv->fake)
		fake_populate(nv, rel);
	if (created)
		*created = true;
	trace(nv, "mkdir", rel, NULL);
	return 0;
}

int nvmet_fs_link_target(const char *rel, const char *target, char *out, size_t cap)
{
	/* start from the link's directory: rel without its last component */
	char buf[NVMET_PATH_MAX];
	const char *slash = strrchr(rel, '/');
	size_t n = slash ? (size_t)(slash - rel) : 0;
	if (target[0] == '/' || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, rel, n);
	buf[n] = '\0';
	for (const char *c = target; *c;) {
		const char *end = strchrnul(c, '/');
		size_t len = (size_t)(end - c);
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			if (n == 0)
				return -EINVAL; /* above the nvmet root */
			char *up = strrchr(buf, '/');
			n = up ? (size_t)(up - buf) : 0;
			buf[n] = '\0';
		} else if (len > 0 && !(len == 1 && c[0] == '.')) {
			if (n + 1 + len >= sizeof(buf))
				return -ENAMETOOLONG;
			if (n > 0)
				buf[n++] = '/';
			memcpy(buf + n, c, len);
			n += len;
			buf[n] = '\0';
		}
		c = *end ? end + 1 : end;
	}
	if (n == 0)
		return -EINVAL;
	int w = snprintf(out, cap, "%s", buf);
	return w < 0 || (size_t)w >= cap ? -ENAMETOOLONG : 0;
}

int nvmet_fs_symlink(nvmet *nv, const char *target, const char *rel, bool *created, struct err *e)
{
	char p[NVMET_PATH_MAX + 256], t[NVMET_PATH_MAX], abs_t[NVMET_PATH_MAX + 256];
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet symlink %s: path too long", rel);
	/* Real configfs resolves a symlink's target from the caller's working
	 * directory (configfs_symlink -> kern_path), not from the link's directory,
	 * so a relative target must be given as an absolute path there; the kernel
	 * then reports the link in its own relative form. A plain directory tree
	 * (fake root) stores the text as given. */
	const char *use = target;
	if (!nv->fake && target[0] != '/') {
		int r = nvmet_fs_link_target(rel, target, t, sizeof(t));
		if (r < 0 || nvmet_fs_path(nv, t, abs_t, sizeof(abs_t)) < 0)
			return err_set(e, r < 0 ? r : -ENAMETOOLONG,
			               "nvmet symlink %s: cannot resolve target %s", rel, target);
		use = abs_t;
	}
	if (created)
		*created = false;
	CALL(nv);
	if (symlink(use, p) < 0) {
		if (errno == EEXIST)
			return 0;
		return err_set(e, -errno, "nvmet symlink %s: %s", rel, nvmet_fs_errname(errno));
	}
	if (created)
		*created = true;
	trace(nv, "symlink", rel, target);
	return 0;
}

int nvmet_fs_unlink(nvmet *nv, const char *rel, struct err *e)
{
	char p[NVMET_PATH_MAX + 256];
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet unlink %s: path too long", rel);
	CALL(nv);
	if (unlink(p) < 0) {
		if (errno == ENOENT)
			return 0;
		return err_set(e, -errno, "nvmet unlink %s: %s", rel, nvmet_fs_errname(errno));
	}
	trace(nv, "unlink", rel, NULL);
	return 0;
}

static bool dot_entry(const char *n)
{
	return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2]));
}

/* Fake mode: the kernel removes attribute files and default groups with the directory. */
static void fake_clear(nvmet *nv, const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char p[NVMET_PATH_MAX + 512];
	(void)nv;
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (dot_entry(de->d_name))
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", path, de->d_name) >= (int)sizeof(p))
			continue;
		if (de->d_type == DT_REG)
			unlink(p);
		else if (de->d_type == DT_DIR)
			rmdir(
			    p); /* only empty default groups go; a populated one keeps rmdir failing */
	}
	closedir(d);
}

int nvmet_fs_rmdir(nvmet *nv, const char *rel, struct err *e)
{
	char p[NVMET_PATH_MAX + 256];
	struct stat st;
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet rmdir %s: path too long", rel);
	CALL(nv);
	if (lstat(p, &st) < 0 && errno == ENOENT)
		return 0;
	if (nv->fake)
		fake_clear(nv, p);
	CALL(nv);
	if (rmdir(p) < 0) {
		if (errno == ENOENT)
			return 0;
		int er = nv->fake && errno == ENOTEMPTY ? -EBUSY : -errno;
		return err_set(e, er, "nvmet rmdir %s: %s", rel, nvmet_fs_errname(er));
	}
	trace(nv, "rmdir", rel, NULL);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int nvmet_fs_list(const nvmet *nv, const char *rel, char ***names, size_t *n, struct err *e)
{
	char p[NVMET_PATH_MAX + 256];
	char **v = NULL;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	*names = NULL;
	*n = 0;
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet list %s: path too long", rel);
	CALL(nv);
	DIR *d = opendir(p);
	if (!d)
		return errno == ENOENT
		           ? 0
		           : err_set(e, -errno, "nvmet list %s: %s", rel, nvmet_fs_errname(errno));
	while ((de = readdir(d))) {
		if (dot_entry(de->d_name))
			continue;
		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 8;
			char **nvv = realloc(v, nc * sizeof(*v));
			if (!nvv)
				goto oom;
			v = nvv;
			cap = nc;
		}
		if (!(v[cnt] = strdup(de->d_name)))
			goto oom;
		cnt++;
	}
	closedir(d);
	nv_calls_add(nv, 4); /* opendir's fstat, two getdents64, closedir's close */
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_names);
	*names = v;
	*n = cnt;
	return 0;
oom:
	closedir(d);
	nvmet_fs_names_free(v, cnt);
	return err_set(e, -ENOMEM, "nvmet list %s: out of memory", rel);
}

int nvmet_fs_empty(const nvmet *nv, const char *rel, struct err *e)
{
	char p[NVMET_PATH_MAX + 256];
	/* One small getdents64 buffer, not readdir's 32 KiB: "." and ".." plus the first entry
	 * fit, and a directory of 10,000 links costs what one of ten does. */
	char buf[1024] __attribute__((aligned(8)));
	int r = 1;
	if (nvmet_fs_path(nv, rel, p, sizeof(p)) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet list %s: path too long", rel);
	CALL(nv);
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT
		           ? 1
		           : err_set(e, -errno, "nvmet list %s: %s", rel, nvmet_fs_errname(errno));
	while (r == 1) {
		CALL(nv);
		ssize_t n = getdents64(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = err_set(e, -errno, "nvmet list %s: %s", rel, nvmet_fs_errname(errno));
		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n && r == 1;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			if (!dot_entry(de->d_name))
				r = 0;
			off += de->d_reclen;
		}
	}
	CALL(nv);
	close(fd);
	return r;
}

/* Whether rel_a and rel_b name the same object once symlinks are followed (two stats). */
bool nvmet_fs_same(nvmet *nv, const char *rel_a, const char *rel_b)
{
	char pa[NVMET_PATH_MAX + 256], pb[NVMET_PATH_MAX + 256];
	struct stat sa, sb;
	if (nvmet_fs_path(nv, rel_a, pa, sizeof(pa)) < 0 ||
	    nvmet_fs_path(nv, rel_b, pb, sizeof(pb)) < 0)
		return false;
	nv_calls_add(nv, 2);
	return stat(pa, &sa) == 0 && stat(pb, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

void nvmet_fs_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}
