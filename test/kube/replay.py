#!/usr/bin/python3
"""Transcript replay: send each request recorded from kube-apiserver 1.32 (transcripts/, a copy
of ../shared/kube/transcripts) to the test API server in the recorded order and compare the
answer with the recording.

Normalised (must differ between two servers): uids, timestamps, resourceVersions (also inside
continue tokens), bearer tokens, ages in Table cells, the server port, Go pointer addresses
printed in messages, and the order of
managedFields entries (the server orders them by their timestamps).  Everything else is
compared: HTTP status, Content-Type, Cache-Control, Warning, ETag/Vary presence, and the parsed
body (watch streams: the event list).  Discovery answers are compared for the resources this
server serves (it does not serve pods' subresources, apps, batch ...): marked "match (served)".
Cases listed in EXPECTED_DIFF differ for a stated reason; any other difference fails.
Prints one line per transcript and "replay: N matched, M expected differences, K failed".
"""
import base64
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client import Client  # noqa: E402
from cluster import Cluster, kubectl_minor  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = os.environ.get("KUBE_TRANSCRIPTS", os.path.join(HERE, "transcripts"))
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
AGE = re.compile(r"^\d+(s|m|h|d|y)(\d+(s|m|h|d))?$")
SKIP = "skip: "
EXPECTED_DIFF = {
    "07c": "watch-cache artifact of etcd 3.4 (504 ResourceVersionTooLarge); this server watches etcd directly and works as 07p",
    "07d": "watch-cache artifact (in-stream 500 for sendInitialEvents on etcd 3.4); this server streams the initial events",
    "07g": "watch cache still held the compacted window; a server on etcd directly answers 410 as 07r",
    "07h": "watch-cache wording of the 410 ('too old resource version: 100 (228)'); this server words it as the etcd path (07r)",
    "07a": "the watch cache sent two BOOKMARK events before the timeout; the etcd path sends none (07q)",
    "08f": "the recorded list holds kube-apiserver's own identity Lease",
    "13a": "/openapi/v2 (1.9 MB) is not served, and gzip compression of large answers is not implemented",
}


def unb64(s):
    return json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


def b64(d):
    return base64.urlsafe_b64encode(json.dumps(d, separators=(",", ":")).encode()).decode().rstrip("=")


