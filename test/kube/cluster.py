"""Start etcd and the test API server on free loopback ports with a fresh temp data dir.

    with Cluster() as c:       # c.url, c.kubeconfig, c.admin_token, c.ca, c.etcd_port
        ...

Also runnable: `cluster.py DIR` starts both, writes DIR/kubeconfig (admin token),
DIR/kubeconfig-cert (admin client certificate) and DIR/cluster.env (KUBECONFIG, KUBE_SERVER,
KUBE_CA, KUBE_TOKEN, ETCD_ENDPOINT for `. DIR/cluster.env`) and runs until SIGTERM/SIGINT.
The admin identity is a bearer token in group system:masters (DIR/tokens.csv).
"""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CRD_DIR = os.path.join(REPO, "charts", "pillar-csi", "files", "crds")
# How long etcd and the API server each get to start (seconds).  A start costs 2-4.5 s of CPU
# (etcd and apiserver.py together) and a process on a 2-core machine at load L gets about 2/L
# of a core: the whole start takes 18-28 s at load 18-21, and 52-91 s when held to 8 % of one
# CPU (a process's share at load 25).  Each server gets 120 s.
START_S = 120


def kubectl_minor():
    """The minor version of the kubectl on PATH (Debian's kubernetes-client is 1.20), 0 if none."""
    import json
    try:
        out = subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True, text=True,
                             timeout=30).stdout
        return int("".join(c for c in json.loads(out)["clientVersion"]["minor"] if c.isdigit()))
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PortTaken(RuntimeError):
    """The API server exited because another process bound its port first."""


