#!/usr/bin/python3
"""Kill -9 of the agent at each step of its snapshot calls (issue 27, docs/snapshots.md "Crash
safety"): CreateSnapshot, CreateVolume from a snapshot, CreateVolume from a volume (a clone) and
DeleteSnapshot on the `file` backend (fake configfs root).

A step is a system call that changes the agent's files (the backend's directory or its state
directory: open for writing, write, truncate, chmod, times, fsync, link, rename, unlink, copy,
reflink ioctl).  A dry run of each call under `strace -f -y` lists its steps; then, for each step,
a fresh environment is set up, strace attaches to the agent and delivers SIGKILL on entry to that
very system call (`-e inject=SYSCALL:signal=KILL:when=N -P PATH`: the N-th such call on that path
by that thread), so the step itself never happens.  The agent is started again, answered one
complete ReconcileState (as the controller does), and then

  * retry: the same call with the next fencing generation (the controller's claim) succeeds, and
    the result is exact: the snapshot file or the new volume holds the source's bytes, sizes as
    asked; a deleted snapshot is gone;
  * give up (CreateSnapshot, CreateVolume from a snapshot): DeleteSnapshot / DeleteVolume with the
    next generation leaves nothing of the interrupted object;

and in both cases nothing is left that no object owns: the backend directory holds exactly the
volumes and snapshots that exist, no temporary file; every fencing mark is strict JSON of the
spec's shape for an object the client made, with the last generation sent (ended once deleted).

Usage: snapcrash.py DIR.  Prints PASS/FAIL per case and "(agent snapshot crash: N passed, M
failed)".
"""
import faulthandler
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import (FILE, POOL, Agent, Report, call, create_req, escape, file_params,  # noqa: E402
                      grpc, pb, strict_json, token)

SIZE = 4 << 20
OK, UNAVAILABLE = grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE
STEPS = {"openat", "write", "pwrite64", "ftruncate", "fchmod", "fsync", "fdatasync", "link",
         "rename", "renameat", "renameat2", "unlink", "unlinkat", "copy_file_range", "ioctl",
         "utimensat", "mkdir"}
# the state directory's own spare files (src/base/file.c), never an object's: .spare and
# .spare.prev, and a grouped write's .spare.<slot> and .spare.prev.<slot> a kill may leave
SPARES = re.compile(r'^\.spare(\.prev)?(\.[0-9]+)?$')
LAST = None  # in a wanted mark: the last generation the client sent
LINE = re.compile(r'^(\d+) +([a-z0-9_]+)\((.*)$')


def src_req(gen):
    return create_req("%s/v" % POOL, SIZE, "uid-v", gen)


def snap_req(gen):
    return pb.CreateSnapshotRequest(snapshot_id="%s/s" % POOL, source_volume_id="%s/v" % POOL,
                                    backend_type=FILE, backend_params=file_params(),
                                    fence=token("uid-s", gen))


def from_req(name, source, gen):
    r = create_req("%s/%s" % (POOL, name), SIZE, "uid-" + name, gen)
    if source == "s":
        r.content_source.snapshot_id = "%s/s" % POOL
    else:
        r.content_source.volume_id = "%s/%s" % (POOL, source)
    return r


def del_snap_req(gen):
    return pb.DeleteSnapshotRequest(snapshot_id="%s/s" % POOL, backend_type=FILE,
                                    fence=token("uid-s", gen))


def del_vol_req(name, gen):
    return pb.DeleteVolumeRequest(volume_id="%s/%s" % (POOL, name), backend_type=FILE,
                                  fence=token("uid-" + name, gen))


def until_done(fn, req):
    """The call, repeated while it answers UNAVAILABLE (a copy going on), as the controller
    retries; (code, message, response)."""
    deadline = time.monotonic() + 60
    while True:
        c, m, r = call(fn, req, 30)
        if c != UNAVAILABLE or time.monotonic() > deadline:
            return c, m, r
        time.sleep(0.05)


# Each operation: setup(agent) makes what the call needs (and the data); run(agent, gen) is the
# call (stub method, request); retry_want(env) and give_up(agent, gen) / give_up_want(env) the expected end states as
# {file name: source file whose bytes it must hold (None: any)} and {mark: (generation, ended)}.
def setup_volume(ag):
    assert call(ag.stub.CreateVolume, src_req(1), 10)[0] == OK
    with open(os.path.join(ag.files, "v.img"), "r+b") as f:
        f.seek(0)
        f.write(os.urandom(1 << 20))
        f.seek(3 << 20)
        f.write(os.urandom(256 << 10))  # data, a hole, data, a hole


def setup_snapshot(ag):
    setup_volume(ag)
    assert until_done(ag.stub.CreateSnapshot, snap_req(1))[0] == OK
    with open(os.path.join(ag.files, "v.img"), "r+b") as f:
        f.write(os.urandom(4096))  # the volume moves on; the snapshot must not


