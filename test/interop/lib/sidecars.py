"""CSI requests built exactly as the Kubernetes components build them, for every interop test that
stands in for a Kubernetes call (the Python twin of test/unit/sidecar.h, which lists the facts and
the source files they come from).  Inputs are Kubernetes objects as dicts (StorageClass,
PersistentVolumeClaim, PersistentVolume, Node, CSINode), so a test states the cluster, not the
request.

  csi-provisioner 5.2   create_volume(), pv_of(), delete_volume(); with --enable-capacity
                        CapacityTracker (GetCapacity → CSIStorageCapacity objects)
  csi-attacher 4.8      attach(), detach()
  csi-resizer 1.13      expand()
  csi-snapshotter 8     create_snapshot(), delete_snapshot(), snapshot_status()
  csi-provisioner       content_source() (a claim's dataSource: restore or clone)

Each takes the generated csi_pb2 module as `csi`.  A component that would refuse before calling
the driver raises Refused with the component's own message.
"""

import base64

DRIVER = "pillar-csi.bhyoo.com"
PREFIX = "csi.storage.k8s.io/"
KNOWN_PREFIXED = {PREFIX + k for k in (
    "fstype", "provisioner-secret-name", "provisioner-secret-namespace",
    "controller-publish-secret-name", "controller-publish-secret-namespace",
    "node-stage-secret-name", "node-stage-secret-namespace", "node-publish-secret-name",
    "node-publish-secret-namespace", "controller-expand-secret-name",
    "controller-expand-secret-namespace", "secret-name", "secret-namespace",
    "node-expand-secret-name", "node-expand-secret-namespace")}


class Refused(Exception):
    """The component fails before calling the driver (its message)."""


class Caps:
    """What the sidecars learn from the driver (GetPluginCapabilities, ControllerGetCapabilities)
    and our deployment's flags (deploy.md §3: --extra-create-metadata; no --default-fstype;
    --immediate-topology defaults to true)."""

    def __init__(self, csi, identity, controller, timeout=10):
        pc = identity.GetPluginCapabilities(csi.GetPluginCapabilitiesRequest(), timeout=timeout)
        cc = controller.ControllerGetCapabilities(csi.ControllerGetCapabilitiesRequest(),
                                                  timeout=timeout)
        svc = {c.service.type for c in pc.capabilities if c.HasField("service")}
        rpc = {c.rpc.type for c in cc.capabilities if c.HasField("rpc")}
        R = csi.ControllerServiceCapability.RPC
        self.topology = csi.PluginCapability.Service.VOLUME_ACCESSIBILITY_CONSTRAINTS in svc
        self.snmw = R.SINGLE_NODE_MULTI_WRITER in rpc
        self.publish_ro = R.PUBLISH_READONLY in rpc
        self.default_fstype = ""
        self.extra_metadata = True
        self.immediate_topology = True


def access_mode(csi, modes, snmw):
    """csi-lib-utils accessmodes.ToCSIAccessMode."""
    M = csi.VolumeCapability.AccessMode
    m = set(modes)
    if "ReadWriteOncePod" in m:
        if len(m) > 1:
            raise Refused("Kubernetes does not support use of ReadWriteOncePod with other access "
                          "modes on the same PersistentVolume")
        return M.SINGLE_NODE_SINGLE_WRITER if snmw else M.SINGLE_NODE_WRITER
    if "ReadWriteMany" in m:
        return M.MULTI_NODE_MULTI_WRITER
    if "ReadOnlyMany" in m and "ReadWriteOnce" in m:
        raise Refused("CSI does not support ReadOnlyMany and ReadWriteOnce on the same "
                      "PersistentVolume")
    if "ReadOnlyMany" in m:
        return M.MULTI_NODE_READER_ONLY
    if "ReadWriteOnce" in m:
        return M.SINGLE_NODE_MULTI_WRITER if snmw else M.SINGLE_NODE_WRITER
    raise Refused("unsupported AccessMode combination: %s" % sorted(m))


