#!/usr/bin/python3
"""Secret scan (issue 28's acceptance, docs/authentication.md "Keys"): one full cycle of a
volume whose PillarProtocol asks for DH-HMAC-CHAP, every role at --v=5 on the test API server,
then every key string searched for everywhere it must not be.

  pillar-csi agent       fake configfs root whose host entries have the dhchap_* attributes (as
                         a kernel with CONFIG_NVME_TARGET_AUTH shows them), `file` backend
  pillar-csi controller  --dhchap, --store=kube, resync every second
  pillar-csi node        --dhchap, --store=kube, a fake host tree whose /dev/nvme-fabrics and
                         sysfs answer as the kernel does (fakekernel.py); block volumes, so the
                         stage is a bind mount of the namespace's device node (root)
  this script            kubelet (Node, CSINode, NodeStage/Publish), csi-provisioner and
                         csi-attacher (test/interop/lib/sidecars.py: the requests, the PV, the
                         VolumeAttachment with its attachmentMetadata), the operator's objects

The cycle: the node publishes its keys (Secret) → CreateVolume → ControllerPublishVolume (the
agent's host entry gets the keys) → NodeStageVolume (the keyed connect) → NodePublishVolume →
rotation (`pillar-csi dhchap rotate`; the controller confirms the new generation on the CSINode,
deletes the old Secret, the node re-keys the live controller) → a storage reboot (configfs
emptied, the agent restarted: the restore re-installs the keys) → NodeUnpublish → NodeUnstage →
ControllerUnpublish → DeleteVolume.

The scan: every key (host and controller key of every generation, read from the Secrets and
the node's key file) as its DHHC-1 string, the base64 inside it, the base64 of the string (a
Secret's data), the key bytes' base64 and hex, searched in: every role's log and every CLI
output; every object of every kind in the API server's etcd except Secrets (Events, PVs,
VolumeAttachments, CSINodes, Nodes, PillarVolumeState, PillarAgent, Leases, …); every metric
family of every role's /metrics, scraped after each step; the agent's state directory; the
node's state directory (stage records) except dhchap.key; the kubelet directory; the fake
configfs except the host entries' dhchap_key and dhchap_ctrl_key; the fake sysfs except the
controllers' dhchap_secret and dhchap_ctrl_secret (the kernel's own attributes).  The scanner
is shown able to fail: the same search must find the keys in the allowed places.

  scan_suite.py DIR    prints PASS/FAIL per check and "(secretscan suite: N passed, M failed)"
"""
import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
import controller_suite as cs  # noqa: E402
from client import Client  # noqa: E402
from cluster import Cluster  # noqa: E402
from fakekernel import FakeKernel  # noqa: E402

csi, csig, k8s = cs.csi, cs.csig, cs.k8s
P, GROUP = cs.P, cs.GROUP
NS, NODE = "pillar-csi", "node-a"
HOST_UUID = "5b2e9c1d-7a3f-4e8b-9c6d-2f1a0b3c4d5e"
HOST_NQN = "nqn.2014-08.org.nvmexpress:uuid:" + HOST_UUID
PROBE_NQN = cs.NQN_PREFIX + "auth-probe"
SECRET_PREFIX = "pillar-csi-dhchap-%s-" % NODE
SECTORS = 65536  # 32 MiB
R = cs.rep


class Stop(Exception):
    pass


def step(name, ok, why=""):
    if not R.check(name, ok, why):
        raise Stop(name)
    return ok


def http_get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode(errors="replace")


