#!/usr/bin/python3
"""Power-cut suite (issue 30): a power cut of the controller's machine or of the storage node at
each durable write of a CSI CreateVolume, against `pillar-csi controller` on the embedded store
and `pillar-csi agent` on a fake configfs root with a `file` backend, on loopback.

The fault point is the binary's own (src/base/powercut.c, PILLAR_TEST_POWERCUT): from its start
the process keeps a copy of each directory as a power cut would leave it, taken after each
completed fsync of that directory (a file whose data was written and not fsynced is copied
empty); told "N ROUND" it kills itself just before its N-th fsync from then.  After the kill
every directory of that machine (the controller's store; the agent's state directory and file
pool) is replaced by its last such copy, or by the suite's copy taken before the process started:
renames and creates without a later fsync of their directory are undone, data never fsynced is
lost; the store's last-version counter belongs to the old boot; the storage node's kernel state
(the nvmet tree) is emptied.
The killed process is started again and the CSI caller retries its unanswered CreateVolume as
csi-provisioner does; then every volume whose CreateVolume was acknowledged, before or at the
cut, must be intact: its PillarVolumeState Ready with success-recorded and exportSpec, its
backend image of its size, its fencing mark of its UID at a generation no greater than the
record's, its subsystem exported again; no temporary file is left in the store.

For each process N runs 1, 2, ... until the process survives a whole CreateVolume (N beyond its
fsyncs of one create), so every durable write of a create, and whatever runs beside it, is a cut
point: the controller's Ready write is lazy (written with its next journal batch, at most 100 ms
after the answer), so one round cuts an acknowledged create before its Ready is durable; the
restarted controller must complete it (Ready within 60 s) with nothing retried.  Prints PASS/FAIL per round and "powercut interop: N passed, M failed".

  powercut.py DIR
"""
import os
import shutil
import signal
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
import controller_suite as cs  # noqa: E402
from controller_suite import OK, call, cond, csi, csig, apb, apbg, grpc, k8s  # noqa: E402,F401

MiB = 1 << 20
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED,
             grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)


def escape(volume_id):  # agent-api.md §6.2
    keep = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
    return "".join(chr(b) if b in keep else "_%02X" % b for b in volume_id.encode())


