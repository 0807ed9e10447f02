#!/usr/bin/python3
"""RBAC proven by use (issue 13): the chart's own Roles and ClusterRoles, rendered by test/chart,
decide what the controller and node may do on the test API server while they run the component
flow (flow.py); then each rule is taken away in turn.

1. The flow with the chart's RBAC passes, and no request of ours is refused.
2. Every rule the chart grants our ServiceAccounts, one verb of one resource at a time:
   - a rule our roles used in step 1 must be needed: the flow is run again without it and must
     fail (a step fails, and the API server refused a request of ours: a failure without a
     refusal is a timing fault, run once more);
   - a rule our roles did not use must be one a sidecar of the same ServiceAccount needs
     (SIDECARS, from each sidecar's deploy/kubernetes/rbac.yaml upstream); any other rule is a
     finding (no step needs it).

3. With dhchap.enabled (DHCHAP_RBAC_YAML, docs/authentication.md "Keys"): the node plugin's token
   creates a DH-HMAC-CHAP key Secret and cannot get, list, watch, update, patch or delete any,
   its own or another node's; the controller's token lists and deletes them (and cannot get
   one), and patches a CSINode's annotation (the confirmation), which the node plugin reads
   back by name.  The test
   API server evaluates no ValidatingAdmissionPolicy: that one node cannot create another's
   Secret rests there on the chart's policy (test/chart checks its rendering) and on the
   controller's own checks of each Secret (test_controller_dhchap).

  rbac_suite.py WORK CHART_RBAC_YAML [MUTATIONS [DHCHAP_RBAC_YAML]]
MUTATIONS: "all" (default), N, or TEXT: every rule is classified, but only N of the used rules,
spread evenly over the list, or those whose label ("ClusterRole NAME: RESOURCE VERB") contains
TEXT, are run without it (make interop runs a sample, make rbac-mutations all).
Prints PASS/FAIL per check and "(rbac suite: N passed, M failed)".
"""
import base64
import copy
import json
import os
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flow  # noqa: E402
from flow import Cluster  # noqa: E402

SA = "system:serviceaccount:pillar-csi:"
# What the sidecars in the controller Pod (same ServiceAccount) request: kubernetes-csi's
# external-provisioner, external-attacher, external-resizer deploy/kubernetes/rbac.yaml and
# external-snapshotter deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml (leader
# election on Leases in the release namespace for all four).
SIDECARS = {
    ("", "persistentvolumes"): {"get", "list", "watch", "create", "delete", "patch", "update"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "update"},
    ("", "persistentvolumeclaims/status"): {"patch"},
    ("", "pods"): {"get", "list", "watch"},
    ("", "nodes"): {"get", "list", "watch"},
    # upstream also lists update, which client-go's event recorder never sends (create, then
    # patch) and deploy.md §10 does not grant
    ("", "events"): {"list", "watch", "create", "patch"},
    ("storage.k8s.io", "storageclasses"): {"get", "list", "watch"},
    ("storage.k8s.io", "csinodes"): {"get", "list", "watch"},
    ("storage.k8s.io", "volumeattachments"): {"get", "list", "watch", "patch"},
    ("storage.k8s.io", "volumeattachments/status"): {"patch"},
    ("storage.k8s.io", "volumeattributesclasses"): {"get", "list", "watch"},
    ("coordination.k8s.io", "leases"): {"get", "list", "watch", "create", "update", "delete"},
    # capacity tracking (--enable-capacity, --capacity-ownerref-level=2): pods get is above
    ("storage.k8s.io", "csistoragecapacities"): {"get", "list", "watch", "create", "update", "patch",
                                                 "delete"},
    ("apps", "replicasets"): {"get"},
    # csi-snapshotter; the provisioner reads the VolumeSnapshot a claim's dataSource names
    ("snapshot.storage.k8s.io", "volumesnapshotclasses"): {"get", "list", "watch"},
    ("snapshot.storage.k8s.io", "volumesnapshotcontents"): {"get", "list", "watch", "update", "patch"},
    ("snapshot.storage.k8s.io", "volumesnapshotcontents/status"): {"update", "patch"},
    ("snapshot.storage.k8s.io", "volumesnapshots"): {"get", "list"},
}
failed = passed = 0


def check(ok, what, detail=""):
    global failed, passed
    if ok:
        passed += 1
    else:
        failed += 1
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else f"  [{detail}]"), flush=True)
    return ok


