"""Drives src/kube (driver.c) against the test API server on a real etcd (test/kube/cluster.py).
Each check prints PASS or FAIL; the exit status is non-zero when any failed."""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kube"))
from cluster import Cluster  # noqa: E402

DRIVER = sys.argv[1]
failed = 0


def check(ok, what, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else f"  [{detail}]"), flush=True)
    if not ok:
        failed += 1


class Driver:
    def __init__(self, kubeconfig):
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:halt_on_error=1")
        self.p = subprocess.Popen([DRIVER, kubeconfig], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=env)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def read(self):
        return self.p.stdout.readline().strip()

    def do(self, line):
        self.send(line)
        return self.read()

    def close(self):
        self.p.stdin.close()
        out = self.p.stdout.read()
        return self.p.wait(30), out


def field(answer, key):
    m = re.search(rf"\b{key}=(\S+)", answer)
    return m.group(1) if m else None


def pa(name, port=9500, rv=None):
    md = {"name": name, "labels": {"tier": "fast"}}
    if rv:
        md["resourceVersion"] = rv
    return json.dumps({"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarAgent",
                       "metadata": md, "spec": {"nodeRef": {"name": name, "port": port}}},
                      separators=(",", ":"))


def compact(c, rev):
    req = urllib.request.Request(f"http://127.0.0.1:{c.etcd_port}/v3/kv/compaction",
                                 json.dumps({"revision": str(rev), "physical": True}).encode())
    urllib.request.urlopen(req, timeout=10).read()


def crud(d):
    r = d.do("create " + pa("storage-1"))
    check(r.startswith("OK rv="), "create a PillarAgent: 201 with its resourceVersion and uid", r)
    r = d.do("create " + pa("storage-1"))
    check(r.startswith("ERR -17 AlreadyExists 409"), "create it again: -EEXIST AlreadyExists 409", r)
    r = d.do("get storage-1")
    rv1, uid = field(r, "rv"), field(r, "uid")
    check(r.startswith("OK") and uid != "-", "get: 200 with uid", r)
    r = d.do("get nope")
    check(r.startswith("ERR -2 NotFound 404"), "get a missing object: -ENOENT NotFound 404", r)
    r = d.do('jsonpatch storage-1 [{"op":"test","path":"/spec/nodeRef/port","value":1},'
             '{"op":"replace","path":"/spec/nodeRef/port","value":9600}]')
    check(r.startswith("ERR -22 Invalid 422"), "JSON patch whose test op fails: -EINVAL Invalid 422", r)
    r = d.do('jsonpatch storage-1 [{"op":"test","path":"/spec/nodeRef/port","value":9500},'
             '{"op":"replace","path":"/spec/nodeRef/port","value":9600}]')
    check(r.startswith("OK") and int(field(r, "rv")) > int(rv1), "JSON patch with a passing test op: 200", r)
    r = d.do(f'merge storage-1 {{"metadata":{{"resourceVersion":"{rv1}"}},"spec":{{"nodeRef":{{"port":9700}}}}}}')
    check(r.startswith("ERR -116 Conflict 409"), "merge patch carrying a stale resourceVersion: -ESTALE Conflict", r)
    r = d.do("update " + pa("storage-1", 9800, rv1))
    check(r.startswith("ERR -116 Conflict 409"), "update with a stale resourceVersion: -ESTALE Conflict", r)
    r = d.do("get storage-1")
    r = d.do("update " + pa("storage-1", 9800, field(r, "rv")))
    check(r.startswith("OK"), "update with the current resourceVersion: 200", r)
    return uid


def pages(d):
    for n in ("storage-2", "storage-3"):
        d.do("create " + pa(n))
    r = d.do("list 1")
    check(field(r, "pages") == "3" and field(r, "items") == "3", "paged list (limit=1): 3 pages, 3 items, one resourceVersion", r)
    check("NOTE" not in r, "every page has the first page's resourceVersion", r)


