"""One pass of the component flow on the test API server (test/kube: real etcd), with the roles
running on the tokens of the chart's ServiceAccounts under RBAC rules given as a YAML file.

  pillar-csi agent       fake configfs root, `file` backend (talks to no API server)
  pillar-csi node        node-a, ServiceAccount pillar-csi-node: patches its CSINode
  pillar-csi controller  ServiceAccount pillar-csi-controller, --leader-elect: reconcilers, Lease,
                         Events, CSI
  this script            the cluster's other parts, as admin: the operator's objects, kubelet's
                         Node and CSINode, the PVC; and every CSI call made as the sidecar that
                         makes it (test/interop/lib/sidecars.py: csi-provisioner, csi-attacher,
                         csi-resizer), with the PersistentVolume the provisioner writes

Flow(...).run(cluster) creates the RBAC objects through the API, runs the steps in order and stops
at the first one that fails; it returns the list of (step, ok, detail, seconds since the start).
Every request the API server authorizes is logged (PILLAR_KUBE_AUTHZ_LOG, set before the cluster
starts), so the caller can tell which rules the roles used and which requests were refused.
Two settings only make it faster, RBAC does not depend on them: the controller's API rate
(--kube-api-qps=50: at the default 5 qps CreateVolume waits ~8 s behind Events and Lease
renewals) and the file pool on a tmpfs (below).
"""
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
import controller_suite as cs  # noqa: E402  (its Env: agent on a fake configfs, controller)
from client import Client  # noqa: E402
from cluster import Cluster  # noqa: E402

csi, csig, k8s = cs.csi, cs.csig, cs.k8s
NS = "pillar-csi"
P = cs.P
GROUP = cs.GROUP
LEASE_S, RENEW_S, RETRY_MS = 8, 6, 2000
HOST_NQN = "nqn.2014-08.org.nvmexpress:uuid:7c2e4a1f-3b5d-4e6f-9a8b-1c2d3e4f5a6b"
HOST_ID = "7c2e4a1f-3b5d-4e6f-9a8b-1c2d3e4f5a6b"
MiB = 1 << 20


