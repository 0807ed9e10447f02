"""/openapi/v3: the index and one document per group-version, enough for kubectl's client-side
checks (it looks for the `fieldValidation` parameter on the operations of a kind, and for the
kind's schema).  Custom resources get their CRD schema; built-in kinds their OpenAPI v3 schema.
"""
import hashlib
import json

import builtin

OBJECT_META_DESCRIPTION = ("Standard object's metadata. More info: "
                           "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
PARAMS = [{"in": "query", "name": n, "schema": {"type": "string", "uniqueItems": True}}
          for n in ("dryRun", "fieldManager", "fieldValidation")]


def _gv_path(group, version):
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _schema_name(res):
    if res.crd is not None:
        rev = ".".join(reversed(res.group.split(".")))
        return f"{rev}.{res.version}.{res.kind}"
    return builtin.ROOTS.get(f"{res.group}/{res.kind}")


def document(registry, group, version):
    paths, comps = {}, {}
    for r in registry.resources:
        if r.group != group or r.version != version:
            continue
        name = _schema_name(r)
        gvk = [{"group": r.group, "version": r.version, "kind": r.kind}]
        op = {"parameters": PARAMS, "x-kubernetes-group-version-kind": gvk[0],
              "responses": {"200": {"description": "OK"}}}
        base = "/" + _gv_path(group, version) + ("/namespaces/{namespace}" if r.namespaced else "") + "/" + r.plural
        paths[base] = {"post": dict(op, **{"x-kubernetes-action": "post"})}
        paths[base + "/{name}"] = {"put": dict(op, **{"x-kubernetes-action": "put"}),
                                   "patch": dict(op, **{"x-kubernetes-action": "patch"})}
        if name is None:
            continue
        if r.crd is not None:
            s = json.loads(json.dumps(r.schema))
            # as kube-apiserver's CRD OpenAPI builder: a reference to ObjectMeta with the
            # description of PartialObjectMetadata's metadata field
            s.setdefault("properties", {})["metadata"] = {
                "description": OBJECT_META_DESCRIPTION,
                "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]}
            s["x-kubernetes-group-version-kind"] = gvk
            comps[name] = s
        else:
            todo = [name]
            while todo:
                n = todo.pop()
                if n in comps or n not in builtin.SCHEMAS:
                    continue
                comps[n] = builtin.SCHEMAS[n]
                todo += _refs(comps[n])
            if name in comps:
                comps[name] = dict(comps[name], **{"x-kubernetes-group-version-kind": gvk})
    if any(r.crd is not None for r in registry.resources if r.group == group):
        comps["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] = builtin.SCHEMAS.get(
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", {"type": "object"})
        for n in _refs(comps["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]):
            comps.setdefault(n, builtin.SCHEMAS.get(n, {"type": "object"}))
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "unversioned"}, "paths": paths,
            "components": {"schemas": comps}}


def _refs(s, out=None):
    out = [] if out is None else out
    if isinstance(s, dict):
        for k, v in s.items():
            if k == "$ref" and isinstance(v, str):
                out.append(v.split("/")[-1])
            else:
                _refs(v, out)
    elif isinstance(s, list):
        for v in s:
            _refs(v, out)
    return out


def index(registry):
    paths = {}
    for g, v in registry.groups():
        doc = json.dumps(document(registry, g, v), sort_keys=True).encode()
        h = hashlib.sha512(doc).hexdigest().upper()[:128]
        p = _gv_path(g, v)
        paths[p] = {"serverRelativeURL": f"/openapi/v3/{p}?hash={h}"}
    return {"paths": paths}
