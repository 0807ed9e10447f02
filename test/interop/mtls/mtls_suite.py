#!/usr/bin/env python3
"""mTLS end to end (issue 15; deploy.md §9, crds.md §3 AgentConnected): a running
`pillar-csi agent` with --tls-cert/--tls-key/--tls-ca and a running `pillar-csi controller` with
--agent-tls-cert/--agent-tls-key/--agent-tls-ca (embedded store), throwaway certificates from
test/unit/fakes/mkcerts.py (ECDSA P-256, two CAs).  The controller dials the agent through a TCP
relay this suite can cut, so that the next connection makes a new handshake without restarting
either process.  PILLAR_TLS_RELOAD_MS=200 shortens the 60 s re-read interval of §9.5.

1. Both sides on CA 1: AgentConnected True/Authenticated.
2. Rotation (§9.5): every file replaced on disk by CA 2 material (agent certificate, the
   agent's client CA, the controller's certificate and its agent CA); the connection cut; the
   reconnect succeeds, which needs both processes to have re-read their files (each side now
   trusts only CA 2); AgentConnected stays Authenticated, never TLSHandshakeFailed; same PIDs.
3. Each handshake failure gives AgentConnected False/TLSHandshakeFailed, the message starting
   as crds.md says and naming the reason: an agent certificate from an unknown CA, an expired
   one, one without the dialled IP in its subjectAltName.
4. Good material again: Authenticated, no restart.
Usage: mtls_suite.py DIR"""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from waits import free_port, wait_for  # noqa: E402

BIN = os.environ["PILLAR_BIN"]
GROUP = "pillar-csi.bhyoo.com/v1alpha1"
AGENT = "storage-1"
RELOAD_MS = 200

passed = failed = 0


def check(name, ok, why=""):
    global passed, failed
    if ok:
        passed += 1
        print("PASS " + name)
    else:
        failed += 1
        print("FAIL %s%s" % (name, (": " + why) if why else ""))
    sys.stdout.flush()
    return ok


