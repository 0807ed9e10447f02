#!/bin/sh
# The Helm chart (charts/pillar-csi): builds the test renderer (test/chart/render, Go's
# text/template + Sprig from Debian, no helm binary) into $BUILD/chart-render when its sources
# changed, then runs test/chart/test_chart.py: deploy.md's contract on the rendered objects for
# the default values and each mTLS mode; OpenAPI v3 validation with unknown fields as errors; the
# objects created on the test API server (test/kube) with fieldValidation=Strict and by kubectl
# create --validate=strict; the ServiceAccounts' tokens against the chart's RBAC; the lint rules,
# each shown to fail on a mutated chart; the renderer against Helm's engine semantics on a
# fixture chart.  Prints "chart interop: N passed, M failed, K skipped".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
B=${BUILD:-$ROOT/build}
mkdir -p "$B/chart-test"
if ! sh "$ROOT/test/chart/build-render.sh" "$B/chart-render" > "$B/chart-test/build.log" 2>&1; then
	cat "$B/chart-test/build.log"
	echo "chart interop: 0 passed, 1 failed, 0 skipped (the renderer did not build)"
	exit 1
fi
CHART_RENDER="$B/chart-render" /usr/bin/python3 "$ROOT/test/chart/test_chart.py" > "$B/chart-test/out" 2>&1
rc=$?
cat "$B/chart-test/out"
pass=$(grep -c '\.\.\. ok$' "$B/chart-test/out")
fail=$(grep -Ec '\.\.\. (FAIL|ERROR)$|^(FAIL|ERROR): ' "$B/chart-test/out")
skip=$(grep -c '\.\.\. skipped' "$B/chart-test/out")
[ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "chart interop: $pass passed, $fail failed, $skip skipped"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
