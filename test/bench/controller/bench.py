#!/usr/bin/python3
"""Controller scale benchmark (issue 14) on loopback: `pillar-csi agent` on a fake configfs root
with a `file` backend, `pillar-csi controller` on the embedded store with its default reconcile
interval, and a grpcio CSI client building every call as the sidecars do (test/interop/lib).

For each N (volumes in the store, grown in one run so the growth with N is visible):
  - CreateVolume / ControllerPublishVolume / ControllerUnpublishVolume latency (p50, p99) of the
    calls that brought the store to N (the last SAMPLE creates), in three batches;
  - CreateSnapshot (csi-snapshotter's request) of SAMPLE of the N volumes, then CreateVolume
    from each of those snapshots (csi-provisioner's request with the dataSource): p50 and p99,
    with the work per call; the snapshots and restored volumes are deleted afterwards so that
    N stays N;
  - controller RSS (sampled after each of three idle windows; and its maximum sampled every 20 ms
    through the idle windows, and through the reboots and the outage below, which is what a user
    sees: not a trimmed best case) and idle CPU (percent of one core over each idle window of
    IDLE_S seconds, at least one whole resync period, nothing happening), with the load average;
  - three storage-node reboots (agent killed, fake nvmet tree emptied, agent started again):
      accept→serving  the agent's port accepts again → the agent's restore gate is open, i.e. the
                      controller's one complete ReconcileState went through (HealthCheck straight
                      to the agent, export_restore_pending false);
      accept→ExportsServing  → the PillarAgent shows ExportsReady=True/ExportsServing again;
      controller CPU and store writes (resourceVersion delta) from the kill until the store has
      been quiet for a second after ExportsServing;
  - an unreachable agent (killed, not restarted) for DOWN_S seconds: store writes per minute,
    controller CPU percent, RSS growth, and the store writes of the whole outage from the kill
    (its state change included; goal of issue 30: at most 5 whatever N).
Every figure of three is printed as "median (min–max)".

Latencies on a loaded machine are noisy, so each sampled CSI call and each reboot also prints its
work, which the load does not change: store writes (resourceVersion delta), syscalls and fsyncs
(fsync, fdatasync and syncfs calls) of the controller and of the agent (counted by `perf stat`
on the syscall tracepoints; "n/a" where perf cannot count), controller and agent CPU time, and
agent RPCs by method (the agent's call log).
Work started by a call (the change-triggered resync, status writes) counts as that call's: each
phase is measured until the store has been quiet for half a second.

  bench.py DIR N1,N2,...      env BENCH_SAMPLE (default 100), BENCH_IDLE_S (10; raised to a
                              whole resync period, 31 s), BENCH_DOWN_S (45)
"""
import collections
import json
import os
import re
import socket
import subprocess
import urllib.request
import shutil
import signal
import statistics
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "interop", "controller"))
import controller_suite as cs  # noqa: E402
from controller_suite import OK, call, cond, csi, csig, apb, apbg, grpc, k8s  # noqa: E402

SAMPLE = int(os.environ.get("BENCH_SAMPLE", "100"))
IDLE_S = float(os.environ.get("BENCH_IDLE_S", "10"))
DOWN_S = float(os.environ.get("BENCH_DOWN_S", "45"))
TICK = os.sysconf("SC_CLK_TCK")
RESYNC_S = 30  # the controller's periodic resync (reconcile.h RECONCILE_INTERVAL_MS, the default)
IDLE_WINDOW = max(IDLE_S, RESYNC_S + 1)  # an idle window holds a whole resync period


def proc_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