def watch_and_compaction(c, d, w):
    r = d.do("reflect")
    check(field(r, "rc") == "0" and field(r, "lists") == "1" and field(r, "items") == "3",
          "reflector: list (3 pages) then a watch the server ends after timeoutSeconds", r)
    listed = field(r, "rv")
    d.send("reflect")  # the next round resumes from the last resourceVersion while w writes
    time.sleep(0.5)
    r1 = w.do('merge storage-2 {"metadata":{"labels":{"zone":"a"}}}')
    w.do("create " + pa("storage-4"))
    r = d.read()
    check(field(r, "rc") == "0" and field(r, "lists") == "1" and field(r, "modified") == "1"
          and field(r, "added") == "1", "next round resumes from the last resourceVersion: no list, the writes as events", r)
    r = d.do("get storage-2")
    for i in range(3):
        d.do(f'merge storage-3 {{"metadata":{{"labels":{{"n":"{i}"}}}}}}')
    r = d.do("get storage-3")
    compact(c, int(field(r, "rv")))
    check(int(field(r, "rv")) > int(listed), "etcd compacted past the reflector's resourceVersion", r + " " + r1)
    r = d.do("reflect")
    check(field(r, "rc") == "-34" and field(r, "reason") == "Expired" and field(r, "rv") == "-",
          "watch from a compacted resourceVersion: 410 Expired (-ERANGE), resourceVersion dropped", r)
    r = d.do("reflect")
    check(field(r, "rc") == "0" and field(r, "lists") == "2" and field(r, "items") == "4",
          "next round relists (4 objects) and watches again", r)


def server_restart(c, d, w):
    """The API server dies under a running watch and comes back on the same port."""
    r = d.do("reflect")  # a full round: the resourceVersion is now the latest
    lists, rv = field(r, "lists"), field(r, "rv")
    d.send("reflect")
    time.sleep(0.5)
    c.stop("apiserver")
    r = d.read()
    check(field(r, "rc") not in ("0", "-34") and field(r, "rv") == rv,
          "API server killed under a watch: the round fails, the resourceVersion is kept", r)
    c.start_apiserver(c.port)
    r = w.do("create " + pa("storage-5"))
    check(r.startswith("OK"), "a write after the restart (the writer reconnects by itself)", r)
    r = d.do("reflect")
    check(field(r, "rc") == "0" and field(r, "lists") == lists and field(r, "added") == "1",
          "the next round resumes from the kept resourceVersion: the write made meanwhile, no relist", r)
    r = d.do("conns")
    check(field(r, "conns") == "2", "one new connection after the restart", r)


def deletes(d):
    r = d.do("get storage-2")
    uid, rv = field(r, "uid"), field(r, "rv")
    r = d.do("delete storage-2 00000000-0000-0000-0000-000000000000 -")
    check(r.startswith("ERR -116 Conflict 409"), "delete with a wrong uid precondition: -ESTALE Conflict", r)
    r = d.do(f"delete storage-2 {uid} {int(rv) - 1}")
    check(r.startswith("ERR -116 Conflict 409"), "delete with a stale resourceVersion precondition: Conflict", r)
    r = d.do(f"delete storage-2 {uid} {rv}")
    check(r.startswith("OK") and field(r, "status") == "Success", "delete with the right uid and resourceVersion: Success", r)
    r = d.do("get storage-2")
    check(r.startswith("ERR -2 NotFound"), "gone afterwards", r)


def token_rotation(c):
    tok = os.path.join(c.dir, "rotating-token")
    with open(tok, "w") as f:
        f.write("not-a-valid-token\n")
    kc = os.path.join(c.dir, "kubeconfig-tokenfile")
    with open(kc, "w") as f:
        f.write(f"""current-context: t
contexts: [{{name: t, context: {{cluster: c, user: u}}}}]
clusters: [{{name: c, cluster: {{server: "{c.url}", certificate-authority: "{c.ca}"}}}}]
users: [{{name: u, user: {{tokenFile: rotating-token}}}}]
""")
    d = Driver(kc)
    r = d.do("get storage-1")
    check(r.startswith("ERR -1 Unauthorized 401"), "token file with an invalid token: -EPERM Unauthorized 401", r)
    with open(tok + ".new", "w") as f:
        f.write(c.admin_token)
    os.rename(tok + ".new", tok)
    r = d.do("get storage-1")
    check(r.startswith("OK"), "the rotated token file is used by the next request, no restart", r)
    r = d.do("conns")
    check(field(r, "conns") == "1", "still one connection", r)
    rc, out = d.close()
    check(rc == 0, "driver exits cleanly (no leaks)", out)


def main():
    with Cluster() as c:
        d, w = Driver(c.kubeconfig), Driver(c.kubeconfig)
        crud(d)
        pages(d)
        watch_and_compaction(c, d, w)
        deletes(d)
        for name, drv in (("first", d), ("second", w)):
            r = drv.do("conns")
            check(field(r, "conns") == "1", f"{name} client: every request and watch on one connection", r)
        server_restart(c, d, w)
        for name, drv in (("first", d), ("second", w)):
            rc, out = drv.close()
            check(rc == 0, f"{name} driver exits cleanly (no leaks)", out)
        token_rotation(c)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
