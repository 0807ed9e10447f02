#!/bin/sh
# CreateVolume durability cost (issue 30): fsyncs per CSI CreateVolume of the controller and of
# the agent, and CreateVolume p50/p99 at 1, 4 and 16 concurrent callers with and without another
# process writing to the same disk with fsyncs, in alternating rounds.  See bench.py.
# Env: BUILD, PILLAR_BIN; BENCH_ROUNDS (3), BENCH_PER_CALLER (10), BENCH_FSYNC_N (50);
# BENCH_BASE: a second pillar-csi binary (e.g. main's build copied aside) measured beside ours in
# the same rounds (an A/B of two builds under the same load, ratios ours/base per round).
# With strace installed, the flush time (fsync, fdatasync, syncfs) per sequential create too.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS=bench-create
. "$HERE/../lib/python.sh"
echo "CreateVolume benchmark (loopback; agent on a fake configfs, file backend; embedded store on $(df -T "$R" | awk 'NR==2 {print $2}'))"
python_bench bench.py
