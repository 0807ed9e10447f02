#!/usr/bin/python3
"""Hostile strings against every role (case_strings.sh of the hostile-client suite).

protobuf-c hands a handler a C string that ends at the first NUL byte, so before the fix
DeleteVolume{volume_id: "<a real volume ID>\\0junk"} deleted that real volume.  Here an agent
(fake configfs, a `file` backend) and a controller (embedded store) run as the controller
component suite starts them (test/interop/controller), and a node on a fake host root; every
root is inside HOSTILE_TMP.  Each check prints "ok - <what>" or "not ok - <what>: <why>".
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.environ["HOSTILE_PY"])
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "controller"))
import controller_suite as cs  # noqa: E402  (Env: agent on a fake configfs, controller, CLI)
from controller_suite import csi, csig, apb, apbg, grpc, k8s  # noqa: E402
import health_pb2 as hpb  # noqa: E402

TMP = os.environ["HOSTILE_TMP"]
SENT = os.environ["HOSTILE_SENTINEL_DIR"]
INVALID = grpc.StatusCode.INVALID_ARGUMENT
failed = 0


def check(what, ok, why=""):
    global failed
    if ok:
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - %s%s" % (what, ": %s" % (why,) if why != "" else ""))
    sys.stdout.flush()
    return ok


def raw(channel, path, body):
    """A unary call whose request is the bytes body as they are (invalid UTF-8 cannot be put in a
    Python protobuf string field); the answer is returned as bytes."""
    fn = channel.unary_unary(path, request_serializer=lambda b: b,
                             response_deserializer=lambda b: b)
    return cs.call(fn, body, timeout=10)


def field(number, data):
    """One length-delimited protobuf field (data shorter than 128 bytes)."""
    assert len(data) < 128
    return bytes([number << 3 | 2, len(data)]) + data


def refused(res, name, fault="contains a NUL byte"):
    code, msg, _ = res
    return code == INVALID and msg == "field %s %s" % (name, fault)


def volume_survives(env, name, path):
    return env.get("pvst", name) is not None and os.path.exists(path)


def controller_cases(env, ch, kube):
    """The reproduction of issue 24 #2 and its relatives on the CSI controller."""
    ctl = csig.ControllerStub(ch)
    pvc = kube.claim("data", "16Mi")
    code, msg, req, pv, r = kube.provision({"parameters": {
        cs.P + "store-ref": cs.STORE, cs.P + "protocol-ref": cs.PROTO}}, pvc)
    if not check("CreateVolume of a real volume", code == cs.OK, "%s %s" % (code, msg)):
        return
    name = req.name
    vid = r.volume.volume_id
    backing = os.path.join(env.files, name + ".img")  # the file backend's file
    check("the volume's record and backend file exist", volume_survives(env, name, backing),
          os.listdir(env.files))

    res = cs.call(ctl.DeleteVolume, csi.DeleteVolumeRequest(volume_id=vid + "\0junk"))
    check("DeleteVolume{volume_id: <real ID>\\0junk}: INVALID_ARGUMENT naming the field",
          refused(res, "volume_id"), res[:2])
    check("... and the real volume's record and backend file survive",
          volume_survives(env, name, backing), os.listdir(env.files))
    res = raw(ch, "/csi.v1.Controller/DeleteVolume", field(1, vid.encode() + b"\xff"))
    check("DeleteVolume with a volume_id that is not UTF-8: INVALID_ARGUMENT",
          refused(res, "volume_id", "is not valid UTF-8"), res[:2])
    check("... and the volume survives", volume_survives(env, name, backing))

    hostile = csi.CreateVolumeRequest()
    hostile.CopyFrom(req)
    hostile.name = "n\0x"
    res = cs.call(ctl.CreateVolume, hostile)
    check("CreateVolume{name: \"n\\0x\"}: INVALID_ARGUMENT, no volume \"n\"",
          refused(res, "name") and env.get("pvst", "n") is None and
          not os.path.exists(os.path.join(env.files, "n.img")), res[:2])
    hostile.name = name + "-2"
    hostile.parameters[cs.P + "store-ref"] = cs.STORE + "\0x"
    res = cs.call(ctl.CreateVolume, hostile)
    check("CreateVolume with a NUL in a parameter value: INVALID_ARGUMENT naming the key",
          refused(res, 'parameters["%sstore-ref"]' % cs.P), res[:2])

    pub = k8s.attach(csi, kube.caps, pv, "node-a", cs.CLUSTER)
    pub.node_id = "node-a\0junk"
    res = cs.call(ctl.ControllerPublishVolume, pub)
    check("ControllerPublishVolume{node_id: \"node-a\\0junk\"}: INVALID_ARGUMENT",
          refused(res, "node_id"), res[:2])

    code, msg, _ = kube.delete(pv)
    check("the real volume is still deleted by its own ID",
          code == cs.OK and env.get("pvst", name) is None and not os.path.exists(backing),
          "%s %s" % (code, msg))


