"""Helpers shared by the agent interop suites (test/interop/agent, test/interop/agent-crash).

A test environment is a directory with a fake configfs root (cfs/nvmet/{subsystems,ports,hosts}
as plain directories: the agent's fake mode), a `file` backend directory, a state directory and a
fake host tree (host/sys/module/nvmet_tcp) passed with the testing flag --host-root.  The agent
runs as a real process (PILLAR_BIN) on a loopback TCP port; clients are grpcio (gRPC C-core) with
stubs generated from our .proto by build.sh.  Expected values (NQN, identity, port ID, messages)
are computed here from the specification (agent-api.md, nvmet.md), not taken from our code.
"""
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.environ["BUILD"], "agent-test", "py"))
import grpc  # noqa: E402
import agent_pb2 as pb  # noqa: E402
import agent_pb2_grpc as pbg  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402

SERVICE = "pillar_csi.agent.v1.AgentService"
NQN_PREFIX = "nqn.2026-01.com.bhyoo.pillar-csi:"
ID_NS = uuid.UUID("3c6e0b8a-6a0f-5c1d-9f5e-8d2b7a4e1c90")
POOL = "fp"
FILE = pb.BACKEND_TYPE_FILE
TCP = pb.PROTOCOL_TYPE_NVMEOF_TCP


# ---- spec-derived names (agent-api.md §6.2, §8.2; nvmet.md §2) ----------------------------------

def nqn_of(volume_id):
    return NQN_PREFIX + volume_id.replace("/", ".")


def identity_of(nqn):
    return {
        "uuid": str(uuid.uuid5(ID_NS, "uuid:%s/namespaces/1" % nqn)),
        "nguid": str(uuid.uuid5(ID_NS, "nguid:%s/namespaces/1" % nqn)),
        "serial": hashlib.sha256(("serial:" + nqn).encode()).hexdigest()[:20],
    }


def port_id_of(addr, port):
    h = 0x811C9DC5
    for b in addr.encode():
        h = ((h ^ b) * 0x01000193) % 2**32
    h = ((h ^ port) * 0x01000193) % 2**32
    return h % 65535 + 1


def escape(volume_id):
    keep = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
    return "".join(chr(b) if b in keep else "_%02X" % b for b in volume_id.encode())


def gate_msg(rpc):
    return ("export restore pending: %s: awaiting a complete ReconcileState from the controller "
            "before exporting" % rpc)


# ---- request builders ---------------------------------------------------------------------------

def token(uid, gen):
    return pb.FencingToken(volume_uid=uid, generation=gen)


def file_params():
    return pb.BackendParams(file=pb.FileVolumeParams(pool=POOL))


def tcp_params(addr, port, icds=0):
    return pb.ExportParams(nvmeof_tcp=pb.NvmeofTcpExportParams(
        bind_address=addr, port=port, in_capsule_data_size=icds))


def create_req(vid, size, uid, gen):
    return pb.CreateVolumeRequest(volume_id=vid, capacity_bytes=size, backend_type=FILE,
                                  backend_params=file_params(), fence=token(uid, gen))


def export_req(vid, uid, gen, addr, port, acl=True):
    return pb.ExportVolumeRequest(volume_id=vid, protocol_type=TCP,
                                  export_params=tcp_params(addr, port), acl_enabled=acl,
                                  fence=token(uid, gen))


def desired(vid, uid, gen, addr, port, hosts=(), acl=True):
    return pb.VolumeDesiredState(
        volume_id=vid, backend_type=FILE, backend_params=file_params(),
        exports=[pb.ExportDesiredState(protocol_type=TCP, export_params=tcp_params(addr, port),
                                       allowed_initiators=list(hosts), acl_enabled=acl)],
        fence=token(uid, gen))


def call(fn, req, timeout=30):
    """(StatusCode, message, response-or-None) — never raises for an RPC error."""
    try:
        return grpc.StatusCode.OK, "", fn(req, timeout=timeout)
    except grpc.RpcError as e:
        return e.code(), e.details() or "", None


# ---- environment and agent process --------------------------------------------------------------

