#!/bin/sh
# Capacity tracking suite (docs/metrics.md#capacity-tracking): the test API server on a real etcd
# (test/kube), the agent with two `file` pools on tmpfs mounts of their own (root), the
# controller on the API server, and csi-provisioner's capacity controller as the stand-in of
# test/interop/lib/sidecars.py: CSIStorageCapacity objects per StorageClass and topology segment,
# owned by the Deployment; their capacity and maximumVolumeSize follow a pool filling up.
# Env: PILLAR_BIN (absolute path of the binary), BUILD (absolute build dir).
# Prints PASS/FAIL per case and "capacity interop: N passed, M failed"; exits 1 on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
T=$BUILD/capacity-test
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL $1"; echo "capacity interop: 0 passed, 1 failed"; exit 1; }
sh "$ROOT/test/interop/lib/stubs.sh" "$BUILD/controller-test/py" csi agent health ||
	fail "generating the grpcio stubs"
/usr/bin/python3 "$HERE/capacity_suite.py" "$T/run" > "$T/out" 2>&1 &
child=$!
trap 'kill "$child" 2>/dev/null; wait 2>/dev/null' INT TERM
wait "$child"
rc=$?
cat "$T/out"
pass=$(grep -c '^PASS' "$T/out")
failed=$(grep -c '^FAIL' "$T/out")
grep -q '^(capacity suite: [0-9]* passed, [0-9]* failed)$' "$T/out" || { echo "FAIL capacity_suite.py did not finish"; failed=$((failed + 1)); }
[ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
echo "capacity interop: $pass passed, $failed failed"
[ "$failed" -eq 0 ]