OPS = [
    {"name": "CreateSnapshot", "setup": setup_volume,
     "run": lambda ag, g: (ag.stub.CreateSnapshot, snap_req(g)),
     "retry_want": ({"v.img": None, "v@s.snap": "v.img"}, {"v": (1, False), "s": (LAST, False)}),
     "give_up": lambda ag, g: (ag.stub.DeleteSnapshot, del_snap_req(g)),
     "give_up_want": ({"v.img": None}, {"v": (1, False), "s": (LAST, True)})},
    {"name": "CreateVolume from a snapshot", "setup": setup_snapshot,
     "run": lambda ag, g: (ag.stub.CreateVolume, from_req("r", "s", g)),
     "retry_want": ({"v.img": None, "v@s.snap": None, "r.img": "v@s.snap"},
                    {"v": (1, False), "s": (1, False), "r": (LAST, False)}),
     "give_up": lambda ag, g: (ag.stub.DeleteVolume, del_vol_req("r", g)),
     "give_up_want": ({"v.img": None, "v@s.snap": None},
                      {"v": (1, False), "s": (1, False), "r": (LAST, True)})},
    {"name": "CreateVolume from a volume", "setup": setup_volume,
     "run": lambda ag, g: (ag.stub.CreateVolume, from_req("c", "v", g)),
     "retry_want": ({"v.img": None, "c.img": "v.img"}, {"v": (1, False), "c": (LAST, False)})},
    {"name": "DeleteSnapshot", "setup": setup_snapshot,
     # the controller retries a delete with the generation it recorded (snapshots.md)
     "run": lambda ag, g: (ag.stub.DeleteSnapshot, del_snap_req(2)),
     "retry_want": ({"v.img": None}, {"v": (1, False), "s": (2, True)})},
]


def mark_name(key):
    return escape(("snapshot:%s/%s" if key == "s" else "%s/%s") % (POOL, key)) + ".mark"


def problems(ag, want, sums):
    """What differs from the wanted end state: files, their bytes, marks."""
    files_want, marks_want = want
    bad = []
    have = sorted(os.listdir(ag.files))
    if have != sorted(files_want):
        bad.append("backend files %s, want %s" % (have, sorted(files_want)))
    for f, src in files_want.items():
        p = os.path.join(ag.files, f)
        if src and os.path.exists(p):
            if os.path.getsize(p) != SIZE:
                bad.append("%s: %d bytes, want %d" % (f, os.path.getsize(p), SIZE))
            if digest(p) != sums.get(src):
                bad.append("%s does not hold the bytes of %s" % (f, src))
    gdir = os.path.join(ag.state, "generations")
    names = {mark_name(k): v for k, v in marks_want.items()}
    for n in sorted(os.listdir(gdir)):
        if SPARES.match(n):
            continue
        if n not in names:
            bad.append("state file %s belongs to no object" % n)
            continue
        try:
            m = strict_json(os.path.join(gdir, n))
        except (OSError, ValueError) as e:
            bad.append("%s: %s" % (n, e))
            continue
        size = m.pop("imageBytes", 1)  # optional: the size of the file image a create made
        if set(m) != {"volumeUID", "generation", "ended", "endedUIDs"} or \
                type(size) is not int or not 1 <= size <= 2**53:
            bad.append("%s: bad shape %s" % (n, m))
        elif (m["generation"], m["ended"]) != names[n]:
            bad.append("%s: generation %s ended %s, want %s" % (n, m["generation"], m["ended"],
                                                                names[n]))
    for n in names:
        if not os.path.exists(os.path.join(gdir, n)):
            bad.append("mark %s missing" % n)
    return bad