def rule_verbs(docs):
    """(role kind, role name, group, resource, verb) for every verb of every resource of every rule
    of the Roles and ClusterRoles bound to our ServiceAccounts."""
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in docs
             if b["kind"] in ("RoleBinding", "ClusterRoleBinding")}
    out = []
    for d in docs:
        if d["kind"] in ("Role", "ClusterRole") and (d["kind"], d["metadata"]["name"]) in bound:
            for r in d["rules"]:
                for g in r["apiGroups"]:
                    for res in r["resources"]:
                        out += [(d["kind"], d["metadata"]["name"], g, res, v) for v in r["verbs"]]
    return out


def without(docs, rv):
    """docs with one verb of one resource removed from its rule (the rule split as needed)."""
    kind, name, group, res, verb = rv
    docs = copy.deepcopy(docs)
    for d in docs:
        if d["kind"] != kind or d["metadata"]["name"] != name:
            continue
        rules = []
        for r in d["rules"]:
            if group not in r["apiGroups"] or res not in r["resources"] or verb not in r["verbs"]:
                rules.append(r)
                continue
            others = [x for x in r["resources"] if x != res]
            if others:
                rules.append(dict(r, resources=others))
            verbs = [v for v in r["verbs"] if v != verb]
            if verbs:
                rules.append(dict(r, resources=[res], verbs=verbs))
        d["rules"] = rules
    return docs


def requests(log, start):
    """Our ServiceAccounts' authorization decisions logged from byte offset start."""
    with open(log) as f:
        f.seek(start)
        return [a for a in map(json.loads, f) if a["user"].startswith(SA)]


def covers(rv, a, role_sa):
    kind, name, group, res, verb = rv
    if "resource" not in a:  # a non-resource URL (GET /version): public, no rule of the chart
        return False
    full = a["resource"] + ("/" + a["subresource"] if a.get("subresource") else "")
    return (role_sa.get((kind, name)) == a["user"][len(SA):] and a["group"] == group and full == res
            and a["verb"] == verb)


