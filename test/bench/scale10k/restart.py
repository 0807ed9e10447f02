#!/usr/bin/python3
"""Controller restarts with N volumes on the kube store, without creating them through CSI
(issue 30: restart with 10,000 volumes ready in <= 2 s).  The scale10k setup (bench.py: AGENTS
agents, the controller on --store=kube against the test API server on etcd), then SMALL volumes
per agent created through CSI; the PillarVolumeStates the controller wrote for them are the
templates of N - AGENTS * SMALL more, copied with only their volume name and uid changed
(a fresh uuid each) and written straight into etcd while the controller is stopped, as the
API server stores them.  The agents hold only the volumes created through CSI: a controller
restart asks a running agent nothing per volume (its export restore is done), so the restart's
work is the same as with volumes created through CSI; the agents are never restarted here.

BENCH_UNCONFIRMED=1: the seeded volumes record no status.reconciledDigest, as a version
before the field wrote them (the first start after an upgrade); they are written again so
before every restart, each of which then finds them unknown and resyncs them with their agents.
For that resync each seeded volume gets its backing file (a sparse copy of its template's size)
on its agent, which the first start (before the rounds) exports: in the rounds the agents
already hold every export, as after a real upgrade.  Otherwise they carry their templates'
digests (CreateVolume's), their own: the steady case.

Then ROUNDS rounds, each restarting the controller once with each binary (BENCH_OLD_BIN first,
then PILLAR_BIN; alternating, so both meet the same machine): seconds from its start to a ready
CSI Probe, to the end of its PillarVolumeState list (the request log's arrival of the watch the
informer opens after it) and to the end of its first reconcile pass ("ready" is the later of the
Probe and the first pass), its peak RSS, and the load average; then the median and min–max of
each per binary.

  restart.py DIR    env BENCH_SEED_N (default 10000), BENCH_SMALL (default 2), BENCH_RESTARTS
                    (default 3), BENCH_OLD_BIN (default: none, PILLAR_BIN only), BENCH_AGENTS,
                    BENCH_UNCONFIRMED (default 0)
"""
import base64
import importlib.util
import json
import os
import signal
import sys
import time
import urllib.request
import uuid

os.environ["BENCH_STORE"] = "kube"
HERE = os.path.dirname(os.path.abspath(__file__))
# the scale10k bench (its setup, restart and request log), under its own name: it imports the
# controller benchmark's module as `bench`
_spec = importlib.util.spec_from_file_location("scale10k_bench", os.path.join(HERE, "bench.py"))
sb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sb)
cb, cs = sb.cb, sb.cs

N = int(os.environ.get("BENCH_SEED_N", "10000"))
SMALL = int(os.environ.get("BENCH_SMALL", "2"))
ROUNDS = int(os.environ.get("BENCH_RESTARTS", "3"))
OLD = os.environ.get("BENCH_OLD_BIN")
PVST = "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarvolumestates"
PREFIX = "/registry/pillar-csi.bhyoo.com/pillarvolumestates/"
BATCH = 100  # puts per etcd transaction (etcd allows 128)
UNCONFIRMED = os.environ.get("BENCH_UNCONFIRMED") == "1"


def api(s, path):
    c = s.cluster
    req = urllib.request.Request(c.url + path, headers={"Authorization": "Bearer " + c.admin_token})
    ctx = __import__("ssl").create_default_context(cafile=c.ca)
    return json.loads(urllib.request.urlopen(req, context=ctx, timeout=120).read())


def etcd_puts(s, kvs):
    """Writes (key, value) pairs straight into etcd through its JSON gateway."""
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    for i in range(0, len(kvs), BATCH):
        ops = [{"request_put": {"key": b64(k), "value": b64(v)}} for k, v in kvs[i:i + BATCH]]
        req = urllib.request.Request("http://127.0.0.1:%d/v3/kv/txn" % s.cluster.etcd_port,
                                     json.dumps({"success": ops}).encode())
        urllib.request.urlopen(req, timeout=60).read()


def unconfirmed(text):
    """A PillarVolumeState's text without status.reconciledDigest."""
    o = json.loads(text)
    o.get("status", {}).pop("reconciledDigest", None)
    return json.dumps(o, separators=(",", ":")).encode()


def backing_file(s, t, new):
    """The backing file of seeded volume new on the agent of its template t (the file backend's
    <name>.img, as large as the template's, sparse)."""
    agent = {a.name: a for a in s.agents}[t["spec"]["agentRef"]]
    files = os.path.join(os.path.dirname(agent.state), "files")
    size = os.path.getsize(os.path.join(files, t["metadata"]["name"] + ".img"))
    with open(os.path.join(files, new + ".img"), "wb") as f:
        f.truncate(size)