def capability(csi, mode, block, fstype, flags):
    am = csi.VolumeCapability.AccessMode(mode=mode)
    if block:
        return csi.VolumeCapability(block=csi.VolumeCapability.BlockVolume(), access_mode=am)
    return csi.VolumeCapability(
        mount=csi.VolumeCapability.MountVolume(fs_type=fstype, mount_flags=list(flags or [])),
        access_mode=am)


def quantity(q):
    q = str(q)
    for i, suf in enumerate(("Ki", "Mi", "Gi", "Ti")):
        if q.endswith(suf):
            return int(q[:-2]) << (10 * (i + 1))
    return int(q)


def _keys(csinode):
    for d in (csinode.get("spec") or {}).get("drivers") or []:
        if d.get("name") == DRIVER:
            return d.get("topologyKeys") or []
    return []


def _named(objs, name):
    return next((o for o in objs if o["metadata"]["name"] == name), None)


def _fnv1(data):
    h = 0x811C9DC5
    for b in data:
        h = (h * 0x01000193) % 2**32
        h ^= b
    return h


def _offset(pvc_name):
    """getPVCNameHashAndIndexOffset: hash + StatefulSet index."""
    base, index = pvc_name, 0
    head, _, tail = pvc_name.rpartition("-")
    if head and tail.isdigit():
        index, base = int(tail), head.rpartition("-")[2]
    return _fnv1(base.encode()) + index


def requirements(csi, caps, cluster, pvc_name, selected):
    """GenerateAccessibilityRequirements (no allowedTopologies, no --strict-topology)."""
    csinodes, nodes = cluster.get("csinodes", []), cluster.get("nodes", [])
    if selected:
        keys = _keys(_named(csinodes, selected) or {})
        if not keys:
            raise Refused("no topology key found for node %s" % selected)
    else:
        if not caps.immediate_topology:
            return None
        keys = next((_keys(c) for c in csinodes if _keys(c)), [])
        if not keys:
            raise Refused("no available topology found")
    keys = sorted(keys)
    terms = []
    for n in nodes:
        labels = n["metadata"].get("labels") or {}
        if all(k in labels for k in keys):
            terms.append(tuple(labels[k] for k in keys))
    if not terms:
        raise Refused("topologyKeys %s were not found on any nodes" % keys)
    terms = sorted(set(terms))
    if selected:
        labels = (_named(nodes, selected) or {"metadata": {}})["metadata"].get("labels") or {}
        sel = tuple(labels.get(k) for k in keys)
        rot = terms.index(sel) if sel in terms else 0
    else:
        rot = _offset(pvc_name) % len(terms)
    topo = lambda t: csi.Topology(segments=dict(zip(keys, t)))  # noqa: E731
    return csi.TopologyRequirement(requisite=[topo(t) for t in terms],
                                   preferred=[topo(t) for t in terms[rot:] + terms[:rot]])


def create_volume(csi, caps, sc, pvc, cluster, selected_node=None):
    """csi-provisioner prepareProvision: the CreateVolumeRequest for pvc of StorageClass sc."""
    if sc.get("allowedTopologies"):
        raise Refused("sidecar emulation: allowedTopologies is not emulated")
    params = sc.get("parameters") or {}
    fs = [v for k, v in params.items() if k.lower() == "fstype" or k == PREFIX + "fstype"]
    if len(fs) > 1:
        raise Refused('fstype specified in parameters with both "fstype" and "%sfstype" keys'
                      % PREFIX)
    fstype = (fs[0] if fs else "") or caps.default_fstype
    spec, meta = pvc["spec"], pvc["metadata"]
    block = spec.get("volumeMode") == "Block"
    caps_list = [capability(csi, access_mode(csi, [m], caps.snmw), block, fstype,
                            sc.get("mountOptions")) for m in spec.get("accessModes") or []]
    name = "pvc-" + meta["uid"]
    req = csi.CreateVolumeRequest(
        name=name, volume_capabilities=caps_list,
        capacity_range=csi.CapacityRange(
            required_bytes=quantity(spec["resources"]["requests"]["storage"])))
    if caps.topology:
        r = requirements(csi, caps, cluster, meta["name"], selected_node)
        if r is not None:
            req.accessibility_requirements.CopyFrom(r)
    for k, v in params.items():
        if k.startswith(PREFIX):
            if k not in KNOWN_PREFIXED:
                raise Refused('failed to strip CSI Parameters of prefixed keys: found unknown '
                              'parameter key "%s" with reserved namespace %s' % (k, PREFIX))
            continue
        req.parameters[k] = v
    if caps.extra_metadata:
        req.parameters[PREFIX + "pvc/name"] = meta["name"]
        req.parameters[PREFIX + "pvc/namespace"] = meta.get("namespace", "")
        req.parameters[PREFIX + "pv/name"] = name
    return req