def make_env(base):
    for d in ("cfs/nvmet/subsystems", "cfs/nvmet/ports", "cfs/nvmet/hosts", "files", "state",
              "host/sys/module/nvmet_tcp"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    with open(os.path.join(base, "config.json"), "w") as f:
        json.dump({"backends": [{"file": {"pool": POOL,
                                          "directory": os.path.join(base, "files")}}]}, f)
    return base


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Agent:
    """One agent environment; start() may be called again after the process ended."""

    def __init__(self, base, grace="1s", tls=None):
        self.base = make_env(base)
        self.cfs = os.path.join(base, "cfs")
        self.nvmet = os.path.join(base, "cfs", "nvmet")
        self.state = os.path.join(base, "state")
        self.files = os.path.join(base, "files")
        self.grace = grace
        self.tls = tls  # dict(ca, cert, key, client_cert, client_key) or None
        self.proc = None
        self.port = None
        self.starts = 0
        self.log = None
        self.channel = None

    def _args(self):
        a = [os.environ["PILLAR_BIN"], "agent", "--listen-address=127.0.0.1:%d" % self.port,
             "--config=" + os.path.join(self.base, "config.json"), "--configfs-root=" + self.cfs,
             "--state-dir=" + self.state, "--host-root=" + os.path.join(self.base, "host"),
             "--shutdown-grace-period=" + self.grace, "--v=3"]
        if self.tls:
            a += ["--tls-cert=" + self.tls["cert"], "--tls-key=" + self.tls["key"],
                  "--tls-ca=" + self.tls["ca"]]
        return a

    def make_channel(self, cert=None, key=None, ca=None, plaintext=False):
        """A channel to the agent.  With TLS: cert/key None = the good client certificate,
        "" = no client certificate; ca None = the suite's CA."""
        target = "127.0.0.1:%d" % self.port
        opts = [("grpc.enable_retries", 0), ("grpc.max_receive_message_length", 16 << 20),
                ("grpc.max_send_message_length", 16 << 20)]
        if not self.tls or plaintext:
            return grpc.insecure_channel(target, options=opts)
        cert = self.tls["client_cert"] if cert is None else cert
        key = self.tls["client_key"] if key is None else key
        rd = lambda p: open(p, "rb").read() if p else None  # noqa: E731
        creds = grpc.ssl_channel_credentials(root_certificates=rd(ca or self.tls["ca"]),
                                             private_key=rd(key), certificate_chain=rd(cert))
        opts.append(("grpc.ssl_target_name_override", "localhost"))
        return grpc.secure_channel(target, creds, options=opts)

    def start(self, wait=10.0):
        """Starts the agent and waits until grpc health answers; False if it never did."""
        for _ in range(8):
            self.port = random.randint(20000, 60000) if self.starts % 2 else free_port()
            self.starts += 1
            self.log = os.path.join(self.base, "agent-%d.log" % self.starts)
            with open(self.log, "wb") as lf:
                self.proc = subprocess.Popen(self._args(), stdout=lf, stderr=subprocess.STDOUT)
            self.close_channel()
            deadline = time.monotonic() + wait
            up = False
            # this agent's own word that it listens: a connect alone would also succeed on
            # another process's listener of the port, while this agent exits "address in use"
            serving = 'serving" address="127.0.0.1:%d"' % self.port
            while time.monotonic() < deadline and self.proc.poll() is None:
                if serving in self.log_text():
                    up = self.proc.poll() is None
                    break
                time.sleep(0.01)
            if up:
                self.channel = self.make_channel()
                self.stub = pbg.AgentServiceStub(self.channel)
                self.health = health_pb2_grpc.HealthStub(self.channel)
                return True
            self.kill()
            if "address already in use" not in self.log_text().lower():
                return False
        return False

    def close_channel(self):
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def log_text(self):
        try:
            with open(self.log, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def term(self, timeout=30):
        """SIGTERM; returns the exit status (None when it did not exit in time)."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def wait(self, timeout=30):
        """Waits for the process to exit by itself; its status, or None (then killed)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close_channel()


# ---- fake configfs inspection -------------------------------------------------------------------

def read_attr(path):
    with open(path) as f:
        return f.read().rstrip("\n ")


def snapshot(root):
    """Every entry under root: dirs, links (target) and files (content, mtime_ns, inode)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            else:
                st = os.stat(p)
                out[rel] = ("file", open(p, "rb").read(), st.st_mtime_ns, st.st_ino)
    return out


def export_problems(nvmet, vid, device, hosts, addr, port, acl=True, icds=-1):
    """Compares one export in the fake tree with nvmet.md §1/§5; returns a list of problems."""
    nqn = nqn_of(vid)
    ident = identity_of(nqn)
    sub = os.path.join(nvmet, "subsystems", nqn)
    ns = os.path.join(sub, "namespaces", "1")
    bad = []

    def expect(path, want):
        try:
            got = read_attr(path)
        except OSError as e:
            bad.append("%s: %s" % (os.path.relpath(path, nvmet), e.strerror))
            return
        if got.lower() != str(want).lower():
            bad.append("%s is %r, want %r" % (os.path.relpath(path, nvmet), got, want))

    if not os.path.isdir(sub):
        return ["subsystems/%s missing" % nqn]
    expect(os.path.join(sub, "attr_allow_any_host"), "0" if acl else "1")
    expect(os.path.join(sub, "attr_serial"), ident["serial"])
    expect(os.path.join(ns, "device_path"), device)
    expect(os.path.join(ns, "device_uuid"), ident["uuid"])
    expect(os.path.join(ns, "device_nguid"), ident["nguid"])
    expect(os.path.join(ns, "enable"), "1")
    ah = os.path.join(sub, "allowed_hosts")
    have = sorted(os.listdir(ah)) if os.path.isdir(ah) else []
    if have != sorted(hosts):
        bad.append("allowed_hosts %s, want %s" % (have, sorted(hosts)))
    for h in have:
        lp = os.path.join(ah, h)
        if not os.path.islink(lp) or os.readlink(lp) != "../../../hosts/" + h:
            bad.append("allowed_hosts/%s is not a link to ../../../hosts/%s" % (h, h))
        if not os.path.isdir(os.path.join(nvmet, "hosts", h)):
            bad.append("hosts/%s missing" % h)
    pid = os.path.join(nvmet, "ports", str(port_id_of(addr, port)))
    if not os.path.isdir(pid):
        return bad + ["ports/%d missing" % port_id_of(addr, port)]
    expect(os.path.join(pid, "addr_trtype"), "tcp")
    expect(os.path.join(pid, "addr_adrfam"), "ipv6" if ":" in addr else "ipv4")
    expect(os.path.join(pid, "addr_traddr"), "::" if ":" in addr else "0.0.0.0")
    expect(os.path.join(pid, "addr_trsvcid"), str(port))
    expect(os.path.join(pid, "param_inline_data_size"), str(icds))
    link = os.path.join(pid, "subsystems", nqn)
    if not os.path.islink(link) or os.readlink(link) != "../../../subsystems/" + nqn:
        bad.append("ports/%s/subsystems/%s is not a link to ../../../subsystems/%s"
                   % (os.path.basename(pid), nqn, nqn))
    return bad


def strict_json(path):
    """Parses a state file strictly (no NaN/Infinity, no duplicate keys); raises ValueError."""
    def no_dupes(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError("duplicate key")
        return dict(pairs)

    def no_const(c):
        raise ValueError("non-standard constant " + c)

    with open(path, "rb") as f:
        raw = f.read()
    return json.loads(raw.decode("utf-8"), object_pairs_hook=no_dupes, parse_constant=no_const)


class Report:
    def __init__(self, suite):
        self.suite = suite
        self.passed = 0
        self.failed = 0

    def check(self, name, ok, why=""):
        if ok:
            self.passed += 1
            print("PASS " + name)
        else:
            self.failed += 1
            print("FAIL %s%s" % (name, (": " + str(why)) if why else ""))
        sys.stdout.flush()
        return ok

    def status(self, name, got, code, prefix=None, exact=None):
        """Checks a (code, message, resp) tuple from call()."""
        c, msg, _ = got
        ok = c == code and (prefix is None or msg.startswith(prefix)) and \
            (exact is None or msg == exact)
        return self.check(name, ok, "got %s %r" % (c.name if c else c, msg))

    def finish(self):
        print("(%s: %d passed, %d failed)" % (self.suite, self.passed, self.failed))
        return 1 if self.failed else 0
