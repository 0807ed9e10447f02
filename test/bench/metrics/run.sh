#!/bin/sh
# Metrics cost (issue 26): a CSI call with metrics on and off in alternating rounds, and the
# controller's /metrics scrape at BENCH_METRICS_N volumes (default 1000).  See metrics_bench.py.
# Env: BUILD, PILLAR_BIN; BENCH_METRICS_N, BENCH_METRICS_ROUNDS, BENCH_METRICS_CALLS,
# BENCH_METRICS_SCRAPES.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
T=$BUILD/controller-test
R=$BUILD/bench-metrics
sh "$ROOT/test/interop/lib/stubs.sh" "$T/py" csi agent health
rm -rf "$R" && mkdir -p "$R"
child=""
trap 'set +e; [ -n "$child" ] && kill "$child" 2>/dev/null; [ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT
/usr/bin/python3 "$HERE/metrics_bench.py" "$R" &
child=$!
wait "$child"
