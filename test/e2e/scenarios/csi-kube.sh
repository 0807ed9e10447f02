#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 32
# e2e-timeout: 420
# e2e-kube: yes
# The `csi` flow (csi-body.inc) with the controller, the node and every `pillar-csi get/apply`
# on the test API server on real etcd (test/kube, on the host: "# e2e-kube: yes" makes run.sh
# start it with kube-host.py and give the VM a NIC that reaches it and nothing else) instead of
# the embedded store. The controller and the node use tokens of their ServiceAccounts under the
# chart's own RBAC; the CSINode they annotate is the one kubelet made. After the storage reboot
# the operator page's (maintain-nodes.txt) kubectl lines run verbatim with the host's kubectl,
# and (6.1) CreateVolume of a protocol with dhchap is refused naming CONFIG_NVME_TARGET_AUTH.
. /e2e/lib/e2e.sh

. /e2e/scenarios/kube-lib.inc
kube_up
STORE_WHAT="the test API server (--store=kube, ServiceAccount tokens)"

# the PillarAgent's condition reasons, one line per change, from a kubectl watch on the host
# (not {range}: with it kubectl 1.32 prints nothing for a watch's later events)
kube_trail_start() {
  kube_rpc kubectl-bg trail get pillaragent storage-1 --watch \
    -o 'jsonpath={.status.conditions[*].reason}{"\n"}' >/dev/null ||
    fail "kubectl --watch on the host"
  wait_for 30 "the host's kubectl watch prints the PillarAgent" \
    sh_true 'kube_rpc bg-output trail | grep -q ExportsServing'
}
kube_trail_stop() { kube_rpc bg-output trail | uniq > /run/e2e/trail; }
CSI_TRAIL_START=kube_trail_start
CSI_TRAIL_STOP=kube_trail_stop

# maintain-nodes.txt "Reboot a storage node", steps 5 and 6, verbatim
kube_after_restore() {
  assert_eq "$(kubectl get pillaragent storage-1 \
     -o jsonpath='{.status.conditions[?(@.type=="ExportsReady")].reason}')" ExportsServing \
    "kubectl get pillaragent storage-1 -o jsonpath=...ExportsReady...reason"
  _t=$(kubectl get pillaragent storage-1) || fail "kubectl get pillaragent: $_t"
  log "kubectl get pillaragent storage-1: $(echo "$_t" | tr '\n' '|')"
  assert_match "$(echo "$_t" | head -1)" '^NAME +' "kubectl get pillaragent: printer column header"
  assert_match "$(echo "$_t" | sed -n 2p)" '^storage-1 +' "kubectl get pillaragent: the agent's row"
  _t=$(kubectl get pvst -o custom-columns='NAME:.metadata.name,AGENT:.spec.agentRef,EXPORT:.status.conditions[?(@.type=="ExportReconciled")].reason') ||
    fail "kubectl get pvst -o custom-columns: $_t"
  assert_eq "$(echo "$_t" | tr -s ' ' | tr '\n' '|')" "NAME AGENT EXPORT|$NAME storage-1 Reconciled|" \
    "kubectl get pvst -o custom-columns=...ExportReconciled..."
  kube_dhchap_refused
}
# docs/authentication.md: Debian 12's 6.1 storage node has no target authentication; the
# PillarAgent says so, and CreateVolume of a protocol with dhchap is refused naming the kernel
# option, nothing created
kube_dhchap_refused() {
  assert_eq "$(kubectl get pillaragent storage-1 -o jsonpath='{.status.capabilities.nvmeTargetAuth}')" \
    false "PillarAgent status.capabilities.nvmeTargetAuth on 6.1"
  printf '%s\n' "[{\"apiVersion\":\"$P/v1alpha1\",\"kind\":\"PillarProtocol\",\"metadata\":{\"name\":\"auth\"},
  \"spec\":{\"protocol\":{\"nvmeofTcp\":{\"port\":4420,\"acl\":true,\"dhchap\":{}}}}},
 {\"apiVersion\":\"$P/v1alpha1\",\"kind\":\"PillarStorageClass\",\"metadata\":{\"name\":\"auth\"},
  \"spec\":{\"storeRef\":\"files\",\"protocolRef\":\"auth\"}}]" > /tmp/auth.json
  _o=$("$B" apply -f /tmp/auth.json $CLI_STORE) || fail "pillar-csi apply: $_o"
  wait_for 60 "PillarStorageClass auth Ready" sh_true '[ "$(cond psc auth Ready | cut -d/ -f1)" = True ]'
  _n=pvc-e2e-csi-kube-auth
  if "$B" call --timeout=60s "$CTL" /csi.v1.Controller/CreateVolume "{\"name\":\"$_n\",\"capacity_range\":{\"required_bytes\":33554432},\"volume_capabilities\":[$CAP],\"parameters\":{\"$P/storage-class\":\"auth\",\"csi.storage.k8s.io/pvc/name\":\"auth\",\"csi.storage.k8s.io/pvc/namespace\":\"default\",\"csi.storage.k8s.io/pv/name\":\"$_n\"}}" \
       > /tmp/auth.out 2> /tmp/auth.err; then
    fail "CreateVolume of a dhchap protocol on 6.1 succeeded: $(cat /tmp/auth.out)"
  fi
  assert_match "$(grep -E '^[A-Z_]+: ' /tmp/auth.err | tail -1)" \
    "^FAILED_PRECONDITION: PillarAgent \"storage-1\": the storage node's kernel has no NVMe in-band authentication \\(CONFIG_NVME_TARGET_AUTH\\)" \
    "CreateVolume of a dhchap protocol on 6.1"
  assert_not sh_true "\"\$B\" get pvst $_n -o json $CLI_STORE >/dev/null 2>&1"
}
CSI_AFTER_RESTORE=kube_after_restore

# the chart's RBAC sufficed: the API server refused none of the roles' requests
kube_at_end() {
  for r in controller node; do
    assert_not grep -qi forbidden "$(role_home)/logs/$r.log"
  done
}
CSI_AT_END=kube_at_end

. /e2e/scenarios/csi-body.inc
