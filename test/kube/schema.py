"""Structural OpenAPI v3 schemas as kube-apiserver applies them to custom resources.

prune(schema, obj) drops unknown fields in place and returns their paths ("spec.bogus");
default(schema, obj) fills `default`s in place; validate(schema, obj) returns a list of FieldError;
validate_cel(schema, obj, old) evaluates x-kubernetes-validations (transition rules only when
`old` is given).  Messages follow apiextensions-apiserver's wording (transcripts 02e-02h).
"""
import copy
import datetime
import json
import re

import cel


class FieldError:
    def __init__(self, reason, field, message):
        self.reason, self.field, self.message = reason, field, message

    def text(self):
        return f"{self.field}: {self.message}"

    def cause(self):
        return {"reason": self.reason, "message": self.message, "field": self.field}


def go_value(v):
    """A value as Go's field.Invalid prints it."""
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def invalid(field, value, detail):
    return FieldError("FieldValueInvalid", field, f"Invalid value: {go_value(value)}: {detail}")


def required(field):
    return FieldError("FieldValueRequired", field, "Required value")


def not_supported(field, value, allowed):
    vals = ", ".join(json.dumps(a) for a in allowed)
    return FieldError(
        "FieldValueNotSupported", field, f"Unsupported value: {go_value(value)}: supported values: {vals}"
    )


def join(path, key):
    return f"{path}.{key}" if path else key


TYPE_NAMES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
              (dict, "object"))


def type_name(v):
    """The OpenAPI type of a JSON value (bool before int: True is an int in Python)."""
    return next((name for t, name in TYPE_NAMES if isinstance(v, t)), "null")


def _is_object(s):
    return s.get("type") == "object" or "properties" in s or "additionalProperties" in s


def prune(schema, obj, path="", root=True):
    unknown = []
    if isinstance(obj, dict) and _is_object(schema):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            props = schema.get("properties")
            if props is None:
                return unknown
        props = schema.get("properties", {})
        addl = schema.get("additionalProperties")
        for k in list(obj):
            if root and k in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(k)
            if sub is None and isinstance(addl, dict):
                sub = addl
            if sub is None:
                if not schema.get("x-kubernetes-preserve-unknown-fields"):
                    unknown.append(join(path, k))
                    del obj[k]
                continue
            unknown += prune(sub, obj[k], join(path, k), False)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            unknown += prune(schema["items"], item, f"{path}[{i}]", False)
    return unknown


def default(schema, obj):
    if isinstance(obj, dict):
        for k, sub in schema.get("properties", {}).items():
            if k not in obj and "default" in sub:
                obj[k] = copy.deepcopy(sub["default"])
            if k in obj:
                default(sub, obj[k])
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for k in obj:
                default(addl, obj[k])
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            default(schema["items"], item)


def _check_type(schema, v):
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(v, (int, str)) and not isinstance(v, bool)
    t = schema.get("type")
    if t is None:
        return True
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return type_name(v) == t


def _date_time(s):
    try:
        datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
        return "T" in s
    except ValueError:
        return False


def _scalar_errors(schema, v, path):
    errs = []
    where = f"{path} in body"
    if "enum" in schema and v not in schema["enum"]:
        return [not_supported(path, v, schema["enum"])]
    if isinstance(v, str):
        if "minLength" in schema and len(v) < schema["minLength"]:
            errs.append(invalid(path, v, f"{where} should be at least {schema['minLength']} chars long"))
        if "maxLength" in schema and len(v) > schema["maxLength"]:
            errs.append(invalid(path, v, f"{where} should be at most {schema['maxLength']} chars long"))
        if "pattern" in schema and not re.search(schema["pattern"], v):
            errs.append(invalid(path, v, f"{where} should match '{schema['pattern']}'"))
        if schema.get("format") == "date-time" and not _date_time(v):
            errs.append(invalid(path, v, f"{where} must be of type date-time: {go_value(v)}"))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "maximum" in schema and v > schema["maximum"]:
            errs.append(invalid(path, v, f"{where} should be less than or equal to {schema['maximum']}"))
        if "minimum" in schema and v < schema["minimum"]:
            errs.append(invalid(path, v, f"{where} should be greater than or equal to {schema['minimum']}"))
    return errs


def validate(schema, v, path=""):
    if v is None:
        if schema.get("nullable"):
            return []
        return [FieldError("FieldValueTypeInvalid", path,
                           f"Invalid value: \"null\": {path} in body must be of type {schema.get('type')}: \"null\"")]
    if not _check_type(schema, v):
        want = schema.get("type", "string")
        return [FieldError("FieldValueTypeInvalid", path,
                           f"Invalid value: \"{type_name(v)}\": {path} in body must be of type {want}: \"{type_name(v)}\"")]
    errs = _scalar_errors(schema, v, path)
    if isinstance(v, dict):
        for r in schema.get("required", []):
            if r not in v:
                errs.append(required(join(path, r)))
        props = schema.get("properties", {})
        addl = schema.get("additionalProperties")
        for k in sorted(v):
            if not path and k in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(k) or (addl if isinstance(addl, dict) else None)
            if sub is not None:
                errs += validate(sub, v[k], join(path, k))
    elif isinstance(v, list):
        if "maxItems" in schema and len(v) > schema["maxItems"]:
            errs.append(FieldError("FieldValueTooMany", path, f"Too many: {len(v)}: must have at most {schema['maxItems']} items"))
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(v):
                errs += validate(items, item, f"{path}[{i}]")
    return errs


def blocking(errs):
    return any(e.reason in ("FieldValueNotSupported", "FieldValueTypeInvalid") for e in errs)


_compiled = {}


def _rule(text):
    if text not in _compiled:
        _compiled[text] = cel.compile(text)
    return _compiled[text]


_MISSING = object()


def validate_cel(schema, v, old=_MISSING, path=""):
    errs = []
    for rule in schema.get("x-kubernetes-validations", []):
        ast = _rule(rule["rule"])
        env = {"self": v}
        if cel.uses_old(ast):
            if old is _MISSING:
                continue
            env["oldSelf"] = old
        try:
            ok = cel.evaluate(ast, env) is True
        except cel.CelError as e:
            ok, rule = False, dict(rule, message=f"{rule['rule']}: {e}")
        if not ok:
            field = path if path else "<nil>"
            msg = rule.get("message") or f"failed rule: {rule['rule']}"
            errs.append(FieldError("FieldValueInvalid", field, f'Invalid value: "{type_name(v)}": {msg}'))
    if isinstance(v, dict):
        props = schema.get("properties", {})
        addl = schema.get("additionalProperties")
        for k in sorted(v):
            sub = props.get(k) or (addl if isinstance(addl, dict) else None)
            if sub is None:
                continue
            o = old.get(k, _MISSING) if isinstance(old, dict) else _MISSING
            errs += validate_cel(sub, v[k], o, join(path, k))
    elif isinstance(v, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(v):
            errs += validate_cel(schema["items"], item, _MISSING, f"{path}[{i}]")
    return errs


def check_object(schema, obj, old=_MISSING):
    """Schema errors, then CEL errors (or the 'not checked' cause when schema errors block)."""
    errs = validate(schema, obj)
    if blocking(errs):
        errs.append(
            FieldError(
                "FieldValueInvalid",
                "<nil>",
                'Invalid value: "null": some validation rules were not checked because the object '
                "was invalid; correct the existing errors to complete validation",
            )
        )
        return errs
    return errs + validate_cel(schema, obj, old)
