# The objects of the try-it.md setup on the test API server, for the docs' `sh kubectl` blocks
# (sourced by run.sh's kubectl session, with KUBECONFIG set): storage node storage-1 serving
# again after a reboot, its volume pvc-1 (ctrlLossTmo 120, reconnectDelay 5) published to
# worker-1 with its export reconciled, the PV of that volume, the Nodes and the PillarProtocol.
# docs_placeholders FILE prints FILE with the pages' placeholders replaced by this setup's values.

docs_fixture_t0=2026-01-01T00:00:00Z
docs_cond() { # TYPE STATUS REASON
	printf '{"type":"%s","status":"%s","reason":"%s","message":"","lastTransitionTime":"%s"}' \
		"$1" "$2" "$3" "$docs_fixture_t0"
}

kubectl create -f - > /dev/null <<'YAML'
# YAML documents (each in JSON's flow style)
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "storage-1"}}
---
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}}
---
{"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarAgent",
 "metadata": {"name": "storage-1"},
 "spec": {"external": {"address": "127.0.0.1", "port": 9500}}}
---
{"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarProtocol",
 "metadata": {"name": "tcp"},
 "spec": {"protocol": {"nvmeofTcp": {"acl": true, "ctrlLossTmo": 120, "reconnectDelay": 5}}}}
---
{"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarVolumeState",
 "metadata": {"name": "pvc-1", "labels": {"pillar-csi.bhyoo.com/agent": "storage-1"}},
 "spec": {"volumeID": "storage-1/nvmeof-tcp/file/files/pvc-1", "agentVolumeID": "files/pvc-1",
          "agentRef": "storage-1", "backendType": "file", "protocolType": "nvmeof-tcp",
          "capacityBytes": 67108864,
          "resolved": {"protocol": {"nvmeofTcp": {"port": 4420, "acl": true,
                                                  "ctrlLossTmo": 120, "reconnectDelay": 5}}}}}
---
{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pvc-1"},
 "spec": {"capacity": {"storage": "64Mi"}, "accessModes": ["ReadWriteOnce"],
          "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast",
          "csi": {"driver": "pillar-csi.bhyoo.com",
                  "volumeHandle": "storage-1/nvmeof-tcp/file/files/pvc-1",
                  "volumeAttributes": {"address": "127.0.0.1", "port": "4420",
                                       "pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo": "120",
                                       "pillar-csi.bhyoo.com/nvmeof-reconnect-delay": "5"}}}}
YAML
kubectl patch pillaragent storage-1 --subresource=status --type=merge -p "{\"status\":{
  \"resolvedAddress\":\"127.0.0.1:9500\",\"agentVersion\":\"0.1.0\",\"volumes\":1,
  \"publishedVolumes\":1,\"connectedHosts\":1,\"outageBudgetSeconds\":120,\"conditions\":[
  $(docs_cond AgentConnected True Dialed),$(docs_cond ExportsReady True ExportsServing),
  $(docs_cond Ready True AgentConnected)]}}" > /dev/null
kubectl patch pvst pvc-1 --subresource=status --type=merge -p "{\"status\":{\"phase\":\"Ready\",
  \"publishedNodes\":[{\"nodeID\":\"worker-1\",\"initiatorID\":\"nqn.2014-08.org.nvmexpress:uuid:1\",
  \"accessMode\":\"SINGLE_NODE_WRITER\"}],\"conditions\":[
  $(docs_cond ExportReconciled True Reconciled)]}}" > /dev/null

docs_placeholders() {
	docs_uid=$(kubectl get pvst pvc-1 -o jsonpath='{.metadata.uid}')
	docs_rv=$(kubectl get pvst pvc-1 -o jsonpath='{.metadata.resourceVersion}')
	sed -e 's/<storage-node>/storage-1/g' -e 's/<name>/storage-1/g' -e 's/<pv-name>/pvc-1/g' \
		-e 's/<worker>/worker-1/g' -e 's/<ip>/127.0.0.1/g' -e 's/<port>/4420/g' \
		-e 's/<true|false>/true/g' -e "s/<uid>/$docs_uid/g" -e "s/<resourceVersion>/$docs_rv/g" "$1"
}