def pv_of(sc, pvc, req, resp):
    """The PersistentVolume csi-provisioner writes after CreateVolume succeeded."""
    block = pvc["spec"].get("volumeMode") == "Block"
    src = {"driver": DRIVER, "volumeHandle": resp.volume.volume_id,
           "volumeAttributes": dict(resp.volume.volume_context,
                                    **{"storage.kubernetes.io/csiProvisionerIdentity":
                                       "1700000000000-1234-" + DRIVER})}
    fstype = req.volume_capabilities[0].mount.fs_type if req.volume_capabilities else ""
    if not block and fstype:
        src["fsType"] = fstype
    spec = {"accessModes": list(pvc["spec"].get("accessModes") or []),
            "capacity": {"storage": str(resp.volume.capacity_bytes)},
            "volumeMode": "Block" if block else "Filesystem", "csi": src,
            "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete"}
    if sc.get("mountOptions"):
        spec["mountOptions"] = list(sc["mountOptions"])
    if pvc["spec"].get("storageClassName"):  # GetPersistentVolumeClaimClass
        spec["storageClassName"] = pvc["spec"]["storageClassName"]
    meta = pvc.get("metadata") or {}
    if meta.get("uid"):  # pre-bound to its claim
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                            "namespace": meta.get("namespace"), "name": meta.get("name"),
                            "uid": meta["uid"], "resourceVersion": meta.get("resourceVersion")}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": req.name, "annotations": {"pv.kubernetes.io/provisioned-by": DRIVER}},
            "spec": spec}


def delete_volume(csi, pv):
    return csi.DeleteVolumeRequest(volume_id=pv["spec"]["csi"]["volumeHandle"])


def pv_capability(csi, caps, pv):
    """GetVolumeCapabilities of the attacher and the resizer."""
    spec = pv["spec"]
    return capability(csi, access_mode(csi, spec.get("accessModes") or [], caps.snmw),
                      spec.get("volumeMode") == "Block",
                      spec["csi"].get("fsType") or caps.default_fstype, spec.get("mountOptions"))


def node_id(cluster, node):
    """getNodeID: CSINode spec.drivers[driver].nodeID."""
    cn = _named(cluster.get("csinodes", []), node)
    if cn is None:
        raise Refused('csinode.storage.k8s.io "%s" not found' % node)
    for d in (cn.get("spec") or {}).get("drivers") or []:
        if d.get("name") == DRIVER and d.get("nodeID"):
            return d["nodeID"]
    raise Refused("CSINode %s does not contain driver %s" % (node, DRIVER))


def attach(csi, caps, pv, node, cluster):
    """csi-attacher csiAttach: ControllerPublishVolume for a VolumeAttachment of pv to node."""
    src = pv["spec"]["csi"]
    return csi.ControllerPublishVolumeRequest(
        volume_id=src["volumeHandle"], node_id=node_id(cluster, node),
        volume_capability=pv_capability(csi, caps, pv),
        readonly=bool(caps.publish_ro and src.get("readOnly")),
        volume_context=src.get("volumeAttributes") or {})


def detach(csi, pv, node, cluster):
    return csi.ControllerUnpublishVolumeRequest(volume_id=pv["spec"]["csi"]["volumeHandle"],
                                                node_id=node_id(cluster, node))


