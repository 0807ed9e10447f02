"""Two controllers and a node on the test API server (test/kube: real etcd): leader election on the
Lease (deploy.md §1.3), the controller's Events (cluster/events.h, controller/events.h) and the
node's CSINode annotations with the DuplicateHostNQN Event (csi.md §6.1, §10.3).

Each controller runs `--store=kube --leader-elect` with short durations and `--v=4`, so that every
reconcile it runs is a log line `"reconcile" key=...` and every one it refuses is
`"reconcile skipped..."`.  Checks print PASS/FAIL; exit status 1 when any failed.
Usage: leader.py PILLAR_BIN WORKDIR [RBAC_YAML...]  (with RBAC files the roles run with the tokens
of the ServiceAccounts pillar-csi-controller and pillar-csi-node in namespace pillar-csi)."""
import calendar
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
from client import Client  # noqa: E402
from cluster import Cluster  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
RBAC = sys.argv[3:]
NS = "pillar-csi"
LEASE_S, RENEW_S, RETRY_MS = 4, 3, 500
failed = 0
procs = []


def check(ok, what, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else f"  [{detail}]"), flush=True)
    if not ok:
        failed += 1


def kubectl(c, *args, inp=None, kubeconfig=None):
    r = subprocess.run(["kubectl", "--kubeconfig", kubeconfig or c.kubeconfig, *args], input=inp,
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def apply(c, obj):
    rc, out = kubectl(c, "apply", "-f", "-", inp=json.dumps(obj))
    if rc != 0:
        raise RuntimeError(out)


def get_json(c, *args):
    rc, out = kubectl(c, "get", "-o", "json", *args)
    return json.loads(out) if rc == 0 else None


def micro(stamp):
    """Seconds since the epoch of a MicroTime (2006-01-02T15:04:05.000000Z); 0 when absent."""
    if not stamp:
        return 0.0
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float(
        "0" + stamp[19:].rstrip("Z"))


def wait(pred, timeout, step=0.2):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


class Proc:
    def __init__(self, name, args, env):
        self.name = name
        self.log = os.path.join(WORK, name + ".log")
        self.f = open(self.log, "w")
        self.p = subprocess.Popen([BIN, *args], stdout=self.f, stderr=self.f, env=env)
        procs.append(self)

    def text(self, since=0):
        with open(self.log, errors="replace") as f:
            return f.read()[since:]

    def size(self):
        return os.path.getsize(self.log)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGCONT)
            self.p.terminate()
            try:
                return self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                return self.p.wait()
        return self.p.returncode


def reconciles(text):
    return re.findall(r'\] "reconcile" key="([^"]+)"', text)


def namespace(c):
    Client(c.port, c.ca, c.admin_token).request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})


def sa_kubeconfig(c, sa):
    """A kubeconfig with a token of ServiceAccount NS/sa."""
    return c.sa_kubeconfig(NS, sa, os.path.join(WORK, sa + ".kubeconfig"))


def controller(c, name, kubeconfig):
    env = dict(os.environ, POD_NAME=name, POD_NAMESPACE=NS, PILLAR_RECONCILE_INTERVAL="1s",
               ASAN_OPTIONS="detect_leaks=0")
    return Proc(name, ["controller", "--store=kube", f"--kubeconfig={kubeconfig}", "--leader-elect",
                       f"--leader-elect-lease-duration={LEASE_S}s",
                       f"--leader-elect-renew-deadline={RENEW_S}s",
                       f"--leader-elect-retry-period={RETRY_MS}ms",
                       f"--csi-endpoint=unix://{WORK}/{name}.sock",
                       "--health-probe-bind-address=127.0.0.1:0", "--metrics-bind-address=0",
                       "--v=4"], env)


def lease(c):
    o = get_json(c, "-n", NS, "lease", "pillar-csi-controller")
    return o["spec"] if o else None


def holder(c):
    s = lease(c)
    return (s or {}).get("holderIdentity") or ""