class Flow:
    def __init__(self, work, rbac, timeout):
        self.work, self.rbac, self.timeout = work, rbac, timeout
        self.steps = []
        self.env = None
        self.api = None
        self.authz_log = os.path.join(work, "authz.log")

    # ---- helpers ---------------------------------------------------------------------------------
    def step(self, name, ok, detail=""):
        self.steps.append((name, bool(ok), "" if ok else str(detail)[:600], time.monotonic() - self.t0))
        if not ok:
            raise StopFlow(name)

    def wait(self, fn, timeout=None):
        return cs.wait_for(fn, self.timeout if timeout is None else timeout, 0.1)

    def req(self, method, path, body=None):
        st, _, raw, obj = self.api.request(method, path, body)
        if st >= 300:
            raise RuntimeError(f"{method} {path}: {st} {raw[:300]!r}")
        return obj

    def get(self, path):
        st, _, _, obj = self.api.request("GET", path)
        return obj if st == 200 else None

    def pillar(self, plural, name):
        return self.get(f"/apis/{GROUP}/{plural}/{name}")

    def create(self, obj):
        group, _, version = obj["apiVersion"].rpartition("/")
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        ns = obj["metadata"].get("namespace")
        plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
                  "RoleBinding": "rolebindings", "Node": "nodes", "CSINode": "csinodes", "PersistentVolumeClaim": "persistentvolumeclaims",
                  "PersistentVolume": "persistentvolumes", "Namespace": "namespaces",
                  "PillarStorageClass": "pillarstorageclasses"}.get(obj["kind"]) or obj["kind"].lower() + "s"
        return self.req("POST", f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}", obj)

    def sidecar_cluster(self):
        """What the sidecars read: the workers' Nodes and CSINodes as the API serves them."""
        return {"nodes": self.req("GET", "/api/v1/nodes")["items"],
                "csinodes": self.req("GET", "/apis/storage.k8s.io/v1/csinodes")["items"]}

    def events(self, **match):
        items = (self.get("/api/v1/events") or {}).get("items", [])
        return [e for e in items if all(_dig(e, k) == v for k, v in match.items())]

    def start_node(self, name, kubeconfig):
        host = os.path.join(self.work, "host")
        env = dict(os.environ, NODE_NAME=name, ASAN_OPTIONS="detect_leaks=0")
        return self.env.procs.start("node-" + name, [
            cs.BIN, "node", "--store=kube", "--kubeconfig=" + kubeconfig,
            f"--csi-endpoint=unix://{self.work}/node-{name}.sock",
            f"--state-dir={self.work}/node-state-{name}", f"--host-root={host}",
            f"--kubelet-dir={self.work}/kubelet-{name}", "--v=2"], env=env)

    # ---- the cluster ------------------------------------------------------------------------------
    def fake_host(self):
        """The worker's host root: /etc/nvme identity, nvme_tcp loaded, /dev/nvme-fabrics."""
        host = os.path.join(self.work, "host")
        for d in ("etc/nvme", "dev", "sys/module/nvme_tcp", "sys/class/nvme", "sys/class/nvme-subsystem",
                  "sys/block"):
            os.makedirs(os.path.join(host, d), exist_ok=True)
        with open(os.path.join(host, "etc/nvme/hostnqn"), "w") as f:
            f.write(HOST_NQN + "\n")
        with open(os.path.join(host, "etc/nvme/hostid"), "w") as f:
            f.write(HOST_ID + "\n")
        open(os.path.join(host, "dev/nvme-fabrics"), "w").close()
        os.symlink("/proc", os.path.join(host, "proc"))

    def kubelet_node(self, name):
        """The Node and the CSINode kubelet makes (registration: node ID, topology key)."""
        node = self.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, P + "nvmeof": "true"}}})
        self.create({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {
            "name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                               "uid": node["metadata"]["uid"]}]},
            "spec": {"drivers": [{"name": k8s.DRIVER, "nodeID": name, "topologyKeys": [P + "nvmeof"]}]}})
        return node

    def operator_objects(self, agent_port):
        st = self.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "storage-1"}})
        st["status"] = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}
        self.req("PUT", "/api/v1/nodes/storage-1/status", st)
        for o in [
            {"kind": "PillarAgent", "metadata": {"name": cs.AGENT},
             "spec": {"nodeRef": {"name": "storage-1", "port": agent_port}}},
            {"kind": "PillarStore", "metadata": {"name": cs.STORE},
             "spec": {"agentRef": cs.AGENT, "backend": {"file": {"pool": cs.POOL}}}},
            {"kind": "PillarProtocol", "metadata": {"name": cs.PROTO},
             "spec": {"protocol": {"nvmeofTcp": {"port": 4420, "acl": True}}}},
            {"kind": "PillarStorageClass", "metadata": {"name": cs.PSC},
             "spec": {"storeRef": cs.STORE, "protocolRef": cs.PROTO}}]:
            self.create(dict(o, apiVersion=GROUP))

    # ---- the pass -----------------------------------------------------------------------------------
    def run(self, c):
        """One pass on the started cluster c (test/kube/cluster.py), whose objects the caller reset;
        the RBAC objects (self.rbac, a list of dicts) are created through the API first."""
        os.makedirs(self.work, exist_ok=True)
        env = self.env = cs.Env(self.work)
        # The file pool on a tmpfs of its own: its free space then changes only with our volumes.
        # On the build directory's file system every write elsewhere changes the pool's reported
        # available bytes, each change is a PillarAgent status write, and those writes spend the
        # controller's API rate limit (5 qps) that CreateVolume then waits for (10+ s).
        mounted = os.getuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", env.files]).returncode == 0
        self.t0 = time.monotonic()
        self.api = Client(c.port, c.ca, c.admin_token)
        try:
            self.req("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": NS}})
            for o in self.rbac:
                self.create(o)
            self.kc_ctl = c.sa_kubeconfig(NS, "pillar-csi-controller", os.path.join(self.work, "controller.kubeconfig"))
            self.kc_node = c.sa_kubeconfig(NS, "pillar-csi-node", os.path.join(self.work, "node.kubeconfig"))
            env.kubeconfig = self.kc_ctl  # the controller's --kubeconfig
            try:
                self.passes(c)
            except StopFlow:
                pass
            t = time.monotonic()
            for p in env.procs.live.values():  # all at once: the nodes take ~5 s each
                p.send_signal(signal.SIGTERM)
            self.rcs = {n: env.procs.stop(n, sig=0, timeout=20) for n in list(env.procs.live)}
            self.stop_s = time.monotonic() - t
            self.step("every role exits 0 on SIGTERM (%.1f s)" % self.stop_s,
                      all(rc == 0 for rc in self.rcs.values()), self.rcs)
        except StopFlow:
            pass
        finally:
            env.procs.stop_all()
            if mounted:
                subprocess.run(["umount", "-l", env.files])
        self.seconds = time.monotonic() - self.t0
        return self.steps

    def passes(self, c):
        env = self.env
        self.fake_host()
        self.kubelet_node("node-a")
        self.step("the agent starts on a fake configfs root", env.start_agent())
        self.operator_objects(env.agent_port)
        self.start_node("node-a", self.kc_node)
        self.node_identity()
        os.environ.update(POD_NAME="ctl-0", POD_NAMESPACE=NS)
        env.controller_args = ["--leader-elect", f"--leader-elect-lease-duration={LEASE_S}s",
                               f"--leader-elect-renew-deadline={RENEW_S}s",
                               f"--leader-elect-retry-period={RETRY_MS}ms",
                               # the default 5 qps makes CreateVolume wait ~8 s behind Events and
                               # Lease renewals; RBAC does not depend on the rate
                               "--kube-api-qps=50", "--kube-api-burst=100"]
        self.step("the controller starts and serves CSI", env.start_controller())
        lease = self.wait(lambda: self.lease_holder().startswith("ctl-0_") and self.lease())
        self.step("controller: holds the Lease pillar-csi-controller in its namespace", lease,
                  self.lease())
        self.reconcilers()
        ch = cs.grpc.insecure_channel("unix://" + env.sock)
        ctl = csig.ControllerStub(ch)
        caps = k8s.Caps(csi, csig.IdentityStub(ch), ctl)
        self.volume(ctl, caps)
        self.recovery(ctl, caps)
        self.duplicate_identity()
        self.step("controller: renews the Lease (renewTime advanced, same holder)",
                  self.wait(lambda: self.lease().get("renewTime", "") > lease.get("renewTime", "")
                            and self.lease_holder() == lease["holderIdentity"]), (lease, self.lease()))
        self.agent_restarts()
        self.repairs()
        self.class_update()
        self.class_deletion()
        self.agent_deletion()

    def node_identity(self):
        def annotated():
            o = self.get("/apis/storage.k8s.io/v1/csinodes/node-a") or {}
            return o.get("metadata", {}).get("annotations", {}).get(P + "nvmeof-host-nqn")
        self.step("node: patches its host NQN onto the CSINode kubelet made", self.wait(annotated) == HOST_NQN,
                  self.get("/apis/storage.k8s.io/v1/csinodes/node-a"))

    def lease(self):
        return (self.get(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/pillar-csi-controller")
                or {}).get("spec", {})

    def lease_holder(self):
        return self.lease().get("holderIdentity") or ""

    def reconcilers(self):
        def agent_ready():
            pa = self.pillar("pillaragents", cs.AGENT)
            return (cs.cond(pa, "Ready")[:2] == ("True", "AgentConnected") and
                    cs.cond(pa, "ExportsReady")[:2] == ("True", "ExportsServing") and pa)
        pa = self.wait(agent_ready)
        self.step("controller: PillarAgent Ready=True/AgentConnected, ExportsReady=True (agent address "
                  "from the Node)", pa, (self.pillar("pillaragents", cs.AGENT) or {}).get("status"))
        self.step("controller: the agent's Node carries the agent-node label",
                  self.wait(lambda: ((self.get("/api/v1/nodes/storage-1") or {}).get("metadata", {})
                                     .get("labels", {}).get(P + "agent-node") == "true")),
                  self.get("/api/v1/nodes/storage-1"))
        self.step("controller: PillarAgent finalizer added",
                  P + "agent-protection" in "".join(pa["metadata"].get("finalizers", [])) or
                  pa["metadata"].get("finalizers"), pa["metadata"])

        def sc():
            psc = self.pillar("pillarstorageclasses", cs.PSC)
            return cs.cond(psc, "Ready")[0] == "True" and self.get(f"/apis/storage.k8s.io/v1/storageclasses/{cs.PSC}")
        self.sc = self.wait(sc)
        self.step("controller: PillarStorageClass Ready=True and its StorageClass generated", self.sc,
                  (self.pillar("pillarstorageclasses", cs.PSC) or {}).get("status"))
        self.step("controller: PillarStore and PillarProtocol Ready=True",
                  self.wait(lambda: cs.cond(self.pillar("pillarstores", cs.STORE), "Ready")[0] == "True" and
                            cs.cond(self.pillar("pillarprotocols", cs.PROTO), "Ready")[0] == "True"),
                  ((self.pillar("pillarstores", cs.STORE) or {}).get("status"),
                   (self.pillar("pillarprotocols", cs.PROTO) or {}).get("status")))

    def volume(self, ctl, caps):
        pvc = self.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": "data", "namespace": "default"},
                           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cs.PSC,
                                    "resources": {"requests": {"storage": "32Mi"}}}})
        cluster = self.sidecar_cluster()
        req = k8s.create_volume(csi, caps, self.sc, pvc, cluster)
        code, msg, r = cs.call(ctl.CreateVolume, req)
        name = req.name
        pvst = self.pillar("pillarvolumestates", name)
        self.step("csi-provisioner CreateVolume: OK, PillarVolumeState recorded", code == cs.OK and pvst,
                  f"{code} {msg}")
        pv = k8s.pv_of(self.sc, pvc, req, r)
        pv = self.create(dict(pv, apiVersion="v1", kind="PersistentVolume"))
        nqn = cs.nqn_of(f"{cs.POOL}/{name}")
        self.step("the volume is exported on the agent", self.wait(lambda: cs.export_view(self.env, nqn)["exists"]),
                  cs.export_view(self.env, nqn))
        code, msg, _ = cs.call(ctl.ControllerPublishVolume, k8s.attach(csi, caps, pv, "node-a", cluster))
        self.step("csi-attacher ControllerPublishVolume to node-a: OK, the node's host NQN admitted",
                  code == cs.OK and cs.export_view(self.env, nqn)["hosts"] == [HOST_NQN],
                  f"{code} {msg} {cs.export_view(self.env, nqn)}")
        code, msg, _ = cs.call(ctl.ControllerUnpublishVolume, k8s.detach(csi, pv, "node-a", cluster))
        self.step("csi-attacher ControllerUnpublishVolume: OK, no host admitted",
                  code == cs.OK and cs.export_view(self.env, nqn)["hosts"] == [],
                  f"{code} {msg} {cs.export_view(self.env, nqn)}")
        code, msg, r = cs.call(ctl.ControllerExpandVolume, k8s.expand(csi, caps, pv, 64 * MiB))
        img = os.path.join(self.env.files, name + ".img")
        self.step("csi-resizer ControllerExpandVolume to 64 MiB: OK, the backing file grew",
                  code == cs.OK and r.capacity_bytes >= 64 * MiB and os.path.getsize(img) >= 64 * MiB,
                  f"{code} {msg}")
        self.snapshot(ctl, pv)
        code, msg, _ = cs.call(ctl.DeleteVolume, k8s.delete_volume(csi, pv))
        self.step("csi-provisioner DeleteVolume: OK, PillarVolumeState and export gone",
                  code == cs.OK and self.wait(lambda: self.pillar("pillarvolumestates", name) is None) and
                  not cs.export_view(self.env, nqn)["exists"], f"{code} {msg}")
        self.pv_name = name  # the PV and the PVC stay for class_deletion
        evs = self.wait(lambda: self.events(**{"source.component": "pillar-csi-controller"}))
        self.step("controller: condition changes recorded as Events", evs,
                  [(e["reason"], e["involvedObject"]["name"]) for e in self.events()])

    def snapshot(self, ctl, pv):
        """csi-snapshotter: CreateSnapshot of the volume (the controller records a PillarSnapshot),
        its readiness check (ListSnapshots by the handle), a listing by source volume,
        DeleteSnapshot (the record is deleted)."""
        uid = "7f3c2e10-0000-4000-8000-0000000000aa"
        content = {"metadata": {"name": "snapcontent-" + uid},
                   "spec": {"driver": k8s.DRIVER, "deletionPolicy": "Delete",
                            "source": {"volumeHandle": pv["spec"]["csi"]["volumeHandle"]},
                            "volumeSnapshotRef": {"kind": "VolumeSnapshot", "name": "backup",
                                                  "namespace": "default", "uid": uid}}}
        cls = {"metadata": {"name": "pillar-csi-snapshot"}, "driver": k8s.DRIVER}
        code, msg, r = cs.call(ctl.CreateSnapshot, k8s.create_snapshot(csi, cls, content))
        ps = self.pillar("pillarsnapshots", "snapshot-" + uid)
        self.step("csi-snapshotter CreateSnapshot: OK, PillarSnapshot Ready",
                  code == cs.OK and r.snapshot.ready_to_use and
                  (ps or {}).get("status", {}).get("phase") == "Ready", f"{code} {msg} {ps}")
        if code != cs.OK:
            return
        content["status"] = {"snapshotHandle": r.snapshot.snapshot_id}
        code, msg, lr = cs.call(ctl.ListSnapshots, k8s.snapshot_status(csi, content))
        self.step("csi-snapshotter ListSnapshots by the handle: the snapshot, ready",
                  code == cs.OK and [e.snapshot.ready_to_use for e in lr.entries] == [True],
                  f"{code} {msg}")
        code, msg, lr = cs.call(ctl.ListSnapshots, csi.ListSnapshotsRequest(
            source_volume_id=pv["spec"]["csi"]["volumeHandle"]))
        self.step("ListSnapshots by source volume (a backup tool's listing): the snapshot",
                  code == cs.OK and [e.snapshot.snapshot_id for e in lr.entries] ==
                  [r.snapshot.snapshot_id], f"{code} {msg}")
        code, msg, _ = cs.call(ctl.DeleteSnapshot, k8s.delete_snapshot(csi, content))
        self.step("csi-snapshotter DeleteSnapshot: OK, PillarSnapshot gone",
                  code == cs.OK and self.wait(lambda: self.pillar("pillarsnapshots", "snapshot-" + uid)
                                              is None), f"{code} {msg}")

    def recovery(self, ctl, caps):
        """Opt-in recovery after ctrlLossTmo (roles/controller/recovery.h): the node reports a volume
        whose NVMe controller is gone on its CSINode (its NodeGetVolumeStats finds none in the fake
        sysfs), and the controller deletes the claim's pod a ReplicaSet owns, never the bare pod."""
        self.create({"apiVersion": GROUP, "kind": "PillarProtocol", "metadata": {"name": "recover"},
                     "spec": {"protocol": {"nvmeofTcp": {"port": 4420, "deletePodsAfterCtrlLoss": True}}}})
        self.create({"apiVersion": GROUP, "kind": "PillarStorageClass", "metadata": {"name": "recovering"},
                     "spec": {"storeRef": cs.STORE, "protocolRef": "recover"}})
        sc = self.wait(lambda: self.get("/apis/storage.k8s.io/v1/storageclasses/recovering"))
        pvc = self.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": "lost", "namespace": "default"},
                           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "recovering",
                                    "resources": {"requests": {"storage": "32Mi"}}}})
        cluster = self.sidecar_cluster()
        req = k8s.create_volume(csi, caps, sc, pvc, cluster)
        code, msg, r = cs.call(ctl.CreateVolume, req)
        pv = self.create(dict(k8s.pv_of(sc, pvc, req, r), apiVersion="v1", kind="PersistentVolume")) \
            if code == cs.OK else None
        code2, msg2, _ = cs.call(ctl.ControllerPublishVolume, k8s.attach(csi, caps, pv, "node-a", cluster)) \
            if pv else (None, None, None)
        self.step("recovery: a volume of a protocol with deletePodsAfterCtrlLoss, published to node-a",
                  code == cs.OK and code2 == cs.OK, f"{code} {msg} {code2} {msg2}")
        vid = r.volume.volume_id
        pods = {}
        for name, owner in (("web-0", [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8",
                                        "uid": "b1e4c7a0-0000-4000-8000-000000000001", "controller": True}]),
                            ("bare", None)):
            meta = {"name": name, "namespace": "default"}
            if owner:
                meta["ownerReferences"] = owner
            pods[name] = self.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
                "nodeName": "node-a", "containers": [{"name": "app", "image": "app"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "lost"}}]}})
        time.sleep(1.1)  # the node's report must come after the pods' creationTimestamp (seconds)
        # the node plugin's stage record of the volume, as NodeStageVolume left it
        state = f"{self.work}/node-state-node-a"
        staging = os.path.join(self.work, "kubelet-node-a", "plugins", "kubernetes.io", "csi",
                               "pv", "lost", "globalmount")  # kubelet's layout (--kubelet-dir)
        os.makedirs(staging, exist_ok=True)
        os.makedirs(state, mode=0o700, exist_ok=True)
        with open(os.path.join(state, vid.replace("/", "_") + ".json"), "w") as f:
            json.dump({"protocol_type": "nvmeof-tcp", "access_type": "filesystem", "fs_type": "ext4",
                       "nvmeof": {"subsys_nqn": cs.nqn_of(f"{cs.POOL}/{req.name}"), "address": "127.0.0.1",
                                  "port": "4420"}, "volume_id": vid, "staging_path": staging,
                       "staged_at": "2026-01-01T00:00:00Z"}, f)
        nch = cs.grpc.insecure_channel(f"unix://{self.work}/node-node-a.sock")
        code, msg, st = cs.call(csig.NodeStub(nch).NodeGetVolumeStats,
                                csi.NodeGetVolumeStatsRequest(volume_id=vid, volume_path=staging))
        self.step("recovery: node-a's NodeGetVolumeStats reports the volume abnormal (controller gone)",
                  code == cs.OK and st.volume_condition.abnormal, f"{code} {msg} {st}")

        def reported():
            o = self.get("/apis/storage.k8s.io/v1/csinodes/node-a") or {}
            return vid in o.get("metadata", {}).get("annotations", {}).get(P + "nvmeof-lost-volumes", "")
        self.step("recovery: node-a reports it on its CSINode", self.wait(reported),
                  self.get("/apis/storage.k8s.io/v1/csinodes/node-a"))
        # a pod a node runs is deleted gracefully: it stays, terminating, until its kubelet is done
        self.step("recovery: the controller deletes the pod a ReplicaSet owns",
                  self.wait(lambda: "deletionTimestamp" in
                            (self.get("/api/v1/namespaces/default/pods/web-0") or {}).get("metadata", {})),
                  self.get("/api/v1/namespaces/default/pods/web-0"))
        # the two pods' Events are written one after the other: wait for both
        evs = self.wait(lambda: self.events(reason="PodNotDeletedAfterCtrlLoss",
                                            **{"involvedObject.name": "bare"}) and
                        self.events(reason="PodDeletedAfterCtrlLoss",
                                    **{"involvedObject.name": "web-0"}))
        self.step("recovery: the bare pod stays, with a Warning that says to restart it by hand",
                  evs and self.get("/api/v1/namespaces/default/pods/bare"),
                  [(e["reason"], e["involvedObject"]["name"]) for e in self.events()])
        self.req("DELETE", "/api/v1/namespaces/default/pods/bare")
        cs.call(ctl.ControllerUnpublishVolume, k8s.detach(csi, pv, "node-a", cluster))
        code, msg, _ = cs.call(ctl.DeleteVolume, k8s.delete_volume(csi, pv))
        for path in ("/api/v1/persistentvolumes/" + pv["metadata"]["name"],
                     "/api/v1/namespaces/default/persistentvolumeclaims/lost",
                     f"/apis/{GROUP}/pillarstorageclasses/recovering", f"/apis/{GROUP}/pillarprotocols/recover"):
            self.req("DELETE", path)
            if path.endswith("/lost"):  # kube-controller-manager's pvc-protection: no pod uses it
                claim = self.req("GET", path)
                claim["metadata"]["finalizers"] = []
                self.req("PUT", path, claim)
        self.step("recovery: volume, claim, class and protocol removed",
                  code == cs.OK and self.wait(lambda: self.pillar("pillarprotocols", "recover") is None),
                  (code, msg, conds(self.pillar("pillarstorageclasses", "recovering")),
                   conds(self.pillar("pillarprotocols", "recover"))))

    def duplicate_identity(self):
        """A clone of node-a (same /etc/nvme) registers as node-b: DuplicateHostNQN on its Node."""
        node = self.kubelet_node("node-b")
        self.start_node("node-b", self.kc_node)
        d = self.wait(lambda: self.events(reason="DuplicateHostNQN"))
        self.step("node: DuplicateHostNQN Warning on the clone's Node (its uid read from the Node)",
                  d and d[0]["involvedObject"].get("uid") == node["metadata"]["uid"] and
                  d[0]["type"] == "Warning", d)
        self.step("controller: the new CSINode counts in PillarProtocol NodeTopology (2 of 2 nodes)",
                  self.wait(lambda: (cs.cond(self.pillar("pillarprotocols", cs.PROTO), "NodeTopology")[2] or "")
                            .startswith("2 of 2 node(s)")),
                  conds(self.pillar("pillarprotocols", cs.PROTO)))

    def agent_restarts(self):
        """The agent killed twice: the second AgentNotConnected is the same Event again, counted
        (client-go's logger patches count and lastTimestamp instead of creating another)."""
        def ready(want):
            return lambda: cs.cond(self.pillar("pillaragents", cs.AGENT), "Ready")[:2] == want
        for i in (1, 2):
            self.env.procs.stop("agent", signal.SIGKILL)
            self.step(f"controller: agent killed ({i}): PillarAgent Ready=False/AgentNotConnected",
                      self.wait(ready(("False", "AgentNotConnected"))),
                      conds(self.pillar("pillaragents", cs.AGENT)))
            self.step(f"agent restarted ({i}): PillarAgent Ready=True again",
                      self.env.start_agent() and self.wait(ready(("True", "AgentConnected"))),
                      conds(self.pillar("pillaragents", cs.AGENT)))
        def counted():
            ev = self.events(reason="AgentNotConnected", **{"involvedObject.name": cs.AGENT})
            msgs = [e.get("message") for e in ev]
            return ev and len(set(msgs)) == len(msgs) and all(e.get("count") == 2 for e in ev)
        self.step("controller: each AgentNotConnected Event on the PillarAgent (one per condition) "
                  "is counted twice, not written again",
                  self.wait(counted), [(e["metadata"]["name"], e.get("count"), e.get("message")) for e in
                                       self.events(reason="AgentNotConnected")])

    def repairs(self):
        """Hand edits the controller undoes: the agent-node label removed, the StorageClass deleted."""
        node = self.req("GET", "/api/v1/nodes/storage-1")
        del node["metadata"]["labels"][P + "agent-node"]
        self.req("PUT", "/api/v1/nodes/storage-1", node)
        self.step("controller: puts back the agent-node label removed by hand",
                  self.wait(lambda: ((self.get("/api/v1/nodes/storage-1") or {}).get("metadata", {})
                                     .get("labels", {}).get(P + "agent-node") == "true")),
                  self.get("/api/v1/nodes/storage-1"))
        path = f"/apis/storage.k8s.io/v1/storageclasses/{cs.PSC}"
        uid = self.req("GET", path)["metadata"]["uid"]
        self.req("DELETE", path)
        self.step("controller: re-creates the generated StorageClass deleted by hand",
                  self.wait(lambda: (self.get(path) or {}).get("metadata", {}).get("uid", uid) != uid),
                  conds(self.pillar("pillarstorageclasses", cs.PSC)))

    def class_update(self):
        psc = self.pillar("pillarstorageclasses", cs.PSC)
        psc["spec"].setdefault("storageClass", {})["allowVolumeExpansion"] = False
        self.req("PUT", f"/apis/{GROUP}/pillarstorageclasses/{cs.PSC}", psc)
        self.step("controller: a PillarStorageClass edit updates its StorageClass in place",
                  self.wait(lambda: (self.get(f"/apis/storage.k8s.io/v1/storageclasses/{cs.PSC}") or {})
                            .get("allowVolumeExpansion") is False),
                  self.get(f"/apis/storage.k8s.io/v1/storageclasses/{cs.PSC}"))

    def class_deletion(self):
        """Deleting the PillarStorageClass waits for its PVC and volumes, then deletes its
        StorageClass and releases it (crds.md §6)."""
        self.req("DELETE", f"/apis/{GROUP}/pillarstorageclasses/{cs.PSC}")
        blocked = lambda *names: (lambda: all(  # noqa: E731
            (n in msg) == want for msg in [cs.cond(self.pillar("pillarstorageclasses", cs.PSC), "Ready")[2] or ""]
            for n, want in names) and "Deletion blocked" in (cs.cond(self.pillar(
                "pillarstorageclasses", cs.PSC), "Ready")[2] or ""))
        claim = 'PersistentVolumeClaim "default/data"'
        self.step("controller: the PillarStorageClass's deletion is blocked by its PVC and PV",
                  self.wait(blocked((claim, True), (self.pv_name, True))),
                  conds(self.pillar("pillarstorageclasses", cs.PSC)))
        self.req("DELETE", f"/api/v1/persistentvolumes/{self.pv_name}")  # the provisioner, after DeleteVolume
        self.step("controller: once the PV is gone only the PVC blocks it",
                  self.wait(blocked((claim, True), (self.pv_name, False))),
                  conds(self.pillar("pillarstorageclasses", cs.PSC)))
        self.req("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/data")  # the user
        pvc = self.req("GET", "/api/v1/namespaces/default/persistentvolumeclaims/data")
        pvc["metadata"]["finalizers"] = []  # kube-controller-manager's pvc-protection: no pod uses it
        self.req("PUT", "/api/v1/namespaces/default/persistentvolumeclaims/data", pvc)
        self.step("controller: then it deletes the StorageClass and releases the PillarStorageClass",
                  self.wait(lambda: self.pillar("pillarstorageclasses", cs.PSC) is None and
                            self.get(f"/apis/storage.k8s.io/v1/storageclasses/{cs.PSC}") is None),
                  conds(self.pillar("pillarstorageclasses", cs.PSC)))

    def agent_deletion(self):
        for plural, name in (("pillarprotocols", cs.PROTO), ("pillarstores", cs.STORE),
                             ("pillaragents", cs.AGENT)):
            self.req("DELETE", f"/apis/{GROUP}/{plural}/{name}")
        self.step("controller: deleting the PillarProtocol, PillarStore and PillarAgent releases them and "
                  "removes the agent-node label",
                  self.wait(lambda: self.pillar("pillaragents", cs.AGENT) is None and
                            self.pillar("pillarstores", cs.STORE) is None and
                            self.pillar("pillarprotocols", cs.PROTO) is None and
                            P + "agent-node" not in (self.get("/api/v1/nodes/storage-1") or {})
                            .get("metadata", {}).get("labels", {})),
                  (conds(self.pillar("pillaragents", cs.AGENT)), conds(self.pillar("pillarstores", cs.STORE)),
                   (self.get("/api/v1/nodes/storage-1") or {}).get("metadata", {}).get("labels")))


