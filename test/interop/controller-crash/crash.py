#!/usr/bin/python3
"""Controller crash suite (issue 15): SIGKILL `pillar-csi controller` at random points of
CreateVolume / ControllerPublishVolume / ControllerUnpublishVolume / ControllerExpandVolume /
DeleteVolume against a live agent (fake configfs root, `file` backend) on the embedded store,
restart it, let the sidecars retry and the controller resync, and check the invariants after each
round.

Sidecars.  LANES threads each stand for csi-provisioner, csi-attacher and csi-resizer acting on
one volume at a time (test/interop/lib/sidecars.py builds every request as they do): claim →
create → (publish to a node, maybe expand, unpublish; or move: publish to the other node while
the first is unpublished, as the attacher retries a ReadWriteOnce volume's new attachment until
the old one is gone, csi.md §4.3) × 1-3 → delete.  In CRASH_SNAPSHOTS (0.5) of the lifecycles,
after create, csi-snapshotter and csi-provisioner add: CreateSnapshot → (half the time a volume
restored from it, or a clone of the lane's volume: create → delete) → DeleteSnapshot
(docs/snapshots.md).  A publish that failed is given up in 30 % of
the cases (the pod went away: the attacher unpublishes the half-attached volume instead).  A failed call is retried with the identical
request (same name, volume ID, node) after a short backoff, as the sidecars do; retryable codes are
UNAVAILABLE, ABORTED, DEADLINE_EXCEEDED, CANCELLED, and FAILED_PRECONDITION "is published to
another node" for the moving attachment.  Any other code is a violation.

A round: the lanes run; the controller is SIGKILLed after a random delay, right after its k-th
PillarVolumeState write (k random; inotify on the embedded store's directory, no hook in the
controller), or at an agent RPC boundary chosen at random (the forwarder between controller and
agent kills it when the request arrives — the request is still delivered, sometimes only after the new controller has
finished the retries, like a packet from a dead process — or after the agent answered, before the
reply reaches the controller).  Every 6th round the agent is killed too while the controller is
down, every 12th with an emptied kernel tree (storage reboot), so the restarted controller must
restore.  The controller restarts (the stale CSI socket is left in place, as in an emptyDir),
each lane finishes its interrupted step by retrying and parks; then, before and after one more
periodic resync pass, the invariants:

  I1 no single-node volume has two hosts in allowed_hosts (also sampled every 20 ms while
     running) nor two publishedNodes entries;
  I2 every admitted host has a recorded publication, and every publication is admitted
     (the sidecars' calls all completed), no entry is left `revoking`;
  I3 every subsystem and every backend volume file belongs to a PillarVolumeState, every
     snapshot file to a PillarSnapshot; deleted volumes and snapshots leave neither behind; no temporary file of a killed controller's store write is
     left after its successor opened the store;
  I4 fencing generations never go back: each durable mark (state/generations/*.mark) only
     grows, never exceeds its PillarVolumeState's publicationGeneration, belongs to its UID, and
     endedUIDs only grow; publicationGeneration and a PillarSnapshot's fencingGeneration never
     decrease;
  I5 identity: a volume's UID, volume ID and namespace uuid/nguid/serial never change (the
     derived identity, agent-api.md §8.2); a Ready volume is exported and enabled; a volume
     whose CreateVolume succeeded carries success-recorded (crds.md §7.4); a snapshot whose
     CreateSnapshot succeeded is Ready with its file;
  I6 liveness: every interrupted call completes after the restart; the file never shrinks.

With CRASH_STORE=kube the controller and the CLI use the test API server on a real etcd
(test/kube/cluster.py) instead of the embedded store; store-write kill points are then replaced
by random delays.  Usage: crash.py DIR ROUNDS (CRASH_SEED replays the random choices; thread
timing is not replayed).  Prints PASS/FAIL lines and "controller-crash interop: N passed, M
failed"; exits 1 on a failure.
"""
import collections
import ctypes
import json
import os
import random
import select
import shutil
import signal
import struct
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
import controller_suite as cs  # noqa: E402
from controller_suite import apb, csi, csig, grpc, k8s  # noqa: E402

OK = grpc.StatusCode.OK
RETRY = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.DEADLINE_EXCEEDED,
         grpc.StatusCode.CANCELLED}
MiB = 1 << 20
NODES = ("node-a", "node-b")
HOSTS = {"node-a": cs.HOST_A, "node-b": cs.HOST_B}
MUTATING = ("CreateVolume", "ExportVolume", "AllowInitiator", "DenyInitiator", "UnexportVolume",
            "DeleteVolume", "ExpandVolume", "ReconcileState", "CreateSnapshot", "DeleteSnapshot")
# the share of lifecycles with snapshot steps, and the VolumeSnapshotClass csi-snapshotter reads
SNAPSHOT_SHARE = float(os.environ.get("CRASH_SNAPSHOTS", "0.5"))
VSCLASS = k8s.VSCLASS
LANES = int(os.environ.get("CRASH_LANES", "3"))
ON_KUBE = os.environ.get("CRASH_STORE") == "kube"
if ON_KUBE:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
    from cluster import Cluster  # noqa: E402


class Out(cs.Report):
    """PASS/FAIL lines (cs.Report) and the violations of the run."""

    def __init__(self):
        super().__init__()
        self.violations = []
        self.lock = threading.Lock()

    def violation(self, rnd, what):
        with self.lock:
            self.violations.append((rnd, what))
            if len(self.violations) <= 40:
                print("  VIOLATION round %s: %s" % (rnd, what))
                sys.stdout.flush()


out = Out()


# ---- the forwarder: agent RPCs per volume, kills at RPC boundaries, late delivery ---------------

def volumes_of(method, raw):
    """The agent volume IDs a request names."""
    cls = getattr(apb, method + "Request", None)
    if cls is None:
        return []
    m = cls.FromString(raw)
    if method == "ReconcileState":
        return [v.volume_id for v in m.volumes]
    if method == "CreateSnapshot":  # counted against the volume it is taken of
        return [m.source_volume_id]
    return [m.volume_id] if getattr(m, "volume_id", "") else []


