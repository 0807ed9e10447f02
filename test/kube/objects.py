"""Admission of one object: metadata rules, status-subresource semantics, generation,
custom-resource schema (pruning, defaults, validation, CEL) and built-in kind checks.

prepare_create / prepare_update return (object, warnings) or raise errors.ApiError.
"""
import copy
import re

import builtin
import errors
import fields
import schema
from store import new_uid, now

DNS1123_SUB = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SUB_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
           "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
           "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
GENERATION = ("customresourcedefinitions",)
SYSTEM_META = ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds",
               "selfLink")


def name_errors(md):
    name = md.get("name", "")
    errs = []
    if not name:
        errs.append(schema.FieldError("FieldValueRequired", "metadata.name",
                                      "Required value: name or generateName is required"))
    elif len(name) > 253 or not DNS1123_SUB.match(name):
        errs.append(schema.invalid("metadata.name", name, SUB_MSG))
    return errs


def _spec_part(obj):
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _cr_checks(res, obj, old, strict, name):
    """Prune, default and validate a custom resource; returns warnings."""
    sch = res.schema or {}
    unknown = schema.prune(sch, obj)
    if unknown and strict:
        what = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise errors.bad_request(
            f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: strict decoding error: {what}')
    schema.default(sch, obj)
    errs = name_errors(obj["metadata"])
    errs += schema.check_object(sch, obj, old if old is not None else schema._MISSING)
    if errs:
        raise errors.invalid(res, name, errs)
    return [f'unknown field "{u}"' for u in unknown]


def check_kind(res, obj, name):
    kind, av = obj.get("kind"), obj.get("apiVersion")
    if kind != res.kind:
        err = schema.invalid("kind", kind, f"must be {res.kind}")
        raise errors.ApiError(
            422, "Invalid", f'{kind}.{res.group} "{name}" is invalid: {err.text()}' if res.group
            else f'{kind} "{name}" is invalid: {err.text()}',
            {"name": name, "group": res.group, "kind": kind, "causes": [err.cause()]})
    if av != res.api_version:
        raise errors.bad_request(f'the API version in the data ({av}) does not match the expected API version ({res.api_version})')


def _admit(res, obj, old, opts):
    name = obj["metadata"].get("name", "")
    if res.crd is not None:
        return _cr_checks(res, obj, old, opts.get("strict"), name)
    unknown = builtin.prune(res, obj)
    if unknown and opts.get("strict"):
        what = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise errors.bad_request(f"strict decoding error: {what}")
    errs = builtin.validate(res, obj, old)
    if errs:
        raise errors.invalid(res, name, errs)
    return [f'unknown field "{u}"' for u in unknown]


def prepare_create(res, obj, ns, opts):
    md = obj.setdefault("metadata", {})
    if not md.get("name") and md.get("generateName"):
        md["name"] = md["generateName"] + new_uid()[:5]
    if md.get("resourceVersion"):
        raise errors.ApiError(500, "InternalError", "resourceVersion should not be set on objects to be created",
                              {"causes": [{"message": "resourceVersion should not be set on objects to be created"}]})
    if res.namespaced:
        if md.get("namespace") and md["namespace"] != ns:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        md["namespace"] = ns
    else:
        md.pop("namespace", None)
    for k in SYSTEM_META + ("managedFields",):
        md.pop(k, None)
    md["uid"] = new_uid()
    md["creationTimestamp"] = now()
    sent = copy.deepcopy(obj)
    if res.crd is not None or res.plural in GENERATION:
        md["generation"] = 1
    if res.crd is not None:
        if res.has_status:
            obj.pop("status", None)
    else:
        builtin.on_create(res, obj)
    warnings = _admit(res, obj, None, opts)
    if res.crd is not None:
        schema.prune(res.schema or {}, sent)
        schema.default(res.schema or {}, sent)
    else:
        builtin.prune(res, sent)
    if res.has_status:
        sent.pop("status", None)
    md["managedFields"] = fields.update(None, sent, [], opts["manager"], "", res.api_version, md["creationTimestamp"],
                                        opts.get("operation", "Update"), _dot(res), opts.get("applied"), _atomic(res))
    return obj, warnings


def _dot(res):
    return None if res.crd is not None else builtin.dot_rule(res)


def _atomic(res):
    return None if res.crd is not None else builtin.atomic_rule(res)


def prepare_update(res, old, obj, sub, opts):
    """The object to store when obj is written over old (main resource or /status)."""
    old_md = old["metadata"]
    sent = copy.deepcopy(obj)
    if sub == "status":
        new = copy.deepcopy(old)
        if "status" in obj:
            new["status"] = obj["status"]
        else:
            new.pop("status", None)
    else:
        new = obj
        md = new.setdefault("metadata", {})
        for k in SYSTEM_META:
            md.pop(k, None)
            if k in old_md:
                md[k] = old_md[k]
        if res.namespaced:
            md["namespace"] = old_md.get("namespace")
        if res.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        if res.crd is None:
            builtin.on_update(res, old, new)
    warnings = _admit(res, new, old, opts)
    if "generation" in old_md and sub != "status" and _spec_part(new) != _spec_part(old):
        new["metadata"]["generation"] = old_md["generation"] + 1
    # managedFields follow the object as sent, minus the fields the strategy resets: status on the
    # main resource, everything but metadata and status on /status (a label sent to /status is
    # recorded although not applied, transcript 05e)
    if res.crd is not None:
        schema.prune(res.schema or {}, sent)
        schema.default(res.schema or {}, sent)
    else:
        builtin.prune(res, sent)
    if sub == "status":
        sent_fields = copy.deepcopy(old)
        sent_fields["status"] = sent.get("status")
    else:
        sent_fields = {k: v for k, v in sent.items() if k not in ("metadata", "status")}
        if "status" in old:
            sent_fields["status"] = old["status"]
    if sent_fields.get("status") is None:
        sent_fields.pop("status", None)
    md = dict(new["metadata"])
    for k in fields.META_OWNED:
        if k in sent.get("metadata", {}):
            md[k] = sent["metadata"][k]
        elif sub == "status" and k in old_md:
            md[k] = old_md[k]
        else:
            md.pop(k, None)
    sent_fields["metadata"] = md
    new["metadata"]["managedFields"] = fields.update(
        old, sent_fields, old_md.get("managedFields", []), opts["manager"], sub, res.api_version, now(),
        opts.get("operation", "Update"), _dot(res), opts.get("applied"), _atomic(res))
    if _without_times(new) == _without_times(old):
        new["metadata"]["managedFields"] = old_md.get("managedFields", [])
    return new, warnings


def _without_times(obj):
    o = copy.deepcopy(obj)
    md = o.get("metadata", {})
    md.pop("resourceVersion", None)
    for e in md.get("managedFields", []) or []:
        e.pop("time", None)
    return o
