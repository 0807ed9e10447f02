#!/usr/bin/python3
"""grpcio (gRPC C-core) peer for the interop suite.

  py_peer.py client TARGET [--ca F --cert F --key F --name N] [--expect-fail]
      runs every case against our server and prints "ok <case>" or "FAIL <case>: why";
      exits 1 on any failure.  --expect-fail: only check that a call fails (wrong certificate).
  py_peer.py server --listen ADDR [--cert F --key F --ca F]
      serves pillar.test.v1.Echo and grpc.health.v1.Health like echo_server.c; prints "ready".
"""
import os
import sys
import threading
import time
from concurrent import futures

sys.path.insert(0, os.path.join(os.environ["BUILD"], "grpc-test", "py"))
import grpc  # noqa: E402
import echo_pb2  # noqa: E402
import echo_pb2_grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402

MAX = 4 * 1024 * 1024


def opts(argv):
    o = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            o[argv[i][2:]] = argv[i + 1]
            i += 2
        else:
            o[argv[i][2:]] = True
            i += 1
    return o


def read(p):
    with open(p, "rb") as f:
        return f.read()


def channel(target, o):
    copts = [("grpc.max_receive_message_length", MAX), ("grpc.enable_retries", 0)]
    if "ca" in o:
        creds = grpc.ssl_channel_credentials(
            root_certificates=read(o["ca"]),
            private_key=read(o["key"]) if "key" in o else None,
            certificate_chain=read(o["cert"]) if "cert" in o else None)
        if "name" in o:
            copts.append(("grpc.ssl_target_name_override", o["name"]))
        return grpc.secure_channel(target, creds, options=copts)
    return grpc.insecure_channel(target, options=copts)


