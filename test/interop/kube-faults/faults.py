"""Faults of the Kubernetes store, met by the real controller (`pillar-csi controller --store=kube
--v=4`, its watch-fed caches and reconcilers) on the test API server over a real etcd (test/kube):

  restart    the API server is killed while every watch is open; a PillarProtocol is changed
             (through a second API server on the same etcd) while it is down; after the restart
             the change is reconciled (no lost work) by exactly one reconcile and one status
             write, and nothing is listed again (the watches resume: no doubled work);
  compaction the same, with etcd compacted past the watches' resourceVersion meanwhile: the
             resumed watches get a real 410 Expired, each kind is listed again, and the changes
             made while down, and after, are reconciled;
  conflict   another writer changes the object between the controller's read and its status
             write (the server's 409): the write is retried from a fresh read and the object
             carries both changes;
  token      the controller's token file (a ServiceAccount token) is rotated: the ServiceAccount
             is recreated so the server accepts only the new token, and the next change is
             reconciled and written with it, without a restart.

Requests are counted from the server's request log (PILLAR_KUBE_REQUEST_LOG): the requests
counted (status PUTs, lists, watches) are the controller's only, as this script reads etcd
directly and writes with PATCH, POST and DELETE.  Usage: faults.py PILLAR_BIN WORKDIR.  Prints PASS/FAIL per check; exit 1 when any failed."""
import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
from client import Client  # noqa: E402
from cluster import Cluster, free_port  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
NS, SA = "pillar-csi", "pillar-csi-controller"
PSTR = "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarprotocols"
LOG = os.path.join(WORK, "requests.log")
INTERLOPER = os.path.join(WORK, "interloper.json")
os.environ["PILLAR_KUBE_REQUEST_LOG"] = LOG
os.environ["PILLAR_KUBE_INTERLOPER"] = INTERLOPER
failed = 0


def check(ok, what, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else f"  [{detail}]"), flush=True)
    if not ok:
        failed += 1
    return ok


def wait(pred, timeout, step=0.1):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


# ---- etcd, read directly (not through the logged server) -----------------------------------------

