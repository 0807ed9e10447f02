/* Unit tests of what the node may touch: staging and target paths are kubelet's own paths below
 * --kubelet-dir, opened without following a symlink (node/paths.h); unpublish removes only the
 * volume's binds and what publish created (csi.md §9.2; docs/cli.md).  Every hostile request is
 * checked against sentinel files outside the kubelet directory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fakes/node/fakemount.h"
#include "fakes/node/fakesys.h"
#include "node/paths.h"
#include "node/service.h"
#include "node_fixture.h"
#include "testutil.h"

#define PASSWD "root:x:0:0:root:/root:/bin/sh\n"

static int unpublish_at(struct env *v, const char *target, struct grpc_status *st)
{
	Csi__V1__NodeUnpublishVolumeRequest r = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnpublishVolumeResponse resp = CSI__V1__NODE_UNPUBLISH_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.target_path = (char *)target;
	memset(st, 0, sizeof(*st));
	return node_unpublish_volume(v->n, &r, &resp, st);
}

static int publish_at(struct env *v, struct sreq *s, const char *staging, const char *target,
                      struct grpc_status *st)
{
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodePublishVolumeResponse resp = CSI__V1__NODE_PUBLISH_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.staging_target_path = (char *)staging;
	r.target_path = (char *)target;
	r.volume_capability = &s->cap;
	memset(st, 0, sizeof(*st));
	return node_publish_volume(v->n, &r, &resp, st);
}

static int unstage_at(struct env *v, const char *staging, struct grpc_status *st)
{
	Csi__V1__NodeUnstageVolumeRequest r = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeResponse resp = CSI__V1__NODE_UNSTAGE_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.staging_target_path = (char *)staging;
	memset(st, 0, sizeof(*st));
	return node_unstage_volume(v->n, &r, &resp, st);
}

static int stats_at(struct env *v, const char *path, const char *staging, struct grpc_status *st)
{
	Csi__V1__NodeGetVolumeStatsRequest r = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse resp = CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.volume_path = (char *)path;
	r.staging_target_path = (char *)staging;
	memset(st, 0, sizeof(*st));
	int code = node_get_volume_stats(v->n, &r, &resp, st);
	node_response_clear(&resp.base);
	return code;
}

static int expand_at(struct env *v, const char *path, const char *staging, struct grpc_status *st)
{
	Csi__V1__NodeExpandVolumeRequest r = CSI__V1__NODE_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__NodeExpandVolumeResponse resp = CSI__V1__NODE_EXPAND_VOLUME_RESPONSE__INIT;
	r.volume_id = (char *)VOL;
	r.volume_path = (char *)path;
	r.staging_target_path = (char *)staging;
	memset(st, 0, sizeof(*st));
	return node_expand_volume(v->n, &r, &resp, st);
}

static const char *at(const struct env *v, const char *rel)
{
	static char buf[4][4400];
	static int i;
	i = (i + 1) % 4;
	ck_assert(snprintf(buf[i], sizeof(buf[i]), "%s/%s", v->root, rel) < (int)sizeof(buf[i]));
	return buf[i];
}

/* The paths a hostile caller names: the sentinels outside every root, the node's own socket, a
 * path that climbs out of kubelet's tree to the sentinel outside/<climb_to>, and the sentinels
 * relative to the working directory, which hostile_enter moves to root/a/b so that they
 * resolve; hostile_leave moves it back. */
#define HOSTILE_PATHS 6
struct hostile {
	char path[HOSTILE_PATHS][4400];
	char cwd[PATH_MAX];
};

