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

  bench.py DIR      env BENCH_ROUNDS (3), BENCH_PER_CALLER (10), BENCH_FSYNC_N (50)
"""
import importlib.util
import os
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


def fsyncs(b, cr, callers=1):
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
        print("fsyncs per CreateVolume (%s): n/a (perf cannot count here)" % what)
        return
    total = ctl[1] + agent[1]
    print("fsyncs per CreateVolume (%s): controller %.2f, agent %.2f, total "
          "%.2f (goal <= 4: %s); store writes %.2f, syscalls controller %.0f, agent %.0f" % (
              what, ctl[1], agent[1], total, "met" if total <= 4 else "NOT met",
              work["writes"], ctl[0], agent[0]), flush=True)


def latencies(b, cr):
    configs = [(n, w) for n in CALLERS for w in (False, True)]
    got = {c: {"p50": [], "p99": [], "load": 0.0} for c in configs}
    for rnd in range(ROUNDS):
        order = configs if rnd % 2 == 0 else list(reversed(configs))
        for n, writer in order:
            wp = None
            if writer:
                wp = subprocess.Popen([sys.executable, "-c", WRITER,
                                       os.path.join(b.env.base, "writer.data")])
                time.sleep(0.5)
            try:
                lat = cr.run(n, max(PER_CALLER, 40 // n))
            finally:
                if wp:
                    wp.send_signal(signal.SIGKILL)
                    wp.wait()
            g = got[(n, writer)]
            g["p50"].append(statistics.median(lat))
            g["p99"].append(cb.pct(lat, 99))
            g["load"] = os.getloadavg()[0]
    for n, writer in configs:
        g = got[(n, writer)]
        goal = ""
        if n == 1 and writer:
            p50 = statistics.median(g["p50"])
            goal = "; goal p50 <= 5 ms: %s" % ("met" if p50 <= 5 else "NOT met")
        print("CreateVolume at %2d concurrent caller%s, %s disk writer: p50 %s  p99 %s  (%d "
              "rounds, load average %.1f%s)" % (n, " " if n == 1 else "s",
                                                "with a   " if writer else "without a",
                                                cb.fig(g["p50"], " ms"), cb.fig(g["p99"], " ms"),
                                                ROUNDS, g["load"], goal), flush=True)


def main():
    base = sys.argv[1]
    os.makedirs(base, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(130)))
    t0 = time.monotonic()
    b = cb.Bench(base)
    try:
        b.start()
        cr = Creator(b)
        cr.run(1, 5)  # warm: the first create of a process opens what later ones reuse
        fsyncs(b, cr)
        fsyncs(b, cr, 16)  # group commit: concurrent creates share directory fsyncs
        latencies(b, cr)
    finally:
        b.env.procs.stop_all()
        if b.cfs != b.disk_cfs:
            cb.shutil.rmtree(b.cfs, ignore_errors=True)
    print("(create bench: %.0f s, %d volumes; load average %.1f %.1f %.1f)" % (
        (time.monotonic() - t0, cr.n) + os.getloadavg()))


if __name__ == "__main__":
    main()