class Cycle:
    def __init__(self, work, cluster):
        self.work, self.c = work, cluster
        self.env = cs.Env(work)
        self.api = Client(cluster.port, cluster.ca, cluster.admin_token)
        self.keys = {}  # generation -> {"key": ..., "ctrlKey": ...}, every one ever seen
        self.metrics = []  # (role, text) of every scrape
        self.objects_seen = {}  # etcd key -> every value it had at a scrape
        self.files_seen = {}  # file below work -> every content it had at a scrape
        self.cli_out = []
        self.host = os.path.join(work, "host")
        self.kubelet = os.path.join(work, "kubelet")
        self.node_state = os.path.join(work, "node-state")
        self.ports = {r: cs.free_port() for r in ("agent", "controller", "node")}
        self.kernel = None
        self.refused = False

    # ---- API -------------------------------------------------------------------------------------
    def req(self, method, path, body=None, patch=False):
        hdrs = {"Content-Type": "application/merge-patch+json"} if patch else None
        st, _, raw, obj = self.api.request(method, path, body, headers=hdrs)
        if st >= 300:
            raise RuntimeError("%s %s: %s %r" % (method, path, st, raw[:300]))
        return obj

    def get(self, path):
        st, _, _, obj = self.api.request("GET", path)
        return obj if st == 200 else None

    def create(self, obj, plural, ns=None):
        group, _, version = obj["apiVersion"].rpartition("/")
        base = "/apis/%s/%s" % (group, version) if group else "/api/" + version
        return self.req("POST", base + ("/namespaces/%s" % ns if ns else "") + "/" + plural, obj)

    def secrets(self):
        """The node's key Secrets by generation, each one's keys remembered for the scan."""
        items = (self.get("/api/v1/namespaces/%s/secrets" % NS) or {}).get("items", [])
        out = {}
        for s in items:
            name = s["metadata"]["name"]
            if not name.startswith(SECRET_PREFIX):
                continue
            gen = int(name[len(SECRET_PREFIX):])
            keys = {k: base64.b64decode(s["data"][k]).decode() for k in ("key", "ctrlKey")}
            self.keys.setdefault(gen, keys)
            out[gen] = keys
        return out

    def key_file(self):
        try:
            with open(os.path.join(self.node_state, "dhchap.key")) as f:
                k = json.load(f)
        except (OSError, ValueError):
            return None
        for g in ("current", "next"):
            if g in k:
                self.keys.setdefault(k[g]["generation"], {"key": k[g]["key"], "ctrlKey": k[g]["ctrlKey"]})
        return k

    def node_log(self):
        with open(os.path.join(self.env.base, "node.log"), errors="replace") as f:
            return f.read().splitlines()

    def annotation(self, kind, name, key):
        o = self.get(kind + name) or {}
        return (o.get("metadata", {}).get("annotations") or {}).get(key)

    def scrape(self):
        """Every role's /metrics and every API object, as they are now."""
        for k, v in etcd_objects(self.c):
            self.objects_seen.setdefault(k, set()).add(v)
        self.snapshot_files()
        for role, port in self.ports.items():
            try:
                self.metrics.append((role, http_get("http://127.0.0.1:%d/metrics" % port)))
            except OSError as e:
                self.metrics.append((role, "scrape failed: %r" % e))

    # ---- processes -------------------------------------------------------------------------------
    def snapshot_files(self):
        """Every file the scan reads, as it is now (stage records live only while staged)."""
        for p in files(self.work):
            try:
                with open(p, "rb") as f:
                    self.files_seen.setdefault(os.path.relpath(p, self.work), set()).add(f.read())
            except OSError:  # removed meanwhile
                pass

    def host_entry(self, nqn):
        """A host entry as a kernel with CONFIG_NVME_TARGET_AUTH makes it (its defaults)."""
        d = os.path.join(self.env.nvmet, "hosts", nqn)
        os.makedirs(d, exist_ok=True)
        for name, value in (("dhchap_key", "\n"), ("dhchap_ctrl_key", "\n"),
                            ("dhchap_hash", "hmac(sha256)\n"), ("dhchap_dhgroup", "null\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(value)

    def start_agent(self):
        e = self.env
        e.agent_starts += 1
        args = [cs.BIN, "agent", "--listen-address=127.0.0.1:%d" % e.agent_port,
                "--config=" + e.config, "--configfs-root=" + e.cfs, "--state-dir=" + e.state,
                "--host-root=" + os.path.join(self.work, "host-agent"),
                "--metrics-bind-address=127.0.0.1:%d" % self.ports["agent"],
                "--shutdown-grace-period=0s", "--v=5"]
        os.makedirs(os.path.join(self.work, "host-agent", "sys", "module", "nvmet_tcp"), exist_ok=True)
        p = e.procs.start("agent", args, log=os.path.join(self.work, "agent-%d.log" % e.agent_starts))
        return cs.wait_for(lambda: e._connects(e.agent_port) or p.poll() is not None, 15) and p.poll() is None

    def start_controller(self):
        env = dict(os.environ, PILLAR_RECONCILE_INTERVAL="1s", POD_NAMESPACE=NS, POD_NAME="ctl-0")
        p = self.env.procs.start("controller", [
            cs.BIN, "controller", "--csi-endpoint=unix://" + self.env.sock, "--store=kube",
            "--kubeconfig=" + self.c.kubeconfig, "--dhchap", "--dhchap-allow-plaintext",
            "--health-probe-bind-address=127.0.0.1:0",
            "--metrics-bind-address=127.0.0.1:%d" % self.ports["controller"],
            "--kube-api-qps=50", "--kube-api-burst=100", "--v=5"], env=env)
        return cs.wait_for(lambda: os.path.exists(self.env.sock) or p.poll() is not None, 15) and p.poll() is None

    def start_node(self):
        for d in ("etc/nvme", "dev", "sys/module/nvme_tcp", "sys/class/nvme", "sys/class/nvme-subsystem",
                  "sys/block"):
            os.makedirs(os.path.join(self.host, d), exist_ok=True)
        with open(os.path.join(self.host, "etc/nvme/hostnqn"), "w") as f:
            f.write(HOST_NQN + "\n")
        with open(os.path.join(self.host, "etc/nvme/hostid"), "w") as f:
            f.write(HOST_UUID + "\n")
        os.symlink("/proc", os.path.join(self.host, "proc"))
        os.makedirs(self.kubelet, exist_ok=True)
        st = os.stat("/dev/null")  # any device number: the stage binds the node, never opens it
        self.kernel = FakeKernel(self.host, lambda nqn: cs.identity_of(nqn),
                                 "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)), SECTORS)
        self.node_sock = os.path.join(self.work, "node.sock")
        env = dict(os.environ, NODE_NAME=NODE, POD_NAMESPACE=NS, ASAN_OPTIONS="detect_leaks=0")
        p = self.env.procs.start("node", [
            cs.BIN, "node", "--store=kube", "--kubeconfig=" + self.c.kubeconfig,
            "--csi-endpoint=unix://" + self.node_sock, "--state-dir=" + self.node_state,
            "--host-root=" + self.host, "--kubelet-dir=" + self.kubelet, "--dhchap",
            "--dhchap-rotate-interval=0", "--metrics-bind-address=127.0.0.1:%d" % self.ports["node"],
            "--v=5"], env=env)
        return cs.wait_for(lambda: os.path.exists(self.node_sock) or p.poll() is not None, 15) and p.poll() is None

    def cli(self, *args):
        r = subprocess.run([cs.BIN, *args, "--store=kube", "--kubeconfig=" + self.c.kubeconfig, "--v=5"],
                           capture_output=True, text=True, timeout=30)
        self.cli_out.append(" ".join(args) + "\n" + r.stdout + r.stderr)
        return r.returncode, r.stdout + r.stderr

    # ---- the cluster -----------------------------------------------------------------------------
    def objects(self):
        self.req("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": NS}})
        node = self.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {
            "kubernetes.io/hostname": NODE, P + "nvmeof": "true"}}}, "nodes")
        self.create({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {
            "name": NODE, "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": NODE,
                                               "uid": node["metadata"]["uid"]}]},
            "spec": {"drivers": [{"name": k8s.DRIVER, "nodeID": NODE, "topologyKeys": [P + "nvmeof"]}]}},
            "csinodes")
        st = self.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "storage-1"}}, "nodes")
        st["status"] = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}
        self.req("PUT", "/api/v1/nodes/storage-1/status", st)
        for plural, o in (
                ("pillaragents", {"kind": "PillarAgent", "metadata": {"name": cs.AGENT},
                                  "spec": {"nodeRef": {"name": "storage-1", "port": self.env.agent_port}}}),
                ("pillarstores", {"kind": "PillarStore", "metadata": {"name": cs.STORE},
                                  "spec": {"agentRef": cs.AGENT, "backend": {"file": {"pool": cs.POOL}}}}),
                ("pillarprotocols", {"kind": "PillarProtocol", "metadata": {"name": "auth"},
                                     "spec": {"protocol": {"nvmeofTcp": {"port": 4420, "acl": True,
                                                                         "dhchap": {"hash": "sha384"}}}}}),
                ("pillarstorageclasses", {"kind": "PillarStorageClass", "metadata": {"name": "secure"},
                                          "spec": {"storeRef": cs.STORE, "protocolRef": "auth"}})):
            self.create(dict(o, apiVersion=GROUP), plural)

    def sidecar_cluster(self):
        return {"nodes": self.req("GET", "/api/v1/nodes")["items"],
                "csinodes": self.req("GET", "/apis/storage.k8s.io/v1/csinodes")["items"]}

    # ---- the cycle -------------------------------------------------------------------------------
    def start(self):
        self.objects()
        for nqn in (PROBE_NQN, HOST_NQN):
            self.host_entry(nqn)
        step("the agent starts (--v=5) on a fake configfs with authentication", self.start_agent())
        step("the node starts (--dhchap, --v=5) on a fake host", self.start_node())
        step("the controller starts (--dhchap, --v=5)", self.start_controller())

        def ready():
            pa = self.get("/apis/%s/pillaragents/%s" % (GROUP, cs.AGENT))
            return (cs.cond(pa, "Ready")[0] == "True" and
                    ((pa.get("status") or {}).get("capabilities") or {}).get("nvmeTargetAuth") is True and
                    self.get("/apis/storage.k8s.io/v1/storageclasses/secure"))
        self.sc = cs.wait_for(ready, 30)
        step("PillarAgent Ready with nvmeTargetAuth, the StorageClass generated", self.sc,
             (self.get("/apis/%s/pillaragents/%s" % (GROUP, cs.AGENT)) or {}).get("status"))

    def publish_keys(self):
        self.gen1 = cs.wait_for(lambda: max(self.secrets() or [0]), 30)
        step("node: publishes its keys as Secret %s<generation>" % SECRET_PREFIX, self.gen1)
        step("controller: confirms the first generation on the CSINode (no agent admits the node)",
             cs.wait_for(lambda: self.annotation("/apis/storage.k8s.io/v1/csinodes/", NODE,
                                                 P + "dhchap-generation") == str(self.gen1), 30),
             self.get("/apis/storage.k8s.io/v1/csinodes/" + NODE))
        step("node: the confirmed generation becomes current in its key file",
             cs.wait_for(lambda: ((self.key_file() or {}).get("current") or {}).get("generation") == self.gen1, 30),
             self.key_file())

    def create_and_publish(self):
        ch = cs.grpc.insecure_channel("unix://" + self.env.sock)
        self.ctl = csig.ControllerStub(ch)
        self.caps = k8s.Caps(csi, csig.IdentityStub(ch), self.ctl)
        pvc = self.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": "data", "namespace": "default"},
                           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "secure",
                                    "volumeMode": "Block", "resources": {"requests": {"storage": "32Mi"}}}},
                          "persistentvolumeclaims", "default")
        self.cluster = self.sidecar_cluster()
        req = k8s.create_volume(csi, self.caps, self.sc, pvc, self.cluster)
        code, msg, r = cs.call(self.ctl.CreateVolume, req)
        if code == cs.PRECOND and "validates but does not enforce yet" in msg:
            # a release that refuses dhchap volumes (docs/authentication.md "Status in this
            # release"): the scan covers what runs before it
            print("SKIP the cycle from CreateVolume on: this build refuses dhchap volumes (%s)" % msg)
            self.refused = True
            raise Stop("refused")
        step("csi-provisioner CreateVolume of the dhchap volume: OK", code == cs.OK, "%s %s" % (code, msg))
        self.pv = self.create(k8s.pv_of(self.sc, pvc, req, r), "persistentvolumes")
        self.vid = r.volume.volume_id
        code, msg, pr = cs.call(self.ctl.ControllerPublishVolume,
                                k8s.attach(csi, self.caps, self.pv, NODE, self.cluster))
        step("csi-attacher ControllerPublishVolume: OK", code == cs.OK, "%s %s" % (code, msg))
        self.publish_context = dict(pr.publish_context)
        self.va = "csi-" + self.pv["metadata"]["name"]
        va = self.create({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                          "metadata": {"name": self.va},
                          "spec": {"attacher": k8s.DRIVER, "nodeName": NODE,
                                   "source": {"persistentVolumeName": self.pv["metadata"]["name"]}}},
                         "volumeattachments")
        va["status"] = {"attached": True, "attachmentMetadata": self.publish_context}
        self.req("PUT", "/apis/storage.k8s.io/v1/volumeattachments/%s/status" % self.va, va)
        entry = os.path.join(self.env.nvmet, "hosts", HOST_NQN)
        k = self.keys[self.gen1]
        step("agent: the host entry holds the node's keys, hash hmac(sha384)",
             self.env.read(entry, "dhchap_key") == k["key"] and
             self.env.read(entry, "dhchap_ctrl_key") == k["ctrlKey"] and
             self.env.read(entry, "dhchap_hash") == "hmac(sha384)",
             [self.env.read(entry, n) == k.get(m) for n, m in (("dhchap_key", "key"),
                                                              ("dhchap_ctrl_key", "ctrlKey"))])
        self.scrape()

    def paths(self):
        pvn = self.pv["metadata"]["name"]
        base = os.path.join(self.kubelet, "plugins/kubernetes.io/csi/volumeDevices")
        return os.path.join(base, "staging", pvn), os.path.join(base, "publish", pvn,
                                                                 "7d1c3e5a-2b4f-4a6d-8e9f-0a1b2c3d4e5f")

    def stage(self):
        nch = cs.grpc.insecure_channel("unix://" + self.node_sock)
        self.node = csig.NodeStub(nch)
        staging, target = self.paths()
        cap = k8s.pv_capability(csi, self.caps, self.pv)
        ctx = self.pv["spec"]["csi"]["volumeAttributes"]
        code, msg, _ = cs.call(self.node.NodeStageVolume, csi.NodeStageVolumeRequest(
            volume_id=self.vid, publish_context=self.publish_context, staging_target_path=staging,
            volume_capability=cap, volume_context=ctx))
        step("kubelet NodeStageVolume: OK", code == cs.OK, "%s %s" % (code, msg))
        last = self.kernel.connects[-1] if self.kernel.connects else {}
        k = self.keys[self.gen1]
        step("node: connected with its host and controller secrets (bidirectional)",
             last.get("dhchap_secret") == k["key"] and last.get("dhchap_ctrl_secret") == k["ctrlKey"],
             sorted(last))
        code, msg, _ = cs.call(self.node.NodePublishVolume, csi.NodePublishVolumeRequest(
            volume_id=self.vid, publish_context=self.publish_context, staging_target_path=staging,
            target_path=target, volume_capability=cap, volume_context=ctx))
        step("kubelet NodePublishVolume: OK", code == cs.OK, "%s %s" % (code, msg))
        self.scrape()

    def rotate(self):
        rc, out = self.cli("dhchap", "rotate", NODE)
        step("pillar-csi dhchap rotate %s: exit 0" % NODE, rc == 0, out)
        k1 = self.keys[self.gen1]
        # a rotation is two generations, a new host secret and then a new controller secret:
        # the second is the first Secret above gen1 with both secrets new
        self.gen2 = cs.wait_for(lambda: min([g for g, k in self.secrets().items() if g > self.gen1 and
                                             k["key"] != k1["key"] and k["ctrlKey"] != k1["ctrlKey"]] or [0]), 60)
        step("node: publishes the rotation's generations, the last with both secrets new", self.gen2,
             sorted(self.keys))
        k = self.keys[self.gen2]
        entry = os.path.join(self.env.nvmet, "hosts", HOST_NQN)
        step("controller: the agent's host entry gets the new keys with the next resync",
             cs.wait_for(lambda: self.env.read(entry, "dhchap_key") == k["key"] and
                         self.env.read(entry, "dhchap_ctrl_key") == k["ctrlKey"], 30))
        step("controller: confirms the new generation on the CSINode",
             cs.wait_for(lambda: self.annotation("/apis/storage.k8s.io/v1/csinodes/", NODE,
                                                 P + "dhchap-generation") == str(self.gen2), 30))
        step("controller: deletes the older Secret",
             cs.wait_for(lambda: sorted(self.secrets()) == [self.gen2], 30), sorted(self.secrets()))
        ctrl = os.path.join(self.host, "sys/class/nvme/nvme0")
        step("node: re-keys the live controller (dhchap_secret, dhchap_ctrl_secret)",
             cs.wait_for(lambda: self.env.read(ctrl, "dhchap_secret") == k["key"] and
                         self.env.read(ctrl, "dhchap_ctrl_secret") == k["ctrlKey"], 30))
        step("node: the new generation is current in its key file",
             cs.wait_for(lambda: ((self.key_file() or {}).get("current") or {}).get("generation") == self.gen2, 30))
        made = [line for line in self.node_log() if "made new DH-HMAC-CHAP keys (rotation)" in line]
        step("node: two generations, the first with a new host secret, the second with a new controller "
             "secret (its log)", [l.split(' secret="')[1].split('"')[0] for l in made] == ["host", "controller"]
             and ('generation="%d"' % self.gen2) in made[-1], made)
        wrote = [line.split(' secret="')[1].split('"')[0] for line in self.node_log()
                 if "written to a live controller" in line]
        step("node: the live controller got one secret per generation (host, then controller)",
             wrote == ["host", "controller"], wrote)
        self.scrape()

    def storage_reboot(self):
        self.env.procs.stop("agent", signal.SIGKILL)
        for d in ("subsystems", "ports", "hosts"):
            top = os.path.join(self.env.nvmet, d)
            subprocess.run(["rm", "-rf", top])
            os.makedirs(top)
        for nqn in (PROBE_NQN, HOST_NQN):
            self.host_entry(nqn)
        step("storage reboot: the agent starts again on an empty configfs", self.start_agent())
        entry = os.path.join(self.env.nvmet, "hosts", HOST_NQN)
        k = self.keys[self.gen2]

        def restored():
            pa = self.get("/apis/%s/pillaragents/%s" % (GROUP, cs.AGENT))
            subs = os.path.join(self.env.nvmet, "subsystems")
            admitted = any(os.path.lexists(os.path.join(subs, s, "allowed_hosts", HOST_NQN))
                           for s in os.listdir(subs))
            return (cs.cond(pa, "ExportsReady")[:2] == ("True", "ExportsServing") and admitted and
                    self.env.read(entry, "dhchap_key") == k["key"] and
                    self.env.read(entry, "dhchap_ctrl_key") == k["ctrlKey"])
        step("controller: the restore (ReconcileState) re-installs the keys and admits the host",
             cs.wait_for(restored, 30), cs.cond(self.get("/apis/%s/pillaragents/%s" % (GROUP, cs.AGENT)),
                                               "ExportsReady"))
        self.scrape()

    def teardown(self):
        staging, target = self.paths()
        code, msg, _ = cs.call(self.node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(
            volume_id=self.vid, target_path=target))
        step("kubelet NodeUnpublishVolume: OK", code == cs.OK, "%s %s" % (code, msg))
        code, msg, _ = cs.call(self.node.NodeUnstageVolume, csi.NodeUnstageVolumeRequest(
            volume_id=self.vid, staging_target_path=staging))
        step("kubelet NodeUnstageVolume: OK, the controller disconnected", code == cs.OK and
             not os.listdir(os.path.join(self.host, "sys/class/nvme")), "%s %s" % (code, msg))
        code, msg, _ = cs.call(self.ctl.ControllerUnpublishVolume, k8s.detach(csi, self.pv, NODE, self.cluster))
        step("csi-attacher ControllerUnpublishVolume: OK", code == cs.OK, "%s %s" % (code, msg))
        self.req("DELETE", "/apis/storage.k8s.io/v1/volumeattachments/" + self.va)
        code, msg, _ = cs.call(self.ctl.DeleteVolume, k8s.delete_volume(csi, self.pv))
        step("csi-provisioner DeleteVolume: OK", code == cs.OK, "%s %s" % (code, msg))
        self.req("DELETE", "/api/v1/persistentvolumes/" + self.pv["metadata"]["name"])
        self.scrape()

    def run(self):
        try:
            self.start()
            self.publish_keys()
            self.create_and_publish()
            self.stage()
            self.rotate()
            self.storage_reboot()
            self.teardown()
        except Stop:
            pass
        finally:
            self.scrape()
            for p in self.env.procs.live.values():
                p.send_signal(signal.SIGTERM)
            for n in list(self.env.procs.live):
                self.env.procs.stop(n, sig=0, timeout=20)
            self.snapshot_files()  # the logs' last lines
            if self.kernel:
                self.kernel.stop()
            for m in self.paths() if getattr(self, "pv", None) else ():
                subprocess.run(["umount", "-l", os.path.join(m, "device") if "staging" in m else m],
                               capture_output=True)