class Fwd(cs.Forwarder):
    """cs.Forwarder (every call passed through unchanged) that tracks the agent RPCs in flight
    per volume and can kill the controller at an armed boundary: (method, "send") kills it when
    the request arrives, then delivers the request — at once, or with hold=True only when
    release_held() is called; (method, "reply") kills it after the agent answered."""

    def __init__(self, target, killer):
        super().__init__(target)
        self.killer = killer
        self.mu = threading.Lock()
        self.inflight = collections.defaultdict(list)  # avid -> [method]
        self.done = collections.defaultdict(list)      # avid -> [method] answered
        self.armed = None                              # (method, "send"|"reply", hold)
        self.held = []                                 # threading.Event per held request
        self.held_done = []
        self.recon = []  # ReconcileState calls: (t_start, t_end, answered OK)

    def arm(self, method, where, hold):
        with self.mu:
            self.armed = (method, where, hold)

    def disarm(self):
        with self.mu:
            self.armed = None

    def _trigger(self, method, where):
        with self.mu:
            a = self.armed
            if a and a[0] == method and a[1] == where:
                self.armed = None
                return a
        return None

    def release_held(self, timeout=60):
        with self.mu:
            evs, dones = self.held, self.held_done
            self.held, self.held_done = [], []
        for e in evs:
            e.set()
        return all(d.wait(timeout) for d in dones)

    def service(self, details):
        method = details.method.rsplit("/", 1)[-1]
        inner = super().service(details).unary_unary

        def handle(req, ctx):
            vols = volumes_of(method, req)
            with self.mu:
                for v in vols:
                    self.inflight[v].append(method)
            t0 = time.monotonic()
            a = self._trigger(method, "send")
            if a:
                self.killer.kill("agent %s sent" % method)
                if a[2]:
                    return self._late(details.method, method, req, vols)
            ok = False
            try:
                r = inner(req, ctx)
                ok = True
                if self._trigger(method, "reply"):
                    self.killer.kill("agent %s answered, reply lost" % method)
                return r
            finally:
                self._finish(method, vols, ok)
                if method == "ReconcileState":
                    with self.mu:
                        self.recon.append((t0, time.monotonic(), ok))

        return grpc.unary_unary_rpc_method_handler(handle)

    def _finish(self, method, vols, ok):
        with self.mu:
            for v in vols:
                if method in self.inflight[v]:
                    self.inflight[v].remove(method)
                if ok:
                    self.done[v].append(method)

    def _late(self, full, method, req, vols):
        """Holds a dead controller's request until release_held(), then delivers it."""
        go, fin = threading.Event(), threading.Event()
        with self.mu:
            self.held.append(go)
            self.held_done.append(fin)
        go.wait(120)
        try:
            self._chan().unary_unary(full)(req, timeout=30)
            self.killer.late.append((method, "OK"))
        except grpc.RpcError as e:
            self.killer.late.append((method, e.code().name))
        finally:
            self._finish(method, vols, False)
            fin.set()
        raise grpc.RpcError()  # the caller is dead; the answer goes nowhere

    def wrote(self, avid):
        """A PillarVolumeState write of the volume (StoreWatch)."""
        with self.mu:
            self.done[avid].append("write")

    def phase_of(self, avid, since):
        """Where a volume's agent calls are for a CSI call that started when done had `since`
        entries: 'in M', 'after M', 'before the agent', each with the store writes since."""
        with self.mu:
            if self.inflight[avid]:
                return "in " + self.inflight[avid][-1]
            d = self.done[avid][since:]
        calls = [i for i, m in enumerate(d) if m != "write"]
        w = len(d) - 1 - calls[-1] if calls else len(d)
        return "%s%s" % (("after " + d[calls[-1]]) if calls else "before the agent",
                         " +%dw" % w if w else "")

    def mark(self, avid):
        with self.mu:
            return len(self.done[avid])


class StoreWatch(threading.Thread):
    """Store-write kill points without a hook in the controller: inotify on the embedded store's
    PillarVolumeState directory sees each object written (renamed into place) or deleted; armed
    with k, the k-th such write kills the controller (it is then fsyncing the directory or just
    past it, before its next step)."""

    IN_MOVED_TO, IN_DELETE, IN_NONBLOCK, IN_CLOEXEC = 0x80, 0x200, 0o4000, 0o2000000

    def __init__(self, path, fwd, killer):
        super().__init__(daemon=True)
        os.makedirs(path, exist_ok=True)
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(self.IN_NONBLOCK | self.IN_CLOEXEC)
        if self.fd < 0 or self.libc.inotify_add_watch(
                self.fd, path.encode(), self.IN_MOVED_TO | self.IN_DELETE) < 0:
            raise OSError(ctypes.get_errno(), "inotify on " + path)
        self.fwd, self.killer, self.path = fwd, killer, path
        self.left = 0
        self.pred = None  # armed: kill after a write whose object satisfies pred(obj)
        self.mu = threading.Lock()

    def arm(self, k, pred=None):
        with self.mu:
            self.left, self.pred = k, pred

    def _fires(self, name):
        with self.mu:
            pred, fire = self.pred, self.left == 1
            self.left = max(self.left - 1, 0)
        if not pred:
            return fire
        try:
            with open(os.path.join(self.path, name)) as f:
                obj = json.load(f)
        except (OSError, ValueError):
            return False  # deleted or replaced meanwhile
        with self.mu:
            if self.pred is pred and pred(obj):
                self.pred = None
                return True
        return False

    def run(self):
        while True:
            select.select([self.fd], [], [], 1)
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            off = 0
            while off < len(data):
                _, _, _, n = struct.unpack_from("iIII", data, off)
                name = data[off + 16:off + 16 + n].rstrip(b"\0").decode()
                off += 16 + n
                if name.startswith(".") or not name.endswith(".json"):
                    continue
                self.fwd.wrote("%s/%s" % (cs.POOL, name[:-5]))
                if self._fires(name):
                    self.killer.kill("after a PillarVolumeState write")


