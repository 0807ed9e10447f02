"""kube-apiserver's watch cache, for the lists it answers from memory.

kube-apiserver 1.32 answers a list with resourceVersion=0 (client-go's reflector's first list)
from its watch cache: the objects as of the last event it received, at that event's
resourceVersion, all of them in one answer whatever `limit` asks (no continue token), without
a read of etcd (transcript 03i; 07u is the same list without a watch cache, served by etcd).
Every other list (consistent, exact, continued, or with resourceVersion=N and a limit) goes to
etcd as before, and watches stay etcd watches.

Each resource's cache starts with its first such list: a list of etcd at one revision, then an
etcd watch from the next revision keeps it.  Each object is kept as the text it has as a list
item (its keys sorted for a custom resource, kind and apiVersion left out for a built-in kind),
so a list of 10,000 objects costs no parse and no encode, only the join of their texts, and the
sorted order is kept until an event changes it.  A cache whose watch ends (etcd gone, a
compaction) is dropped: the next list starts a new one from etcd.
"""
import asyncio
import json

CHUNK = 256 << 10  # bytes of items per piece of a streamed answer


def _sorted(o):
    if isinstance(o, dict):
        return {k: _sorted(o[k]) for k in sorted(o)}
    if isinstance(o, list):
        return [_sorted(x) for x in o]
    return o


def item_text(res, obj):
    """obj as the API server writes it as an item of a list (compact JSON, `<`, `>` and `&`
    escaped as Go's encoder does)."""
    if res.crd is not None:
        obj = _sorted(obj)
    else:
        obj = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


def _key(obj):
    md = obj["metadata"]
    return f"{md['namespace']}/{md['name']}" if md.get("namespace") else md["name"]


class ResourceCache:
    def __init__(self, store, res):
        self.store, self.res = store, res
        self.items = {}  # key ("namespace/name" or "name") -> (namespace or None, item text)
        self.rv = 0
        self.order = None  # the keys sorted, until an event changes them
        self.failed = False
        self.task = None

    async def fill(self):
        rev, objs, _, _ = await self.store.list(self.res, None)
        for o in objs:
            self.items[_key(o)] = (o["metadata"].get("namespace"), item_text(self.res, o))
        self.rv = rev
        self.task = asyncio.ensure_future(self.follow())

    async def follow(self):
        try:
            async for typ, obj, _ in self.store.watch(self.res, None, self.rv + 1):
                key = _key(obj)
                if typ == "DELETED":
                    self.items.pop(key, None)
                    self.order = None
                else:
                    if key not in self.items:
                        self.order = None
                    self.items[key] = (obj["metadata"].get("namespace"), item_text(self.res, obj))
                self.rv = int(obj["metadata"]["resourceVersion"])
        except asyncio.CancelledError:
            raise
        except Exception:  # etcd gone or the watch compacted away: start again from etcd
            self.failed = True

    def texts(self, ns):
        """The item texts of namespace ns (None: all), in key order, and the version."""
        if self.order is None:
            self.order = sorted(self.items)
        items = self.items
        if ns is None:
            return [items[k][1] for k in self.order], self.rv
        return [t for k in self.order for n, t in (items[k],) if n == ns], self.rv


class WatchCaches:
    def __init__(self, store):
        self.store = store
        self.caches = {}  # (group, version, plural) -> ResourceCache
        self.lock = asyncio.Lock()

    async def get(self, res):
        """The resource's cache, filled (the first call fills it from etcd)."""
        key = (res.group, res.version, res.plural)
        c = self.caches.get(key)
        if c is not None and not c.failed:
            return c
        async with self.lock:
            c = self.caches.get(key)
            if c is None or c.failed:
                c = ResourceCache(self.store, res)
                await c.fill()
                self.caches[key] = c
        return c


def list_head_tail(res, rv):
    """The text before and after the items of a list answer at rv."""
    if res.crd is not None:
        head = '{"apiVersion":%s,"items":[' % json.dumps(res.api_version)
        tail = '],"kind":%s,"metadata":{"continue":"","resourceVersion":"%d"}}\n' % (
            json.dumps(res.list_kind), rv)
    else:
        head = '{"kind":%s,"apiVersion":%s,"metadata":{"resourceVersion":"%d"},"items":[' % (
            json.dumps(res.list_kind), json.dumps(res.api_version), rv)
        tail = "]}\n"
    return head.encode(), tail.encode()


async def stream(head, texts, tail):
    """The answer in pieces of about CHUNK bytes."""
    piece, size = [head], len(head)
    for i, t in enumerate(texts):
        if i:
            piece.append(b",")
        piece.append(t)
        size += len(t) + 1
        if size >= CHUNK:
            yield b"".join(piece)
            piece, size = [], 0
    piece.append(tail)
    yield b"".join(piece)
