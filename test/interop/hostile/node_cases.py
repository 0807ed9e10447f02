#!/usr/bin/python3
"""Hostile CSI client against `pillar-csi node` (case_node.sh of the hostile-client suite).

The node runs with every root inside HOSTILE_TMP: --host-root (a fake /etc/nvme, /sys and a
regular file for /dev/nvme-fabrics), --state-dir and its socket.  Each check prints
"ok - <what>" or "not ok - <what>: <why>"; the harness (run.sh) checks the sentinels.
"""
import os
import sys

sys.path.insert(0, os.environ["HOSTILE_PY"])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import grpc  # noqa: E402
import csi_pb2 as csi  # noqa: E402
import csi_pb2_grpc as csig  # noqa: E402
import nodehost  # noqa: E402

TMP = os.environ["HOSTILE_TMP"]
SENT = os.environ["HOSTILE_SENTINEL_DIR"]
failed = 0


def check(what, ok, why=""):
    global failed
    if ok:
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - %s%s" % (what, ": %s" % (why,) if why != "" else ""))
    sys.stdout.flush()


def call(fn, req, timeout=10):
    try:
        return grpc.StatusCode.OK, "", fn(req, timeout=timeout)
    except grpc.RpcError as e:
        return e.code(), e.details() or "", None


class Node(nodehost.NodeProcess):
    def __init__(self, base):
        super().__init__(os.path.join(base, "csi.sock"))
        self.base = base
        self.host = os.path.join(base, "host")
        self.state = os.path.join(base, "state")
        self.log = os.path.join(base, "node.log")
        nodehost.make_host(self.host)

    def start(self, cwd, extra=()):
        args = [os.environ["PILLAR_BIN"], "node", "--csi-endpoint=unix://" + self.sock,
                "--node-id=worker-hostile-1", "--state-dir=" + self.state,
                "--host-root=" + self.host] + list(extra)
        if not super().start(args, self.log, "ab", cwd):
            return False
        self.node = csig.NodeStub(self.channel)
        self.ids = csig.IdentityStub(self.channel)
        return True


DRIVER = "pillar-csi.bhyoo.com"
VOL = "storage-1/nvmeof-tcp/file/fp/pvc-hostile"
NQN = "nqn.2026-01.com.bhyoo.pillar-csi:fp.pvc-hostile"
INVALID = grpc.StatusCode.INVALID_ARGUMENT
STATS_VOL = "storage-1/nvmeof-tcp/file/fp/pvc-hostile-stats"


def mount_cap():
    return csi.VolumeCapability(
        mount=csi.VolumeCapability.MountVolume(fs_type="ext4"),
        access_mode=csi.VolumeCapability.AccessMode(
            mode=csi.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))


def unpublish_cases(n, kubelet, cwd):
    """Issue 24 #1: NodeUnpublishVolume of paths the node never created."""
    sock = n.sock
    layout = os.path.join(kubelet, "pods", "u1", "volumes", "kubernetes.io~csi", "pv1")
    os.makedirs(layout)
    cases = [
        ("a file outside the kubelet directory", os.path.join(SENT, "passwd")),
        ("etc/passwd outside the kubelet directory", os.path.join(SENT, "etc", "passwd")),
        ("relative ../../…/etc/passwd from the node's working directory",
         os.path.relpath(os.path.join(SENT, "etc", "passwd"), cwd)),
        ("an empty directory outside", os.path.join(SENT, "empty-dir")),
        ("a mount point outside", os.path.join(SENT, "mnt")),
        ("a symlink outside", os.path.join(SENT, "link")),
        ("kubelet's layout with .. out of it",
         os.path.join(layout, "mount", *[".."] * 12) + os.path.join(SENT, "passwd")),
        ("the node's own socket", sock),
    ]
    for what, path in cases:
        c, m, _ = call(n.node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(
            volume_id=VOL, target_path=path))
        check("NodeUnpublishVolume of %s: INVALID_ARGUMENT naming target_path" % what,
              c == INVALID and m.startswith("target_path \""), "%s %r" % (c, m))
        check("  ... and the node's socket is still there", os.path.exists(sock))
    # a directory of kubelet's layout that is a symlink to the sentinel directory
    evil = os.path.join(kubelet, "pods", "u2", "volumes", "kubernetes.io~csi")
    os.makedirs(evil)
    os.symlink(SENT, os.path.join(evil, "pv1"))
    c, m, _ = call(n.node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(
        volume_id=VOL, target_path=os.path.join(evil, "pv1", "mount")))
    check("NodeUnpublishVolume through a symlink out of the kubelet directory: INVALID_ARGUMENT",
          c == INVALID and "symlink" in m, "%s %r" % (c, m))
    # kubelet's layout, but a file with content the node never created
    with open(os.path.join(layout, "mount"), "w") as f:
        f.write("not the node's")
    c, m, _ = call(n.node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(
        volume_id=VOL, target_path=os.path.join(layout, "mount")))
    check("NodeUnpublishVolume of a file with content on kubelet's path: OK, left in place",
          c == grpc.StatusCode.OK and os.path.isfile(os.path.join(layout, "mount")),
          "%s %r" % (c, m))