def etcd(c, path, body):
    """One call to etcd's JSON gateway (the test API server's storage)."""
    req = urllib.request.Request(f"http://127.0.0.1:{c.etcd_port}{path}", json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def keys(c):
    """The etcd keys of every stored object."""
    b64 = lambda s: base64.b64encode(s).decode()  # noqa: E731
    got = etcd(c, "/v3/kv/range", {"key": b64(b"/registry/"), "range_end": b64(b"/registry0"),
                                   "keys_only": True})
    return {kv["key"] for kv in got.get("kvs", [])}


def reset(c, keep):
    """Deletes every object the last pass made (the etcd keys not in keep)."""
    for k in keys(c) - keep:
        etcd(c, "/v3/kv/deleterange", {"key": k})


def one_pass(c, work, docs, timeout, keep):
    reset(c, keep)
    start = os.path.getsize(c.authz_log) if os.path.exists(c.authz_log) else 0
    fl = flow.Flow(work, docs, timeout)
    steps = fl.run(c)
    return fl, steps, requests(c.authz_log, start)


def main():
    work, rbac_file = sys.argv[1], sys.argv[2]
    sample = sys.argv[3] if len(sys.argv) > 3 else "all"
    docs = flow.load_rbac(rbac_file)
    role_sa = {}
    for b in docs:
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for s in b["subjects"]:
                role_sa[(b["roleRef"]["kind"], b["roleRef"]["name"])] = s["name"]
    os.makedirs(os.path.join(work, "kube"), exist_ok=True)
    log = os.path.join(work, "authz.log")
    os.environ["PILLAR_KUBE_AUTHZ_LOG"] = log
    t0 = time.monotonic()
    with Cluster(directory=os.path.join(work, "kube")) as c:
        c.authz_log = log
        keep = keys(c)
        fl, steps, reqs = one_pass(c, os.path.join(work, "baseline"), docs, 20, keep)
        for name, ok, detail, at in steps:
            check(ok, f"with the chart's RBAC: {name}", detail)
        refused = sorted({(a["user"][len(SA):], a["verb"], a.get("resource"), a.get("subresource"))
                          for a in reqs if not a["allowed"]})
        check(not refused, f"with the chart's RBAC: no request of ours refused ({len(reqs)} requests, "
              f"{fl.seconds:.1f} s)", refused)
        if not steps or not all(ok for _, ok, _, _ in steps):
            return
        used, sidecar, unneeded = [], [], []
        for rv in rule_verbs(docs):
            if any(covers(rv, a, role_sa) for a in reqs):
                used.append(rv)
            elif role_sa.get(rv[:2]) == "pillar-csi-controller" and rv[4] in SIDECARS.get(rv[2:4], ()):
                sidecar.append(rv)
            else:
                unneeded.append(rv)
        show = lambda rv: f"{rv[0]} {rv[1]}: {rv[3]} {rv[4]}"  # noqa: E731
        print(f"rules used by our roles: {len(used)}; needed only by the sidecars: {len(sidecar)}")
        for rv in sidecar:
            print("  sidecar only: " + show(rv))
        # the sidecars cannot run here: what they need is checked against their upstream RBAC, so
        # that removing one of their rules from the chart fails this suite too
        granted = {rv[2:] for rv in rule_verbs(docs) if role_sa.get(rv[:2]) == "pillar-csi-controller"}
        missing = sorted((g, r, v) for (g, r), vs in SIDECARS.items() for v in vs
                         if (g, r, v) not in granted)
        check(not missing, f"every rule the sidecars need is granted to pillar-csi-controller "
              f"({sum(map(len, SIDECARS.values()))} rules)", missing)
        check(not unneeded, f"every rule of the chart is used by our roles or needed by a sidecar "
              f"({len(used) + len(sidecar)} of {len(used) + len(sidecar) + len(unneeded)})",
              "no step needs: " + "; ".join(map(show, unneeded)))
        if sample == "all":
            runs = used
        elif sample.isdigit():
            runs = [used[i * len(used) // int(sample)] for i in range(min(int(sample), len(used)))]
        else:  # the rules whose label contains it, e.g. "events patch"
            runs = [rv for rv in used if sample in show(rv)]
        for i, rv in enumerate(runs):
            mutation(c, os.path.join(work, f"m{i}"), docs, rv, keep, show(rv))
        if len(sys.argv) > 4:
            dhchap_cases(c, sys.argv[4], keep)
    print(f"({time.monotonic() - t0:.1f} s; {len(runs)} of {len(used)} used rules removed in turn)")


def dhchap_secret(node, gen):
    b64 = lambda t: base64.b64encode(t.encode()).decode()  # noqa: E731
    return {"apiVersion": "v1", "kind": "Secret", "type": "pillar-csi.bhyoo.com/dhchap",
            "metadata": {"name": f"pillar-csi-dhchap-{node}-{gen}", "namespace": flow.NS,
                         "labels": {"pillar-csi.bhyoo.com/dhchap": "host-keys"},
                         "annotations": {"pillar-csi.bhyoo.com/dhchap-node": node,
                                         "pillar-csi.bhyoo.com/dhchap-generation": str(gen)}},
            "data": {"hostNQN": b64(flow.HOST_NQN),
                     "key": b64("DHHC-1:01:87YWYvNzas5i06zu/TTeHdORutGuVSnRxrGxeu6cLtwfL5KR:"),
                     "ctrlKey": b64("DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:")}}


def dhchap_cases(c, rbac_file, keep):
    """Step 3: the Secrets of the DH-HMAC-CHAP keys under the chart's RBAC with dhchap.enabled."""
    from client import Client
    reset(c, keep)
    api = Client(c.port, c.ca, c.admin_token)
    api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": flow.NS}})
    for o in flow.load_rbac(rbac_file):
        group, _, version = o["apiVersion"].rpartition("/")
        plural = o["kind"].lower() + "s"
        ns = o["metadata"].get("namespace")
        st = api.request("POST", f"/apis/{group}/{version}" + (f"/namespaces/{ns}" if ns else "")
                         + f"/{plural}", o)[0]
        if not check(st == 201, f"dhchap: {o['kind']} {o['metadata']['name']} created", st):
            return
    node = c.service_account_token(flow.NS, "pillar-csi-node")
    ctl = c.service_account_token(flow.NS, "pillar-csi-controller")
    base = f"/api/v1/namespaces/{flow.NS}/secrets"
    st = api.request("POST", base, dhchap_secret("node-b", 7))[0]  # another node's, by the admin
    check(st == 201, "dhchap: the admin creates node-b's Secret", st)
    st, _, raw, _ = api.request("POST", base, dhchap_secret("node-a", 5), token=node)
    check(st == 201, "dhchap: the node plugin creates its Secret", raw[:200])
    sel = "?labelSelector=pillar-csi.bhyoo.com%2Fdhchap%3Dhost-keys"
    for what, method, path, body in (
            ("get its own", "GET", f"{base}/pillar-csi-dhchap-node-a-5", None),
            ("get another node's", "GET", f"{base}/pillar-csi-dhchap-node-b-7", None),
            ("list", "GET", base + sel, None),
            ("list in every namespace", "GET", "/api/v1/secrets" + sel, None),
            ("update its own", "PUT", f"{base}/pillar-csi-dhchap-node-a-5", dhchap_secret("node-a", 5)),
            ("patch another node's", "PATCH", f"{base}/pillar-csi-dhchap-node-b-7", {"data": {}}),
            ("delete another node's", "DELETE", f"{base}/pillar-csi-dhchap-node-b-7", None)):
        hdrs = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else None
        st, _, raw, _ = api.request(method, path, body, headers=hdrs, token=node)
        check(st == 403 and b"DHHC" not in raw, f"dhchap: the node plugin cannot {what} (403)", st)
    st, events = api.watch(base + sel + "&watch=true", timeout=3, token=node)
    objects = [e for e in events if e.get("type") in ("ADDED", "MODIFIED", "DELETED")]
    check(st == 403 and not objects, "dhchap: the node plugin cannot watch (403)", (st, events[:1]))
    st, _, _, got = api.request("GET", base + sel, token=ctl)
    names = sorted(i["metadata"]["name"] for i in (got or {}).get("items", []))
    check(st == 200 and names == ["pillar-csi-dhchap-node-a-5", "pillar-csi-dhchap-node-b-7"],
          "dhchap: the controller lists the key Secrets", (st, names))
    st = api.request("GET", f"{base}/pillar-csi-dhchap-node-a-5", token=ctl)[0]
    check(st == 403, "dhchap: the controller cannot get one (list is all it needs)", st)
    st = api.request("DELETE", f"{base}/pillar-csi-dhchap-node-b-7", token=ctl)[0]
    check(st == 200, "dhchap: the controller deletes an older generation", st)
    api.request("POST", "/apis/storage.k8s.io/v1/csinodes",
                {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-a"},
                 "spec": {"drivers": []}})
    st = api.request("PATCH", "/apis/storage.k8s.io/v1/csinodes/node-a",
                     {"metadata": {"annotations": {"pillar-csi.bhyoo.com/dhchap-generation": "5"}}},
                     headers={"Content-Type": "application/merge-patch+json"}, token=ctl)[0]
    check(st == 200, "dhchap: the controller annotates a CSINode with the installed generation", st)
    st, _, raw, got = api.request("GET", "/apis/storage.k8s.io/v1/csinodes/node-a", token=node)
    gen = ((got or {}).get("metadata") or {}).get("annotations", {}).get("pillar-csi.bhyoo.com/dhchap-generation")
    check(st == 200 and gen == "5", "dhchap: the node plugin reads its CSINode's confirmation by name", (st, raw[:200]))
    st = api.request("GET", "/api/v1/nodes/node-a", token=node)[0]
    check(st in (200, 404), "dhchap: the node plugin may get its Node (the rotation request)", st)
    print("note: the test API server evaluates no ValidatingAdmissionPolicy; the chart's policy "
          "pillar-csi-dhchap-node-keys (test/chart) keeps a node from creating another's Secret")


def mutation(c, work, docs, rv, keep, label):
    for attempt in (1, 2):
        fl, steps, reqs = one_pass(c, f"{work}-{attempt}", without(docs, rv), 12, keep)
        bad = [(n, d) for n, ok, d, _ in steps if not ok]
        refused = [a for a in reqs if not a["allowed"]]
        if bad and refused:
            check(True, f"without {label}: the flow fails at \"{bad[0][0]}\" ({fl.seconds:.1f} s)")
            return
        # a list or watch feeds a reconciler's cache, which reads through while its list is
        # refused (store/cache): the flow then passes, slower, and the rule is used only if our
        # roles' requests for it were refused
        if not bad and rv[4] in ("list", "watch") and any(
                a.get("resource") == rv[3] and a.get("verb") == rv[4] for a in refused):
            check(True, f"without {label}: the flow passes reading through, the rule's "
                  f"{len(refused)} requests refused")
            return
        if not bad:
            check(False, f"without {label}: the flow still passes (a rule our roles use but no step needs)",
                  f"{len(refused)} requests refused")
            return
    check(False, f"without {label}: the flow failed but nothing was refused (timing?)", bad[:1])


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash of the suite is a failure, not a pass
        import traceback
        traceback.print_exc()
        check(False, "the suite ran to the end", repr(e))
    print(f"(rbac suite: {passed} passed, {failed} failed)")
    sys.exit(1 if failed else 0)