def expand(csi, caps, pv, new_bytes):
    """csi-resizer Resize after the PVC's request was raised to new_bytes."""
    return csi.ControllerExpandVolumeRequest(
        volume_id=pv["spec"]["csi"]["volumeHandle"],
        capacity_range=csi.CapacityRange(required_bytes=new_bytes),
        volume_capability=pv_capability(csi, caps, pv))


# ---- csi-snapshotter v8 (test/unit/sidecar.h lists the facts and their source files) ----------

SNAPSHOT_KNOWN_PREFIXED = {PREFIX + k for k in (
    "snapshotter-secret-name", "snapshotter-secret-namespace", "snapshotter-list-secret-name",
    "snapshotter-list-secret-namespace", "group-snapshotter-secret-name",
    "group-snapshotter-secret-namespace")}


def create_snapshot(csi, vsclass, content, secret=None, extra_metadata=True):
    """createSnapshotWrapper: name = "snapshot-" + the VolumeSnapshot's UID; parameters = the
    class's minus the reserved keys (another reserved key fails) plus, with
    --extra-create-metadata, the VolumeSnapshot's name and namespace and the content's name;
    secrets = the data of the Secret the class names (decoded)."""
    ref = content["spec"].get("volumeSnapshotRef", {})
    if not ref.get("uid"):
        raise Refused("cannot create snapshot. Snapshot content %s not bound to a snapshot"
                      % content["metadata"]["name"])
    handle = content["spec"].get("source", {}).get("volumeHandle")
    if handle is None:
        raise Refused("cannot create snapshot. Volume handle not found in snapshot content %s"
                      % content["metadata"]["name"])
    params = {}
    for k, v in (vsclass.get("parameters") or {}).items():
        if k.startswith(PREFIX):
            if k not in SNAPSHOT_KNOWN_PREFIXED:
                raise Refused("failed to remove CSI Parameters of prefixed keys: found unknown "
                              "parameter key \"%s\" with reserved namespace %s" % (k, PREFIX))
            continue
        params[k] = v
    if extra_metadata:
        params[PREFIX + "volumesnapshot/name"] = ref.get("name", "")
        params[PREFIX + "volumesnapshot/namespace"] = ref.get("namespace", "")
        params[PREFIX + "volumesnapshotcontent/name"] = content["metadata"]["name"]
    secrets = {k: base64.b64decode(v).decode() for k, v in ((secret or {}).get("data") or {}).items()}
    return csi.CreateSnapshotRequest(name="snapshot-" + ref["uid"], source_volume_id=handle,
                                     parameters=params, secrets=secrets)


# The VolumeSnapshotClass the suites name, and the VolumeSnapshotContent that the snapshot
# controller makes for a dynamically provisioned VolumeSnapshot (what csi-snapshotter reads).
VSCLASS = {"metadata": {"name": "pillar-csi-snapshot"}, "driver": DRIVER,
           "deletionPolicy": "Delete", "parameters": {}}


def snapshot_content(uid, handle, snapshot_handle=None, snapshot_name=None):
    """snapcontent-<uid> for the VolumeSnapshot of UID uid (named snapshot_name, default
    vs-<uid[:8]>, in default) of the volume handle; with snapshot_handle, the status
    csi-snapshotter records after CreateSnapshot."""
    c = {"metadata": {"name": "snapcontent-" + uid},
         "spec": {"driver": DRIVER, "deletionPolicy": "Delete",
                  "source": {"volumeHandle": handle},
                  "volumeSnapshotClassName": VSCLASS["metadata"]["name"],
                  "volumeSnapshotRef": {"kind": "VolumeSnapshot",
                                        "name": snapshot_name or "vs-" + uid[:8],
                                        "namespace": "default", "uid": uid}}}
    if snapshot_handle:
        c["status"] = {"snapshotHandle": snapshot_handle}
    return c


def _snapshot_handle(content):
    return (content.get("status") or {}).get("snapshotHandle") or \
        content["spec"].get("source", {}).get("snapshotHandle")