def proc_run_s(pid):
    """CPU time of pid's live threads (the agent's fixed pool), from schedstat: nanoseconds,
    where /proc/PID/stat counts 10 ms ticks (about one agent create each)."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except OSError:  # the thread ended
            pass
    return total / 1e9


def proc_rss_kib(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class RssMax:
    """The largest RSS of a process sampled every 20 ms between start() and stop() (KiB)."""

    def __init__(self, pid):
        self.pid, self.top, self.on = pid, 0, False
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while self.on:
            try:
                self.top = max(self.top, proc_rss_kib(self.pid))
            except OSError:
                return
            time.sleep(0.02)

    def start(self):
        self.on = True
        self.t.start()
        return self

    def stop(self):
        self.on = False
        self.t.join()
        return self.top


PERF_EVENTS = ("raw_syscalls:sys_enter", "syscalls:sys_enter_fsync",
               "syscalls:sys_enter_fdatasync", "syscalls:sys_enter_syncfs")


def perf_works():
    try:
        return subprocess.run(["perf", "stat", "-x,", "-e", ",".join(PERF_EVENTS), "true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


PERF = perf_works()
CALL_RE = re.compile(r'"GRPC call" method="/[^"]*/([A-Za-z]+)"')


class PerfCount:
    """perf stat on one process: its syscalls and fsyncs (+ fdatasyncs, syncfs) until stop()."""

    def __init__(self, pid, path):
        self.path, self.p = path, None
        if PERF:
            self.p = subprocess.Popen(["perf", "stat", "-x,", "-o", path, "-e",
                                       ",".join(PERF_EVENTS), "-p", str(pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)  # attached

    def stop(self):
        """(syscalls, fsyncs), or None when perf could not count."""
        if not self.p:
            return None
        self.p.send_signal(signal.SIGINT)
        self.p.wait()
        counts = {}
        with open(self.path) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[2] in PERF_EVENTS and parts[0].isdigit():
                    counts[parts[2]] = int(parts[0])
        if len(counts) != len(PERF_EVENTS):
            return None
        return counts[PERF_EVENTS[0]], sum(counts[e] for e in PERF_EVENTS[1:])


class Work:
    """The work of one phase (see the module text), per operation."""

    def __init__(self, bench, name):
        self.b, env = bench, bench.env
        bench.quiet(0.5)
        self.log = os.path.join(env.base, "agent-%d.log" % env.agent_starts)
        self.log_at = os.path.getsize(self.log)
        self.agent_pid = env.procs.live["agent"].pid
        self.rv, self.cpu = bench.store_rv(), proc_cpu_s(bench.ctl_pid)
        self.agent_cpu = proc_run_s(self.agent_pid)
        self.ctl = PerfCount(bench.ctl_pid, os.path.join(env.base, name + "-ctl.perf"))
        self.agent = PerfCount(self.agent_pid, os.path.join(env.base, name + "-agent.perf"))

    def done(self, ops):
        """Stops counting (after the store has been quiet for 0.5 s); a dict of per-op figures."""
        rv = self.b.quiet(0.5)
        ctl, agent = self.ctl.stop(), self.agent.stop()
        calls = collections.Counter()
        with open(self.log, errors="replace") as f:
            f.seek(self.log_at)
            for line in f:
                m = CALL_RE.search(line)
                if m and m.group(1) != "HealthCheck":  # agentmon's probes: time, not work
                    calls[m.group(1)] += 1
        per = lambda x: x / ops  # noqa: E731
        return {"writes": per(rv - self.rv),
                "cpu_ms": per(1000 * (proc_cpu_s(self.b.ctl_pid) - self.cpu)),
                "agent_cpu_ms": per(1000 * (proc_run_s(self.agent_pid) - self.agent_cpu)),
                "ctl": ctl and (per(ctl[0]), per(ctl[1])),
                "agent": agent and (per(agent[0]), per(agent[1])),
                "rpcs": {k: per(v) for k, v in sorted(calls.items())}}


def work_text(w):
    """One line of a phase's work per operation."""
    sc = lambda x: "n/a" if x is None else "%.0f syscalls, %.1f fsyncs" % x  # noqa: E731
    rpcs = ", ".join("%s %.2f" % kv for kv in w["rpcs"].items()) or "none"
    return ("%.2f store writes, controller %s, %.2f ms CPU; agent %s, %.2f ms CPU; "
            "agent RPCs: %s" % (w["writes"], sc(w["ctl"]), w["cpu_ms"], sc(w["agent"]),
                                w["agent_cpu_ms"], rpcs))