class Replayer:
    def __init__(self, cluster):
        self.c = cluster
        self.k = Client(cluster.port, cluster.ca, cluster.admin_token)
        self.rv, self.uid = {}, {}
        self.sa_token = None

    # ---- identifier mapping -------------------------------------------------------------------

    def learn(self, rec, ours):
        if isinstance(rec, dict) and isinstance(ours, dict):
            for k, v in rec.items():
                if k not in ours:
                    continue
                if k == "resourceVersion" and isinstance(v, str) and isinstance(ours[k], str):
                    self.rv[v] = ours[k]
                elif k == "uid" and isinstance(v, str) and isinstance(ours[k], str):
                    self.uid[v] = ours[k]
                elif k == "continue" and v and ours[k]:
                    try:
                        self.rv[str(unb64(v)["rv"])] = str(unb64(ours[k])["rv"])
                    except (ValueError, KeyError):
                        pass
                else:
                    self.learn(v, ours[k])
        elif isinstance(rec, list) and isinstance(ours, list):
            for a, b in zip(rec, ours):
                self.learn(a, b)

    def map_rv(self, v):
        """Our resourceVersion for a recorded one; one older than every recorded object (07h's
        "100") maps to 1, older than anything here too."""
        if v in self.rv or not v.isdigit() or v == "0":
            return self.rv.get(v, v)
        known = [int(k) for k in self.rv if k.isdigit() and k != "0"]
        return "1" if known and int(v) < min(known) else v

    def tr_text(self, s):
        for a, b in self.uid.items():
            s = s.replace(a, b)
        return s

    def tr_obj(self, o):
        if isinstance(o, dict):
            out = {}
            for k, v in o.items():
                if k == "resourceVersion" and isinstance(v, str):
                    out[k] = self.rv.get(v, v)
                else:
                    out[k] = self.tr_obj(v)
            return out
        if isinstance(o, list):
            if all(isinstance(x, dict) and "op" in x for x in o):
                return [dict(x, value=self.rv.get(x["value"], x["value"]))
                        if x.get("path", "").endswith("resourceVersion") and isinstance(x.get("value"), str)
                        else self.tr_obj(x) for x in o]
            return [self.tr_obj(x) for x in o]
        if isinstance(o, str):
            return self.tr_text(o)
        return o

    def tr_path(self, path):
        def sub(m):
            k, v = m.group(1), m.group(2)
            if k == "resourceVersion":
                return f"{k}={self.map_rv(v)}"
            if k == "continue":
                try:
                    d = unb64(v)
                    d["rv"] = int(self.rv.get(str(d["rv"]), d["rv"]))
                    return f"{k}={b64(d)}"
                except ValueError:
                    return m.group(0)
            if k == "timeoutSeconds":
                return f"{k}={min(int(v), 3)}"
            return m.group(0)
        return re.sub(r"(resourceVersion|continue|timeoutSeconds)=([^&]*)", sub, self.tr_text(path))

    # ---- sending ------------------------------------------------------------------------------

    def token_for(self, case, headers):
        if case in ("11h", "11i"):
            return ""
        if headers.get("Authorization") and case == "11j":
            return "not-a-valid-token"
        if headers.get("Authorization") and case == "11k":
            head, body, sig = self.sa_token.split(".")
            return f"{head}.{body}.{sig[:-4]}AAAA"
        if headers.get("Authorization"):
            return self.sa_token
        return None

    def send(self, case, req):
        body = req.get("body")
        if isinstance(body, str):
            try:
                body = json.dumps(self.tr_obj(json.loads(body)), separators=(",", ":"))
            except ValueError:
                body = self.tr_text(body)
        elif body is not None:
            body = self.tr_obj(body)
        hdrs = {k: v for k, v in req.get("headers", {}).items() if k not in ("Host", "Authorization")}
        return self.k.request(req["method"], self.tr_path(req["path"]), body, hdrs,
                              token=self.token_for(case, req.get("headers", {})))

    def exchange(self, case, req, resp):
        st, h, raw, body = self.send(case, req)
        if resp and isinstance(resp.get("body"), (dict, list)) and body is not None:
            self.learn(resp["body"], body)
        if case == "11a" and body and body.get("status", {}).get("token"):
            self.sa_token = body["status"]["token"]
        return st, h, raw, body

    def watch(self, case, d):
        req, resp = d["request"], d["response"]
        if "list_before_watch" in d:
            lb = d["list_before_watch"]
            self.exchange(case, lb["request"], lb["response"])
        path = self.tr_path(req["path"])
        result = {}

        def run():
            result["st"], result["ev"] = self.k.watch(path, timeout=15)
        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.5)
        for ch in d.get("changes_made_during_watch", []):
            self.exchange(case, ch["request"], ch.get("response"))
        t.join()
        return result["st"], result["ev"]

    def etcd(self, path, body):
        return json.loads(urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{self.c.etcd_port}{path}", json.dumps(body).encode()), timeout=10).read())

    def compact(self):
        """etcdctl compact <current revision>; a write outside /registry first advances the revision
        (the recordings compacted past writes they did not record)."""
        self.etcd("/v3/kv/put", {"key": base64.b64encode(b"/replay/tick").decode(), "value": ""})
        rev = self.etcd("/v3/kv/range", {"key": base64.b64encode(b"/replay/tick").decode()})["header"]["revision"]
        self.etcd("/v3/kv/compaction", {"revision": rev, "physical": True})
        return rev


def norm(v, key=None, date_cols=()):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            k = UUID.sub("<uid>", k)
            if k in ("uid", "resourceVersion") and isinstance(x, str):
                out[k] = f"<{k}>"
            elif k == "continue" and isinstance(x, str) and x:
                d = unb64(x)
                out[k] = {"rv": "<rv>" if d.get("rv", -1) != -1 else -1, "start": d.get("start")}
            elif k == "managedFields" and isinstance(x, list):
                # their order follows their timestamps, which are normalised away
                out[k] = sorted(norm(x), key=lambda e: (e.get("operation") != "Apply", e.get("manager", ""),
                                                        e.get("subresource", "")))
            elif k == "token" and isinstance(x, str):
                out[k] = "<token>"
            elif k == "rows" and isinstance(x, list):
                cols = [i for i, c in enumerate(v.get("columnDefinitions", [])) if c.get("type") == "date"]
                out[k] = [norm(r, date_cols=cols) for r in x]
            elif k == "cells" and isinstance(x, list):
                out[k] = ["<age>" if i in date_cols and isinstance(c, str) and AGE.match(c) else norm(c)
                          for i, c in enumerate(x)]
            else:
                out[k] = norm(x, k)
        return out
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, str):
        if TIME.match(v):
            return "<time>"
        v = UUID.sub("<uid>", v)
        v = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", v)
        v = re.sub(r"\)\(0xc[0-9a-f]+\)", ")(<pointer>)", v)  # Go pointer addresses in %#v dumps
        v = re.sub(r"(ResourceVersion in record|resourceVersion:?) \(?\d+\)?", r"\1 <rv>", v)
        return v
    return v


