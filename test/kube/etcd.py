"""Minimal asyncio client for etcd 3.4's JSON gRPC gateway (/v3/...).

Every unary call opens its own loopback connection (Connection: close); a watch keeps one
connection and yields the gateway's newline-separated JSON messages.  Keys and values are bytes;
the gateway wants them base64-encoded.  Revisions come back as decimal strings and are returned
as ints.  Errors: EtcdError for a non-200 answer or a broken connection.
"""
import asyncio
import base64
import json


class EtcdError(Exception):
    pass


class FutureRevision(Exception):
    """A read asked for a revision etcd has not reached yet."""


class Compacted(Exception):
    """A read or watch asked for a revision etcd has compacted away."""

    def __init__(self, compact_revision):
        super().__init__("compacted")
        self.compact_revision = compact_revision


def b64(data):
    return base64.b64encode(data).decode()


def unb64(text):
    return base64.b64decode(text) if text else b""


def prefix_end(prefix):
    """The range_end that selects every key starting with prefix."""
    b = bytearray(prefix)
    while b:
        if b[-1] < 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return b"\0"


def _kv(kv):
    return {
        "key": unb64(kv.get("key")),
        "value": unb64(kv.get("value")),
        "create_revision": int(kv.get("create_revision", 0)),
        "mod_revision": int(kv.get("mod_revision", 0)),
    }


async def _read_head(reader):
    line = await reader.readline()
    if not line:
        raise EtcdError("etcd closed the connection")
    status = int(line.split()[1])
    headers = {}
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


async def _read_chunks(reader, headers):
    """Yield body pieces (chunked or Content-Length or until EOF)."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                await reader.readline()
                return
            data = await reader.readexactly(size)
            await reader.readline()
            yield data
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            yield data


class Etcd:
    def __init__(self, host, port):
        self.host, self.port = host, port

    async def _open(self, path, body):
        reader, writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        writer.write(
            (
                f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
            ).encode()
            + data
        )
        await writer.drain()
        return reader, writer

    async def call(self, path, body):
        reader, writer = await self._open(path, body)
        try:
            status, headers = await _read_head(reader)
            data = b"".join([c async for c in _read_chunks(reader, headers)])
        finally:
            writer.close()
        doc = json.loads(data or b"{}")
        if status != 200:
            msg = doc.get("message") or doc.get("error") or str(doc)
            if "compacted" in msg:
                raise Compacted(0)
            if "future revision" in msg:
                raise FutureRevision(msg)
            raise EtcdError(f"etcd {path}: HTTP {status}: {msg}")
        return doc

    async def range(self, key, end=None, revision=0, limit=0, count_only=False):
        """Returns (header revision, [kv...], count, more)."""
        body = {"key": b64(key)}
        if end is not None:
            body["range_end"] = b64(end)
        if revision:
            body["revision"] = str(revision)
        if limit:
            body["limit"] = str(limit)
        if count_only:
            body["count_only"] = True
        doc = await self.call("/v3/kv/range", body)
        kvs = [_kv(kv) for kv in doc.get("kvs", [])]
        return (
            int(doc["header"]["revision"]),
            kvs,
            int(doc.get("count", 0)),
            bool(doc.get("more", False)),
        )

    async def txn(self, compare, success, failure=()):
        doc = await self.call(
            "/v3/kv/txn",
            {"compare": list(compare), "success": list(success), "failure": list(failure)},
        )
        return int(doc["header"]["revision"]), bool(doc.get("succeeded", False)), doc

    async def create(self, key, value):
        """Put key only if absent.  Returns (ok, revision)."""
        rev, ok, _ = await self.txn(
            [{"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
            [{"request_put": {"key": b64(key), "value": b64(value)}}],
        )
        return ok, rev

    async def update(self, key, value, mod_revision):
        """Put key only if its mod_revision is unchanged.  Returns (ok, revision)."""
        rev, ok, _ = await self.txn(
            [{"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod_revision)}],
            [{"request_put": {"key": b64(key), "value": b64(value)}}],
        )
        return ok, rev

    async def delete(self, key, mod_revision):
        """Delete key only if its mod_revision is unchanged.  Returns (ok, revision)."""
        rev, ok, _ = await self.txn(
            [{"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod_revision)}],
            [{"request_delete_range": {"key": b64(key)}}],
        )
        return ok, rev

    async def compact(self, revision):
        await self.call("/v3/kv/compaction", {"revision": str(revision), "physical": True})

    async def watch(self, prefix, start_revision):
        """Async generator of (type, kv, prev_kv); type is PUT or DELETE.  Raises Compacted."""
        body = {
            "create_request": {
                "key": b64(prefix),
                "range_end": b64(prefix_end(prefix)),
                "start_revision": str(start_revision),
                "prev_kv": True,
            }
        }
        reader, writer = await self._open("/v3/watch", body)
        try:
            status, headers = await _read_head(reader)
            if status != 200:
                raise EtcdError(f"etcd watch: HTTP {status}")
            dec = json.JSONDecoder()
            buf = ""
            async for chunk in _read_chunks(reader, headers):
                buf += chunk.decode()
                while True:
                    buf = buf.lstrip()
                    if not buf:
                        break
                    try:
                        msg, end = dec.raw_decode(buf)
                    except ValueError:
                        break
                    buf = buf[end:]
                    res = msg.get("result", {})
                    if "error" in msg:
                        raise EtcdError(f"etcd watch: {msg['error']}")
                    if res.get("compact_revision") and res.get("canceled"):
                        raise Compacted(int(res["compact_revision"]))
                    if res.get("canceled"):
                        raise EtcdError("etcd watch canceled")
                    for ev in res.get("events", []):
                        prev = _kv(ev["prev_kv"]) if ev.get("prev_kv") else None
                        yield ev.get("type", "PUT"), _kv(ev["kv"]), prev
            raise EtcdError("etcd watch stream ended")
        finally:
            writer.close()
