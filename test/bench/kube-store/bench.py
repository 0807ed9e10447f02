"""The controller on the kube store (issue 12): agent on a fake configfs root (file backend),
controller with --store=kube against the test API server on a real etcd (test/kube/), N
PillarVolumeStates of the agent created through the API (provisioning N volumes through CSI on
this loaded machine takes about 1.7 s each; the resync reads the same objects either way).  Then, with PILLAR_RECONCILE_INTERVAL=1s,
the API requests the controller sends per periodic resync pass (counted by the server's request
log over PASSES passes, watches excluded as they are long-running), how many of them address
one object, and the controller's resident memory (median of three samples, with the load
average).

  bench.py DIR N PASSES
"""
import importlib.util
import json
import os
import ssl
import sys
import time
import urllib.request
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "interop", "controller"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
import controller_suite as cs  # noqa: E402
from controller_suite import cond  # noqa: E402
from cluster import Cluster  # noqa: E402
# the controller benchmark's resident-memory reader (its module is also named bench)
_spec = importlib.util.spec_from_file_location(
    "controller_bench", os.path.join(HERE, "..", "controller", "bench.py"))
_cb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cb)
proc_rss_kib = _cb.proc_rss_kib


def logged(log):
    """The requests in the server's log: (time, method, path), watches left out."""
    try:
        with open(log) as f:
            rows = [line.split(" ", 2) for line in f.read().splitlines()]
    except OSError:
        return []
    return [(float(r[0]), r[1], r[2]) for r in rows if len(r) == 3 and "watch=1" not in r[2] and
            "watch=true" not in r[2]]


def requests(log):
    """The requests in the server's log: (method, path) pairs, watches left out."""
    return [(m, p) for _, m, p in logged(log)]


def all_logged(log):
    """Every request in the server's log, watches included: (method, path) pairs."""
    try:
        with open(log) as f:
            rows = [line.split(" ", 2) for line in f.read().splitlines()]
    except OSError:
        return []
    return [(r[1], r[2]) for r in rows if len(r) == 3]


def verb(method, path):
    """The Kubernetes verb of a request (as the API server's audit log names it)."""
    q = path.split("?", 1)
    if "watch=1" in path or "watch=true" in path:
        return "watch"
    if method == "GET":
        # /apis/G/V/[namespaces/NS/]PLURAL is a collection; one more segment is an object
        segs = q[0].strip("/").split("/")
        segs = segs[2:] if segs[0] == "api" else segs[3:]
        if segs and segs[0] == "namespaces" and len(segs) > 2:
            segs = segs[2:]
        return "list" if len(segs) == 1 else "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower())


def by_verb(reqs):
    """"list 2, get 1, watch 4": the requests counted by verb."""
    n = {}
    for m, p in reqs:
        v = verb(m, p)
        n[v] = n.get(v, 0) + 1
    return ", ".join("%s %d" % (v, c) for v, c in sorted(n.items(), key=lambda kv: -kv[1])) or "none"


def probe_ready(sock):
    """True when the controller's CSI Probe answers ready."""
    try:
        ch = cs.grpc.insecure_channel("unix://" + sock)
        r = cs.csig.IdentityStub(ch).Probe(cs.csi.ProbeRequest(), timeout=2)
        ch.close()
        return r.ready.value
    except cs.grpc.RpcError:
        return False


def first_pass_done(env, offset):
    """The controller's log shows the end of its first reconcile pass after offset."""
    with open(os.path.join(env.base, "controller.log"), "rb") as f:
        f.seek(offset)
        return b"first reconcile pass done" in f.read()


def restart(env, log, n):
    """The controller stopped and started again on the kube store with n volumes: seconds from
    its start to a ready CSI Probe and to the end of its first reconcile pass (every kind
    listed), its peak resident memory (VmHWM) once it has taken up every object (the API server
    quiet), and the API requests of the restart by verb."""
    env.procs.stop("controller")
    before = len(all_logged(log))
    offset = os.path.getsize(os.path.join(env.base, "controller.log"))
    t0 = time.monotonic()
    if not env.start_controller():
        raise SystemExit("the controller did not start again")
    if not cs.wait_for(lambda: probe_ready(env.sock), 120):
        raise SystemExit("the restarted controller's Probe never answered ready")
    ready = time.monotonic() - t0
    pid = env.procs.live["controller"].pid
    # every kind listed (a large kind's pages come a few a second: not quiet by the count below)
    if not cs.wait_for(lambda: first_pass_done(env, offset), 300, step=0.05):
        raise SystemExit("the restarted controller's first reconcile pass did not end in 300 s")
    first = time.monotonic() - t0
    last, end = -1, time.monotonic() + 120
    while time.monotonic() < end:  # quiet: the steady state's few requests a second
        time.sleep(3)
        now = len(requests(log))
        if now - last <= 3 * 3:
            break
        last = now
    peak = proc_rss_kib(pid, "VmHWM") / 1024.0
    reqs = all_logged(log)[before:]
    print("controller restart with %d volumes on the kube store: Probe ready in %.2f s, first "
          "reconcile pass done (every kind listed) in %.2f s, peak RSS (VmHWM) %.1f MiB once "
          "quiet (goal <= 16 MiB: %s), resident %.1f MiB; %d API requests (%s); load average "
          "%.2f" % (
              n, ready, first, peak, "met" if peak <= 16 else "NOT met",
              proc_rss_kib(pid) / 1024.0, len(reqs), by_verb(reqs), os.getloadavg()[0]),
          flush=True)
    return pid


