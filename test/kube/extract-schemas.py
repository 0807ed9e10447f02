#!/usr/bin/python3
"""Regenerate builtin-schemas.json from Kubernetes 1.32's OpenAPI v3 documents.

Usage: extract-schemas.py OPENAPI_DIR   (../shared/kube/openapi-v3 of the repository checkout)
Keeps, for each built-in kind the test API server serves, the closure of its component schemas
(descriptions and patch hints dropped) and a map "group/Kind" -> schema name.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openapi import _refs as refs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = {
    "api__v1_openapi.json": ["core.v1.Node", "core.v1.PersistentVolume", "core.v1.PersistentVolumeClaim",
                             "core.v1.Event", "core.v1.ServiceAccount", "core.v1.Secret", "core.v1.ConfigMap",
                             "core.v1.Namespace", "core.v1.Service", "authentication.v1.TokenRequest"],
    "apis__apps__v1_openapi.json": ["apps.v1.Deployment", "apps.v1.DaemonSet", "apps.v1.ReplicaSet",
                                    "apps.v1.StatefulSet"],
    "apis__storage.k8s.io__v1_openapi.json": ["storage.v1.StorageClass", "storage.v1.CSINode", "storage.v1.CSIStorageCapacity",
                                              "storage.v1.VolumeAttachment", "storage.v1.CSIDriver"],
    "apis__coordination.k8s.io__v1_openapi.json": ["coordination.v1.Lease"],
    "apis__events.k8s.io__v1_openapi.json": ["events.v1.Event"],
    "apis__rbac.authorization.k8s.io__v1_openapi.json": ["rbac.v1.Role", "rbac.v1.ClusterRole", "rbac.v1.RoleBinding",
                                                         "rbac.v1.ClusterRoleBinding"],
    "apis__authentication.k8s.io__v1_openapi.json": ["authentication.v1.SelfSubjectReview",
                                                     "authentication.v1.TokenReview"],
    "apis__apiextensions.k8s.io__v1_openapi.json": [
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"],
}
DROP = ("description", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key")


def strip(s, names=False):
    """s without the keywords in DROP; names: s is a "properties" map, whose keys are field names
    (a field may be called "description", as JSONSchemaProps' is) and are all kept."""
    if isinstance(s, dict):
        return {k: strip(v, k == "properties" and not names) for k, v in s.items() if names or k not in DROP}
    if isinstance(s, list):
        return [strip(x) for x in s]
    return s


def extract(src):
    """{"roots": {"group/Kind": schema name}, "schemas": the closure, stripped} from the documents in src."""
    out, roots = {}, {}
    for fname, kinds in KINDS.items():
        with open(os.path.join(src, fname)) as f:
            comps = json.load(f)["components"]["schemas"]
        names = [k if k.startswith("io.") else "io.k8s.api." + k for k in kinds]
        todo = list(names)
        while todo:
            k = todo.pop()
            if k in out:
                continue
            out[k] = strip(comps[k])
            todo += refs(out[k])
        for k in names:
            gvk = comps[k].get("x-kubernetes-group-version-kind", [{}])[0]
            roots[f"{gvk.get('group', '')}/{gvk.get('kind')}"] = k
    return {"roots": roots, "schemas": out}


if __name__ == "__main__":
    doc = extract(sys.argv[1])
    with open(os.path.join(HERE, "builtin-schemas.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"), sort_keys=True)