class StopFlow(Exception):
    pass


def conds(obj):
    return [(c["type"], c["status"], c["reason"], c.get("message", ""))
            for c in ((obj or {}).get("status") or {}).get("conditions") or []]


def _dig(obj, dotted):
    for k in dotted.split("."):
        obj = (obj or {}).get(k)
    return obj


def authz(path):
    """The authorization decisions the API server logged."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            out = [json.loads(line) for line in f if line.strip()]
    return out


def load_rbac(path):
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


if __name__ == "__main__":  # flow.py WORK RBAC_YAML: one pass, printed with the requests of our roles
    os.environ["PILLAR_KUBE_AUTHZ_LOG"] = os.path.join(sys.argv[1], "authz.log")
    os.makedirs(os.path.join(sys.argv[1], "kube"), exist_ok=True)
    with Cluster(directory=os.path.join(sys.argv[1], "kube")) as cl:
        fl = Flow(sys.argv[1], load_rbac(sys.argv[2]), 15)
        for name, ok, detail, at in fl.run(cl):
            print(("PASS " if ok else "FAIL ") + f"{at:5.1f} s " + name + (f"  [{detail}]" if detail else ""))
    print("(%.1f s)" % fl.seconds)
    sa = "system:serviceaccount:pillar-csi:"
    for a in authz(fl.authz_log):
        if a["user"].startswith(sa):
            print(a["user"][len(sa):], a["verb"], a.get("group"), a.get("resource"), a.get("subresource"),
                  a.get("namespace"), a["allowed"])