static void hostile_enter(const struct env *v, const char *climb_to, struct hostile *h)
{
	const char *const own[] = {
	    "outside/passwd",
	    "outside/empty",
	    "kubelet/plugins/" RULES_DRIVER_NAME "/csi.sock",
	    fmt("kubelet/pods/u1/volumes/kubernetes.io~csi/pv1/../../../../../outside/%s",
	        climb_to),
	};
	for (size_t i = 0; i < 4; i++)
		snprintf(h->path[i], sizeof(h->path[i]), "%s", at(v, own[i]));
	snprintf(h->path[4], sizeof(h->path[4]), "../../outside/passwd");
	snprintf(h->path[5], sizeof(h->path[5]), "../../outside/empty");
	ck_assert_ptr_nonnull(getcwd(h->cwd, sizeof(h->cwd)));
	ck_assert_int_eq(mkdir(at(v, "a"), 0755), 0);
	ck_assert_int_eq(mkdir(at(v, "a/b"), 0755), 0);
	ck_assert_int_eq(chdir(at(v, "a/b")), 0);
}

static void hostile_leave(const struct hostile *h)
{
	ck_assert_int_eq(chdir(h->cwd), 0);
}

static bool exists(const char *path)
{
	struct stat sb;
	return lstat(path, &sb) == 0;
}

/* The sentinels outside the kubelet directory: a file with content, an empty directory and a
 * socket where the node's own would be. */
static void plant(struct env *v)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	tu_write(v->root, "outside/passwd", PASSWD);
	ck_assert_int_eq(mkdir(at(v, "outside/empty"), 0755), 0);
	tu_write(v->root, "kubelet/plugins/" RULES_DRIVER_NAME "/.keep", "");
	ck_assert(snprintf(a.sun_path, sizeof(a.sun_path), "%s",
	                   at(v, "kubelet/plugins/" RULES_DRIVER_NAME "/csi.sock")) <
	          (int)sizeof(a.sun_path));
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	close(fd);
}

static void sentinels_intact(struct env *v)
{
	struct stat sb;
	ck_assert_str_eq(tu_read(v->root, "outside/passwd"), PASSWD);
	ck_assert_int_eq(stat(at(v, "outside/empty"), &sb), 0);
	ck_assert(S_ISDIR(sb.st_mode));
	ck_assert_int_eq(stat(at(v, "kubelet/plugins/" RULES_DRIVER_NAME "/csi.sock"), &sb), 0);
	ck_assert(S_ISSOCK(sb.st_mode));
}

