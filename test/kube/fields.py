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
ATOMIC_ITEMS = ("ownerReferences",)  # OwnerReference is an atomic struct


def _walk(v, path, out, name=None, atomic=None):
    if isinstance(v, dict) and atomic is not None and path and atomic(path):
        out[path] = json.dumps(v, sort_keys=True)
    elif isinstance(v, dict):
        if not v and path and path[-1] in ("f:spec", "f:status"):
            return
        if path:
            out[path] = None
        for k, sub in v.items():
            _walk(sub, path + (f"f:{k}",), out, k, atomic)
    elif isinstance(v, list) and name in SET_LISTS:
        out[path] = None
        for item in v:
            out[path + ("v:" + json.dumps(item, separators=(",", ":")),)] = item
    elif isinstance(v, list) and name in LIST_KEYS and all(isinstance(i, dict) and LIST_KEYS[name] in i for i in v):
        out[path] = None
        key = LIST_KEYS[name]
        for item in v:
            k = "k:" + json.dumps({key: item[key]}, separators=(",", ":"))
            if name in ATOMIC_ITEMS:
                out[path + (k,)] = json.dumps(item, sort_keys=True)
            else:
                _walk(item, path + (k,), out, None, atomic)
    else:
        out[path] = json.dumps(v, sort_keys=True)


def leaves(obj, atomic=None):
    """{path: value-or-None} over the fields a manager can own."""
    out = {}
    for k, v in obj.items():
        if k in ("apiVersion", "kind"):
            continue
        if k == "metadata":
            for mk in META_OWNED:
                if mk in v:
                    _walk(v[mk], ("f:metadata", f"f:{mk}"), out, mk, atomic)
            continue
        _walk(v, (f"f:{k}",), out, k, atomic)
    return out


def to_fields_v1(paths, dot=None):
    """FieldsV1 of a path set; dot(path) says whether an owned node gets "." (default: always)."""
    tree = {}
    for p in sorted(paths):
        node = tree
        for part in p:
            node = node.setdefault(part, {})
    return _clean(tree, paths, (), dot)


def _clean(node, paths, prefix, dot):
    out = {}
    for k in sorted(node):
        if k == ".":
            continue
        p = prefix + (k,)
        child = _clean(node[k], paths, p, dot)
        if child and p in paths and (dot is None or k.startswith(("k:", "v:")) or dot(p)):
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


def update(old, new, managed, manager, subresource, api_version, now, operation="Update", dot=None,
           applied=None, atomic=None):
    before = leaves(old, atomic) if old else {}
    after = leaves(new, atomic)
    changed = {p for p, v in after.items() if p not in before or (v is not None and before[p] != v)}
    removed = set(before) - set(after)
    entries = []
    mine, at = None, None
    for e in managed or []:
        sub = e.get("subresource", "")
        paths = from_fields_v1(e.get("fieldsV1", {}))
        # an Apply entry is its manager's, whatever subresource it was applied to (05u)
        if e.get("manager") == manager and e.get("operation") == operation and (
                operation == "Apply" or sub == (subresource or "")):
            mine, at = (e, paths), len(entries)
            continue
        paths = paths - changed - removed
        if paths:
            entries.append(dict(e, fieldsV1=to_fields_v1(paths, dot)))
    if operation == "Apply":
        paths = {p for p, v in leaves(applied if applied is not None else new, atomic).items() if v is not None}
        dot = (lambda p: False)
    else:
        paths = ((mine[1] if mine else set()) | changed) - removed
    if paths:
        e = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
             "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths, dot)}
        if subresource:
            e["subresource"] = subresource
        if mine and not changed and mine[1] == paths:
            e["time"] = mine[0].get("time", now)
        entries.insert(len(entries) if at is None else at, e)
    # kube-apiserver keeps them sorted: Apply entries first, then by time, manager, subresource
    return sorted(entries, key=lambda e: (e.get("operation") != "Apply", e.get("time") or "", e.get("manager", ""),
                                          e.get("subresource", "")))


def _render(path):
    out = ""
    for part in path:
        if part.startswith("f:"):
            out += "." + part[2:]
        elif part.startswith("k:"):
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(part[2:]).items()) + "]"
        else:
            out += "[=" + part[2:] + "]"
    return out


def apply_conflicts(live, applied, managed, manager, atomic=None):
    """Fields of an apply that another manager owns with a different value:
    [(entry, ".spec.x"), ...] in kube-apiserver's order."""
    want = {p: v for p, v in leaves(applied, atomic).items() if v is not None}
    have = leaves(live, atomic)
    out = []
    for e in managed or []:
        if e.get("manager") == manager and e.get("operation") == "Apply":
            continue
        for p in sorted(from_fields_v1(e.get("fieldsV1", {})) & set(want)):
            if have.get(p) != want[p]:
                out.append((e, _render(p)))
    return out


def conflict_message(conflicts):
    """(message, causes) of a 409 for apply conflicts (transcript 05r)."""
    by = {}
    for e, path in conflicts:
        who = f'"{e.get("manager")}"'
        if e.get("operation") == "Update":
            who += f' using {e.get("apiVersion")}'
        by.setdefault(who, []).append(path)
    parts = []
    for who, paths in by.items():
        if len(paths) == 1:
            parts.append(f"conflict with {who}: {paths[0]}")
        else:
            parts.append(f"conflicts with {who}:\n" + "\n".join(f"- {p}" for p in paths))
    n = len(conflicts)
    msg = f"Apply failed with {n} conflict{'s' if n != 1 else ''}: " + "\n".join(parts)
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {who}", "field": p}
              for who, paths in by.items() for p in paths]
    return msg, causes
