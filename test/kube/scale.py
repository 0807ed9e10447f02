"""The scale subresource of Deployments, ReplicaSets and StatefulSets (autoscaling/v1 Scale), as
kube-apiserver serves it: GET answers the object's spec.replicas, status.replicas and selector;
PUT and PATCH (merge, JSON or strategic merge of the Scale) write spec.replicas of the object and
answer the new Scale.  This is what `kubectl scale` sends.  No controller runs the workloads, so
status.replicas changes only when a client writes the status."""
import json

import errors
import patch as patchlib


def scale_of(obj):
    md = obj["metadata"]
    sel = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in md},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(sel.items()))}}


async def handle(h, req, res, ns, name, verb):
    """One request on <res>/<name>/scale: a Reply, or an ApiError raised."""
    import handlers  # noqa: PLC0415 (handlers imports this module's caller)
    old = await h.store.get(res, ns, name)
    cur = scale_of(old)
    if verb == "get":
        return handlers.Reply(200, cur)
    try:
        body = json.loads(req.body)
    except ValueError as e:
        raise errors.bad_request(f"error decoding: {e}")
    ctype = (req.header("content-type") or "").split(";")[0].strip()
    if verb == "patch":
        try:
            if ctype == "application/json-patch+json":
                body = patchlib.json_patch(cur, body)
            elif isinstance(body, dict):
                body = patchlib.merge_patch(cur, body)
            else:
                raise errors.bad_request("json: cannot unmarshal into map")
        except patchlib.PatchError:
            raise errors.generic_invalid()
    want = (body.get("metadata") or {}).get("resourceVersion")
    if want and want != old["metadata"]["resourceVersion"]:
        raise errors.conflict(res, name)
    replicas = (body.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.bad_request("spec.replicas must be a non-negative integer")
    new = json.loads(json.dumps(old))
    new.setdefault("spec", {})["replicas"] = replicas
    reply = await h._write(req, res, old, new, "", handlers._opts(req))
    return handlers.Reply(200, scale_of(reply.body))
