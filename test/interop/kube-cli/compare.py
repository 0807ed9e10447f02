"""Every `kubectl get` line of the operator's page (../shared/seed/maintain-nodes.txt, copied to
docs/maintain-nodes-kubectl.txt is not needed: the lines are read from test/interop/kube-cli/
page.txt, a verbatim copy) run twice: with kubectl against the test API server on a real etcd
and with `pillar-csi get` on the embedded store holding the same objects.  kubectl is the oracle:
stdout, stderr and the exit status must be identical (the AGE column, the only clock-dependent
text, is compared as <age>).  Then a list of 1,103 objects read over many list pages from the API
server (--store=kube): -o json identical to kubectl's, the table kubectl 1.32's with
--chunk-size=0 and sized chunk by chunk otherwise.  Prints PASS/FAIL per line."""
import json
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
from cluster import Cluster  # noqa: E402

BIN = os.environ["PILLAR_BIN"]
G = "pillar-csi.bhyoo.com/v1alpha1"
P = "pillar-csi.bhyoo.com/"
T0 = "2026-12-03T11:00:00Z"
failed = 0


def check(ok, what, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else "\n" + detail), flush=True)
    failed += not ok


def cond(t, status, reason, msg=""):
    return {"type": t, "status": status, "reason": reason, "message": msg, "lastTransitionTime": T0}


def pvst(name, reason):
    return {"apiVersion": G, "kind": "PillarVolumeState", "metadata": {
        "name": name, "labels": {P + "agent": "storage-1"}},
        "spec": {"volumeID": "storage-1/zfs-zvol/nvmeof-tcp/tank/" + name,
                 "agentVolumeID": "tank/" + name, "agentRef": "storage-1",
                 "backendType": "zfs-zvol", "protocolType": "nvmeof-tcp",
                 "capacityBytes": 1 << 30},
        "status": {"conditions": [cond("ExportReconciled", "True" if reason == "Reconciled"
                                       else "False", reason)]}}


OBJECTS = [
    {"apiVersion": G, "kind": "PillarAgent", "metadata": {"name": "storage-1"},
     "spec": {"nodeRef": {"name": "storage-1", "addressType": "InternalIP"}},
     "status": {"resolvedAddress": "10.0.0.1:9500", "agentVersion": "v0.1.0",
                "conditions": [cond("ExportsReady", "True", "ExportsServing"),
                               cond("Ready", "True", "AgentConnected")]}},
    {"apiVersion": G, "kind": "PillarAgent", "metadata": {"name": "storage-2"},
     "spec": {"external": {"address": "10.0.0.2", "port": 9500}},
     "status": {"conditions": [cond("ExportsReady", "False", "ExportRestorePending"),
                               cond("Ready", "False", "ExportRestorePending")]}},
    pvst("pvc-1", "Reconciled"), pvst("pvc-2", "ExportSpecMissing"), pvst("pvc-3", "Reconciled"),
    {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pvc-1"},
     "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
              "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast",
              "volumeMode": "Filesystem",
              "csi": {"driver": "pillar-csi.bhyoo.com", "volumeHandle":
                      "storage-1/zfs-zvol/nvmeof-tcp/tank/pvc-1", "fsType": "ext4",
                      "volumeAttributes": {P + "nvmeof-ctrl-loss-tmo": "1800",
                                           P + "nvmeof-reconnect-delay": "5",
                                           P + "target-address": "10.0.0.1"}}}},
]


def page_commands(path):
    """The kubectl get commands of the page, continuation lines joined."""
    text = open(path).read().replace("\\\n", " ")
    return [re.sub(r"\s+", " ", m.strip()) for m in re.findall(r"^\s*(kubectl get .*)$", text, re.M)]


# Bound of one command (seconds).  The heaviest, `kubectl create` of long_list's 1,100 objects,
# costs about 11 s of CPU (8.8 s of it the test API server's) and took 51 s at load 21-26 on
# this 2-core machine: about 2 s per unit of load, so 300 s holds to a load of about 140.
RUN_S = 300


def run(argv, env=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_S, env=env)
    return r.returncode, r.stdout, r.stderr


# -o json: each object as kubectl prints it; the values each store makes up (uid, version,
# creation time, a PV's or PVC's first phase time) are compared as placeholders, everything else (layout, key order, escaping,
# managedFields left out) must match
JSON_CMDS = ["kubectl get pillaragent storage-1 -o json", "kubectl get pvst -o json",
             "kubectl get pv pvc-1 -o json", "kubectl get pa -o json"]
MADE_UP = re.compile(r'^(\s*"(?:uid|resourceVersion|creationTimestamp|lastPhaseTransitionTime)": )"[^"]+"(,?)$')


def normalized(text):
    return "\n".join(MADE_UP.sub(r'\1"<made-up>"\2', re.sub(r"\b(\d+[smhdy])+$", "<age>", line))
                     for line in text.split("\n"))


def load_kube(kubeconfig, d):
    env = dict(os.environ, KUBECONFIG=kubeconfig)
    for o in OBJECTS:
        body = {k: v for k, v in o.items() if k != "status"}
        path = os.path.join(d, "obj.json")
        json.dump(body, open(path, "w"))
        rc, out, err = run(["kubectl", "create", "-f", path], env)
        check(rc == 0, "kubectl create %s/%s" % (o["kind"], o["metadata"]["name"]), out + err)
        if "status" not in o:
            continue
        rc, out, _ = run(["kubectl", "get", o["kind"].lower() + "." + o["apiVersion"].split("/")[0],
                          o["metadata"]["name"], "-o", "json"], env)
        cur = json.loads(out)
        cur["status"] = o["status"]
        json.dump(cur, open(path, "w"))
        rc, out, err = run(["kubectl", "replace", "--subresource=status", "-f", path], env)
        check(rc == 0, "kubectl replace --subresource=status %s" % o["metadata"]["name"], out + err)


