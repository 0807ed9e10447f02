"""The resources the test API server serves, and the discovery documents describing them.

Built-in resources come from builtin-resources.json (the entries a kube-apiserver 1.32 lists in
its aggregated discovery, limited to what we serve); custom resources from CRD YAML files or
CRDs created through the API.  Registry.find(group, version, plural) returns a Resource or None.
"""
import base64
import hashlib
import json
import os

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
CRD_VERBS = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]


class Resource:
    def __init__(self, group, version, plural, kind, namespaced, **kw):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespaced = namespaced
        self.singular = kw.get("singular", kind.lower())
        self.short = kw.get("shortNames", [])
        self.categories = kw.get("categories", [])
        self.verbs = kw.get("verbs", ALL_VERBS)
        self.subresources = kw.get("subresources", [])  # e.g. ["status"]
        self.crd = kw.get("crd")  # the CRD object for custom resources
        self.schema = kw.get("schema")
        self.columns = kw.get("columns", [])
        self.list_kind = kw.get("listKind", kind + "List")

    @property
    def api_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self):
        return "status" in self.subresources

    def key_prefix(self, ns=None):
        g = self.group or "core"
        if self.plural == "events":  # events.k8s.io/v1 and core/v1 Events share their storage
            g = "core"
        base = f"/registry/{g}/{self.plural}/"
        return base + (f"{ns}/" if self.namespaced and ns else "")

    def key(self, ns, name):
        return self.key_prefix(ns) + name

    def storage_hash(self):
        h = hashlib.sha256(f"{self.group}/{self.version}/{self.kind}".encode()).digest()
        return base64.b64encode(h[:8]).decode()


def crd_resource(crd):
    spec = crd["spec"]
    names = spec["names"]
    ver = next(v for v in spec["versions"] if v.get("served", True))
    subs = ["status"] if "status" in (ver.get("subresources") or {}) else []
    return Resource(
        spec["group"], ver["name"], names["plural"], names["kind"], spec["scope"] == "Namespaced",
        singular=names.get("singular", names["kind"].lower()), shortNames=names.get("shortNames", []),
        categories=names.get("categories", []), verbs=CRD_VERBS, subresources=subs, crd=crd,
        schema=ver["schema"]["openAPIV3Schema"], columns=ver.get("additionalPrinterColumns", []),
        listKind=names.get("listKind", names["kind"] + "List"),
    )


class Registry:
    def __init__(self):
        self.resources = []
        with open(os.path.join(HERE, "builtin-resources.json")) as f:
            for gv in json.load(f):
                for r in gv["resources"]:
                    subs = [s["subresource"] for s in r.get("subresources", [])]
                    self.resources.append(Resource(
                        gv["group"], gv["version"], r["resource"], r["responseKind"]["kind"],
                        r["scope"] == "Namespaced", singular=r.get("singularResource"),
                        shortNames=r.get("shortNames", []), categories=r.get("categories", []),
                        verbs=r["verbs"], subresources=subs))

    def add_crd(self, crd):
        res = crd_resource(crd)
        self.resources = [r for r in self.resources if not (r.group == res.group and r.plural == res.plural)]
        self.resources.append(res)
        crds = sorted((r for r in self.resources if r.crd is not None), key=lambda r: (r.group, r.plural))
        self.resources = [r for r in self.resources if r.crd is None] + crds
        return res

    def load_crd_files(self, paths):
        crds = []
        for p in paths:
            with open(p) as f:
                for doc in yaml.safe_load_all(f):
                    if doc and doc.get("kind") == "CustomResourceDefinition":
                        crds.append(doc)
                        self.add_crd(doc)
        return crds

    def find(self, group, version, plural):
        for r in self.resources:
            if r.group == group and r.version == version and r.plural == plural:
                return r
        return None

    def by_kind(self, group, kind):
        for r in self.resources:
            if r.group == group and r.kind == kind:
                return r
        return None

    def groups(self):
        """[(group, version)] in first-seen order; the core group first."""
        out = []
        for r in self.resources:
            if (r.group, r.version) not in out:
                out.append((r.group, r.version))
        return out

    # ---- discovery documents ------------------------------------------------------------------

    def resource_list(self, group, version):
        items = []
        for r in self.resources:
            if r.group != group or r.version != version:
                continue
            e = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                 "kind": r.kind, "verbs": r.verbs}
            if r.short:
                e["shortNames"] = r.short
            if r.categories:
                e["categories"] = r.categories
            if r.crd is not None or r.verbs:
                e["storageVersionHash"] = r.storage_hash()
            items.append(e)
            for s in r.subresources:
                verbs = ["create"] if s == "token" else ["get", "patch", "update"]
                kind = {"token": "TokenRequest", "scale": "Scale"}.get(s, r.kind)
                sub = {"name": f"{r.plural}/{s}", "singularName": "", "namespaced": r.namespaced,
                       "kind": kind, "verbs": verbs}
                if s == "token":
                    sub.update(group="authentication.k8s.io", version="v1")
                if s == "scale":
                    sub = {"name": f"{r.plural}/{s}", "singularName": "", "namespaced": r.namespaced,
                           "group": "autoscaling", "version": "v1", "kind": kind, "verbs": verbs}
                items.append(sub)
        if group:
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}",
                    "resources": items}
        return {"kind": "APIResourceList", "groupVersion": version, "resources": items}

    def api_group(self, group):
        vers = [v for g, v in self.groups() if g == group]
        if not vers:
            return None
        gv = [{"groupVersion": f"{group}/{v}", "version": v} for v in vers]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": gv,
                "preferredVersion": gv[0]}

    def api_group_list(self):
        groups = []
        for g, _ in self.groups():
            if g and all(x["name"] != g for x in groups):
                d = self.api_group(g)
                del d["kind"], d["apiVersion"]
                groups.append(d)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def aggregated(self, core):
        items = []
        for g, v in self.groups():
            if (g == "") != core:
                continue
            res = []
            for r in self.resources:
                if r.group != g or r.version != v:
                    continue
                rk = {"group": r.group if r.crd else "", "version": r.version if r.crd else "", "kind": r.kind}
                e = {"resource": r.plural, "responseKind": rk,
                     "scope": "Namespaced" if r.namespaced else "Cluster",
                     "singularResource": r.singular, "verbs": r.verbs}
                if r.short:
                    e["shortNames"] = r.short
                if r.categories:
                    e["categories"] = r.categories
                subs = []
                for s in r.subresources:
                    if s == "token":
                        subs.append({"subresource": s, "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}, "verbs": ["create"]})
                    elif s == "scale":
                        subs.append({"subresource": s, "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]})
                    else:
                        subs.append({"subresource": s, "responseKind": rk, "verbs": ["get", "patch", "update"]})
                if subs:
                    e["subresources"] = subs
                res.append(e)
            meta = {"creationTimestamp": None}
            if g:
                meta = {"name": g, "creationTimestamp": None}
            items.append({"metadata": meta, "versions": [{"version": v, "resources": res, "freshness": "Current"}]})
        return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}