# ---- the scan -------------------------------------------------------------------------------------

def needles(label, secret):
    """What would betray the DHHC-1 secret: slices (24+ characters, no false match by chance) of
    the string itself and of the base64 inside it (which also match the raw key's base64: the
    two agree up to the key's last bytes), of the string's base64 (a Secret's data, at each of the
    three alignments), and the raw key bytes in hex, either case."""
    inner = secret.split(":")[2]
    raw = base64.b64decode(inner)[:-4]
    out = [(label, secret.encode()), (label + " (base64 inside)", inner[8:32].encode()),
           (label + " (key bytes, hex)", raw.hex()[:32].encode()),
           (label + " (key bytes, HEX)", raw.hex()[:32].upper().encode())]
    for shift in range(3):
        enc = base64.b64encode(("x" * shift + secret).encode()).decode()
        out.append((label + " (base64 of the string)", enc[12:44].encode()))
    return out


def all_needles(keys):
    out = []
    for gen, k in sorted(keys.items()):
        out += needles("generation %d host key" % gen, k["key"])
        out += needles("generation %d controller key" % gen, k["ctrlKey"])
    return out


def find(data, ns):
    return sorted({label for label, n in ns if n in data})


def allowed(path, work):
    """The places a key may be: the node's key file, the fake configfs host entries' dhchap_key
    and dhchap_ctrl_key, and the fake kernel's controller attributes dhchap_secret and
    dhchap_ctrl_secret."""
    rel = os.path.relpath(path, work)
    name = os.path.basename(rel)
    if rel == "node-state/dhchap.key":
        return True
    if rel.startswith("cfs/nvmet/hosts/") and name in ("dhchap_key", "dhchap_ctrl_key"):
        return True
    return rel.startswith("host/sys/class/nvme/") and name in ("dhchap_secret", "dhchap_ctrl_secret")


