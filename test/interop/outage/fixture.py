"""The objects of the outage suite: storage node storage-1 with three volumes of three different
ctrlLossTmo values (120 s, 1800 s, and unset: the kernel's 600 s), one volume on storage-2, and
the pods that use them with their owners: a StatefulSet, a Deployment through its ReplicaSet, a
bare pod, and a finished pod that no longer holds its volume."""
import datetime

G = "pillar-csi.bhyoo.com/v1alpha1"
P = "pillar-csi.bhyoo.com/"


def ts(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(t, status, reason, since, msg=""):
    return {"type": t, "status": status, "reason": reason, "message": msg, "lastTransitionTime": since}


def pvst(name, agent, ns, claim, nvme, nodes, since):
    return {"apiVersion": G, "kind": "PillarVolumeState",
            "metadata": {"name": name, "labels": {P + "agent": agent}},
            "spec": {"volumeID": f"{agent}/nvmeof-tcp/zfs-zvol/tank/{name}", "agentVolumeID": "tank/" + name,
                     "agentRef": agent, "backendType": "zfs-zvol", "protocolType": "nvmeof-tcp",
                     "capacityBytes": 1 << 30,
                     "claimRef": {"uid": "uid-" + name, "namespace": ns, "name": claim},
                     "resolved": {"protocol": {"nvmeofTcp": dict({"port": 4420, "acl": True}, **nvme)}}},
            "status": {"phase": "Ready",
                       "publishedNodes": [{"nodeID": n, "initiatorID": "nqn.2014-08.org.nvmexpress:uuid:" + n,
                                           "accessMode": "SINGLE_NODE_WRITER"} for n in nodes],
                       "exportSpec": {"bindAddress": "10.0.0.1", "port": 4420, "aclEnabled": True},
                       # the controller leaves the last outcome during an outage: the readers
                       # derive AgentUnavailable from the PillarAgent (src/model/outage.h)
                       "conditions": [cond("ExportReconciled", "True", "Reconciled", since)]}}


def pv(name, ns, claim, size):
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast",
                     "volumeMode": "Filesystem",
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": claim,
                                  "uid": "uid-" + name, "apiVersion": "v1"},
                     "csi": {"driver": "pillar-csi.bhyoo.com", "volumeHandle": name,
                             "volumeAttributes": {"address": "10.0.0.1", "port": "4420"}}}}


def pvc(ns, name, volume, size):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast", "volumeName": volume,
                     "resources": {"requests": {"storage": size}}}}


def owner(kind, name, api="apps/v1"):
    return [{"apiVersion": api, "kind": kind, "name": name, "uid": "uid-" + name, "controller": True,
             "blockOwnerDeletion": True}]


def pod(ns, name, claim, node, owners=None, phase="Running"):
    md = {"name": name, "namespace": ns}
    if owners:
        md["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "registry.example/app:1"}],
                     "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}},
                                 {"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": phase}}


def workload(kind, ns, name, replicas, owners=None):
    md = {"name": name, "namespace": ns, "labels": {"app": name}}
    if owners:
        md["ownerReferences"] = owners
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": md, "spec": spec}


def objects(now=None):
    """The objects; storage-1 has been unreachable for 300 s at `now`."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    since = ts(now - datetime.timedelta(seconds=300))
    return [
        {"apiVersion": G, "kind": "PillarAgent", "metadata": {"name": "storage-1"},
         "spec": {"nodeRef": {"name": "storage-1"}},
         "status": {"resolvedAddress": "10.0.0.1:9500",
                    "conditions": [cond("AgentConnected", "False", "HealthCheckFailed", since,
                                        'HealthCheck to agent at "10.0.0.1:9500" failed: connection refused'),
                                   cond("ExportsReady", "Unknown", "AgentNotConnected", since,
                                        "AgentConnected is not True"),
                                   cond("Ready", "False", "AgentNotConnected", since)]}},
        {"apiVersion": G, "kind": "PillarAgent", "metadata": {"name": "storage-2"},
         "spec": {"external": {"address": "10.0.0.2", "port": 9500}},
         "status": {"conditions": [cond("AgentConnected", "True", "Dialed", since),
                                   cond("ExportsReady", "True", "ExportsServing", since)]}},
        pvst("pvc-a", "storage-1", "default", "db-data", {"ctrlLossTmo": 120, "reconnectDelay": 5},
             ["worker-1"], since),
        pvst("pvc-b", "storage-1", "shop", "media", {"ctrlLossTmo": 1800}, ["worker-2"], since),
        pvst("pvc-c", "storage-1", "shop", "web-data", {}, ["worker-1"], since),
        pvst("pvc-z", "storage-2", "default", "other", {"ctrlLossTmo": 30}, ["worker-1"], since),
        pv("pvc-a", "default", "db-data", "1Gi"), pv("pvc-b", "shop", "media", "20Gi"),
        pv("pvc-c", "shop", "web-data", "5Gi"), pv("pvc-z", "default", "other", "1Gi"),
        pvc("default", "db-data", "pvc-a", "1Gi"), pvc("shop", "media", "pvc-b", "20Gi"),
        pvc("shop", "web-data", "pvc-c", "5Gi"), pvc("default", "other", "pvc-z", "1Gi"),
        workload("StatefulSet", "default", "db", 3),
        workload("Deployment", "shop", "web", 2),
        workload("ReplicaSet", "shop", "web-5d8f7", 2, owner("Deployment", "web")),
        pod("default", "db-0", "db-data", "worker-1", owner("StatefulSet", "db")),
        pod("shop", "web-5d8f7-abcde", "web-data", "worker-1", owner("ReplicaSet", "web-5d8f7")),
        pod("shop", "web-5d8f7-fghij", "web-data", "worker-1", owner("ReplicaSet", "web-5d8f7")),
        pod("shop", "thumbnailer", "media", "worker-2"),
        pod("shop", "import-28345", "web-data", "worker-1", owner("Job", "import", "batch/v1"), "Succeeded"),
    ]
