#!/bin/sh
# CreateVolume durability cost (issue 30): fsyncs per CSI CreateVolume of the controller and of
# the agent, and CreateVolume p50/p99 at 1, 4 and 16 concurrent callers with and without another
# process writing to the same disk with fsyncs, in alternating rounds.  See bench.py.
# Env: BUILD, PILLAR_BIN; BENCH_ROUNDS (3), BENCH_PER_CALLER (10), BENCH_FSYNC_N (50).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
T=$BUILD/controller-test
R=$BUILD/bench-create
sh "$ROOT/test/interop/lib/stubs.sh" "$T/py" csi agent health
rm -rf "$R" && mkdir -p "$R"
child=""
trap 'set +e; [ -n "$child" ] && kill "$child" 2>/dev/null; [ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT
echo "CreateVolume benchmark (loopback; agent on a fake configfs, file backend; embedded store on $(df -T "$R" | awk 'NR==2 {print $2}'))"
/usr/bin/python3 "$HERE/bench.py" "$R" &
child=$!
wait "$child"
