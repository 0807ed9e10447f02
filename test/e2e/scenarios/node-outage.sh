#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 31
# e2e-timeout: 600
# Node plugin across storage outages, one VM (simulated storage reboot): inside
# ctrl_loss_tmo the mounted filesystem keeps working once the agent got its complete
# ReconcileState; past ctrl_loss_tmo unstage + a fresh stage recover. See node-outage.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/node-lib.inc
scenario_begin
node_setup
. /e2e/scenarios/node-outage.inc
scenario_end
