#!/usr/bin/python3
"""Power-cut suite of the calls other than CreateVolume (issue 30): the controller's machine and
the storage node lose power at each durable write of DeleteVolume, ControllerPublishVolume,
ControllerUnpublishVolume, ControllerExpandVolume, CreateSnapshot, DeleteSnapshot and
CreateVolume from a snapshot (the agent's ExportVolume, UnexportVolume, AllowInitiator,
DenyInitiator, ExpandVolume, its fencing marks and identity pins under them), and at each durable
write of the agent's restore (ReconcileState after its restart).

The machinery is test/interop/powercut's (powercut.py: the binary's PILLAR_TEST_POWERCUT fault
point, what a cut keeps and drops).  The cut points are not listed here: for each call and each
process, round N cuts just before that process's N-th fsync after the call started, N = 1, 2, ...
until the process survives the whole call, so a change of how many fsyncs a call makes changes
the number of rounds, never the verdicts.

Each round prepares its own objects (acknowledged, no cut armed), arms the cut, makes the call
once as its sidecar makes it, and when the process died restarts it on what was durable.  Then:
  - the call's objects settle in the state before the call or in the state after it (crds.md's
    `deleting` mark of an interrupted DeleteVolume counts as "before": it is the contract that the
    retry finishes it), never a mix;
  - an acknowledged call's effect is there before anything retries it;
  - every other acknowledged volume is intact (powercut.py's checks) and the store lists;
  - the sidecar's retry of the same request converges to the call's effect (CSI idempotency).

  calls.py DIR    prints PASS/FAIL per round and "powercut-calls interop: N passed, M failed"
"""
import json
import os
import signal
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "powercut"))
import powercut as pc  # noqa: E402
from powercut import cs, call, csi, k8s, OK  # noqa: E402

VSCLASS, content = k8s.VSCLASS, k8s.snapshot_content
SETTLE_S = 30  # how long the restore may take to bring the objects back to a whole state


