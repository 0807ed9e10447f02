#!/bin/sh
# e2e-topology: b
# e2e-fast: no
# e2e-order: 90
# e2e-timeout: 240
# Role library self-test, topology b (real storage power cycle). See selftest-roles.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/selftest-roles.inc
