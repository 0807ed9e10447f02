#!/bin/sh
# e2e-topology: b
# e2e-fast: no
# e2e-timeout: 1500
# node + node-outage on two VMs: the storage VM is really powered off and booted
# again (agent restarted from its persistent disk). See node-life.inc, node-outage.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/node-lib.inc
scenario_begin
node_setup
. /e2e/scenarios/node-life.inc
. /e2e/scenarios/node-outage.inc
scenario_end