def _st(o):
    return o.get("status") or {}


def _pubs(o):
    return _st(o).get("publishedNodes") or []


def _created():
    """A predicate true for the write that makes a volume seen at its intent (Provisioning or
    CreatePartial) Ready: a create's last write, lazy on the embedded store (csi_volume.c), so
    the kill comes with it queued or just flushed."""
    intent = set()

    def pred(o):
        name, phase = o["metadata"]["name"], _st(o).get("phase")
        if phase in ("Provisioning", "CreatePartial"):
            intent.add(name)
            return False
        if name in intent:
            intent.discard(name)
            return phase == "Ready"
        return False
    return pred


# Targeted kill points, one per odd round in this order (the brief run covers the first five):
# (label, "store", predicate on the PillarVolumeState just written) or
# (label, "agent", method, "send"|"reply", deliver the request late).
TARGETS = [
    ("create: Ready recorded, maybe not yet durable", "store", _created()),
    ("publish: AllowInitiator answered, reply lost", "agent", "AllowInitiator", "reply", False),
    ("unpublish: revoking recorded, DenyInitiator not sent", "store",
     lambda o: any(p.get("revoking") for p in _pubs(o))),
    ("unpublish: DenyInitiator answered, reply lost", "agent", "DenyInitiator", "reply", False),
    ("delete: deleting recorded", "store", lambda o: _st(o).get("deleting")),
    ("delete: DeleteVolume answered, reply lost", "agent", "DeleteVolume", "reply", False),
    ("create: ExportVolume answered, reply lost (backend not recorded)", "agent", "ExportVolume",
     "reply", False),
    ("create: ExportVolume sent, delivered late", "agent", "ExportVolume", "send", True),
    ("create: CreateVolume answered, reply lost", "agent", "CreateVolume", "reply", False),
    ("publish: publication recorded", "store",
     lambda o: any(not p.get("revoking") for p in _pubs(o))),
    ("expand: ExpandVolume answered, reply lost", "agent", "ExpandVolume", "reply", False),
    ("delete: UnexportVolume answered, reply lost", "agent", "UnexportVolume", "reply", False),
    ("resync: ReconcileState sent, delivered late", "agent", "ReconcileState", "send", True),
    ("create: Provisioning claimed", "store",
     lambda o: _st(o).get("phase") == "Provisioning" and _st(o).get("publicationGeneration")),
    ("publish: AllowInitiator sent, delivered late", "agent", "AllowInitiator", "send", True),
    ("unpublish: DenyInitiator sent, delivered late", "agent", "DenyInitiator", "send", True),
    ("snapshot: CreateSnapshot answered, reply lost", "agent", "CreateSnapshot", "reply", False),
    ("snapshot: CreateSnapshot sent, delivered late", "agent", "CreateSnapshot", "send", True),
    ("snapshot: DeleteSnapshot answered, reply lost", "agent", "DeleteSnapshot", "reply", False),
]


# ---- the controller process and its kills --------------------------------------------------------

class Killer:
    def __init__(self, env):
        self.env = env
        self.mu = threading.Lock()
        self.killed = threading.Event()
        self.how = None
        self.snapshot = None  # callable: the kill points at this instant
        self.on_kill = None   # callable: run just before the SIGKILL
        self.points = []
        self.late = []

    def kill(self, how):
        with self.mu:
            if self.killed.is_set():
                return
            p = self.env.procs.live.get("controller")
            self.points = self.snapshot() if self.snapshot else []
            if self.on_kill:
                self.on_kill()
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)
            self.how = how
            self.killed.set()


def serving(env, timeout=20):
    """Seconds until the restarted controller answers Probe on its socket, or None."""
    t0 = time.monotonic()
    ch = grpc.insecure_channel("unix://" + env.sock, options=[
        ("grpc.initial_reconnect_backoff_ms", 20), ("grpc.min_reconnect_backoff_ms", 20),
        ("grpc.max_reconnect_backoff_ms", 100)])
    try:
        idn = csig.IdentityStub(ch)
        while time.monotonic() - t0 < timeout:
            code, _, _ = cs.call(idn.Probe, csi.ProbeRequest(), 2)
            if code == OK:
                return time.monotonic() - t0
            time.sleep(0.02)
        return None
    finally:
        ch.close()


def start_controller(env):
    """Starts the controller; the stale socket of a killed one stays, as in the pod's emptyDir."""
    p = env.procs.start("controller", [cs.BIN, "controller", "--csi-endpoint=unix://" + env.sock,
                                       *env.store_args(), "--health-probe-bind-address=127.0.0.1:0",
                                       "--metrics-bind-address=127.0.0.1:0", "--v=3"],
                        env=dict(os.environ, PILLAR_RECONCILE_INTERVAL="1s"))
    return p


# ---- sidecar lanes ----------------------------------------------------------------------------------

