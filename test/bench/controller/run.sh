#!/bin/sh
# Controller scale benchmark (issue 14): agent on a fake configfs root (file backend), controller
# on the embedded store, a grpcio CSI client; figures at BENCH_NS volumes (default 100,1000), each
# of three printed as "median (min–max)".  See bench.py.  Env: BUILD, PILLAR_BIN; BENCH_NS,
# BENCH_SAMPLE, BENCH_IDLE_S, BENCH_DOWN_S.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS=bench-controller
. "$HERE/../lib/python.sh"
echo "controller benchmark (loopback; agent on a fake configfs, file backend; embedded store)"
python_bench bench.py "${BENCH_NS:-100,1000}"