def delete_snapshot(csi, content, secret=None):
    h = _snapshot_handle(content)
    if not h:
        raise Refused("failed to delete snapshot content %s: snapshotHandle is missing"
                      % content["metadata"]["name"])
    secrets = {k: base64.b64decode(v).decode() for k, v in ((secret or {}).get("data") or {}).items()}
    return csi.DeleteSnapshotRequest(snapshot_id=h, secrets=secrets)


def snapshot_status(csi, content):
    """GetSnapshotStatus: ListSnapshots by the content's snapshot handle."""
    h = _snapshot_handle(content)
    if not h:
        raise Refused("failed to list snapshot for content %s: snapshotHandle is missing"
                      % content["metadata"]["name"])
    return csi.ListSnapshotsRequest(snapshot_id=h)


def content_source(csi, req, pvc, source, bound):
    """The claim's dataSource on a CreateVolumeRequest built by create_volume(): a VolumeSnapshot
    (bound: its VolumeSnapshotContent) or a PVC (bound: its PV)."""
    kind = pvc["spec"]["dataSource"]["kind"]
    want = req.capacity_range.required_bytes
    name = source["metadata"]["name"]
    if kind == "VolumeSnapshot":
        st = source.get("status") or {}
        handle = (bound.get("status") or {}).get("snapshotHandle")
        if not st.get("boundVolumeSnapshotContentName") or not handle:
            raise Refused("snapshot %s not bound" % name)
        if not st.get("readyToUse"):
            raise Refused("snapshot %s is not Ready" % name)
        size = quantity(st.get("restoreSize", "0"))
        if size > want:
            raise Refused("requested volume size %d is less than the size %d for the source "
                          "snapshot %s" % (want, size, name))
        req.volume_content_source.snapshot.snapshot_id = handle
    elif kind == "PersistentVolumeClaim":
        spec = bound.get("spec", {})
        if spec.get("csi", {}).get("driver") != DRIVER:
            raise Refused("the source PVC %s is not bound to a PV of this driver" % name)
        size = quantity(spec.get("capacity", {}).get("storage", "0"))
        if size > want:
            raise Refused("error getting handle for DataSource Type PersistentVolumeClaim by "
                          "Name %s: requested PV size %d is less than source PVC size %d"
                          % (name, want, size))
        req.volume_content_source.volume.volume_id = spec["csi"]["volumeHandle"]
    else:
        raise Refused("unsupported dataSource kind \"%s\"" % kind)
    return req

# ---- csi-provisioner --enable-capacity (external-provisioner pkg/capacity, pkg/owner) -----------
#
# Central mode as our chart runs it (--enable-capacity --capacity-ownerref-level=2, NAMESPACE
# from the Pod; defaults --capacity-poll-interval=1m, --capacity-for-immediate-binding=false).
# The controller keeps one CSIStorageCapacity per (topology segment, StorageClass of the driver
# that is not Immediate) and refreshes every one each poll interval, and the ones of a segment
# right after a volume was provisioned there.  CapacityTracker.sync() is one such refresh of
# every item; a test calls it where the real sidecar would run one.

DRIVER_LABEL = PREFIX + "drivername"
MANAGED_BY_LABEL = PREFIX + "managed-by"
MANAGED_BY = "external-provisioner"  # central provisioning ("-<node>" when distributed)
CAPACITY_POLL_S = 60


def segments(cluster):
    """The topology informer (pkg/capacity/topology/nodes.go): for each CSINode that lists the
    driver, the labels of the Node of the same name for the driver's topology keys, sorted by
    key; a node without one of the keys, or without its Node, is left out; each segment once.
    A driver with no keys on a node gives the empty segment.  Tuples of (key, value)."""
    out = []
    for cn in cluster.get("csinodes", []):
        drv = next((d for d in (cn.get("spec") or {}).get("drivers") or []
                    if d.get("name") == DRIVER), None)
        if drv is None:
            continue
        node = _named(cluster.get("nodes", []), cn["metadata"]["name"])
        if node is None:
            continue
        labels = node["metadata"].get("labels") or {}
        keys = sorted(drv.get("topologyKeys") or [])
        if not all(k in labels for k in keys):
            continue
        seg = tuple((k, labels[k]) for k in keys)
        if seg not in out:
            out.append(seg)
    return out


