#!/usr/bin/python3
"""A test Kubernetes API server on a real etcd, written independently of src/kube.

Usage: apiserver.py --etcd=HOST:PORT --listen=127.0.0.1:PORT --dir=DIR [--crds=FILE...]
                    [--token-file=CSV] [--rbac=YAML...]
Serves HTTPS (HTTP/2 via ALPN h2, and HTTP/1.1) with a self-signed CA written to DIR/ca.crt, and
writes DIR/ready once listening.  Behaviour follows ../shared/kube/transcripts (kube-apiserver
1.32; with --watch-cache=false but for lists with resourceVersion=0, which its watch cache answers
from memory: watchcache.py): resourceVersion is the etcd revision, watches are etcd watches.
"""
import os  # noqa: I001 (OPENSSL_CONF must be set before the ssl module loads OpenSSL)

os.environ.setdefault("OPENSSL_CONF", os.path.join(os.path.dirname(os.path.abspath(__file__)), "tls.cnf"))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import datetime  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import ssl  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from urllib.parse import parse_qs, unquote  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import auth  # noqa: E402
import builtin  # noqa: E402
import errors  # noqa: E402
import fields  # noqa: E402
import handlers  # noqa: E402
import openapi  # noqa: E402
import pb  # noqa: E402
import scale  # noqa: E402
from etcd import Etcd  # noqa: E402
from registry import Registry  # noqa: E402
from store import Store, new_uid, now  # noqa: E402

FLOWSCHEMA_UID = "32e460f4-6b5e-4b41-ade5-d084c00898f3"
PRIORITY_UID = "582159a4-098f-41bd-9196-ec29309422cc"
LIVE_TASKS = set()
# PILLAR_KUBE_REQUEST_LOG=FILE: one line per request ("<time> <method> <path?query>")
REQUEST_LOG = os.environ.get("PILLAR_KUBE_REQUEST_LOG")
# PILLAR_KUBE_AUTHZ_LOG=FILE: one JSON line per authorization decision (verb, group, resource,
# subresource, namespace, name or path; user; allowed)
AUTHZ_LOG = os.environ.get("PILLAR_KUBE_AUTHZ_LOG")
# PILLAR_KUBE_INTERLOPER=FILE (fault tests): when FILE exists and its {"method", "path"} name the
# request being served (and its optional "body_contains" occurs in the request's body), another
# writer's JSON merge patch ("patch") is applied to that object first and FILE is removed: the
# request meets a write made between the client's read and its write (as a second client of
# kube-apiserver would make it).  The interloper is not logged.
INTERLOPER = os.environ.get("PILLAR_KUBE_INTERLOPER")
AGG = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-test+pillar", "gitCommit": "test",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.5", "compiler": "gc",
           "platform": "linux/amd64"}


PEER_CERTS = {}


def track_peer_certificates():
    """hypercorn gives the app no TLS details: remember each connection's verified client
    certificate by its peer address (what the ASGI scope's "client" holds)."""
    import hypercorn.asyncio.tcp_server as tcp
    run = tcp.TCPServer.run

    async def tracked(self):
        # asyncio keeps tasks only weakly and hypercorn's TaskGroup holds its tasks in a WeakSet:
        # a garbage collection could destroy a pending connection (every request and watch on it
        # then answered 500 or vanished).  Hold each connection's task until it ends.
        task = asyncio.current_task()
        LIVE_TASKS.add(task)
        ssl_object = self.writer.get_extra_info("ssl_object")
        sock = self.writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # as Go's net/http: each answer's frames go out at once, not after the client's
            # delayed ACK of the previous write (40 ms a request on loopback)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = self.writer.get_extra_info("peername")
        key = tuple(peer[:2]) if peer else None
        if ssl_object is not None and key:
            cert = ssl_object.getpeercert()
            if cert:
                PEER_CERTS[key] = cert
        try:
            await run(self)
        finally:
            PEER_CERTS.pop(key, None)
            LIVE_TASKS.discard(task)
    tcp.TCPServer.run = tracked


def cert_user(cert):
    """The user of a client certificate: CN is the name, each O a group."""
    if not cert:
        return None
    name, groups = None, []
    for rdn in cert.get("subject", ()):
        for k, v in rdn:
            if k == "commonName":
                name = v
            elif k == "organizationName":
                groups.append(v)
    return auth.User(name, "", groups + ["system:authenticated"]) if name else None


