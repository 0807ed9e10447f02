#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 30
# e2e-timeout: 600
# Node plugin on a real kernel, one VM: our agent (file backend) on the storage side,
# driven by `pillar-csi call` as the controller would; our node plugin on the worker
# side, driven as kubelet would. ext4/xfs/block lifecycle with immediate restage,
# online expand and stats, node plugin kill -9 + restart (node-life.inc); then, with
# --dhchap, the refusal of a volume that asks for DH-HMAC-CHAP on this 6.1 kernel.
. /e2e/lib/e2e.sh
. /e2e/scenarios/node-lib.inc
scenario_begin
node_setup
. /e2e/scenarios/node-life.inc

step "6.1 (no CONFIG_NVME_HOST_AUTH): a volume that asks for DH-HMAC-CHAP is refused by name"
role_stop node
NODE_ARGS=--dhchap
node_start
vol_provision lauth 16 u-lauth
mkdir -p "$(staging_of lauth)"
must_fail FAILED_PRECONDITION 'volume ".*" asks for NVMe in-band authentication \(nvmeofTcp.dhchap\) but this worker.s kernel has no host authentication \(CONFIG_NVME_HOST_AUTH;' \
  node_call NodeStageVolume "{\"volume_id\":\"$(csi_vid lauth)\",\"staging_target_path\":\"$(staging_of lauth)\",\"volume_capability\":$(cap_json block),\"volume_context\":$(CTX_EXTRA=',"pillar-csi.bhyoo.com/dhchap":"unidirectional"' ctx_json lauth block 10 2)}"
assert_eq "$(ctrls_of lauth | wc -w)" 0 "controllers after the refusal"
assert_not [ -e "$(record_of lauth)" ]
scenario_end
