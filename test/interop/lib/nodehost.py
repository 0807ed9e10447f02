"""`pillar-csi node` for the Python suites: its fake host tree (--host-root), a stage record as
an earlier node process left it, and the process on a unix socket with a grpcio channel to it.

Every path is the caller's (inside the suite's temporary directory); nothing here touches the
machine's /etc/nvme, /sys or /dev.
"""
import json
import os
import signal
import socket
import subprocess
import time
import uuid


def make_host(root, host_uuid=None):
    """The fake host tree below root: etc/nvme with a host NQN and ID of host_uuid (a new UUID
    when None), dev/nvme-fabrics a regular file (nothing connects), sys/module/nvme_tcp, empty
    sys/class/nvme, sys/class/nvme-subsystem and sys/block, and proc -> the real /proc (the
    mountinfo of the node process itself).  Returns the host UUID."""
    u = host_uuid or str(uuid.uuid4())
    for d in ("etc/nvme", "dev", "sys/module/nvme_tcp", "sys/class/nvme",
              "sys/class/nvme-subsystem", "sys/block"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "etc/nvme/hostnqn"), "w") as f:
        f.write("nqn.2014-08.org.nvmexpress:uuid:%s\n" % u)
    with open(os.path.join(root, "etc/nvme/hostid"), "w") as f:
        f.write(u + "\n")
    open(os.path.join(root, "dev/nvme-fabrics"), "w").close()
    if not os.path.islink(os.path.join(root, "proc")):
        os.symlink("/proc", os.path.join(root, "proc"))
    return u


def stage_record(volume_id, staging, nqn, address="192.0.2.10"):
    """A stage record of a filesystem volume in the spec's format (csi.md §7.5), as a dict."""
    return {"protocol_type": "nvmeof-tcp", "access_type": "filesystem", "fs_type": "ext4",
            "nvmeof": {"subsys_nqn": nqn, "address": address, "port": "4420"},
            "volume_id": volume_id, "staging_path": staging,
            "namespace_uuid": "0b661a8a-9925-5917-b52c-a5719096bc2b",
            "namespace_nguid": "2018eb84-7e27-542a-9b2a-11dd7855c3b3",
            "staged_at": "2026-01-01T00:00:00Z"}


def plant_record(state, rec):
    """Writes the stage record rec into the state directory as the node names it (mode 0600);
    returns its path."""
    os.makedirs(state, mode=0o700, exist_ok=True)
    p = os.path.join(state, rec["volume_id"].replace("/", "_") + ".json")
    with open(p, "w") as f:
        json.dump(rec, f)
    os.chmod(p, 0o600)
    return p


def wait_socket(proc, path, timeout=10):
    """True once the unix socket at path accepts a connection; False when proc exits first or
    the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            s.close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


class NodeProcess:
    """A node process listening on the unix socket sock, and a grpcio channel to it (retries
    off: every call is sent once, as the suites count them)."""

    def __init__(self, sock):
        self.sock = sock
        self.proc = self.channel = None

    def start(self, args, log, log_mode="wb", cwd=None):
        """Runs args (the node's command line) with its output in the file log; True with
        self.channel once the socket accepts, False when it never does."""
        import grpc
        with open(log, log_mode) as lf:
            self.proc = subprocess.Popen(args, stdout=lf, stderr=subprocess.STDOUT, cwd=cwd)
        if not wait_socket(self.proc, self.sock):
            return False
        self.channel = grpc.insecure_channel("unix://" + self.sock,
                                             options=[("grpc.enable_retries", 0)])
        return True

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Closes the channel and stops the process with sig: its exit status, or None when it
        had to be killed after timeout seconds."""
        if self.channel:
            self.channel.close()
            self.channel = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode if self.proc else None