def agent_cases(env):
    """The agent's API: volume IDs and fencing UIDs."""
    ch = grpc.insecure_channel("127.0.0.1:%d" % env.agent_port)
    agent = apbg.AgentServiceStub(ch)
    victim = os.path.join(env.files, "victim.img")  # what agent volume fp/victim would be
    with open(victim, "w") as f:
        f.write("data")
    FILE = apb.BACKEND_TYPE_FILE
    fence = apb.FencingToken(volume_uid="uid-1", generation=1)
    res = cs.call(agent.DeleteVolume, apb.DeleteVolumeRequest(
        volume_id=cs.POOL + "/victim\0x", backend_type=FILE, fence=fence))
    check("agent DeleteVolume{volume_id: \"fp/victim\\0x\"}: INVALID_ARGUMENT, the file stays",
          refused(res, "volume_id") and os.path.exists(victim), res[:2])
    req = apb.CreateVolumeRequest(volume_id=cs.POOL + "/new\0x", capacity_bytes=1 << 20,
                                  backend_type=FILE, fence=fence)
    req.backend_params.file.pool = cs.POOL
    res = cs.call(agent.CreateVolume, req)
    check("agent CreateVolume{volume_id: \"fp/new\\0x\"}: INVALID_ARGUMENT, nothing created",
          refused(res, "volume_id") and not os.path.exists(os.path.join(env.files, "new.img")),
          res[:2])
    req = apb.DeleteVolumeRequest(volume_id=cs.POOL + "/victim", backend_type=FILE)
    req.fence.volume_uid = "uid\0other"
    res = cs.call(agent.DeleteVolume, req)
    check("agent DeleteVolume with a fencing UID holding a NUL: INVALID_ARGUMENT",
          refused(res, "fence.volume_uid") and os.path.exists(victim), res[:2])
    health = grpc.insecure_channel("127.0.0.1:%d" % env.agent_port)
    res = raw(health, "/grpc.health.v1.Health/Check",
              hpb.HealthCheckRequest(service="\0x").SerializeToString())
    check("agent grpc.health.v1 Check{service: \"\\0x\"}: INVALID_ARGUMENT",
          refused(res, "service"), res[:2])
    health.close()
    ch.close()


def node_cases():
    """The node role: a NUL in a path must not name the path before it."""
    base = os.path.join(TMP, "node")
    host = os.path.join(base, "host")
    for d in ("etc/nvme", "dev", "sys/module/nvme_tcp", "sys/class/nvme",
              "sys/class/nvme-subsystem", "sys/block"):
        os.makedirs(os.path.join(host, d), exist_ok=True)
    with open(os.path.join(host, "etc/nvme/hostnqn"), "w") as f:
        f.write("nqn.2014-08.org.nvmexpress:uuid:0b6f6c3e-4e0a-4c61-9d1b-2a9c3f5e7d11\n")
    with open(os.path.join(host, "etc/nvme/hostid"), "w") as f:
        f.write("0b6f6c3e-4e0a-4c61-9d1b-2a9c3f5e7d11\n")
    open(os.path.join(host, "dev/nvme-fabrics"), "w").close()
    sock = os.path.join(base, "csi.sock")
    p = cs.Procs(base)
    kubelet = os.path.join(base, "kubelet")
    os.makedirs(kubelet, exist_ok=True)
    p.start("node", [cs.BIN, "node", "--csi-endpoint=unix://" + sock, "--node-id=worker-1",
                     "--state-dir=" + os.path.join(base, "state"), "--host-root=" + host,
                     "--kubelet-dir=" + kubelet])
    try:
        if not check("node starts on a fake host root",
                     cs.wait_for(lambda: os.path.exists(sock), 10)):
            return
        ch = grpc.insecure_channel("unix://" + sock)
        node = csig.NodeStub(ch)
        target = os.path.join(SENT, "passwd")
        res = cs.call(node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(
            volume_id="storage-1/nvmeof-tcp/file/fp/pvc-1", target_path=target + "\0junk"))
        check("NodeUnpublishVolume{target_path: <a file>\\0junk}: INVALID_ARGUMENT",
              refused(res, "target_path") and os.path.exists(target), res[:2])
        res = cs.call(node.NodeGetVolumeStats, csi.NodeGetVolumeStatsRequest(
            volume_id="v\0", volume_path=base))
        check("NodeGetVolumeStats{volume_id: \"v\\0\"}: INVALID_ARGUMENT",
              refused(res, "volume_id"), res[:2])
        ch.close()
    finally:
        p.stop_all()


