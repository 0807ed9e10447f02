#!/usr/bin/python3
"""Behaviour tests of the test API server on a real etcd, and kubectl against it (the operator
page's commands, ../shared/seed/maintain-nodes.txt and spec/operations.md)."""
import json
import os
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from client import Client  # noqa: E402
from cluster import Cluster, kubectl_minor  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KUBECTL_MINOR = kubectl_minor()


def needs_kubectl(minor, feature):
    """Skip (reported as skipped, never as passed) where the kubectl on PATH predates a feature."""
    return unittest.skipIf(KUBECTL_MINOR < minor, f"kubectl 1.{KUBECTL_MINOR} has no {feature} (1.{minor}+)")
PA = "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents"
PVST = "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarvolumestates"
C = None


def setUpModule():
    global C, K
    C = Cluster(rbac=[os.path.join(HERE, "testdata", "rbac-reader.yaml")]).__enter__()
    K = Client(C.port, C.ca, C.admin_token)


def tearDownModule():
    C.__exit__(None, None, None)


def agent(name, **spec):
    return {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarAgent", "metadata": {"name": name},
            "spec": spec or {"nodeRef": {"name": name}}}


def compact(rev):
    """Compact etcd at rev (what `etcdctl compact` does), through its JSON gateway."""
    req = urllib.request.Request(f"http://127.0.0.1:{C.etcd_port}/v3/kv/compaction",
                                 json.dumps({"revision": str(rev), "physical": True}).encode())
    urllib.request.urlopen(req, timeout=10).read()


