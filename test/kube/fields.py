"""metadata.managedFields for Update operations (FieldsV1), as kube-apiserver records them.

A manager owns the field paths it changed; paths it removed, or that another manager changed,
leave its set.  Paths are tuples of FieldsV1 keys ("f:spec", "k:{\"type\":\"Ready\"}", "v:\"x\"").
update(old_obj, new_obj, managed, manager, subresource, api_version, now) returns the new list.
"""
import json

META_OWNED = ("labels", "annotations", "finalizers", "ownerReferences")
LIST_KEYS = {"conditions": "type", "addresses": "type", "publishedNodes": "nodeID", "ownerReferences": "uid",
             "drivers": "name"}
SET_LISTS = ("finalizers",)


def _walk(v, path, out, name=None):
    if isinstance(v, dict):
        if path:
            out[path] = None
        for k, sub in v.items():
            _walk(sub, path + (f"f:{k}",), out, k)
    elif isinstance(v, list) and name in SET_LISTS:
        out[path] = None
        for item in v:
            out[path + ("v:" + json.dumps(item, separators=(",", ":")),)] = item
    elif isinstance(v, list) and name in LIST_KEYS and all(isinstance(i, dict) and LIST_KEYS[name] in i for i in v):
        out[path] = None
        key = LIST_KEYS[name]
        for item in v:
            k = "k:" + json.dumps({key: item[key]}, separators=(",", ":"))
            _walk(item, path + (k,), out)
    else:
        out[path] = json.dumps(v, sort_keys=True)


def leaves(obj):
    """{path: value-or-None} over the fields a manager can own."""
    out = {}
    for k, v in obj.items():
        if k in ("apiVersion", "kind"):
            continue
        if k == "metadata":
            for mk in META_OWNED:
                if mk in v:
                    _walk(v[mk], ("f:metadata", f"f:{mk}"), out, mk)
            continue
        _walk(v, (f"f:{k}",), out, k)
    return out


def to_fields_v1(paths):
    tree = {}
    for p in sorted(paths):
        node = tree
        for part in p:
            node = node.setdefault(part, {})
    return _clean(tree, paths, ())


def _clean(node, paths, prefix):
    out = {}
    for k in sorted(node):
        if k == ".":
            continue
        p = prefix + (k,)
        child = _clean(node[k], paths, p)
        if child and p in paths:
            child = dict([(".", {})] + sorted(child.items()))
        out[k] = child
    return out


def from_fields_v1(fv, prefix=()):
    out = set()
    for k, v in fv.items():
        if k == ".":
            out.add(prefix)
            continue
        p = prefix + (k,)
        if not v:
            out.add(p)
        else:
            out |= from_fields_v1(v, p)
    return out


def update(old, new, managed, manager, subresource, api_version, now, operation="Update"):
    before = leaves(old) if old else {}
    after = leaves(new)
    changed = {p for p, v in after.items() if p not in before or (v is not None and before[p] != v)}
    removed = set(before) - set(after)
    entries = []
    mine = None
    for e in managed or []:
        sub = e.get("subresource", "")
        paths = from_fields_v1(e.get("fieldsV1", {}))
        if e.get("manager") == manager and e.get("operation") == operation and sub == (subresource or ""):
            mine = (e, paths)
            continue
        paths = paths - changed - removed
        if paths:
            entries.append(dict(e, fieldsV1=to_fields_v1(paths)))
    paths = ((mine[1] if mine else set()) | changed) - removed
    paths &= set(after)
    if paths:
        e = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
             "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths)}
        if subresource:
            e["subresource"] = subresource
        if mine and not changed and mine[1] == paths:
            e["time"] = mine[0].get("time", now)
        entries.append(e)
    return entries
