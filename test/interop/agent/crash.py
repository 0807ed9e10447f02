#!/usr/bin/python3
"""Crash safety of the agent (issue 5 acceptance): SIGKILL at random points of a
create/export/allow/reconcile loop, restart, then check that

  * every fencing mark (state/generations/*.mark) and every identity pin
    (state/nvmet-identity/*.json) is readable strict JSON of the spec's shape
    (agent-api.md §6.2, §8.4), owned by the right lifecycle and never ahead of what the client sent;
  * the restarted agent logs "previous agent process did not drain" and starts gated;
  * one ReconcileState{complete=true} carrying every volume answers OK with every item
    successful and leaves every export complete in the fake configfs tree (subsystem, ACL,
    allowed hosts, derived identity, device, enable=1, port attributes and link).

The client models the controller: a volume enters the restore list as soon as an ExportVolume was
sent for it, a host as soon as an AllowInitiator was sent (publications fail closed), and every
token carries the highest generation the client has sent for that volume.  Every 10th iteration
also simulates a storage reboot (nvmet reloaded: the fake configfs tree emptied) before the
restart.  Usage: crash.py DIR [ITERATIONS]
"""
import os
import random
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import (POOL, TCP, Agent, Report, call, create_req, desired, escape,  # noqa: E402
                      export_problems, export_req, grpc, pb, strict_json, token)

ADDR, PORT = "127.0.0.1", 4420
SIZE = 4 << 20
HOSTS = ["nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-%012d" % i for i in range(3)]


class Vol:
    def __init__(self, i):
        self.vid = "%s/crash-%03d" % (POOL, i)
        self.uid = "uid-%03d-%08x" % (i, random.getrandbits(32))
        self.gen = 0          # highest generation sent
        self.created = False  # CreateVolume confirmed
        self.exported = False  # ExportVolume sent (in the restore list from then on)
        self.hosts = set()    # AllowInitiator sent

    def next_gen(self):
        self.gen += 1
        return self.gen


def check_state_files(agent, vols):
    """Problems with marks and pins (strict JSON, spec shape, lifecycle, generation bound)."""
    bad = []
    by_esc = {escape(v.vid) + ".mark": v for v in vols}
    gdir = os.path.join(agent.state, "generations")
    for n in sorted(os.listdir(gdir)):
        if not n.endswith(".mark"):
            continue  # a temp file of an interrupted write is allowed to stay behind
        p = os.path.join(gdir, n)
        try:
            m = strict_json(p)
        except (OSError, ValueError) as e:
            bad.append("%s: %s" % (n, e))
            continue
        size = m.pop("imageBytes", 1)  # optional: the size of the file image a create made
        if type(size) is not int or not 1 <= size <= 2**53 or \
                set(m) != {"volumeUID", "generation", "ended", "endedUIDs"} or \
                not isinstance(m["volumeUID"], str) or type(m["generation"]) is not int or \
                not 0 <= m["generation"] <= 2**53 or type(m["ended"]) is not bool or \
                not isinstance(m["endedUIDs"], list):
            bad.append("%s: bad shape %s" % (n, m))
            continue
        v = by_esc.get(n)
        if v is None:
            bad.append("%s: mark of an unknown volume" % n)
        elif m["volumeUID"] != v.uid or m["generation"] > v.gen or m["ended"]:
            bad.append("%s: %s does not match the client (uid %s, sent up to %d)"
                       % (n, m, v.uid, v.gen))
    idir = os.path.join(agent.state, "nvmet-identity")
    for n in sorted(os.listdir(idir)):
        if not n.endswith(".json"):
            continue
        try:
            m = strict_json(os.path.join(idir, n))
            if set(m) != {"volumeUID", "identity"} or \
                    set(m["identity"]) != {"uuid", "nguid", "serial"}:
                bad.append("pin %s: bad shape %s" % (n, m))
        except (OSError, ValueError) as e:
            bad.append("pin %s: %s" % (n, e))
    return bad


def restore(agent, vols):
    """One complete ReconcileState with every exported volume; returns a list of problems."""
    items = [v for v in vols if v.exported]
    req = pb.ReconcileStateRequest(complete=True, volumes=[
        desired(v.vid, v.uid, v.gen, ADDR, PORT, sorted(v.hosts)) for v in items])
    c, m, resp = call(agent.stub.ReconcileState, req, timeout=30 + 10 * len(items))
    if c != grpc.StatusCode.OK:
        return ["ReconcileState: %s %s" % (c.name, m)]
    bad = ["%s: %s" % (r.volume_id, r.error_message) for r in resp.results if not r.success]
    if [r.volume_id for r in resp.results] != [v.vid for v in items]:
        bad.append("results not in request order")
    for v in items:
        dev = os.path.join(agent.files, v.vid.split("/")[1] + ".img")
        bad += ["%s: %s" % (v.vid, p)
                for p in export_problems(agent.nvmet, v.vid, dev, sorted(v.hosts), ADDR, PORT)]
    c, m, h = call(agent.stub.HealthCheck, pb.HealthCheckRequest(), timeout=5)
    if c != grpc.StatusCode.OK or h.export_restore_pending:
        bad.append("gate still closed after the complete restore")
    return bad


