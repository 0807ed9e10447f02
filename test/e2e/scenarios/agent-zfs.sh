#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 35
# e2e-timeout: 480
# e2e-zfs: yes
# Our agent with a ZFS pool (OpenZFS built for the test bed's kernel) and an LVM
# thin pool: create, export, connect, write, online expand, simulated storage
# reboot with the pool imported after the agent starts, delete. See zfs-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/zfs-body.inc
