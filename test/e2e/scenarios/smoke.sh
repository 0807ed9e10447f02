#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 10
# e2e-timeout: 300
# Smoke test in one VM: storage side in netns "storage" over veth; storage
# reboots simulated by unloading and reloading nvmet. See smoke-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/smoke-body.inc
