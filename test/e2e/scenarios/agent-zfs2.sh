#!/bin/sh
# e2e-topology: b
# e2e-fast: no
# e2e-timeout: 720
# e2e-zfs: yes
# agent-zfs on two VMs: the storage VM is really powered off and booted again;
# the pool's virtual disk and the agent's state survive. See zfs-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/zfs-body.inc