class Request:
    def __init__(self, scope, body, query=None):
        self.scope, self.body = scope, body
        self.method = scope["method"]
        self.path = scope["path"]
        self.query = query if query is not None else parse_qs(scope.get("query_string", b"").decode(), keep_blank_values=True)
        self.headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}

    def q(self, name):
        v = self.query.get(name)
        return v[0] if v else None

    def header(self, name):
        return self.headers.get(name)


def encode(body, indent=False):
    if indent:
        return json.dumps(body, indent=2, ensure_ascii=False).encode()
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (text + "\n").encode()


def sort_keys(o):
    if isinstance(o, dict):
        return {k: sort_keys(o[k]) for k in sorted(o)}
    if isinstance(o, list):
        return [sort_keys(x) for x in o]
    return o


class App:
    def __init__(self, etcd, registry, authn, authz):
        self.etcd, self.registry, self.authn, self.authz = etcd, registry, authn, authz
        self.store = Store(etcd)
        self.handlers = handlers.Handlers(self.store, registry, self.crd_created)

    # ---- ASGI ---------------------------------------------------------------------------------

    async def __call__(self, scope, receive, send):
        task = asyncio.current_task()  # held strongly while it runs (see tracked())
        LIVE_TASKS.add(task)
        try:
            await self.handle(scope, receive, send)
        finally:
            LIVE_TASKS.discard(task)

    async def handle(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        req = Request(scope, body)
        if REQUEST_LOG:  # benchmarks count the requests a client sends
            with open(REQUEST_LOG, "a") as f:
                q = scope.get("query_string", b"").decode()
                f.write("%.3f %s %s%s\n" % (time.time(), scope["method"], scope["path"], "?" + q if q else ""))
        pf = True
        try:
            user = cert_user(PEER_CERTS.get(tuple(scope.get("client") or ())))
            if user is None:  # a client certificate wins over a bearer token
                user = await self.authn.authenticate(req.header("authorization"), self.sa_uid)
            if user is None:
                pf = False
                raise errors.ApiError(401, "Unauthorized", "Unauthorized")
            req.user = await self.impersonate(req, user)
            if INTERLOPER:
                await self.interlope(scope, req.body)
            reply = await self.route(req)
        except errors.ApiError as e:
            reply = handlers.Reply(e.code, e.status())
            if e.code == 403:
                reply.headers.append(("x-content-type-options", "nosniff"))
        except Exception as e:  # a bug of this server: answer 500 and log it
            import traceback
            traceback.print_exc()
            reply = handlers.Reply(500, errors.ApiError(500, "InternalError", f"Internal error occurred: {e}",
                                                        {"causes": [{"message": str(e)}]}).status())
        await self.respond(send, reply, pf)

    async def interlope(self, scope, body):
        try:
            with open(INTERLOPER) as f:
                spec = json.load(f)
        except OSError:
            return
        if spec.get("method") != scope["method"] or spec.get("path") != scope["path"]:
            return
        if spec.get("body_contains") and spec["body_contains"].encode() not in (body or b""):
            return
        os.unlink(INTERLOPER)
        target = scope["path"][:-len("/status")] if scope["path"].endswith("/status") else scope["path"]
        other = {"type": "http", "method": "PATCH", "path": target, "query_string": b"",
                 "headers": [(b"content-type", b"application/merge-patch+json"),
                             (b"user-agent", b"interloper/v1.0 (linux/amd64)")]}
        req = Request(other, json.dumps(spec["patch"]).encode())
        req.user = auth.User("interloper", "", ["system:masters", "system:authenticated"])
        reply = await self.route(req)
        if reply.code != 200:
            print(f"interloper: PATCH {target}: {reply.code}", file=sys.stderr, flush=True)

    async def respond(self, send, reply, pf=True):
        headers = [("audit-id", str(uuid.uuid4())), ("cache-control", "no-cache, private"),
                   ("content-type", "application/json")]
        extra = dict(reply.headers)
        if "cache-control" in extra:
            headers[1] = ("cache-control", extra.pop("cache-control"))
        if "content-type" in extra:
            headers[2] = ("content-type", extra.pop("content-type"))
        if reply.code == 304:
            del headers[2]
        headers += list(extra.items())
        if pf:
            headers += [("x-kubernetes-pf-flowschema-uid", FLOWSCHEMA_UID),
                        ("x-kubernetes-pf-prioritylevel-uid", PRIORITY_UID)]
        if reply.stream is not None:
            await send({"type": "http.response.start", "status": reply.code,
                        "headers": [(k.encode(), v.encode()) for k, v in headers]})
            # kube-apiserver flushes a watch's headers at once; hypercorn sends them with the
            # first body message, so an empty one goes now (a client waits for the headers)
            await send({"type": "http.response.body", "body": b"", "more_body": True})
            try:
                async for chunk in reply.stream:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            finally:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if isinstance(reply.body, (bytes, str)):
            data = reply.body.encode() if isinstance(reply.body, str) else reply.body
        elif reply.body is None:
            data = b""
        else:
            data = encode(reply.body)
        if len(data) <= 2048:
            headers.append(("content-length", str(len(data))))
        await send({"type": "http.response.start", "status": reply.code,
                    "headers": [(k.encode(), v.encode()) for k, v in headers]})
        await send({"type": "http.response.body", "body": data, "more_body": False})

    # ---- routing ------------------------------------------------------------------------------

    def authorize(self, req, attrs):
        objs = getattr(req, "rbac_objects", [])
        allowed = self.authz.allowed(req.user, attrs, objs)
        if AUTHZ_LOG:  # test/interop/rbac: what each identity was allowed or refused
            with open(AUTHZ_LOG, "a") as f:
                f.write(json.dumps(dict({k: v for k, v in attrs.items() if k != "res"},
                                        user=req.user.name, allowed=allowed, t=round(time.time(), 3))) + "\n")
        if not allowed:
            res = attrs.get("res")
            if attrs.get("path") is not None:
                raise errors.ApiError(403, "Forbidden", auth.forbidden_message(req.user, attrs, ""), {})
            d = {}
            if attrs.get("name"):
                d["name"] = attrs["name"]
            d["group"] = attrs["group"]
            d["kind"] = attrs["resource"]
            raise errors.ApiError(403, "Forbidden",
                                  auth.forbidden_message(req.user, attrs, errors.qualified(res)), d)

    async def impersonate(self, req, user):
        """Impersonate-User / Impersonate-Group headers (kubectl --as, --as-group)."""
        name = req.header("impersonate-user")
        if not name:
            return user
        groups = [v.decode() for k, v in req.scope.get("headers", []) if k.decode().lower() == "impersonate-group"]
        sa = name.split(":")
        kind = "serviceaccounts" if len(sa) == 4 and name.startswith("system:serviceaccount:") else "users"
        attrs = {"verb": "impersonate", "group": "", "resource": kind, "subresource": "",
                 "name": sa[3] if kind == "serviceaccounts" else name, "namespace": sa[2] if kind == "serviceaccounts" else None}
        if not self.authz.allowed(user, attrs, await self.rbac_objects()):
            raise errors.ApiError(403, "Forbidden", f'{kind} "{attrs["name"]}" is forbidden: User "{user.name}" cannot '
                                  f'impersonate resource "{kind}" in API group "" at the cluster scope',
                                  {"name": attrs["name"], "kind": kind})
        if not groups:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa[2]}"] if kind == "serviceaccounts" else []
        return auth.User(name, "", groups + ["system:authenticated"])

    async def rbac_objects(self):
        out = []
        for plural in ("clusterroles", "clusterrolebindings", "roles", "rolebindings"):
            res = self.registry.find("rbac.authorization.k8s.io", "v1", plural)
            _, objs, _, _ = await self.store.list(res, None)
            out += [dict(o, kind=res.kind) for o in objs]
        return out

    async def route(self, req):
        parts = [unquote(p) for p in req.path.strip("/").split("/") if p]
        if "system:masters" not in req.user.groups:
            req.rbac_objects = await self.rbac_objects()
        if not parts or parts[0] not in ("api", "apis") or (parts[0] == "api" and len(parts) < 2) or \
                (parts[0] == "apis" and len(parts) < 3):
            self.authorize(req, {"path": req.path, "verb": req.method.lower()})
            return self.non_resource(req, parts)
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            self.authorize(req, {"path": req.path, "verb": "get"})
            if self.registry.api_group(group) is None or version not in [v for g, v in self.registry.groups() if g == group]:
                raise errors.ApiError(404, "NotFound", "the server could not find the requested resource", {})
            return handlers.Reply(200, self.registry.resource_list(group, version))
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        res = self.registry.find(group, version, rest[0])
        if res is None or (ns is not None and not res.namespaced):
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource", {})
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in res.subresources:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource", {})
        verb = self.verb(req, name)
        attrs = {"verb": verb, "group": group, "resource": res.plural, "subresource": sub, "name": name,
                 "namespace": ns, "res": res}
        self.authorize(req, attrs)
        return await self.dispatch(req, res, ns, name, sub, verb)

    def verb(self, req, name):
        m = req.method
        if m == "GET":
            if name:
                return "get"
            return "watch" if req.q("watch") in ("1", "true") else "list"
        return {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection"}.get(m, m.lower())

    async def dispatch(self, req, res, ns, name, sub, verb):
        h = self.handlers
        if req.q("dryRun"):  # refused rather than written for real
            raise errors.bad_request("dryRun is not supported by this test API server")
        if res.namespaced and ns is None and verb not in ("list", "watch"):
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if verb == "create" and name is None and res.group in ("authentication.k8s.io", "authorization.k8s.io"):
            return await self.review(req, res)
        if verb == "create" and sub == "token":
            return await self.token_request(req, res, ns, name)
        if sub == "scale" and verb in ("get", "update", "patch"):
            return await scale.handle(h, req, res, ns, name, verb)
        if verb in ("get", "list", "watch") and req.method == "GET":
            if verb == "get":
                return self.sorted(res, await h.get(req, res, ns, name))
            if verb == "watch":
                return await h.watch(req, res, ns)
            return self.sorted(res, await h.list(req, res, ns))
        if verb == "create" and name is None:
            return self.sorted(res, await h.create(req, res, ns))
        if verb == "update":
            return self.sorted(res, await h.update(req, res, ns, name, sub))
        if verb == "patch":
            return self.sorted(res, await h.patch(req, res, ns, name, sub))
        if verb == "delete" and not sub:
            return self.sorted(res, await h.delete(req, res, ns, name))
        if verb == "deletecollection":
            return await h.delete_collection(req, res, ns)
        raise errors.method_not_allowed()

    @staticmethod
    def sorted(res, reply):
        if res.crd is not None and isinstance(reply.body, dict) and reply.body.get("kind") not in ("Table", "Status"):
            reply.body = sort_keys(reply.body)
        return reply

    # ---- non-resource endpoints ---------------------------------------------------------------

    def non_resource(self, req, parts):
        path = "/" + "/".join(parts)
        if path == "/version":
            return handlers.Reply(200, encode(VERSION, indent=True))
        if path in ("/healthz", "/livez", "/readyz"):
            return handlers.Reply(200, "ok", [("content-type", "text/plain; charset=utf-8"),
                                              ("x-content-type-options", "nosniff")])
        if path == "/openapi/v3":
            return handlers.Reply(200, openapi.index(self.registry))
        if path.startswith("/openapi/v3/"):
            gv = parts[2:]
            if gv and gv[0] == "api" and len(gv) == 2:
                return handlers.Reply(200, openapi.document(self.registry, "", gv[1]))
            if gv and gv[0] == "apis" and len(gv) == 3 and self.registry.api_group(gv[1]):
                return handlers.Reply(200, openapi.document(self.registry, gv[1], gv[2]))
        accept = req.header("accept") or ""
        if path in ("/api", "/apis"):
            if "as=APIGroupDiscoveryList" in accept.split(",")[0] or (
                    "as=APIGroupDiscoveryList" in accept and "v=v2;" in accept):
                body = encode(self.registry.aggregated(path == "/api"))
                etag = '"' + hashlib.sha512(body).hexdigest().upper() + '"'
                hdrs = [("cache-control", "public"), ("content-type", AGG), ("etag", etag), ("vary", "Accept")]
                if req.header("if-none-match") == etag:
                    return handlers.Reply(304, b"", hdrs)
                return handlers.Reply(200, body, hdrs)
            if path == "/api":
                host = req.scope.get("server") or ("127.0.0.1", 6443)
                return handlers.Reply(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{host[0]}:{host[1]}"}]})
            return handlers.Reply(200, self.registry.api_group_list())
        if len(parts) == 2 and parts[0] == "apis":
            g = self.registry.api_group(parts[1])
            if g is not None:
                return handlers.Reply(200, g)
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource", {})

    # ---- special resources --------------------------------------------------------------------

    async def sa_uid(self, ns, name):
        res = self.registry.find("", "v1", "serviceaccounts")
        try:
            return (await self.store.get(res, ns, name))["metadata"]["uid"]
        except errors.ApiError:
            return None

    async def token_request(self, req, res, ns, name):
        sa = await self.store.get(res, ns, name)
        body = json.loads(req.body or b"{}")
        spec = body.get("spec") or {}
        seconds = int(spec.get("expirationSeconds") or 3600)
        token, exp = self.authn.issue(ns, name, sa["metadata"]["uid"], seconds, spec.get("audiences"))
        expires = datetime.datetime.fromtimestamp(exp, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        t = now()
        mgr = req.q("fieldManager") or (req.header("user-agent") or "unknown").split("/")[0]
        tr = builtin.Kind("authentication.k8s.io", "TokenRequest")
        mf = fields.update(None, {"spec": spec} if spec else {}, [], mgr, "token", "authentication.k8s.io/v1", t,
                           dot=builtin.dot_rule(tr), atomic=builtin.atomic_rule(tr))
        md = {"name": name, "namespace": ns, "creationTimestamp": t}
        if mf:
            md["managedFields"] = mf
        out = {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1", "metadata": md,
               "spec": {"audiences": spec.get("audiences") or self.authn.audiences, "expirationSeconds": seconds,
                        "boundObjectRef": spec.get("boundObjectRef")},
               "status": {"token": token, "expirationTimestamp": expires}}
        return handlers.Reply(201, out)

    async def review(self, req, res):
        if (req.header("content-type") or "").startswith("application/vnd.kubernetes.protobuf"):
            if res.kind != "SelfSubjectAccessReview":
                raise errors.ApiError(415, "UnsupportedMediaType", "this test server reads protobuf only for "
                                      "SelfSubjectAccessReview (kubectl auth can-i)")
            try:
                body = {"kind": res.kind, "apiVersion": res.api_version,
                        "spec": pb.access_review_spec(pb.unwrap(req.body))}
            except ValueError as e:
                raise errors.bad_request(f"protobuf: {e}")
        else:
            body = json.loads(req.body or b"{}")
        u = req.user
        if res.kind == "SelfSubjectReview":
            info = {"username": u.name}
            if u.uid:
                info["uid"] = u.uid
            info["groups"] = u.groups
            if u.extra:
                info["extra"] = u.extra
            return handlers.Reply(201, {"kind": res.kind, "apiVersion": res.api_version,
                                        "metadata": {"creationTimestamp": now()}, "status": {"userInfo": info}})
        if res.kind == "SelfSubjectAccessReview":
            ra = (body.get("spec") or {}).get("resourceAttributes") or {}
            nra = (body.get("spec") or {}).get("nonResourceAttributes")
            attrs = {"verb": ra.get("verb", ""), "group": ra.get("group", ""), "resource": ra.get("resource", ""),
                     "subresource": ra.get("subresource", ""), "name": ra.get("name"), "namespace": ra.get("namespace")}
            if nra:
                attrs = {"verb": nra.get("verb", ""), "path": nra.get("path", "")}
            ok = self.authz.allowed(u, attrs, getattr(req, "rbac_objects", []))
            out = dict(body, metadata={"creationTimestamp": None}, status={"allowed": ok})
            return handlers.Reply(201, out)
        raise errors.method_not_allowed()

    async def crd_created(self, crd):
        """Serve a new CRD; it answers with the initial status and is Established at once."""
        self.registry.add_crd(crd)
        res = self.registry.find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        new = json.loads(json.dumps(crd))
        names = crd["spec"]["names"]
        t = now()
        new["status"] = {"conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": t, "reason": "NoConflicts",
             "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": t, "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted"}],
            "acceptedNames": {k: names[k] for k in ("plural", "singular", "shortNames", "kind", "listKind",
                                                     "categories") if k in names},
            "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]}
        new["metadata"]["managedFields"] = fields.update(
            crd, new, crd["metadata"].get("managedFields", []), "kube-apiserver", "status", "apiextensions.k8s.io/v1",
            t, dot=builtin.dot_rule(res), atomic=builtin.atomic_rule(res))
        await self.store.put(res, crd, new)
        return crd


async def bootstrap(app, crds):
    """Default namespaces and the CRDs given at start (stored so kubectl can read them)."""
    ns_res = app.registry.find("", "v1", "namespaces")
    crd_res = app.registry.find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        obj = {"kind": "Namespace", "apiVersion": "v1",
               "metadata": {"name": ns, "uid": new_uid(), "creationTimestamp": now(),
                            "labels": {"kubernetes.io/metadata.name": ns}},
               "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
        try:
            await app.store.create(ns_res, obj)
        except errors.ApiError:
            pass
    for crd in crds:
        obj = json.loads(json.dumps(crd))
        obj["metadata"].update(uid=new_uid(), creationTimestamp=now(), generation=1)
        try:
            await app.crd_created(await app.store.create(crd_res, obj))
        except errors.ApiError:
            pass
    # CRDs stored by an earlier run of this server on the same etcd
    _, objs, _, _ = await app.store.list(crd_res, None)
    for o in objs:
        app.registry.add_crd(o)


def make_certs(d, host):
    """A CA and a server certificate for 127.0.0.1/localhost, as PEM files in d."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    import ipaddress

    def key():
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def pem_key(k):
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                               serialization.NoEncryption())
    t0 = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    ca_key, srv_key = key(), key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pillar-test-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(t0)
          .not_valid_after(t0 + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    srv = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
           .issuer_name(ca_name).public_key(srv_key.public_key()).serial_number(x509.random_serial_number())
           .not_valid_before(t0).not_valid_after(t0 + datetime.timedelta(days=2))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                       x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
           .sign(ca_key, hashes.SHA256()))
    files = [("ca.crt", ca.public_bytes(serialization.Encoding.PEM)),
             ("server.crt", srv.public_bytes(serialization.Encoding.PEM)), ("server.key", pem_key(srv_key))]
    # client certificates for tests: an admin (group system:masters) and a user without RBAC
    for base, cn, orgs in (("admin", "kubernetes-admin", ["system:masters"]), ("user", "jane", ["developers"])):
        k = key()
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs] +
                            [x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        c = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name).public_key(k.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(t0)
             .not_valid_after(t0 + datetime.timedelta(days=2))
             .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
             .sign(ca_key, hashes.SHA256()))
        files += [(f"{base}.crt", c.public_bytes(serialization.Encoding.PEM)), (f"{base}.key", pem_key(k))]
    for name, data in files:
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--etcd", required=True)
    ap.add_argument("--listen", default="127.0.0.1:6443")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--crds", nargs="*", default=[])
    ap.add_argument("--token-file")
    ap.add_argument("--rbac", nargs="*", default=[])
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    if host not in ("127.0.0.1", "::1", "localhost"):
        sys.exit("apiserver.py: listens on loopback only")
    if not os.path.exists(os.path.join(a.dir, "ca.crt")):  # a restart keeps the certificates
        make_certs(a.dir, host)
    registry = Registry()
    crds = registry.load_crd_files(a.crds)
    eh, ep = a.etcd.rsplit(":", 1)
    app = App(Etcd(eh, int(ep)), registry, auth.Authenticator(a.token_file, f"https://{host}:{port}", os.path.join(a.dir, "sa.key")),
              auth.Authorizer(a.rbac))

    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    class TlsConfig(Config):
        def create_ssl_context(self):
            # hypercorn resets the options; a Go server chooses by its own preference order
            ctx = super().create_ssl_context()
            ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
            return ctx
    cfg = TlsConfig()
    cfg.bind = [a.listen]
    cfg.certfile = os.path.join(a.dir, "server.crt")
    cfg.keyfile = os.path.join(a.dir, "server.key")
    cfg.alpn_protocols = ["h2", "http/1.1"]
    cfg.accesslog = None
    cfg.keep_alive_timeout = 3600
    cfg.include_server_header = False
    # kube-apiserver (Go crypto/tls) accepts only ECDHE suites in TLS 1.2 (transcript 12a)
    cfg.ciphers = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                   "ECDHE-RSA-AES256-GCM-SHA384:ECDHE+CHACHA20:ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:"
                   "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA")
    cfg.ca_certs = os.path.join(a.dir, "ca.crt")
    cfg.verify_mode = ssl.CERT_OPTIONAL
    track_peer_certificates()

    async def run():
        await bootstrap(app, crds)
        shutdown = asyncio.Event()

        async def ready():
            await asyncio.sleep(0.2)
            with open(os.path.join(a.dir, "ready"), "w") as f:
                f.write(f"{os.getpid()}\n")
        asyncio.ensure_future(ready())
        await serve(app, cfg, shutdown_trigger=shutdown.wait)
    asyncio.run(run())


if __name__ == "__main__":
    main()
