#!/usr/bin/python3
"""Capacity tracking as the scheduler sees it (issue 26; run.sh describes the set-up).

The test API server (test/kube: real etcd) holds the cluster; the agent serves two `file` pools,
each on a tmpfs of its own so that their free space changes only with our volumes; the
controller runs on the API server (--store=kube) and refreshes the PillarStores' capacity every
second (PILLAR_CAPACITY_INTERVAL=1s); csi-provisioner's capacity controller is the stand-in of
test/interop/lib/sidecars.py (CapacityTracker), owned by the Deployment as --capacity-ownerref-
level=2 makes it.  capacity_suite.py DIR; everything lives below DIR.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
import controller_suite as cs  # noqa: E402
from client import Client  # noqa: E402
from cluster import Cluster  # noqa: E402

csi, csig, k8s = cs.csi, cs.csig, cs.k8s
P, GROUP = cs.P, cs.GROUP
NS = "pillar-csi"
MiB = 1 << 20
POOLS = {"fa": 64 * MiB, "fb": 96 * MiB}  # pool → tmpfs size
NVMEOF = P + "nvmeof"
passed = failed = 0


def check(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("PASS " + name)
    else:
        failed += 1
        print("FAIL %s%s" % (name, (": %s" % str(detail)[:800]) if detail else ""))
    sys.stdout.flush()
    return ok


class Suite:
    def __init__(self, work, c):
        self.work, self.c = work, c
        self.api = Client(c.port, c.ca, c.admin_token)
        self.env = cs.Env(os.path.join(work, "roles"))
        self.mounts = []

    # ---- API helpers ----
    def req(self, method, path, body=None):
        st, _, raw, obj = self.api.request(method, path, body)
        if st >= 300:
            raise RuntimeError("%s %s: %d %r" % (method, path, st, raw[:300]))
        return obj

    def get(self, path):
        st, _, _, obj = self.api.request("GET", path)
        return obj if st == 200 else None

    def pillar(self, plural, name):
        return self.get("/apis/%s/%ss/%s" % (GROUP, plural, name))

    def create(self, path, obj):
        return self.req("POST", path, obj)

    # ---- set-up ----
    def pools(self):
        """Each pool on a tmpfs of its own size; the agent's configuration (preallocated files:
        a volume takes its whole size from the pool at once)."""
        backends = []
        for pool, size in POOLS.items():
            d = os.path.join(self.env.base, pool)
            os.makedirs(d, exist_ok=True)
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", d],
                               capture_output=True, text=True)
            if not check(r.returncode == 0, "pool %s on a tmpfs of %d MiB" % (pool, size // MiB),
                         r.stderr):
                return False
            self.mounts.append(d)
            backends.append({"file": {"pool": pool, "directory": d, "preallocate": True}})
        import json
        with open(self.env.config, "w") as f:
            json.dump({"backends": backends}, f)
        return True

    def free(self, pool):
        st = os.statvfs(os.path.join(self.env.base, pool))
        return st.f_bavail * st.f_frsize

    def owner_chain(self):
        """The controller's Deployment, its ReplicaSet and Pod (stored objects: nothing runs
        them), as the cluster has them for csi-provisioner's owner lookup."""
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NS}})
        labels = {"app": "pillar-csi-controller"}
        tmpl = {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "csi-provisioner", "image": "provisioner"}]}}
        dep = self.create("/apis/apps/v1/namespaces/%s/deployments" % NS, {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "pillar-csi-controller", "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": tmpl}})
        ref = lambda o: {"apiVersion": o["apiVersion"], "kind": o["kind"],  # noqa: E731
                         "name": o["metadata"]["name"], "uid": o["metadata"]["uid"],
                         "controller": True, "blockOwnerDeletion": True}
        rs = self.create("/apis/apps/v1/namespaces/%s/replicasets" % NS, {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "pillar-csi-controller-7d4b9c", "labels": labels,
                         "ownerReferences": [ref(dep)]},
            "spec": {"selector": {"matchLabels": labels}, "template": tmpl}})
        self.create("/api/v1/namespaces/%s/pods" % NS, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pillar-csi-controller-7d4b9c-x2x4q", "labels": labels,
                         "ownerReferences": [ref(rs)]},
            "spec": tmpl["spec"]})
        return dep

    def workers(self):
        """node-a: our node plugin with nvme_tcp loaded (kubelet copied the topology key to the
        Node's labels); node-b: the plugin without nvme_tcp (no topology: the CSINode lists
        the driver without keys), a segment of its own that reaches none of our volumes."""
        for name, keys in (("node-a", [NVMEOF]), ("node-b", None)):
            labels = {"kubernetes.io/hostname": name}
            if keys:
                labels[NVMEOF] = "true"
            node = self.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                 "metadata": {"name": name, "labels": labels}})
            drv = {"name": k8s.DRIVER, "nodeID": name}
            if keys:
                drv["topologyKeys"] = keys
            self.create("/apis/storage.k8s.io/v1/csinodes", {
                "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                "metadata": {"name": name, "ownerReferences": [{
                    "apiVersion": "v1", "kind": "Node", "name": name,
                    "uid": node["metadata"]["uid"]}]},
                "spec": {"drivers": [drv]}})

    def operator_objects(self):
        st = self.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                           "metadata": {"name": "storage-1"}})
        st["status"] = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}
        self.req("PUT", "/api/v1/nodes/storage-1/status", st)
        objs = [("pillaragents", {"kind": "PillarAgent", "metadata": {"name": cs.AGENT},
                                  "spec": {"nodeRef": {"name": "storage-1",
                                                       "port": self.env.agent_port}}}),
                ("pillarprotocols", {"kind": "PillarProtocol", "metadata": {"name": "tcp"},
                                     "spec": {"protocol": {"nvmeofTcp": {"port": 4420}}}})]
        for store, pool in (("sa", "fa"), ("sb", "fb")):
            objs.append(("pillarstores", {"kind": "PillarStore", "metadata": {"name": store},
                                          "spec": {"agentRef": cs.AGENT,
                                                   "backend": {"file": {"pool": pool}}}}))
        # wa, wb: WaitForFirstConsumer (the classes capacity tracking is for); imm: Immediate
        for psc, store, mode in (("wa", "sa", "WaitForFirstConsumer"),
                                 ("wb", "sb", "WaitForFirstConsumer"), ("imm", "sa", None)):
            spec = {"storeRef": store, "protocolRef": "tcp"}
            if mode:
                spec["storageClass"] = {"volumeBindingMode": mode}
            objs.append(("pillarstorageclasses", {"kind": "PillarStorageClass",
                                                  "metadata": {"name": psc}, "spec": spec}))
        for plural, o in objs:
            self.create("/apis/%s/%s" % (GROUP, plural), dict(o, apiVersion=GROUP))

    def start(self):
        env = self.env
        check(env.start_agent(), "the agent starts with two file pools")
        self.operator_objects()
        env.kubeconfig = self.c.kubeconfig
        env.controller_args = ["--kube-api-qps=50", "--kube-api-burst=100"]
        os.environ["PILLAR_CAPACITY_INTERVAL"] = "1s"
        check(env.start_controller(), "the controller starts on the API server")
        for sc in ("wa", "wb", "imm"):
            check(cs.wait_for(lambda: self.get("/apis/storage.k8s.io/v1/storageclasses/" + sc),
                              60), "StorageClass %s generated" % sc)
        ch = cs.grpc.insecure_channel("unix://" + env.sock)
        self.ctl = csig.ControllerStub(ch)
        self.caps = k8s.Caps(csi, csig.IdentityStub(ch), self.ctl)

    # ---- the checks ----
    def store_available(self, store):
        q = ((self.pillar("pillarstore", store) or {}).get("status") or {}).get(
            "capacity", {}).get("available")
        return k8s.quantity_bytes(q) if q else None

    def settle(self, store, pool):
        """Waits until the PillarStore shows the pool's free space (the controller's refresh)."""
        return cs.wait_for(lambda: self.store_available(store) == self.free(pool), 30, 0.2)

    def objects(self):
        return {(o["storageClassName"], tuple(sorted(
            (o.get("nodeTopology") or {}).get("matchLabels", {}).items()))): o
            for o in self.tracker.objects()}

    def run(self):
        if not self.pools():
            return
        dep = self.owner_chain()
        self.workers()
        self.start()
        for store, pool in (("sa", "fa"), ("sb", "fb")):
            check(self.settle(store, pool), "PillarStore %s: available = the free space of %s"
                  % (store, pool), (self.store_available(store), self.free(pool)))
        pod = self.get("/api/v1/namespaces/%s/pods" % NS)["items"][0]["metadata"]["name"]
        self.tracker = k8s.CapacityTracker(csi, self.ctl, self.api, NS, pod=pod, level=2)
        check(self.tracker.owner == {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": dep["metadata"]["name"],
                                     "uid": dep["metadata"]["uid"], "controller": True},
              "--capacity-ownerref-level=2: the owner is the Deployment", self.tracker.owner)
        self.tracker.sync()
        self.first_objects(dep)
        self.requests()
        self.fill()
        self.unchanged()
        self.class_gone()

    def first_objects(self, dep):
        objs = self.objects()
        a, b = self.free("fa"), self.free("fb")
        seg = ((NVMEOF, "true"),)
        want = {("wa", seg): (a, a), ("wb", seg): (b, b), ("wa", ()): (0, 0), ("wb", ()): (0, 0)}
        check(sorted(objs) == sorted(want),
              "one object per WaitForFirstConsumer class and topology segment (none for the "
              "Immediate class)", sorted(objs))
        for key, (cap, mx) in sorted(want.items()):
            o = objs.get(key)
            if o is None:
                continue
            what = "%s in {%s}" % (key[0], ",".join("%s=%s" % kv for kv in key[1]))
            check(k8s.quantity_bytes(o.get("capacity")) == cap and
                  k8s.quantity_bytes(o.get("maximumVolumeSize")) == mx and
                  o.get("capacity") == k8s.binary_si(cap),
                  "%s: capacity and maximumVolumeSize %d MiB (the pool's free space; 0 where no "
                  "volume of ours is reachable)" % (what, cap // MiB),
                  (o.get("capacity"), o.get("maximumVolumeSize")))
        o = objs.get(("wa", seg))
        if o:
            md = o["metadata"]
            check(md["name"].startswith("csisc-") and md.get("generateName") == "csisc-" and
                  md.get("namespace") == NS and md.get("labels") == {
                      k8s.DRIVER_LABEL: k8s.DRIVER, k8s.MANAGED_BY_LABEL: "external-provisioner"}
                  and md.get("ownerReferences") == [{
                      "apiVersion": "apps/v1", "kind": "Deployment",
                      "name": dep["metadata"]["name"], "uid": dep["metadata"]["uid"],
                      "controller": True}] and
                  o.get("nodeTopology") == {"matchLabels": {NVMEOF: "true"}},
                  "object: csisc- name in %s, driver and managed-by labels, owned by the "
                  "Deployment, nodeTopology of the segment" % NS, o)

    def requests(self):
        reqs = self.tracker.requests
        sc = self.get("/apis/storage.k8s.io/v1/storageclasses/wa")
        mine = [r for r, _ in reqs if dict(r.parameters) == sc.get("parameters")]
        shape = all(len(r.volume_capabilities) == 1 and r.volume_capabilities[0].HasField("mount")
                    and r.volume_capabilities[0].access_mode.mode ==
                    csi.VolumeCapability.AccessMode.UNKNOWN and r.HasField("accessible_topology")
                    for r, _ in reqs)
        segs = sorted((dict(r.accessible_topology.segments) for r in mine), key=len)
        check(len(reqs) == 4 and shape and segs == [{}, {NVMEOF: "true"}],
            "GetCapacity as csi-provisioner sends it: the class's parameters, one mount "
            "capability (UNKNOWN), the segment", [str(r) for r, _ in reqs][:2])

    def fill(self):
        """Volumes of class wa fill pool fa: after each, its objects follow the pool down."""
        sc = self.get("/apis/storage.k8s.io/v1/storageclasses/wa")
        cluster = {"nodes": self.req("GET", "/api/v1/nodes")["items"],
                   "csinodes": self.req("GET", "/apis/storage.k8s.io/v1/csinodes")["items"]}
        seg = ((NVMEOF, "true"),)
        b0 = self.objects()[("wb", seg)]
        seen, self.pvs = [self.free("fa")], []
        for i, size in enumerate((16, 16, 24)):
            pvc = {"metadata": {"name": "fill-%d" % i, "namespace": "default",
                                "uid": "0000000%d-1111-2222-3333-444444444444" % i},
                   "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "wa",
                            "resources": {"requests": {"storage": "%dMi" % size}}}}
            req = k8s.create_volume(csi, self.caps, sc, pvc, cluster, selected_node="node-a")
            code, msg, r = cs.call(self.ctl.CreateVolume, req)
            if not check(code == cs.OK, "CreateVolume %d MiB in pool fa" % size, (code, msg)):
                return
            self.pvs.append(k8s.pv_of(sc, pvc, req, r))
            settled = self.settle("sa", "fa")
            self.tracker.sync()  # the refresh after provisioning
            o = self.objects()[("wa", seg)]
            free = self.free("fa")
            check(settled and free < seen[-1] and
                  k8s.quantity_bytes(o["capacity"]) == free and
                  k8s.quantity_bytes(o["maximumVolumeSize"]) == free,
                  "after %d MiB more: capacity and maximumVolumeSize of wa are the %.1f MiB fa "
                  "has left" % (size, free / MiB),
                  (o.get("capacity"), o.get("maximumVolumeSize"), free, settled))
            seen.append(free)
        b1 = self.objects()[("wb", seg)]
        check(b1["metadata"]["resourceVersion"] == b0["metadata"]["resourceVersion"],
              "wb's object (pool fb) untouched while fa fills")
        # the scheduler's view now refuses a claim larger than maximumVolumeSize: so does the pool
        pvc = {"metadata": {"name": "too-big", "namespace": "default",
                            "uid": "99999999-1111-2222-3333-444444444444"},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "wa",
                        "resources": {"requests": {"storage": "%dMi" % (seen[-1] // MiB + 1)}}}}
        code, msg, _ = cs.call(self.ctl.CreateVolume, k8s.create_volume(
            csi, self.caps, sc, pvc, cluster, selected_node="node-a"))
        check(code != cs.OK, "a volume above maximumVolumeSize does not fit the pool", (code, msg))
        for pv in self.pvs:
            code, msg, _ = cs.call(self.ctl.DeleteVolume, k8s.delete_volume(csi, pv))
            check(code == cs.OK, "DeleteVolume " + pv["metadata"]["name"], (code, msg))
        settled = self.settle("sa", "fa")
        self.tracker.sync()
        o = self.objects()[("wa", seg)]
        check(settled and k8s.quantity_bytes(o["maximumVolumeSize"]) == self.free("fa") == seen[0],
              "the volumes deleted: wa's object is back at the whole pool",
              (o.get("maximumVolumeSize"), self.free("fa"), seen[0]))

    def unchanged(self):
        before = {k: o["metadata"]["resourceVersion"] for k, o in self.objects().items()}
        self.tracker.sync()
        after = {k: o["metadata"]["resourceVersion"] for k, o in self.objects().items()}
        check(before == after, "a refresh with nothing changed writes nothing", (before, after))

    def class_gone(self):
        st, _, raw, _ = self.api.request("DELETE", "/apis/%s/pillarstorageclasses/wb" % GROUP)
        check(st < 300, "PillarStorageClass wb deleted", raw[:200])
        check(cs.wait_for(lambda: self.get("/apis/storage.k8s.io/v1/storageclasses/wb") is None,
                          30), "its StorageClass goes")
        self.tracker.sync()
        check(sorted(k[0] for k in self.objects()) == ["wa", "wa"],
              "the class gone: its objects are deleted, wa's stay", sorted(self.objects()))

    def stop(self):
        self.env.procs.stop_all()
        for d in self.mounts:
            subprocess.run(["umount", "-l", d])


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    t0 = time.monotonic()
    os.makedirs(os.path.join(work, "kube"), exist_ok=True)
    with Cluster(directory=os.path.join(work, "kube")) as c:
        s = Suite(work, c)
        try:
            s.run()
        finally:
            s.stop()
    print("(%.0f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash of the suite is a failure, not a pass
        import traceback
        traceback.print_exc()
        check(False, "the suite ran to the end", repr(e))
    print("(capacity suite: %d passed, %d failed)" % (passed, failed))
    sys.exit(1 if failed else 0)
