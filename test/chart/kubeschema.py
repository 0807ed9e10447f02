"""Strict validation of Kubernetes objects against Kubernetes' own OpenAPI v3 documents.

Used by test_chart.py on every object the chart renders.  The documents are the ones published by
kube-apiserver (../shared/kube/openapi-v3/, one per group-version); each object is checked against
the component schema whose x-kubernetes-group-version-kind names its apiVersion and kind.

Errors (a list of "path: message" strings, empty when valid):
- a field the schema does not define (unknown fields are errors, as with fieldValidation=Strict);
- a missing required field, a wrong JSON type, a value outside an enum;
- a Quantity that does not parse, an int-or-string that is neither;
- a few rules of kube-apiserver's Go validation that the schemas cannot express and a chart can
  break (go_rules below): volume mounts naming a volume of the pod, probe ports naming a port of
  the container, port names (IANA service names), hostPort equal to containerPort with host
  networking, a workload selector matching its pod template, label syntax.
Custom resources are checked against their CRD's openAPIV3Schema (crd_schemas).
"""
import json
import os
import re

QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
IANA_SVC = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class Schemas:
    """Component schemas and the kind → schema map, from either the directory of OpenAPI v3
    documents (Schemas.from_documents) or test/kube/builtin-schemas.json, their extract for the
    kinds the test API server serves with only descriptions and patch hints dropped
    (Schemas.from_extract)."""

    def __init__(self, components):
        self.components, self.roots, self.crds = components, {}, {}
        for name, s in components.items():
            for gvk in s.get("x-kubernetes-group-version-kind", []):
                gv = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                self.roots[(gv, gvk["kind"])] = name

    @classmethod
    def from_documents(cls, directory):
        comps = {}
        names = sorted(f for f in os.listdir(directory) if f.endswith("_openapi.json"))
        if not names:
            raise FileNotFoundError(f"no OpenAPI v3 documents in {directory}")
        for f in names:
            with open(os.path.join(directory, f)) as fh:
                comps.update(json.load(fh).get("components", {}).get("schemas", {}))
        return cls(comps)

    @classmethod
    def from_extract(cls, path):
        with open(path) as fh:
            return cls(json.load(fh)["schemas"])

    def add_crd(self, crd):
        spec = crd["spec"]
        for v in spec["versions"]:
            self.crds[(f"{spec['group']}/{v['name']}", spec["names"]["kind"])] = v["schema"]["openAPIV3Schema"]

    def validate(self, obj):
        key = (obj.get("apiVersion"), obj.get("kind"))
        errs = []
        if key in self.crds:
            self._check(self.crds[key], obj, "", errs, crd=True)
        elif key in self.roots:
            self._check({"$ref": "#/components/schemas/" + self.roots[key]}, obj, "", errs)
        else:
            return [f"{key[0]} {key[1]}: no schema for this kind"]
        return errs + go_rules(obj)

    def _resolve(self, s):
        while True:
            if "$ref" in s:
                s = dict(self.components[s["$ref"].split("/")[-1]], **{k: v for k, v in s.items() if k != "$ref"})
            elif "allOf" in s and len(s["allOf"]) == 1:
                rest = {k: v for k, v in s.items() if k != "allOf"}
                s = dict(s["allOf"][0], **rest)
            else:
                return s

    def _check(self, s, v, path, errs, crd=False):
        s = self._resolve(s)
        where = path or "(root)"
        if v is None:
            if not s.get("nullable"):
                errs.append(f"{where}: null is not allowed")
            return
        if s.get("x-kubernetes-int-or-string") or s.get("format") == "int-or-string":
            if isinstance(v, bool) or not isinstance(v, (int, str)):
                errs.append(f"{where}: must be an integer or a string")
            return
        if "oneOf" in s and {x.get("type") for x in s["oneOf"]} == {"string", "number"}:  # Quantity
            if isinstance(v, bool) or not isinstance(v, (int, float, str)) or \
                    (isinstance(v, str) and not QUANTITY.match(v)):
                errs.append(f"{where}: {v!r} is not a quantity")
            return
        if "enum" in s and v not in s["enum"]:
            errs.append(f"{where}: {v!r} is not one of {s['enum']}")
        t = s.get("type")
        if t is None and "properties" in s:
            t = "object"
        if not self._type_ok(t, v):
            errs.append(f"{where}: expected {t}, got {type(v).__name__}")
            return
        if t == "object":
            self._check_object(s, v, path, errs, crd)
        elif t == "array":
            for i, item in enumerate(v):
                self._check(s.get("items", {}), item, f"{path}[{i}]", errs, crd)

    @staticmethod
    def _type_ok(t, v):
        return {"string": lambda: isinstance(v, str),
                "integer": lambda: isinstance(v, int) and not isinstance(v, bool),
                "number": lambda: isinstance(v, (int, float)) and not isinstance(v, bool),
                "boolean": lambda: isinstance(v, bool),
                "array": lambda: isinstance(v, list),
                "object": lambda: isinstance(v, dict)}.get(t, lambda: True)()

    def _check_object(self, s, v, path, errs, crd):
        props, addl = s.get("properties"), s.get("additionalProperties")
        for r in s.get("required", []):
            if r not in v:
                errs.append(f"{path + '.' if path else ''}{r}: required field is missing")
        if s.get("x-kubernetes-preserve-unknown-fields") and props is None:
            return
        for k, sub in v.items():
            p = f"{path}.{k}" if path else k
            if crd and path == "" and k in ("apiVersion", "kind"):
                continue
            if crd and path == "" and k == "metadata":
                self._check({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                            sub, p, errs)
            elif props is not None and k in props:
                self._check(props[k], sub, p, errs, crd)
            elif isinstance(addl, dict):
                self._check(addl, sub, p, errs, crd)
            elif addl is True or (props is None and addl is None and not crd):
                continue
            elif not s.get("x-kubernetes-preserve-unknown-fields"):
                errs.append(f"{p}: unknown field")


def _labels(md, path, errs):
    for k, val in ((md or {}).get("labels") or {}).items():
        if not LABEL_NAME.match(k) or len(k.split("/")[-1]) > 63:
            errs.append(f"{path}.labels: invalid label key {k!r}")
        if not isinstance(val, str) or len(val) > 63 or not LABEL_VALUE.match(val):
            errs.append(f"{path}.labels[{k}]: invalid label value {val!r}")


def _pod_rules(spec, path, errs):
    volumes = {v["name"] for v in spec.get("volumes") or []}
    host_net = spec.get("hostNetwork", False)
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(kind) or []):
            cp = f"{path}.{kind}[{i}]"
            ports = {}
            for j, p in enumerate(c.get("ports") or []):
                name = p.get("name")
                if name is not None:
                    if len(name) > 15 or not IANA_SVC.match(name) or not re.search("[a-z]", name):
                        errs.append(f"{cp}.ports[{j}].name: {name!r} is not an IANA service name")
                    ports[name] = p
                if host_net and p.get("hostPort") not in (None, p.get("containerPort")):
                    errs.append(f"{cp}.ports[{j}].hostPort: must match containerPort when hostNetwork is true")
            for m in c.get("volumeMounts") or []:
                if m.get("name") not in volumes:
                    errs.append(f"{cp}.volumeMounts: {m.get('name')!r} is not a volume of the pod")
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                pr = c.get(probe) or {}
                for how in ("httpGet", "tcpSocket"):
                    port = (pr.get(how) or {}).get("port")
                    if isinstance(port, str) and port not in ports:
                        errs.append(f"{cp}.{probe}.{how}.port: {port!r} is not a port name of the container")


def go_rules(obj):
    errs = []
    _labels(obj.get("metadata"), "metadata", errs)
    if obj.get("kind") in ("Deployment", "DaemonSet"):
        tmpl = (obj.get("spec") or {}).get("template") or {}
        _labels(tmpl.get("metadata"), "spec.template.metadata", errs)
        sel = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            errs.append("spec.selector: does not match the pod template's labels")
        _pod_rules(tmpl.get("spec") or {}, "spec.template.spec", errs)
    return errs
