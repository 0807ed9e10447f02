#!/usr/bin/python3
"""The metrics suite (run.sh describes it).  metrics_suite.py DIR; everything lives below DIR."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(REPO, "test", "kube"))
import nodehost  # noqa: E402
from cluster import Cluster  # noqa: E402
BIN = os.environ["PILLAR_BIN"]
NQN = "nqn.2026-01.com.bhyoo.pillar-csi:files.pvc-staged"
STAGED = "storage-1/nvmeof-tcp/file/files/pvc-staged"
CAP = {"mount": {"fsType": "ext4"}, "accessMode": {"mode": "SINGLE_NODE_WRITER"}}

# Every family of docs/metrics.md, by the role that serves it (histograms by their _count).
COMMON = ["pillar_csi_build_info", "pillar_csi_metrics_dropped_total", "process_cpu_seconds_total",
          "process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds",
          "process_max_fds", "process_start_time_seconds", "grpc_server_started_total",
          "grpc_server_handled_total", "grpc_server_msg_received_total", "grpc_server_msg_sent_total",
          "grpc_server_handling_seconds_count", "pillar_csi_grpc_server_pending_bytes",
          "pillar_csi_grpc_server_pending_limit_bytes"]
FAMILIES = {
    "controller": COMMON + [
        "pillar_csi_store_ready", "pillar_csi_volumes", "pillar_csi_volumes_export_unreconciled",
        "pillar_csi_agent_connected", "pillar_csi_agent_exports_ready",
        "pillar_csi_restore_duration_seconds_count", "pillar_csi_restore_last_volumes",
        "workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds_count",
        "workqueue_work_duration_seconds_count", "workqueue_retries_total",
        "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds",
        "grpc_client_started_total", "grpc_client_handled_total", "grpc_client_msg_received_total",
        "grpc_client_msg_sent_total", "grpc_client_handling_seconds_count",
        "rest_client_requests_total", "rest_client_request_duration_seconds_count",
        "rest_client_rate_limiter_duration_seconds_count", "pillar_csi_events_written_total",
        "pillar_csi_events_dropped_total"],
    "agent": COMMON + [
        "pillar_csi_agent_exports", "pillar_csi_agent_allowed_hosts",
        "pillar_csi_agent_export_restore_pending", "pillar_csi_agent_draining",
        "pillar_csi_agent_pool_capacity_bytes", "pillar_csi_agent_pool_available_bytes",
        "pillar_csi_agent_reconcile_state_duration_seconds_count"],
    # pillar_csi_agent_backend_command_duration_seconds: the file backend runs no commands;
    # test_backend checks it for zfs and lvm.
    "node": COMMON + [
        "pillar_csi_node_staged_volumes", "pillar_csi_node_volume_path_live",
        "pillar_csi_node_volume_path_down_seconds", "pillar_csi_node_volume_ctrl_loss_tmo_seconds",
        "pillar_csi_node_volume_controller_removed", "pillar_csi_node_connects_total",
        "pillar_csi_node_connect_duration_seconds_count"],
}


class Report:
    passed = failed = 0

    def check(self, name, ok, why=""):
        if ok:
            self.passed += 1
            print("PASS " + name)
        else:
            self.failed += 1
            print("FAIL %s%s" % (name, (": %s" % why) if why else ""))
        sys.stdout.flush()
        return ok


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(fn, timeout=20, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception:
            pass
        time.sleep(step)
    return None


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


class Procs:
    def __init__(self, base):
        self.base, self.procs = base, {}

    def start(self, name, args, env=None):
        log = open(os.path.join(self.base, name + ".log"), "ab")
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                            env=dict(os.environ, **(env or {})))
        log.close()

    def stop(self, name, sig=signal.SIGTERM):
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop_all(self):
        for name in list(self.procs):
            self.stop(name, signal.SIGKILL)


def cli(*args, stdin=None):
    r = subprocess.run([BIN] + list(args), capture_output=True, text=True, input=stdin, timeout=60)
    return r.returncode, r.stdout + r.stderr


def fake_host(root, host_uuid):
    """The node's fake host tree with one live controller of NQN (sys/class/nvme/nvme9999)."""
    nodehost.make_host(root, host_uuid)
    ctrl = os.path.join(root, "sys/class/nvme/nvme9999")
    os.makedirs(ctrl)
    for k, v in (("subsysnqn", NQN), ("state", "live"), ("ctrl_loss_tmo", "120"),
                 ("address", "traddr=127.0.0.1,trsvcid=4420")):
        with open(os.path.join(ctrl, k), "w") as f:
            f.write(v + "\n")
    return ctrl


def plant_record(state, staging):
    nodehost.plant_record(state, nodehost.stage_record(STAGED, staging, NQN, "127.0.0.1"))


