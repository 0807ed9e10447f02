#!/bin/sh
# Snapshot suite (issue 27; snapshot_suite.py): csi-sanity's snapshot specs with csi-snapshotter's
# and csi-provisioner's requests against `pillar-csi controller` (embedded store) and
# `pillar-csi agent` (fake configfs root, `file` backend).
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per case and "snapshot interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
T=$BUILD/snapshot-test
R=$T/run
export BUILD PILLAR_BIN
child=""
cleanup() {
	[ -n "$child" ] && kill "$child" 2>/dev/null
	if [ -f "$R/pids" ]; then
		for p in $(cat "$R/pids"); do kill -9 "$p" 2>/dev/null; done
	fi
	wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ! sh "$HERE/../lib/stubs.sh" "$BUILD/controller-test/py" csi agent health; then
	echo "FAIL generating the grpcio stubs"; echo "snapshot interop: 0 passed, 1 failed"; exit 1
fi
rm -rf "$R" && mkdir -p "$R"
/usr/bin/python3 "$HERE/snapshot_suite.py" "$R" > "$T/out" 2>&1 &
child=$!
wait "$child"
child=""
cleanup
cat "$T/out"
pass=$(grep -c '^PASS' "$T/out")
fail=$(grep -c '^FAIL' "$T/out")
grep -q '^(snapshot suite: [0-9]* passed, [0-9]* failed)$' "$T/out" ||
	{ echo "FAIL snapshot_suite.py did not finish"; fail=$((fail + 1)); }
echo "snapshot interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
