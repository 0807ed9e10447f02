#!/bin/sh
# Controller scale benchmark (issue 14): agent on a fake configfs root (file backend), controller
# on the embedded store, a grpcio CSI client; figures at BENCH_NS volumes (default 100,1000), each
# of three printed as "median (min–max)".  See bench.py.  Env: BUILD, PILLAR_BIN; BENCH_NS,
# BENCH_SAMPLE, BENCH_IDLE_S, BENCH_DOWN_S.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
T=$BUILD/controller-test
R=$BUILD/bench-controller
sh "$ROOT/test/interop/lib/stubs.sh" "$T/py" csi agent health
rm -rf "$R" && mkdir -p "$R"
child=""
trap 'set +e; [ -n "$child" ] && kill "$child" 2>/dev/null; [ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT
echo "controller benchmark (loopback; agent on a fake configfs, file backend; embedded store)"
/usr/bin/python3 "$HERE/bench.py" "$R" "${BENCH_NS:-100,1000}" &
child=$!
wait "$child"
