#!/bin/sh
# Controller component suite on loopback: `pillar-csi controller` (embedded store, reconciler
# loop) + `pillar-csi agent` (fake configfs root, `file` backend) + a grpcio CSI client (Debian's
# python3-grpcio; csi.v1 and agent stubs generated from proto/).  The CSI flow create → publish A
# → publish B refused → unpublish A → publish B → unpublish → delete, checked on the fake nvmet
# tree; an agent restart and a simulated storage-node reboot restored through ExportRestorePending
# in one complete ReconcileState with unchanged namespace identity; a volume whose exportSpec was
# removed by hand ends at ExportSpecMissing, is not exported, and is repaired per operations.md §9.
# The suite runs twice: on the embedded store (--store=dir:) and with --store=kube against the test
# API server on a real etcd (test/kube/).
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per case and "controller interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
T=$BUILD/controller-test
R=$T/run
export BUILD PILLAR_BIN
child=""
cleanup() {
	[ -n "$child" ] && kill "$child" 2>/dev/null
	# the driver records every process it starts; kill any it could not stop itself
	if [ -f "$R/pids" ]; then
		for p in $(cat "$R/pids"); do kill -9 "$p" 2>/dev/null; done
	fi
	wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! sh "$HERE/../lib/stubs.sh" "$BUILD/controller-test/py" csi agent health; then
	echo "FAIL generating the grpcio stubs"; echo "controller interop: 0 passed, 1 failed"; exit 1
fi
pass=0
fail=0
for store in dir kube; do
	rm -rf "$R" && mkdir -p "$R"
	echo "== controller suite on the $store store"
	PILLAR_TEST_STORE=$store /usr/bin/python3 "$HERE/controller_suite.py" "$R" > "$T/out" 2>&1 &
	child=$!
	wait "$child"
	child=""
	cleanup
	cat "$T/out"
	pass=$((pass + $(grep -c '^PASS' "$T/out")))
	fail=$((fail + $(grep -c '^FAIL' "$T/out")))
	grep -q '^(controller suite: [0-9]* passed, [0-9]* failed)$' "$T/out" ||
		{ echo "FAIL controller_suite.py did not finish ($store)"; fail=$((fail + 1)); }
done
echo "controller interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
