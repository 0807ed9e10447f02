#!/usr/bin/python3
"""Agent interop suite: a grpcio client (gRPC C-core) drives a running `pillar-csi agent` (file
backend, fake configfs root, loopback TCP) through a full volume lifecycle and checks the fake
configfs tree and the state directory against agent-api.md and nvmet.md.

  agent_suite.py plain DIR          lifecycle, gate, fencing, restart without reboot
  agent_suite.py mtls DIR CERTDIR   mutual TLS: good client served, wrong/no certificate refused
Prints PASS/FAIL per case and "agent interop: N passed, M failed"; exits 1 on any failure.
"""
import os
import re
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from klog import call_logs, duration_ok  # noqa: E402
from agentlib import (FILE, POOL, SERVICE, TCP, Agent, Report, call, create_req,  # noqa: E402
                      desired, escape, export_problems, export_req, gate_msg, grpc,
                      health_pb2, nqn_of, pb, snapshot, strict_json, token)

VID = POOL + "/pvc-1"
NQN = nqn_of(VID)
UID = "0d4f3b2a-1111-4222-8333-444455556666"
HOST = "nqn.2014-08.org.nvmexpress:uuid:6c1f6a9e-3b1d-4c8e-9a51-0b6f4e3c9a51"
ADDR, PORT = "127.0.0.1", 4420
SIZE = 64 << 20
STALE = "stale fencing token"


def health_status(agent, service):
    try:
        return agent.health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
    except grpc.RpcError as e:
        return e.code()


def mark(agent, vid=VID):
    return strict_json(os.path.join(agent.state, "generations", escape(vid) + ".mark"))


def check_call_logs(R, log):
    """The per-call lines at --v=3 (src/grpc/calllog.h): one per RPC, failures as errors."""
    M = "/pillar_csi.agent.v1.AgentService/"
    cv = call_logs(log, "GRPC call", M + "CreateVolume")
    R.check("log: one line per CreateVolume (the first and its idempotent repeat) at --v=3 with "
            "volume ID, OK and a duration",
            [(s, kv.get("volumeID"), kv.get("code")) for s, kv in cv] == [("I", VID, "OK")] * 2
            and all(duration_ok(kv) for _, kv in cv), cv)
    bad = call_logs(log, "GRPC call failed", M + "AllowInitiator")
    R.check("log: the stale AllowInitiator is an error line with FAILED_PRECONDITION and the "
            "message", [(s, kv.get("volumeID"), kv.get("code")) for s, kv in bad][-1:] ==
            [("E", VID, "FAILED_PRECONDITION")] and
            bad[-1][1].get("err", "").startswith(STALE) and duration_ok(bad[-1][1]), bad)
    sv = call_logs(log, "GRPC call failed", M + "SendVolume")
    R.check("log: the server-streaming SendVolume is logged too (UNIMPLEMENTED)",
            [(s, kv.get("code")) for s, kv in sv] == [("E", "UNIMPLEMENTED")], sv)
    R.check("log: no request bodies at --v=3", "\"GRPC request\"" not in log)


def plain(base):
    R = Report("agent lifecycle")
    # the grace period is long enough for the suite to see the drain on a loaded machine
    ag = Agent(base, grace="10s")
    try:
        run_plain(R, ag)
    finally:
        ag.kill()
    return R.finish()


