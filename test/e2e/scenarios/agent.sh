#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 30
# e2e-timeout: 420
# Our agent (file and LVM backends) on the storage side of one VM, driven over
# gRPC from the worker side; simulated storage reboot. See agent-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/agent-body.inc
