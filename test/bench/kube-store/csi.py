"""CSI calls on the kube store: the controller with `--store=kube` at its default client limits
(--kube-api-qps 5, --kube-api-burst 10, the CSI sidecars' defaults) against the test API server
on a real etcd, the agent on a fake configfs (file backend).  ROUNDS times: CreateVolume,
ControllerPublishVolume, ControllerUnpublishVolume, DeleteVolume of a new PVC's volume, each call
made as its sidecar makes it.  For each call: its wall time, and the API requests the controller
sent for it, counted by the server's request log from the call's start until the controller is
quiet again (so Events sent after the answer count too), watches left out; split into requests
made while the call ran and after it.  Prints median (min–max) over the rounds and one round's
requests by method and path.

  csi.py DIR ROUNDS
"""
import json
import os
import sys
import time

import bench as kb  # this directory's bench.py: the same set-up and request log

cs = kb.cs

QUIET_S = 1.5  # no request for this long: the controller is done with a call (events included)


def quiet(log, limit=30):
    """Waits until no request has been logged for QUIET_S seconds."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        rows = kb.logged(log)
        if not rows or time.time() - rows[-1][0] >= QUIET_S:
            return
        time.sleep(0.2)


def shape(path):
    """A request's path with the volume's names replaced, for grouping."""
    p = path.split("?")[0]
    parts = p.split("/")
    return "/".join("NAME" if s.startswith("pvc-") or s.startswith("data") else s for s in parts)


def measure(log, fn):
    """Runs fn; returns (result, seconds, requests during, requests after, the requests)."""
    quiet(log)
    t0 = time.time()
    m0 = time.monotonic()
    res = fn()
    secs = time.monotonic() - m0
    t1 = time.time()
    quiet(log)
    rows = [r for r in kb.logged(log) if r[0] >= t0]
    during = [r for r in rows if r[0] <= t1]
    return res, secs, len(during), len(rows) - len(during), rows


def fig(vals, unit="", fmt="%.0f"):
    return kb._cb.fig(vals, unit, fmt)


def main():
    base, rounds = sys.argv[1], int(sys.argv[2])
    log = os.path.join(base, "requests.log")
    os.environ["PILLAR_KUBE_REQUEST_LOG"] = log
    os.makedirs(os.path.join(base, "kube"), exist_ok=True)
    with kb.Cluster(directory=os.path.join(base, "kube")) as c:
        env = cs.Env(base)
        env.kubeconfig = c.kubeconfig
        env.reconcile_interval = "30s"  # the default: no periodic pass during a measurement
        try:
            run(env, log, rounds)
        finally:
            env.procs.stop_all()


def run(env, log, rounds):
    sc = kb.start(env)
    ch = cs.grpc.insecure_channel("unix://" + env.sock)
    ctl = cs.csig.ControllerStub(ch)
    kube = cs.Kube(env, ctl, cs.k8s.Caps(cs.csi, cs.csig.IdentityStub(ch), ctl))
    pvcs = [kube.claim("data%d" % i, "16Mi") for i in range(rounds)]
    calls = ("CreateVolume", "ControllerPublishVolume", "ControllerUnpublishVolume",
             "DeleteVolume")
    res = {k: [] for k in calls}
    shown = {}
    for i, pvc in enumerate(pvcs):
        state = {}

        def create():
            code, msg, _, pv, _ = kube.provision(sc, pvc)
            state["pv"] = pv
            return code, msg

        steps = (("CreateVolume", create),
                 ("ControllerPublishVolume", lambda: kube.attach(state["pv"], "node-a")[:2]),
                 ("ControllerUnpublishVolume", lambda: kube.detach(state["pv"], "node-a")[:2]),
                 ("DeleteVolume", lambda: kube.delete(state["pv"])[:2]))
        for name, fn in steps:
            (code, msg), secs, during, after, rows = measure(log, fn)
            if code != cs.OK:
                raise SystemExit("%s: %s %s" % (name, code, msg))
            res[name].append((secs, during, after))
            if i == 0:
                shown[name] = rows
    load = open("/proc/loadavg").read().split()[:3]
    print("CSI calls on the kube store at the default --kube-api-qps 5 / burst 10, %d rounds, "
          "median (min–max); load average %s" % (rounds, " ".join(load)))
    for name in calls:
        r = res[name]
        print("  %-26s %s   API requests %s (during the call %s, after it %s)" % (
            name, fig([x[0] * 1000 for x in r], " ms"), fig([x[1] + x[2] for x in r]),
            fig([x[1] for x in r]), fig([x[2] for x in r])))
    for name in calls:
        print("  requests of the first %s:" % name)
        kinds = {}
        for _, m, p in shown[name]:
            k = "%s %s" % (m, shape(p))
            kinds[k] = kinds.get(k, 0) + 1
        for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]):
            print("    %3d  %s" % (v, k))
    print(json.dumps({k: res[k] for k in calls}))


if __name__ == "__main__":
    main()