def run_plain(R, ag):
    S = pb
    if not R.check("agent starts (file backend, fake configfs, 127.0.0.1)", ag.start(),
                   ag.log_text()[-2000:]):
        return
    st = ag.stub
    R.check("plaintext warning logged", "serving without TLS" in ag.log_text())
    R.check("first start logs 'previous agent process did not drain'",
            "previous agent process did not drain" in ag.log_text())
    SERVING = health_pb2.HealthCheckResponse.SERVING
    R.check("grpc.health.v1 Check \"\" and AgentService: SERVING",
            health_status(ag, "") == SERVING and health_status(ag, SERVICE) == SERVING)

    c, m, caps = call(st.GetCapabilities, S.GetCapabilitiesRequest())
    R.check("GetCapabilities: version, NVMEOF_TCP, FILE backend, pool fp discovered",
            c == grpc.StatusCode.OK and caps.agent_version and
            TCP in caps.supported_protocols and FILE in caps.supported_backends and
            [(p.name, p.backend_type) for p in caps.discovered_pools] == [(POOL, FILE)] and
            caps.discovered_pools[0].total_bytes > 0, "%s %s %s" % (c, m, caps))

    c, m, h = call(st.HealthCheck, S.HealthCheckRequest())
    subs = {s.name: s.healthy for s in h.subsystems} if h else {}
    R.check("HealthCheck: export_restore_pending=true at start, subsystems healthy",
            c == grpc.StatusCode.OK and h.export_restore_pending and h.healthy and
            subs.get("nvmet-configfs") and subs.get("nvmet-tcp") and subs.get("state-dir") and
            h.checked_at.seconds > 0, "%s %s %s" % (c, m, h))

    # ---- fencing on a token-less call (agent-api.md §6.3 rule 1) ----
    req = create_req(VID, SIZE, UID, 1)
    req.ClearField("fence")
    got = call(st.CreateVolume, req)
    R.status("CreateVolume without a token: FAILED_PRECONDITION 'stale fencing token ... "
             "missing fencing token'", got, grpc.StatusCode.FAILED_PRECONDITION, STALE)
    R.check("  ... the message names the reason", "missing fencing token" in got[1], got[1])
    R.check("  ... no mark and no volume file were created",
            not os.listdir(os.path.join(ag.state, "generations")) and
            not os.path.exists(os.path.join(ag.files, "pvc-1.img")))

    # ---- create ----
    c, m, cr = call(st.CreateVolume, create_req(VID, SIZE, UID, 1))
    dev = os.path.join(ag.files, "pvc-1.img")
    R.check("CreateVolume: OK, device_path <directory>/<name>.img, capacity",
            c == grpc.StatusCode.OK and cr.device_path == dev and cr.capacity_bytes == SIZE and
            os.path.getsize(dev) == SIZE, "%s %s %s" % (c, m, cr))
    try:
        mk = mark(ag)
        mode = stat.S_IMODE(os.stat(os.path.join(ag.state, "generations",
                                                 "fp_2Fpvc-1.mark")).st_mode)
        # the spec's members, and the size of the sparse image it made (docs/architecture.md)
        R.check("fencing mark generations/fp_2Fpvc-1.mark: spec JSON shape with imageBytes, "
                "mode 0600",
                mk == {"volumeUID": UID, "generation": 1, "ended": False, "endedUIDs": [],
                       "imageBytes": SIZE} and mode == 0o600, "%s mode %o" % (mk, mode))
    except (OSError, ValueError) as e:
        R.check("fencing mark generations/fp_2Fpvc-1.mark readable", False, e)
    R.status("CreateVolume again, same size: OK (idempotent)",
             call(st.CreateVolume, create_req(VID, SIZE, UID, 1)), grpc.StatusCode.OK)
    R.status("CreateVolume again, other size: ALREADY_EXISTS",
             call(st.CreateVolume, create_req(VID, 2 * SIZE, UID, 1)),
             grpc.StatusCode.ALREADY_EXISTS,
             exact='volume "%s" exists with %d bytes; requested %d' % (VID, SIZE, 2 * SIZE))

    # ---- the restore gate (agent-api.md §7.1) ----
    R.status("ExportVolume before the restore: UNAVAILABLE with the gate message",
             call(st.ExportVolume, export_req(VID, UID, 2, ADDR, PORT)),
             grpc.StatusCode.UNAVAILABLE, exact=gate_msg("ExportVolume"))
    R.status("AllowInitiator before the restore: UNAVAILABLE with the gate message",
             call(st.AllowInitiator, S.AllowInitiatorRequest(
                 volume_id=VID, protocol_type=TCP, initiator_id=HOST, fence=token(UID, 2))),
             grpc.StatusCode.UNAVAILABLE, exact=gate_msg("AllowInitiator"))
    R.status("ReconcileState complete=false before the restore: UNAVAILABLE",
             call(st.ReconcileState, S.ReconcileStateRequest(
                 volumes=[desired(VID, UID, 1, ADDR, PORT)], complete=False)),
             grpc.StatusCode.UNAVAILABLE, exact=gate_msg("ReconcileState"))
    R.check("  ... nothing was written to configfs while gated",
            snapshot(ag.nvmet).keys() == {"subsystems", "ports", "hosts"})
    R.check("  ... and the gated calls did not advance the mark", mark(ag)["generation"] == 1)
    c, m, rr = call(st.ReconcileState, S.ReconcileStateRequest(volumes=[], complete=True))
    R.check("ReconcileState complete=true (empty list): OK", c == grpc.StatusCode.OK and
            not rr.results and rr.reconciled_at.seconds > 0, "%s %s" % (c, m))
    c, m, h = call(st.HealthCheck, S.HealthCheckRequest())
    R.check("HealthCheck: export_restore_pending=false after the restore",
            c == grpc.StatusCode.OK and not h.export_restore_pending)

    # ---- export, allow ----
    c, m, ex = call(st.ExportVolume, export_req(VID, UID, 2, ADDR, PORT))
    info = (ex.export_info.target_id, ex.export_info.address, ex.export_info.port,
            ex.export_info.volume_ref) if ex else None
    R.check("ExportVolume (ACL on): OK, ExportInfo{nqn, address, port, \"1\"}",
            c == grpc.StatusCode.OK and info == (NQN, ADDR, PORT, "1"), "%s %s %s" % (c, m, info))
    c, m, ex2 = call(st.ExportVolume, export_req(VID, UID, 2, ADDR, PORT))
    R.check("ExportVolume again: OK, same ExportInfo (idempotent)",
            c == grpc.StatusCode.OK and ex2.export_info == ex.export_info, m)
    R.status("AllowInitiator: OK", call(st.AllowInitiator, S.AllowInitiatorRequest(
        volume_id=VID, protocol_type=TCP, initiator_id=HOST, fence=token(UID, 3))),
        grpc.StatusCode.OK)
    probs = export_problems(ag.nvmet, VID, dev, [HOST], ADDR, PORT)
    R.check("configfs: allowed_hosts link, hosts dir, serial/uuid/nguid = derived identity "
            "(agent-api.md §8.2), device_path, enable=1, port %d linked" %
            __import__("agentlib").port_id_of(ADDR, PORT), not probs, "; ".join(probs))
    R.check("no identity pin when the identity equals the derived one",
            os.listdir(os.path.join(ag.state, "nvmet-identity")) == [])
    R.status("AllowInitiator with a malformed host NQN: INVALID_ARGUMENT",
             call(st.AllowInitiator, S.AllowInitiatorRequest(
                 volume_id=VID, protocol_type=TCP, initiator_id="host-1", fence=token(UID, 3))),
             grpc.StatusCode.INVALID_ARGUMENT)
    R.status("ExportVolume with a malformed volume id: INVALID_ARGUMENT",
             call(st.ExportVolume, export_req("fp/../x", UID, 3, ADDR, PORT)),
             grpc.StatusCode.INVALID_ARGUMENT, exact='invalid volume id "fp/../x"')

    c, m, le = call(st.ListExports, S.ListExportsRequest(protocol_type=TCP))
    e = le.exports.get(VID) if le else None
    R.check("ListExports: fp/pvc-1 → nqn, port 4420, volume_ref \"1\"",
            c == grpc.StatusCode.OK and e is not None and e.target_id == NQN and
            e.port == PORT and e.volume_ref == "1", "%s %s %s" % (c, m, le))
    c, m, lv = call(st.ListVolumes, S.ListVolumesRequest(backend_type=FILE, pool_name=POOL))
    R.check("ListVolumes: fp/pvc-1 exported, capacity",
            c == grpc.StatusCode.OK and [(v.volume_id, v.capacity_bytes, v.exported)
                                         for v in lv.volumes] == [(VID, SIZE, True)], lv)
    c, m, gc = call(st.GetCapacity, S.GetCapacityRequest(backend_type=FILE, pool_name=POOL))
    R.check("GetCapacity: total = used + available",
            c == grpc.StatusCode.OK and gc.total_bytes > 0 and
            gc.used_bytes == gc.total_bytes - gc.available_bytes, "%s %s" % (c, m))
    R.status("GetCapacity of an unconfigured pool: NOT_FOUND",
             call(st.GetCapacity, S.GetCapacityRequest(backend_type=FILE, pool_name="nope")),
             grpc.StatusCode.NOT_FOUND, exact='pool "nope" is not configured on this agent')

    # ---- stale tokens (agent-api.md §6.3 rules 4 and 7) ----
    before = snapshot(ag.nvmet)
    got = call(st.AllowInitiator, S.AllowInitiatorRequest(
        volume_id=VID, protocol_type=TCP, initiator_id=HOST + "0", fence=token(UID, 2)))
    R.status("AllowInitiator with an older generation: FAILED_PRECONDITION 'stale fencing "
             "token'", got, grpc.StatusCode.FAILED_PRECONDITION,
             exact='stale fencing token (uid "%s", generation 2) for volume "%s": generation is '
                   'older than the mark (mark uid "%s", generation 3, ended false)'
                   % (UID, VID, UID))
    got = call(st.ExportVolume, export_req(VID, "other-uid", 9, ADDR, PORT))
    R.status("ExportVolume from another lifecycle: FAILED_PRECONDITION 'stale fencing token'",
             got, grpc.StatusCode.FAILED_PRECONDITION, STALE)
    R.check("  ... reason 'volume is owned by another lifecycle'",
            "volume is owned by another lifecycle" in got[1], got[1])
    R.check("  ... stale calls changed neither configfs nor the mark",
            snapshot(ag.nvmet) == before and mark(ag)["generation"] == 3)

    # ---- unimplemented streams ----
    try:
        list(st.SendVolume(S.SendVolumeRequest(volume_id=VID, backend_type=FILE), timeout=5))
        c = grpc.StatusCode.OK
    except grpc.RpcError as err:
        c = err.code()
    R.check("SendVolume: UNIMPLEMENTED", c == grpc.StatusCode.UNIMPLEMENTED, c)
    check_call_logs(R, ag.log_text())
    try:
        st.ReceiveVolume(iter([S.ReceiveVolumeChunk(volume_id=VID, eof=True)]), timeout=5)
        c = grpc.StatusCode.OK
    except grpc.RpcError as err:
        c = err.code()
    R.check("ReceiveVolume: UNIMPLEMENTED", c == grpc.StatusCode.UNIMPLEMENTED, c)

    # ---- SIGTERM: NOT_SERVING, drain, exit 0 (agent-api.md §10) ----
    before = snapshot(ag.nvmet)
    t0 = time.monotonic()
    ag.proc.send_signal(15)
    seen_not_serving = draining = False
    while time.monotonic() - t0 < 9 and ag.proc.poll() is None:
        if health_status(ag, "") == health_pb2.HealthCheckResponse.NOT_SERVING and \
                health_status(ag, SERVICE) == health_pb2.HealthCheckResponse.NOT_SERVING:
            seen_not_serving = True
        c, m, _ = call(st.HealthCheck, S.HealthCheckRequest(), timeout=2)
        if c == grpc.StatusCode.UNAVAILABLE and m == "agent is draining":
            draining = True
        if seen_not_serving and draining:
            break
        time.sleep(0.05)
    R.check("SIGTERM: health NOT_SERVING during the grace period", seen_not_serving)
    R.check("SIGTERM: agent RPCs answer UNAVAILABLE 'agent is draining'", draining)
    rc = ag.wait()  # one SIGTERM only: a second one means "exit at once"
    R.check("SIGTERM: clean exit 0 after --shutdown-grace-period", rc == 0, rc)
    try:
        dm = strict_json(os.path.join(ag.state, ".drained"))
        ok = set(dm) == {"drainedAt"} and re.match(
            r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$", dm["drainedAt"])
        R.check(".drained written: {\"drainedAt\":\"<RFC 3339>\"}", ok, dm)
    except (OSError, ValueError) as err:
        dm = {}
        R.check(".drained written", False, err)
    R.check("configfs untouched by the shutdown", snapshot(ag.nvmet) == before)

    # ---- restart without reboot (agent-api.md §7.3) ----
    if not R.check("agent restarts", ag.start(), ag.log_text()[-2000:]):
        return
    st = ag.stub
    R.check("restart logs 'previous agent process drained cleanly at <drainedAt>' and removes "
            ".drained", ("previous agent process drained cleanly at %s" % dm.get("drainedAt"))
            in ag.log_text() and not os.path.exists(os.path.join(ag.state, ".drained")),
            ag.log_text()[-1500:])
    c, m, h = call(st.HealthCheck, S.HealthCheckRequest())
    R.check("restart: gate closed again (export_restore_pending=true)",
            c == grpc.StatusCode.OK and h.export_restore_pending)
    R.status("restart: ExportVolume UNAVAILABLE until the complete restore",
             call(st.ExportVolume, export_req(VID, UID, 3, ADDR, PORT)),
             grpc.StatusCode.UNAVAILABLE, gate_msg("ExportVolume"))
    R.check("restart: live configfs entries untouched (same files, contents, mtimes, inodes)",
            snapshot(ag.nvmet) == before)
    c, m, rr = call(st.ReconcileState, S.ReconcileStateRequest(
        volumes=[desired(VID, UID, 3, ADDR, PORT, [HOST])], complete=True))
    R.check("ReconcileState complete=true carrying the live export: OK, item success",
            c == grpc.StatusCode.OK and [(r.volume_id, r.success) for r in rr.results] ==
            [(VID, True)], "%s %s %s" % (c, m, rr))
    R.check("  ... reconciling against the live tree rewrote nothing (no unlink, no disable)",
            snapshot(ag.nvmet) == before)
    probs = export_problems(ag.nvmet, VID, dev, [HOST], ADDR, PORT)
    R.check("  ... export still complete and consistent", not probs, "; ".join(probs))
    c, m, h = call(st.HealthCheck, S.HealthCheckRequest())
    R.check("  ... gate open", c == grpc.StatusCode.OK and not h.export_restore_pending)

    # ---- deny, unexport, delete ----
    deny = S.DenyInitiatorRequest(volume_id=VID, protocol_type=TCP, initiator_id=HOST,
                                  fence=token(UID, 4))
    R.status("DenyInitiator: OK", call(st.DenyInitiator, deny), grpc.StatusCode.OK)
    hosts_dir = os.path.join(ag.nvmet, "hosts")
    probs = export_problems(ag.nvmet, VID, dev, [], ADDR, PORT)
    R.check("  ... allowed_hosts link removed, hosts/<nqn> pruned, export still linked",
            not probs and os.listdir(hosts_dir) == [], "; ".join(probs))
    R.status("DenyInitiator again: OK (idempotent)", call(st.DenyInitiator, deny),
             grpc.StatusCode.OK)
    R.status("DeleteVolume while exported: FAILED_PRECONDITION",
             call(st.DeleteVolume, S.DeleteVolumeRequest(volume_id=VID, backend_type=FILE,
                                                         fence=token(UID, 4))),
             grpc.StatusCode.FAILED_PRECONDITION,
             exact='volume "%s" is still exported as %s; unexport it first' % (VID, NQN))
    unexp = S.UnexportVolumeRequest(volume_id=VID, protocol_type=TCP, fence=token(UID, 5))
    R.status("UnexportVolume: OK", call(st.UnexportVolume, unexp), grpc.StatusCode.OK)
    left = sorted(snapshot(ag.nvmet).keys())
    R.check("  ... subsystem, namespace, port and host entries all removed",
            left == ["hosts", "ports", "subsystems"], left)
    R.status("UnexportVolume again: OK (missing = OK)", call(st.UnexportVolume, unexp),
             grpc.StatusCode.OK)
    delete = S.DeleteVolumeRequest(volume_id=VID, backend_type=FILE, fence=token(UID, 6))
    R.status("DeleteVolume: OK", call(st.DeleteVolume, delete), grpc.StatusCode.OK)
    mk = mark(ag)
    R.check("  ... file removed; mark kept with ended=true",
            not os.path.exists(dev) and mk == {"volumeUID": UID, "generation": 6,
                                               "ended": True, "endedUIDs": []}, mk)
    R.status("DeleteVolume retried at the same generation: OK", call(st.DeleteVolume, delete),
             grpc.StatusCode.OK)
    got = call(st.CreateVolume, create_req(VID, SIZE, UID, 7))
    R.status("CreateVolume for the ended lifecycle: FAILED_PRECONDITION 'stale fencing token'",
             got, grpc.StatusCode.FAILED_PRECONDITION, STALE)
    R.check("  ... reason 'lifecycle already ended'", "lifecycle already ended" in got[1], got[1])
    UID2 = "9e8d7c6b-0000-4000-8000-000000000002"
    R.status("CreateVolume for a new lifecycle of the same name: OK",
             call(st.CreateVolume, create_req(VID, SIZE, UID2, 1)), grpc.StatusCode.OK)
    mk = mark(ag)
    R.check("  ... mark adopts the new UID and lists the old one in endedUIDs",
            mk == {"volumeUID": UID2, "generation": 1, "ended": False, "endedUIDs": [UID],
                   "imageBytes": SIZE}, mk)
    R.status("DeleteVolume of the new lifecycle: OK", call(st.DeleteVolume, S.DeleteVolumeRequest(
        volume_id=VID, backend_type=FILE, fence=token(UID2, 2))), grpc.StatusCode.OK)
    rc = ag.term()
    R.check("final SIGTERM: exit 0", rc == 0, rc)


def mtls(base, certs):
    R = Report("agent mTLS")
    c = lambda n: os.path.join(certs, n)  # noqa: E731
    tls = {"ca": c("ca.crt"), "cert": c("server.crt"), "key": c("server.key"),
           "client_cert": c("client.crt"), "client_key": c("client.key")}
    ag = Agent(base, grace="0s", tls=tls)
    try:
        out = subprocess.run([os.environ["PILLAR_BIN"], "agent", "--config=" +
                              os.path.join(ag.base, "config.json"), "--tls-cert=" + tls["cert"],
                              "--state-dir=" + os.path.join(ag.base, "tls-state"),
                              "--configfs-root=" + os.path.join(ag.base, "tls-cfs"),
                              "--host-root=" + os.path.join(ag.base, "tls-host")],
                             capture_output=True, text=True, timeout=10)
        R.check("--tls-cert alone: exit 1 '--tls-cert, --tls-key and --tls-ca must be set "
                "together'", out.returncode == 1 and out.stderr.strip() ==
                "--tls-cert, --tls-key and --tls-ca must be set together",
                "%d %r" % (out.returncode, out.stderr))
        if not R.check("agent starts with --tls-cert/--tls-key/--tls-ca", ag.start(),
                       ag.log_text()[-2000:]):
            return R.finish()
        R.check("no plaintext warning with mTLS", "serving without TLS" not in ag.log_text())
        c_, m, caps = call(ag.stub.GetCapabilities, pb.GetCapabilitiesRequest(), timeout=5)
        R.check("mTLS, good client certificate: GetCapabilities OK",
                c_ == grpc.StatusCode.OK and caps.agent_version, "%s %s" % (c_, m))
        c_, m, h = call(ag.stub.HealthCheck, pb.HealthCheckRequest(), timeout=5)
        R.check("mTLS, good client certificate: HealthCheck OK",
                c_ == grpc.StatusCode.OK and h.export_restore_pending)
        for name, kw in (("client certificate from another CA", {"cert": c("evil.crt"),
                                                                  "key": c("evil.key")}),
                         ("no client certificate", {"cert": "", "key": ""}),
                         ("plaintext client", {"plaintext": True})):
            ch = ag.make_channel(**kw)
            c_, m, _ = call(__import__("agentlib").pbg.AgentServiceStub(ch).GetCapabilities,
                            pb.GetCapabilitiesRequest(), timeout=5)
            ch.close()
            R.check("mTLS: %s is refused" % name, c_ != grpc.StatusCode.OK, c_)
        c_, m, _ = call(ag.stub.GetCapabilities, pb.GetCapabilitiesRequest(), timeout=5)
        R.check("mTLS: still serving the good client after the refusals",
                c_ == grpc.StatusCode.OK, "%s %s" % (c_, m))
        rc = ag.term()
        R.check("mTLS agent: SIGTERM exit 0", rc == 0, rc)
    finally:
        ag.kill()
    return R.finish()


if __name__ == "__main__":
    if sys.argv[1] == "plain":
        sys.exit(plain(sys.argv[2]))
    sys.exit(mtls(sys.argv[2], sys.argv[3]))
