"""Label and field selectors with kube-apiserver's syntax and error messages.

parse_labels(text) returns a predicate over a labels dict or raises errors.ApiError 400;
parse_fields(text, supported) returns a predicate over an object, 400 for unsupported fields.
"""
import re

import errors

TOK = re.compile(r"\s*(!=|==|=|!|\(|\)|,|[^\s!=(),]+)")


def _lex(text):
    out, pos = [], 0
    while pos < len(text):
        m = TOK.match(text, pos)
        if not m:
            break
        if m.group(1):
            out.append(m.group(1))
        pos = m.end()
        if not text[pos:].strip():
            break
    return out


def _fail(msg):
    raise errors.bad_request(f"unable to parse requirement: {msg}")


def parse_labels(text):
    toks = _lex(text or "")
    reqs, i = [], 0

    def values():
        nonlocal i
        if i >= len(toks) or toks[i] != "(":
            _fail(f"found '{toks[i] if i < len(toks) else ''}' expected: '('")
        i += 1
        vals = set()
        while i < len(toks) and toks[i] != ")":
            if toks[i] != ",":
                vals.add(toks[i])
            i += 1
        if i >= len(toks):
            _fail("found '', expected: ',' or ')'")
        i += 1
        return vals

    while i < len(toks):
        neg = toks[i] == "!"
        if neg:
            i += 1
        if i >= len(toks):
            _fail("found '', expected: identifier")
        key = toks[i]
        i += 1
        if neg:
            reqs.append(lambda l, k=key: k not in l)
        elif i >= len(toks) or toks[i] == ",":
            reqs.append(lambda l, k=key: k in l)
        else:
            op = toks[i]
            i += 1
            if op in ("=", "=="):
                v = toks[i] if i < len(toks) and toks[i] != "," else ""
                i += 1 if v else 0
                reqs.append(lambda l, k=key, v=v: l.get(k) == v)
            elif op == "!=":
                v = toks[i] if i < len(toks) and toks[i] != "," else ""
                i += 1 if v else 0
                reqs.append(lambda l, k=key, v=v: l.get(k) != v)
            elif op == "in":
                vs = values()
                reqs.append(lambda l, k=key, vs=vs: l.get(k) in vs)
            elif op == "notin":
                vs = values()
                reqs.append(lambda l, k=key, vs=vs: l.get(k) not in vs)
            else:
                _fail(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        if i < len(toks):
            if toks[i] != ",":
                _fail(f"found '{toks[i]}', expected: ',' or 'end of string'")
            i += 1
    return lambda labels: all(r(labels or {}) for r in reqs)


def field_value(obj, path):
    v = obj
    for part in path.split("."):
        if not isinstance(v, dict):
            return ""
        v = v.get(part)
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def parse_fields(text, supported):
    reqs = []
    for term in [t for t in (text or "").split(",") if t]:
        m = re.match(r"^([^=!]+)(==|=|!=)(.*)$", term)
        if not m:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        key, op, val = m.groups()
        if key not in supported:
            raise errors.bad_request(f"field label not supported: {key}")
        if op == "!=":
            reqs.append(lambda o, k=key, v=val: field_value(o, k) != v)
        else:
            reqs.append(lambda o, k=key, v=val: field_value(o, k) == v)
    return lambda obj: all(r(obj) for r in reqs)


FIELDS = {
    "events": ["involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
               "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
               "reason", "reportingComponent", "source", "type"],
    "persistentvolumeclaims": ["status.phase"],
    "persistentvolumes": ["status.phase"],
    "nodes": ["spec.unschedulable"],
    "pods": ["spec.nodeName", "status.phase"],
    "secrets": ["type"],
}


def supported_fields(res):
    base = ["metadata.name"] + (["metadata.namespace"] if res.namespaced else [])
    if res.crd is None:
        base += FIELDS.get(res.plural, [])
    return base
