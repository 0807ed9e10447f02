#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-order: 38
# e2e-timeout: 420
# csi-snap-body.inc for the file backend alone: snapshot, restore, clone, the source deleted,
# storage reboot, through the controller's CSI on the real kernel.
. /e2e/lib/e2e.sh
SNAP_BACKENDS="file"
. /e2e/scenarios/csi-snap-body.inc
