#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 30
# e2e-timeout: 420
# The full CSI flow with controller, agent and node on the real kernel, one VM:
# simulated storage reboot while the volume is mounted. See csi-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/csi-body.inc
