#!/bin/sh
# RBAC proven by use (rbac_suite.py): the controller and node on the tokens of the chart's
# ServiceAccounts, under the chart's own Roles and ClusterRoles (rendered by test/chart, via
# test/interop/leader/rbac.sh), run the component flow on the test API server; every rule is either
# used by them or needed by a sidecar; rules they use are removed one at a time and the flow must
# fail.  RBAC_MUTATIONS=N (default 4) removes N of the used rules, spread over the list
# (make interop); RBAC_MUTATIONS=all removes each (make rbac-mutations, ~10 s per rule).
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per case and "rbac interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
T=$BUILD/rbac-test
rm -rf "$T"
mkdir -p "$T"
fail() { echo "FAIL $1"; echo "rbac interop: 0 passed, 1 failed"; exit 1; }
sh "$ROOT/test/interop/lib/stubs.sh" "$BUILD/controller-test/py" csi agent health ||
	fail "generating the grpcio stubs"
RBAC=$(sh "$ROOT/test/interop/leader/rbac.sh" "$ROOT" "$T") || fail "rendering the chart's RBAC"
mkdir -p "$T/dhchap"
DHCHAP=$(sh "$ROOT/test/interop/leader/rbac.sh" "$ROOT" "$T/dhchap" "dhchap: {enabled: true}") ||
	fail "rendering the chart's RBAC with dhchap.enabled"
/usr/bin/python3 "$HERE/rbac_suite.py" "$T/run" "$RBAC" "${RBAC_MUTATIONS:-4}" "$DHCHAP" > "$T/out" 2>&1
rc=$?
cat "$T/out"
pass=$(grep -c '^PASS' "$T/out")
failed=$(grep -c '^FAIL' "$T/out")
grep -q '^(rbac suite: [0-9]* passed, [0-9]* failed)$' "$T/out" || { echo "FAIL rbac_suite.py did not finish"; failed=$((failed + 1)); }
[ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
echo "rbac interop: $pass passed, $failed failed"
[ "$failed" -eq 0 ]
