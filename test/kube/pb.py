"""Just enough of the Kubernetes protobuf encoding to read a SelfSubjectAccessReview, which
kubectl auth can-i sends as application/vnd.kubernetes.protobuf.

decode(data) returns {field number: [values]} (varints as ints, length-delimited as bytes);
unwrap(body) strips the "k8s\\0" magic and runtime.Unknown envelope and returns the raw object.
Both raise ValueError on malformed input.
"""

MAGIC = b"k8s\x00"


def _varint(data, i):
    shift = value = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def decode(data):
    out, i = {}, 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            n, i = _varint(data, i)
            if i + n > len(data):
                raise ValueError("truncated field")
            value, i = data[i:i + n], i + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            value, i = data[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wire}")
        out.setdefault(field, []).append(value)
    return out


def unwrap(body):
    if not body.startswith(MAGIC):
        raise ValueError("no k8s protobuf magic")
    return decode(body[len(MAGIC):]).get(2, [b""])[0]


def text(fields, n):
    return fields.get(n, [b""])[0].decode()


def access_review_spec(raw):
    """SelfSubjectAccessReview.spec as its JSON form."""
    spec = decode(decode(raw).get(2, [b""])[0])
    out = {}
    if 1 in spec:
        ra = decode(spec[1][0])
        names = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
        out["resourceAttributes"] = {k: text(ra, i + 1) for i, k in enumerate(names) if i + 1 in ra}
    if 2 in spec:
        nra = decode(spec[2][0])
        out["nonResourceAttributes"] = {k: text(nra, i + 1) for i, k in enumerate(("path", "verb")) if i + 1 in nra}
    return out