def main():
    base, n, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    log = os.path.join(base, "requests.log")
    os.environ["PILLAR_KUBE_REQUEST_LOG"] = log
    os.makedirs(os.path.join(base, "kube"), exist_ok=True)
    with Cluster(directory=os.path.join(base, "kube")) as c:
        env = cs.Env(base)
        env.kubeconfig = c.kubeconfig
        env.controller_args = ["--kube-api-qps=1000", "--kube-api-burst=1000"]
        try:
            run(env, log, n, passes, c.url, c.admin_token, c.ca)
        finally:
            env.procs.stop_all()


def create_volumes(url, token, ca, n):
    """N PillarVolumeStates of the agent, created with 8 concurrent API requests."""
    ctx = ssl.create_default_context(cafile=ca)

    def one(i):
        name = "pvc-%08d-0000-4000-8000-000000000000" % i
        body = {"apiVersion": cs.GROUP, "kind": "PillarVolumeState", "metadata": {
            "name": name, "labels": {cs.P + "agent": cs.AGENT, cs.P + "store": cs.STORE}},
            "spec": {"volumeID": "%s/nvmeof-tcp/file/%s/%s" % (cs.AGENT, cs.POOL, name),
                     "agentVolumeID": "%s/%s" % (cs.POOL, name), "agentRef": cs.AGENT,
                     "backendType": "file", "protocolType": "nvmeof-tcp", "capacityBytes": 1 << 20}}
        req = urllib.request.Request(url + "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarvolumestates",
                                     data=json.dumps(body).encode(), method="POST", headers={
                                         "Authorization": "Bearer " + token,
                                         "Content-Type": "application/json"})
        urllib.request.urlopen(req, context=ctx, timeout=60).read()
    with futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(one, range(n)))


def start(env):
    """Agent and controller started, the objects applied, the PillarAgent serving and the
    generated StorageClass present; returns the StorageClass."""
    if not env.start_agent() or not env.start_controller():
        raise SystemExit("agent or controller did not start")
    rc, out, err = env.apply(cs.objects(env.agent_port))
    if rc != 0:
        raise SystemExit("apply: " + out + err)
    if not cs.wait_for(lambda: cond(env.get("pa", cs.AGENT), "ExportsReady")[:2] ==
                       ("True", "ExportsServing"), 60) or not cs.wait_for(
                           lambda: env.get("sc", cs.PSC), 60):
        raise SystemExit("the PillarAgent or the generated StorageClass never became ready")
    return env.get("sc", cs.PSC)


def run(env, log, n, passes, c_url, token, ca):
    start(env)
    pid = env.procs.live["controller"].pid
    t0 = time.monotonic()
    create_volumes(c_url, token, ca, n)
    print("created %d PillarVolumeStates on the agent through the API in %.1f s" % (
        n, time.monotonic() - t0))
    # the controller takes up the new volumes (events, status writes): wait until it is quiet
    last, end = -1, time.monotonic() + 120
    while time.monotonic() < end:
        time.sleep(3)
        now = len(requests(log))
        if now - last <= 3 * 3:  # no more than the steady state's few requests a second
            break
        last = now
    before = len(requests(log))
    t = time.monotonic()
    time.sleep(passes)  # PILLAR_RECONCILE_INTERVAL=1s: one periodic pass a second
    window = requests(log)[before:]
    secs = time.monotonic() - t
    per_object = [r for r in window if "/pillarvolumestates/" in r[1]]
    print("API requests per resync pass with %d volumes: %.1f (%d in %.1f s, %d passes at 1 s); "
          "of them addressing one PillarVolumeState: %d" % (
              n, len(window) / passes, len(window), secs, passes, len(per_object)))
    kinds = {}
    for m, p in window:
        k = "%s %s" % (m, p.split("?")[0])
        kinds[k] = kinds.get(k, 0) + 1
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:8]:
        print("    %5d  %s" % (v, k))
    rss = []
    for _ in range(3):  # three samples 2 s apart, the controller idle
        rss.append(proc_rss_kib(pid) / 1024.0)
        time.sleep(2)
    print("controller resident memory with %d volumes on the kube store: %s, median of 3 "
          "(min–max) 2 s apart; load average %.2f" % (
              n, _cb.fig(rss, " MiB", "%.1f"), os.getloadavg()[0]))
    restart(env, log, n)


if __name__ == "__main__":
    main()
