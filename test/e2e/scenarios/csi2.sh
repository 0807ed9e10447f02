#!/bin/sh
# e2e-topology: b
# e2e-fast: yes
# e2e-order: 40
# e2e-timeout: 600
# The full CSI flow with controller, agent and node on the real kernel, two VMs:
# real power cut and cold boot of the storage VM while the volume is mounted;
# the agent comes back from its state on the storage disk. See csi-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/csi-body.inc
