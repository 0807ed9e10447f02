#!/usr/bin/python3
"""Node-plugin sanity suite: a grpcio CSI client (csi.v1 stubs generated from proto/csi.proto)
checks a running `pillar-csi node` on a unix socket the way the standard csi-sanity suite checks a
node plugin — identity, info and capabilities, required arguments, NotFound paths, repeated calls
— against csi.md.  The node runs with the testing flag --host-root on a fake host tree
(etc/nvme with a unique host NQN/ID, dev/nvme-fabrics as a regular file, sys/module/nvme_tcp,
proc → the real /proc for mountinfo), so it never touches the machine's /etc/nvme, /sys or /dev.
Nothing here mounts or connects: stage/publish against a kernel target belong to the VM test bed.

  node_suite.py DIR     prints PASS/FAIL per case and "(node sanity: N passed, M failed)"
"""
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.environ["BUILD"], "node-test", "py"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import grpc  # noqa: E402
import csi_pb2 as csi  # noqa: E402
import csi_pb2_grpc as csig  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
from klog import call_logs, duration_ok  # noqa: E402
import nodehost  # noqa: E402
from nodehost import make_host  # noqa: E402

DRIVER = "pillar-csi.bhyoo.com"
TOPO = "pillar-csi.bhyoo.com/nvmeof"
NODE_ID = "worker-sanity-1"
NQN = "nqn.2026-01.com.bhyoo.pillar-csi:fp.pvc-sanity"
VOL = "storage-1/nvmeof-tcp/file/fp/pvc-sanity"
OK, INVALID, NOTFOUND, PRECOND = (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT,
                                  grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION)


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, ok, why=""):
        if ok:
            self.passed += 1
            print("PASS " + name)
        else:
            self.failed += 1
            print("FAIL %s%s" % (name, (": %s" % (why,)) if why != "" else ""))
        sys.stdout.flush()
        return ok


def call(fn, req, timeout=10):
    try:
        return OK, "", fn(req, timeout=timeout)
    except grpc.RpcError as e:
        return e.code(), e.details() or "", None


def probe_until(n, want, timeout=5.0):
    """Probes until ready is want (the node re-checks its files when they change, not per
    Probe) or the time is up; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        c, m, pr = call(n.ids.Probe, csi.ProbeRequest())
        if c != OK or pr.ready.value == want or time.monotonic() > deadline:
            return c, m, pr
        time.sleep(0.02)


def mount_cap(fs="ext4", mode=csi.VolumeCapability.AccessMode.SINGLE_NODE_WRITER):
    return csi.VolumeCapability(mount=csi.VolumeCapability.MountVolume(fs_type=fs),
                                access_mode=csi.VolumeCapability.AccessMode(mode=mode))


def block_cap():
    return csi.VolumeCapability(block=csi.VolumeCapability.BlockVolume(),
                                access_mode=csi.VolumeCapability.AccessMode(
                                    mode=csi.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))


class Node(nodehost.NodeProcess):
    def __init__(self, base, host, state):
        super().__init__(os.path.join(base, "csi.sock"))
        self.base, self.host, self.state = base, host, state
        self.kubelet = os.path.join(base, "kubelet")

    def start(self, node_id=NODE_ID):
        self.log = os.path.join(self.base, "node-%d.log" % time.monotonic_ns())
        args = [os.environ["PILLAR_BIN"], "node", "--csi-endpoint=unix://" + self.sock,
                "--node-id=" + node_id, "--state-dir=" + self.state, "--host-root=" + self.host,
                "--kubelet-dir=" + self.kubelet, "--v=3"]
        if not super().start(args, self.log):
            return False
        self.ids = csig.IdentityStub(self.channel)
        self.node = csig.NodeStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        return True

    def log_text(self):
        with open(self.log, errors="replace") as f:
            return f.read()


def staging_of(base, vol):
    """kubelet's staging path of a volume below the suite's kubelet directory."""
    return os.path.join(base, "kubelet", "plugins", "kubernetes.io", "csi", DRIVER,
                        hashlib.sha256(vol.encode()).hexdigest(), "globalmount")


def plant_record(state, staging):
    """A stage record in the spec's format (csi.md §7.5), as a previous node process left it."""
    return nodehost.plant_record(state, nodehost.stage_record(VOL, staging, NQN))


