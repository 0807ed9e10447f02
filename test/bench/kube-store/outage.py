"""A storage-node outage on the kube store (issue 30): the controller with `--store=kube` (its
default reconcile interval; client limits raised so that taking up the created volumes does not
take minutes) against the test API server on a real etcd, one agent on a fake configfs (file
backend) holding N PillarVolumeStates, N grown in one run (default 100, 1,000, 10,000: created
through the API as bench.py does).  At each N:
  down      the agent killed (its configfs kept) and left down for DOWN_S seconds: the API
            requests the controller sent from the kill to the end, by verb (watches included),
            the writes among them (create, update, patch, delete: each one etcd write), and of
            those the Events;
  recovery  the agent started again: seconds to ExportsServing, and the requests and writes from
            its start until the API server is quiet again.
Goal of issue 30: at most 5 writes of objects per outage whatever N (the down window; the
Events, which the client sends on their own rate budget, and the recovery's writes are printed
beside it).  At the largest N the controller is then restarted (bench.py's restart: seconds to
a ready Probe, peak RSS, the requests by verb).

  outage.py DIR N1,N2,...      env BENCH_DOWN_S (default 20)
"""
import json
import os
import ssl
import sys
import time
import urllib.request
from concurrent import futures

import bench as kb  # this directory's bench.py: the set-up, the request log and the verbs

cs = kb.cs
cond = kb.cond
DOWN_S = float(os.environ.get("BENCH_DOWN_S", "20"))
WRITES = ("create", "update", "patch", "delete")


def create_range(url, token, ca, lo, hi):
    """PillarVolumeStates lo..hi-1 of the agent, 8 concurrent API requests."""
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
        urllib.request.urlopen(req, context=ctx, timeout=120).read()
    with futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(one, range(lo, hi)))


def quiet(log, secs=3.0, limit=600):
    """Waits until the server logged no request but watches for secs seconds."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        rows = kb.logged(log)
        if not rows or time.time() - rows[-1][0] >= secs:
            return
        time.sleep(0.5)
    raise SystemExit("the controller did not become quiet within %d s" % limit)


def counted(reqs):
    """(requests, writes, Events among the writes, "by verb" text)."""
    writes = [r for r in reqs if kb.verb(*r) in WRITES]
    events = [r for r in writes if "/events" in r[1]]
    return len(reqs), len(writes), len(events), kb.by_verb(reqs)


def outage(env, log):
    """One outage: (down figures, recovery figures, seconds to ExportsServing)."""
    quiet(log)
    mark = len(kb.all_logged(log))
    env.procs.stop("agent", cs.signal.SIGKILL)
    time.sleep(DOWN_S)
    down = kb.all_logged(log)[mark:]
    pa_rv = (env.get("pa", cs.AGENT) or {}).get("metadata", {}).get("resourceVersion")
    mark = len(kb.all_logged(log))
    t0 = time.monotonic()
    if not env.start_agent():
        raise SystemExit("the agent did not start again")

    def serving():
        pa = env.get("pa", cs.AGENT) or {}
        return (pa.get("metadata", {}).get("resourceVersion") != pa_rv and
                cond(pa, "ExportsReady")[:2] == ("True", "ExportsServing"))
    if not cs.wait_for(serving, 300):
        raise SystemExit("no ExportsServing within 300 s of the agent's restart")
    secs = time.monotonic() - t0
    quiet(log)
    return counted(down), counted(kb.all_logged(log)[mark:]), secs


def run(env, c, log, ns):
    kb.start(env)
    have = 0
    for n in ns:
        t0 = time.monotonic()
        create_range(c.url, c.admin_token, c.ca, have, n)
        print("N=%d: created %d PillarVolumeStates through the API in %.1f s" % (
            n, n - have, time.monotonic() - t0), flush=True)
        have = n
        quiet(log)
        down, rec, secs = outage(env, log)
        objs = down[1] - down[2]
        print("N=%d storage-node outage, agent down %.0f s: %d writes of objects (goal <= 5 "
              "whatever N: %s) and %d of Events (their own budget), %d API requests (%s)" % (
                  n, DOWN_S, objs, "met" if objs <= 5 else "NOT met", down[2], down[0],
                  down[3]))
        print("N=%d recovery: ExportsServing %.2f s after the agent's start; %d writes (%d "
              "Events), %d API requests (%s); load average %.2f" % (
                  n, secs, rec[1], rec[2], rec[0], rec[3], os.getloadavg()[0]), flush=True)
    kb.restart(env, log, ns[-1])  # the restart's peak memory and requests at the largest N


def main():
    base, ns = sys.argv[1], [int(x) for x in sys.argv[2].split(",")]
    log = os.path.join(base, "requests.log")
    os.environ["PILLAR_KUBE_REQUEST_LOG"] = log
    os.makedirs(os.path.join(base, "kube"), exist_ok=True)
    with kb.Cluster(directory=os.path.join(base, "kube")) as c:
        env = cs.Env(base)
        env.kubeconfig = c.kubeconfig
        env.reconcile_interval = os.environ.get("BENCH_RECONCILE_INTERVAL", "30s")
        env.controller_args = ["--kube-api-qps=1000", "--kube-api-burst=1000"]
        try:
            run(env, c, log, ns)
        finally:
            env.procs.stop_all()


if __name__ == "__main__":
    main()