def plant_record(state, staging):
    """A stage record of STATS_VOL at staging (csi.md §7.5), as an earlier node process left it."""
    os.makedirs(staging)
    rec = nodehost.stage_record(STATS_VOL, staging, NQN + "-stats")
    del rec["namespace_nguid"]
    nodehost.plant_record(state, rec)


def stats_expand_cases(n, kubelet, cwd, staging):
    """NodeGetVolumeStats and NodeExpandVolume of a staged volume at paths it does not own."""
    pods = os.path.join(kubelet, "pods")
    through = os.path.join(pods, "u3", "volumes", "kubernetes.io~csi")
    os.makedirs(through)
    os.symlink(SENT, os.path.join(through, "pv1"))  # pv1/mount is the sentinel mount/
    leaf = os.path.join(pods, "u4", "volumes", "kubernetes.io~csi", "pv1")
    os.makedirs(leaf)
    os.symlink(os.path.join(SENT, "empty-dir"), os.path.join(leaf, "mount"))
    cases = [
        ("a file outside the kubelet directory", os.path.join(SENT, "passwd"), "volume_path \""),
        ("a directory outside", os.path.join(SENT, "empty-dir"), "volume_path \""),
        ("a mount point outside", os.path.join(SENT, "mnt"), "volume_path \""),
        ("a symlink outside", os.path.join(SENT, "link"), "volume_path \""),
        ("relative ../../… from the node's working directory",
         os.path.relpath(os.path.join(SENT, "empty-dir"), cwd), "volume_path \""),
        ("kubelet's layout with .. out of it",
         os.path.join(pods, "u1", "volumes", "kubernetes.io~csi", "pv1", "mount",
                      *[".."] * 12) + os.path.join(SENT, "empty-dir"), "volume_path \""),
        ("a pod volume directory that is a symlink out",
         os.path.join(through, "pv1", "mount"), "symlink"),
        ("a publish path that is a symlink out", os.path.join(leaf, "mount"), "symlink"),
    ]
    for what, path, want in cases:
        c, m, _ = call(n.node.NodeGetVolumeStats, csi.NodeGetVolumeStatsRequest(
            volume_id=STATS_VOL, volume_path=path))
        check("NodeGetVolumeStats at %s: INVALID_ARGUMENT (%s)" % (what, want.strip('"')),
              c == INVALID and want in m, "%s %r" % (c, m))
        c, m, _ = call(n.node.NodeExpandVolume, csi.NodeExpandVolumeRequest(
            volume_id=STATS_VOL, volume_path=path, staging_target_path=staging))
        check("NodeExpandVolume at %s: INVALID_ARGUMENT (%s)" % (what, want.strip('"')),
              c == INVALID and want in m, "%s %r" % (c, m))
        c, m, _ = call(n.node.NodeExpandVolume, csi.NodeExpandVolumeRequest(
            volume_id=STATS_VOL, volume_path=staging, staging_target_path=path))
        check("NodeExpandVolume with staging_target_path at %s: INVALID_ARGUMENT" % what,
              c == INVALID and ("staging_target_path \"" in m or "symlink" in m),
              "%s %r" % (c, m))
    other = os.path.join(kubelet, "plugins", "kubernetes.io", "csi", "pv", "pvc-other",
                         "globalmount")
    os.makedirs(other)
    want = 'volume "%s" is staged at %s on this node, not at %s' % (STATS_VOL, staging, other)
    c, m, _ = call(n.node.NodeGetVolumeStats, csi.NodeGetVolumeStatsRequest(
        volume_id=STATS_VOL, volume_path=other))
    check("NodeGetVolumeStats at another volume's staging path: NOT_FOUND (csi.md §9.4)",
          c == grpc.StatusCode.NOT_FOUND and m == want, "%s %r" % (c, m))
    c, m, _ = call(n.node.NodeExpandVolume, csi.NodeExpandVolumeRequest(
        volume_id=STATS_VOL, volume_path=other, staging_target_path=other))
    check("NodeExpandVolume at another volume's staging path: FAILED_PRECONDITION, no rescan",
          c == grpc.StatusCode.FAILED_PRECONDITION and m == want, "%s %r" % (c, m))
    check("  ... that staging path is still an empty directory", os.listdir(other) == [])


