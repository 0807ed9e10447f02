"""A storage-node outage on the kube store (issue 30): the controller with `--store=kube` (its
default reconcile interval; client limits raised so that taking up the created volumes does not
take minutes) against the test API server on a real etcd, one agent on a fake configfs (file
backend) holding N published volumes, N grown in one run (default 100, 1,000, 10,000: created
through the API as provisioning and publishing leave them, as test/interop/outage does: each
volume's PersistentVolumeClaim, its PillarVolumeState naming the claim in spec.claimRef, and
status.publishedNodes naming a worker).  At each N:
  down      the agent killed (its configfs kept) and left down for DOWN_S seconds: the API
            requests the controller sent from the kill to the end, by verb (watches included),
            the writes among them (create, update, patch, delete: each one etcd write), and of
            those the Events;
  recovery  the agent started again: seconds to ExportsServing, and the requests and writes from
            its start until the API server is quiet again (every Event the rate budget held
            back written);
  Events    the outage Events on the claims (the API server's Events, each counted as often as
            it was recorded: its count): one Warning StorageNodeUnreachable and one Normal
            StorageNodeRestored per claim is the goal; the controller's own counts of Events
            written (create, patch) and dropped (pillar_csi_events_*_total) beside them.
Goal of issue 30: at most 5 writes of objects per outage whatever N (the down window; the
Events, which the client sends on their own rate budget, and the recovery's writes are printed
beside it).  At the largest N the controller is then restarted (bench.py's restart: seconds to
a ready Probe, peak RSS, the requests by verb).

  outage.py DIR N1,N2,...      env BENCH_DOWN_S (default 20)
"""
import json
import os
import socket
import ssl
import sys
import time
import urllib.parse
import urllib.request
from concurrent import futures

import bench as kb  # this directory's bench.py: the set-up, the request log and the verbs

cs = kb.cs
cond = kb.cond
DOWN_S = float(os.environ.get("BENCH_DOWN_S", "20"))
WRITES = ("create", "update", "patch", "delete")
CLAIM_NS = "default"
WORKER = "worker-1"
UNREACHABLE, RESTORED = "StorageNodeUnreachable", "StorageNodeRestored"


def api(c, method, path, body=None, ctype="application/json"):
    """One request of the bench's own (admin) to the API server: the decoded answer."""
    req = urllib.request.Request(c.url + path, method=method, headers={
        "Authorization": "Bearer " + c.admin_token, "Content-Type": ctype},
        data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=c.ca),
                                timeout=120) as r:
        return json.loads(r.read())


def create_range(c, lo, hi):
    """Volumes lo..hi-1 of the agent as provisioning and publishing leave them, as in
    test/interop/outage: the claim (a PersistentVolumeClaim bound to the volume), the
    PillarVolumeState naming it (spec.claimRef with the claim's uid), published to a worker
    (status.publishedNodes); 8 concurrent API clients."""
    def one(i):
        name = "pvc-%08d-0000-4000-8000-000000000000" % i
        claim = api(c, "POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % CLAIM_NS, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-%08d" % i, "namespace": CLAIM_NS},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cs.PSC,
                     "volumeName": name, "resources": {"requests": {"storage": "1Mi"}}}})
        body = {"apiVersion": cs.GROUP, "kind": "PillarVolumeState", "metadata": {
            "name": name, "labels": {cs.P + "agent": cs.AGENT, cs.P + "store": cs.STORE}},
            "spec": {"volumeID": "%s/nvmeof-tcp/file/%s/%s" % (cs.AGENT, cs.POOL, name),
                     "agentVolumeID": "%s/%s" % (cs.POOL, name), "agentRef": cs.AGENT,
                     "backendType": "file", "protocolType": "nvmeof-tcp", "capacityBytes": 1 << 20,
                     "claimRef": {"namespace": CLAIM_NS, "name": claim["metadata"]["name"],
                                  "uid": claim["metadata"]["uid"]}}}
        path = "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarvolumestates"
        api(c, "POST", path, body)
        api(c, "PATCH", "%s/%s/status" % (path, name), {"status": {"publishedNodes": [{
            "nodeID": WORKER, "initiatorID": "nqn.2014-08.org.nvmexpress:uuid:" + WORKER,
            "accessMode": "SINGLE_NODE_WRITER"}]}}, "application/merge-patch+json")
    with futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(one, range(lo, hi)))


