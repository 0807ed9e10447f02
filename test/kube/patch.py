"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902, including `test`).

json_patch raises PatchError when an operation fails (a failed test, a missing path), which the
server reports as 422 with the generic message (transcripts 05j, 05l).
"""
import copy


class PatchError(Exception):
    pass


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _parse(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid path {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, parts):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise PatchError("path not found")
    return cur


def _get(doc, parts):
    if not parts:
        return doc
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError("path not found")


def _remove(doc, parts):
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchError("remove: path not found")


def _add(doc, parts, value):
    if not parts:
        return value
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError("add: index out of range")
    else:
        raise PatchError("add: parent is not a container")
    return doc


def _equal(a, b):
    if type(a) is not type(b) and not ({type(a), type(b)} <= {int, float}):
        return False
    return a == b


def json_patch(doc, ops):
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise PatchError("patch is not a list")
    for op in ops:
        if not isinstance(op, dict) or "path" not in op:
            raise PatchError("bad operation")
        kind, parts = op.get("op"), _parse(op["path"])
        if kind == "test":
            if not _equal(_get(doc, parts), op.get("value")):
                raise PatchError("testing value failed")
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "replace":
            _get(doc, parts)
            if parts:
                _remove(doc, parts)
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            src = _parse(op.get("from", ""))
            val = copy.deepcopy(_get(doc, src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, parts, val)
        else:
            raise PatchError(f"unexpected op {kind!r}")
    return doc


def strategic_as_merge(patch):
    """A strategic merge patch applied as a JSON merge patch: its directives are interpreted where
    that is possible ($patch: delete/replace on a map) and dropped otherwise ($setElementOrder,
    $retainKeys, $deleteFromPrimitiveList), so they never land in an object.  Lists are replaced,
    not merged by their patchMergeKey: the approximation this test server makes."""
    if isinstance(patch, list):
        return [strategic_as_merge(x) for x in patch if not (isinstance(x, dict) and x.get("$patch") == "delete")]
    if not isinstance(patch, dict):
        return patch
    if patch.get("$patch") == "delete":
        return None
    return {k: strategic_as_merge(v) for k, v in patch.items() if not k.startswith("$")}
