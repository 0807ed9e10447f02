"""Objects in etcd with Kubernetes semantics: resourceVersion = etcd mod_revision, uid,
creationTimestamp, generation, finalizers/deletionTimestamp, preconditions, pagination, watch.

Every method raises errors.ApiError for what kube-apiserver reports as a Status.  Objects are
stored without metadata.resourceVersion; reads fill it from the key's mod_revision.
"""
import base64
import copy
import datetime
import json
import uuid

import errors
import events
from etcd import Compacted, prefix_end


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stored_as_core_event(res):
    return res is not None and res.group == "events.k8s.io" and res.plural == "events"


def _decode(kv, res=None):
    obj = json.loads(kv["value"])
    obj.setdefault("metadata", {})["resourceVersion"] = str(kv["mod_revision"])
    return events.from_core(obj) if _stored_as_core_event(res) else obj


def _encode(obj, res=None):
    o = events.to_core(obj) if _stored_as_core_event(res) else dict(obj)
    md = dict(o.get("metadata", {}))
    md.pop("resourceVersion", None)
    o["metadata"] = md
    return json.dumps(o, separators=(",", ":")).encode()


def _roundtrip(obj, res):
    """obj as a read will return it (an events.k8s.io Event comes back with its defaults)."""
    if not _stored_as_core_event(res):
        return copy.deepcopy(obj)
    out = events.from_core(json.loads(_encode(obj, res)))
    out["metadata"]["resourceVersion"] = obj["metadata"].get("resourceVersion")
    return out


def same_content(a, b, res=None):
    return _encode(a, res) == _encode(b, res)


def encode_continue(rv, start):
    doc = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\0"}, separators=(",", ":"))
    return base64.urlsafe_b64encode(doc.encode()).decode().rstrip("=")


def decode_continue(token):
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if doc.get("v") != "meta.k8s.io/v1":
            raise ValueError
        return int(doc["rv"]), doc["start"]
    except (ValueError, KeyError, TypeError):
        raise errors.bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")


class Store:
    def __init__(self, etcd):
        self.etcd = etcd

    async def get(self, res, ns, name, revision=0):
        try:
            _, kvs, _, _ = await self.etcd.range(res.key(ns, name).encode(), revision=revision)
        except Compacted:
            raise errors.expired("The resourceVersion for the provided get is too old.")
        if not kvs:
            raise errors.not_found(res, name)
        return _decode(kvs[0], res)

    async def current_revision(self):
        rev, _, _, _ = await self.etcd.range(b"/registry/", prefix_end(b"/registry/"), count_only=True)
        return rev

    async def list(self, res, ns, revision=0, limit=0, start=""):
        """Returns (revision, [objects], remaining or None, last key name or None)."""
        prefix = res.key_prefix(ns).encode()
        # start (a continue token's) is "ns/name" for a namespaced kind, as last below: relative
        # to the kind's prefix, not the namespace's; never before the namespace's own keys
        key = max(prefix, res.key_prefix(None).encode() + start.encode()) if start else prefix
        try:
            rev, kvs, count, more = await self.etcd.range(key, prefix_end(prefix), revision=revision, limit=limit)
        except Compacted:
            raise
        objs = [_decode(kv, res) for kv in kvs]
        remaining = count - len(kvs) if more else None
        last = kvs[-1]["key"][len(res.key_prefix(None).encode()):].decode() if more and kvs else None
        return (revision or rev), objs, remaining, last

    async def create(self, res, obj):
        md = obj["metadata"]
        ok, rev = await self.etcd.create(res.key(md.get("namespace"), md["name"]).encode(), _encode(obj, res))
        if not ok:
            raise errors.already_exists(res, md["name"])
        out = _roundtrip(obj, res)
        out["metadata"]["resourceVersion"] = str(rev)
        return out

    async def put(self, res, old, obj):
        """Write obj over old (compare-and-swap on old's resourceVersion); a no-op write keeps old."""
        if same_content(old, obj, res):
            out = copy.deepcopy(obj)
            out["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return out
        md = obj["metadata"]
        ok, rev = await self.etcd.update(res.key(md.get("namespace"), md["name"]).encode(), _encode(obj, res),
                                         int(old["metadata"]["resourceVersion"]))
        if not ok:
            raise errors.conflict(res, md["name"])
        out = _roundtrip(obj, res)
        out["metadata"]["resourceVersion"] = str(rev)
        return out

    async def remove(self, res, old):
        md = old["metadata"]
        ok, rev = await self.etcd.delete(res.key(md.get("namespace"), md["name"]).encode(),
                                         int(md["resourceVersion"]))
        if not ok:
            raise errors.conflict(res, md["name"])
        return rev

    async def watch(self, res, ns, start_revision):
        """Async generator of (type, object, old object) from etcd, from start_revision on."""
        prefix = res.key_prefix(ns).encode()
        async for typ, kv, prev in self.etcd.watch(prefix, start_revision):
            if typ == "DELETE":
                old = _decode(dict(prev, mod_revision=kv["mod_revision"]), res) if prev else None
                yield "DELETED", old, old
            else:
                obj = _decode(kv, res)
                yield ("ADDED" if prev is None else "MODIFIED"), obj, (_decode(prev, res) if prev else None)


def new_uid():
    return str(uuid.uuid4())