class Lane(threading.Thread):
    """One volume at a time through its whole life, every step retried to completion."""

    def __init__(self, i, h, seed):
        super().__init__(daemon=True)
        self.i, self.h = i, h
        self.rng = random.Random(seed * 1009 + i)
        self.pause = threading.Event()
        self.parked = threading.Event()
        self.stop = False
        self.calls = {}  # call id -> (step, avid, done mark)
        self.mu = threading.Lock()
        self.vol = None  # dict(name, avid, vid, nqn, pv, size, csize)
        self.at = None   # node attached by the last move
        self.n = 0
        self.steps = collections.Counter()

    def boundary(self):
        """Parks here while paused (between steps)."""
        while self.pause.is_set() and not self.stop:
            self.parked.set()
            time.sleep(0.01)
        self.parked.clear()
        if self.stop:
            raise SystemExit

    def run(self):
        try:
            while not self.stop:
                self.boundary()
                self.lifecycle()
        except SystemExit:
            self.parked.set()
        except Exception as e:  # a crash of the lane is a failure
            import traceback
            traceback.print_exc()
            out.violation(self.h.round, "lane %d crashed: %r" % (self.i, e))
            self.parked.set()

    def retry(self, step, fn, req, allow=(), abandon=0.0):
        """Calls fn(req) until OK; returns the response.  `allow`: other retryable
        (code, message part) pairs; `abandon`: the chance to give up after a failure (None)."""
        avid = self.vol["avid"]
        delay = 0.02
        while True:
            cid = object()
            with self.mu:
                self.calls[cid] = (step, avid, self.h.fwd.mark(avid))
            code, msg, r = cs.call(fn, req, 30)
            with self.mu:
                del self.calls[cid]
            if code == OK:
                self.steps[step] += 1
                return r
            if code not in RETRY and not any(code == c and part in msg for c, part in allow):
                out.violation(self.h.round, "%s %s: unexpected %s %r" % (step, avid, code.name,
                                                                        msg))
            if self.stop:
                raise SystemExit
            if abandon and self.rng.random() < abandon:
                self.steps[step + " abandoned"] += 1
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.4)

    def lifecycle(self):
        h = self.h
        self.n += 1
        pvc = h.kube.claim("crash-%d-%d" % (self.i, self.n), "16Mi")
        name = "pvc-%s" % pvc["metadata"]["uid"]
        avid = "%s/%s" % (cs.POOL, name)
        self.vol = v = {"name": name, "avid": avid, "nqn": cs.nqn_of(avid), "size": 16 * MiB,
                        "csize": 16 * MiB, "vid": "%s/nvmeof-tcp/file/%s" % (cs.AGENT, avid)}
        h.track(v)
        req = k8s.create_volume(csi, h.kube.caps, h.sc, pvc, cs.CLUSTER)
        r = self.retry("create", h.ctl.CreateVolume, req)
        v["created"] = True
        if r.volume.volume_id != v["vid"] or r.volume.capacity_bytes != 16 * MiB:
            out.violation(h.round, "create %s answered %s" % (name, r.volume))
        v["pv"] = pv = k8s.pv_of(h.sc, pvc, req, r)
        if self.rng.random() < SNAPSHOT_SHARE:
            self.boundary()
            self.snapshot_steps(v, pv)
        for _ in range(self.rng.randint(1, 3)):
            self.boundary()
            if not self.at and not self.attach(pv, self.rng.choice(NODES)):
                continue
            if self.rng.random() < 0.4:
                self.boundary()
                v["size"] += 8 * MiB
                r = self.retry("expand", h.ctl.ControllerExpandVolume,
                               k8s.expand(csi, h.kube.caps, pv, v["size"]))
                if r.capacity_bytes < v["size"] or not r.node_expansion_required:
                    out.violation(h.round, "expand %s answered %s" % (name, r))
                v["csize"] = v["size"]
            self.boundary()
            if self.rng.random() < 0.5:
                self.move(pv, self.at)
            else:
                self.retry("unpublish", h.ctl.ControllerUnpublishVolume,
                           k8s.detach(csi, pv, self.at, cs.CLUSTER))
                self.at = None
        if self.at:  # still attached where the last move put it
            self.boundary()
            self.retry("unpublish", h.ctl.ControllerUnpublishVolume,
                       k8s.detach(csi, pv, self.at, cs.CLUSTER))
            self.at = None
        self.boundary()
        self.retry("delete", h.ctl.DeleteVolume, k8s.delete_volume(csi, pv))
        h.deleted(v)
        self.vol = None

    def snapshot_steps(self, v, pv):
        """csi-snapshotter: CreateSnapshot of the lane's volume until it succeeds; in half the
        cases csi-provisioner makes a volume from it (or a clone of the lane's volume), which is
        then deleted; DeleteSnapshot until it succeeds."""
        h = self.h
        uid = str(uuid.uuid4())
        content = k8s.snapshot_content(uid, v["vid"], snapshot_name="vs-" + uid)
        r = self.retry("snapshot", h.ctl.CreateSnapshot,
                       k8s.create_snapshot(csi, VSCLASS, content))
        sn = {"name": "snapshot-" + uid, "id": r.snapshot.snapshot_id,
              "file": "%s@snapshot-%s.snap" % (v["name"], uid)}
        if r.snapshot.source_volume_id != v["vid"] or not r.snapshot.ready_to_use or \
                r.snapshot.size_bytes != v["csize"]:
            out.violation(h.round, "snapshot of %s answered %s" % (v["name"], r.snapshot))
        h.track_snapshot(sn)
        content["status"] = {"snapshotHandle": sn["id"]}
        if self.rng.random() < 0.5:
            self.boundary()
            self.restore(v, pv, content if self.rng.random() < 0.5 else None)
        self.boundary()
        self.retry("delete snapshot", h.ctl.DeleteSnapshot, k8s.delete_snapshot(csi, content))
        h.snapshot_deleted(sn)

    def restore(self, v, pv, content):
        """A claim whose dataSource is the snapshot of content (None: the lane's PVC), created
        until it succeeds, then deleted."""
        h = self.h
        pvc = h.kube.claim("crash-%d-%d-from" % (self.i, self.n), "16Mi")
        name = "pvc-%s" % pvc["metadata"]["uid"]
        avid = "%s/%s" % (cs.POOL, name)
        rv = {"name": name, "avid": avid, "nqn": cs.nqn_of(avid), "size": 16 * MiB,
              "csize": 16 * MiB, "vid": "%s/nvmeof-tcp/file/%s" % (cs.AGENT, avid)}
        req = k8s.create_volume(csi, h.kube.caps, h.sc, pvc, cs.CLUSTER)
        if content:
            pvc["spec"]["dataSource"] = {"kind": "VolumeSnapshot", "name": "vs"}
            vs = {"metadata": {"name": "vs"}, "status": {
                "boundVolumeSnapshotContentName": content["metadata"]["name"],
                "readyToUse": True, "restoreSize": "16Mi"}}
            k8s.content_source(csi, req, pvc, vs, content)
        else:
            pvc["spec"]["dataSource"] = {"kind": "PersistentVolumeClaim", "name": "src"}
            k8s.content_source(csi, req, pvc, {"metadata": {"name": "src"}}, pv)
        h.track(rv)
        r = self.retry("restore" if content else "clone", h.ctl.CreateVolume, req)
        rv["created"] = True
        if r.volume.volume_id != rv["vid"] or \
                r.volume.content_source != req.volume_content_source:
            out.violation(h.round, "%s answered %s" % ("restore" if content else "clone",
                                                       r.volume))
        rpv = k8s.pv_of(h.sc, pvc, req, r)
        self.boundary()
        self.retry("delete", h.ctl.DeleteVolume, k8s.delete_volume(csi, rpv))
        h.deleted(rv)

    def attach(self, pv, node):
        """csi-attacher: ControllerPublishVolume until it succeeds — or, when the pod went away
        after a failure (30 %), the VolumeAttachment is deleted and the attacher unpublishes
        the half-attached volume instead (False)."""
        h = self.h
        if self.retry("publish", h.ctl.ControllerPublishVolume,
                      k8s.attach(csi, h.kube.caps, pv, node, cs.CLUSTER), abandon=0.3):
            self.at = node
            return True
        self.retry("unpublish", h.ctl.ControllerUnpublishVolume,
                   k8s.detach(csi, pv, node, cs.CLUSTER))
        return False

    def move(self, pv, node):
        """Unpublish from node while the new attachment on the other node retries."""
        other = NODES[1 - NODES.index(node)]
        moving = threading.Thread(target=self.retry, args=(
            "publish", self.h.ctl.ControllerPublishVolume,
            k8s.attach(csi, self.h.kube.caps, pv, other, cs.CLUSTER),
            [(grpc.StatusCode.FAILED_PRECONDITION, "is published to another node")]))
        moving.start()
        self.retry("unpublish", self.h.ctl.ControllerUnpublishVolume,
                   k8s.detach(csi, pv, node, cs.CLUSTER))
        moving.join()
        self.at = other
        self.steps["move"] += 1