START_TEST(test_path_rules)
{
	static const struct {
		enum node_path_kind kind;
		const char *rel; /* below /k; NULL entries are absolute as written */
		const char *abs;
		bool ok;
	} cases[] = {
	    {NODE_PATH_TARGET, "pods/u1/volumes/kubernetes.io~csi/pv1/mount", NULL, true},
	    {NODE_PATH_TARGET, "plugins/kubernetes.io/csi/volumeDevices/publish/pv1/u1", NULL,
	     true},
	    {NODE_PATH_TARGET, "plugins/kubernetes.io/csi/volumeDevices/publish/pv1", NULL, true},
	    {NODE_PATH_STAGING, "plugins/kubernetes.io/csi/" RULES_DRIVER_NAME "/ab12/globalmount",
	     NULL, true},
	    {NODE_PATH_STAGING, "plugins/kubernetes.io/csi/pv/pv1/globalmount", NULL, true},
	    {NODE_PATH_STAGING, "plugins/kubernetes.io/csi/volumeDevices/staging/pv1", NULL, true},
	    /* not kubelet's layout */
	    {NODE_PATH_TARGET, "pods/u1/volumes/kubernetes.io~csi/pv1/mount/x", NULL, false},
	    {NODE_PATH_TARGET, "pods/u1/volumes/kubernetes.io~nfs/pv1/mount", NULL, false},
	    {NODE_PATH_TARGET, "plugins/kubernetes.io/csi/pv/pv1/globalmount", NULL, false},
	    {NODE_PATH_TARGET, "plugins/" RULES_DRIVER_NAME "/csi.sock", NULL, false},
	    {NODE_PATH_STAGING, "plugins/kubernetes.io/csi/other.driver/ab12/globalmount", NULL,
	     false},
	    {NODE_PATH_STAGING, "pods/u1/volumes/kubernetes.io~csi/pv1/mount", NULL, false},
	    {NODE_PATH_STAGING, "plugins/kubernetes.io/csi/pv/pv1", NULL, false},
	    /* not normalised */
	    {NODE_PATH_TARGET, "pods/u1/volumes/kubernetes.io~csi/pv1/../../../../../etc/passwd",
	     NULL, false},
	    {NODE_PATH_TARGET, "pods/u1/volumes/kubernetes.io~csi/./pv1/mount", NULL, false},
	    {NODE_PATH_TARGET, "pods//u1/volumes/kubernetes.io~csi/pv1/mount", NULL, false},
	    {NODE_PATH_TARGET, "pods/u1/volumes/kubernetes.io~csi/pv1/mount/", NULL, false},
	    {NODE_PATH_TARGET, "pods/u\n1/volumes/kubernetes.io~csi/pv1/mount", NULL, false},
	    /* outside /k or relative */
	    {NODE_PATH_TARGET, NULL, "/kx/pods/u1/volumes/kubernetes.io~csi/pv1/mount", false},
	    {NODE_PATH_TARGET, NULL, "/pods/u1/volumes/kubernetes.io~csi/pv1/mount", false},
	    {NODE_PATH_TARGET, NULL, "k/pods/u1/volumes/kubernetes.io~csi/pv1/mount", false},
	    {NODE_PATH_TARGET, NULL, "../../etc/passwd", false},
	    {NODE_PATH_TARGET, NULL, "/etc/passwd", false},
	    {NODE_PATH_STAGING, NULL, "/k", false},
	};
	char path[512];
	struct grpc_status st;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].rel)
			snprintf(path, sizeof(path), "/k/%s", cases[i].rel);
		else
			snprintf(path, sizeof(path), "%s", cases[i].abs);
		memset(&st, 0, sizeof(st));
		int code = node_path_check("/k", cases[i].kind, "target_path", path, &st);
		ck_assert_msg(code == (cases[i].ok ? GRPC_OK : GRPC_INVALID_ARGUMENT),
		              "case %zu %s: %d %s", i, path, code, st.msg);
		if (!cases[i].ok)
			ck_assert_msg(strstr(st.msg, "target_path \"") == st.msg, "%s", st.msg);
	}
	node_path_check("/k", NODE_PATH_TARGET, "target_path", "../../etc/passwd", &st);
	ck_assert_str_eq(st.msg, "target_path \"../../etc/passwd\" must be an absolute path below "
	                         "the kubelet directory /k (--kubelet-dir)");
	node_path_check("/k", NODE_PATH_TARGET, "target_path", "/etc/passwd", &st);
	ck_assert_str_eq(st.msg,
	                 "target_path \"/etc/passwd\" is not one of kubelet's publish paths: "
	                 "/k/pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount or "
	                 "/k/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<pod uid> (the "
	                 "kubelet directory is set with --kubelet-dir)");
	ck_assert_int_eq(node_kubelet_dir_check("/var/lib/kubelet"), 0);
	ck_assert_int_eq(node_kubelet_dir_check("/"), -EINVAL);
	ck_assert_int_eq(node_kubelet_dir_check("var/lib/kubelet"), -EINVAL);
	ck_assert_int_eq(node_kubelet_dir_check("/var/lib/kubelet/"), -EINVAL);
	ck_assert_int_eq(node_kubelet_dir_check("/var/lib/../kubelet"), -EINVAL);
}
END_TEST