def digest(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def attach(pid, args, out):
    """strace attached to every thread of pid (following new ones); the strace process."""
    st = subprocess.Popen(["strace", "-f", "-qq", "-o", out] + args + ["-p", str(pid)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        tasks = os.listdir("/proc/%d/task" % pid)
        traced = 0
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                    traced += any(ln.startswith("TracerPid:") and ln.split()[1] != "0"
                                  for ln in f)
            except OSError:
                pass
        if traced == len(tasks):
            return st
        time.sleep(0.02)
    st.kill()
    raise RuntimeError("strace did not attach to %d" % pid)


def parse(line, base):
    """(tid, syscall, first path argument under base, args) of a trace line, else None.  Only
    the first path argument (a string or a descriptor strace decoded with -y): strace's -P
    matches a rename by its source, not its target."""
    m = LINE.match(line)
    if not m:
        return None
    p = re.search(r'(?:<|")(/[^>"]*)(?:>|")', re.sub(r"AT_FDCWD<[^>]*>", "", m.group(3)))
    if not p or not p.group(1).startswith(base + "/"):
        return None
    return int(m.group(1)), m.group(2), p.group(1), m.group(3)


def is_step(sc, path, args):
    """A system call that changes a file of the agent's (its log excluded)."""
    if sc not in STEPS or path.endswith(".log"):
        return False
    return sc != "openat" or re.search(r"O_WRONLY|O_RDWR|O_CREAT", args) is not None


def kill_points(base, op):
    """The steps of op's call in a dry run: [(syscall, path, n, text)], n counted per thread
    on (syscall, path) the way strace's -P and when= count."""
    env = os.path.join(base, "dry")
    shutil.rmtree(env, ignore_errors=True)
    ag = Agent(env, grace="0s")
    try:
        if not ag.start():
            raise RuntimeError("agent did not start: " + ag.log_text()[-500:])
        call(ag.stub.ReconcileState, pb.ReconcileStateRequest(complete=True), 10)
        op["setup"](ag)
        trace = os.path.join(env, "trace")
        st = attach(ag.proc.pid, ["-y"], trace)
        c, m, _ = until_done(*op["run"](ag, 2))
        st.terminate()  # detaches: the agent's own shutdown is no step of the call
        st.wait(20)
        if c != OK:
            raise RuntimeError("dry run of %s: %s %s" % (op["name"], c, m))
    finally:
        ag.kill()
    points, seen = [], {}
    with open(trace) as f:
        lines = [x for x in map(lambda ln: parse(ln, env), f.read().splitlines()) if x]
    for tid, sc, path, args in lines:
        # strace counts each tracee's calls of sc whose path matches (-P), steps or not
        seen[(tid, sc, path)] = n = seen.get((tid, sc, path), 0) + 1
        if is_step(sc, path, args):
            points.append((sc, os.path.relpath(path, env), n, "%s(%s" % (sc, args[:90])))
    return points


def trial(base, op, point, give_up):
    """One kill at point; the problems found (empty: the case passes)."""
    sc, rel, n, _ = point
    env = os.path.join(base, "trial")
    shutil.rmtree(env, ignore_errors=True)
    ag = Agent(env, grace="0s")
    bad = []
    try:
        if not ag.start():
            return ["agent did not start: " + ag.log_text()[-300:]]
        call(ag.stub.ReconcileState, pb.ReconcileStateRequest(complete=True), 10)
        op["setup"](ag)
        sums = {f: digest(os.path.join(ag.files, f)) for f in os.listdir(ag.files)}
        st = attach(ag.proc.pid, ["-e", "trace=" + sc, "-e",
                                  "inject=%s:signal=KILL:when=%d" % (sc, n),
                                  "-P", os.path.join(env, rel)], "/dev/null")
        c, m, _ = call(*op["run"](ag, 2), timeout=20)  # the agent dies in it
        try:
            rc = ag.proc.wait(20)
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            st.terminate()
        st.wait(20)
        if rc != -signal.SIGKILL:
            return ["the kill point was not reached (call answered %s %s; agent %s)"
                    % (c.name, m, rc)]
        ag.kill()
        if not ag.start():
            return ["restart failed: " + ag.log_text()[-300:]]
        c, m, _ = call(ag.stub.ReconcileState, pb.ReconcileStateRequest(complete=True), 10)
        if c != OK:
            bad.append("ReconcileState after the restart: %s %s" % (c.name, m))
        if give_up:
            c, m, _ = until_done(*op["give_up"](ag, 3))
            want = op["give_up_want"]
        else:
            c, m, _ = until_done(*op["run"](ag, 3))
            want = op["retry_want"]
        if c != OK:
            bad.append("%s after the restart: %s %s" % ("give-up" if give_up else "retry",
                                                        c.name, m))
        want = (want[0], {k: (3 if g is LAST else g, e) for k, (g, e) in want[1].items()})
        bad += problems(ag, want, sums)
        if ag.term() != 0:
            bad.append("SIGTERM: the agent did not exit 0")
    finally:
        ag.kill()
    return bad


def main(base):
    faulthandler.dump_traceback_later(900, exit=True)  # a hang is reported, never waited out
    R = Report("agent snapshot crash")
    t0 = time.monotonic()
    total = 0
    only = os.environ.get("SNAPCRASH_ONLY")
    for op in OPS:
        if only and only != op["name"]:
            continue
        try:
            points = kill_points(base, op)
        except (RuntimeError, AssertionError) as e:
            R.check("%s: dry run lists its steps" % op["name"], False, str(e))
            continue
        R.check("%s: dry run lists its steps (%d)" % (op["name"], len(points)), len(points) >= 5,
                points)
        for give_up in ([False, True] if "give_up" in op else [False]):
            failed = []
            for p in points:
                total += 1
                try:
                    bad = trial(base, op, p, give_up)
                except (RuntimeError, AssertionError, OSError) as e:
                    bad = ["trial raised %r" % e]
                if bad:
                    failed.append("kill before %s #%d on %s: %s" % (p[0], p[2], p[1],
                                                                   "; ".join(bad[:4])))
            R.check("%s: SIGKILL before each of its %d steps, restart, %s: %s" % (
                op["name"], len(points), "give up (delete)" if give_up else "retry",
                "nothing left that no object owns" if give_up else
                "the retry finishes the work, nothing left that no object owns"),
                not failed, "\n    ".join(failed[:8]))
    print("    %d kills in %.1f s" % (total, time.monotonic() - t0))
    return R.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