def first_diff(a, b, path=""):
    if type(a) is not type(b):
        return f"{path or '.'}: recorded {json.dumps(a)[:120]} / ours {json.dumps(b)[:120]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: {'missing in ours' if k in a else 'extra in ours'} ({json.dumps(a.get(k, b.get(k)))[:120]})"
            d = first_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items recorded, {len(b)} ours"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path or '.'}: recorded {json.dumps(a)[:160]} / ours {json.dumps(b)[:160]}"


HEADERS = ("content-type", "cache-control", "warning", "x-content-type-options")


def compare_http(resp, st, h, body):
    if st != resp["status"]:
        return f"status {st}, recorded {resp['status']}: {json.dumps(body)[:300]}"
    rh = {k.lower(): v for k, v in resp.get("headers", {}).items()}
    for k in HEADERS:
        if rh.get(k) != h.get(k):
            return f"header {k}: recorded {rh.get(k)!r}, ours {h.get(k)!r}"
    for k in ("etag", "vary"):
        if (k in rh) != (k in h):
            return f"header {k} presence differs"
    if resp.get("body") is None:
        return None
    return first_diff(norm(resp["body"]), norm(body))


def served_subset(rec, ours):
    """Restrict a recorded discovery document to the resources/groups present in ours."""
    if rec.get("kind") == "APIResourceList":
        names = {r["name"] for r in ours.get("resources", [])}
        return dict(rec, resources=[r for r in rec["resources"] if r["name"] in names])
    if rec.get("kind") == "APIGroupList":
        names = {g["name"] for g in ours.get("groups", [])}
        return dict(rec, groups=[g for g in rec["groups"] if g["name"] in names])
    if rec.get("kind") == "APIGroupDiscoveryList":
        mine = {(i["metadata"].get("name", ""), v["version"]): {r["resource"]: r for r in v["resources"]}
                for i in ours["items"] for v in i["versions"]}
        items = []
        for i in rec["items"]:
            vs = []
            for v in i["versions"]:
                m = mine.get((i["metadata"].get("name", ""), v["version"]))
                if m is not None:
                    res = []
                    for r in v["resources"]:
                        if r["resource"] in m:
                            subs = {s["subresource"] for s in m[r["resource"]].get("subresources", [])}
                            r = dict(r)
                            if "subresources" in r:
                                r["subresources"] = [s for s in r["subresources"] if s["subresource"] in subs]
                                if not r["subresources"]:
                                    del r["subresources"]
                            res.append(r)
                    vs.append(dict(v, resources=res))
            if vs:
                items.append(dict(i, versions=vs))
        return dict(rec, items=items)
    return rec