def stage_cases(n, kubelet, fabrics):
    """Issue 24 #6 and the staging path: nothing reaches the kernel's fabrics device."""
    staging = os.path.join(kubelet, "plugins", "kubernetes.io", "csi", "pv", "pvc-hostile",
                           "globalmount")
    ctx = {"target_id": NQN, "address": "192.0.2.10", "port": "4420"}
    bad = [("address", "192.0.2.10,nr_io_queues=1"), ("address", "192.0.2.10\nnqn=x"),
           ("target_id", NQN + ",hostnqn=nqn.evil"), ("target_id", NQN + "=1"),
           ("port", "4420,queue_size=1"), ("port", "0"), ("port", "65536"),
           ("pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "5,nr_io_queues=1")]
    for key, val in bad:
        c, m, _ = call(n.node.NodeStageVolume, csi.NodeStageVolumeRequest(
            volume_id=VOL, staging_target_path=staging, volume_capability=mount_cap(),
            volume_context=dict(ctx, **{key: val})))
        check("NodeStageVolume with %s=%r: INVALID_ARGUMENT naming the key" % (key, val),
              c == INVALID and ('volume_context "%s"' % key) in m, "%s %r" % (c, m))
        check("  ... nothing written to the fabrics device", os.path.getsize(fabrics) == 0)
    pv = os.path.join(kubelet, "plugins", "kubernetes.io", "csi", "pv")
    os.makedirs(pv, exist_ok=True)
    os.symlink(SENT, os.path.join(pv, "pvc-evil"))
    for what, path in (("through a symlink out of the kubelet directory",
                        os.path.join(pv, "pvc-evil", "globalmount")),
                       ("outside the kubelet directory", os.path.join(SENT, "globalmount")),
                       ("relative", "plugins/kubernetes.io/csi/pv/x/globalmount")):
        c, m, _ = call(n.node.NodeStageVolume, csi.NodeStageVolumeRequest(
            volume_id=VOL, staging_target_path=path, volume_capability=mount_cap(),
            volume_context=ctx))
        check("NodeStageVolume with a staging path %s: INVALID_ARGUMENT before any connect"
              % what, c == INVALID and os.path.getsize(fabrics) == 0, "%s %r" % (c, m))
    for what, path in (("outside the kubelet directory", os.path.join(SENT, "empty-dir")),
                       ("through a symlink", os.path.join(pv, "pvc-evil", "mount"))):
        c, m, _ = call(n.node.NodeUnstageVolume, csi.NodeUnstageVolumeRequest(
            volume_id=VOL, staging_target_path=path))
        check("NodeUnstageVolume with a staging path %s: INVALID_ARGUMENT" % what,
              c == INVALID, "%s %r" % (c, m))


def main():
    n = Node(os.path.join(TMP, "node"))
    kubelet = os.path.join(TMP, "node", "kubelet")
    n.sock = os.path.join(kubelet, "plugins", DRIVER, "csi.sock")
    os.makedirs(os.path.dirname(n.sock))
    cwd = os.path.join(TMP, "node", "cwd", "a", "b")
    os.makedirs(cwd)
    staging = os.path.join(kubelet, "plugins", "kubernetes.io", "csi", "pv", "pvc-stats",
                           "globalmount")
    plant_record(n.state, staging)
    if not n.start(cwd, ["--kubelet-dir=" + kubelet]):
        check("node starts with every root inside HOSTILE_TMP", False,
              open(n.log, errors="replace").read()[-1500:])
        return 1
    check("node starts with every root inside HOSTILE_TMP", True)
    check("the sentinel directory is outside HOSTILE_TMP",
          not os.path.realpath(SENT).startswith(os.path.realpath(TMP) + os.sep))
    try:
        unpublish_cases(n, kubelet, cwd)
        stage_cases(n, kubelet, os.path.join(n.host, "dev", "nvme-fabrics"))
        stats_expand_cases(n, kubelet, cwd, staging)
        c, m, pr = call(n.ids.Probe, csi.ProbeRequest())
        check("the node still answers Probe", c == grpc.StatusCode.OK and pr.ready.value,
              "%s %r" % (c, m))
    finally:
        check("node exits 0 on SIGTERM", n.stop() == 0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