class Suite:
    def __init__(self, base):
        self.env = cs.Env(base)
        self.env.reconcile_interval = "2s"
        self.control = {"controller": os.path.join(base, "cut-controller"),
                        "agent": os.path.join(base, "cut-agent")}
        self.acked = {}  # CSI volume name (= PillarVolumeState name) -> the answered volume
        self.passed = self.failed = 0
        self.n = 0

    def check(self, name, ok, why=""):
        if ok:
            self.passed += 1
            print("PASS " + name, flush=True)
        else:
            self.failed += 1
            print("FAIL %s: %s" % (name, why), flush=True)

    # ---- processes ----
    def start(self, role):
        os.environ["PILLAR_TEST_POWERCUT"] = self.control[role]
        for p in (self.control[role], self.control[role] + ".hit"):
            if os.path.exists(p):
                os.unlink(p)
        self.keep_baseline(role)  # the process is not running: all of it is durable
        try:
            ok = self.env.start_agent() if role == "agent" else self.env.start_controller()
        finally:
            del os.environ["PILLAR_TEST_POWERCUT"]
        if not ok:
            raise SystemExit("%s did not start" % role)

    def connect(self):
        """The CSI client, once the (re)started controller answers on its socket."""
        deadline = time.monotonic() + 60
        while True:
            ch = grpc.insecure_channel("unix://" + self.env.sock)
            self.ctl = csig.ControllerStub(ch)
            try:
                self.caps = k8s.Caps(csi, csig.IdentityStub(ch), self.ctl)
                return
            except grpc.RpcError:
                ch.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def setup(self):
        env = self.env
        self.start("agent")
        self.start("controller")
        rc, out, err = env.apply(cs.objects(env.agent_port))
        if rc != 0:
            raise SystemExit("apply: " + out + err)
        if not cs.wait_for(lambda: cond(env.get("pa", cs.AGENT), "ExportsReady")[:2] ==
                           ("True", "ExportsServing") and env.get("sc", cs.PSC), 60):
            raise SystemExit("the PillarAgent never reached ExportsServing")
        self.sc = env.get("sc", cs.PSC)
        # started again, so that its copy of the store taken before the start holds what the
        # CLI wrote (durable: another process's fsyncs)
        env.procs.stop("controller")
        self.start("controller")
        self.connect()

    # ---- CSI ----
    def request(self, name):
        pvc = {"metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4())},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
                   "storage": "1Mi"}}, "storageClassName": cs.PSC}}
        return k8s.create_volume(csi, self.caps, self.sc, pvc, cs.CLUSTER)

    def create_until_ok(self, req, limit=90):
        """csi-provisioner's retries of an unanswered CreateVolume: the same request again."""
        deadline = time.monotonic() + limit
        code = msg = None
        while time.monotonic() < deadline:
            code, msg, r = call(self.ctl.CreateVolume, req, timeout=20)
            if code == OK:
                return r.volume
            if code not in RETRYABLE:
                break
            time.sleep(0.3)
        raise SystemExit("CreateVolume %s: %s %s" % (req.name, code, msg))

    # ---- the power cut ----
    def machine_dirs(self, role):
        """The directories of role's machine that hold durable state."""
        roots = [self.env.store] if role == "controller" else [self.env.state, self.env.files]
        out = []
        for r in roots:
            for d, _, _ in os.walk(r):
                out.append(d)
        return out

    def keep_baseline(self, role):
        """A copy of role's directories before the process starts (all of it durable: what the
        process had not made durable was dropped at its cut)."""
        base = self.control[role] + ".baseline"
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        for d in self.machine_dirs(role):
            dest = os.path.join(base, d.replace("/", "!"))
            os.makedirs(dest)
            for f in os.listdir(d):
                if os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f)):
                    shutil.copyfile(os.path.join(d, f), os.path.join(dest, f))
        # the fault point's durable copies start as the baseline: an fsync (or fdatasync) of a
        # file whose name is in it keeps its data even before its directory is fsynced
        shutil.rmtree(self.control[role] + ".durable", ignore_errors=True)
        shutil.copytree(base, self.control[role] + ".durable")

    def drop_unsynced(self, role):
        """Replaces each of role's directories by its last durable copy (the fault point's,
        else the baseline): what only the page cache held is gone.  Returns what changed."""
        done = []
        durable = self.control[role] + ".durable"
        baseline = self.control[role] + ".baseline"
        for d in self.machine_dirs(role):
            key = d.replace("/", "!")
            src = os.path.join(durable, key)
            if not os.path.isdir(src):
                src = os.path.join(baseline, key)
            if not os.path.isdir(src):
                continue  # made after arming; its entry in the parent decides (kept)
            # the copy's directories name durable subdirectories: files only here
            want = {f for f in os.listdir(src) if os.path.isfile(os.path.join(src, f))}
            for f in os.listdir(d):
                p = os.path.join(d, f)
                if os.path.isfile(p) and not os.path.islink(p) and f not in want:
                    os.unlink(p)
                    done.append("%s dropped" % p)
            for f in sorted(want):
                p = os.path.join(d, f)
                with open(os.path.join(src, f), "rb") as a:
                    data = a.read()
                try:
                    with open(p, "rb") as b:
                        same = b.read() == data
                except OSError:
                    same = False
                if not same:
                    with open(p, "wb") as b:
                        b.write(data)
                    done.append("%s back to its durable content" % p)
        if role == "controller":  # a new boot: the store trusts no page-cache-only counter
            with open(os.path.join(self.env.store, ".oplock"), "w") as f:
                f.write("powercut-new-boot 0 0\n")
        if role == "agent":
            for sub in ("subsystems", "ports", "hosts"):
                root = os.path.join(self.env.nvmet, sub)
                for e in sorted(os.listdir(root), reverse=True):
                    self.rm_tree(os.path.join(root, e))
            done.append("nvmet tree emptied")
        return [x.replace(self.env.base + "/", "") for x in done]

    @staticmethod
    def rm_tree(p):
        if os.path.islink(p) or not os.path.isdir(p):
            os.unlink(p)
            return
        for e in os.listdir(p):
            Suite.rm_tree(os.path.join(p, e))
        os.rmdir(p)

    def round(self, role, n):
        """One cut of role at its n-th fsync during a CreateVolume; False when the process made
        fewer than n fsyncs in the whole create (no cut)."""
        env = self.env
        self.n += 1
        req = self.request("cut-%s-%d" % (role, n))
        name = req.name  # pvc-<claim uid>, as csi-provisioner names it
        with open(self.control[role], "w") as f:
            f.write("%d %d\n" % (n, self.n))
        proc = env.procs.live[role]
        code, msg, r = call(self.ctl.CreateVolume, req, timeout=20)
        if code == OK:
            self.acked[name] = r.volume
        time.sleep(1.0)  # work the create started (the resync it queued) may reach the point
        hit_path = self.control[role] + ".hit"
        if proc.poll() is None and not os.path.exists(hit_path):
            os.unlink(self.control[role])
            env.procs.stop(role, signal.SIGKILL)  # disarmed by a start without the file
            self.start(role)
            if role == "controller":
                self.connect()
            if name not in self.acked:
                self.acked[name] = self.create_until_ok(req)
            return False
        if not cs.wait_for(lambda: proc.poll() is not None, 10):
            raise SystemExit("%s did not die at its fault point" % role)
        with open(hit_path) as f:
            hit = f.read().strip()
        env.procs.stop(role, signal.SIGKILL)
        done = self.drop_unsynced(role)
        print("  %s cut before fsync #%d of %s (CreateVolume %s): %s" % (
            role, n, hit, "acknowledged" if code == OK else "unanswered (%s)" % code.name,
            "; ".join(done) or "nothing to drop"), flush=True)
        self.start(role)
        if role == "controller":
            self.connect()
        if name not in self.acked:
            self.acked[name] = self.create_until_ok(req)
        self.verify("%s cut before fsync #%d" % (role, n))
        return True

    # ---- invariants ----
    def temps_left(self):
        """Temporary files of the store that no write in flight explains: a write of the running
        controller has one for its duration, so only those still there 10 s later count."""
        def temps():
            return {os.path.join(root, f) for root, _, files in os.walk(self.env.store)
                    for f in files if ".tmp." in f}
        seen = temps()
        if seen:
            time.sleep(10)
            seen &= temps()
        return sorted(seen)

    def verify(self, label):
        env = self.env
        bad = []
        # the restore after a storage-node cut: every acknowledged volume exported again
        want = {name: v for name, v in self.acked.items()}

        def exported():
            subs = set(os.listdir(os.path.join(env.nvmet, "subsystems")))
            return all(cs.nqn_of("%s/%s" % (cs.POOL, n)) in subs for n in want)
        cs.wait_for(exported, 60)

        def ready():  # a create whose lazy Ready the cut took: the restart completes it
            return all((env.get("pvst", n) or {}).get("status", {}).get("phase") == "Ready"
                       for n in want)
        cs.wait_for(ready, 60)
        for name, vol in want.items():
            avid = "%s/%s" % (cs.POOL, name)
            pvst = env.get("pvst", name)
            st = (pvst or {}).get("status", {})
            ann = (pvst or {}).get("metadata", {}).get("annotations", {})
            if st.get("phase") != "Ready" or ann.get(cs.P + "success-recorded") != "true" or \
                    not st.get("exportSpec"):
                bad.append("%s: PillarVolumeState not Ready/success-recorded/exportSpec: %s"
                           % (name, st.get("phase")))
                continue
            img = os.path.join(env.files, name + ".img")
            if not os.path.exists(img) or os.path.getsize(img) != vol.capacity_bytes:
                bad.append("%s: backend image %s missing or of the wrong size" % (name, img))
            mark = os.path.join(env.state, "generations", escape(avid) + ".mark")
            try:
                with open(mark) as f:
                    m = cs.json.load(f)
                if m.get("volumeUID") != pvst["metadata"]["uid"] or m.get("ended") or \
                        m.get("generation", 0) > st.get("publicationGeneration", 0):
                    bad.append("%s: mark %s against uid %s generation %s" % (
                        name, m, pvst["metadata"]["uid"], st.get("publicationGeneration")))
            except (OSError, ValueError) as e:
                bad.append("%s: fencing mark unreadable: %s" % (name, e))
            if cs.nqn_of(avid) not in os.listdir(os.path.join(env.nvmet, "subsystems")):
                bad.append("%s: not exported after the restart" % name)
        bad.extend("temporary file left: %s" % p for p in self.temps_left())
        self.check("%s: %d acknowledged volumes intact, the interrupted create completed" % (
            label, len(want)), not bad, "; ".join(bad[:5]))