DISCOVERY = ("01b", "01c", "01d", "01e", "01f", "01g", "01h", "01i", "01j", "01k", "01l")


# Changes the recorder made between cases without recording them, visible in later answers.
BRIDGE = {
    "03a": [("DELETE", "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents/unknown-field", None, None)],
    "08a": [("PATCH", "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents/storage-1", "application/merge-patch+json",
             {"metadata": {"labels": {"bump": "1"}}})],
    # a status write at 21:51:16 (capabilities, discoveredPools), shown by 11e's answer
    "11e": [("PATCH", "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents/storage-1/status", "application/merge-patch+json",
             lambda d: {"status": d["response"]["body"]["status"]})],
}
# 07o was recorded after the 11x cases (its resourceVersions are higher).
LATE = ("07o",)
files_01j = None


def run_case(r, cid, d):
    """Returns None on a match, or the first difference."""
    for method, path, ctype, body in BRIDGE.get(cid, []):
        r.k.request(method, path, body(d) if callable(body) else body, {"Content-Type": ctype} if ctype else None)
    for s in d.get("setup") or [] if isinstance(d.get("setup"), list) else []:
        r.exchange(cid, s["request"], s.get("response"))
    if cid == "07f":
        r.compact()
        return None
    if cid == "10p":
        for c in d["commands"]:
            args = shlex.split(c["cmd"])
            p = subprocess.run(["kubectl", f"--kubeconfig={r.c.kubeconfig}"] + args[1:], capture_output=True,
                               text=True, timeout=60)
            want, got = c["stdout"], p.stdout
            if args[-1].startswith("pvc-"):  # the table: ages differ
                want, got = re.sub(r"\s+\S+\s*$", "", want), re.sub(r"\s+\S+\s*$", "", got)
            if (p.returncode, got) != (c["rc"], want):
                return f"{c['cmd']}: rc {p.returncode}, stdout {got!r} / recorded {want!r}"
        return None
    if cid in ("01m", "04h"):
        return kubectl_v9(r, d)
    if cid == "12a":
        return tls_survey(r, d)
    if cid == "12b":
        for key in ("curl_http2_default",):
            p = subprocess.run(["curl", "-sS", "--http2", "--cacert", r.c.ca, "-H", f"Authorization: Bearer {r.c.admin_token}",
                                "-w", "\n%{http_version}", f"{r.c.url}/version"], capture_output=True, text=True, timeout=30)
            body, _, ver = p.stdout.rpartition("\n")
            rec = json.loads(d[key]["stdout"])
            if ver != "2":
                return f"HTTP version {ver}, recorded 2"
            diff = first_diff({k: v for k, v in rec.items() if k not in ("gitVersion", "gitCommit", "buildDate")},
                              {k: v for k, v in json.loads(body).items() if k not in ("gitVersion", "gitCommit", "buildDate")})
            if diff:
                return diff
        return None
    if "exchanges" in d:
        for ex in d["exchanges"]:
            if "request" not in ex:
                continue
            st, h, raw, body = r.exchange(cid, ex["request"], ex.get("response"))
            diff = compare_http(ex["response"], st, h, body)
            if diff:
                return f"[{ex.get('variant', '')}] {diff}"
        return None
    if "request" not in d:
        return "not replayable (no request recorded)"
    if "first_page" in d:  # 07l: a page taken before a compaction, continued after it
        fp = d["first_page"]
        st, h, raw, body = r.exchange(cid, fp["request"], {"body": {"metadata": fp["response_metadata"]}})
        r.compact()
    if "events" in d["response"]:
        st, events = r.watch(cid, d)
        if st != d["response"]["status"]:
            return f"watch status {st}, recorded {d['response']['status']}"
        return first_diff(norm(d["response"]["events"]), norm(events))
    st, h, raw, body = r.exchange(cid, d["request"], d["response"])
    if "status_patch" in d:
        sp = d["status_patch"]
        r.exchange(cid, sp["request"], sp.get("response"))
    resp = d["response"]
    if cid in DISCOVERY and isinstance(resp.get("body"), dict) and isinstance(body, dict):
        resp = dict(resp, body=served_subset(resp["body"], body))
    if cid == "01a" or cid == "11i":
        resp = dict(resp, body={k: v for k, v in resp["body"].items() if k not in ("gitVersion", "gitCommit", "buildDate")})
        body = {k: v for k, v in (body or {}).items() if k not in ("gitVersion", "gitCommit", "buildDate")}
    if cid == "01k":  # If-None-Match with this server's own ETag of the 01j answer
        etag = r.exchange(cid, files_01j["request"], None)[1].get("etag")
        req = dict(d["request"], headers=dict(d["request"]["headers"], **{"If-None-Match": etag}))
        st, h, raw, body = r.exchange(cid, req, None)
        return compare_http(d["response"], st, h, None) if raw == b"" else f"304 with a body {raw[:80]!r}"
    return compare_http(resp, st, h, body)


