"""Authentication (static bearer tokens, ServiceAccount JWTs) and RBAC authorization.

Static tokens come from a kube-apiserver --token-auth-file style CSV (token,user,uid,"g1,g2").
ServiceAccount tokens are RS256 JWTs this server signs (TokenRequest); a token whose signature,
expiry or ServiceAccount uid does not check out is rejected (401).  RBAC rules are read from
Role/ClusterRole/RoleBinding/ClusterRoleBinding objects: YAML files given at start plus the
rbac.authorization.k8s.io objects stored through the API.
"""
import csv
import os
import time
import uuid

import jwt
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa



class User:
    def __init__(self, name, uid="", groups=(), extra=None):
        self.name, self.uid, self.groups, self.extra = name, uid, list(groups), extra or {}


ANONYMOUS = User("system:anonymous", groups=["system:unauthenticated"])


def _signing_key(path):
    from cryptography.hazmat.primitives import serialization
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return serialization.load_pem_private_key(f.read(), None)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if path:
        with open(path + ".tmp", "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        os.rename(path + ".tmp", path)
    return key


class Authenticator:
    def __init__(self, token_file=None, issuer="https://127.0.0.1:6443", key_file=None):
        """key_file: the ServiceAccount signing key (PEM), created if missing, so that tokens
        stay valid across a restart of the server as they do with kube-apiserver."""
        self.tokens = {}
        self.issuer = issuer
        self.key = _signing_key(key_file)
        self.kid = uuid.uuid4().hex
        self.audiences = [issuer]
        if token_file:
            with open(token_file) as f:
                for row in csv.reader(f):
                    if len(row) >= 3 and not row[0].startswith("#"):
                        groups = row[3].split(",") if len(row) > 3 and row[3] else []
                        self.tokens[row[0]] = User(row[1], row[2], groups + ["system:authenticated"])

    def issue(self, ns, sa, sa_uid, seconds, audiences=None, bound=None):
        iat = int(time.time())
        claims = {
            "aud": audiences or self.audiences, "exp": iat + seconds, "iat": iat, "iss": self.issuer,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": sa, "uid": sa_uid}},
            "nbf": iat, "sub": f"system:serviceaccount:{ns}:{sa}",
        }
        if bound:
            claims["kubernetes.io"].update(bound)
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid}), claims["exp"]

    async def authenticate(self, header, sa_uid_lookup):
        """User for an Authorization header; None means 401."""
        if not header:
            return ANONYMOUS
        if not header.startswith("Bearer "):
            return None
        token = header[7:].strip()
        if token in self.tokens:
            return self.tokens[token]
        try:
            claims = jwt.decode(token, self.key.public_key(), algorithms=["RS256"], audience=self.audiences,
                                issuer=self.issuer)
        except jwt.PyJWTError:
            return None
        k = claims.get("kubernetes.io", {})
        ns, sa = k.get("namespace"), k.get("serviceaccount", {})
        if not ns or not sa or await sa_uid_lookup(ns, sa.get("name")) != sa.get("uid"):
            return None
        return User(f"system:serviceaccount:{ns}:{sa['name']}", sa["uid"],
                    ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
                    {"authentication.kubernetes.io/credential-id": [f"JTI={claims.get('jti')}"]})


PUBLIC_PATHS = ("/version", "/version/", "/healthz", "/livez", "/readyz")


def _match(values, v):
    return "*" in values or v in values


def _rule_allows(rule, attrs):
    if attrs.get("path") is not None:
        return any(u == attrs["path"] or (u.endswith("*") and attrs["path"].startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs", []))
    if "nonResourceURLs" in rule and "resources" not in rule:
        return False
    res = attrs["resource"] + ("/" + attrs["subresource"] if attrs.get("subresource") else "")
    resources = rule.get("resources", [])
    ok_res = "*" in resources or res in resources or (
        attrs.get("subresource") and f"*/{attrs['subresource']}" in resources)
    names = rule.get("resourceNames")
    return (_match(rule.get("verbs", []), attrs["verb"]) and _match(rule.get("apiGroups", []), attrs["group"])
            and ok_res and (not names or attrs.get("name") in names))


def _subject_matches(subj, user, binding_ns):
    kind = subj.get("kind")
    if kind == "User":
        return subj.get("name") == user.name
    if kind == "Group":
        return subj.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subj.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{subj.get('name')}"
    return False


class Authorizer:
    def __init__(self, files=()):
        self.static = []
        for p in files:
            with open(p) as f:
                self.static += [d for d in yaml.safe_load_all(f) if d and "kind" in d]

    def allowed(self, user, attrs, objects):
        """attrs: verb, group, resource, subresource, name, namespace, or path for non-resource URLs."""
        if "system:masters" in user.groups:
            return True
        path = attrs.get("path")
        if path is not None:
            if path in PUBLIC_PATHS:
                return True
            if "system:authenticated" in user.groups and (
                    path in ("/api", "/apis") or path.startswith(("/api/", "/apis/", "/openapi/"))):
                return True
        elif "system:authenticated" in user.groups and attrs["group"] in (
                "authentication.k8s.io", "authorization.k8s.io") and attrs["resource"] in (
                "selfsubjectreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews") and attrs["verb"] == "create":
            return True
        every = self.static + objects
        roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
                 for d in every if d["kind"] in ("Role", "ClusterRole")}
        for b in every:
            if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            bns = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
            if bns is not None and (path is not None or attrs.get("namespace") != bns):
                continue
            if not any(_subject_matches(s, user, bns) for s in b.get("subjects") or []):
                continue
            ref = b.get("roleRef", {})
            role = roles.get((ref.get("kind"), bns if ref.get("kind") == "Role" else None, ref.get("name")))
            if role and any(_rule_allows(r, attrs) for r in role.get("rules") or []):
                return True
        return False


def forbidden_message(user, attrs, qualified):
    if attrs.get("path") is not None:
        return f'forbidden: User "{user.name}" cannot {attrs["verb"]} path "{attrs["path"]}"'
    res = attrs["resource"] + ("/" + attrs["subresource"] if attrs.get("subresource") else "")
    head = f'{qualified} "{attrs["name"]}" is forbidden' if attrs.get("name") else f"{qualified} is forbidden"
    scope = f'in the namespace "{attrs["namespace"]}"' if attrs.get("namespace") else "at the cluster scope"
    return (f'{head}: User "{user.name}" cannot {attrs["verb"]} resource "{res}" in API group '
            f'"{attrs["group"]}" {scope}')
