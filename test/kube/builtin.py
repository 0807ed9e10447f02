"""Built-in kinds: schemas from Kubernetes 1.32's OpenAPI v3 documents and the rules of their Go
validation that the driver meets (immutable StorageClass parameters, immutable VolumeAttachment
spec, Event namespaces and required fields, MicroTime format).

builtin-schemas.json holds, for each kind we serve, the closure of its OpenAPI v3 component
schemas as published in ../shared/kube/openapi-v3/ (descriptions dropped; extract-schemas.py).
prune(res, obj) drops unknown fields and returns their paths; validate(res, obj, old) returns a
list of schema.FieldError; on_create/on_update apply the server-side defaults the transcripts show.
"""
import json
import os
import re

import errors
import events
import schema

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "builtin-schemas.json")) as _f:
    _DOC = json.load(_f)
SCHEMAS, ROOTS = _DOC["schemas"], _DOC["roots"]
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
META_KEYS = {"name", "generateName", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
             "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
             "finalizers", "managedFields", "selfLink"}


def _resolve(s):
    while isinstance(s, dict):
        if "$ref" in s:
            s = SCHEMAS.get(s["$ref"].split("/")[-1], {})
        elif "allOf" in s and len(s["allOf"]) == 1:
            s = s["allOf"][0]
        else:
            return s
    return s or {}


def root_schema(res):
    name = ROOTS.get(f"{res.group}/{res.kind}")
    return SCHEMAS.get(name) if name else None


class Kind:
    """A group and kind standing in for a Resource where only the schema matters (TokenRequest)."""

    def __init__(self, group, kind):
        self.group, self.kind = group, kind


def _prune(s, v, path, out):
    s = _resolve(s)
    if isinstance(v, dict):
        props = s.get("properties")
        addl = s.get("additionalProperties")
        if props is None:
            if isinstance(addl, dict):
                for k in v:
                    _prune(addl, v[k], f"{path}.{k}" if path else k, out)
            return
        for k in list(v):
            p = f"{path}.{k}" if path else k
            if k in props:
                if path == "" and k == "metadata":
                    for mk in list(v[k] or {}):
                        if mk not in META_KEYS:
                            out.append(f"metadata.{mk}")
                            del v[k][mk]
                    continue
                _prune(props[k], v[k], p, out)
            else:
                out.append(p)
                del v[k]
    elif isinstance(v, list) and "items" in s:
        for i, item in enumerate(v):
            _prune(s["items"], item, f"{path}[{i}]", out)


def prune(res, obj):
    s = root_schema(res)
    out = []
    if s is not None:
        _prune(s, obj, "", out)
        for k in ("apiVersion", "kind"):
            if k in out:
                out.remove(k)
    return out


def _types(s, v, path, errs):
    s = _resolve(s)
    t = s.get("type")
    if v is None:
        return
    if t == "string" and not isinstance(v, str) and s.get("format") != "int-or-string":
        errs.append(path)
    elif t in ("integer", "number") and (isinstance(v, bool) or not isinstance(v, (int, float))):
        errs.append(path)
    elif t == "boolean" and not isinstance(v, bool):
        errs.append(path)
    elif t == "object" and isinstance(v, dict):
        props = s.get("properties", {})
        addl = s.get("additionalProperties")
        for k, sub in v.items():
            ss = props.get(k) or (addl if isinstance(addl, dict) else None)
            if ss is not None:
                _types(ss, sub, f"{path}.{k}" if path else k, errs)
    elif t == "array":
        if not isinstance(v, list):
            errs.append(path)
        else:
            for i, item in enumerate(v):
                _types(s.get("items", {}), item, f"{path}[{i}]", errs)


def decode_errors(res, obj):
    """JSON that does not decode into the Go type: 400 as kube-apiserver reports it."""
    decode_defaults(res, obj)
    s = root_schema(res)
    if s is None:
        return
    bad = []
    _types(s, obj, "", bad)
    if bad:
        raise errors.bad_request(
            f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: json: cannot unmarshal '
            f'into Go struct field {res.kind}.{bad[0]}')
    for path in _microtime_paths(res):
        parent, v = None, obj
        for part in path.split("."):
            parent, v = v, (v.get(part) if isinstance(v, dict) else None)
        if isinstance(v, str):
            err = go_parse_micro(v)
            if err:
                raise errors.bad_request(
                    f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: parsing time "{v}" '
                    f'as "2006-01-02T15:04:05.000000Z07:00": {err}')
            parent[path.split(".")[-1]] = _utc(v)