def etcd(c, call, body):
    req = urllib.request.Request(f"http://127.0.0.1:{c.etcd_port}/v3/{call}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def pstr(c, name):
    doc = etcd(c, "kv/range", {"key": base64.b64encode(
        f"/registry/pillar-csi.bhyoo.com/pillarprotocols/{name}".encode()).decode()})
    kvs = doc.get("kvs") or []
    return json.loads(base64.b64decode(kvs[0]["value"])) if kvs else None


def observed(c, name):
    """(generation, the Ready condition's observedGeneration) of PillarProtocol name."""
    o = pstr(c, name) or {}
    conds = (o.get("status") or {}).get("conditions") or []
    ready = [x for x in conds if x.get("type") == "Ready"]
    return o.get("metadata", {}).get("generation"), ready[0].get("observedGeneration") if ready else None


def settled(c, name, gen):
    return observed(c, name) == (gen, gen)


def compact_all(c):
    rev = int(etcd(c, "kv/range", {"key": base64.b64encode(b"/").decode(), "count_only": True})["header"]["revision"])
    etcd(c, "kv/compaction", {"revision": str(rev), "physical": True})
    return rev


# ---- the server's request log ----------------------------------------------------------------------

def requests():
    with open(LOG) as f:
        return [tuple(line.split(" ", 2)[1:]) for line in f.read().splitlines() if line.count(" ") >= 2]


def is_watch(path):
    return "watch=1" in path or "watch=true" in path


def lists(window):
    """GETs of a collection (not watches) in window."""
    out = []
    for m, p in window:
        base = p.split("?")[0].strip("/").split("/")
        coll = (base[0] == "api" and len(base) == 3) or (base[0] == "apis" and len(base) == 4)
        if m == "GET" and coll and not is_watch(p):
            out.append(p)
    return out


# ---- the controller -----------------------------------------------------------------------------

class Controller:
    def __init__(self, kubeconfig):
        self.log = os.path.join(WORK, "controller.log")
        self.f = open(self.log, "w")
        env = dict(os.environ, PILLAR_RECONCILE_INTERVAL="1h", ASAN_OPTIONS="detect_leaks=0")
        self.p = subprocess.Popen(
            [BIN, "controller", "--store=kube", f"--kubeconfig={kubeconfig}", f"--csi-endpoint=unix://{WORK}/ctl.sock",
             "--health-probe-bind-address=127.0.0.1:0", "--metrics-bind-address=0", "--v=4"],
            stdout=self.f, stderr=self.f, env=env)

    def size(self):
        return os.path.getsize(self.log)

    def reconciles(self, since, key):
        with open(self.log, errors="replace") as f:
            return len(re.findall(r'\] "reconcile" key="%s"' % re.escape(key), f.read()[since:]))

    def stop(self):
        """SIGTERM; seconds until it exited."""
        t0 = time.monotonic()
        self.p.terminate()
        try:
            self.p.wait(40)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return time.monotonic() - t0


def protocol(name, queue):
    return {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarProtocol", "metadata": {"name": name},
            "spec": {"protocol": {"nvmeofTcp": {"maxQueueSize": queue}}}}


def patch_queue(k, name, queue):
    st, _, raw, _ = k.request("PATCH", f"{PSTR}/{name}", {"spec": {"protocol": {"nvmeofTcp": {"maxQueueSize": queue}}}},
                              {"Content-Type": "application/merge-patch+json"})
    if st != 200:
        raise RuntimeError(raw)


def while_down(c, fn):
    """Kills the API server (SIGKILL), runs fn(client) through a second server on the same etcd,
    and returns the request log's length just before the first server is started again."""
    port = c.port
    p = c.procs.pop("apiserver")
    p.kill()
    p.wait()
    time.sleep(1.5)  # the controller's watches fail and retry meanwhile
    c.start_apiserver(free_port())
    fn(Client(c.port, c.ca, c.admin_token))
    c.stop("apiserver")
    time.sleep(1.0)
    mark = len(requests())
    c.start_apiserver(port)
    return mark


# ---- the cases ------------------------------------------------------------------------------------

def baseline(c, ctl, k):
    """The work one change costs with the server up: (reconciles of tcp, status writes)."""
    gen = observed(c, "tcp")[0]
    since, mark = ctl.size(), len(requests())
    patch_queue(k, "tcp", 48)
    check(wait(lambda: settled(c, "tcp", gen + 1), 20), "a change is reconciled", observed(c, "tcp"))
    time.sleep(3)
    puts = [p for m, p in requests()[mark:] if m == "PUT" and p.startswith(f"{PSTR}/tcp/status")]
    return ctl.reconciles(since, "pstr/tcp"), len(puts)


def restart(c, ctl, k):
    base = baseline(c, ctl, k)
    gen = observed(c, "tcp")[0]
    since = ctl.size()
    mark = while_down(c, lambda k2: patch_queue(k2, "tcp", 64))
    down = ctl.reconciles(since, "pstr/tcp")
    since = ctl.size()
    check(wait(lambda: settled(c, "tcp", gen + 1), 30), "API server restart: the change made while it was down is "
          "reconciled (no lost work)", observed(c, "tcp"))
    time.sleep(3)  # anything doubled would come now
    window = requests()[mark:]
    puts = [p for m, p in window if m == "PUT" and p.startswith(f"{PSTR}/tcp/status")]
    check(base[1] == 1 and len(puts) == 1, "one status write for the change after the restart, as with the "
          "server up", (base, window))
    check(lists(window) == [], "no list after the restart: every watch resumed from its resourceVersion",
          lists(window))
    n = ctl.reconciles(since, "pstr/tcp")
    check(n == base[0], "the PillarProtocol is reconciled after the restart as often as for a change with the "
          "server up (%d: the change, and the controller's own status write)" % base[0], n)
    check(down == 0, "no reconcile while the server was down (nothing changed that the controller saw)", down)


def compaction(c, ctl, k):
    gen = observed(c, "tcp")[0]
    revs = []

    def change_and_compact(k2):
        patch_queue(k2, "tcp", 96)
        st, _, raw, _ = k2.request("POST", PSTR, protocol("late", 32))
        if st != 201:
            raise RuntimeError(raw)
        revs.append(compact_all(c))

    mark = while_down(c, change_and_compact)
    check(wait(lambda: settled(c, "tcp", gen + 1) and settled(c, "late", 1), 30),
          "compaction while down: the change and the object created meanwhile are reconciled after the relist",
          (observed(c, "tcp"), observed(c, "late")))
    time.sleep(2)
    window = requests()[mark:]
    old = [p for m, p in window if p.startswith(PSTR + "?") and is_watch(p) and
           int(re.search(r"resourceVersion=(\d+)", p).group(1)) < revs[0]]
    relists = [p for p in lists(window) if p.startswith(PSTR + "?") or p == PSTR]
    check(len(old) >= 1 and len(relists) >= 1, "the resumed watch from a compacted resourceVersion (410 Expired) "
          "is followed by a relist of the kind", window)
    check(len(relists) == 1, "the kind is listed once", relists)
    mark = len(requests())
    patch_queue(k, "tcp", 128)
    check(wait(lambda: settled(c, "tcp", gen + 2), 20), "after the relist the watch goes on: a later change is "
          "reconciled", observed(c, "tcp"))
    time.sleep(1)
    window = requests()[mark:]
    check(lists(window) == [], "and needs no further list", lists(window))


def conflict(c, ctl, k):
    gen = observed(c, "tcp")[0]
    with open(INTERLOPER, "w") as f:
        json.dump({"method": "PUT", "path": f"{PSTR}/tcp/status",
                   "patch": {"metadata": {"labels": {"other-writer": "was-here"}}}}, f)
    mark = len(requests())
    patch_queue(k, "tcp", 256)
    ok = wait(lambda: settled(c, "tcp", gen + 1), 20)
    o = pstr(c, "tcp") or {}
    labels = o.get("metadata", {}).get("labels") or {}
    check(not os.path.exists(INTERLOPER), "another writer changed the PillarProtocol between the controller's "
          "read and its status write")
    check(ok and labels.get("other-writer") == "was-here", "after the 409 Conflict the write is retried from a "
          "fresh read: the object carries both changes", (observed(c, "tcp"), labels))
    time.sleep(2)
    puts = [p for m, p in requests()[mark:] if m == "PUT" and p.startswith(f"{PSTR}/tcp/status")]
    check(len(puts) == 2, "two status writes: the conflicting one and its retry", puts)


def sa_token(k):
    st, _, raw, tr = k.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token",
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 3600}})
    if st != 201:
        raise RuntimeError(raw)
    return tr["status"]["token"]


