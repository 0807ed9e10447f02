#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-timeout: 600
# e2e-backends: file lvm zfs
# The README's main job (`make demo`): the whole system on the real-kernel test
# bed, narrated. A controller, an agent and a node plugin provision a volume
# over NVMe/TCP, mount it and write to it; then the storage node reboots while
# the volume is mounted, the controller restores the exports in one request,
# and the data is still there. The checks are those of the csi scenario
# (csi-body.inc); NARRATE=1 adds the @@SAY lines that `make demo` shows live.
# The agent's backend is $E2E_BACKEND (`make demo BACKEND=file|lvm|zfs`).
. /e2e/lib/e2e.sh
NARRATE=1
CSI_BACKEND=${E2E_BACKEND:-file}
. /e2e/scenarios/csi-body.inc
