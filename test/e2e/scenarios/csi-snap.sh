#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-order: 38
# e2e-timeout: 1800
# e2e-zfs: yes
# Snapshots and clones through the controller's CSI, one VM: file, LVM thin and ZFS, each
# with a restore and a clone staged on the worker, the source deleted under them, and a
# storage reboot that restores every export with unchanged identities. See csi-snap-body.inc.
. /e2e/lib/e2e.sh
SNAP_BACKENDS="file lvm zfs"
. /e2e/scenarios/csi-snap-body.inc
