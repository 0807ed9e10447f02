/* node/paths — kubelet's staging and publish paths, checked and opened beneath --kubelet-dir. */
#include "node/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules/keys.h"

#define MAX_DEPTH 8

/* kubelet's layouts below its directory ("*" is any one component, "" ends a pattern). */
static const char *const staging_layouts[][MAX_DEPTH] = {
    {"plugins", "kubernetes.io", "csi", RULES_DRIVER_NAME, "*", "globalmount", ""},
    {"plugins", "kubernetes.io", "csi", "pv", "*", "globalmount", ""},
    {"plugins", "kubernetes.io", "csi", "volumeDevices", "staging", "*", ""},
};
static const char *const target_layouts[][MAX_DEPTH] = {
    {"pods", "*", "volumes", "kubernetes.io~csi", "*", "mount", ""},
    {"plugins", "kubernetes.io", "csi", "volumeDevices", "publish", "*", "*", ""},
    {"plugins", "kubernetes.io", "csi", "volumeDevices", "publish", "*", ""},
};

/* Absolute, no empty, "." or ".." component, no trailing "/", no control characters. */
static bool normalised(const char *p)
{
	if (p[0] != '/' || p[1] == '\0')
		return false;
	for (const char *c = p; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
		if (*c != '/')
			continue;
		const char *n = c + 1;
		if (*n == '/' || *n == '\0' || (n[0] == '.' && (n[1] == '/' || n[1] == '\0')) ||
		    (n[0] == '.' && n[1] == '.' && (n[2] == '/' || n[2] == '\0')))
			return false;
	}
	return strlen(p) < PATH_MAX;
}

int node_kubelet_dir_check(const char *dir)
{
	return dir && normalised(dir) ? 0 : -EINVAL;
}

static bool layout_match(const char *const layout[MAX_DEPTH], const char *rel)
{
	for (int i = 0; i < MAX_DEPTH; i++) {
		const char *slash = strchr(rel, '/');
		size_t n = slash ? (size_t)(slash - rel) : strlen(rel);
		if (!layout[i][0])
			return false; /* more components than the layout has */
		if (strcmp(layout[i], "*") != 0 &&
		    (strlen(layout[i]) != n || strncmp(layout[i], rel, n) != 0))
			return false;
		if (!slash)
			return !layout[i + 1][0];
		rel = slash + 1;
	}
	return false;
}

/* path below kubelet_dir in one of the layouts of kind. */
static bool in_layouts(const char *kubelet_dir, enum node_path_kind kind, const char *path)
{
	size_t kl = strlen(kubelet_dir), i;
	if (strncmp(path, kubelet_dir, kl) != 0 || path[kl] != '/')
		return false;
	if (kind != NODE_PATH_TARGET)
		for (i = 0; i < sizeof(staging_layouts) / sizeof(staging_layouts[0]); i++)
			if (layout_match(staging_layouts[i], path + kl + 1))
				return true;
	if (kind != NODE_PATH_STAGING)
		for (i = 0; i < sizeof(target_layouts) / sizeof(target_layouts[0]); i++)
			if (layout_match(target_layouts[i], path + kl + 1))
				return true;
	return false;
}