def fig(xs, unit="", fmt="%.2f"):
    if not xs:
        return "n/a"
    return ("%s%s (%s–%s)" % (fmt % statistics.median(xs), unit, fmt % min(xs),
                              fmt % max(xs)))


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def ram_configfs(env):
    """The fake configfs on a tmpfs (/dev/shm) when there is one: the kernel's configfs lives in
    memory, while on a disk file system emptying and refilling tens of thousands of entries
    (every reboot here) measures the disk file system instead — on this machine's ext4 without a
    journal each new inode then scans the recently deleted ones (ext4's recently_deleted), 9.7–18
    s for 1,000 exports against 0.3–0.7 s for 100.  Returns where it is."""
    shm = "/dev/shm"
    if not os.path.isdir(shm) or os.statvfs(shm).f_bavail * os.statvfs(shm).f_frsize < 1 << 28:
        return env.cfs
    root = os.path.join(shm, "pillar-bench-%d-%s" % (os.getpid(), os.path.basename(env.base)))
    shutil.rmtree(root, ignore_errors=True)
    for d in ("subsystems", "ports", "hosts"):
        os.makedirs(os.path.join(root, "nvmet", d))
    env.cfs, env.nvmet = root, os.path.join(root, "nvmet")  # the agent's --configfs-root
    return root


