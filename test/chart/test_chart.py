#!/usr/bin/python3
"""The Helm chart charts/pillar-csi rendered by test/chart/render (Go text/template + Sprig, as
Helm renders) for the default values and each mTLS mode of deploy.md §9.4, then:
- what deploy.md §2–§7 and §10 fix (names, args, mounts, security, CSIDriver, RBAC) is checked
  on the rendered objects;
- every object validates against Kubernetes' OpenAPI v3 documents (../shared/kube/openapi-v3,
  unknown fields are errors; kubeschema.py) and is created on the test API server (test/kube)
  with fieldValidation=Strict;
- lint.py passes, and each lint rule fails on a chart mutated to break it;
- the renderer itself behaves as Helm's engine on a fixture chart (testdata/fixture);
- every flag the chart passes to pillar-csi is accepted by the binary under test (PILLAR_BIN).
Environment: CHART_RENDER (the renderer binary, default build/chart-render), OPENAPI_DIR.
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "test", "kube"))
import kubeschema  # noqa: E402
import lint  # noqa: E402
from client import Client  # noqa: E402
from cluster import Cluster  # noqa: E402

CHART = os.path.join(REPO, "charts", "pillar-csi")
RENDER = os.environ.get("CHART_RENDER", os.path.join(REPO, "build", "chart-render"))
EXTRACT = os.path.join(REPO, "test", "kube", "builtin-schemas.json")


def openapi_dir():
    """../shared/kube/openapi-v3 beside the checkout (or beside its worktree folder), or OPENAPI_DIR."""
    for d in (os.environ.get("OPENAPI_DIR"), os.path.join(os.path.dirname(REPO), "shared", "kube", "openapi-v3"),
              os.path.join(os.path.dirname(os.path.dirname(REPO)), "shared", "kube", "openapi-v3")):
        if d and os.path.isdir(d):
            return d
    return None


CERT_MANAGER_CRDS = os.path.join(HERE, "cert-manager-crds.yaml")
PROMETHEUS_OPERATOR_CRDS = os.path.join(HERE, "prometheus-operator-crds.yaml")
MONITORING = ["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true",
              "--set", "metrics.prometheusRule.enabled=true"]
NS = "pillar-system"
MODES = {
    "default": [],
    "mtls-secrets": ["--set", "mtls.enabled=true"],
    "mtls-certmanager": ["--set", "mtls.enabled=true", "--set", "mtls.certManager.enabled=true"],
    "mtls-certmanager-issuer": ["--set", "mtls.enabled=true", "--set", "mtls.certManager.enabled=true",
                                "--set", "mtls.certManager.issuerRef.name=corp-ca",
                                "--set", "mtls.certManager.issuerRef.kind=ClusterIssuer"],
    "monitoring": MONITORING,
}
_values_file = None


def temp_file(text):
    fd, path = tempfile.mkstemp(prefix="chart-values-", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def values_file():
    global _values_file
    if _values_file is None:
        _values_file = temp_file("agent:\n  backends:\n  - zfs: {pool: tank}\n  - lvm: {volumeGroup: vg0}\n")
    return _values_file


def render(args=(), chart=CHART, backends=True):
    cmd = [RENDER, "--release-name", "pillar-csi", "--namespace", NS]
    if backends:
        cmd += ["-f", values_file()]
    return subprocess.run(cmd + list(args) + [chart], capture_output=True, text=True, timeout=60)


def objects(args=(), chart=CHART):
    r = render(args, chart)
    if r.returncode != 0:
        raise AssertionError(f"render failed: {r.stderr}")
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def find(objs, kind, name=None):
    out = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    if name is not None:
        if len(out) != 1:
            raise AssertionError(f"{kind} {name}: {len(out)} rendered")
        return out[0]
    return out


def container(obj, name, init=False):
    spec = obj["spec"]["template"]["spec"]
    for c in spec.get("initContainers" if init else "containers") or []:
        if c["name"] == name:
            return c
    raise AssertionError(f"{obj['metadata']['name']}: no container {name}")


class Rendering(unittest.TestCase):
    """deploy.md's contract on the rendered objects."""

    def test_default_objects(self):
        objs = objects()
        got = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
        crds = [("CustomResourceDefinition", f"{p}.pillar-csi.bhyoo.com") for p in
                ("pillaragents", "pillarprotocols", "pillarsnapshots", "pillarstorageclasses", "pillarstores",
                 "pillarvolumestates")]
        want = sorted(crds + [
            ("CSIDriver", "pillar-csi.bhyoo.com"), ("ClusterRole", "pillar-csi-controller"),
            ("ClusterRole", "pillar-csi-node"), ("ClusterRoleBinding", "pillar-csi-controller"),
            ("ClusterRoleBinding", "pillar-csi-node"), ("ConfigMap", "pillar-csi-agent-config"),
            ("DaemonSet", "pillar-csi-agent"), ("DaemonSet", "pillar-csi-node"),
            ("Deployment", "pillar-csi-controller"), ("Role", "pillar-csi-controller"),
            ("RoleBinding", "pillar-csi-controller"), ("Service", "pillar-csi-controller-metrics"),
            ("ServiceAccount", "pillar-csi-agent"), ("ServiceAccount", "pillar-csi-controller"),
            ("ServiceAccount", "pillar-csi-node")])
        self.assertEqual(got, want)
        for o in objs:
            if o["kind"] not in ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "CSIDriver"):
                self.assertEqual(o["metadata"].get("namespace"), NS, o["metadata"]["name"])
        for crd in find(objs, "CustomResourceDefinition"):
            self.assertEqual(crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep")

    def test_controller(self):
        d = find(objects(), "Deployment", "pillar-csi-controller")
        pod = d["spec"]["template"]["spec"]
        self.assertEqual(pod["serviceAccountName"], "pillar-csi-controller")
        self.assertEqual(pod["securityContext"], {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                                  "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}})
        c = container(d, "controller")
        self.assertEqual(c["image"], "pillar-csi:0.1.0")
        self.assertEqual(c["args"], ["controller", "--leader-elect", "--csi-endpoint=unix:///csi/csi.sock",
                                     "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080",
                                     "--agent-default-port=9500", "--v=2"])
        self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "healthz"})
        self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "liveness"})
        self.assertEqual((c["livenessProbe"]["periodSeconds"], c["livenessProbe"]["failureThreshold"]), (20, 5))
        self.assertEqual({p["name"]: p["containerPort"] for p in c["ports"]},
                         {"healthz": 8081, "metrics": 8080, "liveness": 9809})
        self.assertEqual([e["name"] for e in c["env"]], ["POD_NAME", "POD_NAMESPACE", "PILLAR_RECONCILE_INTERVAL"])
        leader = ["--leader-election", "--leader-election-namespace=$(POD_NAMESPACE)", "--timeout=60s"]
        base = ["--csi-address=/csi/csi.sock", "--v=2"]
        capacity = ["--enable-capacity", "--capacity-ownerref-level=2"]
        sidecars = {"csi-provisioner": ("csi-provisioner:v6.3.0", base + ["--extra-create-metadata"] + capacity + leader),
                    "csi-attacher": ("csi-attacher:v4.12.0", base + leader),
                    "csi-resizer": ("csi-resizer:v2.2.1", base + leader),
                    "csi-snapshotter": ("csi-snapshotter:v8.5.0", base + ["--extra-create-metadata"] + leader),
                    "liveness-probe": ("livenessprobe:v2.19.0", base + ["--health-port=9809"])}
        for name, (image, args) in sidecars.items():
            s = container(d, name)
            self.assertEqual(s["image"], "registry.k8s.io/sig-storage/" + image)
            self.assertEqual(s["args"], args, name)
        for c in pod["containers"]:
            self.assertEqual(c["securityContext"], {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                    "capabilities": {"drop": ["ALL"]}}, c["name"])
            self.assertIn({"name": "socket-dir", "mountPath": "/csi"}, c["volumeMounts"], c["name"])

    def test_node(self):
        ds = find(objects(), "DaemonSet", "pillar-csi-node")
        pod = ds["spec"]["template"]["spec"]
        self.assertEqual((pod["hostNetwork"], pod["dnsPolicy"], pod["priorityClassName"],
                          pod["terminationGracePeriodSeconds"]),
                         (True, "ClusterFirstWithHostNet", "system-node-critical", 60))
        init = container(ds, "modprobe", init=True)
        self.assertEqual((init["command"], init["args"]),
                         (["/usr/bin/pillar-csi"], ["modprobe", "nvme_fabrics", "nvme_tcp"]))
        node = container(ds, "node")
        self.assertEqual(node["args"], ["node", "--csi-endpoint=unix:///var/lib/kubelet/plugins/pillar-csi.bhyoo.com/"
                                        "csi.sock", "--node-id=$(NODE_NAME)",
                                        "--kubelet-dir=/var/lib/kubelet", "--metrics-bind-address=:9810", "--v=2"])
        self.assertEqual(node["securityContext"], {"privileged": True, "runAsUser": 0})
        self.assertEqual(node["lifecycle"]["preStop"], {"sleep": {"seconds": 5}})
        vols = {v["name"]: v["hostPath"] for v in pod["volumes"]}
        mounts = {m["mountPath"]: (vols[m["name"]]["path"], vols[m["name"]]["type"], m.get("mountPropagation"))
                  for m in node["volumeMounts"]}
        self.assertEqual(mounts, {
            "/var/lib/kubelet/plugins/pillar-csi.bhyoo.com":
                ("/var/lib/kubelet/plugins/pillar-csi.bhyoo.com", "DirectoryOrCreate", None),
            "/var/lib/kubelet/pods": ("/var/lib/kubelet/pods", "Directory", "Bidirectional"),
            "/var/lib/kubelet/plugins/kubernetes.io/csi":
                ("/var/lib/kubelet/plugins/kubernetes.io/csi", "DirectoryOrCreate", "Bidirectional"),
            "/dev": ("/dev", "Directory", "HostToContainer"), "/sys": ("/sys", "Directory", "HostToContainer"),
            "/etc/nvme": ("/etc/nvme", "DirectoryOrCreate", None),
            "/var/lib/pillar-csi/node": ("/var/lib/pillar-csi/node", "DirectoryOrCreate", None)})
        reg = container(ds, "node-driver-registrar")
        self.assertIn("--kubelet-registration-path=/var/lib/kubelet/plugins/pillar-csi.bhyoo.com/csi.sock", reg["args"])
        self.assertEqual(vols[[m for m in reg["volumeMounts"] if m["mountPath"] == "/registration"][0]["name"]],
                         {"path": "/var/lib/kubelet/plugins_registry", "type": "Directory"})
        self.assertIn("--health-port=9808", container(ds, "liveness-probe")["args"])
        node = container(ds, "node")
        self.assertIn({"name": "metrics", "containerPort": 9810, "protocol": "TCP"}, node["ports"])

    def test_monitoring(self):
        """The Prometheus Operator objects: none by default; with their values, a ServiceMonitor
        for the controller's Service, a PodMonitor each for agent and node, and the alerts of
        files/alerts.yaml in a PrometheusRule."""
        kinds = ("ServiceMonitor", "PodMonitor", "PrometheusRule")
        self.assertEqual([o for o in objects() if o["kind"] in kinds], [])
        objs = objects(MONITORING)
        sm = find(objs, "ServiceMonitor", "pillar-csi-controller")
        svc = find(objs, "Service", "pillar-csi-controller-metrics")
        self.assertEqual(sm["spec"]["selector"]["matchLabels"], svc["spec"]["selector"])
        self.assertEqual(sm["spec"]["endpoints"], [{"port": "metrics", "path": "/metrics", "interval": "30s"}])
        for comp in ("agent", "node"):
            pm = find(objs, "PodMonitor", f"pillar-csi-{comp}")
            ds = find(objs, "DaemonSet", f"pillar-csi-{comp}")
            self.assertEqual(pm["spec"]["selector"]["matchLabels"], ds["spec"]["selector"]["matchLabels"])
            self.assertEqual(pm["spec"]["podMetricsEndpoints"][0]["port"], "metrics")
            self.assertIn("metrics", [p["name"] for p in container(ds, comp)["ports"]])
        rule = find(objs, "PrometheusRule", "pillar-csi-alerts")
        with open(os.path.join(CHART, "files", "alerts.yaml")) as f:
            self.assertEqual(rule["spec"], yaml.safe_load(f))
        self.assertEqual(sorted(r["alert"] for r in rule["spec"]["groups"][0]["rules"]),
                         ["PillarCSIExportRestorePending", "PillarCSIExportsUnreconciled", "PillarCSIPoolAlmostFull",
                          "PillarCSIStorageNodeUnreachable", "PillarCSIVolumePathDown"])
        # a role whose metrics are off gets no monitor
        objs = objects(MONITORING + ["--set", "node.metricsPort=0", "--set", "controller.metricsPort=0"])
        self.assertEqual(sorted(o["metadata"]["name"] for o in objs if o["kind"] in kinds),
                         ["pillar-csi-agent", "pillar-csi-alerts"])

    def test_agent(self):
        objs = objects()
        ds = find(objs, "DaemonSet", "pillar-csi-agent")
        pod = ds["spec"]["template"]["spec"]
        self.assertEqual(pod["nodeSelector"], {"pillar-csi.bhyoo.com/agent-node": "true"})
        self.assertIs(pod["automountServiceAccountToken"], False)
        self.assertIs(find(objs, "ServiceAccount", "pillar-csi-agent")["automountServiceAccountToken"], False)
        self.assertEqual(container(ds, "modprobe", init=True)["args"], ["modprobe", "nvmet", "nvmet_tcp"])
        agent = container(ds, "agent")
        self.assertEqual(agent["args"], ["agent", "--listen-address=:9500", "--config=/etc/pillar-csi/agent/config.json",
                                         "--shutdown-grace-period=5s", "--metrics-bind-address=:9501", "--v=2"])
        self.assertEqual(agent["ports"], [{"name": "grpc", "containerPort": 9500, "hostPort": 9500, "protocol": "TCP"},
                                          {"name": "metrics", "containerPort": 9501, "protocol": "TCP"}])
        off = container(find(objects(["--set", "agent.metricsPort=0"]), "DaemonSet", "pillar-csi-agent"), "agent")
        self.assertIn("--metrics-bind-address=0", off["args"])
        self.assertEqual([p["name"] for p in off["ports"]], ["grpc"])
        self.assertEqual(agent["livenessProbe"], {"tcpSocket": {"port": "grpc"}, "initialDelaySeconds": 10,
                                                  "periodSeconds": 10, "failureThreshold": 6})
        self.assertEqual(agent["securityContext"]["capabilities"], {"add": ["SYS_ADMIN"]})
        paths = {m["mountPath"] for m in agent["volumeMounts"]}
        self.assertEqual(paths, {"/sys/kernel/config", "/dev", "/var/lib/pillar-csi/agent", "/run/lock/lvm",
                                 "/etc/pillar-csi/agent"})
        cm = find(objs, "ConfigMap", "pillar-csi-agent-config")
        self.assertEqual(yaml.safe_load(cm["data"]["config.json"]),
                         {"backends": [{"zfs": {"pool": "tank"}}, {"lvm": {"volumeGroup": "vg0"}}]})

    def test_config_checksum_rolls_agent(self):
        """The checksum annotation is the ConfigMap's sha256 and changes with the backends."""
        def checksum(objs):
            return find(objs, "DaemonSet", "pillar-csi-agent")["spec"]["template"]["metadata"]["annotations"][
                "checksum/config"]
        a = checksum(objects())
        b = checksum(objects(["--set", "agent.initModprobe.enabled=false"]))
        self.assertEqual(a, b)
        path = temp_file("agent:\n  backends:\n  - zfs: {pool: other}\n")
        try:
            c = checksum(objects(["-f", path]))
        finally:
            os.unlink(path)
        self.assertNotEqual(a, c)
        self.assertRegex(a, "^[0-9a-f]{64}$")

    def test_csidriver(self):
        d = find(objects(), "CSIDriver", "pillar-csi.bhyoo.com")
        self.assertEqual(d["spec"], {"attachRequired": True, "podInfoOnMount": True, "fsGroupPolicy": "File",
                                     "volumeLifecycleModes": ["Persistent"], "storageCapacity": True})

    def test_capacity_tracking(self):
        """external-provisioner's capacity tracking: --enable-capacity with the Deployment as owner
        (Pod -> ReplicaSet -> Deployment: --capacity-ownerref-level=2), POD_NAME and NAMESPACE
        from the downward API, and in the release namespace its CSIStorageCapacity objects and
        the ReplicaSet lookup; all of it gone with csiDriver.storageCapacity=false."""
        objs = objects()
        prov = container(find(objs, "Deployment", "pillar-csi-controller"), "csi-provisioner")
        self.assertIn("--enable-capacity", prov["args"])
        self.assertIn("--capacity-ownerref-level=2", prov["args"])
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in prov["env"]}
        self.assertEqual((env["POD_NAME"], env["NAMESPACE"]), ("metadata.name", "metadata.namespace"))
        rules = find(objs, "Role", "pillar-csi-controller")["rules"]
        self.assertIn({"apiGroups": ["storage.k8s.io"], "resources": ["csistoragecapacities"],
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}, rules)
        self.assertIn({"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get"]}, rules)
        cr = {r["metadata"]["name"]: r["rules"] for r in find(objs, "ClusterRole")}["pillar-csi-controller"]
        self.assertTrue(any("" in r["apiGroups"] and "pods" in r["resources"] and "get" in r["verbs"] for r in cr))
        off = objects(["--set", "csiDriver.storageCapacity=false"])
        self.assertIs(find(off, "CSIDriver", "pillar-csi.bhyoo.com")["spec"]["storageCapacity"], False)
        prov = container(find(off, "Deployment", "pillar-csi-controller"), "csi-provisioner")
        self.assertNotIn("--enable-capacity", prov["args"])
        self.assertNotIn("NAMESPACE", [e["name"] for e in prov["env"]])
        self.assertEqual(len(find(off, "Role", "pillar-csi-controller")["rules"]), 1)

    def test_snapshots(self):
        """docs/snapshots.md: the csi-snapshotter sidecar and its RBAC with snapshots.enabled (the
        default), none of it without; the example VolumeSnapshotClass only when asked for."""
        self.assertEqual(find(objects(), "VolumeSnapshotClass"), [])
        off = objects(["--set", "snapshots.enabled=false"])
        names = [c["name"] for c in find(off, "Deployment", "pillar-csi-controller")["spec"]["template"]["spec"]["containers"]]
        self.assertNotIn("csi-snapshotter", names)
        self.assertIn("csi-resizer", names)
        rules = {r["metadata"]["name"]: r["rules"] for r in find(off, "ClusterRole")}["pillar-csi-controller"]
        self.assertFalse(any("snapshot.storage.k8s.io" in r["apiGroups"] for r in rules))
        objs = objects(["--set", "snapshots.volumeSnapshotClass.create=true",
                        "--set", "snapshots.volumeSnapshotClass.default=true"])
        vsc = find(objs, "VolumeSnapshotClass", "pillar-csi-snapshot")
        self.assertEqual((vsc["apiVersion"], vsc["driver"], vsc["deletionPolicy"]),
                         ("snapshot.storage.k8s.io/v1", "pillar-csi.bhyoo.com", "Delete"))
        self.assertEqual(vsc["metadata"]["annotations"], {"snapshot.storage.kubernetes.io/is-default-class": "true"})
        self.assertNotIn("annotations", find(objects(["--set", "snapshots.volumeSnapshotClass.create=true"]),
                                             "VolumeSnapshotClass", "pillar-csi-snapshot")["metadata"])

    def test_rbac(self):
        objs = objects()
        rules = {r["metadata"]["name"]: r["rules"] for r in find(objs, "ClusterRole")}

        def allowed(role, group, resource, verb):
            return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
                       for r in rules[role])
        ctl, node = "pillar-csi-controller", "pillar-csi-node"
        # test/interop/rbac proves each rule in use (or a sidecar's); here: the shape of the result
        for res in ("pillaragents", "pillarstores", "pillarprotocols", "pillarstorageclasses", "pillarvolumestates",
                    "pillarsnapshots"):
            # snapshots: only their status is ever updated (the spec is immutable, no finalizer)
            self.assertEqual(allowed(ctl, "pillar-csi.bhyoo.com", res, "update"), res != "pillarsnapshots")
            self.assertTrue(allowed(ctl, "pillar-csi.bhyoo.com", res + "/status", "update"))
            self.assertFalse(allowed(ctl, "pillar-csi.bhyoo.com", res + "/status", "patch"))
            self.assertFalse(allowed(ctl, "pillar-csi.bhyoo.com", res + "/finalizers", "update"))
            self.assertEqual(allowed(ctl, "pillar-csi.bhyoo.com", res, "delete"),
                             res in ("pillarvolumestates", "pillarsnapshots"))
        # csi-snapshotter's own RBAC (external-snapshotter's rbac-csi-snapshotter.yaml)
        snap = "snapshot.storage.k8s.io"
        for res, verbs in (("volumesnapshotclasses", ("get", "list", "watch")),
                           ("volumesnapshotcontents", ("get", "list", "watch", "update", "patch")),
                           ("volumesnapshotcontents/status", ("update", "patch"))):
            for verb in verbs:
                self.assertTrue(allowed(ctl, snap, res, verb), (res, verb))
        self.assertTrue(allowed(ctl, "", "events", "create") and allowed(ctl, "", "events", "patch"))
        self.assertFalse(allowed(ctl, snap, "volumesnapshotcontents", "delete"))
        self.assertTrue(allowed(ctl, "storage.k8s.io", "volumeattachments/status", "patch"))
        self.assertFalse(allowed(ctl, "", "secrets", "get"), "least privilege: no Secrets")
        self.assertFalse(allowed(ctl, "", "nodes", "delete"))
        self.assertTrue(allowed(ctl, "", "nodes", "patch"), "the agent-node label is a merge patch (deploy.md §10)")
        self.assertFalse(allowed(ctl, "", "nodes", "update"), "a PUT of the Node is never needed")
        self.assertEqual(rules[node], [
            {"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": ["list", "patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}])
        role = find(objs, "Role", ctl)
        self.assertEqual(role["rules"][0], {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                            "verbs": ["get", "list", "watch", "create", "update", "delete"]})
        subjects = {b["metadata"]["name"]: b["subjects"] for b in find(objs, "ClusterRoleBinding")}
        self.assertEqual(subjects[node], [{"kind": "ServiceAccount", "name": node, "namespace": NS}])
        self.assertFalse([o for o in objects(["--set", "rbac.create=false"])
                          if o["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")])

    def test_dhchap(self):
        """docs/authentication.md "Keys": with dhchap.enabled the node plugin may only create Secrets
        (no get, list, watch: no node reads any key back), the controller only lists them, and a
        ValidatingAdmissionPolicy ties a node plugin's Secret to the node of the requesting pod;
        nothing of it by default."""
        def secret_rules(objs):
            return {(o["kind"], o["metadata"]["name"]): r["verbs"] for o in objs
                    if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]
                    if "" in r["apiGroups"] and "secrets" in r["resources"]}
        default = objects()
        self.assertEqual(secret_rules(default), {})
        self.assertFalse([o for o in default if o["kind"].startswith("ValidatingAdmissionPolicy")])
        objs = objects(["--set", "dhchap.enabled=true"])
        self.assertEqual(secret_rules(objs), {("Role", "pillar-csi-controller"): ["list", "delete"],
                                              ("Role", "pillar-csi-node"): ["create"]})
        ctl_rules = find(objs, "ClusterRole", "pillar-csi-controller")["rules"]
        self.assertIn({"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": ["patch"]}, ctl_rules)
        self.assertNotIn({"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": ["patch"]},
                         find(default, "ClusterRole", "pillar-csi-controller")["rules"])
        # the node reads its own CSINode's confirmation by name (a GET)
        get_csinode = {"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": ["get"]}
        self.assertIn(get_csinode, find(objs, "ClusterRole", "pillar-csi-node")["rules"])
        self.assertNotIn(get_csinode, find(default, "ClusterRole", "pillar-csi-node")["rules"])
        rb = find(objs, "RoleBinding", "pillar-csi-node")
        self.assertEqual(rb["subjects"], [{"kind": "ServiceAccount", "name": "pillar-csi-node", "namespace": NS}])
        self.assertEqual(rb["roleRef"]["name"], "pillar-csi-node")
        vap = find(objs, "ValidatingAdmissionPolicy", "pillar-csi-dhchap-node-keys")
        self.assertEqual(vap["spec"]["failurePolicy"], "Fail")
        self.assertEqual(vap["spec"]["matchConstraints"]["resourceRules"],
                         [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["secrets"]}])
        self.assertEqual(vap["spec"]["matchConditions"][0]["expression"],
                         f"request.userInfo.username == 'system:serviceaccount:{NS}:pillar-csi-node'")
        text = json.dumps(vap["spec"])
        for needle in ("request.userInfo.extra['authentication.kubernetes.io/node-name']",
                       "variables.annotations['pillar-csi.bhyoo.com/dhchap-node'] == variables.nodes[0]",
                       "'pillar-csi-dhchap-' + variables.nodes[0] + '-'",
                       "object.type == 'pillar-csi.bhyoo.com/dhchap'"):
            self.assertIn(needle, text)
        binding = find(objs, "ValidatingAdmissionPolicyBinding", "pillar-csi-dhchap-node-keys")
        self.assertEqual(binding["spec"]["policyName"], "pillar-csi-dhchap-node-keys")
        self.assertEqual(binding["spec"]["validationActions"], ["Deny"])
        self.assertEqual(binding["spec"]["matchResources"]["namespaceSelector"],
                         {"matchLabels": {"kubernetes.io/metadata.name": NS}})
        args = container(find(objs, "Deployment", "pillar-csi-controller"), "controller")["args"]
        self.assertIn("--dhchap", args)
        self.assertNotIn("--dhchap-allow-plaintext", args)
        self.assertNotIn("--dhchap", container(find(default, "Deployment", "pillar-csi-controller"),
                                               "controller")["args"])
        args = container(find(objects(["--set", "dhchap.enabled=true", "--set", "dhchap.allowPlaintext=true"]),
                              "Deployment", "pillar-csi-controller"), "controller")["args"]
        self.assertIn("--dhchap-allow-plaintext", args)
        node = container(find(objs, "DaemonSet", "pillar-csi-node"), "node")
        self.assertIn("--dhchap", node["args"])
        self.assertIn("--dhchap-rotate-interval=720h", node["args"])
        self.assertIn({"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                      node["env"])
        self.assertNotIn("--dhchap", container(find(default, "DaemonSet", "pillar-csi-node"), "node")["args"])

    def test_mtls_own_secrets(self):
        objs = objects(MODES["mtls-secrets"])
        self.assertFalse(find(objs, "Certificate") + find(objs, "Issuer"))
        ctl = find(objs, "Deployment", "pillar-csi-controller")
        args = container(ctl, "controller")["args"]
        for flag in ("cert=/etc/pillar-csi/mtls/tls.crt", "key=/etc/pillar-csi/mtls/tls.key",
                     "ca=/etc/pillar-csi/mtls/ca.crt"):
            self.assertIn("--agent-tls-" + flag, args)
        self.assertFalse([a for a in args if a.startswith("--agent-tls-server-name")])
        agent = find(objs, "DaemonSet", "pillar-csi-agent")
        self.assertEqual(container(agent, "agent")["args"][-3:], [
            "--tls-cert=/etc/pillar-csi/mtls/tls.crt", "--tls-key=/etc/pillar-csi/mtls/tls.key",
            "--tls-ca=/etc/pillar-csi/mtls/ca.crt"])
        for obj, cname, secret in ((ctl, "controller", "pillar-controller-mtls"), (agent, "agent", "pillar-agent-mtls")):
            vol = [v for v in obj["spec"]["template"]["spec"]["volumes"] if v["name"] == "mtls"][0]
            self.assertEqual(vol["secret"]["secretName"], secret)
            self.assertIn({"name": "mtls", "mountPath": "/etc/pillar-csi/mtls", "readOnly": True},
                          container(obj, cname)["volumeMounts"])
        named = objects(MODES["mtls-secrets"] + ["--set", "mtls.serverName=agents.example"])
        self.assertIn("--agent-tls-server-name=agents.example",
                      container(find(named, "Deployment", "pillar-csi-controller"), "controller")["args"])

    def test_mtls_cert_manager(self):
        objs = objects(MODES["mtls-certmanager"])
        issuers = {i["metadata"]["name"]: i["spec"] for i in find(objs, "Issuer")}
        self.assertEqual(issuers, {"pillar-csi-mtls-bootstrap": {"selfSigned": {}},
                                   "pillar-csi-mtls-ca": {"ca": {"secretName": "pillar-csi-mtls-ca"}}})
        certs = {c["metadata"]["name"]: c["spec"] for c in find(objs, "Certificate")}
        self.assertEqual(set(certs), {"pillar-csi-mtls-ca", "pillar-csi-controller-mtls", "pillar-csi-agent-mtls"})
        self.assertTrue(certs["pillar-csi-mtls-ca"]["isCA"])
        self.assertEqual(certs["pillar-csi-mtls-ca"]["issuerRef"]["name"], "pillar-csi-mtls-bootstrap")
        dns = f"pillar-csi-agent.{NS}.svc"
        self.assertEqual(certs["pillar-csi-agent-mtls"]["dnsNames"], [dns])
        self.assertIn("server auth", certs["pillar-csi-agent-mtls"]["usages"])
        self.assertIn("client auth", certs["pillar-csi-agent-mtls"]["usages"])
        self.assertIn("client auth", certs["pillar-csi-controller-mtls"]["usages"])
        self.assertNotIn("server auth", certs["pillar-csi-controller-mtls"]["usages"])
        for name in ("pillar-csi-controller-mtls", "pillar-csi-agent-mtls"):
            c = certs[name]
            self.assertEqual((c["secretName"], c["duration"], c["renewBefore"], c["privateKey"]),
                             (name, "2160h", "360h", {"algorithm": "ECDSA", "size": 256}))
            self.assertEqual(c["issuerRef"], {"group": "cert-manager.io", "kind": "Issuer", "name": "pillar-csi-mtls-ca"})
        ctl = find(objs, "Deployment", "pillar-csi-controller")
        self.assertIn("--agent-tls-server-name=" + dns, container(ctl, "controller")["args"])
        vol = [v for v in ctl["spec"]["template"]["spec"]["volumes"] if v["name"] == "mtls"][0]
        self.assertEqual(vol["secret"]["secretName"], "pillar-csi-controller-mtls")

    def test_mtls_cert_manager_own_issuer(self):
        objs = objects(MODES["mtls-certmanager-issuer"])
        self.assertEqual(find(objs, "Issuer"), [])
        certs = find(objs, "Certificate")
        self.assertEqual(sorted(c["metadata"]["name"] for c in certs),
                         ["pillar-csi-agent-mtls", "pillar-csi-controller-mtls"])
        for c in certs:
            self.assertEqual(c["spec"]["issuerRef"], {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "corp-ca"})

    def test_flags_exist(self):
        """Every flag the chart passes to pillar-csi is one the binary under test accepts (PILLAR_BIN)."""
        binary = os.environ.get("PILLAR_BIN", os.path.join(REPO, "build", "pillar-csi"))
        self.assertTrue(os.access(binary, os.X_OK), f"{binary}: build it first (make)")
        helps, checked = {}, 0
        for mode, args in MODES.items():
            for o in objects(args):
                if o["kind"] not in ("Deployment", "DaemonSet"):
                    continue
                pod = o["spec"]["template"]["spec"]
                for c in (pod.get("initContainers") or []) + pod["containers"]:
                    if c.get("command") != ["/usr/bin/pillar-csi"]:
                        continue
                    role = c["args"][0]
                    if role not in helps:
                        r = subprocess.run([binary, role, "--help"], capture_output=True, text=True, timeout=30)
                        helps[role] = set(re.findall(r"(--[a-z][a-z0-9-]*)", r.stdout + r.stderr))
                    for a in c["args"][1:]:
                        if a.startswith("--"):
                            self.assertIn(a.split("=")[0], helps[role], f"{mode}: pillar-csi {role} {a}")
                            checked += 1
        self.assertIn("modprobe", helps)
        self.assertGreater(checked, 20)

    def test_failures(self):
        r = render(backends=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("agent.backends must list at least one backend", r.stderr)
        for bad, what in ((["--set", "controler.replicaCount=2"], "Additional property controler is not allowed"),
                          (["--set", "controller.sidecars.resizer.image=registry.k8s.io/sig-storage/csi-resizer:latest"],
                           "controller.sidecars.resizer.image"),
                          (["--set", "agent.grpcPort=70000"], "agent.grpcPort"),
                          (["--set", "csiDriver.fsGroupPolicy=Any"], "csiDriver.fsGroupPolicy"),
                          (["--kube-version", "v1.33.4"], "chart requires kubeVersion: >=1.34.0-0"),
                          (["--set", "mtls.certManager.enabled=true"], "mtls.certManager.enabled needs mtls.enabled=true")):
            r = render(bad)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn(what, r.stderr, bad)

    def test_install_crds_false(self):
        self.assertEqual(find(objects(["--set", "installCRDs=false"]), "CustomResourceDefinition"), [])

    def test_notes(self):
        out = render(["--notes"] + MODES["mtls-secrets"]).stdout.split("\nNOTES:\n", 1)[1]
        self.assertIn("PillarAgent", out)
        self.assertIn("pillar-controller-mtls and pillar-agent-mtls", out)


def mutate(tmp, rel, old, new):
    path = os.path.join(tmp, rel)
    with open(path) as f:
        text = f.read()
    if old not in text if isinstance(old, str) else not re.search(old, text):
        raise AssertionError(f"mutation target not found in {rel}: {old!r}")
    text = text.replace(old, new, 1) if isinstance(old, str) else re.sub(old, new, text, count=1)
    with open(path, "w") as f:
        f.write(text)


FIXTURE = os.path.join(HERE, "testdata", "fixture")


class Renderer(unittest.TestCase):
    """test/chart/render behaves as Helm's engine (helm.sh/docs/chart_template_guide; pkg/engine):
    objects, Helm's functions, template parse order, partials, NOTES.txt, install order, values."""

    def run_fixture(self, *args):
        return subprocess.run([RENDER, "--release-name", "rel", "--namespace", "ns", *args, FIXTURE],
                              capture_output=True, text=True, timeout=60)

    def test_objects_and_functions(self):
        r = self.run_fixture()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("comment-only", r.stdout)
        self.assertNotIn("notes for", r.stdout)
        sources = re.findall(r"^# Source: (.*)$", r.stdout, re.M)
        self.assertEqual(sources, ["fixture/templates/sa.yaml", "fixture/templates/cm.yaml"],
                         "ServiceAccount before ConfigMap (Helm's install order), partials not rendered")
        sa, cm = [d for d in yaml.safe_load_all(r.stdout) if d]
        self.assertEqual(sa["metadata"]["name"], "hello")
        self.assertEqual(cm["metadata"], {"name": "fixture-rel", "namespace": "ns"})
        self.assertEqual(cm["data"], {
            "chart": "fixture-1.2.3+build.4-9.9", "service": "Helm", "install": "true",
            "kube": "v1.34.0-1-34", "apps": "true",
            "template": "fixture/templates/cm.yaml fixture/templates",
            "tpl": "hello from rel",
            "override": "first",  # _z_override.tpl is parsed before _helpers.tpl: the later parse wins
            "missing": "",  # "<no value>" removed
            "nested": '{"a":1,"b":"two","keep":"yes-please"}', "list": '["x","z"]',
            "yaml": "a: 1\nb: two\nkeep: yes-please",  # toYaml: no final newline
            "fromyaml": "[1,2]", "fromyamlerr": "true",
            "lines": '["one","two",""]', "glob": "files/a.txt ", "lookup": "{}",
            "a.txt": "one\ntwo\n", "b.conf": "b"})
        notes = self.run_fixture("--notes").stdout
        self.assertTrue(notes.endswith("\nNOTES:\nnotes for rel\n"), notes[-80:])

    def test_values(self):
        path = temp_file("nested: {a: null, c: 3}\n")
        try:
            r = self.run_fixture("-f", path, "--set", "nested.b=4", "--set", "list={p,q}")
        finally:
            os.unlink(path)
        cm = [d for d in yaml.safe_load_all(r.stdout) if d][1]
        self.assertEqual(cm["data"]["nested"], '{"b":4,"c":3,"keep":"yes-please"}', "null deletes, maps merge")
        self.assertEqual(cm["data"]["list"], '["p","q"]')

    def test_errors(self):
        r = self.run_fixture("--set", "greeting=")
        self.assertEqual((r.returncode, r.stderr),
                         (1, "Error: execution error at (fixture/templates/sa.yaml:1:10): greeting is required\n"))
        r = self.run_fixture("--kube-version", "1.29.9")
        self.assertEqual(r.stderr, "Error: chart requires kubeVersion: >=1.30.0-0 which is incompatible with "
                                   "Kubernetes v1.29.9\n")
        tmp = tempfile.mkdtemp(prefix="chart-fixture-")
        try:
            shutil.copytree(FIXTURE, os.path.join(tmp, "fixture"))
            with open(os.path.join(tmp, "fixture", "templates", "bad.yaml"), "w") as f:
                f.write("{{ include \"loop\" . }}{{ define \"loop\" }}{{ include \"loop\" . }}{{ end }}")
            r = subprocess.run([RENDER, os.path.join(tmp, "fixture")], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1)
            self.assertIn("rendering templates has a nested reference name: loop", r.stderr)
            with open(os.path.join(tmp, "fixture", "templates", "bad.yaml"), "w") as f:
                f.write("kind: [\n")
            r = subprocess.run([RENDER, os.path.join(tmp, "fixture")], capture_output=True, text=True, timeout=60)
            self.assertIn("YAML parse error on fixture/templates/bad.yaml", r.stderr)
        finally:
            shutil.rmtree(tmp)


class Lint(unittest.TestCase):
    def test_chart_is_clean(self):
        for mode, args in MODES.items():
            with self.subTest(mode=mode):
                self.assertEqual(lint.lint(objects(args)), [])

    def lint_mutated(self, rel, old, new, args=(), drop_schema=False):
        tmp = tempfile.mkdtemp(prefix="chart-mut-")
        try:
            chart = os.path.join(tmp, "pillar-csi")
            shutil.copytree(CHART, chart)
            mutate(chart, rel, old, new)
            if drop_schema:
                r = render(args, chart)
                self.assertEqual(r.returncode, 1, "values.schema.json must refuse the mutation first")
                os.unlink(os.path.join(chart, "values.schema.json"))
            return lint.lint(objects(args, chart))
        finally:
            shutil.rmtree(tmp)

    def test_missing_resource_request_fails(self):
        got = self.lint_mutated("templates/node-daemonset.yaml",
                                "          resources:\n            {{- toYaml $n.sidecars.nodeDriverRegistrar.resources | nindent 12 }}\n", "")
        self.assertEqual(got, ["DaemonSet pillar-csi-node container node-driver-registrar: missing resource request cpu",
                               "DaemonSet pillar-csi-node container node-driver-registrar: missing resource request memory"])

    def test_missing_probe_fails(self):
        got = self.lint_mutated("templates/agent-daemonset.yaml", re.compile(r"          livenessProbe:\n(            .*\n)+"), "")
        self.assertEqual(got, ["DaemonSet pillar-csi-agent container agent: missing livenessProbe"])
        got = self.lint_mutated("templates/controller-deployment.yaml",
                                re.compile(r"          readinessProbe:\n(            .*\n)+"), "")
        self.assertEqual(got, ["Deployment pillar-csi-controller container controller: missing readinessProbe"])

    def test_missing_security_context_fails(self):
        got = self.lint_mutated("templates/node-daemonset.yaml",
                                re.compile(r"(- name: modprobe\n(.*\n)*?)          securityContext:\n(            .*\n)+"), r"\1")
        self.assertEqual(got, ["DaemonSet pillar-csi-node initContainer modprobe: missing securityContext"])

    def test_missing_recommended_label_fails(self):
        got = self.lint_mutated("templates/_helpers.tpl", "app.kubernetes.io/managed-by: {{ .Release.Service }}\n", "")
        self.assertTrue(got)
        self.assertTrue(all(g.endswith("missing recommended label app.kubernetes.io/managed-by") for g in got), got)
        self.assertEqual(len([g for g in got if g.startswith("CSIDriver ")]), 1)
        got = self.lint_mutated("templates/_helpers.tpl", "\napp.kubernetes.io/component: {{ .component }}\n{{- end -}}\n\n"
                                "{{- define \"pillar-csi.componentSelector\"", "\n{{- end -}}\n\n{{- define \"pillar-csi.componentSelector\"")
        self.assertIn("DaemonSet pillar-csi-agent pod template: missing recommended label app.kubernetes.io/component", got)

    def test_latest_tag_fails(self):
        """values.schema.json refuses a latest sidecar tag; without the schema, lint still does."""
        for image, msg in (("registry.k8s.io/sig-storage/csi-attacher:latest", "uses the latest tag"),
                           ("registry.k8s.io/sig-storage/csi-attacher", "has no tag (means latest)")):
            got = self.lint_mutated("values.yaml", "registry.k8s.io/sig-storage/csi-attacher:v4.12.0", image,
                                    drop_schema=True)
            self.assertEqual(got, [f"Deployment pillar-csi-controller container csi-attacher: image {image!r} {msg}"])
        r = render(["--set", "image.tag=latest"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("image.tag", r.stderr)


class OpenAPI(unittest.TestCase):
    """Every rendered object against Kubernetes 1.32's OpenAPI v3 documents, unknown fields as errors."""

    @classmethod
    def setUpClass(cls):
        docs = openapi_dir()
        cls.schemas = kubeschema.Schemas.from_documents(docs) if docs else kubeschema.Schemas.from_extract(EXTRACT)
        print(f"OpenAPI v3 schemas from {docs or EXTRACT}", file=sys.stderr)
        for path in (CERT_MANAGER_CRDS, PROMETHEUS_OPERATOR_CRDS):
            with open(path) as f:
                for crd in yaml.safe_load_all(f):
                    cls.schemas.add_crd(crd)

    def test_extract_is_the_documents(self):
        """test/kube/builtin-schemas.json (the fallback of a clone without ../shared) is exactly what
        test/kube/extract-schemas.py makes of the published documents."""
        docs = openapi_dir()
        if docs is None:
            self.skipTest("skipped (no ../shared/kube/openapi-v3 beside this checkout)")
        spec = importlib.util.spec_from_file_location("extract_schemas",
                                                      os.path.join(REPO, "test", "kube", "extract-schemas.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with open(EXTRACT) as f:
            self.assertEqual(mod.extract(docs), json.load(f))

    def test_every_mode_validates(self):
        for mode, args in MODES.items():
            for o in objects(args):
                with self.subTest(mode=mode, kind=o["kind"], name=o["metadata"]["name"]):
                    self.assertEqual(self.schemas.validate(o), [])

    def test_unknown_field_is_an_error(self):
        d = find(objects(), "Deployment", "pillar-csi-controller")
        container(d, "controller")["readinesProbe"] = container(d, "controller").pop("readinessProbe")
        self.assertEqual(self.schemas.validate(d), ["spec.template.spec.containers[0].readinesProbe: unknown field"])
        c = find(objects(MODES["mtls-certmanager"]), "Certificate", "pillar-csi-agent-mtls")
        c["spec"]["privateKey"]["curve"] = "P-256"
        self.assertEqual(self.schemas.validate(c), ["spec.privateKey.curve: unknown field"])

    def test_go_rules(self):
        ds = find(objects(), "DaemonSet", "pillar-csi-agent")
        container(ds, "agent")["ports"][0]["hostPort"] = 9600
        container(ds, "agent")["volumeMounts"].append({"name": "nope", "mountPath": "/x"})
        self.assertEqual(self.schemas.validate(ds), [
            "spec.template.spec.containers[0].ports[0].hostPort: must match containerPort when hostNetwork is true",
            "spec.template.spec.containers[0].volumeMounts: 'nope' is not a volume of the pod"])


def discovery(client):
    plural = {}
    for path in ["/api/v1"] + [f"/apis/{g['name']}/{v['version']}" for g in client.request("GET", "/apis")[3]["groups"]
                               for v in g["versions"]]:
        gv = path.split("/", 2)[2] if path.startswith("/apis/") else "v1"
        for r in client.request("GET", path)[3]["resources"]:
            if "/" not in r["name"]:
                plural[(gv, r["kind"])] = (path, r["name"], r["namespaced"])
    return plural


def undescribed(schema, path=""):
    """The properties of a CRD schema (through items) without a description, as dotted paths;
    "<root>" when the schema itself has none."""
    out = [] if path or "description" in schema else ["<root>"]
    for name, prop in (schema.get("properties") or {}).items():
        p = f"{path}.{name}" if path else name
        if "description" not in prop:
            out.append(p)
        out += [x for x in undescribed(prop, p) if x != "<root>"]
    if isinstance(schema.get("items"), dict):
        out += [x for x in undescribed(dict(schema["items"], description="-"), path)]
    return out


class CrdDescriptions(unittest.TestCase):
    """Every field of the six kinds carries a description, so `kubectl explain` documents it."""

    CRDS = os.path.join(CHART, "files", "crds")

    def schemas(self):
        for f in sorted(os.listdir(self.CRDS)):
            with open(os.path.join(self.CRDS, f)) as fh:
                crd = yaml.safe_load(fh)
            for v in crd["spec"]["versions"]:
                yield f"{crd['spec']['names']['kind']} {v['name']}", v["schema"]["openAPIV3Schema"]

    def test_every_property_is_described(self):
        kinds = 0
        for kind, schema in self.schemas():
            kinds += 1
            self.assertEqual(undescribed(schema), [], kind)
        self.assertEqual(kinds, 6)

    def test_a_missing_description_is_found(self):
        kind, schema = next(self.schemas())
        s = json.loads(json.dumps(schema))
        del s["properties"]["status"]["properties"]["conditions"]["items"]["properties"]["reason"]["description"]
        del s["description"]
        self.assertEqual(undescribed(s), ["<root>", "status.conditions.reason"], kind)

    def test_kubectl_explain(self):
        """kubectl explain reads the descriptions from the test API server's /openapi/v3."""
        with Cluster() as c:
            env = dict(os.environ, KUBECONFIG=c.kubeconfig)
            for what, want in (("pillaragent.status", "What the controller observed of the agent."),
                               ("pillaragent.status.resolvedAddress", "The ip:port"),
                               ("pillarvolumestate.spec.resolved.protocol.nvmeofTcp.ctrlLossTmo",
                                "ctrl_loss_tmo in seconds"),
                               ("pillarprotocol", "PillarProtocol holds NVMe-oF/TCP transport settings")):
                k = subprocess.run(["kubectl", "explain", what], env=env, capture_output=True, text=True,
                                   timeout=120)
                self.assertEqual((k.returncode, k.stderr), (0, ""), what)
                self.assertIn(want, " ".join(k.stdout.split()), what)
                self.assertNotIn("<no description>", k.stdout, what)


class ApiServer(unittest.TestCase):
    """Each mode's objects created on the test API server (test/kube) with fieldValidation=Strict."""

    def install(self, args):
        with Cluster(crds=[CERT_MANAGER_CRDS, PROMETHEUS_OPERATOR_CRDS]) as c:
            cl = Client(c.port, c.ca, c.admin_token)
            st = cl.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": NS}})[0]
            self.assertEqual(st, 201)
            plural, created = discovery(cl), []
            for o in objects(args):
                if (o["apiVersion"], o["kind"]) not in plural:
                    plural = discovery(cl)  # a CRD created just before
                base, res, namespaced = plural[(o["apiVersion"], o["kind"])]
                path = f"{base}/namespaces/{NS}/{res}" if namespaced else f"{base}/{res}"
                st, hdrs, raw, _ = cl.request("POST", path + "?fieldValidation=Strict&fieldManager=helm", o)
                self.assertEqual((st, hdrs.get("warning")), (201, None),
                                 f"{o['kind']} {o['metadata']['name']}: {raw[:400]!r}")
                created.append((path, o["metadata"]["name"]))
            for path, name in created:
                self.assertEqual(cl.request("GET", f"{path}/{name}")[0], 200, f"{path}/{name}")
            # the server's strict decoding refuses what kubeschema calls an unknown field
            d = find(objects(args), "Deployment", "pillar-csi-controller")
            d["metadata"]["name"] = "strict-check"
            d["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
            st, _, raw, _ = cl.request("POST", f"/apis/apps/v1/namespaces/{NS}/deployments?fieldValidation=Strict", d)
            self.assertEqual(st, 400, raw)
            self.assertIn(b'unknown field \\"spec.template.spec.containers[0].readinesProbe\\"', raw)
            if args == MODES["default"]:
                self.rbac_in_effect(cl)
            return len(created)

    def rbac_in_effect(self, cl):
        """The chart's RBAC objects, as stored in the API, decide what the ServiceAccounts' tokens may do."""
        def token(sa):
            st, _, raw, body = cl.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{sa}/token",
                                          {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
            self.assertEqual(st, 201, raw)
            return body["status"]["token"]
        ctl, node = token("pillar-csi-controller"), token("pillar-csi-node")
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "pillar-csi-controller"},
                 "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15}}
        cases = [(ctl, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", lease, 201),
                 (ctl, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", lease, 403),
                 (ctl, "GET", "/apis/pillar-csi.bhyoo.com/v1alpha1/pillarvolumestates", None, 200),
                 (ctl, "GET", "/apis/storage.k8s.io/v1/volumeattachments", None, 200),
                 (ctl, "GET", f"/api/v1/namespaces/{NS}/secrets", None, 403),
                 (node, "GET", "/apis/storage.k8s.io/v1/csinodes", None, 200),
                 (node, "GET", "/api/v1/persistentvolumes", None, 403),
                 (node, "GET", "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents", None, 403)]
        for tok, method, path, body, want in cases:
            st, _, raw, _ = cl.request(method, path, body, token=tok)
            self.assertEqual(st, want, f"{'controller' if tok == ctl else 'node'} {method} {path}: {raw[:300]!r}")

    def test_default(self):
        self.assertEqual(self.install(MODES["default"]), 21)

    def test_kubectl_create(self):
        """kubectl (client-side schema checks from the server's /openapi/v3, then fieldValidation=Strict)
        creates the rendered stream as it is; the CRDs are already served, so installCRDs=false."""
        r = render(["--set", "installCRDs=false"])
        self.assertEqual(r.returncode, 0, r.stderr)
        with Cluster() as c:
            env = dict(os.environ, KUBECONFIG=c.kubeconfig)
            ns = f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"
            for stream in (ns, r.stdout):
                k = subprocess.run(["kubectl", "create", "--validate=strict", "-f", "-"], input=stream, env=env,
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual((k.returncode, k.stderr), (0, ""))
            self.assertEqual(len(k.stdout.splitlines()), 15, k.stdout)
            self.assertIn("deployment.apps/pillar-csi-controller created", k.stdout)

    def test_mtls_secrets(self):
        self.assertEqual(self.install(MODES["mtls-secrets"]), 21)

    def test_mtls_cert_manager(self):
        self.assertEqual(self.install(MODES["mtls-certmanager"]), 26)

    def test_mtls_cert_manager_issuer(self):
        self.assertEqual(self.install(MODES["mtls-certmanager-issuer"]), 23)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        if _values_file:
            os.unlink(_values_file)