def wait_port(port, timeout=START_S, proc=None):
    """Until the port takes connections; fails at once when proc (the server) has exited."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the server for port {port} exited ({proc.returncode})")
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


class Cluster:
    def __init__(self, crds=None, rbac=(), directory=None):
        self.dir = directory or tempfile.mkdtemp(prefix="pillar-kube-")
        self.own_dir = directory is None
        self.crds = crds if crds is not None else sorted(
            os.path.join(CRD_DIR, f) for f in os.listdir(CRD_DIR) if f.endswith(".yaml"))
        self.rbac = list(rbac)
        self.procs = {}

    def start_etcd(self):
        self.etcd_port, peer = free_port(), free_port()
        log = open(os.path.join(self.dir, "etcd.log"), "ab")
        self.procs["etcd"] = subprocess.Popen(
            ["etcd", "--data-dir", os.path.join(self.dir, "etcd"), "--name", "test",
             "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"test=http://127.0.0.1:{peer}"],
            stdout=log, stderr=log)
        log.close()
        try:
            wait_port(self.etcd_port, proc=self.procs["etcd"])
        except RuntimeError as e:
            raise RuntimeError(f"etcd did not start: {e}:\n" + open(os.path.join(self.dir, "etcd.log")).read()[-3000:])

    def start_apiserver(self, port=None):
        """Starts the API server on port (else the one it had, else a free one).  A free port
        taken by another process between free_port() and the server's bind is no failure: the
        server is started again on another (a given or earlier port must be that one)."""
        fixed = port or getattr(self, "port", None)
        for attempt in range(5):
            self.port = fixed or free_port()
            try:
                return self._start_apiserver()
            except PortTaken:
                if fixed or attempt == 4:
                    raise

    def _start_apiserver(self):
        ready = os.path.join(self.dir, "ready")
        if os.path.exists(ready):
            os.unlink(ready)
        path = os.path.join(self.dir, "apiserver.log")
        since = os.path.getsize(path) if os.path.exists(path) else 0
        log = open(path, "ab")
        cmd = ["/usr/bin/python3", os.path.join(HERE, "apiserver.py"), f"--etcd=127.0.0.1:{self.etcd_port}",
               f"--listen=127.0.0.1:{self.port}", f"--dir={self.dir}", f"--token-file={self.tokens}",
               "--crds", *self.crds]
        if self.rbac:
            cmd += ["--rbac", *self.rbac]
        self.procs["apiserver"] = subprocess.Popen(cmd, stdout=log, stderr=log)
        log.close()
        end = time.time() + START_S
        while not os.path.exists(ready):
            exited = self.procs["apiserver"].poll() is not None
            if exited or time.time() > end:
                with open(path, errors="replace") as f:
                    text = f.read()[since:]
                raise (PortTaken if exited and "Address already in use" in text else RuntimeError)(
                    "apiserver did not start:\n" + text[-3000:])
            time.sleep(0.05)
        wait_port(self.port, proc=self.procs["apiserver"])

    def stop(self, name):
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def __enter__(self):
        self.admin_token = secrets.token_hex(16)
        self.tokens = os.path.join(self.dir, "tokens.csv")
        with open(self.tokens, "w") as f:
            f.write(f'{self.admin_token},admin,admin-uid,"system:masters"\n')
        self.start_etcd()
        self.start_apiserver()
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca = os.path.join(self.dir, "ca.crt")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.write_kubeconfig(self.kubeconfig, self.admin_token)
        self.cert_kubeconfig = os.path.join(self.dir, "kubeconfig-cert")
        self.write_kubeconfig(self.cert_kubeconfig, None, os.path.join(self.dir, "admin.crt"),
                              os.path.join(self.dir, "admin.key"))
        self.user_cert, self.user_key = os.path.join(self.dir, "user.crt"), os.path.join(self.dir, "user.key")
        return self

    def write_kubeconfig(self, path, token, cert=None, key=None):
        """A kubeconfig for the server with a bearer token, or a client certificate and key."""
        user = f'{{token: "{token}"}}' if token else f'{{client-certificate: "{cert}", client-key: "{key}"}}'
        with open(path, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {{server: "{self.url}", certificate-authority: "{self.ca}"}}
users:
- name: test
  user: {user}
contexts:
- name: test
  context: {{cluster: test, user: test}}
current-context: test
""")

    def sa_kubeconfig(self, ns, sa, path, create=True):
        """A kubeconfig at path with a token of ServiceAccount ns/sa (service_account_token)."""
        self.write_kubeconfig(path, self.service_account_token(ns, sa, create))
        return path

    def service_account_token(self, ns, sa, create=True):
        """A token of ServiceAccount ns/sa from a TokenRequest (as the kubelet mounts it), creating
        the ServiceAccount first when create. Raises RuntimeError when the server refuses it."""
        from client import Client
        k = Client(self.port, self.ca, self.admin_token)
        if create:
            k.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                      {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
        st, _, raw, tr = k.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                                   {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                    "spec": {"expirationSeconds": 3600}})
        if st != 201:
            raise RuntimeError(raw)
        return tr["status"]["token"]

    def __exit__(self, *exc):
        self.stop("apiserver")
        self.stop("etcd")
        if self.own_dir and not os.environ.get("KEEP_KUBE_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":
    # SIGTERM/SIGINT leave the with-block, which stops both servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    d = sys.argv[1] if len(sys.argv) > 1 else None
    if d:
        os.makedirs(d, exist_ok=True)
    with Cluster(directory=d) as c:
        env = {"KUBECONFIG": c.kubeconfig, "KUBE_SERVER": c.url, "KUBE_CA": c.ca, "KUBE_TOKEN": c.admin_token,
               "KUBE_CERT_KUBECONFIG": c.cert_kubeconfig, "ETCD_ENDPOINT": f"127.0.0.1:{c.etcd_port}"}
        with open(os.path.join(c.dir, "cluster.env"), "w") as f:  # for shell scripts: . DIR/cluster.env
            f.write("".join(f"export {k}={v}\n" for k, v in env.items()))
        print(f"KUBECONFIG={c.kubeconfig}  server {c.url}  etcd 127.0.0.1:{c.etcd_port}", flush=True)
        while True:
            signal.pause()
