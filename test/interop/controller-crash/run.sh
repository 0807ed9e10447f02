#!/bin/sh
# Controller crash suite (issue 15): `pillar-csi controller` on the embedded store SIGKILLed at
# random points of create / publish / unpublish / expand / delete against a live agent (fake
# configfs root, file backend), restarted, the sidecars' retries completed, the invariants checked
# after each round (crash.py says which).  CRASH_ROUNDS rounds (default 10: the brief run of
# `make interop`; `make crash ROUNDS=N` for the long run), CRASH_SEED replays a run's choices,
# CRASH_STORE=kube runs it on the test API server instead of the embedded store (slower).
# Env: PILLAR_BIN, BUILD.  crash.py prints "controller-crash interop: N passed, M failed" and
# exits 1 on failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
R=$BUILD/controller-crash-test
export BUILD PILLAR_BIN
# the suite records every process it starts; kill any it could not stop itself
trap '[ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT
trap 'exit 130' INT TERM
sh "$HERE/../lib/stubs.sh" "$BUILD/controller-test/py" csi agent health ||
	{ echo "controller-crash interop: 0 passed, 1 failed (grpcio stubs)"; exit 1; }
rm -rf "$R" && mkdir -p "$R"
seed=${CRASH_SEED:-$(date +%s)}
echo "seed $seed (CRASH_SEED=$seed replays its choices)"
CRASH_SEED=$seed /usr/bin/python3 "$HERE/crash.py" "$R" "${CRASH_ROUNDS:-10}"