/* Unpublish of files and directories the node never created. */
START_TEST(test_unpublish_touches_nothing_outside)
{
	struct env v;
	struct grpc_status st;
	env_init(&v, 0);
	plant(&v);
	struct hostile h;
	hostile_enter(&v, "passwd", &h);
	for (size_t i = 0; i < HOSTILE_PATHS; i++) {
		ck_assert_int_eq(unpublish_at(&v, h.path[i], &st), GRPC_INVALID_ARGUMENT);
		ck_assert_ptr_nonnull(strstr(st.msg, "target_path \""));
		sentinels_intact(&v);
	}
	hostile_leave(&h);
	ck_assert_int_eq(v.m.umounts, 0);

	/* a pod directory that is a symlink out of the kubelet directory */
	tu_write(v.root, "outside/pod/volumes/kubernetes.io~csi/pv1/mount/.keep", "");
	ck_assert_int_eq(unlink(at(&v, "outside/pod/volumes/kubernetes.io~csi/pv1/mount/.keep")),
	                 0);
	tu_write(v.root, "kubelet/pods/.keep", "");
	ck_assert_int_eq(symlink("../../outside/pod", at(&v, "kubelet/pods/evil")), 0);
	ck_assert_int_eq(
	    unpublish_at(&v, at(&v, "kubelet/pods/evil/volumes/kubernetes.io~csi/pv1/mount"), &st),
	    GRPC_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(st.msg, "passes through a symlink"));
	ck_assert(exists(at(&v, "outside/pod/volumes/kubernetes.io~csi/pv1/mount")));

	/* kubelet's layout, but a symlink, a file with content, a directory with content */
	tu_write(v.root, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/.keep", "");
	const char *leaf = at(&v, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/mount");
	ck_assert_int_eq(symlink(at(&v, "outside/passwd"), leaf), 0);
	ck_assert_int_eq(unpublish_at(&v, leaf, &st), GRPC_OK);
	ck_assert(exists(leaf));
	ck_assert_int_eq(unlink(leaf), 0);
	tu_write(v.root, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/mount", "data");
	ck_assert_int_eq(unpublish_at(&v, leaf, &st), GRPC_OK);
	ck_assert_str_eq(tu_read(v.root, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/mount"),
	                 "data");
	ck_assert_int_eq(unlink(leaf), 0);
	tu_write(v.root, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/mount/keep", "x");
	ck_assert_int_eq(unpublish_at(&v, leaf, &st), GRPC_OK);
	ck_assert_str_eq(
	    tu_read(v.root, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/mount/keep"), "x");
	sentinels_intact(&v);
	ck_assert_int_eq(v.m.umounts, 0);
	env_done(&v);
}
END_TEST

/* A mount on the target that is not the volume's bind stays (and so does its directory). */
START_TEST(test_unpublish_leaves_foreign_mounts)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	env_init(&v, 0);
	sreq_init(&s, &v, 0, NULL);
	tu_write(v.root, "kubelet/pods/uid1/volumes/kubernetes.io~csi/pv1/mount/.keep", "");
	mi_append(&v.m, "8:1", "/", v.target, "rw,relatime", "ext4", "/dev/sda1");
	ck_assert_int_eq(unpublish_at(&v, v.target, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, fmt("target path %s is a mount point but volume \"%s\" is "
	                             "not staged on this node; left in place",
	                             v.target, VOL));
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	ck_assert_int_eq(unpublish_at(&v, v.target, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, fmt("target path %s is a mount of something other than "
	                             "volume \"%s\"; left in place",
	                             v.target, VOL));
	ck_assert_int_eq(v.m.umounts, 0);
	ck_assert(exists(v.target));
	env_done(&v);
}
END_TEST

/* Stage and publish never create anything through a symlink, and never connect for a staging
 * path they cannot use; a volume is published and unstaged only at the staging path it has. */
START_TEST(test_stage_publish_paths)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	char other[4400];
	env_init(&v, 0);
	plant(&v);
	sreq_init(&s, &v, 0, NULL);
	tu_write(v.root, "kubelet/plugins/kubernetes.io/csi/.keep", "");
	ck_assert_int_eq(symlink("../../../../outside",
	                         at(&v, "kubelet/plugins/kubernetes.io/csi/" RULES_DRIVER_NAME)),
	                 0);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(st.msg, "passes through a symlink"));
	ck_assert_int_eq(v.k.connects, 0);
	ck_assert_int_eq(v.m.mounts, 0);
	ck_assert(
	    !exists(at(&v, "outside/0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3"
	                   "d2e1f0")));
	s.r.staging_target_path = (char *)"/etc/pillar-never";
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
	ck_assert_int_eq(v.k.connects, 0);
	ck_assert_int_eq(unlink(at(&v, "kubelet/plugins/kubernetes.io/csi/" RULES_DRIVER_NAME)), 0);
	s.r.staging_target_path = v.staging;
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);

	tu_write(v.root, "kubelet/pods/.keep", "");
	ck_assert_int_eq(symlink("../../outside", at(&v, "kubelet/pods/evil")), 0);
	ck_assert_int_eq(publish_at(&v, &s, v.staging,
	                            at(&v, "kubelet/pods/evil/volumes/kubernetes.io~csi/pv1/mount"),
	                            &st),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert(!exists(at(&v, "outside/volumes")));
	ck_assert_int_eq(publish_at(&v, &s, v.staging, at(&v, "outside/empty"), &st),
	                 GRPC_INVALID_ARGUMENT);
	snprintf(other, sizeof(other), "%s",
	         at(&v, "kubelet/plugins/kubernetes.io/csi/pv/another/globalmount"));
	ck_assert_int_eq(publish_at(&v, &s, other, v.target, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, fmt("volume \"%s\" is staged at %s on this node, not at %s", VOL,
	                             v.staging, other));
	ck_assert_int_eq(unstage_at(&v, other, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_int_eq(v.k.disconnects, 0);
	ck_assert_int_eq(v.m.mounts, 1); /* the staging mount only */
	ck_assert_int_eq(publish_at(&v, &s, v.staging, v.target, &st), GRPC_OK);
	ck_assert_int_eq(unpublish_at(&v, v.target, &st), GRPC_OK);
	ck_assert(!exists(v.target));
	ck_assert_int_eq(unstage_at(&v, v.staging, &st), GRPC_OK);
	sentinels_intact(&v);
	env_done(&v);
}
END_TEST

/* NodeGetVolumeStats and NodeExpandVolume of a staged volume at paths that are not its own:
 * refused before anything is read, rescanned or resized. */
START_TEST(test_stats_expand_paths)
{
	struct env v;
	struct sreq s;
	struct grpc_status st;
	char other[4400];
	env_init(&v, 1);
	plant(&v);
	sreq_init(&s, &v, 0, NULL);
	ck_assert_int_eq(stage(&v, &s, &st), GRPC_OK);
	struct hostile h;
	hostile_enter(&v, "empty", &h);
	for (size_t i = 0; i < HOSTILE_PATHS; i++) {
		ck_assert_int_eq(stats_at(&v, h.path[i], NULL, &st), GRPC_INVALID_ARGUMENT);
		ck_assert_msg(strstr(st.msg, "volume_path \"") == st.msg, "%s", st.msg);
		ck_assert_int_eq(expand_at(&v, h.path[i], NULL, &st), GRPC_INVALID_ARGUMENT);
		ck_assert_msg(strstr(st.msg, "volume_path \"") == st.msg, "%s", st.msg);
		ck_assert_int_eq(expand_at(&v, v.staging, h.path[i], &st), GRPC_INVALID_ARGUMENT);
		ck_assert_msg(strstr(st.msg, "staging_target_path \"") == st.msg, "%s", st.msg);
	}
	hostile_leave(&h);
	stats_at(&v, "/etc/passwd", NULL, &st);
	ck_assert_str_eq(
	    st.msg,
	    fmt("volume_path \"/etc/passwd\" is not one of kubelet's staging or publish paths: "
	        "%s/plugins/kubernetes.io/csi/" RULES_DRIVER_NAME "/<volume hash>/globalmount, "
	        "%s/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>, "
	        "%s/pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount or "
	        "%s/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<pod uid> (the kubelet "
	        "directory is set with --kubelet-dir)",
	        v.kubelet, v.kubelet, v.kubelet, v.kubelet));

	/* a pod directory that is a symlink out, a publish path that is one */
	ck_assert_int_eq(mkdir(at(&v, "outside/pod"), 0755), 0);
	tu_write(v.root, "outside/pod/volumes/kubernetes.io~csi/pv1/mount/.keep", "");
	tu_write(v.root, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/.keep", "");
	ck_assert_int_eq(symlink("../../outside/pod", at(&v, "kubelet/pods/evil")), 0);
	ck_assert_int_eq(symlink(at(&v, "outside/empty"),
	                         at(&v, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/mount")),
	                 0);
	const char *const links[] = {
	    at(&v, "kubelet/pods/evil/volumes/kubernetes.io~csi/pv1/mount"),
	    at(&v, "kubelet/pods/u2/volumes/kubernetes.io~csi/pv1/mount"),
	};
	for (size_t i = 0; i < 2; i++) {
		ck_assert_int_eq(stats_at(&v, links[i], NULL, &st), GRPC_INVALID_ARGUMENT);
		ck_assert_ptr_nonnull(strstr(st.msg, "passes through a symlink"));
		ck_assert_int_eq(expand_at(&v, links[i], v.staging, &st), GRPC_INVALID_ARGUMENT);
		ck_assert_ptr_nonnull(strstr(st.msg, "passes through a symlink"));
	}

	/* kubelet's layout, but another staging path than the volume's */
	snprintf(other, sizeof(other), "%s",
	         at(&v, "kubelet/plugins/kubernetes.io/csi/pv/another/globalmount"));
	ck_assert_int_eq(mkdir(at(&v, "kubelet/plugins/kubernetes.io/csi/pv"), 0755), 0);
	ck_assert_int_eq(mkdir(at(&v, "kubelet/plugins/kubernetes.io/csi/pv/another"), 0755), 0);
	ck_assert_int_eq(mkdir(other, 0755), 0);
	const char *mismatch =
	    fmt("volume \"%s\" is staged at %s on this node, not at %s", VOL, v.staging, other);
	ck_assert_int_eq(stats_at(&v, other, NULL, &st), GRPC_NOT_FOUND);
	ck_assert_str_eq(st.msg, mismatch);
	ck_assert_int_eq(stats_at(&v, v.staging, other, &st), GRPC_NOT_FOUND);
	ck_assert_int_eq(expand_at(&v, other, NULL, &st), GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(st.msg, mismatch);
	ck_assert_int_eq(expand_at(&v, v.staging, other, &st), GRPC_FAILED_PRECONDITION);
	const char *missing = at(&v, "kubelet/pods/u3/volumes/kubernetes.io~csi/pv1/mount");
	ck_assert_int_eq(stats_at(&v, missing, NULL, &st), GRPC_NOT_FOUND);
	ck_assert_str_eq(st.msg, fmt("path %s does not exist", missing));
	ck_assert_int_eq(expand_at(&v, missing, NULL, &st), GRPC_NOT_FOUND);

	/* nothing was rescanned or resized, nothing outside changed */
	ck_assert_str_eq(tu_read(v.sys, "class/nvme/nvme3/rescan_controller"), "");
	ck_assert_ptr_null(strstr(tu_read(v.root, "tools.log"), "resize2fs"));
	ck_assert(exists(at(&v, "outside/pod/volumes/kubernetes.io~csi/pv1/mount")));
	sentinels_intact(&v);
	/* the volume's own paths still work */
	ck_assert_int_eq(stats_at(&v, v.staging, v.staging, &st), GRPC_OK);
	ck_assert_int_eq(expand_at(&v, v.staging, v.staging, &st), GRPC_OK);
	ck_assert_ptr_nonnull(strstr(tu_read(v.root, "tools.log"), "resize2fs"));
	env_done(&v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_paths");
	TCase *t = tcase_create("paths");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_path_rules);
	tcase_add_test(t, test_unpublish_touches_nothing_outside);
	tcase_add_test(t, test_unpublish_leaves_foreign_mounts);
	tcase_add_test(t, test_stage_publish_paths);
	tcase_add_test(t, test_stats_expand_paths);
	suite_add_tcase(s, t);
	return tu_run(s);
}