def load_dir(store, d):
    path = os.path.join(d, "objs.json")
    json.dump([{k: v for k, v in o.items() if k != "status"} for o in OBJECTS], open(path, "w"))
    rc, out, err = run([BIN, "apply", "-f", path, "--store=dir:" + store])
    check(rc == 0, "pillar-csi apply (embedded store)", out + err)
    json.dump([o for o in OBJECTS if "status" in o], open(path, "w"))
    rc, out, err = run([BIN, "apply", "--subresource=status", "-f", path, "--store=dir:" + store])
    check(rc == 0, "pillar-csi apply --subresource=status (embedded store)", out + err)


def chunked(table, chunk):
    """kubectl's table (columns sized over the whole list, as kubectl 1.32 prints it) re-laid as
    a chunked list is printed: each chunk of rows padded to the widest cell of the header and of
    every row up to the chunk's end."""
    lines = table.rstrip("\n").split("\n")
    names = lines[0].split()
    starts = [lines[0].index(n) for n in names]
    rows = [[ln[a:b].rstrip() for a, b in zip(starts, starts[1:])] + [ln[starts[-1]:]]
            for ln in lines]
    width = [0] * len(names)
    out = []
    for first in range(1, len(rows), chunk):
        part = rows[first:first + chunk] if first > 1 else rows[:1 + chunk]
        for r in part:
            width = [max(w, len(c)) for w, c in zip(width, r)]
        out += ["   ".join(c.ljust(w) for c, w in zip(r[:-1], width)) + "   " + r[-1] for r in part]
    return "\n".join(out) + "\n"


def long_list(c, d):
    """1,100 PillarVolumeStates more on the API server, one of them wider than the others after
    the first 500: `pillar-csi get --store=kube` over many list pages against kubectl."""
    env = dict(os.environ, KUBECONFIG=c.kubeconfig)
    items = [pvst("pvc-long-%04d" % i, "Reconciled") for i in range(1100)]
    items[700]["metadata"]["name"] = "pvc-long-0700-with-a-much-longer-name"
    items[700]["spec"]["agentRef"] = "storage-with-a-long-name"
    path = os.path.join(d, "long.json")
    json.dump({"apiVersion": "v1", "kind": "List",
               "items": [{k: v for k, v in o.items() if k != "status"} for o in items]}, open(path, "w"))
    rc, out, err = run(["kubectl", "create", "--validate=false", "-f", path], env)
    check(rc == 0, "kubectl create 1,100 PillarVolumeStates", out[-300:] + err[-300:])
    kube = ["--store=kube", "--kubeconfig=" + c.kubeconfig, "--kube-api-qps=1000",
            "--kube-api-burst=1000"]
    k = run(["kubectl", "get", "pvst"], env)
    check(chunked(k[1], 500) != k[1], "the long list's columns widen after its first 500 rows")
    for flags, want in ((["--chunk-size=0"], k[1]), ([], chunked(k[1], 500)),
                        (["--chunk-size=70"], chunked(k[1], 70))):
        p = run([BIN, "get", "pvst"] + flags + kube)
        check(k[0] == p[0] == 0 and normalized(p[1]) == normalized(want),
              "1,103 objects, table: pillar-csi get pvst %s" % " ".join(flags),
              "want:\n%s\ngot rc=%d:\n%s%s" % (want[:3000], p[0], p[1][:3000], p[2]))
    k = run(["kubectl", "get", "pvst", "-o", "json"], env)
    for flags in ([], ["--chunk-size=7"], ["-l", P + "agent=storage-1", "--chunk-size=9"]):
        kf = k if "-l" not in flags else run(["kubectl", "get", "pvst", "-o", "json"] + flags[:2], env)
        p = run([BIN, "get", "pvst", "-o", "json"] + flags + kube)
        check(kf[0] == p[0] == 0 and normalized(p[1]) == normalized(kf[1]),
              "1,103 objects, -o json over list pages: pillar-csi get pvst -o json %s" % " ".join(flags),
              "kubectl rc=%d %d bytes, pillar-csi rc=%d %d bytes %s" % (kf[0], len(kf[1]), p[0], len(p[1]), p[2]))


def main():
    d = sys.argv[1]
    store = os.path.join(d, "store")
    cmds = page_commands(os.path.join(HERE, "page.txt"))
    check(len(cmds) == 5, "the page has its 5 kubectl get lines", repr(cmds))
    with Cluster() as c:
        load_kube(c.kubeconfig, d)
        load_dir(store, d)
        for cmd in cmds + JSON_CMDS:
            line = cmd.replace("<pv-name>", "pvc-1").replace("<name>", "storage-1")
            argv = shlex.split(line)
            k = run(argv, dict(os.environ, KUBECONFIG=c.kubeconfig))
            p = run([BIN] + argv[1:] + ["--store=dir:" + store])
            same = (k[0] == p[0] and normalized(k[1]) == normalized(p[1]) and
                    normalized(k[2]) == normalized(p[2]))
            check(same, "identical output: " + line,
                  "kubectl    rc=%d\n%s%s\npillar-csi rc=%d\n%s%s" % (k[0], k[1], k[2], p[0], p[1], p[2]))
        long_list(c, d)
    print("(kube-cli: %d failed)" % failed)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
