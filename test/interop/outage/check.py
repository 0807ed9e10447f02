"""outage-plan and outage-status (docs/cli.md) on the test API server (real etcd) and on the
embedded store holding the same objects (fixture.py): the text and -o json|yaml output checked
against what the fixture means, --duration below and above the budget, the same output through
the kubectl plugin (the real `kubectl` finds kubectl-pillar on PATH), --kubeconfig, KUBECONFIG
and --context chosen as kubectl chooses them, and the stop and start commands of the plan run
through the real kubectl against the server.  Prints PASS/FAIL per check."""
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
sys.path.insert(0, HERE)
from cluster import Cluster  # noqa: E402
import fixture  # noqa: E402

BIN = os.environ["PILLAR_BIN"]
failed = 0

PLAN = """\
PillarAgent storage-1: 3 volumes, 3 published, 2 connected hosts
Outage budget: 120s (the smallest ctrlLossTmo of a published volume)

PVC               PV      SIZE   CTRL-LOSS-TMO           RECONNECT-DELAY        NODES
default/db-data   pvc-a   1Gi    120s                    5s                     worker-1
shop/media        pvc-b   20Gi   1800s                   10s (kernel default)   worker-2
shop/web-data     pvc-c   5Gi    600s (kernel default)   10s (kernel default)   worker-1

Pods of default/db-data: default/db-0 (StatefulSet db)
Pods of shop/media: shop/thumbnailer (no owner)
Pods of shop/web-data: shop/web-5d8f7-abcde (Deployment web), shop/web-5d8f7-fghij (Deployment web)
"""
WITHIN = PLAN + """
An outage of 60s is within the budget: the workers' kernels keep retrying, and I/O resumes when the storage node is back.
"""
OUTLASTS = PLAN + """
An outage of 900s outlasts the ctrlLossTmo of 2 volumes: their workers' kernels would give up and their filesystems shut down.
  default/db-data (pvc-a): ctrlLossTmo 120s
  shop/web-data (pvc-c): ctrlLossTmo 600s (kernel default)
Before the maintenance, stop the workloads that use them:
  kubectl scale statefulset/db -n default --replicas=0
  kubectl scale deployment/web -n shop --replicas=0
and wait until their VolumeAttachments are gone: kubectl get volumeattachment
After the maintenance, start them again:
  kubectl scale statefulset/db -n default --replicas=3
  kubectl scale deployment/web -n shop --replicas=2
"""
STATUS = re.compile(r"""PillarAgent storage-1: unreachable since \S+Z \(\d+m\d*s? ago; AgentConnected=False HealthCheckFailed\)
ExportsReady: Unknown AgentNotConnected: AgentConnected is not True

PVC               PV      NODES      CTRL-LOSS-TMO           KERNELS GIVE UP   EXPORT
default/db-data   pvc-a   worker-1   120s                    given up          AgentUnavailable
shop/media        pvc-b   worker-2   1800s                   in 1[345]\d\ds +AgentUnavailable
shop/web-data     pvc-c   worker-1   600s \(kernel default\)   in [123]\d\ds +AgentUnavailable
$""")


def check(ok, what, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else "\n" + detail), flush=True)
    failed += not ok


def run(argv, env=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    return r.returncode, r.stdout, r.stderr


def same(what, got, want):
    check(got == want, what, "--- want\n%s--- got\n%s" % (want, got))


def load_kube(env, d):
    path = os.path.join(d, "obj.json")
    json.dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}, open(path, "w"))
    rc, out, err = run(["kubectl", "create", "-f", path], env)
    check(rc == 0, "kubectl create namespace shop", out + err)
    for o in fixture.objects():
        json.dump({k: v for k, v in o.items() if k != "status"}, open(path, "w"))
        rc, out, err = run(["kubectl", "create", "-f", path], env)
        check(rc == 0, "kubectl create %s/%s" % (o["kind"], o["metadata"]["name"]), out + err)
        if "status" not in o:
            continue
        ns = o["metadata"].get("namespace")
        res = o["kind"].lower() + ("." + o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else "")
        rc, out, _ = run(["kubectl", "get", res, o["metadata"]["name"], "-o", "json"] +
                         (["-n", ns] if ns else []), env)
        cur = json.loads(out)
        cur["status"] = o["status"]
        json.dump(cur, open(path, "w"))
        rc, out, err = run(["kubectl", "replace", "--subresource=status", "-f", path], env)
        check(rc == 0, "kubectl replace --subresource=status %s" % o["metadata"]["name"], out + err)