class Relay:
    """127.0.0.1:port → 127.0.0.1:upstream; cut() closes every connection it carries."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.port = self.ls.getsockname()[1]
        self.mu = threading.Lock()
        self.conns = []
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except OSError:
                c.close()
                continue
            with self.mu:
                self.conns += [c, u]
                self.accepted += 1
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.mu:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class Suite:
    def __init__(self, base):
        self.base = base
        self.certs = os.path.join(base, "certs")  # what mkcerts.py made
        self.live = os.path.join(base, "live")  # the files the processes read
        for d in ("cfs/nvmet/subsystems", "cfs/nvmet/ports", "cfs/nvmet/hosts", "files", "state",
                  "store", "certs", "live", "host/sys/module/nvmet_tcp"):
            os.makedirs(os.path.join(base, d), exist_ok=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "test/unit/fakes/mkcerts.py"),
                        self.certs], check=True)
        self.procs = {}
        self.agent_port = free_port()
        self.relay = Relay(self.agent_port)

    def install(self, src, dst):
        """Replaces live/dst with certs/src (a new file renamed into place, as a rotation)."""
        tmp = os.path.join(self.live, "." + dst + ".tmp")
        shutil.copyfile(os.path.join(self.certs, src), tmp)
        os.rename(tmp, os.path.join(self.live, dst))

    def material(self, agent_cert, agent_client_ca, ctl_cert, ctl_agent_ca):
        self.install(agent_cert + ".crt", "agent.crt")
        self.install(agent_cert + ".key", "agent.key")
        self.install(agent_client_ca + ".crt", "agent-ca.crt")
        self.install(ctl_cert + ".crt", "controller.crt")
        self.install(ctl_cert + ".key", "controller.key")
        self.install(ctl_agent_ca + ".crt", "controller-ca.crt")

    def start(self, name, args):
        env = dict(os.environ, PILLAR_TLS_RELOAD_MS=str(RELOAD_MS), PILLAR_RECONCILE_INTERVAL="1s")
        log = open(os.path.join(self.base, name + ".log"), "ab")
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        with open(os.path.join(self.base, "pids"), "w") as f:
            f.write(" ".join(str(p.pid) for p in self.procs.values()))
        return self.procs[name]

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def cli(self, *args):
        r = subprocess.run([BIN, *args, "--store=dir:" + os.path.join(self.base, "store")],
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout, r.stderr

    def connected(self):
        rc, out, _ = self.cli("get", "pa", AGENT, "-o", "json")
        if rc != 0:
            return None, None, ""
        for c in (json.loads(out).get("status") or {}).get("conditions") or []:
            if c.get("type") == "AgentConnected":
                return c.get("status"), c.get("reason"), c.get("message", "")
        return None, None, ""

    def logs(self, name):
        with open(os.path.join(self.base, name + ".log"), errors="replace") as f:
            return f.read()


def handshake(s, client, trust):
    """A TLS 1.2 handshake straight to the agent (ALPN h2) with certs/client.*, trusting
    certs/trust.crt only: (True, "") or (False, the reason)."""
    import ssl
    c = lambda n: os.path.join(s.certs, n)  # noqa: E731
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["h2"])
    ctx.load_cert_chain(c(client + ".crt"), c(client + ".key"))
    ctx.load_verify_locations(c(trust + ".crt"))
    try:
        with socket.create_connection(("127.0.0.1", s.agent_port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                # a client the agent refused shows on the first read (TLS 1.2 verifies it
                # in the handshake, but the alert may arrive after our Finished)
                if not tls.recv(9):
                    return False, "closed"
        return True, ""
    except (ssl.SSLError, OSError) as e:
        return False, str(e)


def run(s):
    L = lambda f: os.path.join(s.live, f)  # noqa: E731
    s.material("srv1", "ca1", "cli1", "ca1")
    agent = s.start("agent", [
        BIN, "agent", "--listen-address=127.0.0.1:%d" % s.agent_port,
        "--config=" + os.path.join(s.base, "agent.json"),
        "--configfs-root=" + os.path.join(s.base, "cfs"),
        "--state-dir=" + os.path.join(s.base, "state"),
        "--host-root=" + os.path.join(s.base, "host"), "--shutdown-grace-period=0s",
        "--tls-cert=" + L("agent.crt"), "--tls-key=" + L("agent.key"),
        "--tls-ca=" + L("agent-ca.crt"), "--v=3"])
    ctl = s.start("controller", [
        BIN, "controller", "--csi-endpoint=unix://" + os.path.join(s.base, "csi.sock"),
        "--store=dir:" + os.path.join(s.base, "store"), "--health-probe-bind-address=127.0.0.1:0",
        "--metrics-bind-address=127.0.0.1:0", "--agent-tls-cert=" + L("controller.crt"),
        "--agent-tls-key=" + L("controller.key"), "--agent-tls-ca=" + L("controller-ca.crt"),
        "--v=4"])
    pa = {"apiVersion": GROUP, "kind": "PillarAgent", "metadata": {"name": AGENT},
          "spec": {"external": {"address": "127.0.0.1", "port": s.relay.port}}}
    path = os.path.join(s.base, "pa.json")
    with open(path, "w") as f:
        json.dump(pa, f)
    rc, _, err = s.cli("apply", "-f", path)
    check("PillarAgent applied (external address: the relay)", rc == 0, err)

    authenticated = lambda: s.connected()[:2] == ("True", "Authenticated")  # noqa: E731
    check("CA 1 on both sides: AgentConnected True/Authenticated",
          wait_for(authenticated, 20), repr(s.connected()))
    check("the agent serves mutual TLS", 'tls="mutual"' in s.logs("agent"),
          s.logs("agent")[-400:])

    ok, why = handshake(s, "cli1", "ca1")
    check("CA 1: a direct handshake with the CA 1 client certificate works", ok, why)

    # 2. rotation to CA 2 on both sides, files only
    before = s.relay.accepted
    s.material("srv2", "ca2", "cli2", "ca2")
    time.sleep(2 * RELOAD_MS / 1000.0)
    seen = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.append(s.connected()[1])
            time.sleep(0.1)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    s.relay.cut()
    reconnected = wait_for(lambda: s.relay.accepted > before, 20)
    time.sleep(3)  # the monitor's probes and a periodic pass over the new connection
    stop.set()
    w.join()
    check("rotation: the controller reconnected through a new handshake",
          reconnected, "relay connections %d → %d" % (before, s.relay.accepted))
    check("rotation: AgentConnected still Authenticated with only CA 2 trusted on both sides "
          "(both re-read their files)", authenticated() and "TLSHandshakeFailed" not in seen,
          "reasons seen: %s; now %r" % (sorted(set(map(str, seen))), s.connected()))
    check("rotation: no restart (same agent and controller processes)",
          agent.poll() is None and ctl.poll() is None)
    # had neither side re-read, CA 1 on both would still agree: the agent must now present its
    # CA 2 certificate and accept a CA 2 client (what the controller then presented)
    ok, why = handshake(s, "cli2", "ca2")
    check("rotation: the agent presents the CA 2 certificate and takes a CA 2 client", ok, why)
    ok, why = handshake(s, "cli1", "ca2")
    check("rotation: the agent refuses the old CA 1 client certificate (%s)" % why,
          not ok and "alert" in why.lower(), why)

    # 3. the handshake's reasons (the controller keeps presenting cli2, the agent trusts CA 2)
    cases = [
        ("an agent certificate from an unknown CA", ("srv1", "ca2", "cli2", "ca2"),
         "not correctly signed by the trusted CA"),
        ("an expired agent certificate", ("srv-expired", "ca2", "cli2", "ca1"),
         "validity has expired"),
        ("an agent certificate without the dialled IP", ("srv-noip", "ca2", "cli2", "ca1"),
         "no IP SAN for the target"),
    ]
    prefix = 'mTLS handshake to agent at "127.0.0.1:%d" failed; verify certificate chain and CA' \
        % s.relay.port
    for what, files, reason in cases:
        s.material(*files)
        time.sleep(2 * RELOAD_MS / 1000.0)
        s.relay.cut()
        got = wait_for(lambda: (lambda c: c[1] == "TLSHandshakeFailed" and reason in c[2]
                                and c)(s.connected()), 20)
        st = got or s.connected()
        check("%s: AgentConnected False/TLSHandshakeFailed naming the reason (%s)" % (what, reason),
              bool(got) and st[0] == "False" and st[2].startswith(prefix), repr(st))

    # 4. good material again, still no restart
    s.material("srv2", "ca2", "cli2", "ca2")
    time.sleep(2 * RELOAD_MS / 1000.0)
    s.relay.cut()
    check("good certificates again: Authenticated without a restart",
          wait_for(authenticated, 20) and agent.poll() is None and ctl.poll() is None,
          repr(s.connected()))


def main():
    base = sys.argv[1]
    s = Suite(base)
    with open(os.path.join(base, "agent.json"), "w") as f:
        json.dump({"backends": [{"file": {"pool": "fp",
                                          "directory": os.path.join(base, "files")}}]}, f)
    t0 = time.monotonic()
    try:
        run(s)
    except Exception as e:  # a crash of the suite is a failure, not a pass
        import traceback
        traceback.print_exc()
        check("suite ran to the end", False, repr(e))
    finally:
        s.stop_all()
    print("(%.1f s)" % (time.monotonic() - t0))
    print("(mtls suite: %d passed, %d failed)" % (passed, failed))


if __name__ == "__main__":
    main()