def main(base):
    R = Report()
    host = os.path.join(base, "host")
    state = os.path.join(base, "state")
    os.makedirs(base, exist_ok=True)
    host_uuid = make_host(host)
    staging = staging_of(base, VOL)
    os.makedirs(staging)
    record = plant_record(state, staging)
    os.makedirs(os.path.join(base, "stale-staging"))
    stale = plant_record(os.path.join(base, "stale-state"), os.path.join(base, "gone"))
    shutil.move(stale, os.path.join(state, "storage-1_nvmeof-tcp_file_fp_pvc-gone.json"))
    n = Node(base, host, state)
    try:
        run(R, n, base, host, state, staging, record, host_uuid)
    finally:
        n.stop(signal.SIGKILL)
    print("(node sanity: %d passed, %d failed)" % (R.passed, R.failed))
    return 1 if R.failed else 0


def run(R, n, base, host, state, staging, record, host_uuid):
    if not R.check("node starts on a unix socket with a fake host tree (--host-root)", n.start(),
                   n.log_text()[-1500:] if n.proc else ""):
        return
    R.check("stage-record sweep at start: record whose staging path is gone deleted, live one "
            "kept (csi.md §6.1 step 6)",
            os.path.exists(record) and not os.path.exists(
                os.path.join(state, "storage-1_nvmeof-tcp_file_fp_pvc-gone.json")),
            sorted(os.listdir(state)))
    R.check("existing /etc/nvme/hostnqn and hostid are never rewritten",
            open(os.path.join(host, "etc/nvme/hostid")).read() == host_uuid + "\n")
    st = n.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
    R.check("grpc.health.v1 Check: SERVING", st == health_pb2.HealthCheckResponse.SERVING, st)

    # ---- Identity ----
    c, m, info = call(n.ids.GetPluginInfo, csi.GetPluginInfoRequest())
    ver = subprocess.run([os.environ["PILLAR_BIN"], "--version"], capture_output=True,
                         text=True).stdout
    R.check("GetPluginInfo: name %s, vendor_version = the binary's version" % DRIVER,
            c == OK and info.name == DRIVER and info.vendor_version and
            info.vendor_version in ver, "%s %s %s / %r" % (c, m, info, ver))
    c, m, pc = call(n.ids.GetPluginCapabilities, csi.GetPluginCapabilitiesRequest())
    svc = sorted(x.service.type for x in pc.capabilities if x.HasField("service")) if pc else []
    exp = [x.volume_expansion.type for x in pc.capabilities
           if x.HasField("volume_expansion")] if pc else []
    S = csi.PluginCapability.Service
    R.check("GetPluginCapabilities: CONTROLLER_SERVICE, VOLUME_ACCESSIBILITY_CONSTRAINTS, "
            "VolumeExpansion ONLINE (csi.md §1.1)",
            c == OK and svc == sorted([S.CONTROLLER_SERVICE, S.VOLUME_ACCESSIBILITY_CONSTRAINTS])
            and exp == [csi.PluginCapability.VolumeExpansion.ONLINE], pc)
    c, m, pr = call(n.ids.Probe, csi.ProbeRequest())
    R.check("Probe: ready (dev/nvme-fabrics exists, state dir writable)",
            c == OK and pr.HasField("ready") and pr.ready.value, "%s %s %s" % (c, m, pr))
    fab = os.path.join(host, "dev/nvme-fabrics")
    os.rename(fab, fab + ".off")
    c, m, pr = probe_until(n, False)
    R.check("Probe: not ready without /dev/nvme-fabrics (noticed within 5 s)",
            c == OK and not pr.ready.value)
    os.rename(fab + ".off", fab)
    c, m, pr = probe_until(n, True)
    R.check("Probe: ready again once it is back (within 5 s)", c == OK and pr.ready.value)

    # ---- NodeGetInfo / NodeGetCapabilities ----
    c, m, gi = call(n.node.NodeGetInfo, csi.NodeGetInfoRequest())
    R.check("NodeGetInfo: node_id, max_volumes_per_node 0, topology {%s: \"true\"}" % TOPO,
            c == OK and gi.node_id == NODE_ID and gi.max_volumes_per_node == 0 and
            dict(gi.accessible_topology.segments) == {TOPO: "true"}, "%s %s %s" % (c, m, gi))
    c2, m2, gi2 = call(n.node.NodeGetInfo, csi.NodeGetInfoRequest())
    R.check("NodeGetInfo repeated: same answer", c2 == OK and gi2 == gi)
    mod = os.path.join(host, "sys/module/nvme_tcp")
    os.rename(mod, mod + ".off")
    c, m, gi = call(n.node.NodeGetInfo, csi.NodeGetInfoRequest())
    R.check("NodeGetInfo without nvme_tcp loaded: no topology key",
            c == OK and not gi.accessible_topology.segments, gi)
    os.rename(mod + ".off", mod)

    c, m, nc = call(n.node.NodeGetCapabilities, csi.NodeGetCapabilitiesRequest())
    T = csi.NodeServiceCapability.RPC
    caps = sorted(x.rpc.type for x in nc.capabilities) if nc else []
    want = sorted([T.STAGE_UNSTAGE_VOLUME, T.EXPAND_VOLUME, T.GET_VOLUME_STATS,
                   T.SINGLE_NODE_MULTI_WRITER, T.VOLUME_CONDITION])
    R.check("NodeGetCapabilities: STAGE_UNSTAGE_VOLUME, EXPAND_VOLUME, GET_VOLUME_STATS, "
            "SINGLE_NODE_MULTI_WRITER (csi.md §6.2), VOLUME_CONDITION (volume health)",
            c == OK and caps == want,
            [csi.NodeServiceCapability.RPC.Type.Name(x) for x in caps])
    # consistency: every advertised RPC is implemented (answers something other than
    # UNIMPLEMENTED to an empty request)
    for name, fn, req in (("NodeStageVolume", n.node.NodeStageVolume, csi.NodeStageVolumeRequest),
                          ("NodeUnstageVolume", n.node.NodeUnstageVolume,
                           csi.NodeUnstageVolumeRequest),
                          ("NodeExpandVolume", n.node.NodeExpandVolume,
                           csi.NodeExpandVolumeRequest),
                          ("NodeGetVolumeStats", n.node.NodeGetVolumeStats,
                           csi.NodeGetVolumeStatsRequest)):
        c, m, _ = call(fn, req())
        R.check("advertised %s is implemented (empty request → INVALID_ARGUMENT)" % name,
                c == INVALID, "%s %s" % (c, m))

    # ---- missing arguments → INVALID_ARGUMENT "<field> is required" ----
    tgt = os.path.join(base, "kubelet", "pods", "pod-sanity-uid", "volumes", "kubernetes.io~csi",
                       "pvc-sanity", "mount")
    full = {
        "NodeStageVolume": (n.node.NodeStageVolume, csi.NodeStageVolumeRequest, dict(
            volume_id=VOL, staging_target_path=staging, volume_capability=mount_cap()),
            ["volume_id", "staging_target_path", "volume_capability"]),
        "NodeUnstageVolume": (n.node.NodeUnstageVolume, csi.NodeUnstageVolumeRequest, dict(
            volume_id=VOL, staging_target_path=staging), ["volume_id", "staging_target_path"]),
        "NodePublishVolume": (n.node.NodePublishVolume, csi.NodePublishVolumeRequest, dict(
            volume_id=VOL, staging_target_path=staging, target_path=tgt,
            volume_capability=mount_cap()),
            ["volume_id", "staging_target_path", "target_path", "volume_capability"]),
        "NodeUnpublishVolume": (n.node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest,
                                dict(volume_id=VOL, target_path=tgt),
                                ["volume_id", "target_path"]),
        "NodeExpandVolume": (n.node.NodeExpandVolume, csi.NodeExpandVolumeRequest, dict(
            volume_id=VOL, volume_path=staging), ["volume_id", "volume_path"]),
        "NodeGetVolumeStats": (n.node.NodeGetVolumeStats, csi.NodeGetVolumeStatsRequest, dict(
            volume_id=VOL, volume_path=staging), ["volume_id", "volume_path"]),
    }
    for rpc, (fn, Req, args, fields) in full.items():
        for f in fields:
            a = dict(args)
            del a[f]
            c, m, _ = call(fn, Req(**a))
            R.check("%s without %s: INVALID_ARGUMENT '%s is required'" % (rpc, f, f),
                    c == INVALID and m == "%s is required" % f, "%s %r" % (c, m))
    bad_cap = csi.VolumeCapability(access_mode=csi.VolumeCapability.AccessMode(
        mode=csi.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))
    for rpc in ("NodeStageVolume", "NodePublishVolume"):
        fn, Req, args, _ = full[rpc]
        c, m, _ = call(fn, Req(**dict(args, volume_capability=bad_cap)))
        R.check("%s with a capability lacking an access type: INVALID_ARGUMENT" % rpc,
                c == INVALID, "%s %r" % (c, m))

    # ---- NodeStageVolume argument checks that run before any kernel work (csi.md §7.1) ----
    ctx = {"target_id": NQN, "address": "192.0.2.10", "port": "4420",
           "pillar-csi.bhyoo.com/protocol-type": "nvmeof-tcp",
           "pillar-csi.bhyoo.com/volume-ref": "1"}
    vol2 = "storage-1/nvmeof-tcp/file/fp/pvc-two"
    stage2 = staging_of(base, vol2)
    for key in ("target_id", "address", "port"):
        c, m, _ = call(n.node.NodeStageVolume, csi.NodeStageVolumeRequest(
            volume_id=vol2, staging_target_path=stage2, volume_capability=mount_cap(),
            volume_context={k: v for k, v in ctx.items() if k != key}))
        R.check("NodeStageVolume without volume_context %s: INVALID_ARGUMENT" % key,
                c == INVALID and m == 'volume_context missing required key "%s"' % key,
                "%s %r" % (c, m))
    for key, val in (("pillar-csi.bhyoo.com/nvmeof-max-queue-size", "8"),
                     ("pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "-2"),
                     ("pillar-csi.bhyoo.com/nvmeof-reconnect-delay", "0")):
        c, m, _ = call(n.node.NodeStageVolume, csi.NodeStageVolumeRequest(
            volume_id=vol2, staging_target_path=stage2, volume_capability=mount_cap(),
            volume_context=dict(ctx, **{key: val})))
        R.check("NodeStageVolume with %s=%s: INVALID_ARGUMENT" % (key.split("/")[1], val),
                c == INVALID, "%s %r" % (c, m))
    c, m, _ = call(n.node.NodeStageVolume, csi.NodeStageVolumeRequest(
        volume_id=vol2, staging_target_path=stage2, volume_capability=mount_cap(),
        volume_context=dict(ctx, **{"pillar-csi.bhyoo.com/protocol-type": "iscsi"})))
    R.check("NodeStageVolume with protocol iscsi: FAILED_PRECONDITION 'unsupported protocol'",
            c == PRECOND and m == 'unsupported protocol "iscsi"', "%s %r" % (c, m))
    R.check("  ... rejected stages wrote no record and touched no fabrics device",
            sorted(os.listdir(state)) == [os.path.basename(record)] and
            os.path.getsize(os.path.join(host, "dev/nvme-fabrics")) == 0,
            sorted(os.listdir(state)))

    # ---- unknown volumes and paths ----
    c, m, _ = call(n.node.NodePublishVolume, csi.NodePublishVolumeRequest(
        volume_id=vol2, staging_target_path=stage2, target_path=tgt,
        volume_capability=mount_cap()))
    R.check("NodePublishVolume of a volume never staged: FAILED_PRECONDITION (csi.md §9.1)",
            c == PRECOND and m == 'volume "%s" is not staged on this node' % vol2,
            "%s %r" % (c, m))
    R.check("  ... and created no target path", not os.path.exists(tgt))
    for i in (1, 2):
        c, m, _ = call(n.node.NodeUnstageVolume, csi.NodeUnstageVolumeRequest(
            volume_id=vol2, staging_target_path=stage2))
        R.check("NodeUnstageVolume of a volume never staged (call %d): OK (csi.md §8 step 2)"
                % i, c == OK, "%s %r" % (c, m))
    for i in (1, 2):
        c, m, _ = call(n.node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(
            volume_id=vol2, target_path=tgt))
        R.check("NodeUnpublishVolume of a path never published (call %d): OK" % i, c == OK,
                "%s %r" % (c, m))
    os.makedirs(tgt)
    c, m, _ = call(n.node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(
        volume_id=vol2, target_path=tgt))
    R.check("NodeUnpublishVolume of an unmounted target directory: OK, directory removed",
            c == OK and not os.path.exists(tgt), "%s %r" % (c, m))
    outside = os.path.join(base, "outside")
    os.makedirs(outside, exist_ok=True)
    for bad in (outside, os.path.relpath(outside), tgt + "/../../../../../../outside"):
        c, m, _ = call(n.node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(
            volume_id=vol2, target_path=bad))
        R.check("NodeUnpublishVolume of %s (not below --kubelet-dir): INVALID_ARGUMENT naming "
                "the field, directory left in place" % bad,
                c == INVALID and m.startswith('target_path "%s" ' % bad) and
                os.path.isdir(outside), "%s %r" % (c, m))
    missing = os.path.join(base, "kubelet", "pods", "no-such-pod", "volumes",
                           "kubernetes.io~csi", "pv0", "mount")
    for rpc, fn, Req in (("NodeGetVolumeStats", n.node.NodeGetVolumeStats,
                          csi.NodeGetVolumeStatsRequest),
                         ("NodeExpandVolume", n.node.NodeExpandVolume,
                          csi.NodeExpandVolumeRequest)):
        c, m, _ = call(fn, Req(volume_id=VOL, volume_path=missing))
        R.check("%s on a missing path: NOT_FOUND 'path <p> does not exist'" % rpc,
                c == NOTFOUND and m == "path %s does not exist" % missing, "%s %r" % (c, m))
        os.makedirs(stage2, exist_ok=True)
        c, m, _ = call(fn, Req(volume_id=vol2, volume_path=stage2))
        R.check("%s of a volume with no stage record: NOT_FOUND 'not staged'" % rpc,
                c == NOTFOUND and m == 'volume "%s" is not staged on this node' % vol2,
                "%s %r" % (c, m))

    # ---- stats on an existing directory of a staged volume (record from an earlier process) ----
    c, m, vs = call(n.node.NodeGetVolumeStats, csi.NodeGetVolumeStatsRequest(
        volume_id=VOL, volume_path=staging))
    sv = os.statvfs(staging)
    U = csi.VolumeUsage
    usage = {u.unit: u for u in vs.usage} if vs else {}
    b, i = usage.get(U.BYTES), usage.get(U.INODES)
    R.check("NodeGetVolumeStats on a directory: BYTES and INODES from statfs (csi.md §9.4)",
            c == OK and b is not None and i is not None and
            b.total == sv.f_blocks * sv.f_frsize and i.total == sv.f_files and
            abs(b.available - sv.f_bavail * sv.f_frsize) <= 64 << 20 and
            abs(b.used - (sv.f_blocks - sv.f_bfree) * sv.f_frsize) <= 64 << 20 and
            i.used == i.total - i.available and 0 < i.available <= i.total,
            "%s %r %s" % (c, m, vs))
    # the planted record's subsystem has no controller in the host's sysfs: the kernel removed it
    vc = vs.volume_condition if vs is not None and vs.HasField("volume_condition") else None
    R.check("NodeGetVolumeStats: no controller left → abnormal, restart the workload",
            vc is not None and vc.abnormal and vc.message ==
            "the kernel removed the NVMe controller of %s (its ctrl_loss_tmo ran out, or it was "
            "deleted); the volume no longer works on this node: restart the workload so that "
            "the volume is staged on a new connection" % NQN, vc)
    ctrl = os.path.join(host, "sys/class/nvme/nvme7")
    os.makedirs(ctrl)
    for name, value in (("subsysnqn", NQN), ("state", "connecting"), ("ctrl_loss_tmo", "120"),
                        ("address", "traddr=192.0.2.10,trsvcid=4420")):
        with open(os.path.join(ctrl, name), "w") as f:
            f.write(value + "\n")
    c, m, vs = call(n.node.NodeGetVolumeStats, csi.NodeGetVolumeStatsRequest(
        volume_id=VOL, volume_path=staging))
    vc = vs.volume_condition if vs is not None else None
    R.check("NodeGetVolumeStats: controller connecting → abnormal with the time left",
            c == OK and vc.abnormal and vc.message.startswith(
                "NVMe controller nvme7 of %s is connecting since " % NQN) and
            "the kernel removes it in at most 120 s (ctrl_loss_tmo 120 s)" in vc.message, vc)
    with open(os.path.join(ctrl, "state"), "w") as f:
        f.write("live\n")
    c, m, vs = call(n.node.NodeGetVolumeStats, csi.NodeGetVolumeStatsRequest(
        volume_id=VOL, volume_path=staging))
    R.check("NodeGetVolumeStats: controller live → healthy",
            c == OK and not vs.volume_condition.abnormal and
            vs.volume_condition.message == "NVMe controller nvme7 of %s is live" % NQN, vs)
    shutil.rmtree(ctrl)

    # ---- the per-call log lines (src/grpc/calllog.h) at --v=3 ----
    log = n.log_text()
    gi = call_logs(log, "GRPC call", "/csi.v1.Node/NodeGetInfo")
    R.check("log: one NodeGetInfo line per call at --v=3, OK, no volume, a duration",
            len(gi) == 3 and all(s == "I" and kv.get("code") == "OK" and
                                 kv.get("volumeID") == "" and duration_ok(kv) for s, kv in gi), gi)
    st = call_logs(log, "GRPC call failed", "/csi.v1.Node/NodeGetVolumeStats")
    R.check("log: NodeGetVolumeStats on a missing path is an error line with NOT_FOUND and the "
            "message", ("E", VOL, "NOT_FOUND", "path %s does not exist" % missing) in
            [(s, kv.get("volumeID"), kv.get("code"), kv.get("err")) for s, kv in st], st)
    R.check("log: no request bodies at --v=3", '"GRPC request"' not in log)

    # ---- restart while staged: unstage works from the record (fake controller in sysfs) ----
    rc = n.stop()
    R.check("SIGTERM: node exits 0", rc == 0, rc)
    ctrl = os.path.join(host, "sys/class/nvme/nvme9999")  # a name no real host has
    os.makedirs(ctrl)
    for k, v in (("subsysnqn", NQN), ("state", "live"),
                 ("address", "traddr=192.0.2.10,trsvcid=4420"), ("delete_controller", "")):
        with open(os.path.join(ctrl, k), "w") as f:
            f.write(v + ("\n" if v else ""))
    deleted = []

    def kernel():  # the fake kernel removes the controller once delete_controller is written
        t0 = time.monotonic()
        while time.monotonic() - t0 < 15:
            try:
                if open(os.path.join(ctrl, "delete_controller")).read().strip() == "1":
                    deleted.append(time.monotonic())
                    time.sleep(0.2)
                    shutil.rmtree(ctrl)
                    return
            except OSError:
                return
            time.sleep(0.02)

    if not R.check("node restarts with the record of a staged volume", n.start(),
                   n.log_text()[-1500:]):
        return
    kt = threading.Thread(target=kernel)
    kt.start()
    c, m, _ = call(n.node.NodeUnstageVolume, csi.NodeUnstageVolumeRequest(
        volume_id=VOL, staging_target_path=staging), timeout=20)
    kt.join()
    R.check("NodeUnstageVolume after a restart, from the record: delete_controller written, "
            "waited for the controller to go, record deleted (csi.md §8)",
            c == OK and deleted and not os.path.exists(ctrl) and not os.path.exists(record),
            "%s %r deleted=%s record=%s" % (c, m, bool(deleted), os.path.exists(record)))
    c, m, _ = call(n.node.NodeUnstageVolume, csi.NodeUnstageVolumeRequest(
        volume_id=VOL, staging_target_path=staging))
    R.check("NodeUnstageVolume repeated: OK", c == OK, "%s %r" % (c, m))

    # ---- host identity: generated when missing, refused when shared ----
    rc = n.stop()
    R.check("SIGTERM: node exits 0 (second run)", rc == 0, rc)
    os.remove(os.path.join(host, "etc/nvme/hostnqn"))
    os.remove(os.path.join(host, "etc/nvme/hostid"))
    if R.check("node starts with an empty etc/nvme", n.start(), n.log_text()[-1500:]):
        try:
            hn = open(os.path.join(host, "etc/nvme/hostnqn")).read()
            hi = open(os.path.join(host, "etc/nvme/hostid")).read()
            mode = stat.S_IMODE(os.stat(os.path.join(host, "etc/nvme/hostnqn")).st_mode)
            u = hn.strip().split(":uuid:")[1]
            R.check("generated hostnqn nqn.2014-08.org.nvmexpress:uuid:<uuid4> and the same "
                    "hostid, mode 0644, trailing newline (csi.md §6.1)",
                    hn.startswith("nqn.2014-08.org.nvmexpress:uuid:") and hn.endswith("\n") and
                    uuid.UUID(u).version == 4 and hi == u + "\n" and mode == 0o644,
                    "%r %r %o" % (hn, hi, mode))
        except (OSError, IndexError, ValueError) as e:
            R.check("generated host identity readable", False, e)
        n.stop(signal.SIGKILL)
    with open(os.path.join(host, "etc/nvme/hostnqn"), "w") as f:
        f.write("bogus-nqn\n")
    out = subprocess.run([os.environ["PILLAR_BIN"], "node", "--csi-endpoint=unix://" +
                          os.path.join(base, "x.sock"), "--node-id=" + NODE_ID,
                          "--state-dir=" + state, "--host-root=" + host,
                          "--kubelet-dir=" + os.path.join(base, "kubelet")],
                         capture_output=True, text=True, timeout=10)
    R.check("invalid existing hostnqn: exit 1 with '/etc/nvme/hostnqn: invalid host NQN'",
            out.returncode == 1 and 'invalid host NQN "bogus-nqn"' in out.stderr,
            "%d %r" % (out.returncode, out.stderr[-300:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