def binary_si(n):
    """resource.NewQuantity(n, BinarySI).String(): the largest binary suffix that keeps an
    integer (1Gi, 1536Mi, 1000), none for 0 or a number that is not a multiple of 1024."""
    suffix = ""
    for s in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        if n == 0 or n % 1024:
            break
        n //= 1024
        suffix = s
    return "%d%s" % (n, suffix)


def capacity_request(csi, sc, segment):
    """syncCapacity's GetCapacityRequest: the class's parameters as they are (prefixed keys
    included), one mount capability with access mode UNKNOWN (the capacity is assumed not to
    depend on it), the segment as accessible_topology (set, if empty, for the empty segment)."""
    req = csi.GetCapacityRequest(
        parameters=dict(sc.get("parameters") or {}),
        volume_capabilities=[csi.VolumeCapability(
            mount=csi.VolumeCapability.MountVolume(),
            access_mode=csi.VolumeCapability.AccessMode(
                mode=csi.VolumeCapability.AccessMode.UNKNOWN))])
    req.accessible_topology.SetInParent()
    for k, v in segment:
        req.accessible_topology.segments[k] = v
    return req


def _selector(segment):
    """Segment.GetLabelSelector: matchLabels (omitted when empty, as Go's omitempty does)."""
    return {"matchLabels": dict(segment)} if segment else {}


