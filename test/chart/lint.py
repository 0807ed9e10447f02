"""Lint rules for the rendered chart (issue 13, deploy.md §2 and §5).

lint(objects, image_repository) returns a list of problems, one string each; empty means clean.
Rules:
- every object carries the recommended labels (RECOMMENDED) with non-empty values; workloads and
  their pod templates also carry app.kubernetes.io/component;
- every container and init container of a workload has resource requests for cpu and memory and a
  securityContext;
- every image is pinned: a tag that is not `latest`, or a digest (an untagged image means latest);
- every container running the pillar-csi image (not the init containers) has a livenessProbe, and
  the controller also a readinessProbe (the sidecars have none, deploy.md §5.1).
"""
RECOMMENDED = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
               "app.kubernetes.io/managed-by", "helm.sh/chart")
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "Job")


def _image_problem(image):
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return f"image {image!r} has no tag (means latest)"
    if last.rsplit(":", 1)[1] == "latest":
        return f"image {image!r} uses the latest tag"
    return None


def _labels(where, labels, extra=()):
    out = []
    for k in RECOMMENDED + tuple(extra):
        if not (labels or {}).get(k):
            out.append(f"{where}: missing recommended label {k}")
    return out


def _containers(where, spec, image_repository):
    out = []
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or []:
            cw = f"{where} {kind[:-1]} {c.get('name')}"
            req = (c.get("resources") or {}).get("requests") or {}
            for r in ("cpu", "memory"):
                if not req.get(r):
                    out.append(f"{cw}: missing resource request {r}")
            if not c.get("securityContext"):
                out.append(f"{cw}: missing securityContext")
            problem = _image_problem(c.get("image", ""))
            if problem:
                out.append(f"{cw}: {problem}")
            ours = c.get("image", "").startswith(image_repository + ":")
            if kind == "containers" and ours:
                if not c.get("livenessProbe"):
                    out.append(f"{cw}: missing livenessProbe")
                if c.get("name") == "controller" and not c.get("readinessProbe"):
                    out.append(f"{cw}: missing readinessProbe")
    return out


def lint(objects, image_repository="pillar-csi"):
    out = []
    for o in objects:
        md = o.get("metadata") or {}
        where = f"{o.get('kind')} {md.get('name')}"
        if o.get("kind") in WORKLOADS:
            out += _labels(where, md.get("labels"), ("app.kubernetes.io/component",))
            tmpl = (o.get("spec") or {}).get("template") or {}
            out += _labels(where + " pod template", (tmpl.get("metadata") or {}).get("labels"),
                           ("app.kubernetes.io/component",))
            spec = tmpl.get("spec") or {}
            out += _containers(where, spec, image_repository)
            if not spec.get("securityContext") and o.get("kind") == "Deployment":
                out.append(f"{where}: missing pod securityContext")
        else:
            out += _labels(where, md.get("labels"))
    return out
