#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 30
# e2e-timeout: 600
# Node plugin on a real kernel, one VM: our agent (file backend) on the storage side,
# driven by `pillar-csi call` as the controller would; our node plugin on the worker
# side, driven as kubelet would. ext4/xfs/block lifecycle with immediate restage,
# online expand and stats, node plugin kill -9 + restart. See node-life.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/node-lib.inc
scenario_begin
node_setup
. /e2e/scenarios/node-life.inc
scenario_end
