#!/usr/bin/python3
"""What metrics cost (issue 26), on loopback: `pillar-csi agent` on a fake configfs root with a
`file` backend, `pillar-csi controller` on the embedded store, a grpcio CSI client building every
call as csi-provisioner does (test/interop/lib/sidecars.py).

1. A CSI call with metrics on and off, in alternating rounds (ROUNDS each, default 3): each round
   restarts the agent and the controller, with --metrics-bind-address on loopback (on: every
   family recorded, /metrics of both scraped once a second, more often than Prometheus would) or
   0 (off: the roles record nothing, docs/metrics.md), then times CALLS pairs of CreateVolume +
   DeleteVolume.  Per round: the median latency of a pair and the controller's and agent's CPU
   time per pair; per mode: the median of the rounds and their min–max, with the load average.
2. GET /metrics of the controller with N volumes in the store (default 1000): the first scrape
   after a start (it decodes every PillarVolumeState), then SCRAPES scrapes with nothing changed
   (each decodes only what changed since the one before: nothing), and a scrape right after 10
   volumes were created (3 times); median (min–max) in milliseconds, and the body's size.

  metrics_bench.py DIR    env BENCH_METRICS_N (1000), BENCH_METRICS_ROUNDS (3) (0 leaves
                          that part out), BENCH_METRICS_CALLS (60), BENCH_METRICS_SCRAPES (20)
"""
import os
import socket
import statistics
import sys
import threading
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "interop", "controller"))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
import controller_suite as cs  # noqa: E402
from controller_suite import OK, apb, apbg, call, cond, csi, csig, grpc, k8s  # noqa: E402
from bench import fig, proc_run_s  # noqa: E402

N = int(os.environ.get("BENCH_METRICS_N", "1000"))
ROUNDS = int(os.environ.get("BENCH_METRICS_ROUNDS", "3"))
CALLS = int(os.environ.get("BENCH_METRICS_CALLS", "60"))
SCRAPES = int(os.environ.get("BENCH_METRICS_SCRAPES", "20"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get_ms(port):
    """One GET /metrics on a new connection: (milliseconds, body size)."""
    t0 = time.perf_counter()
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=60) as r:
        size = len(r.read())
    return (time.perf_counter() - t0) * 1000, size


class Scraper:
    """GET /metrics of each port once a second until stop()."""

    def __init__(self, ports):
        self.ports, self.on, self.n = ports, True, 0
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while self.on:
            for p in self.ports:
                try:
                    get_ms(p)
                    self.n += 1
                except OSError:
                    pass
            time.sleep(1)

    def stop(self):
        self.on = False
        self.t.join()
        return self.n


class Bench:
    def __init__(self, base):
        self.env = cs.Env(base)
        self.env.reconcile_interval = "30s"  # the controller's default resync
        self.n = 0
        self.ctl_port = self.agent_metrics = None

    def start(self, metrics, probe=True):
        """Agent and controller (again), metrics on or off; waits for the restore and
        ExportsServing; probe: GET both /metrics once (with metrics on)."""
        env = self.env
        env.procs.stop_all()
        self.ctl_port = free_port() if metrics else None
        self.agent_metrics = free_port() if metrics else None
        env.agent_starts += 1
        args = [cs.BIN, "agent", "--listen-address=127.0.0.1:%d" % env.agent_port,
                "--config=" + env.config, "--configfs-root=" + env.cfs,
                "--state-dir=" + env.state, "--host-root=" + os.path.join(env.base, "host"),
                "--shutdown-grace-period=0s",
                "--metrics-bind-address=" + ("127.0.0.1:%d" % self.agent_metrics if metrics
                                             else "0")]
        p = env.procs.start("agent", args,
                            log=os.path.join(env.base, "agent-%d.log" % env.agent_starts))
        if not cs.wait_for(lambda: env._connects(env.agent_port) or p.poll() is not None, 30) \
                or p.poll() is not None:
            raise SystemExit("agent did not start")
        if os.path.exists(env.sock):  # a killed controller's socket file stays
            os.unlink(env.sock)
        c = env.procs.start("controller", [
            cs.BIN, "controller", "--csi-endpoint=unix://" + env.sock, "--store=dir:" + env.store,
            "--health-probe-bind-address=127.0.0.1:0",
            "--metrics-bind-address=" + ("127.0.0.1:%d" % self.ctl_port if metrics else "0")],
            env=dict(os.environ, PILLAR_RECONCILE_INTERVAL=env.reconcile_interval))
        if not cs.wait_for(lambda: os.path.exists(env.sock) or c.poll() is not None, 60) \
                or c.poll() is not None:
            raise SystemExit("controller did not start")
        self.ctl_pid, self.agent_pid = c.pid, p.pid
        if not env.get("pa", cs.AGENT):
            rc, out, err = env.apply(cs.objects(env.agent_port))
            if rc != 0:
                raise SystemExit("apply: " + out + err)
        agent = apbg.AgentServiceStub(grpc.insecure_channel("127.0.0.1:%d" % env.agent_port))

        def gate_open():  # the controller's restore went through (the status may be older)
            try:
                return not agent.HealthCheck(apb.HealthCheckRequest(),
                                             timeout=2).export_restore_pending
            except grpc.RpcError:
                return False
        if not cs.wait_for(lambda: gate_open() and cond(env.get("pa", cs.AGENT), "ExportsReady")
                           [:2] == ("True", "ExportsServing") and env.get("sc", cs.PSC), 180):
            raise SystemExit("no restore, ExportsServing or StorageClass")
        self.sc = env.get("sc", cs.PSC)
        ch = grpc.insecure_channel("unix://" + env.sock)
        self.ctl = csig.ControllerStub(ch)
        self.caps = k8s.Caps(csi, csig.IdentityStub(ch), self.ctl)
        if metrics and probe:
            get_ms(self.ctl_port)
            get_ms(self.agent_metrics)

    def create(self):
        pvc = {"metadata": {"name": "m-%d" % self.n, "namespace": "default",
                            "uid": str(uuid.uuid4())},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
                   "storage": "1Mi"}}, "storageClassName": cs.PSC}}
        req = k8s.create_volume(csi, self.caps, self.sc, pvc, cs.CLUSTER)
        code, msg, r = call(self.ctl.CreateVolume, req)
        if code != OK:
            raise SystemExit("CreateVolume: %s %s" % (code, msg))
        self.n += 1
        return k8s.pv_of(self.sc, pvc, req, r)

    def pair(self):
        """CreateVolume then DeleteVolume of the same volume; milliseconds."""
        t0 = time.perf_counter()
        pv = self.create()
        code, msg, _ = call(self.ctl.DeleteVolume, k8s.delete_volume(csi, pv))
        if code != OK:
            raise SystemExit("DeleteVolume: %s %s" % (code, msg))
        return (time.perf_counter() - t0) * 1000

    def round(self, metrics):
        self.start(metrics)
        for _ in range(3):  # warm: connections, first label sets
            self.pair()
        scraper = Scraper([self.ctl_port, self.agent_metrics]) if metrics else None
        c0, a0 = proc_run_s(self.ctl_pid), proc_run_s(self.agent_pid)
        lat = [self.pair() for _ in range(CALLS)]
        cpu = 1000 * (proc_run_s(self.ctl_pid) - c0) / CALLS
        acpu = 1000 * (proc_run_s(self.agent_pid) - a0) / CALLS
        scrapes = scraper.stop() if scraper else 0
        return statistics.median(lat), cpu, acpu, scrapes