REQ_LINE = re.compile(r'"Response" verb="(\w+)" url="([^"]+)" status="([^"]*)"|^\S+ \S+ +\d+ \S+\] (GET|POST|PUT|PATCH|DELETE) (https://\S+) (\d+ [A-Za-z ]+?) in ')


def kubectl_v9(r, d):
    """kubectl get pa -v=9: the requests kubectl sends (cold, then warm discovery cache) and its output."""
    if kubectl_minor() < 30:
        return SKIP + f"kubectl 1.{kubectl_minor()} predates the aggregated discovery kubectl 1.32 recorded here"
    r.kubectl_cache = getattr(r, "kubectl_cache", None) or tempfile.mkdtemp(prefix="pillar-replay-kcache-")
    p = subprocess.run(["kubectl", f"--kubeconfig={r.c.kubeconfig}", "get", "pa", "-v=9", f"--cache-dir={r.kubectl_cache}"],
                       capture_output=True, text=True, timeout=60)
    sent = []
    for line in p.stderr.splitlines():
        m = REQ_LINE.search(line)
        if m:
            method, url, status = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(4), m.group(5), m.group(6))
            sent.append((method, re.sub(r"^https://[^/]+", "", url), status))
    want = [(x["method"], re.sub(r"^https://[^/]+", "", x["url"]), x["status"]) for x in d["requests_sent"]]
    if sent != want:
        return f"kubectl sent {sent}, recorded {want}"
    strip = lambda t: [re.sub(r"\s+\S+$", "", l) for l in t.splitlines()]  # the AGE column
    if strip(p.stdout) != strip(d["stdout"]):
        return f"kubectl printed {p.stdout!r}, recorded {d['stdout']!r}"
    return None


def _s_client(r, cmd):
    """Run a recorded openssl s_client command against this server; (handshake ok, summary lines)."""
    args = shlex.split(cmd.replace("<dir>/pki/ca.crt", r.c.ca).replace("<dir>/pki/admin.crt", os.path.join(r.c.dir, "admin.crt"))
                       .replace("<dir>/pki/admin.key", os.path.join(r.c.dir, "admin.key"))
                       .replace("127.0.0.1:6443", f"127.0.0.1:{r.c.port}"))
    # errors="replace": after an h2 handshake s_client may print the server's first HTTP/2 frames
    # (SETTINGS: binary, e.g. 0xff), depending on whether they arrive before it quits
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                       timeout=20)
    out = p.stdout + p.stderr
    lines = {l.strip() for l in out.splitlines()}
    return p.returncode == 0 and "Cipher is (NONE)" not in out, lines