class Calls(pc.Suite):
    def __init__(self, base):
        super().__init__(base)
        self.snapshots = {}  # acknowledged snapshot ID -> its size

    # ---- objects made without a cut (acknowledged) ----
    def volume(self, tag, size="1Mi", source=None):
        """CreateVolume as csi-provisioner; returns (PV, request)."""
        pvc = {"metadata": {"name": tag, "namespace": "default", "uid": str(uuid.uuid4())},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
                   "storage": size}}, "storageClassName": cs.PSC}}
        req = k8s.create_volume(csi, self.caps, self.sc, pvc, cs.CLUSTER)
        if source:
            req.volume_content_source.snapshot.snapshot_id = source
        return pvc, req

    def made_volume(self, tag, size="1Mi"):
        pvc, req = self.volume(tag, size)
        vol = self.create_until_ok(req)
        self.acked[req.name] = vol
        return k8s.pv_of(self.sc, pvc, req, csi.CreateVolumeResponse(volume=vol))

    def until_ok(self, fn, req, limit=90):
        """A sidecar's retries of an unanswered call: the same request again."""
        deadline = time.monotonic() + limit
        code = msg = None
        while time.monotonic() < deadline:
            code, msg, r = call(fn, req, timeout=20)
            if code == OK:
                return r
            if code not in pc.RETRYABLE:
                break
            time.sleep(0.3)
        raise SystemExit("%s: %s %s" % (type(req).__name__, code, msg))

    # ---- what the objects look like ----
    def pvst(self, name):
        return self.env.get("pvst", name)

    def image(self, name):
        p = os.path.join(self.env.files, name + ".img")
        return os.path.getsize(p) if os.path.exists(p) else None

    def exported(self, name):
        return cs.nqn_of("%s/%s" % (cs.POOL, name)) in \
            os.listdir(os.path.join(self.env.nvmet, "subsystems"))

    def hosts(self, name):
        d = os.path.join(self.env.nvmet, "subsystems", cs.nqn_of("%s/%s" % (cs.POOL, name)),
                         "allowed_hosts")
        return sorted(os.listdir(d)) if os.path.isdir(d) else None

    def published(self, name):
        st = (self.pvst(name) or {}).get("status", {})
        return [(n["nodeID"], n.get("revoking", False)) for n in st.get("publishedNodes") or []]

    def listed_snapshot(self, sid):
        code, msg, r = call(self.ctl.ListSnapshots, csi.ListSnapshotsRequest(snapshot_id=sid))
        if code != OK:
            return "ListSnapshots %s: %s %s" % (sid, code, msg)
        return bool(r.entries)

    # ---- one round ----
    def arm(self, role, n):
        self.n += 1
        with open(self.control[role], "w") as f:
            f.write("%d %d\n" % (n, self.n))

    def cut_or_disarm(self, role, proc):
        """After the call: True when role's process died at its cut (and was restarted on what
        was durable), False when it survived the call (disarmed)."""
        time.sleep(1.0)  # work the call started (a resync it queued) may reach the point
        hit_path = self.control[role] + ".hit"
        survived = proc.poll() is None and not os.path.exists(hit_path)
        if survived:
            # the power goes after the answer: what the call did not make durable is lost
            os.unlink(self.control[role])  # disarmed for the start that follows
            self.hit = "after the call's last fsync"
        elif not cs.wait_for(lambda: proc.poll() is not None, 10):
            raise SystemExit("%s did not die at its fault point" % role)
        else:
            with open(hit_path) as f:
                self.hit = f.read().strip()
        self.env.procs.stop(role, signal.SIGKILL)
        self.dropped = self.drop_unsynced(role)
        self.start(role)
        if role == "controller":
            self.connect()
        return not survived

    def round(self, case, role, n):
        label = "%s: %s cut before fsync #%d" % (case.name, role, n)
        ctx = case.prepare(self, "%s-%s-%d" % (case.tag, role[0], n))
        self.arm(role, n)
        proc = self.env.procs.live[role]
        fn, req = case.request(self, ctx)
        code, msg, _ = call(fn, req, timeout=20)
        if code == OK:
            case.acked(self, ctx)
        more = self.cut_or_disarm(role, proc)
        label = label if more else "%s: %s cut after the answer" % (case.name, role)
        bad = []
        print("  %s (%s): %s; %s" % (label, self.hit, "acknowledged" if code == OK else
                                     "unanswered (%s %s)" % (code.name, msg[:80]),
                                     "; ".join(self.dropped) or "nothing to drop"),
              flush=True)
        # a whole state: the restore settles the call's objects before or after the call; an
        # acknowledged call's after it — a create whose lazy Ready the cut took reads as
        # "before" (Provisioning) until the controller's start provisions it again
        # (architecture.md), which no retry of the sidecar's drives
        last = [None]

        def whole():
            last[0] = case.state(self, ctx)
            if code == OK:
                return last[0] == "after"
            return last[0] in ("before", "after") or last[0].startswith("pending:")
        cs.wait_for(whole, SETTLE_S)
        if not whole():
            bad.append("the acknowledged call's effect is gone after the restart"
                       if code == OK and last[0] == "before" else
                       "after the restart: %s" % last[0])
        rc, out, err = self.env.cli("get", "pvst", "-o", "json")
        if rc != 0:
            bad.append("the store does not list after the restart: %s" % err.strip())
        r = self.until_ok(fn, req)  # csi-provisioner/attacher/resizer/snapshotter: retry
        case.acked(self, ctx, r)
        state = case.state(self, ctx)
        if state != "after":
            bad.append("the retry did not converge: %s" % state)
        self.verify(label)  # every acknowledged volume intact
        self.check(label + ": whole before/after, acknowledged kept, retry converged",
                   not bad, "; ".join(bad))
        return more


# ---- the calls (each: prepare, request, acked, state) -----------------------------------------

class DeleteVolume:
    name, tag = "DeleteVolume", "del"

    def prepare(self, s, tag):
        return {"pv": s.made_volume(tag)}

    def request(self, s, ctx):
        return s.ctl.DeleteVolume, k8s.delete_volume(csi, ctx["pv"])

    def acked(self, s, ctx, r=None):
        s.acked.pop(ctx["pv"]["metadata"]["name"], None)

    def state(self, s, ctx):
        name = ctx["pv"]["metadata"]["name"]
        v, img, exp = s.pvst(name), s.image(name), s.exported(name)
        if v is None and img is None and not exp:
            return "after"
        if v is not None and v["status"].get("deleting"):
            return "before"  # marked: only a retry ends it (csi.md §4.2)
        if v is not None and img is not None and exp and v["status"].get("phase") == "Ready":
            return "before"
        return "half: record %s, image %s, exported %s" % (
            v and json.dumps(v.get("status")), img, exp)