# ---- the invariants ------------------------------------------------------------------------------

def escape(volume_id):  # agent-api.md §6.2
    keep = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
    return "".join(chr(b) if b in keep else "_%02X" % b for b in volume_id.encode())


def listdir(*p):
    try:
        return sorted(os.listdir(os.path.join(*p)))
    except OSError:
        return None


class Checker:
    """What the previous rounds saw, and the checks of I1-I6 against it."""

    def __init__(self, env):
        self.env = env
        self.uid = {}       # volume name -> uid
        self.gen = {}       # uid -> highest publicationGeneration seen
        self.marks = {}     # mark file -> (uid, generation, endedUIDs)
        self.fsize = {}     # file -> size
        self.live = {}      # name -> lane volume dict
        self.gone = {}      # name -> lane volume dict (DeleteVolume succeeded)
        self.snaps = {}     # PillarSnapshot name -> lane snapshot dict (CreateSnapshot succeeded)
        self.snaps_gone = {}  # ... DeleteSnapshot succeeded
        self.snap_gen = {}  # PillarSnapshot uid -> highest fencingGeneration seen
        self.started = 0.0  # wall time of the last controller start
        self.mu = threading.Lock()

    def mark(self, avid):
        try:
            with open(os.path.join(self.env.state, "generations", escape(avid) + ".mark")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def run(self, rnd, when):
        """Checks every invariant now; returns the number of violations found."""
        n0 = len(out.violations)
        bad = lambda what: out.violation(rnd, "%s: %s" % (when, what))  # noqa: E731
        rc, o, e = self.env.cli("get", "pvst", "-o", "json")
        if rc != 0:
            bad("get pvst failed: %s" % e)
            return 1
        items = {i["metadata"]["name"]: i for i in json.loads(o)["items"]}
        nv = self.env.nvmet
        subs = set(listdir(nv, "subsystems") or [])
        files = {f for f in listdir(self.env.files) or [] if f.endswith(".img")}
        owned = {i["spec"]["agentVolumeID"] for i in items.values()}
        for s in subs - {cs.nqn_of(a) for a in owned}:
            bad("I3 export %s belongs to no PillarVolumeState" % s)
        for f in files - {a.split("/", 1)[1] + ".img" for a in owned}:
            bad("I3 backend volume %s belongs to no PillarVolumeState" % f)
        with self.mu:
            live, gone = dict(self.live), dict(self.gone)
        for name, obj in items.items():
            self.volume(obj, live.get(name), subs, bad)
        for name, v in gone.items():
            if name in items:
                bad("I3 %s: DeleteVolume succeeded but its PillarVolumeState is left" % name)
            if v["nqn"] in subs or name + ".img" in files:
                bad("I3 %s: DeleteVolume succeeded but its export or file is left" % name)
            m = self.mark(v["avid"])  # (a volume created and deleted between checks: any uid)
            if not m or not m.get("ended") or \
                    m.get("volumeUID") != self.uid.get(name, m.get("volumeUID")):
                bad("I4 %s: deleted, but its mark is %s (uid %s)" % (name, m,
                                                                     self.uid.get(name)))
        self.snapshots(bad)
        self.all_marks(bad)
        if not ON_KUBE:
            self.temps(bad)
        return len(out.violations) - n0

    def snapshots(self, bad):
        """I3/I4/I6 for snapshots: every snapshot file belongs to a PillarSnapshot, a deleted
        snapshot leaves neither, one whose CreateSnapshot succeeded is Ready, fencing
        generations never go back."""
        rc, o, e = self.env.cli("get", "psnap", "-o", "json")
        if rc != 0:
            bad("get psnap failed: %s" % e)
            return
        items = {i["metadata"]["name"]: i for i in json.loads(o)["items"]}
        owned = {i["spec"]["sourceVolumeID"].rsplit("/", 1)[1] + "@" +
                 i["spec"]["agentSnapshotID"].split("/", 1)[1] + ".snap" for i in items.values()}
        files = {f for f in listdir(self.env.files) or [] if f.endswith(".snap")}
        for f in files - owned:
            bad("I3 snapshot file %s belongs to no PillarSnapshot" % f)
        with self.mu:
            live, gone = dict(self.snaps), dict(self.snaps_gone)
        for name, sn in gone.items():
            if name in items or sn["file"] in files:
                bad("I3 %s: DeleteSnapshot succeeded but its record or file is left" % name)
        for name, obj in items.items():
            st, uid = obj.get("status") or {}, obj["metadata"]["uid"]
            g = st.get("fencingGeneration", 0)
            if g < self.snap_gen.get(uid, 0):
                bad("I4 %s: fencingGeneration went back %d -> %d" % (name, self.snap_gen[uid], g))
            self.snap_gen[uid] = max(g, self.snap_gen.get(uid, 0))
            if name in live and not st.get("deleting") and (
                    st.get("phase") != "Ready" or obj["spec"]["snapshotID"] != live[name]["id"]
                    or live[name]["file"] not in files):
                bad("I6 %s: CreateSnapshot succeeded, but the record is %s" % (name,
                                                                               json.dumps(st)))

    def temps(self, bad):
        """I3 for the store itself: no temporary file of a killed controller's write is left
        once its successor has opened the store."""
        for root, dirs, names in os.walk(self.env.store):
            for n in names:
                p = os.path.join(root, n)
                try:
                    old = os.stat(p).st_mtime < self.started
                except OSError:
                    continue  # renamed meanwhile: a write in progress
                if n.startswith(".") and ".tmp." in n and old:
                    bad("I3 %s: a killed controller's unfinished write is left in the store" %
                        os.path.relpath(p, self.env.store))

    def volume(self, obj, lane_vol, subs, bad):
        name, uid = obj["metadata"]["name"], obj["metadata"]["uid"]
        st, spec = obj.get("status") or {}, obj["spec"]
        avid = spec["agentVolumeID"]
        nqn = cs.nqn_of(avid)
        if self.uid.setdefault(name, uid) != uid:
            bad("I5 %s: uid changed %s -> %s" % (name, self.uid[name], uid))
        if lane_vol and spec.get("volumeID") != lane_vol["vid"]:
            bad("I5 %s: volumeID %s, expected %s" % (name, spec.get("volumeID"), lane_vol["vid"]))
        gen = st.get("publicationGeneration", 0)
        if gen < self.gen.get(uid, 0):
            bad("I4 %s: publicationGeneration went back %d -> %d" % (name, self.gen[uid], gen))
        self.gen[uid] = max(gen, self.gen.get(uid, 0))
        pubs = st.get("publishedNodes") or []
        if len(pubs) > 1:
            bad("I1 %s: published to %s" % (name, [p["nodeID"] for p in pubs]))
        if any(p.get("revoking") for p in pubs):
            bad("I2 %s: entry left revoking after the retries: %s" % (name, pubs))
        hosts = listdir(self.env.sub(nqn, "allowed_hosts"))
        if hosts is not None and len(hosts) > 1:
            bad("I1 %s: %d hosts admitted: %s" % (name, len(hosts), hosts))
        want = sorted(p["initiatorID"] for p in pubs)
        if st.get("deleting"):
            return
        if st.get("phase") != "Ready":
            bad("I6 %s: phase %s after CreateVolume succeeded" % (name, st.get("phase")))
            return
        ann = (obj["metadata"].get("annotations") or {}).get(cs.P + "success-recorded")
        if lane_vol and lane_vol.get("created") and ann != "true":
            bad("I5 %s: CreateVolume succeeded without the success-recorded annotation "
                "(crds.md §7.4)" % name)
        if nqn not in subs or (hosts or []) != want:
            bad("I2 %s: admitted %s, recorded publications %s" % (name, hosts, want))
        ns = self.env.sub(nqn, "namespaces", "1")
        got = (self.env.read(ns, "device_uuid"), self.env.read(ns, "device_nguid"),
               self.env.read(self.env.sub(nqn), "attr_serial"), self.env.read(ns, "enable"))
        idt = cs.identity_of(nqn)
        if nqn in subs and got != (idt["uuid"], idt["nguid"], idt["serial"], "1"):
            bad("I5 %s: namespace (uuid, nguid, serial, enable) %s, derived %s" % (name, got,
                                                                                   idt))
        m = self.mark(avid)
        if not m or m.get("volumeUID") != uid or m.get("ended") or m["generation"] > gen:
            bad("I4 %s: mark %s against uid %s generation %d" % (name, m, uid, gen))
        path = os.path.join(self.env.files, avid.split("/", 1)[1] + ".img")
        size = os.path.getsize(path) if os.path.exists(path) else -1
        if size < self.fsize.get(path, 0) or (lane_vol and size < lane_vol["csize"]):
            bad("I6 %s: file size %d (was %d, expanded to %d)" % (
                name, size, self.fsize.get(path, 0), lane_vol["csize"] if lane_vol else 0))
        self.fsize[path] = max(size, self.fsize.get(path, 0))

    def all_marks(self, bad):
        gdir = os.path.join(self.env.state, "generations")
        for f in listdir(gdir) or []:
            if not f.endswith(".mark"):
                continue
            try:
                with open(os.path.join(gdir, f)) as fh:
                    m = json.load(fh)
            except (OSError, ValueError) as e:
                bad("I4 mark %s unreadable: %s" % (f, e))
                continue
            prev = self.marks.get(f)
            cur = (m["volumeUID"], m["generation"], list(m["endedUIDs"]))
            if prev and (not set(prev[2]) <= set(cur[2]) or
                         (prev[0] == cur[0] and cur[1] < prev[1])):
                bad("I4 mark %s went back: %s -> %s" % (f, prev, cur))
            self.marks[f] = cur

    def sample(self, rnd):
        """I1 while running: no subsystem ever admits two hosts."""
        for s in listdir(self.env.nvmet, "subsystems") or []:
            h = listdir(self.env.nvmet, "subsystems", s, "allowed_hosts")
            if h is not None and len(h) > 1:
                out.violation(rnd, "I1 (sampled while running) %s admits %s" % (s, h))


# ---- the rounds -------------------------------------------------------------------------------------

class Harness:
    def __init__(self, base, rounds, seed):
        self.env = cs.Env(base)
        self.rounds, self.seed = rounds, seed
        self.rng = random.Random(seed)
        self.round = 0
        self.killer = Killer(self.env)
        self.killer.snapshot = self.kill_points
        self.killer.on_kill = self.pause_lanes
        self.check = Checker(self.env)
        self.lanes = []
        self.fwd = self.swatch = None
        self.points = collections.defaultdict(collections.Counter)  # step -> phase -> kills
        self.modes = collections.Counter()
        self.targets = collections.Counter()  # target label -> kills
        self.times = collections.defaultdict(list)  # figure -> seconds

    def track(self, v):
        with self.check.mu:
            self.check.live[v["name"]] = v

    def deleted(self, v):
        with self.check.mu:
            self.check.live.pop(v["name"], None)
            self.check.gone[v["name"]] = v

    def track_snapshot(self, sn):
        with self.check.mu:
            self.check.snaps[sn["name"]] = sn

    def snapshot_deleted(self, sn):
        with self.check.mu:
            self.check.snaps.pop(sn["name"], None)
            self.check.snaps_gone[sn["name"]] = sn

    def kill_points(self):
        """(step, phase) of every CSI call in flight, or ("idle", ...) when none is."""
        pts = []
        for ln in self.lanes:
            with ln.mu:
                calls = list(ln.calls.values())
            for step, avid, since in calls:
                pts.append((step, self.fwd.phase_of(avid, since)))
        return pts or [("idle", "no CSI call in flight")]

    def setup(self):
        env = self.env
        if not out.check("agent starts on a fake configfs root with a file backend",
                         env.start_agent()):
            return False
        self.fwd = env.fwd = Fwd("127.0.0.1:%d" % env.agent_port, self.killer)
        if not ON_KUBE:
            self.swatch = StoreWatch(os.path.join(env.store, "pillarvolumestates"), self.fwd,
                                     self.killer)
            self.swatch.start()
        start_controller(env)
        if not out.check("controller starts on the %s" % (
                "test API server (--store=kube)" if ON_KUBE else "embedded store"),
                serving(env) is not None):
            return False
        rc, o, e = env.apply(cs.objects(self.fwd.port))
        ok = cs.wait_for(lambda: cs.exports_ready(env)[:2] == ("True", "ExportsServing"), 20)
        self.sc = cs.wait_for(lambda: env.get("sc", cs.PSC), 20)
        if not out.check("objects applied; the agent serves; the StorageClass is generated",
                         rc == 0 and ok and self.sc, o + e):
            return False
        ch = grpc.insecure_channel("unix://" + env.sock, options=[
            ("grpc.initial_reconnect_backoff_ms", 20), ("grpc.min_reconnect_backoff_ms", 20),
            ("grpc.max_reconnect_backoff_ms", 100), ("grpc.enable_retries", 0)])
        self.ctl = csig.ControllerStub(ch)
        self.kube = cs.Kube(env, self.ctl, k8s.Caps(csi, csig.IdentityStub(ch), self.ctl))
        return True

    def targeted(self, t):
        """A SIGKILL at target t (TARGETS); a random delay when not reached within 8 s."""
        self.modes["targeted"] += 1
        if t[1] == "store" and not self.swatch:
            return self.random_kill()  # no store-write kill points on the API server
        if t[1] == "store":
            self.swatch.arm(0, t[2])
        else:
            self.fwd.arm(t[2], t[3], t[4])
        if self.killer.killed.wait(8):
            self.targets[t[0]] += 1
            return
        if self.swatch:
            self.swatch.arm(0)
        self.fwd.disarm()
        self.targets[t[0] + " (not reached in 8 s)"] += 0
        self.killer.kill("%s: not reached in 8 s" % t[0])

    def random_kill(self):
        delay = self.rng.uniform(0.05, 1.5)
        self.modes["random delay"] += 1
        time.sleep(delay)
        self.killer.kill("after %.0f ms" % (delay * 1000))

    def kill(self):
        """One SIGKILL: every odd round at the next target, else after a random delay, after
        the k-th PillarVolumeState write or at a random agent RPC boundary."""
        if self.round % 2 == 1:
            return self.targeted(TARGETS[(self.round // 2) % len(TARGETS)])
        r = self.rng.random()
        if r < 0.3 and not self.swatch:
            r = 0.3  # the API server: a random delay instead of a store-write kill point
        if r < 0.3:
            k = self.rng.randint(1, 8)
            self.modes["PillarVolumeState write"] += 1
            self.swatch.arm(k)
            if not self.killer.killed.wait(6):
                self.swatch.arm(0)
                self.killer.kill("write %d not reached in 6 s" % k)
            return
        if r < 0.55:
            return self.random_kill()
        method = self.rng.choice(MUTATING)
        where = "reply" if r < 0.78 else "send"
        hold = where == "send" and self.rng.random() < 0.5
        self.modes["agent %s %s%s" % (method, where, " (delivered late)" if hold else "")] += 1
        self.fwd.arm(method, where, hold)
        if not self.killer.killed.wait(4):
            self.fwd.disarm()
            self.killer.kill("%s %s not reached in 4 s" % (method, where))

    def pause_lanes(self):
        for ln in self.lanes:
            ln.pause.set()

    def restart(self, agent):
        env = self.env
        env.procs.stop("controller", signal.SIGKILL)
        time.sleep(self.rng.uniform(0, 0.3))
        if agent:
            env.procs.stop("agent", signal.SIGKILL)
            if agent == "reboot":
                for d in ("subsystems", "ports", "hosts"):
                    shutil.rmtree(os.path.join(env.nvmet, d))
                    os.mkdir(os.path.join(env.nvmet, d))
            if not env.start_agent():
                out.violation(self.round, "the agent did not restart")
        t0 = time.monotonic()
        self.check.started = time.time()
        start_controller(env)
        s = serving(env)
        if s is None:
            out.violation(self.round, "I6 the controller did not serve within 20 s")
        else:
            self.times["start → CSI served"].append(s)
        return t0

    def wait_recon(self, t0, timeout):
        """Seconds from t0 to the end of the first OK ReconcileState that started after t0."""
        def found():
            with self.fwd.mu:
                return next((e - t0 for s, e, ok in self.fwd.recon if s >= t0 and ok),
                            None)
        return cs.wait_for(found, timeout, 0.02)

    def one(self):
        self.round += 1
        self.killer.killed.clear()
        self.kill()
        for step, phase in self.killer.points:
            self.points[step][phase] += 1
        agent = None
        if self.round % 12 == 0:
            agent = "reboot"
        elif self.round % 6 == 0:
            agent = "restart"
        t0 = self.restart(agent)
        if agent and self.rng.random() < 0.5:  # once more, in the restore
            self.killer.killed.clear()
            self.fwd.arm("ReconcileState", self.rng.choice(("send", "reply")), False)
            if self.killer.killed.wait(10):
                self.points["restore"][self.killer.how] += 1
                t0 = self.restart(None)
            self.fwd.disarm()
        if agent:  # the agent's gate open and the PillarAgent at ExportsServing
            env = self.env
            done = cs.wait_for(lambda: not cs.agent_gate_closed(env) and
                               cs.exports_ready(env)[:2] == ("True", "ExportsServing"), 30)
            if not done:
                out.violation(self.round, "I6 no restore within 30 s after the agent %s: %s" %
                              (agent, cs.exports_ready(env)))
            else:
                self.times["start → restored (agent %s)" % agent].append(time.monotonic() - t0)
        deadline = time.monotonic() + 120
        while not all(ln.parked.is_set() for ln in self.lanes):
            if time.monotonic() > deadline:
                out.violation(self.round, "I6 the sidecars' retries did not complete in 120 s: "
                              "%s" % [ln.calls for ln in self.lanes])
                break
            time.sleep(0.02)
        self.times["start → retries done"].append(time.monotonic() - t0)
        if not self.fwd.release_held():
            out.violation(self.round, "a late request never finished")
        t = self.wait_recon(t0, 0)
        if t is not None:
            self.times["start → first resync OK"].append(t)
        bad = self.check.run(self.round, "after the retries")
        t1 = time.monotonic()
        if self.check.live and self.wait_recon(t1, 10) is None:
            out.violation(self.round, "I6 no periodic resync pass within 10 s")
        bad += self.check.run(self.round, "after a resync pass")
        print("round %d: killed %s; %s%s; %s" % (
            self.round, self.killer.how, ", ".join("%s/%s" % p for p in self.killer.points),
            "; agent " + agent if agent else "", "%d violations" % bad if bad else "ok"))
        sys.stdout.flush()
        for ln in self.lanes:
            ln.pause.clear()

    def monitor(self, stop):
        while not stop.is_set():
            self.check.sample(self.round)
            time.sleep(0.02)

    def run(self):
        if not self.setup():
            return
        self.lanes = [Lane(i, self, self.seed) for i in range(LANES)]
        for ln in self.lanes:
            ln.start()
        stop = threading.Event()
        mon = threading.Thread(target=self.monitor, args=(stop,), daemon=True)
        mon.start()
        t0 = time.monotonic()
        for _ in range(self.rounds):
            self.one()
        stop.set()
        for ln in self.lanes:
            ln.stop = True
            ln.pause.clear()
        for ln in self.lanes:
            ln.join(60)
        self.report(time.monotonic() - t0)
        rc = self.env.procs.stop("controller")
        out.check("controller exits 0 on SIGTERM after the last round", rc == 0, rc)

    def report(self, total):
        steps = collections.Counter()
        for ln in self.lanes:
            steps.update(ln.steps)
        out.check("%d rounds (SIGKILL, restart, retries, resync): no invariant violated"
                  % self.round, not out.violations,
                  "%d violations in rounds %s" % (len(out.violations),
                                                  sorted({r for r, _ in out.violations})))
        print("    seed %d, %s store, %d lanes, %.1f s; calls completed: %s; volumes deleted %d" % (
            self.seed, "kube" if ON_KUBE else "embedded", LANES, total, dict(steps),
            len(self.check.gone)))
        print("    kill modes: %s" % dict(self.modes))
        print("    kill points hit per step (CSI call in flight → where its agent calls were):")
        for step in sorted(self.points):
            n = sum(self.points[step].values())
            print("      %-10s %3d  %s" % (step, n, ", ".join(
                "%s %d" % kv for kv in sorted(self.points[step].items()))))
        print("    targeted kill points reached: %d of %d targets" % (
            sum(1 for k, n in self.targets.items() if n), len(TARGETS)))
        for k, n in sorted(self.targets.items()):
            print("      %-60s %d" % (k, n))
        late = collections.Counter("%s→%s" % x for x in self.killer.late)
        print("    requests of a dead controller delivered late: %s" % (dict(late) or "none"))
        for k, v in sorted(self.times.items()):
            v = sorted(v)
            print("    %-34s n=%-3d min %.0f ms, median %.0f ms, max %.0f ms" % (
                k, len(v), v[0] * 1000, v[len(v) // 2] * 1000, v[-1] * 1000))


def main():
    base, rounds = sys.argv[1], int(sys.argv[2])
    seed = int(os.environ.get("CRASH_SEED") or time.time())
    os.makedirs(base, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(130)))
    h = Harness(base, rounds, seed)
    cluster = Cluster(directory=os.path.join(base, "kube")) if ON_KUBE else None
    try:
        if cluster:
            os.makedirs(cluster.dir, exist_ok=True)
            h.env.kubeconfig = cluster.__enter__().kubeconfig
        h.run()
    except Exception as e:  # a crash of the suite is a failure, not a pass
        import traceback
        traceback.print_exc()
        out.check("suite ran to the end", False, repr(e))
    finally:
        if h.fwd:
            h.fwd.release()
            h.fwd.release_held(1)
            h.fwd.server.stop(0)
        h.env.procs.stop_all()
        if cluster:
            cluster.__exit__(None, None, None)
    print("controller-crash interop: %d passed, %d failed" % (out.passed, out.failed))
    sys.exit(1 if out.failed else 0)


if __name__ == "__main__":
    main()
