#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 80
# e2e-timeout: 180
# Role library self-test, topology a. See selftest-roles.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/selftest-roles.inc
