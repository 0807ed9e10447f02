#!/usr/bin/python3
"""Controller component suite: `pillar-csi controller` on the embedded store with its reconciler
loop, `pillar-csi agent` on a fake configfs root with a `file` backend, and this grpcio CSI client,
all on loopback.  Expected values (volume IDs, NQNs, namespace identities, port IDs, messages,
conditions) are computed here from the specification (csi.md, crds.md, agent-api.md, nvmet.md,
operations.md), never read from our code.  Every CSI call stands for a Kubernetes component and
is built as that component builds it (test/interop/lib/sidecars.py: csi-provisioner from the
StorageClass and PVC, csi-attacher from the PV and the CSINodes).

The controller reaches the agent through a small grpcio forwarder owned by this suite.  It passes
every AgentService call through unchanged; for the restore it can hold the one complete
ReconcileState until the suite has seen the PillarAgent at ExportsReady=False/ExportRestorePending
in the store (crds.md §3.3: "restore not yet sent or in flight"), which makes that state
observable without racing the controller, and it records the request so the suite can check that
the restore is one request carrying every export (operations.md OPS-09).

  controller_suite.py DIR    prints PASS/FAIL per case and "(controller suite: N passed, M failed)"

With PILLAR_TEST_STORE=kube the same suite runs with `--store=kube`: the controller and every CLI
call use the test API server on a real etcd (test/kube/cluster.py) instead of the embedded store.
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent import futures

sys.path.insert(0, os.path.join(os.environ["BUILD"], "controller-test", "py"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import grpc  # noqa: E402
import csi_pb2 as csi  # noqa: E402
import csi_pb2_grpc as csig  # noqa: E402
import agent_pb2 as apb  # noqa: E402
import agent_pb2_grpc as apbg  # noqa: E402
from klog import call_logs, duration_ok  # noqa: E402
import sidecars as k8s  # noqa: E402
from waits import free_port, wait_for  # noqa: E402,F401 (crash.py takes them from here too)

ON_KUBE = os.environ.get("PILLAR_TEST_STORE") == "kube"
if ON_KUBE:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kube"))
    from cluster import Cluster  # noqa: E402

BIN = os.environ["PILLAR_BIN"]
# the agent's binary (default PILLAR_BIN): a suite can meet an agent of another build
AGENT_BIN = os.environ.get("PILLAR_AGENT_BIN") or BIN
GROUP = "pillar-csi.bhyoo.com/v1alpha1"
P = "pillar-csi.bhyoo.com/"
AGENT, STORE, PROTO, PSC, POOL = "storage-1", "files", "tcp", "fast", "fp"
NQN_PREFIX = "nqn.2026-01.com.bhyoo.pillar-csi:"
ID_NS = uuid.UUID("3c6e0b8a-6a0f-5c1d-9f5e-8d2b7a4e1c90")
HOST_A = "nqn.2014-08.org.nvmexpress:uuid:%s" % uuid.uuid4()
HOST_B = "nqn.2014-08.org.nvmexpress:uuid:%s" % uuid.uuid4()
MiB = 1 << 20
OK, PRECOND = grpc.StatusCode.OK, grpc.StatusCode.FAILED_PRECONDITION


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


rep = Report()


# ---- spec-derived values ------------------------------------------------------------------------

def nqn_of(agent_volume_id):  # nvmet.md §2.1
    return NQN_PREFIX + agent_volume_id.replace("/", ".")


def identity_of(nqn):  # agent-api.md §8.2
    return {"uuid": str(uuid.uuid5(ID_NS, "uuid:%s/namespaces/1" % nqn)),
            "nguid": str(uuid.uuid5(ID_NS, "nguid:%s/namespaces/1" % nqn)),
            "serial": hashlib.sha256(("serial:" + nqn).encode()).hexdigest()[:20]}


def port_id_of(addr, port):  # nvmet.md §2.2
    h = 0x811C9DC5
    for b in addr.encode():
        h = ((h ^ b) * 0x01000193) % 2**32
    h = ((h ^ port) * 0x01000193) % 2**32
    return h % 65535 + 1


def call(fn, req, timeout=30):
    try:
        return OK, "", fn(req, timeout=timeout)
    except grpc.RpcError as e:
        return e.code(), e.details() or "", None


# ---- processes ------------------------------------------------------------------------------------

class Procs:
    """Every process the suite starts, recorded in DIR/pids for run.sh's trap."""

    def __init__(self, base):
        self.base = base
        self.live = {}

    def start(self, name, args, env=None, log=None):
        lf = open(log or os.path.join(self.base, name + ".log"), "ab")
        p = subprocess.Popen(args, stdout=lf, stderr=subprocess.STDOUT, env=env)
        lf.close()
        self.live[name] = p
        self._write()
        return p

    def stop(self, name, sig=signal.SIGTERM, timeout=15):
        p = self.live.pop(name, None)
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(sig)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        self._write()
        return rc

    def stop_all(self):
        for n in list(self.live):
            self.stop(n, signal.SIGKILL)

    def _write(self):
        with open(os.path.join(self.base, "pids"), "w") as f:
            f.write(" ".join(str(p.pid) for p in self.live.values()))


