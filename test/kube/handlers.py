"""The verbs on one resource: get, list, watch, create, update, patch, delete (and subresources).

Each handler takes a Request (see apiserver.py) and the resolved Resource and returns a Reply,
or raises errors.ApiError.  Watches return a Reply whose `stream` is an async generator of
newline-terminated JSON events.
"""
import asyncio
import copy
import datetime
import json

import yaml

import builtin
import errors
import fields
import objects
import patch as patchlib
import labelsel
import table
import watchcache
from etcd import Compacted, FutureRevision
from store import decode_continue, encode_continue, now


def _without_nulls(doc):
    """An applied configuration as a merge patch that only sets fields."""
    if isinstance(doc, dict):
        return {k: _without_nulls(v) for k, v in doc.items() if v is not None}
    return doc


def _pod_grace(res, obj, opts):
    """The grace period of deleting obj when it is a pod, as kube-apiserver's pod strategy decides:
    DeleteOptions.gracePeriodSeconds, else spec.terminationGracePeriodSeconds (defaulted to 30 at
    creation); 0 for a pod no node runs (no spec.nodeName) or one that has finished (phase
    Succeeded or Failed).  0 for any other kind: deleted at once."""
    if res.group or res.plural != "pods":
        return 0
    spec, phase = obj.get("spec") or {}, (obj.get("status") or {}).get("phase")
    if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
        return 0
    grace = opts.get("gracePeriodSeconds")
    if grace is None:
        grace = spec.get("terminationGracePeriodSeconds", 30)
    return max(int(grace), 0)


class Reply:
    def __init__(self, code, body, headers=(), stream=None):
        self.code, self.body, self.headers, self.stream = code, body, list(headers), stream


def parse_body(req, res):
    try:
        return json.loads(req.body)
    except ValueError as e:
        text = req.body.decode(errors="replace")
        snippet = text[:30] + " ..." if len(text) > 30 else text
        what = "unexpected end of JSON input" if "Expecting" in str(e) and e.pos >= len(text) - 1 else str(e)
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {res.kind}): couldn't get version/kind; "
            f"json parse error: {what} ({snippet})")


def _opts(req):
    mgr = req.q("fieldManager") or (req.header("user-agent") or "unknown").split("/")[0]
    return {"manager": mgr, "strict": req.q("fieldValidation") == "Strict"}


def _warn(warnings):
    return [("warning", "299 - " + json.dumps(w)) for w in warnings]


def render_list(res, objs, rv, cont=None, remaining=None):
    if res.crd is not None:
        md = {"continue": cont or "", "resourceVersion": rv}
        if remaining:
            md["remainingItemCount"] = remaining
        return {"apiVersion": res.api_version, "items": objs, "kind": res.list_kind, "metadata": md}
    md = {"resourceVersion": rv}
    if cont:
        md["continue"] = cont
    if remaining:
        md["remainingItemCount"] = remaining
    items = []
    for o in objs:
        o = dict(o)
        o.pop("kind", None)
        o.pop("apiVersion", None)
        items.append(o)
    return {"kind": res.list_kind, "apiVersion": res.api_version, "metadata": md, "items": items}


def as_requested(req, res, body, single):
    """Convert to Table / PartialObjectMetadata(List) when the Accept header asks for it."""
    accept = req.header("accept") or ""
    first = accept.split(",")[0]
    if "as=Table" in first:
        objs = [body] if single else body["items"]
        if not single and res.crd is None:
            objs = [dict(o, kind=res.kind, apiVersion=res.api_version) for o in objs]
        lm = {} if single else {k: v for k, v in body["metadata"].items()
                                if k in ("continue", "remainingItemCount") and v}
        return table.table(res, objs, body["metadata"]["resourceVersion"], req.q("includeObject") or "Metadata", lm)
    if "as=PartialObjectMetadataList" in first and not single:
        items = [table.partial(o) for o in body["items"]]
        return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": {k: v for k, v in body["metadata"].items() if k != "continue" or v}, "items": items}
    if "as=PartialObjectMetadata" in first and single:
        return table.partial(body)
    return body


