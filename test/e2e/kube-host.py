"""The host half of the e2e scenarios with "# e2e-kube: yes": the test API server on real etcd
(test/kube) for the VM, which reaches it through qemu's user-mode network (slirp, restrict=on: the
guest reaches nothing but the forwards below).

  kube-host.py serve DIR [RBAC_YAML...]  start etcd and the API server (DIR/cluster), namespace
        pillar-csi with the ServiceAccounts pillar-csi-controller and pillar-csi-node (tokens by
        TokenRequest, as the kubelet mounts them; with RBAC files the chart's rules apply to them),
        the Node and the CSINode kubelet makes for worker-1; writes the guest's kubeconfigs
        (DIR/guest/NAME.kubeconfig: server https://GUEST_API, tls-server-name localhost, the CA
        inline) and DIR/ready; runs until SIGTERM
  kube-host.py relay DIR    qemu guestfwd command, one per guest connection to GUEST_API: copies
        bytes both ways between it (stdin/stdout) and the API server on 127.0.0.1
  kube-host.py rpc DIR      qemu guestfwd command, one per guest request to GUEST_RPC: reads
        argument lines up to "@@END" and answers with the output, then "@@RC=<status>". Verbs:
          kubeconfig NAME           the guest's kubeconfig NAME (controller, node, admin)
          kubectl ARGS...           kubectl (the admin kubeconfig) as an operator types it
          kubectl-bg TAG ARGS...    the same in the background (e.g. a watch), output kept
          bg-output TAG             what that background kubectl printed so far
          api METHOD PATH [BODY]    one request to the API server as the admin (what a stand-in
                                    for kubelet or a workload controller sends, e.g. a DELETE with
                                    a UID precondition, which kubectl cannot send): the response
                                    body, status 0 for a 2xx answer, else 1
          mtls IP NAME              throwaway mutual-TLS material for an agent listening on IP
                                    and its controller (ECDSA P-256, one CA, made on the first
                                    request in DIR/mtls): NAME is ca.crt, agent.crt, agent.key
                                    (SAN IP), controller.crt or controller.key (client auth)
"""
import base64
import os
import select
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kube"))
GUEST_API = ("10.0.2.100", 6443)   # run.sh's guestfwd rules must name the same addresses
GUEST_RPC = ("10.0.2.100", 7071)
NS = "pillar-csi"
NODE = "worker-1"
P = "pillar-csi.bhyoo.com"


def guest_kubeconfig(path, ca_pem, token):
    ca = base64.b64encode(ca_pem).decode()
    with open(path + ".tmp", "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {{server: "https://{GUEST_API[0]}:{GUEST_API[1]}", tls-server-name: localhost,
            certificate-authority-data: "{ca}"}}
users:
- name: test
  user: {{token: "{token}"}}
contexts:
- name: test
  context: {{cluster: test, user: test}}