class Bench:
    def __init__(self, base):
        self.env = cs.Env(base)
        self.disk_cfs = self.env.cfs
        self.cfs = ram_configfs(self.env)
        self.n = 0
        self.pvs = []

    def scrape_ms(self, rounds=20):
        """Milliseconds per GET /metrics of the controller (each a new connection, as Prometheus'
        scrapes are after an idle interval), over rounds scrapes: median, min, max; and the
        body's size."""
        times, size = [], 0
        for _ in range(rounds):
            t0 = time.perf_counter()
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=30) as r:
                size = len(r.read())
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times), min(times), max(times), size

    def start(self):
        env = self.env
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.metrics_port = s.getsockname()[1]
        s.close()
        if not env.start_agent():
            raise SystemExit("agent did not start")
        p = env.procs.start("controller", [cs.BIN, "controller", "--csi-endpoint=unix://" + env.sock,
                                           "--store=dir:" + env.store,
                                           "--health-probe-bind-address=127.0.0.1:0",
                                           "--metrics-bind-address=127.0.0.1:%d" % self.metrics_port])
        if not cs.wait_for(lambda: os.path.exists(env.sock) or p.poll() is not None, 60):
            raise SystemExit("controller did not start")
        self.ctl_pid = p.pid
        rc, out, err = env.apply(cs.objects(env.agent_port))
        if rc != 0:
            raise SystemExit("apply: " + out + err)
        if not cs.wait_for(lambda: cond(env.get("pa", cs.AGENT), "ExportsReady")[:2] ==
                           ("True", "ExportsServing"), 60):
            raise SystemExit("the PillarAgent never reached ExportsServing")
        if not cs.wait_for(lambda: env.get("sc", cs.PSC), 60):
            raise SystemExit("no generated StorageClass")
        self.sc = env.get("sc", cs.PSC)
        ch = grpc.insecure_channel("unix://" + env.sock)
        self.ctl = csig.ControllerStub(ch)
        self.caps = k8s.Caps(csi, csig.IdentityStub(ch), self.ctl)
        self.agent = apbg.AgentServiceStub(grpc.insecure_channel("127.0.0.1:%d" % env.agent_port))

    # ---- CSI ----
    def create(self):
        uid = str(uuid.uuid4())
        pvc = {"metadata": {"name": "b-%d" % self.n, "namespace": "default", "uid": uid},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
                   "storage": "1Mi"}}, "storageClassName": cs.PSC}}
        req = k8s.create_volume(csi, self.caps, self.sc, pvc, cs.CLUSTER)
        t = time.monotonic()
        code, msg, r = call(self.ctl.CreateVolume, req)
        dt = time.monotonic() - t
        if code != OK:
            raise SystemExit("CreateVolume: %s %s" % (code, msg))
        self.n += 1
        self.pvs.append(k8s.pv_of(self.sc, pvc, req, r))
        return dt

    def grow(self, n):
        """Creates volumes up to n; latencies (ms) of the last SAMPLE creates, then of SAMPLE
        publish and unpublish calls on the newest volumes, and the work of each of the three."""
        while self.n < n - SAMPLE:
            self.create()
        lat, pub, unpub = [], [], []
        w = Work(self, "create-%d" % n)
        k = n - self.n
        while self.n < n:
            lat.append(self.create() * 1000)
        work = {"create": w.done(k)}
        w = Work(self, "publish-%d" % n)
        for pv in self.pvs[-SAMPLE:]:
            t = time.monotonic()
            code, msg, _ = call(self.ctl.ControllerPublishVolume,
                                k8s.attach(csi, self.caps, pv, "node-a", cs.CLUSTER))
            pub.append((time.monotonic() - t) * 1000)
            if code != OK:
                raise SystemExit("ControllerPublishVolume: %s %s" % (code, msg))
        work["publish"] = w.done(len(pub))
        w = Work(self, "unpublish-%d" % n)
        for pv in self.pvs[-SAMPLE:]:
            t = time.monotonic()
            code, msg, _ = call(self.ctl.ControllerUnpublishVolume,
                                k8s.detach(csi, pv, "node-a", cs.CLUSTER))
            unpub.append((time.monotonic() - t) * 1000)
            if code != OK:
                raise SystemExit("ControllerUnpublishVolume: %s %s" % (code, msg))
        work["unpublish"] = w.done(len(unpub))
        snap, restore = self.snapshots(n, work)
        return lat, pub, unpub, work, snap, restore

    def snapshots(self, n, work):
        """CreateSnapshot of the newest SAMPLE volumes, CreateVolume from each snapshot (ms
        each); then both deleted again."""
        cls = {"metadata": {"name": "bench"}, "driver": k8s.DRIVER, "parameters": {}}
        snap, restore, made, restored = [], [], [], []
        w = Work(self, "snapshot-%d" % n)
        for pv in self.pvs[-SAMPLE:]:
            uid = str(uuid.uuid4())
            content = {"metadata": {"name": "snapcontent-" + uid}, "spec": {
                "source": {"volumeHandle": pv["spec"]["csi"]["volumeHandle"]},
                "volumeSnapshotRef": {"name": "vs", "namespace": "default", "uid": uid}}}
            req = k8s.create_snapshot(csi, cls, content)
            t = time.monotonic()
            code, msg, r = call(self.ctl.CreateSnapshot, req)
            snap.append((time.monotonic() - t) * 1000)
            if code != OK:
                raise SystemExit("CreateSnapshot: %s %s" % (code, msg))
            content["status"] = {"snapshotHandle": r.snapshot.snapshot_id}
            made.append(content)
        work["snapshot"] = w.done(len(snap))
        w = Work(self, "restore-%d" % n)
        for i, content in enumerate(made):
            pvc = {"metadata": {"name": "r-%d" % i, "namespace": "default",
                                "uid": str(uuid.uuid4())},
                   "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
                       "storage": "1Mi"}}, "storageClassName": cs.PSC,
                       "dataSource": {"kind": "VolumeSnapshot", "name": "vs"}}}
            vs = {"metadata": {"name": "vs"}, "status": {
                "boundVolumeSnapshotContentName": content["metadata"]["name"],
                "readyToUse": True, "restoreSize": "1Mi"}}
            req = k8s.content_source(csi, k8s.create_volume(csi, self.caps, self.sc, pvc,
                                                            cs.CLUSTER), pvc, vs, content)
            t = time.monotonic()
            code, msg, r = call(self.ctl.CreateVolume, req)
            restore.append((time.monotonic() - t) * 1000)
            if code != OK:
                raise SystemExit("CreateVolume from a snapshot: %s %s" % (code, msg))
            restored.append(k8s.pv_of(self.sc, pvc, req, r))
        work["restore"] = w.done(len(restore))
        for pv in restored:
            call(self.ctl.DeleteVolume, k8s.delete_volume(csi, pv))
        for content in made:
            call(self.ctl.DeleteSnapshot, k8s.delete_snapshot(csi, content))
        self.quiet()
        return snap, restore

    # ---- observation ----
    def store_rv(self):
        """The embedded store's resourceVersion (one per write): the last issued version in
        .oplock ("<boot ID> <last> <ceiling>", src/store/dir.c; resourceversion holds only the
        ceiling), else the newest resourceVersion of any PillarAgent or PillarVolumeState."""
        try:
            with open(os.path.join(self.env.store, ".oplock")) as f:
                return int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            pass
        rv = 0
        for kind in ("pa", "pvst"):
            rc, out, _ = self.env.cli("get", kind, "-o", "json")
            for i in json.loads(out).get("items", []) if rc == 0 else []:
                rv = max(rv, int(i["metadata"]["resourceVersion"]))
        return rv

    def pa(self):
        return self.env.get("pa", cs.AGENT) or {}

    def gate_open(self):
        try:
            r = self.agent.HealthCheck(apb.HealthCheckRequest(), timeout=2)
            return not r.export_restore_pending
        except grpc.RpcError:
            return False

    def quiet(self, secs=1.0, limit=60):
        """Waits until the store's resourceVersion has not moved for secs; returns it."""
        deadline = time.monotonic() + limit
        rv, since = self.store_rv(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.2)
            v = self.store_rv()
            if v != rv:
                rv, since = v, time.monotonic()
            elif time.monotonic() - since >= secs:
                break
        return rv

    def idle(self):
        self.quiet(2)
        c0, t0 = proc_cpu_s(self.ctl_pid), time.monotonic()
        time.sleep(IDLE_WINDOW)
        return 100 * (proc_cpu_s(self.ctl_pid) - c0) / (time.monotonic() - t0)

    def kill_agent(self, wipe):
        env = self.env
        env.procs.stop("agent", signal.SIGKILL)
        if wipe:
            for d in ("subsystems", "ports", "hosts"):
                shutil.rmtree(os.path.join(env.nvmet, d))
                os.mkdir(os.path.join(env.nvmet, d))

    def reboot(self):
        """One storage-node reboot; (accept→serving s, accept→ExportsServing s, CPU s, writes)."""
        rv0 = self.quiet(1)
        pa_rv0 = self.pa()["metadata"]["resourceVersion"]
        c0 = proc_cpu_s(self.ctl_pid)
        pc = PerfCount(self.ctl_pid, os.path.join(self.env.base, "reboot-ctl.perf"))
        self.kill_agent(True)
        if not self.env.start_agent():
            raise SystemExit("agent did not restart")
        t_accept = time.monotonic()
        t_gate = t_serving = None
        deadline = t_accept + 180
        while time.monotonic() < deadline and t_serving is None:
            if t_gate is None and self.gate_open():
                t_gate = time.monotonic()
            if t_gate is not None:
                pa = self.pa()
                if (pa.get("metadata", {}).get("resourceVersion") != pa_rv0 and
                        cond(pa, "ExportsReady")[:2] == ("True", "ExportsServing")):
                    t_serving = time.monotonic()
            time.sleep(0.02)
        if t_serving is None:
            raise SystemExit("no ExportsServing within 180 s of the agent's restart")
        rv1 = self.quiet(1)
        cpu = proc_cpu_s(self.ctl_pid) - c0
        return t_gate - t_accept, t_serving - t_accept, cpu, rv1 - rv0, pc.stop()

    def unreachable(self):
        """The agent down for DOWN_S: (store writes/min, controller CPU %, RSS growth KiB, store
        writes of the whole outage from the kill, its state change included)."""
        rv_kill = self.quiet(1)
        self.kill_agent(False)
        time.sleep(2)  # the controller notices; its first writes are the state change
        rv0, c0, m0, t0 = self.store_rv(), proc_cpu_s(self.ctl_pid), proc_rss_kib(
            self.ctl_pid), time.monotonic()
        time.sleep(DOWN_S)
        dt = time.monotonic() - t0
        out = ((self.store_rv() - rv0) * 60 / dt, 100 * (proc_cpu_s(self.ctl_pid) - c0) / dt,
               proc_rss_kib(self.ctl_pid) - m0, self.store_rv() - rv_kill)
        if not self.env.start_agent():
            raise SystemExit("agent did not restart")
        if not cs.wait_for(lambda: self.gate_open(), 180):
            raise SystemExit("the agent's gate stayed closed after the outage")
        return out