def files(work):
    """Every regular file below work but the API server's own directory (etcd's data holds the
    Secrets; its objects are read through etcd below) and the places keys may be."""
    for top, dirs, names in os.walk(work):
        dirs[:] = [d for d in dirs if os.path.join(top, d) != os.path.join(work, "kube")]
        for n in names:
            p = os.path.join(top, n)
            if os.path.isfile(p) and not os.path.islink(p) and not allowed(p, work):
                yield p


def etcd_objects(c):
    """(key, value) of every object in the API server's etcd."""
    b64 = lambda s: base64.b64encode(s).decode()  # noqa: E731
    body = json.dumps({"key": b64(b"/registry/"), "range_end": b64(b"/registry0")}).encode()
    rq = urllib.request.Request("http://127.0.0.1:%d/v3/kv/range" % c.etcd_port, body)
    with urllib.request.urlopen(rq, timeout=30) as r:
        kvs = json.loads(r.read()).get("kvs", [])
    return [(base64.b64decode(kv["key"]).decode(), base64.b64decode(kv.get("value", ""))) for kv in kvs]


def kind_of(key):
    """The resource of an etcd key /registry/<group>/<resource>/[<namespace>/]<name>."""
    return key.split("/")[3]


def scan(cy):
    ns = all_needles(cy.keys)
    gens = sorted(cy.keys)
    R.check("keys of %d generations collected (%s)" % (len(gens), ", ".join(map(str, gens))),
            len(gens) >= (1 if cy.refused else 2))
    # the scanner can fail: it finds every generation in the places it may be
    seen = set()
    for opts in cy.kernel.connects if cy.kernel else []:
        seen |= set(find(",".join("%s=%s" % kv for kv in opts.items()).encode(), ns))
    seen = {label.split(" (")[0] for label in seen}
    objs = [(k, v) for k, vs in sorted(cy.objects_seen.items()) for v in vs]
    secret_data = b"".join(v for k, v in objs if kind_of(k) == "secrets")
    seen |= {label.split(" (")[0] for label in find(secret_data, ns)}
    for gen in gens:
        want = {"generation %d host key" % gen, "generation %d controller key" % gen}
        R.check("the scanner finds generation %d's keys where they may be (connect line, Secret)" % gen,
                want <= seen, sorted(want - seen))
    newest = "generation %d host key" % gens[-1]
    R.check("the scanner finds the newest key as its Secret's base64 data",
            newest + " (base64 of the string)" in find(secret_data, ns))
    # where keys must never be
    hits = sorted({(p, label) for p, vs in cy.files_seen.items() for v in vs for label in find(v, ns)})
    logs = sorted(p for p in cy.files_seen if p.endswith(".log"))
    R.check("no key in the logs (%s) nor any file of the agent's and node's state, the stage "
            "records, the kubelet directory, configfs or sysfs (%d files, read after each step)"
            % (", ".join(logs), len(cy.files_seen)), not hits, hits[:5])
    text = {p: b"".join(cy.files_seen[p]) for p in logs}
    if not cy.refused:  # the keyed connect and the stage happened
        R.check("the logs are of --v=5 calls: the node's keyed connect line shows dhchap_secret=(secret), "
                "the agent's call log dhchap_key \"***stripped***\"",
                b"dhchap_secret=(secret)" in text.get("node.log", b"") and
                any(b'dhchap_key\\":\\"***stripped***' in v for p, v in text.items() if p.startswith("agent-")))
        R.check("the stage record was read while the volume was staged",
                any(p.startswith("node-state/") and p.endswith(".json") for p in cy.files_seen),
                sorted(cy.files_seen))
    kinds = sorted({kind_of(k) for k, _ in objs})
    bad = [(k, find(v, ns)) for k, v in objs if kind_of(k) != "secrets" and find(v, ns)]
    R.check("no key in any API object but the Secrets (%d versions of %d objects of %s, read after "
            "each step)" % (len(objs), len(cy.objects_seen), ", ".join(kinds)),
            not bad, bad[:5])
    for want in (("csinodes", "nodes", "pillaragents") if cy.refused else
                 ("events", "persistentvolumes", "volumeattachments", "csinodes", "nodes",
                  "pillarvolumestates", "pillaragents")):
        R.check("the API objects scanned include %s" % want, want in kinds, kinds)
    bad = [(role, find(t.encode(), ns)) for role, t in cy.metrics if find(t.encode(), ns)]
    fams = {(role, line.split()[2]) for role, t in cy.metrics for line in t.splitlines()
            if line.startswith("# TYPE ")}
    R.check("no key in any metric family (%d scrapes, %d families of agent, controller, node)"
            % (len(cy.metrics), len(fams)), not bad and len(cy.metrics) >= (3 if cy.refused else 12), bad[:3])
    bad = [out.split("\n", 1)[0] for out in cy.cli_out if find(out.encode(), ns)]
    R.check("no key in the CLI's output (%d commands)" % len(cy.cli_out), not bad, bad)


def main():
    work = os.path.abspath(sys.argv[1])
    t0 = time.monotonic()
    os.makedirs(os.path.join(work, "kube"), exist_ok=True)
    with Cluster(directory=os.path.join(work, "kube")) as c:
        cy = Cycle(work, c)
        cy.run()
        if cy.keys:
            scan(cy)
    print("(%.1f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash of the suite is a failure, not a pass
        import traceback
        traceback.print_exc()
        R.check("the suite ran to the end", False, repr(e))
    print("(secretscan suite: %d passed, %d failed)" % (R.passed, R.failed))
    sys.exit(1 if R.failed else 0)