def seed(s, n):
    """n PillarVolumeStates in all: copies of the ones the controller wrote, one agent's in turn;
    (the keys and texts written, seconds)."""
    have = api(s, PVST)["items"]
    if not have:
        raise SystemExit("no PillarVolumeState to copy")
    kvs = []
    for i in range(n - len(have)):
        t = have[i % len(have)]
        name, uid = t["metadata"]["name"], t["metadata"]["uid"]
        o = dict(t, metadata={k: v for k, v in t["metadata"].items() if k != "resourceVersion"})
        new = "pvc-" + str(uuid.uuid4())
        text = json.dumps(o, separators=(",", ":")).replace(name, new).replace(uid, str(uuid.uuid4()))
        kvs.append(((PREFIX + new).encode(), unconfirmed(text) if UNCONFIRMED else text.encode()))
        if UNCONFIRMED:
            backing_file(s, t, new)
    t0 = time.monotonic()
    etcd_puts(s, kvs)
    deadline = time.monotonic() + 300
    while len(api(s, PVST + "?resourceVersion=0")["items"]) < n:  # the server's cache caught up
        if time.monotonic() > deadline:
            raise SystemExit("the seeded PillarVolumeStates did not all appear")
        time.sleep(0.5)
    return kvs, time.monotonic() - t0


def unconfirm(s, kvs):
    """Writes the seeded volumes again as seeded (without their digests), once the API server's
    cache shows none of them with one."""
    etcd_puts(s, kvs)
    deadline = time.monotonic() + 300
    while sum("reconciledDigest" in o.get("status", {})
              for o in api(s, PVST + "?resourceVersion=0")["items"]) > N - len(kvs):
        if time.monotonic() > deadline:
            raise SystemExit("the seeded PillarVolumeStates kept their digests")
        time.sleep(0.5)


def request_times(path, offset):
    """(time, method, path) of the request log's lines after byte offset."""
    with open(path, "rb") as f:
        f.seek(offset)
        rows = []
        for line in f.read().decode(errors="replace").splitlines():
            r = line.split(" ", 2)
            if len(r) == 3:
                rows.append((float(r[0]), r[1], r[2]))
    return rows


def one(s, binary, log_path, kvs):
    """One restart with binary: bench.py's restart figures, and the PillarVolumeState list's
    seconds (its first request to the informer's watch that follows it) and requests."""
    cs.BIN = binary
    offset = os.path.getsize(log_path)
    r = s.restart((lambda: unconfirm(s, kvs)) if UNCONFIRMED else None)
    rows = [(t, p) for t, m, p in request_times(log_path, offset) if p.startswith(PVST + "?")]
    lists = [t for t, p in rows if "watch=" not in p]
    watch = [t for t, p in rows if "watch=" in p]
    r["list"] = watch[0] - lists[0] if watch and lists else float("nan")
    r["pages"] = len(lists)
    return r


def main():
    base = sys.argv[1]
    os.makedirs(base, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda sig, f: (_ for _ in ()).throw(SystemExit(130)))
    s = sb.Scale(base)
    new_bin = cs.BIN
    bins = [("old", OLD), ("new", new_bin)] if OLD else [("new", new_bin)]
    try:
        s.setup()
        secs, _ = s.create_all(0, sb.AGENTS * SMALL)
        s.quiet()
        print("%d volumes created through CSI in %.1f s (the templates)" % (sb.AGENTS * SMALL, secs), flush=True)
        s.env.procs.stop("controller")
        kvs, secs = seed(s, N)
        print("%d PillarVolumeStates written straight into etcd (%d in all) in %.1f s, %s" % (
            len(kvs), N, secs, "without status.reconciledDigest before each restart (unknown: the first "
            "start after an upgrade)" if UNCONFIRMED else "with their digests (the steady case)"), flush=True)
        log_path = os.environ["PILLAR_KUBE_REQUEST_LOG"]
        s.start_controller(first_pass=True)  # a first start takes up the seeded objects
        s.quiet()
        results = {name: [] for name, _ in bins}
        for i in range(ROUNDS):
            for name, b in bins:
                r = one(s, b, log_path, kvs)
                results[name].append(r)
                print("round %d %s: ready %.2f s (Probe %.2f, PillarVolumeState list %.2f s after "
                      "its request, %d requests; first reconcile pass %.2f; controller CPU %.2f s "
                      "by then); %d store writes, the store quiet after %.2f s; peak RSS %.1f MiB; "
                      "load average %.2f" % (
                          i + 1, name, r["ready"], r["probe"], r["list"], r["pages"], r["first"],
                          r["cpu"], r["writes"], r["settled"], r["hwm"], r["load"]), flush=True)
        for name, _ in bins:
            col = lambda k: [r[k] for r in results[name]]  # noqa: E731
            print("restart with %d volumes on the kube store, %s binary, %d rounds: ready %s (goal <= 2 s: "
                  "%s); PillarVolumeState list %s; first reconcile pass %s; controller CPU to it %s; "
                  "peak RSS %s; load average %s" % (
                      N, name, ROUNDS, cb.fig(col("ready"), " s"),
                      "met" if max(col("ready")) <= 2 else "NOT met", cb.fig(col("list"), " s"),
                      cb.fig(col("first"), " s"), cb.fig(col("cpu"), " s"),
                      cb.fig(col("hwm"), " MiB", "%.1f"), cb.fig(col("load"))),
                  flush=True)
    finally:
        s.close()
        if s.cfs_base.startswith("/dev/shm/"):
            import shutil
            shutil.rmtree(s.cfs_base, ignore_errors=True)


if __name__ == "__main__":
    main()