def call_cost(b):
    res = {True: [], False: []}
    for i in range(ROUNDS):
        for metrics in ((True, False) if i % 2 == 0 else (False, True)):
            r = b.round(metrics)
            res[metrics].append(r)
            print("  round %d metrics %-3s: CreateVolume+DeleteVolume %.2f ms median of %d, "
                  "controller CPU %.2f ms, agent CPU %.2f ms per pair (%d scrapes; load %.1f)" % (
                      i + 1, "on" if metrics else "off", r[0], CALLS, r[1], r[2], r[3],
                      os.getloadavg()[0]), flush=True)
    for metrics in (True, False):
        rs = res[metrics]
        print("metrics %-3s: CreateVolume+DeleteVolume %s per pair; controller CPU %s, agent CPU "
              "%s per pair (%d rounds of %d pairs)" % (
                  "on" if metrics else "off", fig([r[0] for r in rs], " ms"),
                  fig([r[1] for r in rs], " ms"), fig([r[2] for r in rs], " ms"), len(rs),
                  CALLS))
    on, off = (statistics.median(r[0] for r in res[m]) for m in (True, False))
    print("on/off latency ratio %.3f (load average %.1f %.1f %.1f)" % (
        (on / off if off else 0,) + os.getloadavg()), flush=True)


def scrape_cost(b):
    b.start(True)
    t0 = time.monotonic()
    while b.n < N:
        b.create()
    print("grew the store to %d volumes in %.0f s" % (b.n, time.monotonic() - t0))
    b.start(True, probe=False)  # a fresh controller: its first scrape has kept nothing
    first, size = get_ms(b.ctl_port)
    warm = [get_ms(b.ctl_port)[0] for _ in range(SCRAPES)]
    changed = []
    for _ in range(3):
        for _ in range(10):
            b.create()
        changed.append(get_ms(b.ctl_port)[0])
    print("N=%d: GET /metrics of the controller: first scrape %.1f ms (decodes every volume), "
          "then %s over %d scrapes with nothing changed, %s right after 10 volumes were added "
          "(3 times); %d bytes (load average %.1f %.1f %.1f)" % (
              (N, first, fig(warm, " ms", "%.1f"), SCRAPES, fig(changed, " ms", "%.1f"), size) +
              os.getloadavg()), flush=True)


def main():
    base = sys.argv[1]
    os.makedirs(base, exist_ok=True)
    b = Bench(base)
    t0 = time.monotonic()
    try:
        print("metrics bench (loopback; agent on a fake configfs, file backend; embedded store)")
        if ROUNDS > 0:
            call_cost(b)
        if N > 0:
            scrape_cost(b)
    finally:
        b.env.procs.stop_all()
    print("(metrics bench: %.0f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