def run(base, ns):
    b = Bench(base)
    try:
        print("fake configfs in %s, store in %s" % (b.cfs, b.env.store))
        b.start()
        rows = {}
        for n in ns:
            lat, pub, unpub, work, snap, restore = b.grow(n)
            scrape = b.scrape_ms()
            print("N=%d: GET /metrics of the controller %.1f ms median (%.1f–%.1f) over 20 scrapes, "
                  "%d bytes" % ((n,) + scrape), flush=True)
            k = len(lat) // 3 or 1
            batches = [lat[i * k:(i + 1) * k] for i in range(3)] if len(lat) >= 3 else [lat]
            idle, rss_s = [], []
            top = RssMax(b.ctl_pid).start()
            for _ in range(3):  # resident memory sampled after each idle window
                idle.append(b.idle())
                rss_s.append(proc_rss_kib(b.ctl_pid) / 1024)
            idle_top = top.stop() / 1024
            rss, load = statistics.median(rss_s), os.getloadavg()[0]
            top = RssMax(b.ctl_pid).start()
            reb = [b.reboot() for _ in range(3)]
            down = b.unreachable()
            time.sleep(1)
            after_top = top.stop() / 1024
            r = rows[n] = {
                "create_p50": [statistics.median(x) for x in batches],
                "create_p99": [pct(x, 99) for x in batches],
                "pub_p50": statistics.median(pub), "unpub_p50": statistics.median(unpub),
                "idle": idle, "rss": rss, "rss_idle_top": idle_top, "rss_after_top": after_top,
                "rss_after": proc_rss_kib(b.ctl_pid) / 1024,
                "gate": [x[0] for x in reb], "serving": [x[1] for x in reb],
                "cpu": [x[2] for x in reb], "writes": [x[3] for x in reb], "down": down,
                "work": work}
            sysc = [x[4] for x in reb if x[4]]
            print("N=%d volumes (load average %.1f %.1f %.1f)" % ((n,) + os.getloadavg()))
            print("  CreateVolume p50 %s  p99 %s  (last %d creates, 3 batches)" % (
                fig(r["create_p50"], " ms"), fig(r["create_p99"], " ms"), len(lat)))
            print("  ControllerPublishVolume p50 %.2f ms, ControllerUnpublishVolume p50 %.2f ms"
                  % (r["pub_p50"], r["unpub_p50"]))
            print("  CreateSnapshot p50 %.2f ms p99 %.2f ms, CreateVolume from a snapshot p50 "
                  "%.2f ms p99 %.2f ms (%d each; CreateVolume p50 %.2f ms in the same run)" % (
                      statistics.median(snap), pct(snap, 99), statistics.median(restore),
                      pct(restore, 99), len(snap), statistics.median(lat)))
            for op in ("create", "publish", "unpublish", "snapshot", "restore"):
                print("  work per %s: %s" % (op, work_text(work[op])))
            print("  controller RSS %s after idle windows, at most %.1f MiB during them; at most "
                  "%.1f MiB during and after 3 reboots and an outage (%.1f MiB at the end, peak "
                  "of the run %.1f MiB); load average %.2f" % (
                      fig(rss_s, " MiB", "%.1f"), r["rss_idle_top"], r["rss_after_top"],
                      r["rss_after"], proc_rss_kib(b.ctl_pid, "VmHWM") / 1024, load))
            print("  controller idle CPU %s of a core (3 windows of %.0f s, each a whole %d s "
                  "resync period)" % (fig(idle, " %", "%.3f"), IDLE_WINDOW, RESYNC_S))
            print("  reboot: agent port accepts → agent serving (gate open) %s" % fig(
                r["gate"], " s"))
            print("  reboot: agent port accepts → PillarAgent ExportsServing %s" % fig(
                r["serving"], " s"))
            print("  reboot: controller CPU %s, store writes %s (%.2f per volume)" % (
                fig(r["cpu"], " s"), fig(r["writes"], "", "%d"),
                statistics.median(r["writes"]) / n))
            print("  reboot: controller syscalls %s, fsyncs %s" % (
                fig([x[0] for x in sysc], "", "%d"), fig([x[1] for x in sysc], "", "%d")))
            print("  agent unreachable %d s: %.1f store writes/min, controller CPU %.2f %%, "
                  "RSS growth %d KiB" % (DOWN_S, down[0], down[1], down[2]))
            print("  storage-node outage: %d store writes from the kill through %d s down "
                  "(goal <= 5 whatever N: %s)" % (down[3], DOWN_S,
                                                  "met" if down[3] <= 5 else "NOT met"))
            sys.stdout.flush()
        if len(ns) > 1:
            a, z = rows[ns[0]], rows[ns[-1]]
            ratio = lambda x, y: x / y if y else 0  # noqa: E731
            print("growth N=%d vs N=%d: CreateVolume p50 %.2fx, Publish p50 %.2fx, Unpublish "
                  "p50 %.2fx, reboot→ExportsServing %.2fx, writes per volume %.2fx, RSS %.2fx" % (
                      ns[-1], ns[0], ratio(statistics.median(z["create_p50"]),
                                           statistics.median(a["create_p50"])),
                      ratio(z["pub_p50"], a["pub_p50"]), ratio(z["unpub_p50"], a["unpub_p50"]),
                      ratio(statistics.median(z["serving"]), statistics.median(a["serving"])),
                      ratio(statistics.median(z["writes"]) / ns[-1],
                            statistics.median(a["writes"]) / ns[0]),
                      ratio(z["rss"], a["rss"])))
            for op in ("create", "publish", "unpublish"):
                wa, wz = a["work"][op], z["work"][op]
                print("growth of the work per %s N=%d vs N=%d: store writes %.2fx, controller "
                      "CPU %.2fx, controller syscalls %s, agent RPCs %.2fx" % (
                          op, ns[-1], ns[0], ratio(wz["writes"], wa["writes"]),
                          ratio(wz["cpu_ms"], wa["cpu_ms"]),
                          "%.2fx" % ratio(wz["ctl"][0], wa["ctl"][0]) if wa["ctl"] and wz["ctl"]
                          else "n/a", ratio(sum(wz["rpcs"].values()), sum(wa["rpcs"].values()))))
    finally:
        b.env.procs.stop_all()
        if b.cfs != b.disk_cfs:
            shutil.rmtree(b.cfs, ignore_errors=True)


def main():
    base = sys.argv[1]
    ns = [int(x) for x in sys.argv[2].split(",")]
    os.makedirs(base, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(130)))
    t0 = time.monotonic()
    run(base, ns)
    print("(controller bench: %.0f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