def outage_events(c):
    """{reason: count summed over the claims' Events} for the outage Events (each Event's count
    is the times it was recorded: a create is 1, each patch of a repeat one more)."""
    n, cont = {UNREACHABLE: 0, RESTORED: 0}, ""
    while True:
        page = api(c, "GET", "/api/v1/namespaces/%s/events?limit=500%s" % (
            CLAIM_NS, "&continue=" + urllib.parse.quote(cont) if cont else ""))
        for ev in page.get("items", []):
            if ev.get("reason") in n and ev.get("involvedObject", {}).get("kind") == \
                    "PersistentVolumeClaim":
                n[ev["reason"]] += ev.get("count", 1)
        cont = page.get("metadata", {}).get("continue", "")
        if not cont:
            return n


def events_metrics(port):
    """(written by verb, dropped by cause) from the controller's /metrics."""
    written, dropped = {}, {}
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
        for line in r.read().decode().splitlines():
            for name, into in (("pillar_csi_events_written_total{", written),
                               ("pillar_csi_events_dropped_total{", dropped)):
                if line.startswith(name):
                    label = line[len(name):].split('"')[1]
                    into[label] = into.get(label, 0) + int(float(line.rsplit(" ", 1)[1]))
    return written, dropped


def delta(after, before):
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


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


def outage(env, c, log, port):
    """One outage: (down figures, recovery figures, seconds to ExportsServing, the claims'
    outage Events recorded, Events written and dropped by the controller)."""
    quiet(log)
    ev0, (w0, d0) = outage_events(c), events_metrics(port)
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
    quiet(log)  # every Event the budget held back written too
    rec = kb.all_logged(log)[mark:]
    ev1, (w1, d1) = outage_events(c), events_metrics(port)
    return (counted(down), counted(rec), secs, delta(ev1, ev0), delta(w1, w0),
            delta(d1, d0))


def text(d):
    return ", ".join("%s %d" % kv for kv in sorted(d.items())) or "none"


def run(env, c, log, ns, port):
    kb.start(env)
    have = 0
    for n in ns:
        t0 = time.monotonic()
        create_range(c, have, n)
        print("N=%d: created %d published volumes through the API in %.1f s (a claim, its "
              "PillarVolumeState, its status)" % (n, n - have, time.monotonic() - t0), flush=True)
        have = n
        quiet(log)
        down, rec, secs, events, written, dropped = outage(env, c, log, port)
        objs = down[1] - down[2]
        print("N=%d storage-node outage, agent down %.0f s: %d writes of objects (goal <= 5 "
              "whatever N: %s) and %d of Events (their own budget), %d API requests (%s)" % (
                  n, DOWN_S, objs, "met" if objs <= 5 else "NOT met", down[2], down[0],
                  down[3]))
        print("N=%d recovery: ExportsServing %.2f s after the agent's start; %d writes (%d "
              "Events), %d API requests (%s); load average %.2f" % (
                  n, secs, rec[1], rec[2], rec[0], rec[3], os.getloadavg()[0]), flush=True)
        ok = events.get(UNREACHABLE, 0) == n and events.get(RESTORED, 0) == n
        print("N=%d outage Events on the %d claims of published volumes: %s %d, %s %d (goal: "
              "one of each per claim: %s); the controller wrote %s (%d Event writes while the "
              "agent was down, %d during its recovery), dropped %s" % (
                  n, n, UNREACHABLE, events.get(UNREACHABLE, 0), RESTORED,
                  events.get(RESTORED, 0), "met" if ok else "NOT met", text(written), down[2],
                  rec[2], text(dropped)), flush=True)
    kb.restart(env, log, ns[-1])  # the restart's peak memory and requests at the largest N


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    base, ns = sys.argv[1], [int(x) for x in sys.argv[2].split(",")]
    log = os.path.join(base, "requests.log")
    os.environ["PILLAR_KUBE_REQUEST_LOG"] = log
    os.makedirs(os.path.join(base, "kube"), exist_ok=True)
    with kb.Cluster(directory=os.path.join(base, "kube")) as c:
        env = cs.Env(base)
        env.kubeconfig = c.kubeconfig
        env.reconcile_interval = os.environ.get("BENCH_RECONCILE_INTERVAL", "30s")
        port = free_port()
        env.controller_args = ["--kube-api-qps=1000", "--kube-api-burst=1000",
                               "--metrics-bind-address=127.0.0.1:%d" % port]
        try:
            run(env, c, log, ns, port)
        finally:
            env.procs.stop_all()


if __name__ == "__main__":
    main()