class Handlers:
    def __init__(self, store, registry, on_crd=None):
        self.store, self.registry, self.on_crd = store, registry, on_crd
        self.caches = watchcache.WatchCaches(store)

    # ---- reads --------------------------------------------------------------------------------

    async def get(self, req, res, ns, name):
        rv = req.q("resourceVersion")
        obj = await self.store.get(res, ns, name)
        if rv and rv != "0" and int(rv) > int(obj["metadata"]["resourceVersion"]):
            try:
                obj = await self.store.get(res, ns, name, int(rv))
            except errors.ApiError:
                pass
        return Reply(200, as_requested(req, res, obj, True))

    def _selectors(self, req, res):
        lsel = labelsel.parse_labels(req.q("labelSelector"))
        fsel = labelsel.parse_fields(req.q("fieldSelector"), labelsel.supported_fields(res))
        return lambda o: lsel(o["metadata"].get("labels")) and fsel(o)

    async def list(self, req, res, ns):
        match = self._selectors(req, res)
        limit = int(req.q("limit") or 0)
        rv, rvm, cont = req.q("resourceVersion"), req.q("resourceVersionMatch"), req.q("continue")
        revision, start = 0, ""
        if rv == "0" and not cont and rvm in (None, "", "NotOlderThan"):
            return await self._list_cached(req, res, ns, match)
        if cont:
            revision, start = decode_continue(cont)
            start = start.rstrip("\0") + "\0"
        elif rv == "0":
            limit = 0
        elif rv and (limit or rvm == "Exact"):
            revision = int(rv)
        filtered = bool(req.q("labelSelector") or req.q("fieldSelector"))
        try:
            if filtered:
                rev, objs, _, _ = await self.store.list(res, ns, revision, 0, start)
                objs = [o for o in objs if match(o)]
                more = limit and len(objs) > limit
                if more:
                    objs = objs[:limit]
                last = self._last_key(res, objs[-1]) if more else None
                remaining = None
            else:
                rev, objs, remaining, last = await self.store.list(res, ns, revision, limit, start)
        except FutureRevision:
            cur = await self.store.current_revision()
            raise errors.ApiError(504, "Timeout", f"Too large resource version: {revision}, current: {cur}",
                                  {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                                   "retryAfterSeconds": 1})
        except Compacted:
            if cont:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a "
                    "new list without the continue parameter, or use the continue token in this response to retrieve "
                    "the remainder of the results. Continuing with the provided token results in an inconsistent list - "
                    "objects that were created, modified, or deleted between the time the first chunk was returned and "
                    "now may show up in the list.", {"continue": encode_continue(-1, start.rstrip("\0"))})
            raise errors.expired("The resourceVersion for the provided list is too old.")
        token = encode_continue(rev, last) if last else None
        body = render_list(res, objs, str(rev), token, remaining)
        return Reply(200, as_requested(req, res, body, False))

    async def _list_cached(self, req, res, ns, match):
        """A list with resourceVersion=0 as kube-apiserver answers it: from the watch cache
        (watchcache.py), whole whatever its limit, the items' texts as the cache keeps them."""
        texts, rev = (await self.caches.get(res)).texts(ns)
        if req.q("labelSelector") or req.q("fieldSelector") or "as=" in (req.header("accept") or "").split(",")[0]:
            objs = [o for o in (json.loads(t) for t in texts) if match(o)]
            return Reply(200, as_requested(req, res, render_list(res, objs, str(rev)), False))
        head, tail = watchcache.list_head_tail(res, rev)
        if len(head) + len(tail) + sum(len(t) + 1 for t in texts) <= 2048:  # small: Content-Length
            return Reply(200, head + b",".join(texts) + tail)
        return Reply(200, None, stream=watchcache.stream(head, texts, tail))

    def _last_key(self, res, obj):
        md = obj["metadata"]
        return f"{md['namespace']}/{md['name']}" if res.namespaced and md.get("namespace") else md["name"]

    async def watch(self, req, res, ns):
        match = self._selectors(req, res)
        rv = req.q("resourceVersion")
        if req.q("sendInitialEvents") in ("true", "1") and req.q("resourceVersionMatch") != "NotOlderThan":
            cause = {"reason": "FieldValueForbidden",
                     "message": "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                     "field": "resourceVersionMatch"}
            raise errors.ApiError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: {cause["message"]}',
                                  {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [cause]})
        timeout = int(req.q("timeoutSeconds") or 1800)
        initial = []
        if not rv or rv == "0" or req.q("sendInitialEvents") in ("true", "1"):
            rev, objs, _, _ = await self.store.list(res, ns)
            initial = [o for o in objs if match(o)]
        else:
            rev = int(rv)
        bookmarks = req.q("allowWatchBookmarks") in ("true", "1")
        send_initial_end = req.q("sendInitialEvents") in ("true", "1")
        return Reply(200, None, stream=self._stream(res, ns, rev, initial, match, timeout, bookmarks and send_initial_end))

    async def _stream(self, res, ns, rev, initial, match, timeout, initial_end):
        def line(typ, obj):
            return (json.dumps({"type": typ, "object": obj}, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        for o in initial:
            yield line("ADDED", o)
        if initial_end:
            yield line("BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version, "metadata": {
                "resourceVersion": str(rev), "annotations": {"k8s.io/initial-events-end": "true"}}})
        queue = asyncio.Queue()

        async def pump():
            try:
                async for typ, obj, old in self.store.watch(res, ns, rev + 1):
                    await queue.put((typ, obj, old))
            except Compacted:
                await queue.put(("ERROR", errors.expired("The resourceVersion for the provided watch is too old.").status(), None))
            except Exception as e:  # etcd gone: end the watch as the apiserver does
                await queue.put(("END", str(e), None))
        task = asyncio.ensure_future(pump())
        loop = asyncio.get_event_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    return
                try:
                    typ, obj, old = await asyncio.wait_for(queue.get(), left)
                except asyncio.TimeoutError:
                    return
                if typ == "END":
                    return
                if typ == "ERROR":
                    yield line("ERROR", obj)
                    return
                now_in, was_in = match(obj), old is not None and match(old)
                if typ == "DELETED":
                    if was_in:
                        yield line("DELETED", obj)
                elif now_in and (typ == "ADDED" or was_in):
                    yield line(typ, obj)
                elif now_in:
                    yield line("ADDED", obj)
                elif was_in:
                    gone = copy.deepcopy(old)
                    gone["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
                    yield line("DELETED", gone)
        finally:
            task.cancel()

    # ---- writes -------------------------------------------------------------------------------

    async def create(self, req, res, ns):
        obj = parse_body(req, res)
        if not isinstance(obj, dict):
            raise errors.bad_request("the object provided is unrecognized")
        name = (obj.get("metadata") or {}).get("name", "")
        objects.check_kind(res, obj, name)
        if res.crd is None:
            builtin.decode_errors(res, obj)
        obj, warnings = objects.prepare_create(res, obj, ns, _opts(req))
        if res.namespaced:  # the NamespaceLifecycle admission plugin
            await self.store.get(self.registry.find("", "v1", "namespaces"), None, ns)
        out = await self.store.create(res, obj)
        if res.plural == "customresourcedefinitions" and self.on_crd:
            out = await self.on_crd(out)
        return Reply(201, out, _warn(warnings))

    async def update(self, req, res, ns, name, sub):
        obj = parse_body(req, res)
        md = obj.get("metadata") or {}
        if md.get("name") and md["name"] != name:
            raise errors.bad_request(f"the name of the object ({md['name']}) does not match the name on the URL ({name})")
        objects.check_kind(res, obj, name)
        if res.crd is None:
            builtin.decode_errors(res, obj)
        old = await self.store.get(res, ns, name)
        rv = md.get("resourceVersion")
        if not rv and res.crd is not None:
            from schema import FieldError
            raise errors.invalid(res, name, [FieldError("FieldValueInvalid", "metadata.resourceVersion",
                                                        "Invalid value: 0x0: must be specified for an update")],
                                 kind=res.plural)
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(res, name)
        return await self._write(req, res, old, obj, sub, _opts(req))

    async def _write(self, req, res, old, obj, sub, opts):
        new, warnings = objects.prepare_update(res, old, copy.deepcopy(obj), sub, opts)
        md = new["metadata"]
        if md.get("deletionTimestamp") and not md.get("finalizers"):
            await self.store.remove(res, old)
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return Reply(200, new, _warn(warnings))
        out = await self.store.put(res, old, new)
        return Reply(200, out, _warn(warnings))

    async def patch(self, req, res, ns, name, sub):
        ctype = (req.header("content-type") or "").split(";")[0].strip()
        kinds = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
        if res.crd is None:
            kinds.append("application/strategic-merge-patch+json")
        if ctype not in kinds:
            raise errors.ApiError(415, "UnsupportedMediaType",
                                  "the body of the request was in an unknown format - accepted media types include: "
                                  + ", ".join(kinds))
        opts = _opts(req)
        if ctype == "application/apply-patch+yaml":
            return await self._apply(req, res, ns, name, sub, opts)
        try:
            doc = json.loads(req.body)
        except ValueError as e:
            raise errors.bad_request(f"error decoding patch: {e}")
        for _ in range(10):
            old = await self.store.get(res, ns, name)
            try:
                if ctype == "application/json-patch+json":
                    new = patchlib.json_patch(old, doc)
                else:
                    if not isinstance(doc, dict):
                        raise errors.bad_request("json: cannot unmarshal into map")
                    if ctype == "application/strategic-merge-patch+json":
                        doc = patchlib.strategic_as_merge(doc)
                    new = patchlib.merge_patch(old, doc)
            except patchlib.PatchError:
                raise errors.generic_invalid()
            want = (new.get("metadata") or {}).get("resourceVersion")
            if want and want != old["metadata"]["resourceVersion"]:
                raise errors.conflict(res, name)
            new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            if res.crd is None:
                builtin.decode_errors(res, new)
            try:
                return await self._write(req, res, old, new, sub, opts)
            except errors.ApiError as e:
                if e.reason != "Conflict" or want:
                    raise
        raise errors.conflict(res, name)

    async def _apply(self, req, res, ns, name, sub, opts):
        if not req.q("fieldManager"):
            cause = {"reason": "FieldValueRequired", "message": "Required value: is required for apply patch",
                     "field": "fieldManager"}
            raise errors.ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                                  {"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [cause]})
        try:
            doc = yaml.safe_load(req.body)
        except yaml.YAMLError as e:
            raise errors.bad_request(f"error decoding YAML: {e}")
        opts["operation"] = "Apply"
        opts["applied"] = doc
        try:
            old = await self.store.get(res, ns, name)
        except errors.ApiError as e:
            if e.code != 404 or sub:
                raise
            doc.setdefault("metadata", {})["name"] = name
            obj, warnings = objects.prepare_create(res, copy.deepcopy(doc), ns, opts)
            return Reply(201, await self.store.create(res, obj), _warn(warnings))
        atomic = objects._atomic(res)
        conflicts = fields.apply_conflicts(old, doc, old["metadata"].get("managedFields"), opts["manager"], atomic)
        if conflicts and req.q("force") not in ("true", "1"):
            msg, causes = fields.conflict_message(conflicts)
            raise errors.ApiError(409, "Conflict", msg, {"causes": causes})
        applied = {k: v for k, v in doc.items() if k in ("metadata", "status")} if sub == "status" else doc
        new = patchlib.merge_patch(old, _without_nulls(applied))
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return await self._write(req, res, old, new, sub, opts)

    async def delete(self, req, res, ns, name):
        opts = json.loads(req.body) if req.body.strip() else {}
        pre = (opts or {}).get("preconditions") or {}
        old = await self.store.get(res, ns, name)
        md = old["metadata"]
        what = f"{res.kind}.{res.group}" if res.group else res.kind
        det = {"name": name, "group": res.group, "kind": res.kind}
        if pre.get("uid") and pre["uid"] != md["uid"]:
            raise errors.ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": the UID in the '
                                  f'precondition ({pre["uid"]}) does not match the UID in record ({md["uid"]}). The object '
                                  "might have been deleted and then recreated", det)
        if pre.get("resourceVersion") and pre["resourceVersion"] != md["resourceVersion"]:
            raise errors.ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": the ResourceVersion '
                                  f'in the precondition ({pre["resourceVersion"]}) does not match the ResourceVersion in '
                                  f'record ({md["resourceVersion"]}). The object might have been modified', det)
        grace = _pod_grace(res, old, opts or {})
        if grace:
            return await self._delete_gracefully(res, old, grace)
        if md.get("finalizers"):
            if md.get("deletionTimestamp"):
                return Reply(200, old)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if "generation" in md:
                new["metadata"]["generation"] = md["generation"] + 1
            return Reply(200, await self.store.put(res, old, new))
        await self.store.remove(res, old)
        if res.crd is None and res.plural not in ("leases", "events", "storageclasses"):
            return Reply(200, old)
        return Reply(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                           "details": {"name": name, "group": res.group, "kind": res.plural, "uid": md["uid"]}})

    async def _delete_gracefully(self, res, old, grace):
        """A pod's graceful deletion: deletionTimestamp = now + grace, deletionGracePeriodSeconds =
        grace; the object stays until its kubelet deletes it with grace 0.  A later DELETE may only
        shorten the period; a longer or equal one answers the terminating pod unchanged."""
        md = old["metadata"]
        if md.get("deletionTimestamp") and md.get("deletionGracePeriodSeconds", 0) <= grace:
            return Reply(200, old)
        new = copy.deepcopy(old)
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=grace)
        new["metadata"]["deletionTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        new["metadata"]["deletionGracePeriodSeconds"] = grace
        return Reply(200, await self.store.put(res, old, new))

    async def delete_collection(self, req, res, ns):
        match = self._selectors(req, res)
        rev, objs, _, _ = await self.store.list(res, ns)
        for o in objs:
            if match(o):
                await self.delete(type(req)(req.scope, b"", req.query), res, o["metadata"].get("namespace"),
                                  o["metadata"]["name"])
        return Reply(200, render_list(res, [], str(rev)))
