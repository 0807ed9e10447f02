#!/bin/sh
# Metrics suite (docs/metrics.md): the agent (file backend, plain-directory configfs), the
# controller (on the test API server of test/kube, real etcd: its API client's rest_client_*
# families) and the node plugin (fake host tree with a planted stage record and a fake NVMe
# controller in sysfs) run on fake roots in this suite's directory; a volume goes
# through create, publish, unpublish and delete, another stays, and the agent restarts (its
# exports restored by the controller).  Then Debian's real Prometheus (127.0.0.1 only, scraping
# every second) scrapes all three and its HTTP API is asked for every family docs/metrics.md
# lists; `promtool check metrics` lints each role's /metrics; `promtool test rules` runs the
# chart's alerts against test/interop/metrics/alerts_test.yaml.
# Env: PILLAR_BIN (absolute path of the binary), BUILD (absolute build dir).
# Prints PASS/FAIL per case and "metrics interop: N passed, M failed"; exits 1 on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
R=$BUILD/metrics-test
rm -rf "$R" && mkdir -p "$R"
/usr/bin/python3 "$HERE/metrics_suite.py" "$R" > "$R/out" 2>&1 &
child=$!
trap 'kill "$child" 2>/dev/null; wait 2>/dev/null' INT TERM
wait "$child"
rc=$?
cat "$R/out"
pass=$(grep -c '^PASS' "$R/out")
fail=$(grep -c '^FAIL' "$R/out")
grep -q '^(metrics suite done)$' "$R/out" || { echo "FAIL the python suite did not finish"; fail=$((fail + 1)); }
[ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "metrics interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
