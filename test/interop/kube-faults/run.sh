#!/bin/sh
# Faults of the Kubernetes store met by the real controller on the test API server over a real
# etcd (test/kube): the API server killed and restarted under open watches (no lost and no
# doubled work), etcd compacted past the watches (410 → relist), a 409 Conflict from another
# writer (retried from a fresh read), a rotated ServiceAccount token file (no restart).
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per check and "kube-faults interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
T=$BUILD/kube-faults-test
rm -rf "$T"
mkdir -p "$T"
set +e
/usr/bin/python3 "$HERE/faults.py" "$PILLAR_BIN" "$T/run" > "$T/out" 2>&1
rc=$?
set -e
cat "$T/out"
pass=$(grep -c '^PASS' "$T/out" || true)
fail=$(grep -c '^FAIL' "$T/out" || true)
[ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "kube-faults interop: $pass passed, $fail failed"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
