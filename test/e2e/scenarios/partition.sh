#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-timeout: 240
# Network partition (veth down) inside ctrl_loss_tmo. See partition-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/partition-body.inc
