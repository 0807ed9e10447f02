#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-timeout: 120
# Proves the harness reports a failing assertion: must FAIL, showing the line.
. /e2e/lib/e2e.sh
scenario_begin
step "a true assertion"
assert_eq "$(echo 4)" 4 "two plus two"
step "a deliberately false assertion"
assert_eq "$(echo 5)" 4 "deliberately false: two plus two"
scenario_end