def kubectl(*args, stdin=None, kubeconfig=None):
    p = subprocess.run(["kubectl", f"--kubeconfig={kubeconfig or C.kubeconfig}", *args], input=stdin, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


class Core(unittest.TestCase):
    def test_crud_and_resource_version(self):
        st, _, _, obj = K.request("POST", PA, agent("crud-1"))
        self.assertEqual(st, 201)
        rv = int(obj["metadata"]["resourceVersion"])
        self.assertEqual(obj["spec"]["nodeRef"]["addressType"], "InternalIP")  # CRD default
        self.assertEqual(obj["metadata"]["generation"], 1)
        st, _, _, got = K.request("GET", f"{PA}/crud-1")
        self.assertEqual((st, got["metadata"]["resourceVersion"]), (200, str(rv)))
        got["spec"]["nodeRef"]["port"] = 9600
        st, _, _, upd = K.request("PUT", f"{PA}/crud-1", got)
        self.assertEqual(st, 200)
        self.assertGreater(int(upd["metadata"]["resourceVersion"]), rv)
        self.assertEqual(upd["metadata"]["generation"], 2)
        st, _, _, err = K.request("PUT", f"{PA}/crud-1", got)  # stale resourceVersion
        self.assertEqual((st, err["reason"]), (409, "Conflict"))
        # a no-op write keeps the resourceVersion
        st, _, _, same = K.request("PUT", f"{PA}/crud-1", upd)
        self.assertEqual(same["metadata"]["resourceVersion"], upd["metadata"]["resourceVersion"])
        st, _, _, s = K.request("DELETE", f"{PA}/crud-1")
        self.assertEqual((st, s["status"]), (200, "Success"))
        self.assertEqual(K.request("GET", f"{PA}/crud-1")[0], 404)

    def test_status_subresource(self):
        st, _, _, obj = K.request("POST", PA, dict(agent("st-1"), status={"agentVersion": "x"}))
        self.assertNotIn("status", obj)  # create cannot set status
        obj["status"] = {"agentVersion": "1.0"}
        obj["spec"]["nodeRef"]["port"] = 1234
        st, _, _, s = K.request("PUT", f"{PA}/st-1/status", obj)
        self.assertEqual(st, 200)
        self.assertEqual(s["status"]["agentVersion"], "1.0")
        self.assertNotIn("port", s["spec"]["nodeRef"])  # spec ignored on /status
        self.assertEqual(s["metadata"]["generation"], 1)
        st, _, _, m = K.request("PATCH", f"{PA}/st-1", {"status": {"agentVersion": "2.0"}},
                                {"Content-Type": "application/merge-patch+json"})
        self.assertEqual(m["status"]["agentVersion"], "1.0")  # status ignored on the main resource

    def test_validation(self):
        st, _, _, e = K.request("POST", PA, agent("bad-x", nodeRef={"name": "a"}, external={"address": "1.2.3.4", "port": 1}))
        self.assertEqual((st, e["details"]["causes"][0]["field"]), (422, "spec"))
        st, _, _, e = K.request("POST", PA, agent("bad-y", external={"address": "not-ip", "port": 1}))
        self.assertIn("spec.external.address must be an IP address", e["message"])
        K.request("POST", PA, agent("imm-1"))
        st, _, _, e = K.request("PATCH", f"{PA}/imm-1", {"spec": {"nodeRef": {"name": "other"}}},
                                {"Content-Type": "application/merge-patch+json"})
        self.assertEqual(st, 422)
        self.assertIn("spec.nodeRef.name is immutable", e["message"])
        st, h, _, o = K.request("POST", PA, dict(agent("unk-1"), spec={"nodeRef": {"name": "u"}, "bogus": 1}))
        self.assertEqual(st, 201)
        self.assertNotIn("bogus", o["spec"])
        self.assertIn('unknown field \\"spec.bogus\\"', h.get("warning", ""))

    def test_json_patch_test_op(self):
        K.request("POST", PA, agent("jp-1"))
        ops = [{"op": "test", "path": "/spec/nodeRef/name", "value": "wrong"},
               {"op": "replace", "path": "/spec/nodeRef/addressType", "value": "ExternalIP"}]
        st, _, _, e = K.request("PATCH", f"{PA}/jp-1", ops, {"Content-Type": "application/json-patch+json"})
        self.assertEqual((st, e["reason"]), (422, "Invalid"))
        ops[0]["value"] = "jp-1"
        st, _, _, o = K.request("PATCH", f"{PA}/jp-1", ops, {"Content-Type": "application/json-patch+json"})
        self.assertEqual((st, o["spec"]["nodeRef"]["addressType"]), (200, "ExternalIP"))

    def test_finalizers(self):
        o = agent("fin-x")
        o["metadata"]["finalizers"] = ["pillar-csi.bhyoo.com/pillar-agent-protection"]
        K.request("POST", PA, o)
        st, _, _, d = K.request("DELETE", f"{PA}/fin-x")
        self.assertEqual(st, 200)
        self.assertIn("deletionTimestamp", d["metadata"])
        self.assertEqual(d["metadata"]["generation"], 2)
        st, _, _, _ = K.request("PATCH", f"{PA}/fin-x", {"metadata": {"finalizers": None}},
                                {"Content-Type": "application/merge-patch+json"})
        self.assertEqual(st, 200)
        self.assertEqual(K.request("GET", f"{PA}/fin-x")[0], 404)

    def test_delete_preconditions(self):
        _, _, _, o = K.request("POST", PA, agent("pre-1"))
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "0000"}}
        self.assertEqual(K.request("DELETE", f"{PA}/pre-1", body)[0], 409)
        body["preconditions"] = {"uid": o["metadata"]["uid"], "resourceVersion": "1"}
        self.assertEqual(K.request("DELETE", f"{PA}/pre-1", body)[0], 409)
        body["preconditions"]["resourceVersion"] = o["metadata"]["resourceVersion"]
        self.assertEqual(K.request("DELETE", f"{PA}/pre-1", body)[0], 200)

    def test_list_pagination_and_selectors(self):
        for i in range(3):
            o = agent(f"page-{i}")
            o["metadata"]["labels"] = {"set": "page", "n": str(i)}
            K.request("POST", PA, o)
        names, cont, rvs = [], "", set()
        while True:
            st, _, _, l = K.request("GET", f"{PA}?limit=1&labelSelector=set%3Dpage" + (f"&continue={cont}" if cont else ""))
            self.assertEqual(st, 200)
            names += [i["metadata"]["name"] for i in l["items"]]
            rvs.add(l["metadata"]["resourceVersion"])
            cont = l["metadata"]["continue"]
            if not cont:
                break
        self.assertEqual(names, ["page-0", "page-1", "page-2"])
        self.assertEqual(len(rvs), 1)
        st, _, _, l = K.request("GET", f"{PA}?labelSelector=n%20in%20(0,2)")
        self.assertEqual([i["metadata"]["name"] for i in l["items"]], ["page-0", "page-2"])
        self.assertEqual(K.request("GET", f"{PA}?fieldSelector=spec.x%3D1")[0], 400)
        st, _, _, l = K.request("GET", f"{PA}?fieldSelector=metadata.name%3Dpage-1")
        self.assertEqual([i["metadata"]["name"] for i in l["items"]], ["page-1"])

    def test_list_pagination_in_a_namespace(self):
        """A namespaced list continues in its namespace: every page, in name order."""
        cms = "/api/v1/namespaces/default/configmaps"
        for i in range(4):
            K.request("POST", cms, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": f"nspage-{i}", "labels": {"set": "nspage"}}})
        for sel in ("", "&labelSelector=set%3Dnspage"):
            names, cont = [], ""
            for _ in range(10):  # a continue that never ends fails below
                st, _, _, l = K.request("GET", f"{cms}?limit=1{sel}" + (f"&continue={cont}" if cont else ""))
                self.assertEqual(st, 200)
                names += [i["metadata"]["name"] for i in l["items"] if i["metadata"]["name"].startswith("nspage-")]
                cont = l["metadata"].get("continue")
                if not cont:
                    break
            self.assertFalse(cont, sel)
            self.assertEqual(names, [f"nspage-{i}" for i in range(4)], sel)

    def test_list_rv0_from_watch_cache(self):
        """resourceVersion=0 is answered as kube-apiserver's watch cache answers it (03i): every item
        whatever the limit, no continue token, the same items as a consistent list, later writes
        included once they arrived, and without a read of etcd."""
        for i in range(3):
            K.request("POST", PA, agent(f"cached-{i}"))
        K.request("GET", f"{PA}?resourceVersion=0")  # the resource's cache starts
        st, _, _, w = K.request("PATCH", f"{PA}/cached-1", {"metadata": {"labels": {"x": "<&>"}}},
                                {"Content-Type": "application/merge-patch+json"})
        self.assertEqual(st, 200)
        deadline = time.time() + 20
        while True:
            st, hdrs, raw, l = K.request("GET", f"{PA}?resourceVersion=0&limit=1")
            _, _, whole, _ = K.request("GET", PA)
            if raw == whole or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(st, 200)
        self.assertEqual(raw, whole)  # byte for byte, escapes included
        self.assertGreaterEqual(len(l["items"]), 3)  # limit=1 ignored
        self.assertEqual(l["metadata"]["continue"], "")
        self.assertNotIn("remainingItemCount", l["metadata"])
        self.assertGreaterEqual(int(l["metadata"]["resourceVersion"]), int(w["metadata"]["resourceVersion"]))
        etcd = C.procs["etcd"]
        os.kill(etcd.pid, signal.SIGSTOP)  # etcd cannot answer: the cache must
        try:
            st, _, raw, _ = K.request("GET", f"{PA}?resourceVersion=0")
        finally:
            os.kill(etcd.pid, signal.SIGCONT)
        self.assertEqual((st, raw), (200, whole))
        st, _, _, sel = K.request("GET", f"{PA}?resourceVersion=0&labelSelector=x")
        self.assertEqual([i["metadata"]["name"] for i in sel["items"]], ["cached-1"])
        K.request("DELETE", f"{PA}/cached-0")
        deadline = time.time() + 20
        while time.time() < deadline:
            _, _, _, l = K.request("GET", f"{PA}?resourceVersion=0")
            if "cached-0" not in [i["metadata"]["name"] for i in l["items"]]:
                break
            time.sleep(0.05)
        self.assertNotIn("cached-0", [i["metadata"]["name"] for i in l["items"]])

    def test_watch_and_compaction(self):
        _, _, _, l = K.request("GET", PA)
        rv = l["metadata"]["resourceVersion"]
        K.request("POST", PA, agent("w-1"))
        K.request("PATCH", f"{PA}/w-1", {"metadata": {"labels": {"a": "b"}}}, {"Content-Type": "application/merge-patch+json"})
        K.request("DELETE", f"{PA}/w-1")
        st, ev = K.watch(f"{PA}?watch=1&resourceVersion={rv}&timeoutSeconds=5", lambda e: len(e) >= 3)
        self.assertEqual(st, 200)
        self.assertEqual([e["type"] for e in ev[:3]], ["ADDED", "MODIFIED", "DELETED"])
        # compact etcd past rv: the watch answers one ERROR event with a 410 Status
        _, _, _, l2 = K.request("GET", PA)
        compact(l2["metadata"]["resourceVersion"])
        st, ev = K.watch(f"{PA}?watch=1&resourceVersion={rv}&timeoutSeconds=5")
        self.assertEqual(st, 200)
        self.assertEqual(len(ev), 1)
        self.assertEqual((ev[0]["type"], ev[0]["object"]["code"], ev[0]["object"]["reason"]), ("ERROR", 410, "Expired"))
        st, _, _, e = K.request("GET", f"{PA}?resourceVersion={rv}&resourceVersionMatch=Exact")
        self.assertEqual((st, e["reason"]), (410, "Expired"))

    def test_strategic_merge_patch_on_builtin(self):
        K.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "smp-1"}})
        patch = {"metadata": {"labels": {"pillar-csi.bhyoo.com/agent-node": "true"}},
                 "spec": {"$setElementOrder/taints": [{"key": "k"}], "taints": [{"key": "k", "effect": "NoSchedule"}]}}
        st, _, _, n = K.request("PATCH", "/api/v1/nodes/smp-1", patch,
                                {"Content-Type": "application/strategic-merge-patch+json"})
        self.assertEqual(st, 200, n)
        self.assertEqual(n["metadata"]["labels"], {"pillar-csi.bhyoo.com/agent-node": "true"})
        self.assertEqual(n["spec"], {"taints": [{"key": "k", "effect": "NoSchedule"}]})

    def test_pod_graceful_deletion(self):
        """kube-apiserver's pod strategy: a pod a node runs stays, terminating, until its kubelet
        deletes it with grace 0 (and the UID precondition); an unscheduled pod goes at once."""
        pods = "/api/v1/namespaces/default/pods"

        def pod(name, **spec):
            return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": dict(containers=[{"name": "app", "image": "app"}], **spec)}
        _, _, _, p = K.request("POST", pods, pod("grace-1", nodeName="worker-1"))
        before = time.time()
        st, _, _, d = K.request("DELETE", f"{pods}/grace-1", {"preconditions": {"uid": p["metadata"]["uid"]}})
        self.assertEqual((st, d["metadata"]["deletionGracePeriodSeconds"]), (200, 30))
        at = time.mktime(time.strptime(d["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        self.assertTrue(before + 28 <= at <= time.time() + 31, (before, at))
        st, _, _, again = K.request("DELETE", f"{pods}/grace-1")
        self.assertEqual((st, again["metadata"]["resourceVersion"]), (200, d["metadata"]["resourceVersion"]))
        self.assertEqual(K.request("GET", f"{pods}/grace-1")[0], 200)
        self.assertEqual(K.request("DELETE", f"{pods}/grace-1", {"gracePeriodSeconds": 5})[3]["metadata"]
                         ["deletionGracePeriodSeconds"], 5)
        wrong = {"gracePeriodSeconds": 0, "preconditions": {"uid": "0000"}}
        self.assertEqual(K.request("DELETE", f"{pods}/grace-1", wrong)[0], 409)
        kubelet = {"gracePeriodSeconds": 0, "preconditions": {"uid": p["metadata"]["uid"]}}
        self.assertEqual(K.request("DELETE", f"{pods}/grace-1", kubelet)[0], 200)
        self.assertEqual(K.request("GET", f"{pods}/grace-1")[0], 404)
        K.request("POST", pods, pod("grace-2", nodeName="worker-1", terminationGracePeriodSeconds=0))
        K.request("POST", pods, pod("grace-3"))
        for name in ("grace-2", "grace-3"):
            self.assertEqual(K.request("DELETE", f"{pods}/{name}")[0], 200)
            self.assertEqual(K.request("GET", f"{pods}/{name}")[0], 404, name)

    def test_namespace_must_exist(self):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"}, "spec": {}}
        st, _, _, e = K.request("POST", "/apis/coordination.k8s.io/v1/namespaces/nowhere/leases", lease)
        self.assertEqual((st, e["message"], e["details"]), (404, 'namespaces "nowhere" not found',
                                                            {"name": "nowhere", "kind": "namespaces"}))
        K.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "somewhere"}})
        self.assertEqual(K.request("POST", "/apis/coordination.k8s.io/v1/namespaces/somewhere/leases", lease)[0], 201)

    def test_auth(self):
        self.assertEqual(K.request("GET", PA, token="not-a-token")[0], 401)
        st, _, _, e = K.request("GET", PA, token="")
        self.assertEqual(st, 403)
        self.assertIn('User \\"system:anonymous\\"', json.dumps(e["message"]))
        self.assertEqual(K.request("GET", "/version", token="")[0], 200)


    def test_http2_alpn(self):
        p = subprocess.run(["curl", "--http2", "-sS", "--cacert", C.ca, "-H", f"Authorization: Bearer {C.admin_token}",
                            "-o", "/dev/null", "-w", "%{http_version} %{http_code}", f"{C.url}/apis/pillar-csi.bhyoo.com/v1alpha1"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.stdout, "2 200", p.stderr)


class Kubectl(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        K.request("POST", PA, agent("storage-9", nodeRef={"name": "storage-9", "port": 9500}))
        cond = lambda t, r: {"type": t, "status": "True", "reason": r, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        K.request("PATCH", f"{PA}/storage-9/status", {"status": {
            "resolvedAddress": "10.0.0.9:9500", "agentVersion": "0.1.0",
            "conditions": [cond("ExportsReady", "ExportsServing"), cond("Ready", "AgentConnected")]}},
            {"Content-Type": "application/merge-patch+json"})
        for n, reason in (("pvc-1", "Reconciled"), ("pvc-2", "ExportSpecMissing")):
            K.request("POST", PVST, {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarVolumeState",
                                     "metadata": {"name": n}, "spec": {
                                         "volumeID": f"storage-9/tank/{n}", "agentVolumeID": f"tank/{n}",
                                         "agentRef": "storage-9", "backendType": "zfs-zvol", "protocolType": "nvmeof-tcp",
                                         "capacityBytes": 1073741824}})
            K.request("PATCH", f"{PVST}/{n}/status", {"status": {"phase": "Ready", "conditions": [
                {"type": "ExportReconciled", "status": "True" if reason == "Reconciled" else "False", "reason": reason,
                 "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                {"Content-Type": "application/merge-patch+json"})

    def test_get_printer_columns(self):
        rc, out, err = kubectl("get", "pillaragent", "storage-9")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "ADDRESS", "AGENT", "READY", "BUDGET", "AGE"])
        self.assertEqual(lines[1].split()[:4], ["storage-9", "10.0.0.9:9500", "0.1.0", "True"])
        rc, out, err = kubectl("get", "pa")
        self.assertEqual(rc, 0, err)
        self.assertIn("storage-9", out)

    def test_jsonpath_condition_reason(self):
        rc, out, err = kubectl("get", "pillaragent", "storage-9", "-o",
                               'jsonpath={.status.conditions[?(@.type=="ExportsReady")].reason}')
        self.assertEqual((rc, out), (0, "ExportsServing"), err)

    def test_custom_columns(self):
        rc, out, err = kubectl("get", "pvst", "-o", 'custom-columns=NAME:.metadata.name,AGENT:.spec.agentRef,'
                               'EXPORT:.status.conditions[?(@.type=="ExportReconciled")].reason')
        self.assertEqual(rc, 0, err)
        self.assertEqual([l.split() for l in out.splitlines()],
                         [["NAME", "AGENT", "EXPORT"], ["pvc-1", "storage-9", "Reconciled"],
                          ["pvc-2", "storage-9", "ExportSpecMissing"]])

    @needs_kubectl(24, "--subresource")
    def test_patch_json_with_test_ops(self):
        rc, out, _ = kubectl("get", "pvst", "pvc-2", "-o", "jsonpath={.metadata.uid} {.metadata.resourceVersion}")
        uid, rv = out.split()
        bad = json.dumps([{"op": "test", "path": "/metadata/uid", "value": "nope"},
                          {"op": "add", "path": "/status/exportSpec", "value": {"bindAddress": "10.0.0.9", "port": 4420, "aclEnabled": False}}])
        rc, out, err = kubectl("patch", "pvst", "pvc-2", "--subresource=status", "--type=json", "-p", bad)
        self.assertNotEqual(rc, 0)
        good = json.dumps([{"op": "test", "path": "/metadata/uid", "value": uid},
                           {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                           {"op": "add", "path": "/status/exportSpec", "value": {"bindAddress": "10.0.0.9", "port": 4420, "aclEnabled": False}}])
        rc, out, err = kubectl("patch", "pvst", "pvc-2", "--subresource=status", "--type=json", "-p", good)
        self.assertEqual(rc, 0, err)
        rc, out, _ = kubectl("get", "pvst", "pvc-2", "-o", "jsonpath={.status.exportSpec.bindAddress}")
        self.assertEqual(out, "10.0.0.9")

    def test_watch_over_http2(self):
        """kubectl watches over HTTP/2 (ALPN h2); events arrive while the stream stays open."""
        p = subprocess.Popen(["kubectl", f"--kubeconfig={C.kubeconfig}", "get", "pa", "--watch-only", "-o", "name",
                              "--request-timeout=20s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(2)
            K.request("POST", PA, agent("watched-1"))
            line = p.stdout.readline()
            self.assertEqual(line.strip(), "pillaragent.pillar-csi.bhyoo.com/watched-1")
        finally:
            p.kill()
            p.communicate()

    def test_watch_headers_before_any_event(self):
        """A watch with nothing to send answers its headers at once over HTTP/2, as kube-apiserver
        flushes them: a client waiting for the response head is not held until the first event."""
        path = "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarstores?labelSelector=none-such"
        rv = K.request("GET", path)[3]["metadata"]["resourceVersion"]  # not compacted: no 410
        t0 = time.time()
        r = subprocess.run(["curl", "-sk", "--http2", "-m", "3", "-D-", "-o", "/dev/null", "-H",
                            f"Authorization: Bearer {C.admin_token}",
                            f"{C.url}{path}&resourceVersion={rv}&watch=1&timeoutSeconds=60"],
                           capture_output=True, text=True, timeout=30)
        self.assertTrue(r.stdout.startswith("HTTP/2 200"), r.stdout)
        self.assertGreaterEqual(time.time() - t0, 2.5)  # the stream stayed open

    def test_node_maintenance_commands(self):
        """The operator page's node commands (maintain-nodes.txt): drain, uncordon, taint and untaint."""
        K.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-9"}})
        rc, out, err = kubectl("drain", "worker-9", "--ignore-daemonsets", "--delete-emptydir-data")
        self.assertEqual(rc, 0, err)
        self.assertIn("node/worker-9 drained", out)
        rc, out, _ = kubectl("get", "nodes", "worker-9")
        self.assertEqual(out.splitlines()[1].split()[:2], ["worker-9", "Unknown,SchedulingDisabled"])
        self.assertEqual(kubectl("uncordon", "worker-9")[0], 0)
        rc, out, err = kubectl("taint", "nodes", "worker-9", "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
        self.assertEqual(rc, 0, err)
        _, _, _, n = K.request("GET", "/api/v1/nodes/worker-9")
        self.assertIn({"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"},
                      n["spec"]["taints"])
        self.assertNotIn("unschedulable", n["spec"])
        rc, out, err = kubectl("taint", "nodes", "worker-9", "node.kubernetes.io/out-of-service-")
        self.assertEqual(rc, 0, err)
        _, _, _, n = K.request("GET", "/api/v1/nodes/worker-9")
        self.assertNotIn("node.kubernetes.io/out-of-service", [t["key"] for t in n["spec"].get("taints", [])])

    def test_get_category_and_builtin(self):
        rc, out, err = kubectl("get", "pillar-csi")
        self.assertEqual(rc, 0, err)
        self.assertIn("pillaragent.pillar-csi.bhyoo.com/storage-9", out)
        self.assertIn("pillarvolumestate.pillar-csi.bhyoo.com/pvc-1", out)
        rc, out, err = kubectl("get", "volumeattachment")
        self.assertEqual(rc, 0, err)


class Rbac(unittest.TestCase):
    """RBAC from the YAML given at start (testdata/rbac-reader.yaml) and from API objects."""

    @classmethod
    def setUpClass(cls):
        K.request("POST", "/api/v1/namespaces/default/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}})
        st, _, _, tr = K.request("POST", "/api/v1/namespaces/default/serviceaccounts/reader/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 3600}})
        cls.token = tr["status"]["token"]
        K.request("POST", PA, agent("rbac-1"))

    def test_rules_from_yaml(self):
        self.assertEqual(K.request("GET", f"{PA}/rbac-1", token=self.token)[0], 200)
        self.assertEqual(K.request("GET", PA, token=self.token)[0], 200)
        st, h, _, e = K.request("GET", PVST, token=self.token)
        self.assertEqual(st, 403)
        self.assertEqual(e["message"], 'pillarvolumestates.pillar-csi.bhyoo.com is forbidden: User '
                         '"system:serviceaccount:default:reader" cannot list resource "pillarvolumestates" in '
                         'API group "pillar-csi.bhyoo.com" at the cluster scope')
        self.assertEqual(h.get("x-content-type-options"), "nosniff")
        st, _, _, e = K.request("PATCH", f"{PA}/rbac-1/status", {"status": {}}, {"Content-Type": "application/merge-patch+json"},
                                token=self.token)
        self.assertEqual(st, 403)
        self.assertIn('cannot patch resource "pillaragents/status"', e["message"])

    def test_rules_from_api_objects(self):
        self.assertEqual(K.request("DELETE", f"{PA}/rbac-1", token=self.token)[0], 403)
        K.request("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                  {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "lease-writer"},
                   "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get"]}]})
        K.request("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                  {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "lease-writer"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease-writer"},
                   "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]})
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l1"},
                 "spec": {"holderIdentity": "a"}}
        self.assertEqual(K.request("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", lease,
                                   token=self.token)[0], 201)
        st, _, _, e = K.request("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", lease,
                                token=self.token)
        self.assertEqual(st, 403)
        self.assertIn('in the namespace "kube-system"', e["message"])

    def test_token_of_recreated_serviceaccount_is_refused(self):
        K.request("POST", "/api/v1/namespaces/default/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gone"}})
        _, _, _, tr = K.request("POST", "/api/v1/namespaces/default/serviceaccounts/gone/token",
                                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
        tok = tr["status"]["token"]
        self.assertEqual(K.request("GET", "/apis/authentication.k8s.io/v1", token=tok)[0], 200)
        K.request("DELETE", "/api/v1/namespaces/default/serviceaccounts/gone")
        K.request("POST", "/api/v1/namespaces/default/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gone"}})
        self.assertEqual(K.request("GET", "/apis/authentication.k8s.io/v1", token=tok)[0], 401)


class AuthCanI(unittest.TestCase):
    @needs_kubectl(26, "auth can-i --subresource")
    def test_kubectl_auth_can_i_with_impersonation(self):
        """kubectl auth can-i (a protobuf SelfSubjectAccessReview) answers from the RBAC rules."""
        sa = "--as=system:serviceaccount:default:reader"
        self.assertEqual(kubectl("auth", "can-i", "list", "pillaragents.pillar-csi.bhyoo.com", sa)[1].strip(), "yes")
        self.assertEqual(kubectl("auth", "can-i", "list", "pillarvolumestates.pillar-csi.bhyoo.com", sa)[1].strip(), "no")
        self.assertEqual(kubectl("auth", "can-i", "patch", "pillaragents.pillar-csi.bhyoo.com", "--subresource=status",
                                 sa)[1].strip(), "no")
        rc, out, err = kubectl("get", "pillarvolumestates", sa)
        self.assertNotEqual(rc, 0)
        self.assertIn('User "system:serviceaccount:default:reader" cannot list resource "pillarvolumestates"', err)


class Restart(unittest.TestCase):
    def test_state_and_watch_survive_an_apiserver_restart(self):
        K.request("POST", "/api/v1/namespaces/default/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}})
        _, _, _, tr = K.request("POST", "/api/v1/namespaces/default/serviceaccounts/reader/token",
                                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
        _, _, _, o = K.request("POST", PA, agent("restart-1"))
        rv = o["metadata"]["resourceVersion"]
        C.stop("apiserver")
        self.assertRaises(OSError, lambda: K.request("GET", PA))
        C.start_apiserver()
        st, _, _, got = K.request("GET", f"{PA}/restart-1")
        self.assertEqual((st, got["metadata"]["uid"]), (200, o["metadata"]["uid"]))
        # a ServiceAccount token issued before the restart is still valid (the signing key is kept)
        self.assertEqual(K.request("GET", f"{PA}/restart-1", token=tr["status"]["token"])[0], 200)
        K.request("DELETE", f"{PA}/restart-1")
        st, ev = K.watch(f"{PA}?watch=1&resourceVersion={rv}&timeoutSeconds=3", lambda e: len(e) >= 1)
        self.assertEqual([e["type"] for e in ev], ["DELETED"])


class ClientCertificate(unittest.TestCase):
    def test_admin_certificate_and_unbound_user(self):
        K.request("POST", PA, agent("cert-1"))
        rc, out, err = kubectl("get", "pa", "cert-1", "-o", "name", kubeconfig=C.cert_kubeconfig)
        self.assertEqual((rc, out.strip()), (0, "pillaragent.pillar-csi.bhyoo.com/cert-1"), err)
        p = subprocess.run(["curl", "-sS", "--cacert", C.ca, "--cert", C.user_cert, "--key", C.user_key,
                            f"{C.url}/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents"], capture_output=True, text=True)
        self.assertIn('User \\"jane\\" cannot list resource', p.stdout)


G = "/apis/pillar-csi.bhyoo.com/v1alpha1"


def obj(kind, name, spec):
    return {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}


class Crds(unittest.TestCase):
    """The CRDs of charts/pillar-csi/files/crds enforce crds.md's defaults, unions, ranges and immutability."""

    def create(self, plural, o):
        return K.request("POST", f"{G}/{plural}", o)

    def patch(self, plural, name, body):
        return K.request("PATCH", f"{G}/{plural}/{name}", body, {"Content-Type": "application/merge-patch+json"})

    def assertInvalid(self, answer, *messages):
        st, _, _, e = answer
        self.assertEqual(st, 422, e)
        for m in messages:
            self.assertIn(m, e["message"])

    def test_pillarstore(self):
        st, _, _, o = self.create("pillarstores", obj("PillarStore", "pst-1", {"agentRef": "a", "backend": {"zfs": {"pool": "tank"}}}))
        self.assertEqual(st, 201, o)
        self.assertEqual(o["spec"]["backend"]["zfs"]["volumeType"], "zvol")
        self.assertInvalid(self.create("pillarstores", obj("PillarStore", "pst-2", {
            "agentRef": "a", "backend": {"zfs": {"pool": "t"}, "lvm": {"volumeGroup": "vg"}}})),
            "spec.backend must set exactly one of zfs or lvm")
        self.assertInvalid(self.create("pillarstores", obj("PillarStore", "pst-3", {
            "agentRef": "a", "backend": {"lvm": {"volumeGroup": "vg", "provisioningMode": "thin"}}})),
            "lvm.provisioningMode thin requires lvm.thinPool")
        self.assertInvalid(self.create("pillarstores", obj("PillarStore", "pst-4", {
            "agentRef": "a", "backend": {"zfs": {"pool": "t", "properties": {"volsize": "1G"}}}})),
            "zfs.properties: volsize is managed by the volume capacity")
        self.assertInvalid(self.patch("pillarstores", "pst-1", {"spec": {"agentRef": "b"}}), "spec.agentRef is immutable")
        self.assertInvalid(self.patch("pillarstores", "pst-1", {"spec": {"backend": {"zfs": {"pool": "other"}}}}),
                           "backend.zfs.pool, parentDataset and volumeType are immutable")
        self.assertInvalid(self.patch("pillarstores", "pst-1", {"spec": {"backend": {"zfs": None, "lvm": {"volumeGroup": "v"}}}}),
                           "spec.backend cannot switch between zfs and lvm")
        st, _, _, o = self.patch("pillarstores", "pst-1", {"spec": {"backend": {"zfs": {"properties": {"compression": "zstd"}}}}})
        self.assertEqual(st, 200, o)

    def test_pillarprotocol(self):
        st, _, _, o = self.create("pillarprotocols", obj("PillarProtocol", "tcp", {"protocol": {"nvmeofTcp": {}}}))
        self.assertEqual(st, 201, o)
        self.assertEqual(o["spec"]["protocol"]["nvmeofTcp"], {"port": 4420, "acl": False})
        self.assertInvalid(self.create("pillarprotocols", obj("PillarProtocol", "none", {"protocol": {}})),
                           "spec.protocol must set exactly one member (nvmeofTcp)")
        self.assertInvalid(self.create("pillarprotocols", obj("PillarProtocol", "q", {"protocol": {"nvmeofTcp": {
            "maxQueueSize": 8, "reconnectDelay": 0, "ctrlLossTmo": -2}}})),
            "should be greater than or equal to 16", "spec.protocol.nvmeofTcp.reconnectDelay", "ctrlLossTmo")
        st, _, _, o = self.create("pillarprotocols", obj("PillarProtocol", "forever", {"protocol": {"nvmeofTcp": {"ctrlLossTmo": -1}}}))
        self.assertEqual(st, 201, o)
        self.assertInvalid(self.patch("pillarprotocols", "tcp", {"spec": {"protocol": {"nvmeofTcp": {"port": 4421}}}}),
                           "spec.protocol.nvmeofTcp.port is immutable")
        self.assertInvalid(self.patch("pillarprotocols", "tcp", {"spec": {"protocol": {"nvmeofTcp": {"acl": True}}}}),
                           "spec.protocol.nvmeofTcp.acl is immutable")
        self.assertEqual(self.patch("pillarprotocols", "tcp", {"spec": {"protocol": {"nvmeofTcp": {"maxQueueSize": 64}}}})[0], 200)

    def test_pillarstorageclass(self):
        st, _, _, o = self.create("pillarstorageclasses", obj("PillarStorageClass", "fast", {"storeRef": "pst-1", "protocolRef": "tcp"}))
        self.assertEqual(st, 201, o)
        self.assertEqual(o["spec"]["storageClass"], {"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
                                                     "allowVolumeExpansion": True})
        self.assertEqual(o["spec"]["filesystem"], {"fsType": "ext4"})
        self.assertInvalid(self.patch("pillarstorageclasses", "fast", {"spec": {"storeRef": "x"}}), "spec.storeRef is immutable")
        self.assertInvalid(self.patch("pillarstorageclasses", "fast", {"spec": {"protocolRef": "x"}}), "spec.protocolRef is immutable")
        self.assertInvalid(self.patch("pillarstorageclasses", "fast", {"spec": {"storageClass": {"name": "other"}}}),
                           "spec.storageClass.name is immutable")
        self.assertInvalid(self.patch("pillarstorageclasses", "fast", {"spec": {"overrides": {"backend": {
            "zfs": {}, "lvm": {}}}}}), "spec.overrides.backend must set at most one of zfs or lvm")
        self.assertInvalid(self.patch("pillarstorageclasses", "fast", {"spec": {"filesystem": {"fsType": "btrfs"}}}),
                           'Unsupported value: "btrfs"')
        st, _, _, o = self.patch("pillarstorageclasses", "fast", {"spec": {"filesystem": {"mountOptions": []},
                                                                           "storageClass": {"reclaimPolicy": "Retain"}}})
        self.assertEqual((st, o["spec"]["filesystem"]["mountOptions"]), (200, []))

    def test_pillaragent_rules(self):
        self.assertInvalid(self.create("pillaragents", obj("PillarAgent", "a" * 64, {"nodeRef": {"name": "n"}})),
                           "PillarAgent name must be a DNS label of at most 63 characters")
        self.assertInvalid(self.create("pillaragents", obj("PillarAgent", "cidr", {"nodeRef": {"name": "n", "addressSelector": "10.0.0.1"}})),
                           "spec.nodeRef.addressSelector must be a CIDR such as 10.0.0.0/24")
        self.create("pillaragents", obj("PillarAgent", "ext-9", {"external": {"address": "2001:db8::1", "port": 9500}}))
        self.assertInvalid(self.patch("pillaragents", "ext-9", {"spec": {"external": None, "nodeRef": {"name": "n"}}}),
                           "spec.nodeRef and spec.external cannot be switched")

    def test_pillarvolumestate_spec_is_immutable(self):
        spec = {"volumeID": "a/zfs-zvol/nvmeof-tcp/tank/v", "agentVolumeID": "tank/v", "agentRef": "a",
                "backendType": "zfs-zvol", "protocolType": "nvmeof-tcp", "capacityBytes": 1 << 30}
        self.assertEqual(self.create("pillarvolumestates", obj("PillarVolumeState", "pvc-imm", spec))[0], 201)
        self.assertInvalid(self.patch("pillarvolumestates", "pvc-imm", {"spec": {"capacityBytes": 2 << 30}}), "spec is immutable")
        self.assertInvalid(self.create("pillarvolumestates", obj("PillarVolumeState", "pvc-bad", dict(spec, backendType="nfs"))),
                           'Unsupported value: "nfs"')
        self.assertEqual(K.request("DELETE", f"{G}/pillarvolumestates/pvc-imm")[0], 200)  # Kubectl lists all pvst

    def test_pillarvolumestate_reconciled_digest(self):
        """status.reconciledDigest (the digest the agent confirmed) is kept, 16 hex digits only."""
        spec = {"volumeID": "a/zfs-zvol/nvmeof-tcp/tank/d", "agentVolumeID": "tank/d", "agentRef": "a",
                "backendType": "zfs-zvol", "protocolType": "nvmeof-tcp", "capacityBytes": 1 << 30}
        st, _, _, o = self.create("pillarvolumestates", obj("PillarVolumeState", "pvc-dig", spec))
        self.assertEqual(st, 201, o)
        try:
            o["status"] = {"phase": "Ready", "reconciledDigest": "0123456789abcdef"}
            st, _, _, got = K.request("PUT", f"{G}/pillarvolumestates/pvc-dig/status", o)
            self.assertEqual((st, got["status"].get("reconciledDigest")), (200, "0123456789abcdef"), got)
            got["status"]["reconciledDigest"] = "0123"
            self.assertInvalid(K.request("PUT", f"{G}/pillarvolumestates/pvc-dig/status", got),
                               "status.reconciledDigest")
        finally:
            K.request("DELETE", f"{G}/pillarvolumestates/pvc-dig")

    def test_printer_columns_of_every_kind(self):
        want = {"pst": ["NAME", "TARGET", "AVAILABLE", "READY", "AGE"], "pstr": ["NAME", "BINDINGS", "READY", "AGE"],
                "psc": ["NAME", "POOL", "PROTOCOL", "STORAGECLASS", "READY", "AGE"],
                "pvst": ["NAME", "PHASE", "TARGET", "BACKEND", "PROTOCOL", "AGE"], "pa": ["NAME", "ADDRESS", "AGENT", "READY", "BUDGET", "AGE"]}
        self.create("pillarstores", obj("PillarStore", "pst-cols", {"agentRef": "a", "backend": {"lvm": {"volumeGroup": "vg"}}}))
        self.create("pillarprotocols", obj("PillarProtocol", "tcp-cols", {"protocol": {"nvmeofTcp": {}}}))
        self.create("pillarstorageclasses", obj("PillarStorageClass", "psc-cols", {"storeRef": "s", "protocolRef": "p"}))
        self.create("pillaragents", obj("PillarAgent", "pa-cols", {"nodeRef": {"name": "n"}}))
        self.create("pillarvolumestates", obj("PillarVolumeState", "pvst-cols", {
            "volumeID": "a/zfs-zvol/nvmeof-tcp/tank/v", "agentVolumeID": "tank/v", "agentRef": "a",
            "backendType": "zfs-zvol", "protocolType": "nvmeof-tcp", "capacityBytes": 1 << 30}))
        try:
            for short, header in want.items():
                rc, out, err = kubectl("get", short)
                self.assertEqual(rc, 0, err)
                self.assertEqual(out.splitlines()[0].split(), header, short)
        finally:
            K.request("DELETE", f"{G}/pillarvolumestates/pvst-cols")  # Kubectl lists every pvst


if __name__ == "__main__":
    unittest.main(verbosity=2)