def main_of(suite_class, run_rounds, name):
    """A power-cut suite's command line (`<script> DIR`): run_rounds(suite_class(DIR)), then
    the time taken and "<name> interop: N passed, M failed"; exits 1 when any check failed."""
    base = sys.argv[1]
    os.makedirs(base, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda sig, f: (_ for _ in ()).throw(SystemExit(130)))
    s = suite_class(base)
    t0 = time.monotonic()
    try:
        run_rounds(s)
    except SystemExit as e:  # a call that never completes, a process that never starts
        s.check("the rounds ran to their end", False, str(e))
    finally:
        s.env.procs.stop_all()
    print("(%.0f s)" % (time.monotonic() - t0))
    print("%s interop: %d passed, %d failed" % (name, s.passed, s.failed))
    sys.exit(1 if s.failed else 0)


def main():
    main_of(Suite, run, "powercut")


def run(s):
    s.setup()
    req = s.request("before")
    s.acked[req.name] = s.create_until_ok(req)
    for role in ("controller", "agent"):
        n = 1
        while n <= 12 and s.round(role, n):
            n += 1
        s.check("%s: cut at each of its %d fsyncs of a CreateVolume" % (role, n - 1),
                1 <= n - 1 < 12, "the fault point never fired or never stopped firing")


if __name__ == "__main__":
    main()
