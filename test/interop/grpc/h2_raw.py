#!/usr/bin/python3
"""HTTP/2 facts of our server checked with raw frames (no HTTP/2 library in between):
nothing sent before the client preface and SETTINGS at once after it, PING answered, idle connections closed with GOAWAY, the connection limit.
Usage: h2_raw.py HOST PORT IDLE_MS   (the server runs with --idle-ms IDLE_MS --max-conns 2)"""
import socket
import struct
import sys
import time

HOST, PORT, IDLE = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) / 1000.0
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
failed = 0


def frame(t, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload


def read_frame(s):
    hdr = b""
    while len(hdr) < 9:
        c = s.recv(9 - len(hdr))
        if not c:
            return None
        hdr += c
    n = struct.unpack(">I", b"\0" + hdr[:3])[0]
    body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c:
            return None
        body += c
    return hdr[3], hdr[4], body


def case(name, fn):
    global failed
    try:
        fn()
        print("ok   " + name, flush=True)
    except Exception as ex:  # noqa: BLE001
        failed += 1
        print("FAIL %s: %r" % (name, ex), flush=True)


def conn():
    s = socket.create_connection((HOST, PORT), timeout=5)
    return s


def settings_at_once():
    s = conn()
    s.settimeout(0.3)  # a connection that has not spoken yet costs the server nothing
    try:
        early = s.recv(1)
    except socket.timeout:
        early = None
    assert early is None, "server sent %r before the client preface" % early
    s.settimeout(5)
    s.sendall(PREFACE)  # the preface alone: the server's SETTINGS must not wait for ours
    t, fl, body = read_frame(s)
    assert t == 4 and fl == 0, (t, fl)
    ids = {struct.unpack(">H", body[i:i + 2])[0]: struct.unpack(">I", body[i + 2:i + 6])[0]
           for i in range(0, len(body), 6)}
    assert ids.get(3) == 100, ids  # MAX_CONCURRENT_STREAMS
    assert 6 in ids, ids           # MAX_HEADER_LIST_SIZE
    s.close()


def ping():
    s = conn()
    s.sendall(PREFACE + frame(4, 0, 0, b"") + frame(6, 0, 0, b"pillar!!"))
    deadline = time.time() + 5
    while time.time() < deadline:
        f = read_frame(s)
        assert f is not None, "connection closed"
        if f[0] == 6:
            assert f[1] == 1 and f[2] == b"pillar!!", f
            s.close()
            return
    raise AssertionError("no PING ACK")


def idle_close():
    s = conn()
    s.sendall(PREFACE + frame(4, 0, 0, b""))
    t0 = time.time()
    s.settimeout(IDLE + 30)
    goaway = False
    while True:
        f = read_frame(s)
        if f is None:
            break
        if f[0] == 7:
            goaway = True
    took = time.time() - t0
    assert goaway, "closed without GOAWAY"
    # the upper bound only tells a close from none (the read's timeout): a loaded machine runs
    # the server's idle timer late
    assert IDLE * 0.9 <= took <= IDLE + 20, "closed after %.2f s" % took


def conn_limit():
    # The earlier cases' connections may still be counted for a moment after they closed (the
    # server notices a close on its loop, which lags on a loaded machine): retry until both of
    # our two connections are served, then check that a third is not.
    deadline = time.time() + 10
    while True:
        a, b = conn(), conn()
        served = True
        for s in (a, b):
            s.sendall(PREFACE + frame(4, 0, 0, b""))
            f = read_frame(s)
            served = served and f is not None and f[0] == 4
        if served:
            break
        a.close()
        b.close()
        assert time.time() < deadline, "two connections were never served together"
        time.sleep(0.2)
    c = conn()
    c.settimeout(3)
    assert read_frame(c) is None, "third connection was served"
    a.close()
    b.close()
    c.close()


case("nothing before the client preface, SETTINGS at once after it (MAX_CONCURRENT_STREAMS 100, MAX_HEADER_LIST_SIZE)", settings_at_once)
case("PING answered with ACK", ping)
case("idle connection closed with GOAWAY after the idle timeout", idle_close)
case("connection limit: a connection beyond max is closed", conn_limit)
sys.exit(1 if failed else 0)
