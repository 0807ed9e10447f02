#!/usr/bin/python3
"""Hostile connections to `pillar-csi agent` (case_conn.sh of the hostile-client suite).

An agent on fake roots inside HOSTILE_TMP (test/interop/agent/agentlib.py) with a short
--handshake-timeout.  1,100 TCP connections that never send a byte — first from one peer
(127.0.0.2), then spread over 20 peers so that the global limit fills — must not keep a
legitimate grpcio client out for longer than the handshake deadline; every silent connection is
closed by the deadline; the refusals and time-outs are logged once (rate-limited, default
verbosity) with the peer; and the agent's RSS returns near its baseline.  Then an agent with
mutual TLS: refused handshakes (no client certificate, another CA, an expired certificate) are
logged at the default verbosity with the peer and the reason, once per interval.
Each check prints "ok - <what>" or "not ok - <what>: <why>".
"""
import os
import re
import resource
import select
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.environ["HOSTILE_PY"])
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))
import grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
import agentlib  # noqa: E402

TMP = os.environ["HOSTILE_TMP"]
HERE = os.path.dirname(os.path.abspath(__file__))
# The agent's handshake deadline, and how soon after a flood's last connect a connection the
# agent refuses must be closed ("at once"): well below the deadline, so a refused connection is
# told from a timed-out one, and far above what a loaded machine takes to accept a backlog.
# Every wait is measured from the end of the flood, whose own length depends on the load.
DEADLINE_S = 6
AT_ONCE_S = 3
MARGIN_S = 10
FLOOD = 1100
failed = 0


def check(what, ok, why=""):
    global failed
    if ok:
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - %s%s" % (what, ": %s" % (why,) if why != "" else ""))
    sys.stdout.flush()


class Agent(agentlib.Agent):
    """The suite's agent at the default verbosity with the connection flags under test."""

    def __init__(self, base, extra, tls=None):
        super().__init__(base, tls=tls)
        self.extra = extra

    def _args(self):
        return [a for a in super()._args() if not a.startswith("--v=")] + self.extra


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def health_ok(agent, timeout=5):
    try:
        r = agent.health.Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        return r.status == health_pb2.HealthCheckResponse.SERVING, ""
    except grpc.RpcError as e:
        return False, "%s %s" % (e.code(), e.details())


def fresh_call(agent, timeout=5):
    """A health check on a new channel (a new connection), as a client arriving now would."""
    ch = agent.make_channel()
    try:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        return r.status == health_pb2.HealthCheckResponse.SERVING, ""
    except grpc.RpcError as e:
        return False, "%s %s" % (e.code(), e.details())
    finally:
        ch.close()


def flood(port, sources, n):
    """n silent connections from the source addresses in turn; the connected sockets."""
    socks = []
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((sources[i % len(sources)], 0))
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            socks.append(s)
        except OSError:
            s.close()
    return socks