in_rpc = []


def workload(agent, vols, i, stop):
    """create → export → allow a new volume, grant on an old one, reconcile; until killed."""
    st = agent.stub
    v = Vol(i)
    vols.append(v)
    steps = 0

    def ok(res):
        if res[0] != grpc.StatusCode.OK and stop.is_set():
            in_rpc.append(1)  # the SIGKILL landed while this call was in flight
        return res[0] == grpc.StatusCode.OK

    while not stop.is_set():
        if not v.created:
            if not ok(call(st.CreateVolume, create_req(v.vid, SIZE, v.uid, v.next_gen()), 10)):
                return steps
            v.created = True
        elif not v.exported or steps % 4 == 1:
            v.exported = True
            if not ok(call(st.ExportVolume, export_req(v.vid, v.uid, v.next_gen(), ADDR, PORT),
                           10)):
                return steps
        elif steps % 4 == 2 or len(vols) == 1:
            t = random.choice([x for x in vols if x.exported])
            h = random.choice(HOSTS)
            t.hosts.add(h)
            if not ok(call(st.AllowInitiator, pb.AllowInitiatorRequest(
                    volume_id=t.vid, protocol_type=TCP, initiator_id=h,
                    fence=token(t.uid, t.next_gen())), 10)):
                return steps
        else:
            items = [x for x in vols if x.exported]
            req = pb.ReconcileStateRequest(complete=steps % 8 == 7, volumes=[
                desired(x.vid, x.uid, x.gen, ADDR, PORT, sorted(x.hosts)) for x in items])
            if not ok(call(st.ReconcileState, req, 30)):
                return steps
        steps += 1
    return steps


def main(base, iterations):
    R = Report("agent crash")
    random.seed(int(os.environ.get("CRASH_SEED", time.time())))
    ag = Agent(base, grace="0s")
    vols = []
    t_start = time.monotonic()
    restore_times, kill_delays, steps_done, reboots = [], [], [], 0
    failures = 0
    try:
        if not R.check("agent starts", ag.start(), ag.log_text()[-2000:]):
            return R.finish()
        call(ag.stub.ReconcileState, pb.ReconcileStateRequest(complete=True), 10)
        for i in range(iterations):
            # SIGKILL at a random point of the workload
            stop = threading.Event()
            delay = random.uniform(0.0, 0.35)
            kill_delays.append(delay)

            def killer():
                time.sleep(delay)
                stop.set()
                ag.proc.kill()

            kt = threading.Thread(target=killer)
            kt.start()
            steps_done.append(workload(ag, vols, i, stop))
            kt.join()
            ag.kill()
            if i % 10 == 9:  # simulated storage reboot: nvmet reloaded, tree empty
                reboots += 1
                for d in ("subsystems", "ports", "hosts"):
                    shutil.rmtree(os.path.join(ag.nvmet, d))
                    os.mkdir(os.path.join(ag.nvmet, d))
            bad = check_state_files(ag, vols)
            if not ag.start():
                bad.append("restart failed: " + ag.log_text()[-500:])
            else:
                if "previous agent process did not drain" not in ag.log_text():
                    bad.append("restart did not log 'previous agent process did not drain'")
                c, m, h = call(ag.stub.HealthCheck, pb.HealthCheckRequest(), timeout=5)
                if c != grpc.StatusCode.OK or not h.export_restore_pending:
                    bad.append("restart: gate not closed")
                t0 = time.monotonic()
                bad += restore(ag, vols)
                restore_times.append(time.monotonic() - t0)
                bad += check_state_files(ag, vols)
            if bad:
                failures += 1
                print("  iteration %d (%d volumes, killed after %.0f ms, %d steps): %s"
                      % (i + 1, len(vols), delay * 1000, steps_done[-1], "; ".join(bad[:6])))
                if failures >= 5:
                    break
        n = len(steps_done)
        R.check("%d SIGKILL/restart iterations (%d with a simulated storage reboot): every mark "
                "and pin strict JSON, every export repaired by one complete ReconcileState"
                % (n, reboots), failures == 0 and n == iterations,
                "%d iterations failed" % failures)
        exported = [v for v in vols if v.exported]
        print("    volumes %d (exported %d, hosts granted %d), kill delay 0-%.0f ms, "
              "workload steps per iteration avg %.1f (killed before any step: %d)"
              % (len(vols), len(exported), sum(len(v.hosts) for v in vols),
                 max(kill_delays) * 1000, sum(steps_done) / max(n, 1),
                 sum(1 for s in steps_done if s == 0)))
        if restore_times:
            print("    complete restore: min %.0f ms, avg %.0f ms, max %.0f ms (up to %d volumes)"
                  % (min(restore_times) * 1000, 1000 * sum(restore_times) / len(restore_times),
                     max(restore_times) * 1000, len(exported)))
        print("    SIGKILL landed during an RPC in %d of %d iterations" % (len(in_rpc), n))
        print("    total %.1f s" % (time.monotonic() - t_start))
        rc = ag.term()
        R.check("final SIGTERM: exit 0", rc == 0, rc)
    finally:
        ag.kill()
    return R.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 50))
