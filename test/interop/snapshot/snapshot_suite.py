#!/usr/bin/python3
"""Snapshot suite (issue 27): csi-sanity's snapshot specs (pkg/sanity/controller.go: the
DeleteSnapshot, CreateSnapshot and ListSnapshots contexts and the CreateVolume-from-source
cases) against `pillar-csi controller` (embedded store) + `pillar-csi agent` (fake configfs
root, `file` backend), each request built as csi-snapshotter and csi-provisioner build it
(test/interop/lib/sidecars.py); then the records (PillarSnapshot, spec.contentSource) and the
agent's files.  csi-sanity itself (Go) does not run here; each case below names its spec.

  snapshot_suite.py DIR
Prints PASS/FAIL per case and "(snapshot suite: N passed, M failed)".
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
import controller_suite as cs  # noqa: E402
from controller_suite import csi, csig, k8s, rep, call, OK, wait_for  # noqa: E402
import grpc  # noqa: E402

C = grpc.StatusCode
VSCLASS, content = k8s.VSCLASS, k8s.snapshot_content


class Sanity:
    def __init__(self, env, kube, sc):
        self.env, self.kube, self.sc, self.ctl = env, kube, sc, kube.ctl
        self.n = 0

    def volume(self, size="1Mi"):
        self.n += 1
        pvc = self.kube.claim("claim-%d" % self.n, size)
        code, msg, req, pv, resp = self.kube.provision(self.sc, pvc)
        if code != OK:
            raise RuntimeError("CreateVolume: %s %s" % (code, msg))
        return pv

    def snapshot(self, uid, handle):
        return call(self.ctl.CreateSnapshot, k8s.create_snapshot(csi, VSCLASS, content(uid, handle)))

    def list(self, **kw):
        return call(self.ctl.ListSnapshots, csi.ListSnapshotsRequest(**kw))

    def delete(self, snapshot_id):
        return call(self.ctl.DeleteSnapshot, csi.DeleteSnapshotRequest(snapshot_id=snapshot_id))


def run(base):
    env = cs.Env(base)
    try:
        suite(env)
    finally:
        if env.fwd:
            env.fwd.release()
            env.fwd.server.stop(0)
        env.procs.stop_all()


def suite(env):
    if not (rep.check("agent starts (file backend)", env.start_agent()) and
            rep.check("controller starts on the embedded store", env.start_controller())):
        return
    env.fwd = cs.Forwarder("127.0.0.1:%d" % env.agent_port)
    rc, out, err = env.apply(cs.objects(env.fwd.port))
    ok = wait_for(lambda: cs.cond(env.get("psc", cs.PSC), "Ready")[0] == "True" and
                  env.get("sc", cs.PSC), 30)
    if not rep.check("objects applied, StorageClass generated", rc == 0 and bool(ok), out + err):
        return
    ch = grpc.insecure_channel("unix://" + env.sock)
    ctl = csig.ControllerStub(ch)
    kube = cs.Kube(env, ctl, k8s.Caps(csi, csig.IdentityStub(ch), ctl))
    s = Sanity(env, kube, env.get("sc", cs.PSC))
    R = csi.ControllerServiceCapability.RPC
    caps = {c.rpc.type for c in ctl.ControllerGetCapabilities(
        csi.ControllerGetCapabilitiesRequest()).capabilities}
    rep.check("ControllerGetCapabilities: CREATE_DELETE_SNAPSHOT, LIST_SNAPSHOTS, CLONE_VOLUME",
              {R.CREATE_DELETE_SNAPSHOT, R.LIST_SNAPSHOTS, R.CLONE_VOLUME} <= caps, caps)
    delete_specs(s)
    create_specs(s)
    list_specs(s)
    source_specs(s)


def delete_specs(s):
    code, msg, _ = s.delete("")
    rep.check("DeleteSnapshot: should fail when no snapshot id is provided",
              code == C.INVALID_ARGUMENT, (code, msg))
    code, msg, r = s.delete("reallyfakesnapshotid")
    rep.check("DeleteSnapshot: should succeed when an invalid snapshot id is used", code == OK,
              (code, msg))
    pv = s.volume()
    code, msg, r = s.snapshot("d-1", pv["spec"]["csi"]["volumeHandle"])
    if not rep.check("DeleteSnapshot: (setup) CreateSnapshot", code == OK, (code, msg)):
        return
    req = k8s.delete_snapshot(csi, content("d-1", "", r.snapshot.snapshot_id))
    code, msg, dr = call(s.ctl.DeleteSnapshot, req)
    rep.check("DeleteSnapshot: should return appropriate values (no optional values added)",
              code == OK and dr.ListFields() == [], (code, msg))
    rep.check("DeleteSnapshot: the PillarSnapshot is gone",
              s.env.get("psnap", "snapshot-d-1") is None)
    code, msg, _ = call(s.ctl.DeleteSnapshot, req)
    rep.check("DeleteSnapshot: a second delete of the same ID is OK", code == OK, (code, msg))


def create_specs(s):
    pv = s.volume()
    vid = pv["spec"]["csi"]["volumeHandle"]
    code, msg, _ = call(s.ctl.CreateSnapshot, csi.CreateSnapshotRequest(source_volume_id=vid))
    rep.check("CreateSnapshot: should fail when no name is provided",
              code == C.INVALID_ARGUMENT, (code, msg))
    code, msg, _ = call(s.ctl.CreateSnapshot, csi.CreateSnapshotRequest(name="sanity-x"))
    rep.check("CreateSnapshot: should fail when no source volume id is provided",
              code == C.INVALID_ARGUMENT, (code, msg))
    code, msg, r1 = s.snapshot("c-1", vid)
    code2, msg2, r2 = s.snapshot("c-1", vid)
    rep.check("CreateSnapshot: should succeed when requesting to create a snapshot with already "
              "existing name and same source volume ID",
              code == code2 == OK and r1.snapshot == r2.snapshot, (code, msg, code2, msg2))
    if code == OK:
        sn = r1.snapshot
        rep.check("CreateSnapshot: the answer has snapshot_id, source_volume_id, size_bytes, "
                  "creation_time, ready_to_use",
                  sn.snapshot_id.startswith(cs.AGENT + "/snapshot/file/" + cs.POOL + "/snapshot-") and
                  sn.source_volume_id == vid and sn.size_bytes >= 1 << 20 and
                  sn.creation_time.seconds > 0 and sn.ready_to_use, sn)
        ps = s.env.get("psnap", "snapshot-c-1") or {}
        rep.check("CreateSnapshot: PillarSnapshot Ready with the snapshot's record",
                  ps.get("status", {}).get("phase") == "Ready" and
                  ps["spec"]["snapshotID"] == sn.snapshot_id and
                  ps["spec"]["snapshotRef"] == {"name": "vs-c-1", "namespace": "default",
                                                "contentName": "snapcontent-c-1"},
                  json.dumps(ps))
    other = s.volume()
    code, msg, _ = s.snapshot("c-1", other["spec"]["csi"]["volumeHandle"])
    rep.check("CreateSnapshot: should fail when requesting to create a snapshot with already "
              "existing name and different source volume ID", code == C.ALREADY_EXISTS,
              (code, msg))
    name = "a" * 128
    req = csi.CreateSnapshotRequest(name=name, source_volume_id=vid)
    code, msg, r = call(s.ctl.CreateSnapshot, req)
    rep.check("CreateSnapshot: should succeed when creating snapshot with maximum-length name",
              code == OK and r.snapshot.snapshot_id.endswith("/" + name), (code, msg))
    if code == OK:
        s.delete(r.snapshot.snapshot_id)
    code, msg, _ = call(s.ctl.CreateSnapshot, csi.CreateSnapshotRequest(
        name="sanity-missing", source_volume_id=cs.AGENT + "/nvmeof-tcp/file/fp/pvc-none"))
    rep.check("CreateSnapshot: a source volume that does not exist is NOT_FOUND",
              code == C.NOT_FOUND, (code, msg))


def list_specs(s):
    code, msg, r = s.list()
    rep.check("ListSnapshots: should return appropriate values (no optional values added)",
              code == OK and all(e.snapshot.snapshot_id and e.snapshot.source_volume_id and
                                 e.snapshot.creation_time.seconds for e in r.entries), (code, msg))
    before = len(r.entries) if r else 0
    pv = s.volume()
    vid = pv["spec"]["csi"]["volumeHandle"]
    code, msg, made = s.snapshot("l-1", vid)
    code, msg, r = s.list(snapshot_id=made.snapshot.snapshot_id)
    rep.check("ListSnapshots: should return snapshots that match the specified snapshot id",
              code == OK and [e.snapshot.snapshot_id for e in r.entries] ==
              [made.snapshot.snapshot_id], (code, msg))
    code, msg, r = s.list(snapshot_id="abcd")
    rep.check("ListSnapshots: should return empty when the specified snapshot id does not exist",
              code == OK and len(r.entries) == 0, (code, msg))
    code, msg, r = s.list(source_volume_id=vid)
    rep.check("ListSnapshots: should return snapshots that match the specified source volume id",
              code == OK and [e.snapshot.source_volume_id for e in r.entries] == [vid],
              (code, msg))
    code, msg, r = s.list(source_volume_id="abcd")
    rep.check("ListSnapshots: should return empty when the specified source volume id does not "
              "exist", code == OK and len(r.entries) == 0, (code, msg))
    code, msg, r = s.list()
    rep.check("ListSnapshots: check the presence of new snapshots in the snapshot list",
              code == OK and len(r.entries) == before + 1 and
              made.snapshot.snapshot_id in [e.snapshot.snapshot_id for e in r.entries],
              (code, msg))
    for i in range(2, 6):
        s.snapshot("l-%d" % i, vid)
    code, msg, r = s.list(max_entries=3)
    total = before + 5
    ok = code == OK and len(r.entries) == 3 and r.next_token
    seen = [e.snapshot.snapshot_id for e in r.entries] if r else []
    while ok and r.next_token:
        code, msg, r = s.list(max_entries=3, starting_token=r.next_token)
        ok = code == OK
        seen += [e.snapshot.snapshot_id for e in r.entries] if ok else []
    rep.check("ListSnapshots: should return next token when a limited number of entries are "
              "requested (pages of 3 cover all %d once)" % total,
              ok and len(seen) == len(set(seen)) == total, (code, msg, seen))
    code, msg, _ = s.list(starting_token="not-a-token")
    rep.check("ListSnapshots: an invalid starting_token is ABORTED", code == C.ABORTED,
              (code, msg))
    code, msg, r = call(s.ctl.ListSnapshots,
                        k8s.snapshot_status(csi, content("l-1", vid, made.snapshot.snapshot_id)))
    rep.check("ListSnapshots: csi-snapshotter's readiness check of a content",
              code == OK and len(r.entries) == 1 and r.entries[0].snapshot.ready_to_use,
              (code, msg))
    s.delete(made.snapshot.snapshot_id)
    code, msg, r = s.list(snapshot_id=made.snapshot.snapshot_id)
    rep.check("ListSnapshots: a deleted snapshot is no longer listed",
              code == OK and len(r.entries) == 0, (code, msg))


def restore(s, name, size, kind, source, bound):
    pvc = s.kube.claim(name, size)
    pvc["spec"]["dataSource"] = {"kind": kind, "name": source["metadata"]["name"]}
    req = k8s.create_volume(csi, s.kube.caps, s.sc, pvc, cs.CLUSTER)
    k8s.content_source(csi, req, pvc, source, bound)
    return call(s.ctl.CreateVolume, req)


def source_specs(s):
    pv = s.volume("2Mi")
    vid = pv["spec"]["csi"]["volumeHandle"]
    code, msg, made = s.snapshot("r-1", vid)
    if not rep.check("CreateVolume from source: (setup) a snapshot of a 2 MiB volume", code == OK,
                     (code, msg)):
        return
    sid = made.snapshot.snapshot_id
    vs = {"metadata": {"name": "vs-r-1"}, "status": {
        "boundVolumeSnapshotContentName": "snapcontent-r-1", "readyToUse": True,
        "restoreSize": str(made.snapshot.size_bytes)}}
    code, msg, r = restore(s, "restored", "2Mi", "VolumeSnapshot", vs,
                           content("r-1", vid, sid))
    rep.check("CreateVolume: should create volume from an existing source snapshot",
              code == OK and r.volume.content_source.snapshot.snapshot_id == sid and
              r.volume.capacity_bytes >= made.snapshot.size_bytes, (code, msg))
    if code == OK:
        name = r.volume.volume_id.rsplit("/", 1)[1]
        v = s.env.get("pvst", name) or {}
        rep.check("the restored volume records spec.contentSource and is Ready with its own NQN",
                  v.get("spec", {}).get("contentSource") == {"snapshotID": sid} and
                  v.get("status", {}).get("phase") == "Ready" and
                  v["status"]["exportInfo"]["targetID"] == cs.nqn_of(cs.POOL + "/" + name),
                  json.dumps(v))
    req = csi.CreateVolumeRequest(name="sanity-nosnap", volume_capabilities=[csi.VolumeCapability(
        mount=csi.VolumeCapability.MountVolume(), access_mode=csi.VolumeCapability.AccessMode(
            mode=csi.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))],
        parameters={cs.P + "storage-class": cs.PSC})
    req.volume_content_source.snapshot.snapshot_id = cs.AGENT + "/snapshot/file/fp/nope"
    code, msg, _ = call(s.ctl.CreateVolume, req)
    rep.check("CreateVolume: should fail when the volume source snapshot is not found",
              code == C.NOT_FOUND, (code, msg))
    srcpvc = {"metadata": {"name": "claim-src"}}
    code, msg, r = restore(s, "cloned", "2Mi", "PersistentVolumeClaim", srcpvc, pv)
    rep.check("CreateVolume: should create volume from an existing source volume",
              code == OK and r.volume.content_source.volume.volume_id == vid, (code, msg))
    req.name = "sanity-novol"
    req.volume_content_source.volume.volume_id = cs.AGENT + "/nvmeof-tcp/file/fp/pvc-nope"
    code, msg, _ = call(s.ctl.CreateVolume, req)
    rep.check("CreateVolume: should fail when the volume source volume is not found",
              code == C.NOT_FOUND, (code, msg))
    try:
        restore(s, "small", "1Mi", "VolumeSnapshot", vs, content("r-1", vid, sid))
        refused = ""
    except k8s.Refused as e:
        refused = str(e)
    rep.check("csi-provisioner refuses a claim smaller than the snapshot's restoreSize",
              refused.startswith("requested volume size 1048576 is less than the size"), refused)
    code, msg, _ = s.delete(sid)
    rep.check("DeleteSnapshot of a snapshot a volume was restored from", code == OK, (code, msg))


if __name__ == "__main__":
    try:
        run(sys.argv[1])
    except k8s.Refused as e:
        rep.check("a sidecar refused a request the suite expected it to send", False, str(e))
    print("(snapshot suite: %d passed, %d failed)" % (rep.passed, rep.failed))
    sys.exit(1 if rep.failed else 0)
