"""Kubernetes Status errors as exceptions (shapes from ../shared/kube/transcripts/README.md)."""


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, metadata=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.metadata = details, metadata or {}

    def status(self):
        s = {"kind": "Status", "apiVersion": "v1", "metadata": self.metadata, "status": "Failure",
             "message": self.message, "reason": self.reason}
        if self.details is not None:
            s["details"] = self.details
        s["code"] = self.code
        return s


def qualified(res):
    """pillaragents.pillar-csi.bhyoo.com, or just nodes for the core group."""
    return f"{res.plural}.{res.group}" if res.group else res.plural


def _details(res, name, kind=None):
    d = {}
    if name:
        d["name"] = name
    if res.group:
        d["group"] = res.group
    d["kind"] = kind or res.plural
    return d


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def not_found(res, name):
    return ApiError(404, "NotFound", f'{qualified(res)} "{name}" not found', _details(res, name))


def already_exists(res, name):
    return ApiError(409, "AlreadyExists", f'{qualified(res)} "{name}" already exists', _details(res, name))


def conflict(res, name):
    return ApiError(
        409, "Conflict",
        f'Operation cannot be fulfilled on {qualified(res)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(res, name),
    )


def invalid(res, name, errs, kind=None):
    """422 from a list of schema.FieldError (kind: Kind for objects, plural for 05b).  Events of
    both APIs are validated in their core form and reported without a group (09h)."""
    kind = kind or res.kind
    if res.kind == "Event":
        d = {"name": name, "kind": kind, "causes": [e.cause() for e in errs]}
        texts = [e.text() for e in errs]
        body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {body}', d)
    what = f"{kind}.{res.group}" if res.group else kind
    texts = [e.text() for e in errs]
    body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    d = _details(res, name, kind)
    d["causes"] = [e.cause() for e in errs]
    return ApiError(422, "Invalid", f'{what} "{name}" is invalid: {body}', d)


def expired(message, metadata=None):
    return ApiError(410, "Expired", message, None, metadata)


def generic_invalid():
    return ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {})


def method_not_allowed():
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})
