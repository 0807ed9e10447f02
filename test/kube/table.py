"""meta.k8s.io/v1 Table responses (kubectl get) and PartialObjectMetadata conversions.

Columns of custom resources are their CRD additionalPrinterColumns evaluated with a JSONPath
subset (.a.b, [n], [*], [?(@.k=="v")]); date columns are rendered as an age ("18s"), as the
server does (transcript 04a).  Built-in kinds get Name plus their most useful columns.
"""
import datetime
import re

NAME_DESC = ("Name must be unique within a namespace. Is required when creating resources, although some "
             "resources may allow a client to request the generation of an appropriate name automatically. "
             "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
             "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
STEP = re.compile(r"\.([A-Za-z0-9_\-]+)|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*[\"']([^\"']*)[\"']\)\]|\[(\*|-?\d+)\]")


def jsonpath(obj, path):
    """All matches of a printer-column JSONPath."""
    cur = [obj]
    pos = 0
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    while pos < len(path):
        m = STEP.match(path, pos)
        if not m:
            return []
        pos = m.end()
        nxt = []
        for v in cur:
            if m.group(1) is not None:
                if isinstance(v, dict) and m.group(1) in v:
                    nxt.append(v[m.group(1)])
            elif m.group(2) is not None:
                if isinstance(v, list):
                    for item in v:
                        x = item
                        for part in m.group(2).split("."):
                            x = x.get(part) if isinstance(x, dict) else None
                        if x is not None and str(x) == m.group(3):
                            nxt.append(item)
            elif m.group(4) == "*":
                if isinstance(v, list):
                    nxt += v
                elif isinstance(v, dict):
                    nxt += list(v.values())
            elif isinstance(v, list):
                i = int(m.group(4))
                if -len(v) <= i < len(v):
                    nxt.append(v[i])
        cur = nxt
    return cur


def human_duration(seconds):
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 24 * 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    return f"{d // 365}y{d % 365}d" if d % 365 else f"{d // 365}y"


def age(ts):
    if not ts:
        return "<unknown>"
    t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return human_duration((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds())


def _cell(col, obj):
    if "cell" in col:
        return col["cell"](obj)
    vals = jsonpath(obj, col["jsonPath"])
    if not vals:
        return None
    v = vals[0]
    if col.get("type") == "date":
        return age(v) if isinstance(v, str) else None
    if col.get("type") == "integer" and isinstance(v, int):
        return v
    if isinstance(v, (dict, list)):
        import json
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, bool):
        return v
    return v if col.get("type") in ("integer", "number", "boolean") else str(v)


MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _get(o, path):
    vals = jsonpath(o, path)
    return vals[0] if vals else None


def _at(path, default=""):
    """A cell: the first match of a JSONPath, or default."""
    return lambda o: _get(o, path) or default


def _modes(o):
    return ",".join(MODES.get(m, m) for m in (o.get("spec") or {}).get("accessModes") or [])


def _claim(o):
    c = (o.get("spec") or {}).get("claimRef")
    return f"{c.get('namespace', '')}/{c.get('name', '')}" if c else ""


# kube-apiserver's printers for the built-in kinds the operator page lists (name, type, cell function)
BUILTIN_COLUMNS = {
    "persistentvolumes": [
        ("Capacity", "string", _at(".spec.capacity.storage")),
        ("Access Modes", "string", _modes),
        ("Reclaim Policy", "string", _at(".spec.persistentVolumeReclaimPolicy")),
        ("Status", "string", _at(".status.phase")),
        ("Claim", "string", _claim),
        ("StorageClass", "string", _at(".spec.storageClassName")),
        ("VolumeAttributesClass", "string", _at(".spec.volumeAttributesClassName", "<unset>")),
        ("Reason", "string", _at(".status.reason"))],
    "persistentvolumeclaims": [
        ("Status", "string", _at(".status.phase")),
        ("Volume", "string", _at(".spec.volumeName")),
        ("Capacity", "string", _at(".status.capacity.storage")),
        ("Access Modes", "string", lambda o: ",".join(MODES.get(m, m) for m in _get(o, ".status.accessModes") or [])),
        ("StorageClass", "string", _at(".spec.storageClassName")),
        ("VolumeAttributesClass", "string", _at(".spec.volumeAttributesClassName", "<unset>"))],
    "volumeattachments": [
        ("Attacher", "string", _at(".spec.attacher")),
        ("PV", "string", _at(".spec.source.persistentVolumeName")),
        ("Node", "string", _at(".spec.nodeName")),
        ("Attached", "boolean", lambda o: bool(_get(o, ".status.attached")))],
    "storageclasses": [
        ("Provisioner", "string", lambda o: o.get("provisioner", "")),
        ("ReclaimPolicy", "string", lambda o: o.get("reclaimPolicy", "")),
        ("VolumeBindingMode", "string", lambda o: o.get("volumeBindingMode", "")),
        ("AllowVolumeExpansion", "string", lambda o: "true" if o.get("allowVolumeExpansion") else "false")],
    "namespaces": [("Status", "string", _at(".status.phase"))],
    "leases": [("Holder", "string", _at(".spec.holderIdentity"))],
    "nodes": [("Status", "string", lambda o: _node_status(o)), ("Roles", "string", lambda o: _node_roles(o))],
}


def _node_status(o):
    ready = [c.get("status") for c in (o.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    s = {"True": "Ready", "False": "NotReady"}.get(ready[0] if ready else "", "Unknown")
    return s + (",SchedulingDisabled" if (o.get("spec") or {}).get("unschedulable") else "")


def _node_roles(o):
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix):] for k in (o["metadata"].get("labels") or {}) if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def columns(res):
    cols = [{"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0}]
    if res.crd is not None:
        for c in res.columns:
            cols.append({"name": c["name"], "type": c["type"], "format": c.get("format", ""),
                         "description": c.get("description") or
                         f"Custom resource definition column (in JSONPath format): {c['jsonPath']}",
                         "priority": c.get("priority", 0)})
        return cols, list(res.columns)
    spec = [{"name": n, "type": t, "cell": f} for n, t, f in BUILTIN_COLUMNS.get(res.plural, [])]
    spec.append({"name": "Age", "type": "date", "cell": lambda o: age(o["metadata"].get("creationTimestamp"))})
    if res.plural == "nodes":
        spec.append({"name": "Version", "type": "string", "cell": _at(".status.nodeInfo.kubeletVersion")})
    for c in spec:
        cols.append({"name": c["name"], "type": c["type"], "format": "", "description": "", "priority": 0})
    return cols, spec


def partial(obj):
    md = dict(obj.get("metadata", {}))
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": md}


def table(res, objs, rv, include="Metadata", list_meta=None):
    cols, spec = columns(res)
    rows = []
    for o in objs:
        cells = [o["metadata"].get("name")] + [_cell(c, o) for c in spec]
        row = {"cells": cells}
        row["object"] = None if include == "None" else (o if include == "Object" else partial(o))
        rows.append(row)
    md = dict(list_meta or {})
    md["resourceVersion"] = rv
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": cols, "rows": rows}