def cli_cases(env):
    """`pillar-csi apply`: a NUL in a name, and kubectl's strict field validation."""
    pa = {"apiVersion": cs.GROUP, "kind": "PillarAgent",
          "spec": {"external": {"address": "127.0.0.1", "port": 1}}}
    path = os.path.join(TMP, "nul.json")
    with open(path, "w") as f:
        json.dump(dict(pa, metadata={"name": cs.AGENT + "\0x"}), f)  # written as \u0000
    rc, out, err = env.cli("apply", "-f", path)
    check("apply of a PillarAgent named \"storage-1\\0x\": refused with the field's path",
          rc == 1 and "field metadata.name contains a NUL byte" in err and
          env.get("pa", cs.AGENT)["spec"]["external"]["port"] != 1, out + err)
    rc, out, err = env.apply(dict(pa, metadata={"name": "odd"},
                                  spec={"external": {"address": "127.0.0.1", "port": 1},
                                        "bogus": True}))
    check("apply of an object with spec.bogus: refused as the API server's strict validation",
          rc == 1 and 'strict decoding error: unknown field "spec.bogus"' in err and
          env.get("pa", "odd") is None, out + err)


def config_cases():
    """The agent's configuration: a pool "fp\\0x" must not configure pool "fp"."""
    base = os.path.join(TMP, "config")
    os.makedirs(base, exist_ok=True)
    cfg = os.path.join(base, "agent.json")
    with open(cfg, "w") as f:
        f.write('{"backends":[{"file":{"pool":"fp\\u0000x","directory":"%s"}}]}' % base)
    r = subprocess.run([cs.BIN, "agent", "--listen-address=127.0.0.1:0", "--config=" + cfg,
                        "--configfs-root=" + base, "--state-dir=" + base,
                        "--host-root=" + base], capture_output=True, text=True, timeout=20)
    check("agent with pool \"fp\\u0000x\" in its configuration: exit 1 naming the field",
          r.returncode == 1 and
          "field backends[0].file.pool contains a NUL byte" in r.stdout + r.stderr,
          "%d %r" % (r.returncode, (r.stdout + r.stderr)[-300:]))


def main():
    env = cs.Env(os.path.join(TMP, "roles"))
    try:
        if not check("agent starts on a fake configfs root", env.start_agent()):
            return
        if not check("controller starts on the embedded store", env.start_controller()):
            return
        rc, out, err = env.apply(cs.objects(env.agent_port))
        check("apply of the agent, store, protocol, class and CSINodes", rc == 0, out + err)
        ok = cs.wait_for(lambda: cs.cond(env.get("psc", cs.PSC), "Ready")[0] == "True", 30)
        if not check("PillarStorageClass Ready", ok, env.get("psc", cs.PSC)):
            return
        ch = grpc.insecure_channel("unix://" + env.sock)
        ctl = csig.ControllerStub(ch)
        kube = cs.Kube(env, ctl, k8s.Caps(csi, csig.IdentityStub(ch), ctl))
        controller_cases(env, ch, kube)
        res = raw(ch, "/grpc.health.v1.Health/Check",
                  hpb.HealthCheckRequest(service="\0x").SerializeToString())
        check("controller grpc.health.v1 Check{service: \"\\0x\"}: INVALID_ARGUMENT",
              refused(res, "service"), res[:2])
        ch.close()
        agent_cases(env)
        cli_cases(env)
    finally:
        env.procs.stop_all()
    node_cases()
    config_cases()


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash of the case is a failure, not a pass
        import traceback
        traceback.print_exc()
        check("case_strings ran to the end", False, repr(e))
    sys.exit(1 if failed else 0)
