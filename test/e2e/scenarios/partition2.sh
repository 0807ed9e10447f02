#!/bin/sh
# e2e-topology: b
# e2e-fast: no
# e2e-timeout: 300
# Network partition (netem loss 100% on the worker) inside ctrl_loss_tmo. See partition-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/partition-body.inc