class Cases:
    def __init__(self, ch):
        self.ch = ch
        self.stub = echo_pb2_grpc.EchoStub(ch)
        self.health = health_pb2_grpc.HealthStub(ch)
        self.failed = 0

    def run(self, name, fn):
        try:
            fn()
            print("ok   %s" % name, flush=True)
        except Exception as ex:  # noqa: BLE001
            self.failed += 1
            print("FAIL %s: %r" % (name, ex), flush=True)

    def expect_code(self, fn, code, msg_part=None):
        try:
            fn()
        except grpc.RpcError as ex:
            if ex.code() != code:
                raise AssertionError("want %s, got %s (%s)" % (code, ex.code(), ex.details()))
            if msg_part is not None and msg_part not in (ex.details() or ""):
                raise AssertionError("message %r lacks %r" % (ex.details(), msg_part))
            return ex
        raise AssertionError("want %s, got OK" % code)

    def unary_ok(self):
        r = self.stub.Unary(echo_pb2.EchoRequest(message="hello"), timeout=10)
        assert r.message == "hello", r

    def statuses(self):
        for code in grpc.StatusCode:
            if code == grpc.StatusCode.OK:
                continue
            n = code.value[0]
            msg = "failure %d: 100%% caf\u00e9 \u2713 \n end" % n
            ex = self.expect_code(lambda: self.stub.Unary(
                echo_pb2.EchoRequest(status=n, status_message=msg), timeout=10), code)
            assert ex.details() == msg, (ex.details(), msg)

    def unknown(self):
        self.expect_code(lambda: self.ch.unary_unary("/no.Such/Thing")(b"", timeout=5),
                         grpc.StatusCode.UNIMPLEMENTED, "unknown service no.Such")
        self.expect_code(lambda: self.ch.unary_unary("/pillar.test.v1.Echo/Nope")(b"", timeout=5),
                         grpc.StatusCode.UNIMPLEMENTED, "unknown method Nope")

    def bad_protobuf(self):
        self.expect_code(lambda: self.ch.unary_unary("/pillar.test.v1.Echo/Unary")(
            b"\xff\xff\xff", timeout=5), grpc.StatusCode.INTERNAL, "cannot parse")

    def deadline(self):
        r = self.stub.Unary(echo_pb2.EchoRequest(), timeout=30)
        assert 25000 < r.deadline_ms <= 31000, r.deadline_ms
        # the handler would take 20 s: the bound lies far from both that and the 0.3 s deadline
        t0 = time.time()
        self.expect_code(lambda: self.stub.Unary(echo_pb2.EchoRequest(delay_ms=20000), timeout=0.3),
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        assert time.time() - t0 < 10, "deadline took %.1f s" % (time.time() - t0)

    def cancel(self):
        before, naps = self.stats(), self.stats("naps")
        fut = self.stub.Unary.future(echo_pb2.EchoRequest(delay_ms=20000), timeout=30)
        # cancelled only once its handler runs: a call cancelled before it reached the server
        # leaves no handler to see it (a loaded machine may take any time to deliver it)
        self.wait_naps(naps)
        fut.cancel()
        for _ in range(600):
            if self.stats() > before:
                return
            time.sleep(0.05)
        raise AssertionError("handler never saw the cancellation")

    def stats(self, what="stats"):
        r = self.stub.Unary(echo_pb2.EchoRequest(message=what), timeout=30)
        return int(r.message.split("=")[1])

    def limit(self):
        # EchoRequest{payload} = tag (1) + 4-byte length varint + payload
        ok = echo_pb2.EchoRequest(payload=b"a" * (MAX - 5))
        assert ok.ByteSize() == MAX
        self.stub.Unary(ok, timeout=20)
        big = echo_pb2.EchoRequest(payload=b"a" * (MAX - 4))
        self.expect_code(lambda: self.stub.Unary(big, timeout=20),
                         grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max")
        # response just under the client's 4 MiB limit
        r = self.stub.Unary(echo_pb2.EchoRequest(response_size=MAX - 64), timeout=20)
        assert len(r.payload) == MAX - 64

    def metadata(self):
        r, call = self.stub.Unary.with_call(
            echo_pb2.EchoRequest(echo_metadata="x-test-key"), timeout=5,
            metadata=[("x-test-key", "v1 value")])
        assert r.metadata_value == "v1 value", r
        md = dict(call.initial_metadata())
        assert md.get("x-echo-reply") == "v1 value", md

    def concurrent(self):
        t0 = time.time()
        with futures.ThreadPoolExecutor(max_workers=100) as ex:
            fs = [ex.submit(self.stub.Unary, echo_pb2.EchoRequest(message=str(i), delay_ms=100),
                            timeout=30) for i in range(100)]
            got = sorted(int(f.result().message) for f in fs)
        assert got == list(range(100))
        assert time.time() - t0 < 10, "100 concurrent calls took %.1f s" % (time.time() - t0)

    def health_check(self):
        S = health_pb2.HealthCheckResponse
        assert self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status == S.SERVING
        assert self.health.Check(health_pb2.HealthCheckRequest(service="pillar.test.v1.Echo"),
                                 timeout=5).status == S.SERVING
        assert self.health.Check(health_pb2.HealthCheckRequest(service="pillar.test.v1.Unhealthy"),
                                 timeout=5).status == S.NOT_SERVING
        self.expect_code(lambda: self.health.Check(health_pb2.HealthCheckRequest(service="x.Y"),
                                                   timeout=5), grpc.StatusCode.NOT_FOUND)

    def stream(self):
        got = [r.index for r in self.stub.Stream(
            echo_pb2.EchoRequest(count=50, response_size=100000), timeout=30)]
        assert got == list(range(50)), got
        it = self.stub.Stream(echo_pb2.EchoRequest(count=3, status=9, status_message="pre"), timeout=10)
        n = 0
        try:
            for _ in it:
                n += 1
            raise AssertionError("stream did not fail")
        except grpc.RpcError as ex:
            assert ex.code() == grpc.StatusCode.FAILED_PRECONDITION and n == 3, (ex.code(), n)

    def oplock(self):
        self.stub.Unary(echo_pb2.EchoRequest(message="pvc-1", delay_ms=0), timeout=5)
        # the first call holds pvc-9 from before its handler's delay begins ("naps" rises) until
        # it is cancelled: the second call finds the lock taken however late a loaded machine
        # delivers either
        naps = self.stats("naps")
        f1 = self.stub.Lock.future(echo_pb2.EchoRequest(message="pvc-9", delay_ms=60000), timeout=90)
        self.wait_naps(naps)
        self.expect_code(lambda: self.stub.Lock(echo_pb2.EchoRequest(message="pvc-9"), timeout=30),
                         grpc.StatusCode.ABORTED, "an operation on volume pvc-9 is already in progress")
        f1.cancel()
        # released once the cancelled handler returns
        deadline = time.monotonic() + 30
        while True:
            try:
                self.stub.Lock(echo_pb2.EchoRequest(message="pvc-9"), timeout=30)
                return
            except grpc.RpcError as ex:
                if ex.code() != grpc.StatusCode.ABORTED or time.monotonic() > deadline:
                    raise
            time.sleep(0.02)

    def wait_naps(self, naps):
        """Until a handler began a delay after the "naps" count was naps."""
        for _ in range(600):
            if self.stats("naps") > naps:
                return
            time.sleep(0.05)
        raise AssertionError("the handler never began its delay")

    def compressed(self):
        self.expect_code(lambda: self.stub.Unary(echo_pb2.EchoRequest(payload=b"z" * 4096), timeout=5,
                                                 compression=grpc.Compression.Gzip),
                         grpc.StatusCode.UNIMPLEMENTED, "compressed")


def client(argv):
    target = argv[0]
    o = opts(argv[1:])
    ch = channel(target, o)
    if "expect-fail" in o:
        try:
            echo_pb2_grpc.EchoStub(ch).Unary(echo_pb2.EchoRequest(message="x"), timeout=5)
        except grpc.RpcError as ex:
            print("ok   refused: %s" % ex.code(), flush=True)
            return 0
        print("FAIL call succeeded with a certificate that should be refused", flush=True)
        return 1
    c = Cases(ch)
    only = o.get("cases")
    for name in ["unary_ok", "statuses", "unknown", "bad_protobuf", "deadline", "cancel", "limit",
                 "metadata", "concurrent", "health_check", "stream", "oplock", "compressed"]:
        if only and name not in only.split(","):
            continue
        c.run(name, getattr(c, name))
    ch.close()
    return 1 if c.failed else 0


class Echo(echo_pb2_grpc.EchoServicer):
    def __init__(self):
        self.cancels = 0
        self.locks = set()
        self.mu = threading.Lock()

    def _resp(self, req, ctx):
        r = echo_pb2.EchoResponse(message=req.message, payload=b"x" * req.response_size)
        if req.echo_metadata:
            r.metadata_value = dict(ctx.invocation_metadata()).get(req.echo_metadata, "")
        left = ctx.time_remaining()
        r.deadline_ms = -1 if left is None else int(left * 1000)
        return r

    def _nap(self, ctx, ms):
        end = time.time() + ms / 1000.0
        while time.time() < end:
            if not ctx.is_active():
                with self.mu:
                    self.cancels += 1
                return False
            time.sleep(0.005)
        return True

    def Unary(self, req, ctx):
        if req.message == "stats":
            return echo_pb2.EchoResponse(message="cancelled=%d" % self.cancels)
        if req.echo_metadata:
            ctx.send_initial_metadata(
                [("x-echo-reply", dict(ctx.invocation_metadata()).get(req.echo_metadata, ""))])
        if req.delay_ms and not self._nap(ctx, req.delay_ms):
            ctx.abort(grpc.StatusCode.CANCELLED, "cancelled while sleeping")
        if req.status:
            ctx.abort(code_of(req.status), req.status_message)
        return self._resp(req, ctx)

    def Stream(self, req, ctx):
        r = self._resp(req, ctx)
        for i in range(req.count):
            r.index = i
            yield r
        if req.status:
            ctx.abort(code_of(req.status), req.status_message)

    def Lock(self, req, ctx):
        with self.mu:
            if req.message in self.locks:
                ctx.abort(grpc.StatusCode.ABORTED,
                          "an operation on volume %s is already in progress" % req.message)
            self.locks.add(req.message)
        self._nap(ctx, req.delay_ms)
        with self.mu:
            self.locks.discard(req.message)
        return self._resp(req, ctx)


class Health(health_pb2_grpc.HealthServicer):
    def Check(self, req, ctx):
        S = health_pb2.HealthCheckResponse
        st = {"": S.SERVING, "pillar.test.v1.Echo": S.SERVING,
              "pillar.test.v1.Unhealthy": S.NOT_SERVING}.get(req.service)
        if st is None:
            ctx.abort(grpc.StatusCode.NOT_FOUND, "unknown service %s" % req.service)
        return S(status=st)


def code_of(n):
    for c in grpc.StatusCode:
        if c.value[0] == n:
            return c
    return grpc.StatusCode.UNKNOWN


def server(argv):
    o = opts(argv)
    workers = int(o.get("workers", "120"))
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                      options=[("grpc.max_receive_message_length", MAX),
                               ("grpc.max_send_message_length", 16 * MAX)])
    echo_pb2_grpc.add_EchoServicer_to_server(Echo(), srv)
    health_pb2_grpc.add_HealthServicer_to_server(Health(), srv)
    if "cert" in o:
        creds = grpc.ssl_server_credentials([(read(o["key"]), read(o["cert"]))],
                                            root_certificates=read(o["ca"]) if "ca" in o else None,
                                            require_client_auth="ca" in o)
        port = srv.add_secure_port(o["listen"], creds)
    else:
        port = srv.add_insecure_port(o["listen"])
    srv.start()
    print("ready %d" % port, flush=True)
    try:
        srv.wait_for_termination()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(client(sys.argv[2:]) if sys.argv[1] == "client" else server(sys.argv[2:]))