class Env:
    def __init__(self, base):
        self.base = base
        self.cfs = os.path.join(base, "cfs")
        self.nvmet = os.path.join(self.cfs, "nvmet")
        self.files = os.path.join(base, "files")
        self.state = os.path.join(base, "state")
        self.store = os.path.join(base, "store")
        self.sock = os.path.join(base, "csi.sock")
        for d in ("cfs/nvmet/subsystems", "cfs/nvmet/ports", "cfs/nvmet/hosts", "files",
                  "state", "store", "host/sys/module/nvmet_tcp"):
            os.makedirs(os.path.join(base, d), exist_ok=True)
        self.config = os.path.join(base, "agent.json")
        with open(self.config, "w") as f:
            json.dump({"backends": [{"file": {"pool": POOL, "directory": self.files}}]}, f)
        self.procs = Procs(base)
        self.agent_port = free_port()
        self.agent_starts = 0
        self.fwd = None
        self.kubeconfig = None  # set: --store=kube on this API server
        self.controller_args = []  # more controller flags (benchmarks)
        self.reconcile_interval = "1s"  # PILLAR_RECONCILE_INTERVAL (benchmarks: the default)

    def store_args(self):
        if self.kubeconfig:
            return ["--store=kube", "--kubeconfig=" + self.kubeconfig]
        return ["--store=dir:" + self.store]

    # -- agent --
    def start_agent(self, cut_hit=None):
        """Starts the agent (again while its port lingers).  cut_hit: the power-cut fault
        point's .hit file of an armed start; when the agent dies at its cut before it serves
        (a durable write of its start), that is the start's outcome: True, the dead process
        left in procs.live for the caller."""
        self.agent_starts += 1
        args = [AGENT_BIN, "agent", "--listen-address=127.0.0.1:%d" % self.agent_port,
                "--config=" + self.config, "--configfs-root=" + self.cfs,
                "--state-dir=" + self.state, "--host-root=" + os.path.join(self.base, "host"),
                "--shutdown-grace-period=0s", "--v=3"]
        for _ in range(50):  # the port of a killed agent may linger briefly
            p = self.procs.start("agent", args,
                                 log=os.path.join(self.base, "agent-%d.log" % self.agent_starts))
            if wait_for(lambda: self._connects(self.agent_port) or p.poll() is not None, 10):
                if p.poll() is None:
                    return True
                if cut_hit and os.path.exists(cut_hit):
                    return True
            self.procs.stop("agent", signal.SIGKILL)
            time.sleep(0.1)
        return False

    @staticmethod
    def _connects(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    # -- controller --
    def start_controller(self):
        env = dict(os.environ, PILLAR_RECONCILE_INTERVAL=self.reconcile_interval)
        # probes on loopback only (test servers never listen on other addresses)
        p = self.procs.start("controller", [BIN, "controller", "--csi-endpoint=unix://" + self.sock,
                                            *self.store_args(),
                                            "--health-probe-bind-address=127.0.0.1:0",
                                            "--metrics-bind-address=127.0.0.1:0", "--v=5",
                                            *self.controller_args],
                             env=env)
        ok = wait_for(lambda: os.path.exists(self.sock) or p.poll() is not None, 10)
        return ok and p.poll() is None

    def controller_log(self):
        with open(os.path.join(self.base, "controller.log"), errors="replace") as f:
            return f.read()

    def agent_logs(self):
        text = ""
        for i in range(1, self.agent_starts + 1):
            with open(os.path.join(self.base, "agent-%d.log" % i), errors="replace") as f:
                text += f.read()
        return text

    # -- CLI on the store --
    def cli(self, *args, stdin=None):
        r = subprocess.run([BIN] + list(args) + self.store_args(), input=stdin,
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout, r.stderr

    def apply(self, objs, *extra):
        path = os.path.join(self.base, "apply-%d.json" % time.monotonic_ns())
        with open(path, "w") as f:
            json.dump(objs, f)
        return self.cli("apply", "-f", path, *extra)

    def get(self, kind, name):
        rc, out, _ = self.cli("get", kind, name, "-o", "json")
        return json.loads(out) if rc == 0 else None

    # -- fake nvmet tree --
    def sub(self, nqn, *rest):
        return os.path.join(self.nvmet, "subsystems", nqn, *rest)

    def read(self, *parts):
        try:
            with open(os.path.join(*parts)) as f:
                return f.read().strip()
        except OSError:
            return None


def cond(obj, typ):
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == typ:
            return c.get("status"), c.get("reason"), c.get("message", "")
    return None, None, None


# ---- the forwarder between controller and agent -------------------------------------------------

class Forwarder(grpc.GenericRpcHandler):
    """Passes every call to the agent unchanged (raw bytes).  With hold_complete set, the next
    ReconcileState{complete=true} waits until release() and is recorded in self.complete."""

    def __init__(self, target):
        self.target = target
        self.lock = threading.Lock()
        self.channel = None
        self.hold_complete = False
        self.held = threading.Event()
        self.released = threading.Event()
        self.complete = []  # ReconcileStateRequest messages with complete=true
        self.recon_ok = []  # ReconcileState calls answered OK: (t_start, t_end), monotonic
        self.calls = []     # method names, in order
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((self,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _chan(self):
        with self.lock:
            if self.channel is None:
                self.channel = grpc.insecure_channel(self.target, options=[
                    ("grpc.initial_reconnect_backoff_ms", 50),
                    ("grpc.min_reconnect_backoff_ms", 50),
                    ("grpc.max_reconnect_backoff_ms", 200), ("grpc.enable_retries", 0)])
            return self.channel

    def _reset(self, ch):
        """The next call gets a fresh channel instead of ch, which met an unavailable agent.
        ch is not closed here: other calls may be on it still, and closing it under them fails
        them with UNKNOWN "Cannot invoke RPC on closed channel!", which no network gives; it
        closes once no call holds it."""
        with self.lock:
            if self.channel is ch:
                self.channel = None

    def release(self):
        self.released.set()

    def service(self, details):
        method = details.method

        def handle(req, ctx):
            with self.lock:
                self.calls.append(method.rsplit("/", 1)[-1])
            if method.endswith("/ReconcileState"):
                m = apb.ReconcileStateRequest.FromString(req)
                if m.complete:
                    with self.lock:
                        self.complete.append(m)
                        hold = self.hold_complete
                        self.hold_complete = False
                    if hold:
                        self.held.set()
                        self.released.wait(30)
            remaining = ctx.time_remaining()
            t0 = time.monotonic()
            ch = self._chan()
            try:
                r = ch.unary_unary(method)(
                    req, timeout=remaining if remaining is not None else 30)
                if method.endswith("/ReconcileState"):
                    with self.lock:
                        self.recon_ok.append((t0, time.monotonic()))
                return r
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    self._reset(ch)
                ctx.abort(e.code(), e.details() or "")

        return grpc.unary_unary_rpc_method_handler(handle)


# ---- the suite ------------------------------------------------------------------------------------

def objects(agent_port):
    meta = lambda n: {"name": n}  # noqa: E731
    return [
        {"apiVersion": GROUP, "kind": "PillarAgent", "metadata": meta(AGENT),
         "spec": {"external": {"address": "127.0.0.1", "port": agent_port}}},
        {"apiVersion": GROUP, "kind": "PillarStore", "metadata": meta(STORE),
         "spec": {"agentRef": AGENT, "backend": {"file": {"pool": POOL}}}},
        {"apiVersion": GROUP, "kind": "PillarProtocol", "metadata": meta(PROTO),
         "spec": {"protocol": {"nvmeofTcp": {"port": 4420, "acl": True}}}},
        {"apiVersion": GROUP, "kind": "PillarStorageClass", "metadata": meta(PSC),
         "spec": {"storeRef": STORE, "protocolRef": PROTO}},
    ] + CLUSTER["csinodes"]


def csinode(name, host):
    """A worker's CSINode: the host identity our node plugin published, the driver registration
    kubelet made from NodeGetInfo (node ID, topology key: nvme_tcp is loaded)."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {
        "name": name, "annotations": {P + "nvmeof-host-nqn": host,
                                      P + "nvmeof-host-id": host.rsplit(":", 1)[1]}},
        "spec": {"drivers": [{"name": k8s.DRIVER, "nodeID": name,
                              "topologyKeys": [P + "nvmeof"]}]}}


# What the sidecars read: the workers' Nodes (labels kubelet copied from NodeGetInfo) and CSINodes.
CLUSTER = {"nodes": [{"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n,
                                                          P + "nvmeof": "true"}}}
                     for n in ("node-a", "node-b")],
           "csinodes": [csinode("node-a", HOST_A), csinode("node-b", HOST_B)]}


class Kube:
    """The Kubernetes side: PVCs in the store, and every CSI call made as the sidecar that makes
    it in a cluster (test/interop/lib/sidecars.py): csi-provisioner, csi-attacher."""

    def __init__(self, env, ctl, caps):
        self.env, self.ctl, self.caps = env, ctl, caps

    def claim(self, name, size):
        """Creates PersistentVolumeClaim default/name and returns it as stored (with its uid)."""
        rc, out, err = self.env.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                       "metadata": {"name": name, "namespace": "default"},
                                       "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": size}},
                                                "storageClassName": PSC}})
        rc, out, _ = self.env.cli("get", "pvc", "-o", "json")
        items = json.loads(out)["items"] if rc == 0 else []
        return next(i for i in items if i["metadata"]["name"] == name)

    def provision(self, sc, pvc):
        """CreateVolume; returns (code, message, request, PV or None)."""
        req = k8s.create_volume(csi, self.caps, sc, pvc, CLUSTER)
        code, msg, r = call(self.ctl.CreateVolume, req)
        return code, msg, req, (k8s.pv_of(sc, pvc, req, r) if code == OK else None), r

    def attach(self, pv, node):
        return call(self.ctl.ControllerPublishVolume,
                    k8s.attach(csi, self.caps, pv, node, CLUSTER))

    def detach(self, pv, node):
        return call(self.ctl.ControllerUnpublishVolume, k8s.detach(csi, pv, node, CLUSTER))

    def delete(self, pv):
        return call(self.ctl.DeleteVolume, k8s.delete_volume(csi, pv))


def pvst_requests(name, t0, t1):
    """The API requests addressing PillarVolumeState name between t0 and t1 (the API server's
    log, --store=kube only): "GET", "POST", "PUT", "PUT status", "DELETE" in order."""
    path = os.environ.get("PILLAR_KUBE_REQUEST_LOG")
    if not ON_KUBE or not path:
        return []
    coll = "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarvolumestates"
    out = []
    with open(path) as f:
        for line in f.read().splitlines():
            t, m, p = line.split(" ", 2)
            p = p.split("?")[0]
            if not t0 <= float(t) <= t1:
                continue
            if p == "%s/%s" % (coll, name) or (m == "POST" and p == coll):
                out.append(m)
            elif p == "%s/%s/status" % (coll, name):
                out.append(m + " status")
    return out


def pvst_quiet(name, quiet=1.5, limit=30):
    """Waits until no request has addressed PillarVolumeState name for `quiet` seconds."""
    end = time.time() + limit
    while time.time() < end:
        if not pvst_requests(name, time.time() - quiet, time.time()):
            return
        time.sleep(0.2)


def exports_ready(env):
    return cond(env.get("pa", AGENT), "ExportsReady")


def export_view(env, nqn):
    """What the fake nvmet tree says about one export."""
    ns = env.sub(nqn, "namespaces", "1")
    ah = env.sub(nqn, "allowed_hosts")
    return {"exists": os.path.isdir(env.sub(nqn)),
            "enable": env.read(ns, "enable"), "device_path": env.read(ns, "device_path"),
            "uuid": env.read(ns, "device_uuid"), "nguid": env.read(ns, "device_nguid"),
            "serial": env.read(env.sub(nqn), "attr_serial"),
            "allow_any": env.read(env.sub(nqn), "attr_allow_any_host"),
            "hosts": sorted(os.listdir(ah)) if os.path.isdir(ah) else None}


def host_link_ok(env, nqn, host):
    link = env.sub(nqn, "allowed_hosts", host)
    return (os.path.islink(link) and os.readlink(link) == "../../../hosts/" + host and
            os.path.isdir(os.path.join(env.nvmet, "hosts", host)))


def port_link(env, nqn, port_id):
    return os.path.join(env.nvmet, "ports", str(port_id), "subsystems", nqn)


def run(base):
    env = Env(base)
    if ON_KUBE:  # the test API server logs every request and can play another writer
        os.environ["PILLAR_KUBE_REQUEST_LOG"] = os.path.join(base, "requests.log")
        os.environ["PILLAR_KUBE_INTERLOPER"] = os.path.join(base, "interloper.json")
    cluster = Cluster(directory=os.path.join(base, "kube")) if ON_KUBE else None
    try:
        if cluster:
            os.makedirs(cluster.dir, exist_ok=True)
            env.kubeconfig = cluster.__enter__().kubeconfig
        suite(env)
    finally:
        if env.fwd:
            env.fwd.release()
            env.fwd.server.stop(0)
        env.procs.stop_all()
        if cluster:
            cluster.__exit__(None, None, None)


def suite(env):
    if not rep.check("agent starts on a fake configfs root with a file backend", env.start_agent()):
        return
    fwd = env.fwd = Forwarder("127.0.0.1:%d" % env.agent_port)
    where = "API server (--store=kube)" if ON_KUBE else "embedded store"
    if not rep.check("controller starts on the %s and serves CSI on a unix socket" % where,
                     env.start_controller()):
        return
    rc, out, err = env.apply(objects(fwd.port))
    rep.check("apply PillarAgent, PillarStore, PillarProtocol, PillarStorageClass, CSINodes",
              rc == 0 and out.count(" created") == 6, out + err)

    # ---- the restore of an empty agent opens its gate ------------------------------------------
    ok = wait_for(lambda: exports_ready(env)[:2] == ("True", "ExportsServing"), 20)
    pa = env.get("pa", AGENT)
    rep.check("PillarAgent reaches ExportsReady=True/ExportsServing (restore of an empty agent)",
              ok, json.dumps((pa or {}).get("status")))
    rep.check("the empty restore was one ReconcileState{complete=true} with no volumes",
              len(fwd.complete) == 1 and len(fwd.complete[0].volumes) == 0,
              [len(m.volumes) for m in fwd.complete])
    rep.check("PillarAgent Ready=True/AgentConnected, resolvedAddress, file capability",
              cond(pa, "Ready")[:2] == ("True", "AgentConnected") and
              pa["status"].get("resolvedAddress") == "127.0.0.1:%d" % fwd.port and
              "file" in pa["status"].get("capabilities", {}).get("backends", []),
              json.dumps((pa or {}).get("status")))
    ok = wait_for(lambda: cond(env.get("psc", PSC), "Ready")[0] == "True" and
                  env.get("sc", PSC), 20)
    sc = env.get("sc", PSC)
    rep.check("PillarStorageClass Ready; generated StorageClass carries exactly the two parameters",
              bool(ok) and sc["provisioner"] == "pillar-csi.bhyoo.com" and
              sc["parameters"] == {P + "storage-class": PSC, "csi.storage.k8s.io/fstype": "ext4"},
              json.dumps(sc))
    if not sc:
        return
    ch = grpc.insecure_channel("unix://" + env.sock)
    ctl = csig.ControllerStub(ch)
    kube = Kube(env, ctl, k8s.Caps(csi, csig.IdentityStub(ch), ctl))
    fstype_cases(env, kube)
    csi_flow(env, fwd, kube, sc)


def fstype_cases(env, kube):
    """crds.md §9/§11/§13 with the provisioner's request shape: fstype only in the capability."""
    refs = {P + "store-ref": STORE, P + "protocol-ref": PROTO}
    pvc = kube.claim("data-xfs", "300Mi")  # XFS's minimum (csi.md §7.4)
    sc = {"parameters": dict(refs, **{"csi.storage.k8s.io/fstype": "xfs"})}
    code, msg, req, pv, r = kube.provision(sc, pvc)
    rep.check("the provisioner's CreateVolume carries no csi.storage.k8s.io/fstype parameter, "
              "the fstype only as mount.fs_type, the extra metadata and the workers' topology",
              "csi.storage.k8s.io/fstype" not in req.parameters and
              req.volume_capabilities[0].mount.fs_type == "xfs" and
              req.parameters["csi.storage.k8s.io/pvc/name"] == "data-xfs" and
              [dict(t.segments) for t in req.accessibility_requirements.requisite] ==
              [{P + "nvmeof": "true"}], str(req))
    got = env.get("pvst", req.name) or {}
    rep.check("StorageClass fstype xfs: xfs in the volume context and in spec.resolved",
              code == OK and r.volume.volume_context[P + "fs-type"] == "xfs" and
              got.get("spec", {}).get("resolved", {}).get("filesystem", {}).get("fsType") ==
              "xfs", "%s %s %s" % (code, msg, json.dumps(got.get("spec"))))
    if pv:
        code, msg, _ = kube.delete(pv)
        rep.check("DeleteVolume of the xfs volume", code == OK, "%s %s" % (code, msg))
    pvc = kube.claim("data-mismatch", "16Mi")
    sc = {"parameters": dict(refs, **{P + "filesystem": "fsType: ext4",
                                      "csi.storage.k8s.io/fstype": "xfs"})}
    code, msg, req, _, _ = kube.provision(sc, pvc)
    rep.check("filesystem document ext4 + StorageClass fstype xfs: INVALID_ARGUMENT with the "
              "crds.md §13 message",
              code == grpc.StatusCode.INVALID_ARGUMENT and
              msg == 'csi.storage.k8s.io/fstype "xfs" does not match filesystem fsType "ext4"'
              and env.get("pvst", req.name) is None, "%s %r" % (code, msg))
    pvc = kube.claim("data-small-xfs", "16Mi")
    sc = {"parameters": dict(refs, **{"csi.storage.k8s.io/fstype": "xfs"})}
    code, msg, req, _, _ = kube.provision(sc, pvc)
    rep.check("xfs under 300 MiB: INVALID_ARGUMENT with csi.md §7.4's message, nothing created",
              code == grpc.StatusCode.INVALID_ARGUMENT and
              msg == "xfs volumes must be at least 300 MiB" and
              env.get("pvst", req.name) is None, "%s %r" % (code, msg))


def csi_flow(env, fwd, kube, sc):
    pvc = kube.claim("data", "64Mi")
    name = "pvc-%s" % pvc["metadata"]["uid"]
    avid = "%s/%s" % (POOL, name)
    vid = "%s/nvmeof-tcp/file/%s" % (AGENT, avid)
    nqn = nqn_of(avid)
    ident = identity_of(nqn)
    pid = port_id_of("127.0.0.1", 4420)

    # ---- CreateVolume through the generated StorageClass's parameters --------------------------
    t0 = time.time()
    code, msg, _, pv, r = kube.provision(sc, pvc)
    pvst_reqs = pvst_requests(name, t0, time.time())
    if not rep.check("CreateVolume through the generated StorageClass (csi-provisioner's request)",
                     code == OK, "%s %s" % (code, msg)):
        return
    v = r.volume
    want_ctx = {"target_id": nqn, "address": "127.0.0.1", "port": "4420",
                P + "protocol-type": "nvmeof-tcp", P + "volume-ref": "1", P + "fs-type": "ext4"}
    rep.check("CreateVolume: volume ID, capacity, volume context (no unset tunables), topology",
              v.volume_id == vid and v.capacity_bytes == 64 * MiB and
              dict(v.volume_context) == want_ctx and len(v.accessible_topology) == 1 and
              dict(v.accessible_topology[0].segments) == {P + "nvmeof": "true"}, str(v))
    x = export_view(env, nqn)
    rep.check("nvmet tree: subsystem, namespace 1 enabled on the volume file with the derived "
              "identity, ACL on, no host admitted",
              x["exists"] and x["enable"] == "1" and
              x["device_path"] == os.path.join(env.files, name + ".img") and
              x["uuid"] == ident["uuid"] and x["nguid"] == ident["nguid"] and
              x["serial"] == ident["serial"] and x["allow_any"] == "0" and x["hosts"] == [], x)
    rep.check("nvmet tree: subsystem linked to port %d (tcp, 4420)" % pid,
              os.path.islink(port_link(env, nqn, pid)) and
              env.read(env.nvmet, "ports", str(pid), "addr_trsvcid") == "4420", "")
    pvst = env.get("pvst", name)
    st = (pvst or {}).get("status", {})
    # one claim for both agent calls (crds.md §7.5 deviation: no CreatePartial on success)
    rep.check("PillarVolumeState: Ready, exportSpec recorded, generation 1, success-recorded",
              st.get("phase") == "Ready" and
              st.get("exportSpec") == {"bindAddress": "127.0.0.1", "port": 4420,
                                       "aclEnabled": True} and
              st.get("publicationGeneration") == 1 and
              pvst["metadata"].get("annotations", {}).get(P + "success-recorded") == "true" and
              pvst["metadata"].get("labels", {}).get(P + "agent") == AGENT, json.dumps(pvst))

    if ON_KUBE:
        # crds.md §7.5's writes are conditional on resourceVersion: each is one PUT of the watch
        # cache's copy, not a GET and a PUT (13 requests, 7 of them GETs, before)
        rep.check("CreateVolume on the API: its PillarVolumeState requests are the existence GET, "
                  "the POST, 2 status PUTs and the annotation PUT, no GET before a write",
                  pvst_reqs == ["GET", "POST", "PUT status", "PUT status", "PUT"],
                  pvst_reqs)

    # ---- publish to node-a, refuse node-b ---------------------------------------------------------
    if ON_KUBE:  # another writer changes the object just before the publish's status write
        pvst_quiet(name)  # the reconcilers are done with the new volume
        with open(os.environ["PILLAR_KUBE_INTERLOPER"], "w") as f:
            json.dump({"method": "PUT",
                       "path": "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarvolumestates/%s/status"
                       % name, "body_contains": '"nodeID":"node-a"',
                       "patch": {"metadata": {"annotations": {
                           "example.com/other-writer": "was-here"}}}}, f)
    t0 = time.time()
    code, msg, r = kube.attach(pv, "node-a")
    pvst_reqs = pvst_requests(name, t0, time.time())
    if ON_KUBE:
        o = env.get("pvst", name) or {}
        rep.check("ControllerPublishVolume meets another writer's change (409 Conflict): the "
                  "write is retried from a fresh read and the object keeps both changes",
                  code == OK and not os.path.exists(os.environ["PILLAR_KUBE_INTERLOPER"]) and
                  o["metadata"].get("annotations", {}).get("example.com/other-writer") ==
                  "was-here" and
                  [n["nodeID"] for n in o["status"].get("publishedNodes", [])] == ["node-a"] and
                  pvst_reqs == ["GET", "PUT status", "GET", "PUT status"],
                  (code, msg, pvst_reqs, json.dumps(o)))
    rep.check("ControllerPublishVolume to node-a", code == OK and len(r.publish_context) == 0,
              "%s %s" % (code, msg))
    rep.check("nvmet tree: allowed_hosts/<node-a NQN> links to hosts/<node-a NQN>",
              host_link_ok(env, nqn, HOST_A) and export_view(env, nqn)["hosts"] == [HOST_A],
              export_view(env, nqn))
    rep.check("PillarVolumeState: node-a recorded with its host NQN, generation +1 (crds.md §7.5)",
              env.get("pvst", name)["status"].get("publishedNodes") ==
              [{"nodeID": "node-a", "initiatorID": HOST_A, "accessMode": "SINGLE_NODE_MULTI_WRITER",
                "readonly": False, "revoking": False}] and
              env.get("pvst", name)["status"].get("publicationGeneration") == 2,
              json.dumps(env.get("pvst", name)["status"]))
    code, msg, r = kube.attach(pv, "node-a")
    rep.check("ControllerPublishVolume to node-a again is idempotent", code == OK,
              "%s %s" % (code, msg))
    code, msg, _ = kube.attach(pv, "node-b")
    want = ('volume "%s" is published to another node "node-a" (access mode '
            'SINGLE_NODE_MULTI_WRITER, readonly=false); cannot publish to node "node-b" with '
            'access mode SINGLE_NODE_MULTI_WRITER' % vid)
    rep.check("ControllerPublishVolume to node-b: FAILED_PRECONDITION \"is published to another "
              "node\" (csi.md §4.3 message)",
              code == PRECOND and "is published to another node" in msg and msg == want,
              "%s %r" % (code, msg))
    rep.check("nvmet tree: node-b was not admitted", export_view(env, nqn)["hosts"] == [HOST_A],
              export_view(env, nqn))
    code, msg, _ = kube.delete(pv)
    rep.check("DeleteVolume while published: FAILED_PRECONDITION (csi.md §4.2)",
              code == PRECOND and msg == ('volume "%s" is still published to nodes [node-a]; '
                                          'unpublish it before deleting' % vid),
              "%s %r" % (code, msg))

    # ---- unpublish node-a, publish node-b ----------------------------------------------------------
    gen = env.get("pvst", name)["status"]["publicationGeneration"]
    code, msg, _ = kube.detach(pv, "node-a")
    rep.check("ControllerUnpublishVolume from node-a", code == OK, "%s %s" % (code, msg))
    x = export_view(env, nqn)
    rep.check("nvmet tree: node-a's allowed_hosts link and its unused hosts entry are gone",
              x["hosts"] == [] and not os.path.exists(os.path.join(env.nvmet, "hosts", HOST_A)) and
              x["enable"] == "1", x)
    rep.check("PillarVolumeState: no publication left, generation +1 for the unpublish",
              (env.get("pvst", name) or {}).get("status", {}).get("publishedNodes") in (None, [])
              and env.get("pvst", name)["status"].get("publicationGeneration") == gen + 1,
              json.dumps(env.get("pvst", name)))
    code, msg, _ = kube.attach(pv, "node-b")
    rep.check("ControllerPublishVolume to node-b after the unpublish", code == OK,
              "%s %s" % (code, msg))
    rep.check("nvmet tree: allowed_hosts/<node-b NQN> only",
              host_link_ok(env, nqn, HOST_B) and export_view(env, nqn)["hosts"] == [HOST_B],
              export_view(env, nqn))

    # ---- agent restart and storage-node reboot ------------------------------------------------------
    pv2 = restart_cases(env, fwd, kube, sc, name, nqn, ident, pid)

    # ---- teardown ------------------------------------------------------------------------------------
    code, msg, _ = kube.detach(pv, "node-b")
    rep.check("ControllerUnpublishVolume from node-b", code == OK, "%s %s" % (code, msg))
    rep.check("nvmet tree: no host admitted after the last unpublish",
              export_view(env, nqn)["hosts"] == [] and
              not os.path.exists(os.path.join(env.nvmet, "hosts", HOST_B)), export_view(env, nqn))
    code, msg, _ = kube.delete(pv)
    rep.check("DeleteVolume", code == OK, "%s %s" % (code, msg))
    rep.check("nvmet tree: subsystem, namespace and port link removed; volume file deleted",
              not os.path.exists(env.sub(nqn)) and not os.path.lexists(port_link(env, nqn, pid))
              and not os.path.exists(os.path.join(env.files, name + ".img")),
              sorted(os.listdir(os.path.join(env.nvmet, "subsystems"))))
    rep.check("PillarVolumeState deleted", env.get("pvst", name) is None, "")
    code, msg, _ = kube.delete(pv)
    rep.check("DeleteVolume again is OK (idempotent)", code == OK, "%s %s" % (code, msg))
    if pv2:
        code, msg, _ = kube.delete(pv2)
        rep.check("DeleteVolume of the repaired volume; nothing is left on the agent",
                  code == OK and os.listdir(os.path.join(env.nvmet, "subsystems")) == [] and
                  os.listdir(os.path.join(env.nvmet, "hosts")) == [] and
                  not [f for f in os.listdir(env.files) if f.endswith(".img")],
                  "%s %s %s" % (code, msg, os.listdir(os.path.join(env.nvmet, "subsystems"))))
    check_call_logs(env, vid, avid, want)
    rc = env.procs.stop("controller")
    rep.check("controller exits 0 on SIGTERM", rc == 0, rc)


def check_call_logs(env, vid, avid, refused_msg):
    """The per-call lines of the controller (--v=5) and the agent (--v=3)."""
    log = env.controller_log()
    cv = "/csi.v1.Controller/CreateVolume"
    ok = [kv for sev, kv in call_logs(log, "GRPC call", cv) if sev == "I"]
    rep.check("controller log: CreateVolume logged once at --v=3 with its volume ID, OK and a "
              "duration", len([kv for kv in ok if kv.get("volumeID") == vid]) == 1 and
              all(kv.get("code") == "OK" and duration_ok(kv) for kv in ok), ok)
    pub = "/csi.v1.Controller/ControllerPublishVolume"
    bad = call_logs(log, "GRPC call failed", pub)
    rep.check("controller log: the refused ControllerPublishVolume is an error line (shown at "
              "--v=0) with FAILED_PRECONDITION and the message",
              [(sev, kv.get("volumeID"), kv.get("code"), kv.get("err")) for sev, kv in bad] ==
              [("E", vid, "FAILED_PRECONDITION", refused_msg)] and duration_ok(bad[0][1]), bad)
    good = [kv for sev, kv in call_logs(log, "GRPC call", pub) if kv.get("volumeID") == vid]
    rep.check("controller log: one OK line per accepted ControllerPublishVolume (3)",
              [kv.get("code") for kv in good] == ["OK"] * 3, good)
    reqs = call_logs(log, "GRPC request", cv)
    resps = call_logs(log, "GRPC response", cv)
    rep.check("controller log at --v=5: CreateVolume's request and response as JSON",
              any(json.loads(kv["request"]).get("volume_capabilities") for _, kv in reqs) and
              any(json.loads(kv["response"])["volume"]["volume_id"] == vid for _, kv in resps),
              (reqs[:1], resps[:1]))
    alog = env.agent_logs()
    acv = call_logs(alog, "GRPC call", "/pillar_csi.agent.v1.AgentService/CreateVolume")
    rep.check("agent log: AgentService/CreateVolume logged at --v=3 with the agent volume ID",
              [(sev, kv.get("code")) for sev, kv in acv if kv.get("volumeID") == avid] ==
              [("I", "OK")] and all(duration_ok(kv) for _, kv in acv), acv)
    rep.check("agent log at --v=3: no request bodies",
              not call_logs(alog, "GRPC request", "/pillar_csi.agent.v1.AgentService/CreateVolume"),
              "")


def observe_restore(env, fwd, label, restart):
    """Holds the next complete ReconcileState, runs restart(), and checks that the PillarAgent
    shows ExportRestorePending while the restore is held, then ExportsServing after it.
    Returns the recorded request (or None)."""
    fwd.held.clear()
    fwd.released.clear()
    n0 = len(fwd.complete)
    fwd.hold_complete = True
    restart()
    held = fwd.held.wait(20)
    rep.check("%s: the controller sends a complete ReconcileState" % label, held, fwd.calls[-10:])
    if not held:
        fwd.release()
        return None
    pending = wait_for(lambda: exports_ready(env)[:2] == ("False", "ExportRestorePending"), 10)
    ready = cond(env.get("pa", AGENT), "Ready")
    rep.check("%s: while the restore is in flight the PillarAgent shows ExportsReady=False/"
              "ExportRestorePending and Ready=False/ExportRestorePending" % label,
              bool(pending) and ready[:2] == ("False", "ExportRestorePending"),
              "ExportsReady=%s Ready=%s" % (exports_ready(env), ready))
    rep.check("%s: the agent's restore gate is still closed meanwhile (HealthCheck "
              "export_restore_pending)" % label, agent_gate_closed(env), "")
    fwd.release()
    ok = wait_for(lambda: exports_ready(env)[:2] == ("True", "ExportsServing"), 20)
    rep.check("%s: after the restore ExportsReady=True/ExportsServing, Ready=True" % label,
              bool(ok) and cond(env.get("pa", AGENT), "Ready")[:2] == ("True", "AgentConnected"),
              exports_ready(env))
    rep.check("%s: exactly one complete ReconcileState for the restart" % label,
              len(fwd.complete) == n0 + 1, len(fwd.complete) - n0)
    return fwd.complete[n0] if len(fwd.complete) > n0 else None


def agent_gate_closed(env):
    """HealthCheck straight to the agent (not through the forwarder)."""
    ch = grpc.insecure_channel("127.0.0.1:%d" % env.agent_port)
    try:
        code, _, r = call(apbg.AgentServiceStub(ch).HealthCheck, apb.HealthCheckRequest(), 5)
        return code == OK and r.export_restore_pending
    finally:
        ch.close()


def edit_status(env, name, edit):
    """The hand edit of a PillarVolumeState's status as operations.md §9 does it: read the object
    (its uid and resourceVersion become preconditions), edit, apply the status subresource; a
    Conflict means the object changed meanwhile (the controller writes its conditions), so read
    it again.  Returns the last (rc, stdout, stderr)."""
    for _ in range(20):
        obj = env.get("pvst", name)
        edit(obj["status"])
        rc, out, err = env.apply(obj, "--subresource=status")
        if rc == 0 or "(Conflict)" not in err:
            return rc, out, err
        time.sleep(0.1)
    return rc, out, err


def restart_cases(env, fwd, kube, sc, name, nqn, ident, pid):
    avid = "%s/%s" % (POOL, name)
    before = export_view(env, nqn)
    gen = env.get("pvst", name)["status"]["publicationGeneration"]
    uid = env.get("pvst", name)["metadata"]["uid"]

    # 1. plain agent restart: the live tree is kept
    def restart():
        env.procs.stop("agent", signal.SIGKILL)
        env.start_agent()

    req = observe_restore(env, fwd, "agent restart", restart)
    if req:
        items = [(m.volume_id, m.fence.volume_uid, m.fence.generation,
                  [(e.export_params.nvmeof_tcp.bind_address, e.export_params.nvmeof_tcp.port,
                    e.acl_enabled, list(e.allowed_initiators)) for e in m.exports])
                 for m in req.volumes]
        rep.check("agent restart: the restore carries the volume's export: bind address, port, "
                  "ACL, node-b as the only initiator, fencing token (UID, generation)",
                  items == [(avid, uid, gen, [("127.0.0.1", 4420, True, [HOST_B])])], items)
    after = export_view(env, nqn)
    rep.check("agent restart: export kept with the same identity (uuid, nguid, serial) and ACL",
              after == before and after["uuid"] == ident["uuid"] and
              os.path.islink(port_link(env, nqn, pid)), (before, after))
    rep.check("agent restart: the volume shows ExportReconciled=True/Reconciled",
              wait_for(lambda: cond(env.get("pvst", name), "ExportReconciled")[:2] ==
                       ("True", "Reconciled"), 10) is not None, cond(env.get("pvst", name),
                                                                      "ExportReconciled"))

    # 2. a second volume whose exportSpec is removed by hand (operations.md §4: ExportSpecMissing
    #    arises only for records written by other software or edited by hand)
    pvc2 = kube.claim("data2", "32Mi")
    name2 = "pvc-%s" % pvc2["metadata"]["uid"]
    avid2 = "%s/%s" % (POOL, name2)
    nqn2 = nqn_of(avid2)
    code, msg, _, pv2, _ = kube.provision(sc, pvc2)
    rep.check("CreateVolume of a second volume", code == OK and export_view(env, nqn2)["exists"],
              "%s %s" % (code, msg))
    saved_spec = dict(env.get("pvst", name2)["status"]["exportSpec"])
    rc, out, err = edit_status(env, name2, lambda st: st.pop("exportSpec"))
    rep.check("apply --subresource=status removes status.exportSpec of the second volume",
              rc == 0 and "exportSpec" not in env.get("pvst", name2)["status"], out + err)
    ok = wait_for(lambda: cond(env.get("pvst", name2), "ExportReconciled")[:2] ==
                  ("False", "ExportSpecMissing"), 10)
    rep.check("the hand-edited volume ends at ExportReconciled=False/ExportSpecMissing",
              ok is not None and cond(env.get("pvst", name2), "ExportReconciled")[:2] ==
              ("False", "ExportSpecMissing"), cond(env.get("pvst", name2), "ExportReconciled"))

    # 3. storage-node reboot: the kernel target is empty when the agent starts again
    def reboot():
        env.procs.stop("agent", signal.SIGKILL)
        for d in ("subsystems", "ports", "hosts"):
            shutil.rmtree(os.path.join(env.nvmet, d))
            os.mkdir(os.path.join(env.nvmet, d))
        env.start_agent()

    req = observe_restore(env, fwd, "storage-node reboot", reboot)
    if req:
        rep.check("storage-node reboot: the restore carries the first volume and leaves out the "
                  "one without exportSpec", [m.volume_id for m in req.volumes] == [avid],
                  [m.volume_id for m in req.volumes])
    after = export_view(env, nqn)
    rep.check("storage-node reboot: export re-created with the same identity, ACL (node-b) and "
              "port link", after == before and host_link_ok(env, nqn, HOST_B) and
              os.path.islink(port_link(env, nqn, pid)), (before, after))
    rep.check("storage-node reboot: the volume without exportSpec is not exported and stays at "
              "ExportSpecMissing", not os.path.exists(env.sub(nqn2)) and
              cond(env.get("pvst", name2), "ExportReconciled")[:2] ==
              ("False", "ExportSpecMissing"), cond(env.get("pvst", name2), "ExportReconciled"))
    t1 = time.monotonic()  # one more periodic resync pass (every 1 s) must not export it either

    def resynced():
        with fwd.lock:
            return any(s >= t1 for s, _ in fwd.recon_ok)
    passed = wait_for(resynced, 10)
    rep.check("a periodic resync pass does not export it either",
              passed and not os.path.exists(env.sub(nqn2)),
              "no resync pass within 10 s" if not passed else "exported")

    # 4. the repair of operations.md §9: the operator supplies exportSpec once
    rc, out, err = edit_status(env, name2, lambda st: st.update(exportSpec=saved_spec))
    ok = wait_for(lambda: cond(env.get("pvst", name2), "ExportReconciled")[:2] ==
                  ("True", "Reconciled"), 10)
    x2 = export_view(env, nqn2)
    rep.check("repair (operations.md §9): after exportSpec is supplied the volume is re-exported "
              "with its derived identity and shows Reconciled",
              rc == 0 and ok is not None and x2["exists"] and x2["enable"] == "1" and
              x2["uuid"] == identity_of(nqn2)["uuid"] and x2["hosts"] == [],
              "%s %s %s" % (out + err, cond(env.get("pvst", name2), "ExportReconciled"), x2))
    return pv2


def main():
    base = sys.argv[1]
    os.makedirs(base, exist_ok=True)

    def on_term(signum, frame):
        raise SystemExit(130)

    signal.signal(signal.SIGTERM, on_term)
    t0 = time.monotonic()
    try:
        run(base)
    except Exception as e:  # a crash of the suite is a failure, not a pass
        import traceback
        traceback.print_exc()
        rep.check("suite ran to the end", False, repr(e))
    print("(%.1f s)" % (time.monotonic() - t0))
    print("(controller suite: %d passed, %d failed)" % (rep.passed, rep.failed))


if __name__ == "__main__":
    main()
