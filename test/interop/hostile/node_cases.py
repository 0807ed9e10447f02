#!/usr/bin/python3
"""Hostile CSI client against `pillar-csi node` (case_node.sh of the hostile-client suite).

The node runs with every root inside HOSTILE_TMP: --host-root (a fake /etc/nvme, /sys and a
regular file for /dev/nvme-fabrics), --state-dir and its socket.  Each check prints
"ok - <what>" or "not ok - <what>: <why>"; the harness (run.sh) checks the sentinels.
"""
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.environ["HOSTILE_PY"])
import grpc  # noqa: E402
import csi_pb2 as csi  # noqa: E402
import csi_pb2_grpc as csig  # noqa: E402

TMP = os.environ["HOSTILE_TMP"]
SENT = os.environ["HOSTILE_SENTINEL_DIR"]
failed = 0


def check(what, ok, why=""):
    global failed
    if ok:
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - %s%s" % (what, ": %s" % (why,) if why != "" else ""))
    sys.stdout.flush()


def call(fn, req, timeout=10):
    try:
        return grpc.StatusCode.OK, "", fn(req, timeout=timeout)
    except grpc.RpcError as e:
        return e.code(), e.details() or "", None


def make_host(root):
    u = str(uuid.uuid4())
    for d in ("etc/nvme", "dev", "sys/module/nvme_tcp", "sys/class/nvme",
              "sys/class/nvme-subsystem", "sys/block"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "etc/nvme/hostnqn"), "w") as f:
        f.write("nqn.2014-08.org.nvmexpress:uuid:%s\n" % u)
    with open(os.path.join(root, "etc/nvme/hostid"), "w") as f:
        f.write(u + "\n")
    open(os.path.join(root, "dev/nvme-fabrics"), "w").close()
    os.symlink("/proc", os.path.join(root, "proc"))


class Node:
    def __init__(self, base):
        self.base = base
        self.host = os.path.join(base, "host")
        self.state = os.path.join(base, "state")
        self.sock = os.path.join(base, "csi.sock")
        self.log = os.path.join(base, "node.log")
        self.proc = self.channel = None
        make_host(self.host)

    def start(self, cwd, extra=()):
        args = [os.environ["PILLAR_BIN"], "node", "--csi-endpoint=unix://" + self.sock,
                "--node-id=worker-hostile-1", "--state-dir=" + self.state,
                "--host-root=" + self.host] + list(extra)
        with open(self.log, "ab") as lf:
            self.proc = subprocess.Popen(args, stdout=lf, stderr=subprocess.STDOUT, cwd=cwd)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.sock)
                s.close()
                break
            except OSError:
                time.sleep(0.02)
        else:
            return False
        self.channel = grpc.insecure_channel("unix://" + self.sock,
                                             options=[("grpc.enable_retries", 0)])
        self.node = csig.NodeStub(self.channel)
        self.ids = csig.IdentityStub(self.channel)
        return True

    def stop(self):
        if self.channel:
            self.channel.close()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait()
        return self.proc.returncode if self.proc else None


def main():
    n = Node(os.path.join(TMP, "node"))
    cwd = os.path.join(TMP, "node", "cwd", "a", "b")
    os.makedirs(cwd)
    if not n.start(cwd):
        check("node starts with every root inside HOSTILE_TMP", False,
              open(n.log, errors="replace").read()[-1500:])
        return 1
    check("node starts with every root inside HOSTILE_TMP", True)
    c, m, pr = call(n.ids.Probe, csi.ProbeRequest())
    check("Probe on the fake host tree: ready", c == grpc.StatusCode.OK and pr.ready.value,
          "%s %r" % (c, m))
    check("node exits 0 on SIGTERM", n.stop() == 0)
    check("the sentinel directory is outside HOSTILE_TMP",
          not os.path.realpath(SENT).startswith(os.path.realpath(TMP) + os.sep))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