def closed_by_peer(socks, wait_s):
    """Waits up to wait_s; the sockets the server closed (EOF or reset) by then."""
    p = select.poll()
    for s in socks:
        p.register(s.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
    closed = set()
    end = time.monotonic() + wait_s
    by_fd = {s.fileno(): s for s in socks}
    while len(closed) < len(socks) and time.monotonic() < end:
        for fd, _ in p.poll(100):
            if fd in closed:
                continue
            try:
                data = by_fd[fd].recv(64)
            except OSError:
                data = b""
            if data == b"":
                closed.add(fd)
                p.unregister(fd)
    return closed


def lines(agent, pattern):
    return [ln for ln in agent.log_text().splitlines() if re.search(pattern, ln)]


def settle_rss(pid, seconds=3):
    time.sleep(seconds)
    return rss_kb(pid)


def plain_cases():
    agent = Agent(os.path.join(TMP, "plain"),
                  ["--handshake-timeout=%ds" % DEADLINE_S, "--max-connections-per-peer=64"])
    check("plain agent starts", agent.start(), agent.log_text()[-2000:])
    if not agent.proc or agent.proc.poll() is not None:
        return
    pid = agent.proc.pid
    ok, why = health_ok(agent)
    check("a legitimate call before the flood", ok, why)
    base = settle_rss(pid, 1)

    # one peer: everything above its 64 is refused at once; the rest times out
    socks = flood(agent.port, ["127.0.0.2"], FLOOD)
    t0 = time.monotonic()
    during = rss_kb(pid)
    ok, why = fresh_call(agent)
    check("a new legitimate connection is served while one peer holds %d silent ones" %
          len(socks), ok, why)
    quick = closed_by_peer(socks, AT_ONCE_S)
    check("connections above the per-peer limit are refused at once (%d of %d)" %
          (len(quick), len(socks)), len(quick) >= len(socks) - 64, "")
    rest = closed_by_peer([s for s in socks if s.fileno() not in quick], DEADLINE_S + MARGIN_S)
    took = time.monotonic() - t0
    check("every silent connection is closed by the %ds deadline (%.1f s after the flood)"
          % (DEADLINE_S, took), len(quick) + len(rest) == len(socks),
          "%d still open" % (len(socks) - len(quick) - len(rest)))
    for s in socks:
        s.close()
    refused = lines(agent, r'^W.*"gRPC connection refused" peer="127\.0\.0\.2" '
                           r'reason="too many connections from this peer \(limit 64\)"')
    check("one warning names the peer and the per-peer limit", len(refused) == 1,
          "%d lines" % len(refused))
    timed = lines(agent, r'^W.*"gRPC connection timed out" peer="127\.0\.0\.2" '
                         r'reason="HTTP/2 client preface not completed within %ds"' % DEADLINE_S)
    check("one warning names the peer and the deadline", len(timed) == 1,
          "%d lines" % len(timed))

    # twenty peers: the global limit (1,024) fills until the deadline empties it
    sources = ["127.0.1.%d" % i for i in range(1, 21)]
    socks = flood(agent.port, sources, FLOOD)
    t0 = time.monotonic()
    peak = rss_kb(pid)
    quick = closed_by_peer(socks, AT_ONCE_S)
    check("connections above the global limit are refused (%d of %d)" % (len(quick), len(socks)),
          len(quick) >= len(socks) - 1024, "")
    ok, why = fresh_call(agent, timeout=DEADLINE_S + MARGIN_S)
    check("a legitimate client gets in once the deadline has emptied the table", ok, why)
    rest = closed_by_peer([s for s in socks if s.fileno() not in quick], DEADLINE_S + MARGIN_S)
    check("every silent connection of the spread flood is closed by the deadline (%.1f s after "
          "the flood)" % (time.monotonic() - t0), len(quick) + len(rest) == len(socks),
          "%d still open" % (len(socks) - len(quick) - len(rest)))
    for s in socks:
        s.close()
    check("the refusal at the global limit is logged",
          len(lines(agent, r'"gRPC connection refused" peer="127\.0\.1\.\d+" '
                           r'reason="too many connections \(limit 1024\)"')) >= 1, "")
    after = settle_rss(pid)
    print("# agent VmRSS: baseline %d kB, one-peer flood %d kB, spread flood %d kB, after %d kB"
          % (base, during, peak, after))
    check("RSS returns within 2 MB of the baseline (%d -> %d kB)" % (base, after),
          after - base < 2048, "")
    ok, why = health_ok(agent)
    check("a legitimate call after the floods", ok, why)
    agent.term()


def mtls_cases():
    certs = os.path.join(TMP, "certs")
    os.makedirs(certs, exist_ok=True)
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "unit", "fakes",
                                                     "mkcerts.py"), certs],
                       capture_output=True, text=True)
    check("test certificates", r.returncode == 0, r.stderr)
    if r.returncode:
        return
    c = lambda n: os.path.join(certs, n)  # noqa: E731
    tls = {"ca": c("ca1.crt"), "cert": c("srv1.crt"), "key": c("srv1.key"),
           "client_cert": c("cli1.crt"), "client_key": c("cli1.key")}
    agent = Agent(os.path.join(TMP, "mtls"), ["--handshake-timeout=%ds" % DEADLINE_S], tls=tls)
    agent.make_channel = with_name(agent.make_channel)
    check("mTLS agent starts", agent.start(), agent.log_text()[-2000:])
    if not agent.proc or agent.proc.poll() is not None:
        return
    ok, why = health_ok(agent)
    check("a client with a good certificate is served", ok, why)
    cases = [("no client certificate", "", "", None, r"no client certificate"),
             ("a certificate from another CA", c("cli2.crt"), c("cli2.key"), None,
              r"not correctly signed by the trusted CA"),
             ("an expired certificate", c("srv-expired.crt"), c("srv-expired.key"), None,
              r"validity has expired")]
    for what, cert, key, ca, reason in cases:
        for _ in range(3):
            ch = agent.make_channel(cert=cert, key=key, ca=ca)
            try:
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=3)
                served = True
            except grpc.RpcError:
                served = False
            ch.close()
        check("%s is refused" % what, not served, "")
        got = lines(agent, r'^W.*"TLS handshake failed" peer="127\.0\.0\.1" reason="[^"]*%s'
                    % reason)
        check("the refusal (%s) is logged once at the default verbosity with the peer and the "
              "reason" % what, len(got) == 1, "%d lines" % len(got))
    # silent connections to a TLS server hold no TLS session until they send a byte
    pid = agent.proc.pid
    base = settle_rss(pid, 1)
    socks = flood(agent.port, ["127.0.2.%d" % i for i in range(1, 21)], 1000)
    t0 = time.monotonic()
    peak = rss_kb(pid)
    closed = closed_by_peer(socks, DEADLINE_S + MARGIN_S)
    check("every silent TLS connection is closed by the deadline (%d of %d in %.1f s)"
          % (len(closed), len(socks), time.monotonic() - t0), len(closed) == len(socks), "")
    for s in socks:
        s.close()
    after = settle_rss(pid)
    print("# mTLS agent VmRSS: baseline %d kB, 1,000 silent connections %d kB, after %d kB"
          % (base, peak, after))
    check("RSS returns within 2 MB of the baseline (%d -> %d kB)" % (base, after),
          after - base < 2048, "")
    got = lines(agent, r'"gRPC connection timed out" peer="127\.0\.2\.\d+" '
                       r'reason="TLS handshake not completed within %ds"' % DEADLINE_S)
    check("the time-outs are logged once per peer", len(got) == 20, "%d lines" % len(got))
    check("no certificate or key material in the log",
          "BEGIN" not in agent.log_text() and "PRIVATE" not in agent.log_text(), "")
    agent.term()


def with_name(make):
    """The suite's certificates name the agent agent.test (mkcerts.py)."""
    def wrapped(cert=None, key=None, ca=None, plaintext=False):
        ch_args = dict(cert=cert, key=key, ca=ca, plaintext=plaintext)
        orig = grpc.secure_channel

        def secure(target, creds, options=None):
            opts = [o for o in (options or []) if o[0] != "grpc.ssl_target_name_override"]
            return orig(target, creds, options=opts + [("grpc.ssl_target_name_override",
                                                        "agent.test")])
        grpc.secure_channel = secure
        try:
            return make(**ch_args)
        finally:
            grpc.secure_channel = orig
    return wrapped


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 8192)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < 2 * FLOOD + 100:
        check("descriptors for the flood (RLIMIT_NOFILE hard limit %d)" % hard, False, "")
        return
    plain_cases()
    mtls_cases()


if __name__ == "__main__":
    try:
        main()
    finally:
        sys.exit(1 if failed else 0)