int node_path_check(const char *kubelet_dir, enum node_path_kind kind, const char *field,
                    const char *path, struct grpc_status *st)
{
	if (path[0] != '/')
		return grpc_status_set(
		    st, GRPC_INVALID_ARGUMENT,
		    "%s \"%s\" must be an absolute path below the kubelet directory "
		    "%s (--kubelet-dir)",
		    field, path, kubelet_dir);
	if (!normalised(path))
		return grpc_status_set(
		    st, GRPC_INVALID_ARGUMENT,
		    "%s \"%s\" must be a normalised path: no \".\", \"..\" or empty "
		    "components, no trailing \"/\", no control characters",
		    field, path);
	if (in_layouts(kubelet_dir, kind, path))
		return GRPC_OK;
	if (kind == NODE_PATH_STAGING)
		return grpc_status_set(
		    st, GRPC_INVALID_ARGUMENT,
		    "%s \"%s\" is not one of kubelet's staging paths: "
		    "%s/plugins/kubernetes.io/csi/%s/<volume hash>/globalmount or "
		    "%s/plugins/kubernetes.io/csi/volumeDevices/staging/<pv> (the kubelet "
		    "directory is "
		    "set with --kubelet-dir)",
		    field, path, kubelet_dir, RULES_DRIVER_NAME, kubelet_dir);
	if (kind == NODE_PATH_VOLUME)
		return grpc_status_set(
		    st, GRPC_INVALID_ARGUMENT,
		    "%s \"%s\" is not one of kubelet's staging or publish paths: "
		    "%s/plugins/kubernetes.io/csi/%s/<volume hash>/globalmount, "
		    "%s/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>, "
		    "%s/pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount or "
		    "%s/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<pod uid> (the "
		    "kubelet directory is set with --kubelet-dir)",
		    field, path, kubelet_dir, RULES_DRIVER_NAME, kubelet_dir, kubelet_dir,
		    kubelet_dir);
	return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
	                       "%s \"%s\" is not one of kubelet's publish paths: "
	                       "%s/pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount or "
	                       "%s/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<pod uid> "
	                       "(the kubelet directory is set with --kubelet-dir)",
	                       field, path, kubelet_dir, kubelet_dir);
}

/* One component below fd, never through a symlink; made first with create.  The new fd or a
 * negative errno (-ELOOP for a symlink). */
static int open_component(int fd, const char *name, bool create)
{
	struct stat sb;
	int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0 && errno == ENOENT && create) {
		if (mkdirat(fd, name, 0750) < 0 && errno != EEXIST)
			return -errno;
		nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (nfd >= 0)
		return nfd;
	int r = -errno;
	if (r == -ENOTDIR && fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(sb.st_mode))
		r = -ELOOP;
	return r;
}

int node_path_open_parent(const char *kubelet_dir, const char *path, bool create, int *dirfd,
                          const char **leaf)
{
	char name[NAME_MAX + 1];
	const char *p = path + strlen(kubelet_dir) + 1, *slash;
	int fd = open(kubelet_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*dirfd = -1;
	if (fd < 0)
		return -errno;
	while ((slash = strchr(p, '/')) != NULL) {
		size_t n = (size_t)(slash - p);
		if (n > NAME_MAX) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		int nfd = open_component(fd, name, create);
		close(fd);
		if (nfd < 0)
			return nfd;
		fd = nfd;
		p = slash + 1;
	}
	if (strlen(p) > NAME_MAX) {
		close(fd);
		return -ENAMETOOLONG;
	}
	*dirfd = fd;
	*leaf = p;
	return 0;
}

int node_path_open_dir(const char *kubelet_dir, const char *path, bool create, int *fd)
{
	const char *leaf;
	int dfd, r = node_path_open_parent(kubelet_dir, path, create, &dfd, &leaf);
	*fd = -1;
	if (r < 0)
		return r;
	r = open_component(dfd, leaf, create);
	close(dfd);
	if (r < 0)
		return r;
	*fd = r;
	return 0;
}

int node_path_lookup(const char *kubelet_dir, const char *path)
{
	struct stat sb;
	const char *leaf;
	int dfd, r = node_path_open_parent(kubelet_dir, path, false, &dfd, &leaf);
	if (r < 0)
		return r;
	r = fstatat(dfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) < 0 ? -errno
	    : S_ISLNK(sb.st_mode)                            ? -ELOOP
	                                                     : 0;
	close(dfd);
	return r;
}

int node_path_status(int r, const char *kubelet_dir, const char *field, const char *path,
                     const char *what, struct grpc_status *st)
{
	if (r == -ELOOP || r == -ENOTDIR)
		return grpc_status_set(
		    st, GRPC_INVALID_ARGUMENT,
		    "%s \"%s\" passes through a symlink or a file below the kubelet "
		    "directory %s; the node never follows one",
		    field, path, kubelet_dir);
	return grpc_status_set(st, GRPC_INTERNAL, "%s %s \"%s\": %s", what, field, path,
	                       strerror(-r));
}