class CapacityTracker:
    """The capacity controller of one csi-provisioner.  api: a client with
    request(method, path, body) -> (status, headers, raw, obj) (test/kube/client.py);
    controller: the CSI Controller stub; namespace: NAMESPACE; pod: POD_NAME; level:
    --capacity-ownerref-level (None: no owner)."""

    def __init__(self, csi, controller, api, namespace, pod=None, level=None,
                 immediate_binding=False):
        self.csi, self.ctl, self.api, self.ns = csi, controller, api, namespace
        self.immediate = immediate_binding
        self.owner = None if level is None else self.lookup_owner(pod, level)
        self.requests = []  # every GetCapacityRequest sent, with its answer

    def _req(self, method, path, body=None):
        st, _, raw, obj = self.api.request(method, path, body)
        if st >= 300:
            raise RuntimeError("%s %s: %d %r" % (method, path, st, raw[:300]))
        return obj

    def lookup_owner(self, pod, level):
        """pkg/owner Lookup from the Pod: up level controlling owners; only apiVersion, kind,
        name, uid and controller: true are kept."""
        api_version, kind, name = "v1", "Pod", pod
        paths = {("v1", "Pod"): "/api/v1/namespaces/%s/pods/%s",
                 ("apps/v1", "ReplicaSet"): "/apis/apps/v1/namespaces/%s/replicasets/%s",
                 ("apps/v1", "Deployment"): "/apis/apps/v1/namespaces/%s/deployments/%s",
                 ("apps/v1", "StatefulSet"): "/apis/apps/v1/namespaces/%s/statefulsets/%s"}
        while True:
            obj = self._req("GET", paths[(api_version, kind)] % (self.ns, name))
            if level == 0:
                return {"apiVersion": api_version, "kind": kind, "name": name,
                        "uid": obj["metadata"]["uid"], "controller": True}
            ref = next((o for o in obj["metadata"].get("ownerReferences") or []
                        if o.get("controller")), None)
            if ref is None:
                raise Refused('%s/%s "%s" in namespace "%s" has no controlling owner, cannot '
                              "unwind the ownership further" % (api_version, kind, name, self.ns))
            if level == 1:
                return {"apiVersion": ref["apiVersion"], "kind": ref["kind"],
                        "name": ref["name"], "uid": ref["uid"], "controller": True}
            api_version, kind, name, level = ref["apiVersion"], ref["kind"], ref["name"], level - 1

    def _path(self, name=None):
        p = "/apis/storage.k8s.io/v1/namespaces/%s/csistoragecapacities" % self.ns
        return p + "/" + name if name else p

    def objects(self):
        """The CSIStorageCapacity objects this instance manages (its informer's selector)."""
        sel = "%s=%s,%s=%s" % (DRIVER_LABEL, DRIVER, MANAGED_BY_LABEL, MANAGED_BY)
        return self._req("GET", self._path() + "?labelSelector=" + sel)["items"]

    def classes(self):
        return [sc for sc in self._req("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"]
                if sc.get("provisioner") == DRIVER and
                (self.immediate or sc.get("volumeBindingMode") != "Immediate")]

    def _owned(self, obj):
        return any(o.get("controller") and o.get("uid") == self.owner["uid"]
                   for o in obj["metadata"].get("ownerReferences") or [])

    def sync(self):
        """One refresh of every item: objects for the items that have none are created, those
        whose capacity, maximumVolumeSize or owner differ are updated (PUT), the others are left
        alone; objects matching no item, and duplicates, are deleted."""
        cluster = {"nodes": self._req("GET", "/api/v1/nodes")["items"],
                   "csinodes": self._req("GET", "/apis/storage.k8s.io/v1/csinodes")["items"]}
        have = self.objects()
        for seg in segments(cluster):
            for sc in self.classes():
                name = sc["metadata"]["name"]
                mine = [o for o in have if o.get("storageClassName") == name and
                        (o.get("nodeTopology") or {}) == _selector(seg)]
                obj = mine[0] if mine else None
                for o in mine:
                    have.remove(o)
                req = capacity_request(self.csi, sc, seg)
                resp = self.ctl.GetCapacity(req, timeout=30)
                self.requests.append((req, resp))
                self._write(obj, name, seg, resp)
        for o in have:  # obsolete or duplicate
            st, _, raw, _ = self.api.request("DELETE", self._path(o["metadata"]["name"]))
            if st >= 300 and st != 404:
                raise RuntimeError("DELETE %s: %d %r" % (o["metadata"]["name"], st, raw[:300]))

    def _write(self, obj, sc_name, seg, resp):
        capacity = binary_si(resp.available_capacity)
        maximum = (binary_si(resp.maximum_volume_size.value)
                   if resp.HasField("maximum_volume_size") else None)
        if obj is None:
            obj = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                   "metadata": {"generateName": "csisc-",
                                "labels": {DRIVER_LABEL: DRIVER, MANAGED_BY_LABEL: MANAGED_BY}},
                   "storageClassName": sc_name, "nodeTopology": _selector(seg),
                   "capacity": capacity}
            if maximum is not None:
                obj["maximumVolumeSize"] = maximum
            if self.owner:
                obj["metadata"]["ownerReferences"] = [dict(self.owner)]
            self._req("POST", self._path(), obj)
            return
        same = (quantity_bytes(obj.get("capacity")) == resp.available_capacity and
                (quantity_bytes(obj.get("maximumVolumeSize")) if "maximumVolumeSize" in obj
                 else None) == (resp.maximum_volume_size.value
                                if resp.HasField("maximum_volume_size") else None))
        if same and (self.owner is None or self._owned(obj)):
            return
        # the informer's copy (a list item: no kind) with the new figures; client-go's encoder
        # sends apiVersion and kind
        obj = dict(obj, apiVersion="storage.k8s.io/v1", kind="CSIStorageCapacity",
                   capacity=capacity)
        obj.pop("maximumVolumeSize", None)
        if maximum is not None:
            obj["maximumVolumeSize"] = maximum
        if self.owner and not self._owned(obj):
            md = dict(obj["metadata"])
            md["ownerReferences"] = list(md.get("ownerReferences") or []) + [dict(self.owner)]
            obj["metadata"] = md
        self._req("PUT", self._path(obj["metadata"]["name"]), obj)


def quantity_bytes(q):
    """A Quantity in bytes (None when absent): plain, binary (Ki..Ei) and decimal (k..E)."""
    if q is None:
        return None
    q = str(q)
    for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")):
        if q.endswith(s):
            return int(q[:-2]) << (10 * (i + 1))
    for i, s in enumerate(("k", "M", "G", "T", "P", "E")):
        if q.endswith(s):
            return int(q[:-1]) * 1000 ** (i + 1)
    return int(q)
