#!/bin/sh
# e2e-topology: b
# e2e-fast: yes
# e2e-order: 20
# e2e-timeout: 420
# Smoke test on two VMs joined by a qemu UDP link on host 127.0.0.1: the
# storage VM is really powered off (qemu killed) and booted again from its
# persistent disk image while the worker VM keeps running. See smoke-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/smoke-body.inc