current-context: test
""")
    os.rename(path + ".tmp", path)


def must(k, method, path, body):
    st, _, raw, obj = k.request(method, path, body)
    if st not in (200, 201):
        raise RuntimeError(f"{method} {path}: {st} {raw}")
    return obj


def serve(d, rbac):
    from client import Client
    from cluster import Cluster
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    os.makedirs(os.path.join(d, "cluster"), exist_ok=True)
    os.makedirs(os.path.join(d, "guest"), exist_ok=True)
    os.makedirs(os.path.join(d, "bg"), exist_ok=True)
    with Cluster(rbac=rbac, directory=os.path.join(d, "cluster")) as c:
        k = Client(c.port, c.ca, c.admin_token)
        must(k, "POST", "/api/v1/namespaces",
             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        ca_pem = open(c.ca, "rb").read()
        for sa, name in (("pillar-csi-controller", "controller"), ("pillar-csi-node", "node")):
            tok = c.service_account_token(NS, sa) if rbac else c.admin_token
            guest_kubeconfig(os.path.join(d, "guest", name + ".kubeconfig"), ca_pem, tok)
        guest_kubeconfig(os.path.join(d, "guest", "admin.kubeconfig"), ca_pem, c.admin_token)
        # what kubelet does for a worker running the node plugin: its Node, and the CSINode it
        # creates once node-driver-registrar registered the driver (csi.md §6.1)
        node = must(k, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        must(k, "POST", "/apis/storage.k8s.io/v1/csinodes",
             {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
              "metadata": {"name": NODE, "ownerReferences": [
                  {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node["metadata"]["uid"]}]},
              "spec": {"drivers": [{"name": P, "nodeID": NODE, "topologyKeys": [f"{P}/nvmeof"]}]}})
        with open(os.path.join(d, "admin-token"), "w") as f:
            f.write(c.admin_token)
        with open(os.path.join(d, "port"), "w") as f:
            f.write(str(c.port))
        with open(os.path.join(d, "kubeconfig"), "w") as f:
            f.write(open(c.kubeconfig).read())
        open(os.path.join(d, "ready"), "w").close()
        print(f"kube-host: API server {c.url} for the guest at https://{GUEST_API[0]}:{GUEST_API[1]}", flush=True)
        try:
            while True:
                signal.pause()
        finally:
            stop_background(d)


def stop_background(d):
    """SIGTERM to the background kubectls the guest started (rpc kubectl-bg)."""
    bg = os.path.join(d, "bg")
    for f in os.listdir(bg):
        if f.endswith(".pid"):
            try:
                os.kill(int(open(os.path.join(bg, f)).read()), signal.SIGTERM)
            except (OSError, ValueError):
                pass


def quiet_stderr(d):
    """stderr is the guest's connection too (slirp hands the socket as fds 0, 1 and 2)."""
    fd = os.open(os.path.join(d, "guestfwd.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


def relay(d):
    quiet_stderr(d)
    port_file = os.path.join(d, "port")
    end = time.time() + 120
    while not os.path.exists(port_file) and time.time() < end:   # the API server still starting
        time.sleep(0.1)
    up = socket.create_connection(("127.0.0.1", int(open(port_file).read())))
    guest = socket.socket(fileno=os.dup(0))
    os.close(0)
    os.close(1)
    peer = {guest: up, up: guest}
    live = [guest, up]
    while live:
        for s in select.select(live, [], [])[0]:
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if data:
                peer[s].sendall(data)
                continue
            live.remove(s)
            try:
                peer[s].shutdown(socket.SHUT_WR)
            except OSError:
                pass


def mtls_material(d, ip):
    """Makes DIR/mtls/{ca,agent,controller}.{crt,key} once (the agent's certificate names ip)."""
    import datetime
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    out = os.path.join(d, "mtls")
    if os.path.exists(os.path.join(out, "done")):
        return out
    os.makedirs(out, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def make(cn, issuer=None, ca=False, sans=None, usage=None):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        b = (x509.CertificateBuilder().subject_name(name)
             .issuer_name(issuer[0].subject if issuer else name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        if usage:
            b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        return b.sign(issuer[1] if issuer else key, hashes.SHA256()), key

    def write(name, cert, key):
        with open(os.path.join(out, name + ".crt"), "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(os.path.join(out, name + ".key"), "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption()))
    ca = make("pillar-csi e2e CA", ca=True)
    write("ca", *ca)
    write("agent", *make("agent", ca, sans=[x509.IPAddress(ipaddress.ip_address(ip))],
                         usage=[ExtendedKeyUsageOID.SERVER_AUTH]))
    write("controller", *make("controller", ca, usage=[ExtendedKeyUsageOID.CLIENT_AUTH]))
    open(os.path.join(out, "done"), "w").close()
    return out


def rpc_answer(d, args):
    """(output bytes, status) of one request."""
    kc = os.path.join(d, "kubeconfig")
    if len(args) == 2 and args[0] == "kubeconfig" and args[1] in ("controller", "node", "admin"):
        return open(os.path.join(d, "guest", args[1] + ".kubeconfig"), "rb").read(), 0
    if args and args[0] == "kubectl":
        r = subprocess.run(["kubectl", "--kubeconfig", kc, *args[1:]], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60)
        return r.stdout + r.stderr, r.returncode
    if len(args) >= 2 and args[0] == "kubectl-bg" and args[1].isalnum():
        out = open(os.path.join(d, "bg", args[1] + ".out"), "wb")
        p = subprocess.Popen(["kubectl", "--kubeconfig", kc, *args[2:]], stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        with open(os.path.join(d, "bg", args[1] + ".pid"), "w") as f:   # serve ends it
            f.write(str(p.pid))
        return b"", 0
    if len(args) == 2 and args[0] == "bg-output" and args[1].isalnum():
        return open(os.path.join(d, "bg", args[1] + ".out"), "rb").read(), 0
    if len(args) in (3, 4) and args[0] == "api" and args[2].startswith("/"):
        from client import Client
        port = int(open(os.path.join(d, "port")).read())
        k = Client(port, os.path.join(d, "cluster", "ca.crt"), open(os.path.join(d, "admin-token")).read().strip())
        st, _, raw, _ = k.request(args[1], args[2], args[3] if len(args) == 4 else None)
        return raw, 0 if 200 <= st < 300 else 1
    if len(args) == 3 and args[0] == "mtls" and args[2] in (
            "ca.crt", "agent.crt", "agent.key", "controller.crt", "controller.key"):
        import ipaddress
        ipaddress.ip_address(args[1])   # ValueError: refused below
        return open(os.path.join(mtls_material(d, args[1]), args[2]), "rb").read(), 0
    return f"kube-host rpc: unknown request {args!r}\n".encode(), 2


def rpc(d):
    quiet_stderr(d)
    f = os.fdopen(0, "rb")
    args = []
    for line in f:
        line = line.rstrip(b"\n").decode()
        if line == "@@END":
            break
        args.append(line)
    try:
        out, rc = rpc_answer(d, args)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        out, rc = f"kube-host rpc: {e}\n".encode(), 1
    if out and not out.endswith(b"\n"):
        out += b"\n"
    with os.fdopen(1, "wb") as w:
        w.write(out + f"@@RC={rc}\n".encode())


if __name__ == "__main__":
    cmd, d = sys.argv[1], sys.argv[2]
    {"serve": lambda: serve(d, sys.argv[3:]), "relay": lambda: relay(d), "rpc": lambda: rpc(d)}[cmd]()