def load_dir(store, d):
    objs = fixture.objects()
    path = os.path.join(d, "objs.json")
    json.dump([{k: v for k, v in o.items() if k != "status"} for o in objs], open(path, "w"))
    rc, out, err = run([BIN, "apply", "-f", path, "--store=dir:" + store])
    check(rc == 0, "pillar-csi apply (embedded store)", out + err)
    json.dump([o for o in objs if "status" in o], open(path, "w"))
    rc, out, err = run([BIN, "apply", "--subresource=status", "-f", path, "--store=dir:" + store])
    check(rc == 0, "pillar-csi apply --subresource=status (embedded store)", out + err)


def check_outputs(name, pre, env=None, post=()):
    """The plan and status of storage-1 through pre (the command, e.g. [BIN]) with the flags
    post after the arguments."""
    def cmd_run(args, env):
        return run(pre + args + list(post), env)
    rc, out, err = cmd_run(["outage-plan", "storage-1"], env)
    same(f"{name}: outage-plan (text)", out + err, PLAN)
    rc, out, err = cmd_run(["outage-plan", "storage-1", "--duration=1m"], env)
    same(f"{name}: outage-plan --duration=1m: within the budget of 120 s", out + err, WITHIN)
    rc, out, err = cmd_run(["outage-plan", "storage-1", "--duration=15m"], env)
    same(f"{name}: outage-plan --duration=15m: two volumes, their owners' commands", out + err, OUTLASTS)
    rc, out, err = cmd_run(["outage-plan", "storage-1", "--duration=45m", "-o", "json"], env)
    doc = json.loads(out) if rc == 0 else {}
    vols = {v["pv"]: v for v in doc.get("volumes", [])}
    check(rc == 0 and doc["kind"] == "OutagePlan" and doc["outageBudgetSeconds"] == 120 and
          doc["durationSeconds"] == 2700 and doc["volumeCount"] == 3 and doc["publishedVolumes"] == 3 and
          doc["connectedHosts"] == 2, f"{name}: -o json: the counts and the budget", out + err)
    check(set(vols) == {"pvc-a", "pvc-b", "pvc-c"} and all(v["atRisk"] for v in vols.values()) and
          vols["pvc-c"]["ctrlLossTmoKernelDefault"] and vols["pvc-c"]["ctrlLossTmoSeconds"] == 600 and
          not vols["pvc-b"]["ctrlLossTmoKernelDefault"] and vols["pvc-b"]["reconnectDelayKernelDefault"] and
          vols["pvc-a"]["claim"] == {"namespace": "default", "name": "db-data"} and
          [p["name"] for p in vols["pvc-c"]["pods"]] == ["web-5d8f7-abcde", "web-5d8f7-fghij"] and
          vols["pvc-c"]["pods"][0]["owner"] == {"kind": "Deployment", "name": "web"},
          f"{name}: -o json --duration=45m: every volume at risk, pods and owners", out + err)
    wl = [(w["kind"], w["namespace"], w["name"], w.get("replicas")) for w in doc.get("workloads", [])]
    check(wl == [("StatefulSet", "default", "db", 3), ("Pod", "shop", "thumbnailer", None),
                 ("Deployment", "shop", "web", 2)] and
          "kubectl delete pod thumbnailer -n shop" in doc["workloads"][1]["note"] and
          "stop" not in doc["workloads"][1], f"{name}: -o json: the workloads, the bare pod's note", out)
    rc, out2, err = cmd_run(["outage-plan", "storage-1", "--duration=45m", "-o", "yaml"], env)
    check(rc == 0 and yaml.safe_load(out2) == doc, f"{name}: -o yaml is the same document", out2 + err)
    rc, out, err = cmd_run(["outage-status", "storage-1"], env)
    check(rc == 0 and STATUS.match(out + err) is not None, f"{name}: outage-status (text)", out + err)
    rc, out, err = cmd_run(["outage-status", "storage-1", "-o", "json"], env)
    doc = json.loads(out) if rc == 0 else {}
    vols = {v["pv"]: v for v in doc.get("volumes", [])}
    check(rc == 0 and doc["kind"] == "OutageStatus" and doc["reachable"] is False and
          doc["exportsReady"]["reason"] == "AgentNotConnected" and vols["pvc-a"]["givenUp"] and
          vols["pvc-a"]["secondsLeft"] == 0 and 150 <= vols["pvc-c"]["secondsLeft"] <= 300 and
          1350 <= vols["pvc-b"]["secondsLeft"] <= 1500 and
          all(v["exportReconciled"] == "AgentUnavailable" for v in vols.values()),
          f"{name}: outage-status -o json: the countdown per volume", out + err)
    rc, out, err = cmd_run(["outage-status", "storage-2"], env)
    check(rc == 0 and out.startswith("PillarAgent storage-2: reachable (AgentConnected=True Dialed)\n"
                                      "ExportsReady: True ExportsServing\n") and
          "default/other   pvc-z   worker-1   30s             -                 Reconciled" in out,
          f"{name}: outage-status of a reachable agent", out + err)
    rc, out, err = cmd_run(["outage-plan", "storage-9"], env)
    check(rc == 1 and err == 'Error from server (NotFound): pillaragents.pillar-csi.bhyoo.com "storage-9" not found\n',
          f"{name}: an unknown agent", out + err)


