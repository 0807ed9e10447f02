#!/bin/sh
# Metrics cost (issue 26): a CSI call with metrics on and off in alternating rounds, and the
# controller's /metrics scrape at BENCH_METRICS_N volumes (default 1000).  See metrics_bench.py.
# Env: BUILD, PILLAR_BIN; BENCH_METRICS_N, BENCH_METRICS_ROUNDS, BENCH_METRICS_CALLS,
# BENCH_METRICS_SCRAPES.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS=bench-metrics
. "$HERE/../lib/python.sh"
python_bench metrics_bench.py
