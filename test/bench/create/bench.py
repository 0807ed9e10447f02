#!/usr/bin/python3
"""CreateVolume durability cost (issue 30) on loopback: `pillar-csi agent` on a fake configfs
root (on a tmpfs, as the kernel's configfs is in memory) with a `file` backend, `pillar-csi
controller` on the embedded store, both with their state (store, fencing marks, backend files)
on this directory's disk; a grpcio CSI client builds every CreateVolume as csi-provisioner does
(test/interop/lib/sidecars.py).  The set-up is test/bench/controller's.

  fsyncs per CreateVolume: fsync + fdatasync + syncfs system calls of the controller and of the
    agent (perf stat on the syscall tracepoints, "n/a" where perf cannot count) over FSYNC_N sequential
    creates, and over FSYNC_N creates by 16 concurrent callers (where group commit shares
    directory fsyncs), counted until the store has been quiet for half a second (work a create starts, such
    as the resync it queues, counts as its own);
  CreateVolume p50 and p99 at 1, 4 and 16 concurrent callers (each making PER_CALLER creates per
    round, at least 40 in all), without and with a disk writer: another process rewriting a 16 MiB file in this
    directory in 64 KiB writes, each followed by fdatasync, as fast as the disk takes them.  The
    six configurations run in ROUNDS alternating rounds; each figure is the median (min–max) of
    the rounds' values, with the load average at the end of its rounds.  The two goals of issue
    30 are marked met or NOT met: fsyncs per sequential create (controller + agent) <= 4, and
    p50 at 1 caller with the disk writer <= 5 ms.

  flush time per sequential CreateVolume, without and with the disk writer: the time the
    controller's and the agent's fsync, fdatasync and syncfs calls took (strace -T on those calls
    alone; "n/a" without strace) over FSYNC_N sequential creates: the part of a create's
    latency that waits for the disk, serial at one caller, which no CPU work saved takes off
    (strace attached to a running process stops it at every call, so these creates are slow
    and their latency is not given; each call's own time is what its -T shows);
  With BENCH_BASE naming a second pillar-csi binary (e.g. main's build copied aside), its agent
  and controller run beside ours (each pair with its own state under DIR/ours and DIR/base, on
  the same disk): every fsync count is made for both, and in every round each configuration runs
  on both in alternating order (the disk writer, when there is one, runs through both); each
  figure is given for both, with the ratio ours/base of the rounds' p50: an A/B of two builds
  under the same load.

  bench.py DIR      env BENCH_ROUNDS (3), BENCH_PER_CALLER (10), BENCH_FSYNC_N (50), BENCH_BASE
"""
import importlib.util
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "controller_bench", os.path.join(HERE, "..", "controller", "bench.py"))
cb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cb)
cs, k8s, csi, call, OK = cb.cs, cb.k8s, cb.csi, cb.call, cb.OK

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PER_CALLER = int(os.environ.get("BENCH_PER_CALLER", "10"))
FSYNC_N = int(os.environ.get("BENCH_FSYNC_N", "50"))
BASE = os.environ.get("BENCH_BASE")
CALLERS = (1, 4, 16)

WRITER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
buf, i = b"\x5a" * 65536, 0
while True:
    os.pwrite(fd, buf, (i % 256) * 65536)
    os.fdatasync(fd)
    i += 1