def csi_ok(sock):
    r = subprocess.run([BIN, "call", f"unix://{sock}", "/csi.v1.Identity/GetPluginInfo", "{}"],
                       capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and "pillar-csi.bhyoo.com" in r.stdout


def election(c, kc):
    a, b = controller(c, "ctl-a", kc), controller(c, "ctl-b", kc)
    apply(c, {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarAgent",
              "metadata": {"name": "storage-1"},
              "spec": {"nodeRef": {"name": "storage-1", "port": 1}}})
    h = wait(lambda: holder(c), 20)
    check(h.startswith("ctl-a_") or h.startswith("ctl-b_"),
          "a Lease pillar-csi-controller in POD_NAMESPACE names one controller as holder", h)
    lead, other = (a, b) if h.startswith("ctl-a_") else (b, a)
    s = wait(lambda: lease(c), 10) or {}
    check(s.get("leaseDurationSeconds") == LEASE_S and re.match(
        r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", s.get("renewTime", "")),
        "the Lease carries leaseDurationSeconds and MicroTime renewTime", s)
    check(wait(lambda: reconciles(lead.text()), 20), "the leader reconciles")
    time.sleep(2)
    check(not reconciles(other.text()), "the other controller does not reconcile",
          reconciles(other.text())[:3])
    check("attempting to acquire leader lease" in other.text(), "the other waits for the Lease")
    check(csi_ok(f"{WORK}/{lead.name}.sock") and csi_ok(f"{WORK}/{other.name}.sock"),
          "both controllers serve CSI")
    transitions = (lease(c) or {}).get("leaseTransitions", 0)

    lead.p.send_signal(signal.SIGSTOP)
    # The other may take the Lease only once leaseDurationSeconds have passed since it saw the
    # last renewal: both processes stamp the same clock, so its acquireTime is the stopped
    # leader's last renewTime plus the lease duration, however late either ran, less at most the
    # time the other's read of that renewal took (allowed for: one retry period).
    last = {}

    def acquired():
        s = lease(c) or {}
        if s.get("holderIdentity", "").startswith(lead.name + "_"):
            last["renew"] = s.get("renewTime")
        return "successfully acquired lease" in other.text()
    got = wait(acquired, LEASE_S + 60)
    s = lease(c) or {}
    waited = micro(s.get("acquireTime")) - micro(last.get("renew"))
    check(got and "renew" in last and waited >= LEASE_S - RETRY_MS / 1000.0,
          f"SIGSTOP of the leader: the other acquires after the lease duration ({waited:.3f} s "
          "from the last renewal)", (last, s))
    check(holder(c).startswith(other.name + "_"), "the Lease names the new holder", holder(c))
    check((lease(c) or {}).get("leaseTransitions") == transitions + 1, "leaseTransitions + 1",
          lease(c))
    n0 = len(reconciles(other.text()))
    check(wait(lambda: len(reconciles(other.text())) > n0, 10), "the new leader reconciles")

    mark = lead.size()
    lead.p.send_signal(signal.SIGCONT)
    # it notices at its next renewal attempt, which a loaded machine may delay
    wait(lambda: "leader election lost" in lead.text(mark), 30)
    time.sleep(1)  # anything it would wrongly do after noticing
    after = lead.text(mark)
    check(not reconciles(after), "SIGCONT: the old leader does not reconcile", reconciles(after)[:3])
    check("leader election lost" in after, "SIGCONT: the old leader notices it lost the Lease",
          after[-800:])
    check(holder(c).startswith(other.name + "_"), "SIGCONT: the Lease stays with the new holder")

    t0 = time.time()
    rc = other.stop()
    check(rc == 0, "SIGTERM: the leader exits 0", rc)
    s = lease(c) or {}
    check(s.get("holderIdentity", "x") == "" or holder(c).startswith(lead.name + "_"),
          "SIGTERM: the leader released the Lease (holder \"\")", s)
    # from the release (its renewTime; the SIGTERM when the other took it before this read)
    released = micro(s.get("renewTime")) if s.get("holderIdentity", "x") == "" else t0
    got = wait(lambda: holder(c).startswith(lead.name + "_"), LEASE_S + 30)
    took = micro((lease(c) or {}).get("acquireTime")) - released
    check(got and took < LEASE_S,
          f"after the release the other acquires at once ({took:.3f} s from the release)")
    check(wait(lambda: reconciles(lead.text(mark)), 10), "and reconciles again")
    return lead


def events(c, lead):
    want = ("NodeNotFound", "AgentNotConnected")
    rows = []

    def have():
        nonlocal rows
        rc, out = kubectl(c, "get", "events", "-n", "default", "-o",
                          "custom-columns=TYPE:.type,REASON:.reason,KIND:.involvedObject.kind,"
                          "NAME:.involvedObject.name,COUNT:.count,SOURCE:.source.component")
        rows = out.splitlines()
        return any(w in out for w in want) and out
    out = wait(have, 20)
    check(out and re.search(r"Warning\s+(NodeNotFound|AgentNotConnected)\s+PillarAgent\s+storage-1\s+\d+\s+"
                            r"pillar-csi-controller", out or ""),
          "kubectl get events: the PillarAgent's condition change as a Warning Event", rows)
    rc, plain = kubectl(c, "get", "events", "-n", "default")
    check(rc == 0 and re.search(r"^storage-1\.[0-9a-f]+ ", plain, re.M),
          "kubectl get events lists it (named <object>.<hex time> as client-go names them)",
          plain[-600:])


def node_identity(c, kc_node):
    etc = os.path.join(WORK, "host", "etc", "nvme")
    os.makedirs(etc, exist_ok=True)
    nqn = "nqn.2014-08.org.nvmexpress:uuid:6b1d3f0e-1c2a-4e5b-8f9d-0a1b2c3d4e5f"
    with open(os.path.join(etc, "hostnqn"), "w") as f:
        f.write(nqn + "\n")
    with open(os.path.join(etc, "hostid"), "w") as f:
        f.write("6b1d3f0e-1c2a-4e5b-8f9d-0a1b2c3d4e5f\n")
    host = os.path.join(WORK, "host")
    for d in ("dev", "sys/module/nvme_tcp", "sys/class/nvme", "sys/class/nvme-subsystem", "sys/block"):
        os.makedirs(os.path.join(host, d), exist_ok=True)
    open(os.path.join(host, "dev/nvme-fabrics"), "w").close()
    if not os.path.islink(os.path.join(host, "proc")):
        os.symlink("/proc", os.path.join(host, "proc"))
    apply(c, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}})
    # worker-0 is a clone with the same identity, already published
    apply(c, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
              "metadata": {"name": "worker-0", "annotations": {
                  "pillar-csi.bhyoo.com/nvmeof-host-nqn": nqn,
                  "pillar-csi.bhyoo.com/nvmeof-host-id": "6b1d3f0e-1c2a-4e5b-8f9d-0a1b2c3d4e5f"}},
              "spec": {"drivers": []}})
    env = dict(os.environ, NODE_NAME="worker-1", ASAN_OPTIONS="detect_leaks=0")
    n = Proc("node", ["node", "--store=kube", f"--kubeconfig={kc_node}",
                      f"--csi-endpoint=unix://{WORK}/node.sock", f"--state-dir={WORK}/node-state",
                      f"--host-root={WORK}/host", "--v=2"], env)
    # the registrar registers, then kubelet creates the CSINode (csi.md §6.1): the node has
    # tried its patch against no CSINode and serves meanwhile
    check(wait(lambda: "host identity not published yet" in n.text() and
               csi_ok(f"{WORK}/node.sock"), 30),
          "the node serves while its CSINode does not exist yet", n.text()[-800:])
    node = get_json(c, "node", "worker-1")
    apply(c, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
              "metadata": {"name": "worker-1", "ownerReferences": [
                  {"apiVersion": "v1", "kind": "Node", "name": "worker-1",
                   "uid": node["metadata"]["uid"]}]},
              "spec": {"drivers": [{"name": "pillar-csi.bhyoo.com", "nodeID": "worker-1",
                                    "topologyKeys": ["pillar-csi.bhyoo.com/nvmeof"]}]}})

    def annotated():
        o = get_json(c, "csinode", "worker-1") or {}
        return o.get("metadata", {}).get("annotations", {}).get("pillar-csi.bhyoo.com/nvmeof-host-nqn")
    check(wait(annotated, 10) == nqn, "the node patches the host NQN onto the CSINode kubelet made")
    o = get_json(c, "csinode", "worker-1") or {}
    check(o.get("spec", {}).get("drivers", [{}])[0].get("nodeID") == "worker-1"
          and o["metadata"]["annotations"].get("pillar-csi.bhyoo.com/nvmeof-host-id")
          == "6b1d3f0e-1c2a-4e5b-8f9d-0a1b2c3d4e5f",
          "the patch adds the host ID and keeps kubelet's drivers", o)

    def dup():
        rc, out = kubectl(c, "get", "events", "-n", "default", "--field-selector",
                          "involvedObject.name=worker-1", "-o", "json")
        items = json.loads(out)["items"] if rc == 0 else []
        return [e for e in items if e.get("reason") == "DuplicateHostNQN"]
    d = wait(dup, 10)
    check(len(d) == 1 and d[0]["type"] == "Warning" and d[0]["involvedObject"]["kind"] == "Node"
          and d[0]["involvedObject"].get("uid") == node["metadata"]["uid"]
          and d[0]["message"] == f'host NQN "{nqn}" is also used by node "worker-0"; give every '
          'worker a unique /etc/nvme/hostnqn and /etc/nvme/hostid',
          "DuplicateHostNQN: a Warning Event on the Node with csi.md's message", d)
    check(n.stop() == 0, "the node stops cleanly")


def main():
    os.makedirs(WORK, exist_ok=True)
    with Cluster(rbac=RBAC) as c:
        namespace(c)
        kc_ctl = sa_kubeconfig(c, "pillar-csi-controller") if RBAC else c.kubeconfig
        kc_node = sa_kubeconfig(c, "pillar-csi-node") if RBAC else c.kubeconfig
        try:
            lead = election(c, kc_ctl)
            events(c, lead)
            node_identity(c, kc_node)
        finally:
            for p in procs:
                p.stop()
            for p in procs:
                text = p.text()
                bad = [ln for ln in text.splitlines() if "Forbidden" in ln or "forbidden" in ln]
                check(not bad, f"{p.name}: no request refused by RBAC", bad[:3])
                check("AddressSanitizer" not in text and "runtime error" not in text,
                      f"{p.name}: no sanitizer report")
    sys.exit(1 if failed else 0)


main()
