#!/bin/sh
# 10,000 volumes over 10 agents (issue 30): create through CSI, controller restart, one
# storage-node reboot, RSS; see bench.py.  Env: BUILD, PILLAR_BIN; BENCH_AGENTS (default 10),
# BENCH_PER_AGENT (default 1000).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS=bench-scale10k
. "$HERE/../lib/python.sh"
echo "scale run: 10,000 volumes over 10 agents (loopback; fake configfs roots, file backend; embedded store)"
python_bench bench.py
rm -rf "$R"