"""


class Creator:
    """CreateVolume calls as csi-provisioner makes them, from any number of threads."""

    def __init__(self, b):
        self.b, self.lock, self.n = b, threading.Lock(), 0

    def one(self):
        with self.lock:
            self.n += 1
            n = self.n
        pvc = {"metadata": {"name": "c-%d" % n, "namespace": "default",
                            "uid": str(uuid.uuid4())},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
                   "storage": "1Mi"}}, "storageClassName": cs.PSC}}
        req = k8s.create_volume(csi, self.b.caps, self.b.sc, pvc, cs.CLUSTER)
        t = time.monotonic()
        code, msg, _ = call(self.b.ctl.CreateVolume, req, timeout=120)
        dt = (time.monotonic() - t) * 1000
        if code != OK:
            raise SystemExit("CreateVolume: %s %s" % (code, msg))
        return dt

    def run(self, callers, each):
        """callers threads making each creates; every latency (ms)."""
        lat, errs = [], []

        def lane():
            try:
                for _ in range(each):
                    x = self.one()
                    with self.lock:
                        lat.append(x)
            except BaseException as e:  # noqa: B902 (reported below)
                errs.append(e)
        ts = [threading.Thread(target=lane) for _ in range(callers)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if errs:
            raise SystemExit("a caller failed: %s" % errs[0])
        return lat


def fsyncs(side, callers=1):
    b, cr = side.b, side.cr
    w = cb.Work(b, "create-fsync-%d" % callers)
    each = max(1, FSYNC_N // callers)
    if callers == 1:
        for _ in range(each):
            cr.one()
    else:
        cr.run(callers, each)
    n = each * callers
    work = w.done(n)
    ctl, agent = work["ctl"], work["agent"]
    what = "%d sequential creates" % n if callers == 1 else \
        "%d creates by %d concurrent callers" % (n, callers)
    if ctl is None or agent is None:
        print("%sfsyncs per CreateVolume (%s): n/a (perf cannot count here)" % (side.tag, what))
        return
    total = ctl[1] + agent[1]
    print("%sfsyncs per CreateVolume (%s): controller %.2f, agent %.2f, total "
          "%.2f (goal <= 4: %s); store writes %.2f, syscalls controller %.0f, agent %.0f" % (
              side.tag, what, ctl[1], agent[1], total, "met" if total <= 4 else "NOT met",
              work["writes"], ctl[0], agent[0]), flush=True)


STRACE = shutil.which("strace")


class FlushTime:
    """The time one process spends in fsync, fdatasync and syncfs until stop() (strace -T)."""

    def __init__(self, pid, path):
        self.path, self.p = path, None
        if STRACE:
            self.p = subprocess.Popen([STRACE, "-f", "-T", "-e",
                                       "trace=fsync,fdatasync,syncfs", "-o", path, "-p",
                                       str(pid)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # attached

    def stop(self):
        """Milliseconds in those calls, or None when they could not be timed."""
        if not self.p:
            return None
        self.p.send_signal(signal.SIGINT)
        self.p.wait()
        try:
            with open(self.path) as f:
                return sum(float(x) for x in re.findall(r"<([0-9.]+)>$", f.read(), re.M)) * 1000
        except OSError:
            return None


def flushes(sides):
    """Flush time per sequential create, without and with the disk writer (see the module
    text), the sides in alternating order."""
    for writer in (False, True):
        wp = None
        if writer:
            wp = subprocess.Popen([sys.executable, "-c", WRITER,
                                   os.path.join(sides[0].b.env.base, "writer.data")])
            time.sleep(0.5)
        try:
            for side in (sides if not writer else list(reversed(sides))):
                b = side.b
                b.quiet(0.5)
                base = os.path.join(b.env.base, "flush-%d" % writer)
                ctl = FlushTime(b.ctl_pid, base + "-ctl.strace")
                agent = FlushTime(b.env.procs.live["agent"].pid, base + "-agent.strace")
                for _ in range(FSYNC_N):
                    side.cr.one()
                c, a = ctl.stop(), agent.stop()
                ms = lambda x: "n/a" if x is None else "%.2f ms" % (x / FSYNC_N)  # noqa: E731
                total = "n/a" if c is None or a is None else ms(c + a)
                print("%sflush time per sequential CreateVolume, %s disk writer: controller %s, "
                      "agent %s, total %s (load average %.1f)" % (
                          side.tag, "with a   " if writer else "without a", ms(c), ms(a), total,
                          os.getloadavg()[0]), flush=True)
        finally:
            if wp:
                wp.send_signal(signal.SIGKILL)
                wp.wait()


def latencies(sides):
    configs = [(n, w) for n in CALLERS for w in (False, True)]
    got = {(c, s.tag): {"p50": [], "p99": []} for c in configs for s in sides}
    loads = {c: [] for c in configs}
    for rnd in range(ROUNDS):
        order = configs if rnd % 2 == 0 else list(reversed(configs))
        for n, writer in order:
            wp = None
            if writer:
                wp = subprocess.Popen([sys.executable, "-c", WRITER,
                                       os.path.join(sides[0].b.env.base, "writer.data")])
                time.sleep(0.5)
            try:
                for side in (sides if rnd % 2 == 0 else list(reversed(sides))):
                    lat = side.cr.run(n, max(PER_CALLER, 40 // n))
                    g = got[((n, writer), side.tag)]
                    g["p50"].append(statistics.median(lat))
                    g["p99"].append(cb.pct(lat, 99))
            finally:
                if wp:
                    wp.send_signal(signal.SIGKILL)
                    wp.wait()
            loads[(n, writer)].append(os.getloadavg()[0])
    for n, writer in configs:
        for side in sides:
            g = got[((n, writer), side.tag)]
            goal = ""
            if n == 1 and writer and side is sides[0]:
                p50 = statistics.median(g["p50"])
                goal = "; goal p50 <= 5 ms: %s" % ("met" if p50 <= 5 else "NOT met")
            print("%sCreateVolume at %2d concurrent caller%s, %s disk writer: p50 %s  p99 %s  "
                  "(%d rounds, load average %s%s)" % (
                      side.tag, n, " " if n == 1 else "s",
                      "with a   " if writer else "without a", cb.fig(g["p50"], " ms"),
                      cb.fig(g["p99"], " ms"), ROUNDS, cb.fig(loads[(n, writer)], fmt="%.1f"),
                      goal), flush=True)
        if len(sides) == 2:
            a, z = (got[((n, writer), s.tag)] for s in sides)
            print("  ours/base p50 per round: %s; p99: %s" % (
                cb.fig([x / y for x, y in zip(a["p50"], z["p50"])], "x"),
                cb.fig([x / y for x, y in zip(a["p99"], z["p99"])], "x")), flush=True)


class Side:
    """One build's agent and controller (cb.Bench) and its CreateVolume caller."""
    procs = []  # every side's cs.Procs: R/pids lists the processes of all of them

    def __init__(self, base, tag, binary):
        self.tag = tag and "[%s] " % tag
        cs.BIN = cs.AGENT_BIN = binary  # read when a process starts (and by the CLI)
        self.b = cb.Bench(base)
        self.binary = binary
        Side.procs.append(self.b.env.procs)
        pids = os.path.join(sys.argv[1], "pids")

        def write():
            with open(pids, "w") as f:
                f.write(" ".join(str(p.pid) for ps in Side.procs for p in ps.live.values()))
        self.b.env.procs._write = write
        self.b.start()
        self.cr = Creator(self.b)

    def stop(self):
        self.b.env.procs.stop_all()
        if self.b.cfs != self.b.disk_cfs:
            cb.shutil.rmtree(self.b.cfs, ignore_errors=True)


def main():
    base = sys.argv[1]
    os.makedirs(base, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(130)))
    t0 = time.monotonic()
    ours = cs.BIN
    sides = []
    try:
        if BASE:
            print("A/B: ours %s, base %s" % (ours, BASE), flush=True)
            sides.append(Side(os.path.join(base, "ours"), "ours", ours))
            sides.append(Side(os.path.join(base, "base"), "base", BASE))
        else:
            sides.append(Side(base, "", ours))
        for side in sides:
            cs.BIN = cs.AGENT_BIN = side.binary
            side.cr.run(1, 5)  # warm: the first create of a process opens what later ones reuse
        for side in sides:
            cs.BIN = cs.AGENT_BIN = side.binary
            fsyncs(side)
            fsyncs(side, 16)  # group commit: concurrent creates share directory fsyncs
        flushes(sides)
        latencies(sides)
    finally:
        for side in sides:
            side.stop()
    print("(create bench: %.0f s, %d volumes; load average %.1f %.1f %.1f)" % (
        (time.monotonic() - t0, sum(s.cr.n for s in sides)) + os.getloadavg()))


if __name__ == "__main__":
    main()
