#!/bin/sh
# Agent crash-safety suite (issue 5 acceptance): SIGKILL at random points of a
# create/export/allow/reconcile loop (CRASH_ITERATIONS, default 50; CRASH_SEED to replay), a
# restart after each kill, and after every restart: every fencing mark and identity pin is
# readable strict JSON, and one complete ReconcileState carrying every volume repairs every
# export in the fake configfs tree.  Every 10th iteration also empties the tree (storage reboot).
# The client and checks are test/interop/agent/crash.py (shared helpers in agentlib.py).
# Then test/interop/agent/snapcrash.py: SIGKILL (strace's syscall injection) before each step of
# CreateSnapshot, CreateVolume from a snapshot or a volume, and DeleteSnapshot; after a restart
# the retried call finishes the work and nothing is left that no object owns.
# Env: PILLAR_BIN, BUILD.  Prints "agent-crash interop: N passed, M failed"; exits 1 on failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
AGENT=$(cd "$HERE/../agent" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
R=$BUILD/agent-crash-test
export BUILD PILLAR_BIN
child=""
trap '[ -n "$child" ] && kill "$child" 2>/dev/null; wait 2>/dev/null' EXIT INT TERM

sh "$AGENT/build.sh" || { echo "FAIL build of the grpcio stubs"; echo "agent-crash interop: 0 passed, 1 failed"; exit 1; }
rm -rf "$R" && mkdir -p "$R"
seed=${CRASH_SEED:-$(date +%s)}
echo "seed $seed (CRASH_SEED=$seed replays it)"
CRASH_SEED=$seed /usr/bin/python3 "$AGENT/crash.py" "$R/env" "${CRASH_ITERATIONS:-50}" > "$R/out" 2>&1 &
child=$!
wait "$child"
child=""
cat "$R/out"
/usr/bin/python3 "$AGENT/snapcrash.py" "$R/snap" > "$R/snap.out" 2>&1 &
child=$!
wait "$child"
child=""
cat "$R/snap.out"
pass=$(cat "$R/out" "$R/snap.out" | grep -c '^PASS')
fail=$(cat "$R/out" "$R/snap.out" | grep -c '^FAIL')
grep -q '^(.*: [0-9]* passed, [0-9]* failed)$' "$R/out" || { echo "FAIL crash.py did not finish"; fail=$((fail + 1)); }
grep -q '^(.*: [0-9]* passed, [0-9]* failed)$' "$R/snap.out" || { echo "FAIL snapcrash.py did not finish"; fail=$((fail + 1)); }
echo "agent-crash interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
