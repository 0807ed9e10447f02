#!/bin/sh
# e2e-topology: b
# e2e-fast: yes
# e2e-order: 40
# e2e-timeout: 600
# Our agent (file backend) on a storage VM that is really powered off and
# booted again with the agent's state on its disk. See agent-body.inc.
. /e2e/lib/e2e.sh
. /e2e/scenarios/agent-body.inc