class Publish:
    name, tag = "ControllerPublishVolume", "pub"

    def prepare(self, s, tag):
        return {"pv": s.made_volume(tag)}

    def request(self, s, ctx):
        return s.ctl.ControllerPublishVolume, k8s.attach(csi, s.caps, ctx["pv"], "node-a",
                                                         cs.CLUSTER)

    def acked(self, s, ctx, r=None):
        pass

    def state(self, s, ctx):
        name = ctx["pv"]["metadata"]["name"]
        pub, hosts = s.published(name), s.hosts(name)
        if pub == [("node-a", False)] and hosts == [cs.HOST_A]:
            return "after"
        if hosts == [] and pub in ([], [("node-a", False)]):
            # recorded, not yet admitted: the claim is written before the agent call, a
            # claim alone admits nobody
            return "before" if pub == [] else "pending: claimed, the retry admits the host"
        return "half: publications %s, allowed hosts %s" % (pub, hosts)


class Unpublish(Publish):
    name, tag = "ControllerUnpublishVolume", "unpub"

    def prepare(self, s, tag):
        ctx = Publish.prepare(self, s, tag)
        fn, req = Publish.request(self, s, ctx)
        s.until_ok(fn, req)
        return ctx

    def request(self, s, ctx):
        return s.ctl.ControllerUnpublishVolume, k8s.detach(csi, ctx["pv"], "node-a", cs.CLUSTER)

    def state(self, s, ctx):
        name = ctx["pv"]["metadata"]["name"]
        pub, hosts = s.published(name), s.hosts(name)
        if pub == [] and hosts == []:
            return "after"
        if pub == [("node-a", False)] and hosts == [cs.HOST_A]:
            return "before"
        if pub == [("node-a", True)] and hosts in ([], [cs.HOST_A]):
            return "before"  # fenced (revoking): blocks other nodes until the retry ends it
        return "half: publications %s, allowed hosts %s" % (pub, hosts)


class Expand:
    name, tag = "ControllerExpandVolume", "exp"

    def prepare(self, s, tag):
        return {"pv": s.made_volume(tag), "to": 3 * pc.MiB}

    def request(self, s, ctx):
        return s.ctl.ControllerExpandVolume, k8s.expand(csi, s.caps, ctx["pv"], ctx["to"])

    def acked(self, s, ctx, r=None):
        vol = s.acked[ctx["pv"]["metadata"]["name"]]
        vol.capacity_bytes = ctx["to"]  # the image the other rounds check is of the new size

    def state(self, s, ctx):
        size = s.image(ctx["pv"]["metadata"]["name"])
        if size == ctx["to"]:
            return "after"
        if size == pc.MiB:
            return "before"
        return "half: image of %s bytes" % size


class CreateSnapshot:
    name, tag = "CreateSnapshot", "snap"

    def prepare(self, s, tag):
        pv = s.made_volume(tag)
        return {"pv": pv, "content": content(str(uuid.uuid4()), pv["spec"]["csi"]["volumeHandle"])}

    def request(self, s, ctx):
        return s.ctl.CreateSnapshot, k8s.create_snapshot(csi, VSCLASS, ctx["content"])

    def acked(self, s, ctx, r=None):
        if r is not None:
            ctx["sid"] = r.snapshot.snapshot_id

    def state(self, s, ctx):
        name = "snapshot-" + ctx["content"]["spec"]["volumeSnapshotRef"]["uid"]
        rec = s.env.get("psnap", name)
        sid = ctx.get("sid")
        if sid is None:  # unanswered so far: the record alone says what exists
            return "after" if rec and rec.get("status", {}).get("readyToUse") else \
                "before" if rec is None else "pending: recorded, the retry completes it"
        listed = s.listed_snapshot(sid)
        if rec is not None and listed is True:
            return "after"
        return "half: record %s, listed %s" % (rec and json.dumps(rec.get("status")), listed)


class DeleteSnapshot:
    name, tag = "DeleteSnapshot", "dsnap"

    def prepare(self, s, tag):
        ctx = CreateSnapshot().prepare(s, tag)
        r = s.until_ok(s.ctl.CreateSnapshot, k8s.create_snapshot(csi, VSCLASS, ctx["content"]))
        ctx["sid"] = r.snapshot.snapshot_id
        return ctx

    def request(self, s, ctx):
        c = dict(ctx["content"], status={"snapshotHandle": ctx["sid"]})
        return s.ctl.DeleteSnapshot, k8s.delete_snapshot(csi, c)

    def acked(self, s, ctx, r=None):
        pass

    def state(self, s, ctx):
        name = "snapshot-" + ctx["content"]["spec"]["volumeSnapshotRef"]["uid"]
        rec, listed = s.env.get("psnap", name), s.listed_snapshot(ctx["sid"])
        if rec is None and listed is False:
            return "after"
        if rec is not None and rec.get("status", {}).get("deleting") and listed is False:
            return "before"  # marked: only a retry ends it, the snapshot is no longer listed
        if rec is not None and listed is True:
            return "before"
        return "half: record %s, listed %s" % (rec and json.dumps(rec.get("status")), listed)