def tls_survey(r, d):
    """12a: the handshakes a Go server accepts and refuses (versions, suites, ALPN, curves)."""
    for e in d["openssl_s_client"]:
        ok, lines = _s_client(r, e["cmd"])
        if ok != e["handshake_ok"]:
            return f"{e['label']}: handshake {'succeeded' if ok else 'failed'}, recorded the opposite"
        for key in ("protocol_cipher", "alpn", "alpn_none", "server_temp_key"):
            if key in e.get("summary", {}) and e["summary"][key] not in lines:
                return f"{e['label']}: no line {e['summary'][key]!r}"
    accepted = []
    for suite in d["tls12_suites_offered_by_openssl"]:
        ok, _ = _s_client(r, f"openssl s_client -connect 127.0.0.1:6443 -CAfile <dir>/pki/ca.crt -tls1_2 -cipher {suite}")
        if ok:
            accepted.append(suite)
    if sorted(accepted) != sorted(d["tls12_suites_accepted_by_server"]):
        return f"TLS 1.2 suites accepted {accepted}, recorded {d['tls12_suites_accepted_by_server']}"
    return None


def second_run(r, files):
    """07p-07u were recorded on a fresh kube-apiserver with --watch-cache=false."""
    r.exchange("00a", files["00a"][1]["request"], None)
    time.sleep(0.2)
    d = files["07p"][1]
    lst = d["setup"]["create_and_list"]
    item = lst["response"]["body"]["items"][0]
    create = {"method": "POST", "path": "/apis/pillar-csi.bhyoo.com/v1alpha1/pillaragents",
              "headers": dict(lst["request"]["headers"], **{"Content-Type": "application/json"}),
              "body": {"apiVersion": item["apiVersion"], "kind": item["kind"], "metadata": {"name": item["metadata"]["name"]},
                       "spec": item["spec"]}}
    r.exchange("07p", create, {"body": item})
    r.exchange("07p", lst["request"], lst["response"])
    for u in d["setup"]["updates_after_list"]:
        r.exchange("07p", u["request"], u.get("response"))


def main():
    files = {}
    for f in sorted(os.listdir(DIR)):
        if re.match(r"^\d\d[a-z]-.*\.json$", f):
            with open(os.path.join(DIR, f)) as fh:
                files[f[:3]] = (f, json.load(fh))
    tmp = tempfile.mkdtemp(prefix="pillar-replay-")
    # The recording's CRDs: 00a creates PillarAgent through the API; PillarVolumeState preloaded.
    with open(os.path.join(DIR, "00-crds.yaml")) as fh:
        docs = [x for x in yaml.safe_load_all(fh) if x]
    pvst = os.path.join(tmp, "pvst.yaml")
    with open(pvst, "w") as fh:
        yaml.safe_dump([x for x in docs if x["spec"]["names"]["kind"] == "PillarVolumeState"][0], fh)
    results = []
    global files_01j
    files_01j = files["01j"][1]
    first = [c for c in files if not ("07p" <= c <= "07u") and c not in LATE] + list(LATE)
    second = [c for c in files if "07p" <= c <= "07u"]
    for run, cases in ((1, first), (2, second)):
        with Cluster(crds=[pvst]) as c:
            r = Replayer(c)
            if run == 2:
                second_run(r, files)
            for cid in cases:
                if run == 2 and cid == "07r":
                    r.compact()
                name, d = files[cid]
                try:
                    diff = run_case(r, cid, d)
                except Exception as e:  # a crash of the replay is a failure of that case
                    diff = f"exception {type(e).__name__}: {e}"
                results.append((cid, name, diff))
    matched = expected = failed = skipped = 0
    for cid, name, diff in results:
        if diff is not None and diff.startswith(SKIP):
            skipped += 1
            print(f"SKIP {name}: {diff[len(SKIP):]}")
        elif diff is None:
            matched += 1
            how = "match (served)" if cid in DISCOVERY and cid not in ("01a", "01k") else "match"
            print(f"PASS {name}: {how}" + (" (listed as an expected difference: now matches)" if cid in EXPECTED_DIFF else ""))
        elif cid in EXPECTED_DIFF:
            expected += 1
            print(f"DIFF {name}: expected difference: {EXPECTED_DIFF[cid]} [{diff[:200]}]")
        else:
            failed += 1
            print(f"FAIL {name}: {diff}")
    print(f"replay: {matched} matched, {expected} expected differences, {failed} failed"
          + (f", {skipped} skipped (not counted as matched)" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