def objects(host_uuid):
    return [
        {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarAgent", "metadata": {"name": "storage-1"},
         "spec": {"external": {"address": "127.0.0.1", "port": PORTS["agent"]}}},
        {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarStore", "metadata": {"name": "files"},
         "spec": {"agentRef": "storage-1", "backend": {"file": {"pool": "files"}}}},
        {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarProtocol", "metadata": {"name": "tcp"},
         "spec": {"protocol": {"nvmeofTcp": {"port": 4420, "acl": True, "ctrlLossTmo": 120, "reconnectDelay": 5}}}},
        {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarStorageClass", "metadata": {"name": "fast"},
         "spec": {"storeRef": "files", "protocolRef": "tcp"}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
         "metadata": {"name": "worker-1", "annotations": {
             "pillar-csi.bhyoo.com/nvmeof-host-nqn": "nqn.2014-08.org.nvmexpress:uuid:" + host_uuid}},
         "spec": {"drivers": []}},
    ]


PORTS = {}


def create(csi, name):
    return cli("call", csi, "/csi.v1.Controller/CreateVolume", json.dumps({
        "name": name, "capacityRange": {"requiredBytes": "67108864"}, "volumeCapabilities": [CAP],
        "parameters": {"pillar-csi.bhyoo.com/storage-class": "fast"}}))


def start_agent(P, base):
    P.start("agent", [BIN, "agent", "--config=" + os.path.join(base, "agent.json"),
                      "--state-dir=" + os.path.join(base, "agent-state"),
                      "--listen-address=127.0.0.1:%d" % PORTS["agent"],
                      "--metrics-bind-address=127.0.0.1:%d" % PORTS["agent-metrics"],
                      "--shutdown-grace-period=0s", "--configfs-root=" + os.path.join(base, "configfs"),
                      "--host-root=" + os.path.join(base, "agent-host")])
    return wait_for(lambda: cli("call", "127.0.0.1:%d" % PORTS["agent"], "/grpc.health.v1.Health/Check")[0] == 0)


