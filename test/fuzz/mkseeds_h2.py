#!/usr/bin/env python3
"""Writes the seed corpora of the client targets (fuzz_grpc_client, and fuzz_kube's client,
status, watch and kubeconfig inputs): HTTP/2 frames as a server sends them after its SETTINGS
frame (the harness writes that one).  Run from the repository root: python3 test/fuzz/mkseeds_h2.py
"""
import os
import struct
import subprocess

C = "test/fuzz/corpus"


def frame(t, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload


def lit(n, v):
    n, v = n.encode(), v.encode()
    assert len(n) < 127 and len(v) < 127
    return bytes([0, len(n)]) + n + bytes([len(v)]) + v


def headers(sid, pairs, end_stream=False, status=None):
    h = b"" if status is None else lit(":status", status)
    h += b"".join(lit(k, v) for k, v in pairs)
    return frame(1, 4 | (1 if end_stream else 0), sid, h)


def data(sid, body, end_stream=False):
    return frame(0, 1 if end_stream else 0, sid, body)


ACK = frame(4, 1, 0, b"")


def put(target, name, blob):
    os.makedirs(os.path.join(C, target), exist_ok=True)
    with open(os.path.join(C, target, name), "wb") as f:
        f.write(blob)


def encode(msg, text):
    return subprocess.run(["protoc", "-Iproto", "-I/usr/include", "--encode=" + msg,
                           "proto/pillar_csi/agent/v1/agent.proto"], input=text.encode(),
                          capture_output=True, check=True).stdout


caps = encode("pillar_csi.agent.v1.GetCapabilitiesResponse",
              'agent_version: "0.1.0" supported_backends: BACKEND_TYPE_FILE '
              'supported_protocols: PROTOCOL_TYPE_NVMEOF_TCP')
G = [("content-type", "application/grpc")]
msg = b"\0" + struct.pack(">I", len(caps)) + caps
put("fuzz_grpc_client", "ok", ACK + headers(1, G, status="200") + data(1, msg) +
    headers(1, [("grpc-status", "0")], end_stream=True))
put("fuzz_grpc_client", "split", ACK + headers(1, G, status="200") + data(1, msg[:3]) +
    data(1, msg[3:]) + headers(1, [("grpc-status", "0")], end_stream=True))
put("fuzz_grpc_client", "trailers-only", ACK + headers(
    1, G + [("grpc-status", "14"), ("grpc-message", "agent%20down")], end_stream=True,
    status="200"))
put("fuzz_grpc_client", "http-503", ACK + headers(1, [("content-type", "text/plain")],
                                                  status="503") + data(1, b"busy", True))
put("fuzz_grpc_client", "goaway", ACK + frame(7, 0, 0, struct.pack(">II", 0, 0)))
put("fuzz_grpc_client", "rst", ACK + frame(3, 0, 1, struct.pack(">I", 8)))

J = [("content-type", "application/json")]
agent = (b'{"apiVersion":"pillar-csi.bhyoo.com/v1alpha1","kind":"PillarAgent","metadata":'
         b'{"name":"storage-1","resourceVersion":"5","uid":"u"},"spec":{"external":'
         b'{"address":"10.0.0.5","port":9500}}}')
put("fuzz_kube_client", "get", b"\0\0" + ACK + headers(1, J, status="200") + data(1, agent, True))
lst = (b'{"apiVersion":"pillar-csi.bhyoo.com/v1alpha1","kind":"PillarAgentList","metadata":'
       b'{"resourceVersion":"9","continue":""},"items":[' + agent + b']}')
put("fuzz_kube_client", "list", b"\1\0" + ACK + headers(1, J, status="200") + data(1, lst, True))
st404 = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
         b'"pillaragents.pillar-csi.bhyoo.com \\"x\\" not found","reason":"NotFound",'
         b'"details":{"name":"x","group":"pillar-csi.bhyoo.com","kind":"pillaragents"},"code":404}')
put("fuzz_kube_client", "get-404", b"\0\0" + ACK + headers(1, J, status="404") + data(1, st404, True))
put("fuzz_kube_client", "list-429", b"\1\0" + ACK + headers(1, J + [("retry-after", "1")], status="429") +
    data(1, b'{"kind":"Status","code":429,"reason":"TooManyRequests"}', True))
ev = (b'{"type":"ADDED","object":' + agent + b'}\n{"type":"BOOKMARK","object":{"kind":'
      b'"PillarAgent","apiVersion":"pillar-csi.bhyoo.com/v1alpha1","metadata":'
      b'{"resourceVersion":"12"}}}\n')
gone = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":'
        b'"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}\n')
put("fuzz_kube_client", "watch", b"\2\0" + ACK + headers(1, J, status="200") + data(1, ev[:50]) +
    data(1, ev[50:]) + data(1, gone, True))
put("fuzz_kube", "status", b"\0\x94" + st404)
put("fuzz_kube", "watch-parser", b"\1\x07" + ev + gone)
put("fuzz_kube", "kubeconfig", b"\2\0" + b"""apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: k, user: u, namespace: ns1}
clusters:
- name: k
  cluster: {server: "https://10.0.0.1:6443", certificate-authority: ca.crt, tls-server-name: api}
users:
- name: u
  user: {tokenFile: token}
""")