def kubectl_plugin(c, d):
    bindir = os.path.join(d, "bin")
    os.makedirs(bindir, exist_ok=True)
    os.symlink(BIN, os.path.join(bindir, "kubectl-pillar"))
    env = {k: v for k, v in os.environ.items() if k != "PILLAR_CSI_STORE"}
    env.update(KUBECONFIG=c.kubeconfig, PATH=bindir + ":" + os.environ["PATH"], HOME=os.path.join(d, "home"))
    rc, out, err = run(["kubectl", "plugin", "list"], env)
    check(os.path.join(bindir, "kubectl-pillar") in out, "kubectl plugin list finds kubectl-pillar", out + err)
    check_outputs("kubectl pillar", ["kubectl", "pillar"], env)
    # --context: a kubeconfig whose current context points nowhere
    kc = yaml.safe_load(open(c.kubeconfig))
    good = kc["current-context"]
    kc["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    kc["contexts"].append({"name": "nowhere", "context": {"cluster": "nowhere", "user": kc["contexts"][0]["context"]["user"]}})
    kc["current-context"] = "nowhere"
    two = os.path.join(d, "two-contexts.yaml")
    yaml.safe_dump(kc, open(two, "w"))
    noenv = {k: v for k, v in env.items() if k != "KUBECONFIG"}
    rc, out, err = run(["kubectl", "pillar", "outage-plan", "storage-1", "--kubeconfig=" + two,
                        "--context=" + good], noenv)
    same("kubectl pillar --kubeconfig --context chooses the context", out + err, PLAN)
    rc, out, err = run(["kubectl", "pillar", "outage-plan", "storage-1", "--kubeconfig=" + two], noenv)
    check(rc == 1 and "127.0.0.1:1" in err, "without --context the kubeconfig's current-context is used", out + err)
    rc, out, err = run(["kubectl", "pillar", "outage-plan", "storage-1", "--context=nope"],
                       dict(noenv, KUBECONFIG="/nonexistent:" + two))
    check(rc == 1 and 'nope' in err, "KUBECONFIG: the first existing file; an unknown context is an error", out + err)
    rc, out, err = run(["kubectl", "pillar", "outage-plan", "storage-1", "--duration=ten"], env)
    check(rc == 2 and "--duration takes a duration such as 10m or 1h30m" in err, "a bad --duration", out + err)
    rc, out, err = run(["kubectl", "pillar"], env)
    check(rc == 2 and "outage-plan" in err, "kubectl pillar without a command lists the commands", out + err)
    return env


def run_the_commands(env):
    """The stop and start commands of the plan work as written, through the real kubectl."""
    rc, out, err = run(["kubectl", "pillar", "outage-plan", "storage-1", "--duration=15m", "-o", "json"], env)
    doc = json.loads(out)
    for phase, want in (("stop", {"db": 0, "web": 0}), ("start", {"db": 3, "web": 2})):
        for w in doc["workloads"]:
            rc, out, err = run(shlex.split(w[phase]), env)
            check(rc == 0, f"{w[phase]}", out + err)
        got = {}
        for kind, ns, name in (("statefulset", "default", "db"), ("deployment", "shop", "web")):
            rc, out, err = run(["kubectl", "get", kind, name, "-n", ns, "-o", "jsonpath={.spec.replicas}"], env)
            got[name] = int(out) if rc == 0 and out else None
        same(f"after the {phase} commands: the replicas", got, want)


def main():
    d = sys.argv[1]
    store = os.path.join(d, "store")
    home = os.path.join(d, "home")  # no ~/.kube/config to fall back on
    os.makedirs(home, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in ("PILLAR_CSI_STORE", "KUBECONFIG")}
    base["HOME"] = home
    load_dir(store, d)
    check_outputs("embedded store", [BIN], base, ["--store=dir:" + store])
    check_outputs("embedded store, PILLAR_CSI_STORE", [BIN], dict(base, PILLAR_CSI_STORE="dir:" + store))
    with Cluster() as c:
        env = dict(base, KUBECONFIG=c.kubeconfig)
        load_kube(env, d)
        check_outputs("API server, KUBECONFIG", [BIN], env)
        check_outputs("API server, --kubeconfig", [BIN], base, ["--kubeconfig=" + c.kubeconfig])
        env = kubectl_plugin(c, d)
        run_the_commands(env)
    print("(outage: %d failed)" % failed)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