def start_roles(R, P, base, host_uuid, kubeconfig):
    for d in ("configfs/nvmet/subsystems", "configfs/nvmet/ports", "configfs/nvmet/hosts",
              "agent-host/sys/module/nvmet_tcp", "volumes"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    with open(os.path.join(base, "agent.json"), "w") as f:
        json.dump({"backends": [{"file": {"pool": "files", "directory": os.path.join(base, "volumes")}}]}, f)
    R.check("agent starts with --metrics-bind-address", start_agent(P, base))
    # the controller on the test API server: its client's rest_client_* families
    store = ["--store=kube", "--kubeconfig=" + kubeconfig]
    csi = "unix://" + os.path.join(base, "controller.sock")
    P.start("controller", [BIN, "controller", *store, "--csi-endpoint=" + csi,
                           "--health-probe-bind-address=127.0.0.1:0",
                           "--metrics-bind-address=127.0.0.1:%d" % PORTS["controller-metrics"],
                           "--kube-api-qps=50", "--kube-api-burst=100"],
            env={"PILLAR_RECONCILE_INTERVAL": "1s"})
    R.check("controller starts", wait_for(lambda: cli("call", csi, "/csi.v1.Identity/Probe")[0] == 0))
    host = os.path.join(base, "node-host")
    ctrl = fake_host(host, host_uuid)
    staging = os.path.join(base, "kubelet", "plugins", "kubernetes.io", "csi", "pillar-csi.bhyoo.com",
                           "x", "globalmount")
    os.makedirs(staging)
    plant_record(os.path.join(base, "node-state"), staging)
    node_sock = os.path.join(base, "node.sock")
    P.start("node", [BIN, "node", "--csi-endpoint=unix://" + node_sock, "--node-id=worker-1",
                     "--state-dir=" + os.path.join(base, "node-state"), "--host-root=" + host,
                     "--kubelet-dir=" + os.path.join(base, "kubelet"),
                     "--metrics-bind-address=127.0.0.1:%d" % PORTS["node-metrics"]])
    R.check("node starts with --metrics-bind-address",
            wait_for(lambda: cli("call", "unix://" + node_sock, "/csi.v1.Identity/Probe")[0] == 0))
    path = os.path.join(base, "objects.json")
    with open(path, "w") as f:
        json.dump(objects(host_uuid), f)
    rc, out = cli("apply", "-f", path, *store)
    R.check("objects applied", rc == 0, out)
    R.check("the class is ready", wait_for(lambda: "True" in cli("get", "psc", "fast", *store)[1], 30))
    return csi, store, ctrl, node_sock


def cycle(R, P, base, csi, store):
    rc, out = create(csi, "pvc-1")
    R.check("CreateVolume pvc-1", rc == 0, out)
    vol = "storage-1/nvmeof-tcp/file/files/pvc-1"
    rc, out = cli("call", csi, "/csi.v1.Controller/ControllerPublishVolume",
                  json.dumps({"volumeId": vol, "nodeId": "worker-1", "volumeCapability": CAP}))
    R.check("ControllerPublishVolume", rc == 0, out)
    rc, out = cli("call", csi, "/csi.v1.Controller/ControllerUnpublishVolume",
                  json.dumps({"volumeId": vol, "nodeId": "worker-1"}))
    R.check("ControllerUnpublishVolume", rc == 0, out)
    rc, out = cli("call", csi, "/csi.v1.Controller/DeleteVolume", json.dumps({"volumeId": vol}))
    R.check("DeleteVolume", rc == 0, out)
    rc, out = create(csi, "pvc-2")
    R.check("CreateVolume pvc-2 (stays exported)", rc == 0, out)
    # the storage node restarts: the controller restores its exports
    P.stop("agent")
    R.check("agent restarts", start_agent(P, base))
    restored = wait_for(lambda: "ExportsServing" in http_get(
        "http://127.0.0.1:%d/metrics" % PORTS["controller-metrics"]) and
        "pillar_csi_restore_last_volumes{agent=\"storage-1\"} 1\n" in http_get(
        "http://127.0.0.1:%d/metrics" % PORTS["controller-metrics"]), 40)
    R.check("the controller restored the agent's export (pillar_csi_restore_last_volumes 1, "
            "ExportsServing)", restored)


def lint(R):
    for role in ("controller", "agent", "node"):
        text = http_get("http://127.0.0.1:%d/metrics" % PORTS[role + "-metrics"])
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
        R.check("promtool check metrics: %s's /metrics is lint clean" % role,
                r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
                (r.stdout + r.stderr)[-800:])
        missing = [f for f in FAMILIES[role] if ("\n" + f + " ") not in text and ("\n" + f + "{") not in text]
        R.check("%s's /metrics has every family of docs/metrics.md" % role, not missing, missing)


def prometheus(R, P, base):
    cfg = os.path.join(base, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
        for role in ("controller", "agent", "node"):
            f.write("  - job_name: %s\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
                    % (role, PORTS[role + "-metrics"]))
    P.start("prometheus", ["prometheus", "--config.file=" + cfg,
                           "--web.listen-address=127.0.0.1:%d" % PORTS["prometheus"],
                           "--storage.tsdb.path=" + os.path.join(base, "tsdb")])
    api = "http://127.0.0.1:%d/api/v1/query?query=" % PORTS["prometheus"]

    def query(q):
        return json.loads(http_get(api + urllib.parse.quote(q)))["data"]["result"]

    up = wait_for(lambda: len([r for r in query("up == 1")]) == 3, 60, 0.5)
    R.check("Prometheus scrapes all three roles (up == 1)", up, query("up") if not up else "")
    for role, fams in FAMILIES.items():
        missing = [f for f in fams if not wait_for(lambda: query('%s{job="%s"}' % (f, role)), 10, 0.5)]
        R.check("Prometheus has every family of the %s" % role, not missing, missing)
    got = query('rest_client_requests_total{job="controller",code="200",method="GET",host=~"127.0.0.1:[0-9]+"}')
    R.check("rest_client_requests_total counts the controller's API requests by code, method and "
            "host", got, query('rest_client_requests_total'))
    return query


def path_down(ctrl):
    """The fake kernel loses the target: the staged volume's controller goes to connecting."""
    with open(os.path.join(ctrl, "state"), "w") as f:
        f.write("connecting\n")


def node_path(R, query):
    tmo = wait_for(lambda: query('pillar_csi_node_volume_ctrl_loss_tmo_seconds{volume_id="%s"} == 120' % STAGED), 20, 0.5)
    live = query('pillar_csi_node_volume_path_live{volume_id="%s"}' % STAGED)
    R.check("a path going down shows on the node (path_live 0, ctrl_loss_tmo 120)",
            tmo and live and live[0]["value"][1] == "0", live)


def rules(R):
    r = subprocess.run(["promtool", "test", "rules", os.path.join(HERE, "alerts_test.yaml")],
                       capture_output=True, text=True, timeout=120)
    R.check("promtool test rules: every alert on synthetic series", r.returncode == 0,
            (r.stdout + r.stderr)[-1500:])


def main(base):
    R = Report()
    for k in ("agent", "agent-metrics", "controller-metrics", "node-metrics", "prometheus"):
        PORTS[k] = free_port()
    P = Procs(base)
    kube = os.path.join(base, "kube")
    os.makedirs(kube)
    try:
        cluster = Cluster(directory=kube).__enter__()
    except Exception as e:
        R.check("the test API server starts", False, e)
        return 1
    try:
        host_uuid = str(uuid.uuid4())
        csi, store, ctrl, _ = start_roles(R, P, base, host_uuid, cluster.kubeconfig)
        cycle(R, P, base, csi, store)
        path_down(ctrl)
        lint(R)
        query = prometheus(R, P, base)
        node_path(R, query)
        rules(R)
    finally:
        P.stop_all()
        cluster.__exit__(None, None, None)
    print("(metrics suite done)")
    return 1 if R.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