class FromSnapshot:
    name, tag = "CreateVolume from a snapshot", "rst"

    def prepare(self, s, tag):
        ctx = DeleteSnapshot.prepare(self, s, tag + "-src")
        src = ctx["pv"]["metadata"]["name"]
        ctx["pvc"], ctx["req"] = s.volume(tag, source=ctx["sid"])
        ctx["src"] = src
        return ctx

    def request(self, s, ctx):
        return s.ctl.CreateVolume, ctx["req"]

    def acked(self, s, ctx, r=None):
        if r is not None:
            s.acked[ctx["req"].name] = r.volume

    def state(self, s, ctx):
        name = ctx["req"].name
        v = s.pvst(name)
        ready = v is not None and v["status"].get("phase") == "Ready"
        if ready and s.image(name) == pc.MiB and s.exported(name) and \
                v["spec"].get("contentSource") == {"snapshotID": ctx["sid"]}:
            return "after"
        if v is None and s.image(name) is None and not s.exported(name):
            return "before"
        if v is not None and not ready:
            return "before"  # Provisioning/CreatePartial: the retry completes it (crds.md §7)
        return "half: record %s, image %s, exported %s" % (
            v and json.dumps(v), s.image(name), s.exported(name))


CASES = (DeleteVolume(), Publish(), Unpublish(), Expand(), CreateSnapshot(), DeleteSnapshot(),
         FromSnapshot())


def restore_rounds(s):
    """The agent's restore: the agent restarts (a reboot: its nvmet tree is empty) with the cut
    armed at its N-th fsync from its start; the writes of its start (the size of an image a
    power cut left empty) and of its ReconcileState (marks, pins) are the cut points.  After
    the second start every acknowledged volume is exported again."""
    n = 1
    while n <= 30:
        s.n += 1
        s.env.procs.stop("agent", signal.SIGKILL)
        s.drop_unsynced("agent")  # the reboot: an empty kernel tree, nothing else lost
        os.environ["PILLAR_TEST_POWERCUT"] = s.control["agent"]
        for p in (s.control["agent"], s.control["agent"] + ".hit"):
            if os.path.exists(p):
                os.unlink(p)
        with open(s.control["agent"], "w") as f:
            f.write("%d %d\n" % (n, s.n))
        s.keep_baseline("agent")
        try:  # its start may write (an image a power cut left empty): a cut point too
            if not s.env.start_agent(cut_hit=s.control["agent"] + ".hit"):
                raise SystemExit("agent did not start")
        finally:
            del os.environ["PILLAR_TEST_POWERCUT"]
        proc = s.env.procs.live["agent"]
        # the restore is done when every acknowledged volume is exported again
        cs.wait_for(lambda: proc.poll() is not None or
                    all(s.exported(name) for name in s.acked), 60)
        more = s.cut_or_disarm("agent", proc)
        label = "ReconcileState: agent cut %s" % (
            "before fsync #%d" % n if more else "after the restore")
        print("  %s (%s): %s" % (label, s.hit, "; ".join(s.dropped)), flush=True)
        s.verify(label)
        if not more:
            break
        n += 1
    # an agent whose marks and pins already match the restore writes nothing (0 cut points)
    s.check("ReconcileState: cut at each of the agent's %d fsyncs of a restore, every "
            "acknowledged volume exported again" % (n - 1), n - 1 < 30,
            "the fault point never stopped firing")


def run(s):
    s.setup()
    s.made_volume("bystander")  # an acknowledged volume no call touches: it stays intact
    only = os.environ.get("POWERCUT_CALLS")  # a subset by tag, e.g. "del pub"
    for case in CASES:
        if only and case.tag not in only.split():
            continue
        for role in ("controller", "agent"):
            n = 1
            while n <= 16 and s.round(case, role, n):
                n += 1
            s.check("%s: %s cut at each of its %d fsyncs" % (case.name, role, n - 1),
                    n - 1 < 16, "the fault point never stopped firing")
    if not only or "restore" in only.split():
        restore_rounds(s)


def main():
    pc.main_of(Calls, run, "powercut-calls")


if __name__ == "__main__":
    main()
