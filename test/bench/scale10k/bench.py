#!/usr/bin/python3
"""10,000 volumes over 10 agents (issue 30), on loopback: AGENTS `pillar-csi agent`s, each on its
own fake configfs root (on a tmpfs when there is one, as the kernel's configfs lives in memory)
with a `file` backend, and one `pillar-csi controller` with its default reconcile interval, on
the embedded store or (BENCH_STORE=kube) on the API server: `--store=kube` against the test API
server on a real etcd (test/kube/), its client limits raised to BENCH_KUBE_QPS requests/s
(default 1000; the request budget, not the controller, would otherwise set the pace, see
docs/capacity.md), the API requests counted by the server's request log; every volume created through CSI (csi-provisioner's CreateVolume, 4 in
flight), PER_AGENT volumes on each agent.  Then:
  create    wall time of all creates, creates per second, CreateVolume p50/p99;
  restart   the controller stopped (SIGTERM) and started again: seconds from its start to a ready
            CSI Probe and to the end of its first reconcile pass (its log's "first reconcile
            pass done": every watched kind listed and every key those lists queued reconciled,
            the agents' restores included); "ready" is the later of the two (goal <= 2 s); then
            to the store being quiet (every resync and its writes done), its peak RSS (VmHWM)
            and resident memory then (ROUNDS restarts: median and min–max); on the kube store
            also the API requests of a restart by verb (watches included);
  reboot    one storage node rebooted (its agent killed, its configfs emptied, the agent started
            again), REBOOTS times: seconds from the agent's port accepting to its PillarAgent
            showing ExportsReady=True/ExportsServing again (goal <= 3 s in every round), the
            store writes of it, and its steps (REBOOT_STEPS: the agent listening, the
            controller's probe noticing it, the restore request, the agent's restore, the
            response, the status) timed from the agent's and the controller's logs; with
            BENCH_OLD_BIN (a copy of the old build) each round reboots once with each binary,
            old first (the controller restarted with it and the agent started with it), and
            each binary's median and min–max are printed;
  RSS       the controller's resident memory at rest, its peak over each restart and over the
            reboot's restore; at 1,000 volumes against issue 30's bound (<= 16 MiB after a
            restart or reload), which names no figure for other sizes;
  Events    on the kube store, the controller's Events created and patched (the request log)
            and dropped (its log) after each phase and after the reboot.
The creates and restarts are made at 1,000 volumes first, then at all of them.

  bench.py DIR      env BENCH_AGENTS (default 10), BENCH_PER_AGENT (default 1000), BENCH_STORE
                    (dir or kube; default dir), BENCH_KUBE_QPS (default 1000), BENCH_RESTARTS
                    (default 3), BENCH_REBOOTS (default 3), BENCH_OLD_BIN (default: none),
                    BENCH_RESYNC (the controller's periodic resync interval, default 30s),
                    BENCH_REBOOT_AT_RESYNC=1 (each reboot's agent killed RESYNC_LEAD before
                    the controller's periodic resync of the next agent is due: the restore
                    meets that agent's whole-list resync, the most it can meet since the
                    periodic pass spreads the agents' resyncs over the interval)
"""
import importlib.util
import os
import re
import shutil
import signal
import statistics
import sys
import threading
import time
import uuid
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "interop", "controller"))
import bench as cb  # noqa: E402  the controller benchmark: RSS, CPU, percentiles
import controller_suite as cs  # noqa: E402
from controller_suite import OK, apb, apbg, call, cond, csi, csig, k8s  # noqa: E402

