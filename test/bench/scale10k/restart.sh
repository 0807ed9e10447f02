#!/bin/sh
# Controller restarts with BENCH_SEED_N volumes (default 10,000) on the kube store, the volumes'
# PillarVolumeStates copied from a few created through CSI and written straight into etcd, in
# alternating rounds of BENCH_OLD_BIN (a copy of the old build, optional) and PILLAR_BIN: see
# restart.py.  Not part of `make bench` (run.sh creates every volume through CSI); for A/B
# figures of a change to the restart path.  Env: BUILD, PILLAR_BIN; BENCH_OLD_BIN,
# BENCH_SEED_N, BENCH_SMALL (default 2 per agent), BENCH_RESTARTS (default 3), BENCH_AGENTS.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS=bench-scale10k-restart
. "$HERE/../lib/python.sh"
echo "controller restarts with ${BENCH_SEED_N:-10000} volumes on the kube store (seeded into etcd; test API server)"
python_bench restart.py
rm -rf "$R"