LAYOUT = [("2006", r"\d{4}"), ("-", "-"), ("01", r"\d\d"), ("-", "-"), ("02", r"\d\d"), ("T", "T"), ("15", r"\d\d"),
          (":", ":"), ("04", r"\d\d"), (":", ":"), ("05", r"\d\d"), (".000000", r"\.\d{6}"),
          ("Z07:00", r"Z|[+-]\d\d:\d\d")]


def go_parse_micro(v):
    """The error Go's time.Parse gives for metav1.MicroTime's layout, or None."""
    pos = 0
    for elem, rx in LAYOUT:
        m = re.compile(rx).match(v, pos)
        if not m:
            return f'cannot parse "{v[pos:]}" as "{elem}"'
        pos = m.end()
    if pos < len(v):
        return f'extra text: "{v[pos:]}"'
    return None


def _utc(v):
    """MicroTime with an offset is stored in UTC with Z."""
    import datetime
    if v.endswith("Z"):
        return v
    t = datetime.datetime.strptime(v[:26] + v[26:].replace(":", ""), "%Y-%m-%dT%H:%M:%S.%f%z")
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _microtime_paths(res):
    if res.kind == "Lease":
        return ["spec.acquireTime", "spec.renewTime"]
    if res.kind == "Event":
        return ["eventTime"]
    return []


def decode_defaults(res, obj):
    """Defaults applied when a request body is decoded (they show in managedFields)."""
    if res.plural == "customresourcedefinitions":
        obj.setdefault("spec", {}).setdefault("conversion", {"strategy": "None"})


NODE_INFO = ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
             "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture")


def on_create(res, obj):
    """Server-side defaults of a create, as the transcripts show them (10a, 10j, 10k, 09b, 09d)."""
    if res.plural == "persistentvolumes":
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": obj["metadata"]["creationTimestamp"]}
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    elif res.plural == "persistentvolumeclaims":
        obj["status"] = {"phase": "Pending"}
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        fin = obj["metadata"].setdefault("finalizers", [])
        if "kubernetes.io/pvc-protection" not in fin:
            fin.append("kubernetes.io/pvc-protection")
    elif res.plural == "nodes":
        spec = obj.setdefault("spec", {})
        spec.setdefault("taints", [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
        st = obj.setdefault("status", {})
        st.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 0}})
        st.setdefault("nodeInfo", {k: "" for k in NODE_INFO})
    elif res.kind == "Event" and res.group == "":
        for k, v in events.CORE_DEFAULTS:
            obj.setdefault(k, v)
    elif res.plural == "volumeattachments":
        obj["status"] = {"attached": False}
    elif res.plural == "storageclasses":
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif res.plural == "customresourcedefinitions":
        obj["status"] = {"conditions": None, "acceptedNames": {"plural": "", "kind": ""},
                         "storedVersions": [v["name"] for v in obj.get("spec", {}).get("versions", []) if v.get("storage")]}
    elif res.plural == "namespaces":
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}


def on_update(res, old, new):
    pass


def validate(res, obj, old):
    errs = []
    md = obj.get("metadata", {})
    if res.plural == "storageclasses" and old is not None:
        for k in ("parameters", "reclaimPolicy", "provisioner", "volumeBindingMode"):
            if obj.get(k) != old.get(k):
                errs.append(schema.FieldError("FieldValueForbidden", k, "Forbidden: updates to " + k + " are forbidden."))
    if res.plural == "volumeattachments" and old is not None and obj.get("spec") != old.get("spec"):
        errs.append(schema.FieldError("FieldValueInvalid", "spec",
                                      f"Invalid value: {_go_va_spec(obj.get('spec') or {})}: field is immutable"))
    if res.kind == "Event":
        errs += validate_event(events.to_core(obj) if res.group else obj, res.group == "events.k8s.io")
    return errs


QNAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
QNAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def _qualified_name(v, field):
    """k8s.io/apimachinery IsQualifiedName, as field errors."""
    prefix, _, name = v.rpartition("/")
    errs = []
    if "/" in v and not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", prefix):
        errs.append(schema.invalid(field, v, "prefix part must be a lowercase RFC 1123 subdomain"))
    if not name:
        errs.append(schema.invalid(field, v, "name part must be non-empty"))
    elif len(name) > 63:
        errs.append(schema.invalid(field, v, "name part must be no more than 63 characters"))
    if not QNAME.match(name):
        errs.append(schema.invalid(field, v, QNAME_MSG))
    return errs


