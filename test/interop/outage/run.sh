#!/bin/sh
# outage-plan and outage-status (check.py) on the test API server and the embedded store,
# through pillar-csi and through the kubectl plugin.
# Env: PILLAR_BIN, BUILD.  Prints "outage interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
T=$BUILD/outage-test
rm -rf "$T" && mkdir -p "$T"
/usr/bin/python3 "$HERE/check.py" "$T" > "$T/out" 2>&1
rc=$?
cat "$T/out"
pass=$(grep -c '^PASS' "$T/out")
fail=$(grep -c '^FAIL' "$T/out")
[ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "outage interop: $pass passed, $fail failed"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