def service_account(k):
    st, _, raw, _ = k.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts",
                              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}})
    if st != 201:
        raise RuntimeError(raw)


def rbac(k):
    k.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    service_account(k)
    rb = "/apis/rbac.authorization.k8s.io/v1"
    k.request("POST", rb + "/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "faults"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})
    k.request("POST", rb + "/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "faults"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "faults"},
        "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}]})


def write_token(path, token):
    with open(path + ".new", "w") as f:
        f.write(token)
    os.rename(path + ".new", path)  # as the kubelet swaps the projected token


def token(c, ctl, k, tokfile):
    gen = observed(c, "tcp")[0]
    old = open(tokfile).read()
    st, _, _, _ = k.request("DELETE", f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}")
    service_account(k)
    write_token(tokfile, sa_token(k))
    st, _, _, _ = k.request("GET", PSTR, token=old)
    check(st == 401, "after the rotation the server refuses the old token", st)
    since = ctl.size()
    patch_queue(k, "tcp", 512)
    check(wait(lambda: settled(c, "tcp", gen + 1), 20), "the rotated token file is used without a restart: the "
          "next change is reconciled and written", observed(c, "tcp"))
    with open(ctl.log, errors="replace") as f:
        text = f.read()[since:]
    check("Unauthorized" not in text, "no request refused after the rotation", text[-2000:])


def main():
    os.makedirs(WORK, exist_ok=True)
    for f in (LOG, INTERLOPER):
        if os.path.exists(f):
            os.unlink(f)
    os.makedirs(os.path.join(WORK, "cluster"), exist_ok=True)
    with Cluster(directory=os.path.join(WORK, "cluster")) as c:
        k = Client(c.port, c.ca, c.admin_token)
        rbac(k)
        tokfile = os.path.join(WORK, "token")
        write_token(tokfile, sa_token(k))
        kc = os.path.join(WORK, "kubeconfig")
        with open(kc, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: t, cluster: {{server: "{c.url}", certificate-authority: "{c.ca}"}}}}]
users: [{{name: t, user: {{tokenFile: "{tokfile}"}}}}]
contexts: [{{name: t, context: {{cluster: t, user: t}}}}]
current-context: t
""")
        st, _, raw, _ = k.request("POST", PSTR, protocol("tcp", 32))
        if st != 201:
            raise RuntimeError(raw)
        ctl = Controller(kc)
        try:
            check(wait(lambda: settled(c, "tcp", 1), 30), "the controller reconciles a PillarProtocol on --store=kube",
                  observed(c, "tcp"))
            time.sleep(1)
            restart(c, ctl, k)
            compaction(c, ctl, k)
            conflict(c, ctl, k)
            token(c, ctl, k, tokfile)
        finally:
            took = ctl.stop()
        check(ctl.p.returncode == 0, "the controller exits cleanly on SIGTERM", ctl.p.returncode)
        # a shutdown held up by a request or a watch would wait for its 30 s timeout; a loaded
        # machine may stretch a prompt one by seconds
        check(took < 15, "and within 15 s", "%.1f s" % took)
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
