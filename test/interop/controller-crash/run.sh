#!/bin/sh
# Controller crash suite (issue 15): `pillar-csi controller` on the embedded store SIGKILLed at
# random points of create / publish / unpublish / expand / delete against a live agent (fake
# configfs root, file backend), restarted, the sidecars' retries completed, the invariants checked
# after each round (crash.py says which).  CRASH_ROUNDS rounds (default 10: the brief run of
# `make interop`; `make crash ROUNDS=N` for the long run), CRASH_SEED replays a run's choices,
# CRASH_STORE=kube runs it on the test API server instead of the embedded store (slower).
# Env: PILLAR_BIN, BUILD.  Prints "controller-crash interop: N passed, M failed"; exits 1 on failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
R=$BUILD/controller-crash-test
export BUILD PILLAR_BIN
child=""
cleanup() {
	[ -n "$child" ] && kill "$child" 2>/dev/null
	if [ -f "$R/run/pids" ]; then
		for p in $(cat "$R/run/pids"); do kill -9 "$p" 2>/dev/null; done
	fi
	wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! sh "$HERE/../controller/stubs.sh"; then
	echo "FAIL generating the grpcio stubs"; echo "controller-crash interop: 0 passed, 1 failed"; exit 1
fi
rm -rf "$R" && mkdir -p "$R/run"
seed=${CRASH_SEED:-$(date +%s)}
echo "seed $seed (CRASH_SEED=$seed replays its choices)"
CRASH_SEED=$seed /usr/bin/python3 "$HERE/crash.py" "$R/run" "${CRASH_ROUNDS:-10}" > "$R/out" 2>&1 &
child=$!
wait "$child"
child=""
cleanup
cat "$R/out"
pass=$(grep -c '^PASS' "$R/out")
fail=$(grep -c '^FAIL' "$R/out")
grep -q '^(controller crash: [0-9]* passed, [0-9]* failed)$' "$R/out" ||
	{ echo "FAIL crash.py did not finish"; fail=$((fail + 1)); }
echo "controller-crash interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