def validate_event(ev, strict):
    """kube-apiserver's ValidateEventCreate on the core form of an Event; strict for events.k8s.io/v1."""
    errs = []
    ns = ev.get("metadata", {}).get("namespace", "")
    inv = ev.get("involvedObject") or {}
    ctl = "reportingController" if strict else "reportingComponent"
    if not ev.get("eventTime"):
        if not inv.get("namespace") and ns not in ("", "default"):
            errs.append(schema.invalid("involvedObject.namespace", inv.get("namespace", ""), "does not match event.namespace"))
        elif inv.get("namespace") and ns != inv["namespace"]:
            errs.append(schema.invalid("involvedObject.namespace", inv["namespace"], "does not match event.namespace"))
    else:
        if not inv.get("namespace") and ns not in ("default", "kube-system"):
            errs.append(schema.invalid("involvedObject.namespace", "", "does not match event.namespace"))
        rc = ev.get("reportingComponent") or ""
        if not rc:
            errs.append(schema.required(ctl))
        errs += _qualified_name(rc, ctl)
        for f, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
            if not ev.get(f):
                errs.append(schema.required(f))
            if len(ev.get(f) or "") > limit:
                errs.append(schema.invalid(f, "", f"can have at most {limit} characters"))
        if len(ev.get("message") or "") > 1024:
            errs.append(schema.invalid("message", "", "can have at most 1024 characters"))
    if strict:
        if not ev.get("eventTime"):
            errs.append(schema.required("eventTime"))
        if ev.get("type") not in ("Normal", "Warning"):
            errs.append(schema.invalid("type", "", f"has invalid value: {ev.get('type') or ''}"))
        for f in ("firstTimestamp", "lastTimestamp"):
            if ev.get(f):
                errs.append(schema.invalid(f, "", "needs to be unset"))
        if ev.get("count"):
            errs.append(schema.invalid("count", "", "needs to be unset"))
        src = ev.get("source") or {}
        if src.get("component") or src.get("host"):
            errs.append(schema.invalid("source", "", "needs to be unset"))
    return errs


def _schema_at(root, path):
    """(schema of the field at a FieldsV1 path, whether it is required in its parent); None if unknown."""
    s, required = root, False
    for part in path:
        if s is None:
            return None, False
        s = _resolve(s)
        if part.startswith(("k:", "v:")):
            s, required = s.get("items"), False
            continue
        props = s.get("properties")
        if props is None:
            return None, False
        required = part[2:] in s.get("required", [])
        s = props.get(part[2:])
    return (_resolve(s) if s is not None else None), required


def dot_rule(res):
    """For FieldsV1 of a built-in kind: an owned object node gets "." when it is a map or an optional
    (pointer) struct; value structs carry `default: {}` in the OpenAPI v3 schema and get none, and
    required fields are always present."""
    root = root_schema(res)

    def dot(path):
        if root is None:
            return len(path) > 1
        if path[0] == "f:metadata" and path[-1] in ("f:labels", "f:annotations"):
            return True
        parent, _ = _schema_at(root, path[:-1])
        raw = ((parent or {}).get("properties") or {}).get(path[-1][2:])
        s, required = _schema_at(root, path)
        if s is None:
            return True
        if s.get("type") == "array" and path[0] != "f:metadata":
            return False  # list nodes outside metadata carry no "." (CSINode drivers, CRD conditions)
        return "default" not in (raw or {}) and not required
    return dot


def atomic_rule(res):
    """Whether the object at a FieldsV1 path is an atomic struct (x-kubernetes-map-type: atomic)."""
    root = root_schema(res)

    def atomic(path):
        if root is None or path[-1].startswith(("k:", "v:")):
            return False
        parent, _ = _schema_at(root, path[:-1])
        raw = ((parent or {}).get("properties") or {}).get(path[-1][2:]) or {}
        if "x-kubernetes-map-type" in raw:  # a field may override its type's map type (PV claimRef)
            return raw["x-kubernetes-map-type"] == "atomic"
        s, _ = _schema_at(root, path)
        return bool(s) and s.get("x-kubernetes-map-type") == "atomic"
    return atomic


def _go_va_spec(spec):
    """A storage.VolumeAttachmentSpec as Go's %#v prints it in kube-apiserver's message (10o);
    the pointer is a made-up address, as the real one is meaningless to a client."""
    src = spec.get("source") or {}
    pv = "(*string)(0xc000a1b2c0)" if "persistentVolumeName" in src else "(*string)(nil)"
    inline = "(*core.PersistentVolumeSpec)(0xc000a1b2d0)" if "inlineVolumeSpec" in src else "(*core.PersistentVolumeSpec)(nil)"
    return (f'storage.VolumeAttachmentSpec{{Attacher:{json.dumps(spec.get("attacher", ""))}, '
            f"Source:storage.VolumeAttachmentSource{{PersistentVolumeName:{pv}, InlineVolumeSpec:{inline}}}, "
            f'NodeName:{json.dumps(spec.get("nodeName", ""))}}}')