AGENTS = int(os.environ.get("BENCH_AGENTS", "10"))
PER_AGENT = int(os.environ.get("BENCH_PER_AGENT", "1000"))
STORE = os.environ.get("BENCH_STORE", "dir")
KUBE_QPS = int(os.environ.get("BENCH_KUBE_QPS", "1000"))
RESTARTS = int(os.environ.get("BENCH_RESTARTS", "3"))
REBOOTS = int(os.environ.get("BENCH_REBOOTS", "3"))
OLD = os.environ.get("BENCH_OLD_BIN")
RESYNC = os.environ.get("BENCH_RESYNC", "30s")  # the controller's PILLAR_RECONCILE_INTERVAL
AT_RESYNC = os.environ.get("BENCH_REBOOT_AT_RESYNC") == "1"
# seconds from the kill to the next agent's resync (BENCH_REBOOT_AT_RESYNC): the rebooted agent's
# restore request leaves about that long after the kill (the agent's start and the controller's
# probe), so that both run at once
RESYNC_LEAD = 0.2


def seconds(duration):
    """A Go-style duration of the controller's flags ("30s", "500ms", "1m") in seconds."""
    for unit, f in (("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
        if duration.endswith(unit) and duration[:-len(unit)].replace(".", "", 1).isdigit():
            return float(duration[:-len(unit)]) * f
    raise SystemExit("BENCH_RESYNC: %r is not a duration" % duration)
IN_FLIGHT = 4
OBJECT_WRITES = ("create", "update", "patch", "delete")


def kube_bench():
    """The kube-store benchmark's module (its request log's verbs), loaded under its own name."""
    spec = importlib.util.spec_from_file_location(
        "kube_store_bench", os.path.join(HERE, "..", "kube-store", "bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class RequestLog:
    """The test API server's request log (PILLAR_KUBE_REQUEST_LOG), read as it grows:
    (method, path) of every request, watches included."""

    def __init__(self, path):
        self.path, self.offset, self.rows, self.kb = path, 0, [], kube_bench()
        self.counted = self.writes = 0

    def read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return self.rows
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        self.offset += end
        for line in data[:end].decode(errors="replace").splitlines():
            r = line.split(" ", 2)
            if len(r) == 3:
                self.rows.append((r[1], r[2]))
        return self.rows

    def object_writes(self):
        """Writes of objects so far (Events and Leases left out): the store's writes."""
        self.read()
        for m, p in self.rows[self.counted:]:
            if self.kb.verb(m, p) in OBJECT_WRITES and "/events" not in p and "/leases" not in p:
                self.writes += 1
        self.counted = len(self.rows)
        return self.writes


def fake_root(base):
    """Where the agents' fake configfs roots go: a tmpfs when there is one."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.statvfs(shm).f_bavail * os.statvfs(shm).f_frsize >= 1 << 28:
        return os.path.join(shm, "pillar-scale10k-%d" % os.getpid())
    return os.path.join(base, "cfs")


class Agent:
    def __init__(self, base, cfs_base, i, procs):
        self.i, self.procs, self.name = i, procs, "storage-%d" % i
        d = os.path.join(base, "agent-%d" % i)
        self.cfs, self.state = os.path.join(cfs_base, "a%d" % i), os.path.join(d, "state")
        self.nvmet = os.path.join(self.cfs, "nvmet")
        files, host = os.path.join(d, "files"), os.path.join(d, "host")
        for x in (files, self.state, os.path.join(host, "sys/module/nvmet_tcp")):
            os.makedirs(x, exist_ok=True)
        self.wipe()
        self.config = os.path.join(d, "agent.json")
        with open(self.config, "w") as f:
            f.write('{"backends": [{"file": {"pool": "%s", "directory": "%s"}}]}' % (
                cs.POOL, files))
        self.port = cs.free_port()
        self.host, self.starts = host, 0

    def wipe(self):
        for x in ("subsystems", "ports", "hosts"):
            shutil.rmtree(os.path.join(self.nvmet, x), ignore_errors=True)
            os.makedirs(os.path.join(self.nvmet, x))

    def start(self):
        self.starts += 1
        args = [cs.AGENT_BIN, "agent", "--listen-address=127.0.0.1:%d" % self.port,
                "--config=" + self.config, "--configfs-root=" + self.cfs,
                "--state-dir=" + self.state, "--host-root=" + self.host,
                "--shutdown-grace-period=0s"]
        for _ in range(50):  # the port of a killed agent may linger briefly
            p = self.procs.start(self.name, args, log=os.path.join(
                os.path.dirname(self.state), "agent-%d.log" % self.starts))
            if cs.wait_for(lambda: cs.Env._connects(self.port) or p.poll() is not None, 10):
                if p.poll() is None:
                    return True
            self.procs.stop(self.name, signal.SIGKILL)
            time.sleep(0.1)
        return False

    def objects(self):
        meta = lambda n: {"name": n}  # noqa: E731
        return [
            {"apiVersion": cs.GROUP, "kind": "PillarAgent", "metadata": meta(self.name),
             "spec": {"external": {"address": "127.0.0.1", "port": self.port}}},
            {"apiVersion": cs.GROUP, "kind": "PillarStore", "metadata": meta("files-%d" % self.i),
             "spec": {"agentRef": self.name, "backend": {"file": {"pool": cs.POOL}}}},
            {"apiVersion": cs.GROUP, "kind": "PillarStorageClass",
             "metadata": meta("fast-%d" % self.i),
             "spec": {"storeRef": "files-%d" % self.i, "protocolRef": cs.PROTO}}]


def cpu_seconds(pid):
    """User and system CPU seconds a process has used so far (its threads' included)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Scale:
    def __init__(self, base):
        self.env = cs.Env(base)
        self.cfs_base = fake_root(base)
        self.agents = [Agent(base, self.cfs_base, i, self.env.procs) for i in range(AGENTS)]
        self.top = 0
        self.cluster = self.log = None
        if STORE == "kube":
            sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
            from cluster import Cluster
            path = os.path.join(base, "requests.log")
            os.environ["PILLAR_KUBE_REQUEST_LOG"] = path  # read by the test API server
            # etcd's data beside the fake configfs roots (a tmpfs when there is one): etcd's
            # fsync per write on this shared disk would set the pace, not the controller
            kube = os.path.join(self.cfs_base, "kube")
            os.makedirs(kube, exist_ok=True)
            self.cluster = Cluster(directory=kube)
            self.env.kubeconfig = self.cluster.__enter__().kubeconfig
            self.log = RequestLog(path)

    def close(self):
        self.env.procs.stop_all()
        if self.cluster:
            self.cluster.__exit__(None, None, None)

    def log_size(self):
        try:
            return os.path.getsize(os.path.join(self.env.base, "controller.log"))
        except OSError:
            return 0

    def first_pass_done(self, offset):
        """The controller's log shows the end of its first reconcile pass after offset."""
        try:
            with open(os.path.join(self.env.base, "controller.log"), "rb") as f:
                f.seek(offset)
                return b"first reconcile pass done" in f.read()
        except OSError:
            return False

    def start_controller(self, first_pass=False):
        """Seconds to a ready CSI Probe (and, with first_pass, to the end of the first
        reconcile pass: (probe, first pass))."""
        env = self.env
        offset = self.ctl_offset = self.log_size()
        if os.path.exists(env.sock):
            os.unlink(env.sock)
        limits = ["--kube-api-qps=%d" % KUBE_QPS, "--kube-api-burst=%d" % KUBE_QPS]
        p = env.procs.start("controller", [cs.BIN, "controller", "--csi-endpoint=unix://" + env.sock,
                                           *env.store_args(), *(limits if self.log else []),
                                           "--health-probe-bind-address=127.0.0.1:0",
                                           "--metrics-bind-address=127.0.0.1:0"],
                            env=dict(os.environ, PILLAR_RECONCILE_INTERVAL=RESYNC))
        t0 = self.started = time.monotonic()
        if not cs.wait_for(lambda: self.probe_ready() or p.poll() is not None, 120) or p.poll():
            raise SystemExit("the controller did not become ready")
        self.pid = p.pid
        probe = time.monotonic() - t0
        if not first_pass:
            return probe
        if not cs.wait_for(lambda: self.first_pass_done(offset) or p.poll() is not None, 120,
                           step=0.02) or p.poll():
            raise SystemExit("the controller's first reconcile pass did not end in 120 s")
        self.cpu_first = cpu_seconds(p.pid)
        return probe, time.monotonic() - t0

    def probe_ready(self):
        try:
            ch = cs.grpc.insecure_channel("unix://" + self.env.sock)
            r = csig.IdentityStub(ch).Probe(csi.ProbeRequest(), timeout=2)
            ch.close()
            return r.ready.value
        except cs.grpc.RpcError:
            return False

    def pa(self, name):
        return self.env.get("pa", name) or {}

    def serving(self, name):
        return cond(self.pa(name), "ExportsReady")[:2] == ("True", "ExportsServing")

    def setup(self):
        for a in self.agents:
            if not a.start():
                raise SystemExit("agent %s did not start" % a.name)
        self.start_controller()
        objs = [{"apiVersion": cs.GROUP, "kind": "PillarProtocol", "metadata": {"name": cs.PROTO},
                 "spec": {"protocol": {"nvmeofTcp": {"port": 4420, "acl": True}}}}]
        for a in self.agents:
            objs += a.objects()
        rc, out, err = self.env.apply(objs + cs.CLUSTER["csinodes"])
        if rc != 0:
            raise SystemExit("apply: " + out + err)
        for a in self.agents:
            if not cs.wait_for(lambda: self.serving(a.name) and self.env.get(
                    "sc", "fast-%d" % a.i), 120):
                raise SystemExit("%s never reached ExportsServing" % a.name)
        ch = cs.grpc.insecure_channel("unix://" + self.env.sock)
        self.ctl = csig.ControllerStub(ch)
        self.caps = k8s.Caps(csi, csig.IdentityStub(ch), self.ctl)
        self.scs = [self.env.get("sc", "fast-%d" % a.i) for a in self.agents]

    def create_all(self, first, end):
        """Volumes first..end-1 through CSI; (seconds, latencies in ms)."""
        lat, lock = [], threading.Lock()

        def one(k):
            sc = self.scs[k % AGENTS]
            pvc = {"metadata": {"name": "s-%d" % k, "namespace": "default",
                                "uid": str(uuid.uuid4())},
                   "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
                       "storage": "1Mi"}}, "storageClassName": sc["metadata"]["name"]}}
            req = k8s.create_volume(csi, self.caps, sc, pvc, cs.CLUSTER)
            t = time.monotonic()
            code, msg, _ = call(self.ctl.CreateVolume, req, timeout=120)
            dt = (time.monotonic() - t) * 1000
            if code != OK:
                raise SystemExit("CreateVolume: %s %s" % (code, msg))
            with lock:
                lat.append(dt)
        t0 = time.monotonic()
        with futures.ThreadPoolExecutor(IN_FLIGHT) as ex:
            list(ex.map(one, range(first, end)))
        return time.monotonic() - t0, lat

    def events(self):
        """(created, patched, dropped): the controller's Events so far, written as the API
        server's request log shows them, dropped as the controller's log tells them."""
        rows = self.log.read() if self.log else []
        ev = [m for m, p in rows if "/events" in p.split("?", 1)[0] and "watch=" not in p]
        dropped = 0
        try:
            with open(os.path.join(self.env.base, "controller.log"), errors="replace") as f:
                for line in f:
                    if "event dropped" in line:  # one line per Event dropped
                        dropped += 1
                    elif "events dropped while the queue was full" in line:  # one per burst
                        dropped += int(line.rsplit('dropped="', 1)[1].split('"', 1)[0])
        except (OSError, ValueError, IndexError):
            pass
        return ev.count("POST"), ev.count("PATCH"), dropped

    def store_rv(self):
        """The store's version: on the kube store the count of object writes so far."""
        if self.log:
            return self.log.object_writes()
        try:
            with open(os.path.join(self.env.store, ".oplock")) as f:
                return int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            return 0

    def quiet(self, secs=2.0, limit=300):
        """Seconds until the store's version has not moved for secs (that wait excluded)."""
        t0 = time.monotonic()
        rv, since = self.store_rv(), time.monotonic()
        while time.monotonic() - t0 < limit:
            time.sleep(0.1)
            v = self.store_rv()
            if v != rv:
                rv, since = v, time.monotonic()
            elif time.monotonic() - since >= secs:
                break
        return since - t0

    def restart(self, stopped=None):
        """One restart: a dict of its figures (seconds, MiB, store writes, API requests);
        stopped() runs while no controller does."""
        self.env.procs.stop("controller")
        if stopped:
            stopped()
        rv0 = self.store_rv()
        mark = len(self.log.read()) if self.log else 0
        probe, first = self.start_controller(first_pass=True)
        rss = cb.RssMax(self.pid).start()
        settled = first + self.quiet()
        top = rss.stop() / 1024
        reqs = self.log.read()[mark:] if self.log else []
        return {"probe": probe, "first": first, "ready": max(probe, first), "settled": settled,
                "cpu": self.cpu_first,
                "hwm": cb.proc_rss_kib(self.pid, "VmHWM") / 1024, "top": top,
                "after": cb.proc_rss_kib(self.pid) / 1024, "writes": self.store_rv() - rv0,
                "requests": len(reqs), "verbs": self.log.kb.by_verb(reqs) if self.log else "",
                "load": os.getloadavg()[0]}

    def wait_for_resync(self, a):
        """Sleeps until RESYNC_LEAD before the controller's next periodic resync of the agent
        after a: the periodic pass (its loop's start, from its log, plus a whole number of
        intervals; at least a second from now) queues agent i of n (in name order, as it lists
        them) i/n of the interval later (controller/loop.c periodic)."""
        start = [t for t, msg, _ in klog_lines(os.path.join(self.env.base, "controller.log"),
                                               self.ctl_offset)
                 if msg.startswith("controller loop started")]
        if not start:
            raise SystemExit("the controller's log shows no loop start")
        names = sorted(o.name for o in self.agents)
        slot = (names.index(a.name) + 1) % len(names)
        period, now = seconds(RESYNC), time.time()
        offset = period * slot / len(names) - RESYNC_LEAD
        k = int((now + 1 - start[0] - offset) / period) + 1
        time.sleep(max(0.0, start[0] + k * period + offset - now))

    def gate_open(self, stub):
        """The agent's restore gate is open: the controller's complete ReconcileState went
        through (HealthCheck straight to the agent, on one channel for the whole wait: a new
        channel per poll would cost the machine more CPU than the restore it waits for)."""
        try:
            return not stub.HealthCheck(apb.HealthCheckRequest(), timeout=2).export_restore_pending
        except cs.grpc.RpcError:
            return False

    def reboot(self, a):
        """One reboot of a: a dict of its figures (seconds, store writes, exports before and
        after) and its steps (REBOOT_STEPS, seconds from the agent's start)."""
        self.quiet(1)
        before = len(os.listdir(os.path.join(a.nvmet, "subsystems")))
        rv0 = self.store_rv()
        pa_rv0 = self.pa(a.name).get("metadata", {}).get("resourceVersion")
        with open("/proc/%d/clear_refs" % self.pid, "w") as f:
            f.write("5")  # VmHWM from here: the peak of the reboot's restore (proc(5))
        if AT_RESYNC:  # the worst case: the restore meets another agent's whole-list resync
            self.wait_for_resync(a)
        coffset = self.log_size()
        self.env.procs.stop(a.name, signal.SIGKILL)
        a.wipe()
        spawn = time.time()
        if not a.start():
            raise SystemExit("agent %s did not restart" % a.name)
        accept = time.time()
        t0 = time.monotonic()
        ch = cs.grpc.insecure_channel("127.0.0.1:%d" % a.port)
        stub = apbg.AgentServiceStub(ch)
        if not cs.wait_for(lambda: self.gate_open(stub), 300, step=0.02):
            raise SystemExit("%s's restore gate stayed closed for 300 s" % a.name)
        gate = time.monotonic() - t0
        ch.close()
        if not cs.wait_for(lambda: self.pa(a.name).get("metadata", {}).get(
                "resourceVersion") != pa_rv0 and self.serving(a.name), 300, step=0.02):
            raise SystemExit("no ExportsServing within 300 s of %s's restart" % a.name)
        secs = time.monotonic() - t0
        steps = {"accept": accept - spawn, "gate": gate + accept - spawn,
                 "serving": secs + accept - spawn}
        steps.update(reboot_steps(a, os.path.join(self.env.base, "controller.log"), coffset,
                                  spawn))
        others = [o for o in self.agents if o is not a]
        busy = others_busy(others, spawn, spawn + steps["serving"])
        self.quiet(1)
        after = len(os.listdir(os.path.join(a.nvmet, "subsystems")))
        return {"gate": gate, "secs": secs, "writes": self.store_rv() - rv0, "before": before,
                "after": after, "steps": steps, "busy": busy,
                "rss": cb.proc_rss_kib(self.pid) / 1024,
                "hwm": cb.proc_rss_kib(self.pid, "VmHWM") / 1024, "load": os.getloadavg()[0]}


KLOG = re.compile(r'^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) +\d+ [\w.]+:\d+\] '
                  r'(?:"([^"]*)"(.*)|(.*))$')  # a structured line's message is quoted
KV = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def klog_lines(path, offset=0):
    """(wall-clock time, message, {key: value}) of each klog line of path after byte offset;
    klog's time is local time without a year: this year's."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    year, out = time.localtime().tm_year, []
    for line in text.splitlines():
        m = KLOG.match(line)
        if m:
            mo, d, hh, mm, ss, us = (int(x) for x in m.groups()[:6])
            t = time.mktime((year, mo, d, hh, mm, ss, 0, 0, -1)) + us / 1e6
            if m.group(7) is None:
                out.append((t, m.group(9), {}))
            else:
                out.append((t, m.group(7), dict(KV.findall(m.group(8)))))
    return out


# The steps of a reboot, in the order they happen, each as seconds from the agent's start (its
# process spawned on an emptied configfs tree):
REBOOT_STEPS = (
    ("listen", "agent serving (its log)"),
    ("accept", "its port accepts (seen by the bench)"),
    ("noticed", "the controller's probe sees it gated (its log)"),
    ("sent", "the restore request goes out (controller log)"),
    ("begin", "the agent starts the restore (its log)"),
    ("end", "the agent's restore done (its log)"),
    ("returned", "the controller has the response (its log)"),
    ("gate", "the restore gate open (seen by the bench)"),
    ("serving", "ExportsServing (seen by the bench)"),
)


def reboot_steps(a, clog, coffset, spawn):
    """The steps the agent's and the controller's logs show (REBOOT_STEPS), seconds from spawn;
    a step its log does not show is left out."""
    steps = {}
    for t, msg, kv in klog_lines(os.path.join(os.path.dirname(a.state), "agent-%d.log" % a.starts)):
        if msg == "agent serving" and "listen" not in steps:
            steps["listen"] = t - spawn
        elif msg == "ReconcileState done" and kv.get("complete") == "true" and "end" not in steps:
            steps["end"] = t - spawn
            steps["begin"] = steps["end"] - float(kv.get("seconds", "0"))
    for t, msg, kv in klog_lines(clog, coffset):
        if t < spawn or kv.get("agent") != a.name:
            continue
        if msg == "agent probe state changed" and kv.get("to") != "unreachable" and \
                "noticed" not in steps:
            steps["noticed"] = t - spawn
        elif msg == "restoring the exports of an agent" and "sent" not in steps:
            steps["sent"] = t - spawn
        elif msg == "exports restored" and "returned" not in steps:
            steps["returned"] = t - spawn
    return steps


def others_busy(agents, t0, t1):
    """(ReconcileStates, volumes, seconds) of the other agents that ran between t0 and t1 (the
    controller's periodic resyncs: each agent's whole list every 30 s), seconds counted inside
    that window only: the CPU the rebooted agent's restore had to share."""
    n = vols = 0
    secs = 0.0
    for o in agents:
        for t, msg, kv in klog_lines(os.path.join(os.path.dirname(o.state),
                                                  "agent-%d.log" % o.starts)):
            if msg != "ReconcileState done":
                continue
            begin = t - float(kv.get("seconds", "0"))
            if t >= t0 and begin <= t1:
                n += 1
                vols += int(kv.get("volumes", "0"))
                secs += min(t, t1) - max(begin, t0)
    return n, vols, secs


def steps_text(steps):
    return ", ".join("%s %.2f" % (k, steps[k]) for k, _ in REBOOT_STEPS if k in steps)


def phase(s, first, n):
    """Creates volumes first..n-1, then restarts the controller RESTARTS times with n volumes."""
    secs, lat = s.create_all(first, n)
    print("create: %d volumes through CSI in %.1f s (%.0f/s, %d in flight), %d in all; "
          "CreateVolume p50 %.2f ms p99 %.2f ms; load average %.2f" % (
              len(lat), secs, len(lat) / secs, IN_FLIGHT, n, statistics.median(lat),
              cb.pct(lat, 99), os.getloadavg()[0]), flush=True)
    s.quiet()
    rest = [cb.proc_rss_kib(s.pid) / 1024]
    time.sleep(2)
    rest.append(cb.proc_rss_kib(s.pid) / 1024)
    print("controller at rest with %d volumes: RSS %.1f MiB (peak since its start %.1f MiB)" % (
        n, max(rest), cb.proc_rss_kib(s.pid, "VmHWM") / 1024), flush=True)
    s.log and print("Events so far: %d created, %d patched, %d dropped" % s.events(), flush=True)
    rounds = []
    for i in range(RESTARTS):
        r = s.restart()
        rounds.append(r)
        print("restart %d with %d volumes: ready %.2f s after the start (goal <= 2 s: %s): CSI "
              "Probe ready %.2f s, first reconcile pass done %.2f s; store quiet (resyncs done) "
              "after %.2f s, %d store writes; peak RSS %.1f MiB (VmHWM; sampled max %.1f), %.1f "
              "MiB once quiet%s; load average %.2f" % (
                  i + 1, n, r["ready"], "met" if r["ready"] <= 2 else "NOT met", r["probe"],
                  r["first"], r["settled"], r["writes"], r["hwm"], r["top"], r["after"],
                  "; %d API requests (%s)" % (r["requests"], r["verbs"]) if s.log else "",
                  r["load"]), flush=True)
    col = lambda key: [r[key] for r in rounds]  # noqa: E731
    rounds and print(
        "restart with %d volumes, %d rounds on the %s store: ready %s (goal <= 2 s: %s); peak "
        "RSS %s%s; %s API requests; load average %s" % (
            n, len(rounds), STORE, cb.fig(col("ready"), " s"),
            "met" if max(col("ready")) <= 2 else "NOT met", cb.fig(col("hwm"), " MiB", "%.1f"),
            # the bound is for 1,000 volumes; at other sizes there is none to meet
            " (issue 30's goal at 1,000 volumes, <= 16 MiB after a restart: %s)"
            % ("met" if max(col("hwm")) <= 16 else "NOT met") if n == 1000 else "",
            cb.fig(col("requests"), "", "%.0f") if s.log else "no", cb.fig(col("load"))),
        flush=True)


def reboots(s):
    """REBOOTS rounds, each rebooting the first agent once with each binary (BENCH_OLD_BIN
    first, when set, then PILLAR_BIN; the controller restarted with that binary before, the
    agent started with it), then each binary's median and min–max."""
    a = s.agents[0]
    bins = [("old", OLD), ("new", cs.BIN)] if OLD else [("new", cs.BIN)]
    results = {name: [] for name, _ in bins}
    for i in range(REBOOTS):
        for name, b in bins:
            if OLD:
                cs.BIN = cs.AGENT_BIN = b
                s.restart()
            r = s.reboot(a)
            results[name].append(r)
            print("reboot %d %s of %s (%d of its %d exports restored): agent port accepts -> "
                  "restore gate open %.2f s, -> ExportsServing %.2f s (goal <= 3 s: %s); %d "
                  "store writes; controller RSS %.1f MiB, peak over the reboot's restore %.1f "
                  "MiB; load average %.2f\n  steps, seconds from the agent's start: %s\n  "
                  "meanwhile the other agents ran %d ReconcileStates (%d volumes) for %.2f s" % ((
                      i + 1, name, a.name, r["after"], r["before"], r["gate"], r["secs"],
                      "met" if r["secs"] <= 3 else "NOT met", r["writes"], r["rss"], r["hwm"],
                      r["load"], steps_text(r["steps"])) + r["busy"]), flush=True)
            if r["before"] != PER_AGENT or r["after"] != PER_AGENT:
                raise SystemExit("the rebooted agent served %d exports before and %d after, "
                                 "not %d" % (r["before"], r["after"], PER_AGENT))
    for name, _ in bins:
        rs = results[name]
        col = lambda key: [r[key] for r in rs]  # noqa: E731
        print("reboot with %d volumes (%d on the agent), %s binary, %d rounds on the %s store: "
              "agent port accepts -> ExportsServing %s (goal <= 3 s in every round: %s); agent "
              "start -> ExportsServing %s; peak RSS %s; load average %s" % (
                  AGENTS * PER_AGENT, PER_AGENT, name, len(rs), STORE, cb.fig(col("secs"), " s"),
                  "met" if max(col("secs")) <= 3 else "NOT met",
                  cb.fig([r["steps"]["serving"] for r in rs], " s"),
                  cb.fig(col("hwm"), " MiB", "%.1f"), cb.fig(col("load"))), flush=True)
        for key, what in REBOOT_STEPS:
            xs = [r["steps"][key] for r in rs if key in r["steps"]]
            xs and print("  %-9s %s: %s" % (key, what, cb.fig(xs, " s")), flush=True)
        print("  meanwhile the other agents' ReconcileStates ran for %s" % cb.fig(
            [r["busy"][2] for r in rs], " s"), flush=True)
    s.log and print("Events so far: %d created, %d patched, %d dropped" % s.events(), flush=True)


def run(base):
    s = Scale(base)
    try:
        print("%d agents x %d volumes; fake configfs roots in %s, %s" % (
            AGENTS, PER_AGENT, s.cfs_base, "the kube store (test API server on etcd, client "
            "limits %d/s)" % KUBE_QPS if s.log else "embedded store in " + s.env.store), flush=True)
        s.setup()
        total = AGENTS * PER_AGENT
        done = 0
        for n in sorted({min(1000, total), total}):  # issue 30's memory goal is at 1,000
            phase(s, done, n)
            done = n
        reboots(s)
    finally:
        s.close()
        if s.cfs_base.startswith("/dev/shm/"):
            shutil.rmtree(s.cfs_base, ignore_errors=True)


def main():
    base = sys.argv[1]
    os.makedirs(base, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(130)))
    t0 = time.monotonic()
    run(base)
    print("(scale10k bench: %.0f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
