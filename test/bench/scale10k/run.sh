#!/bin/sh
# 10,000 volumes over 10 agents (issue 30): create through CSI, controller restart, one
# storage-node reboot, RSS; see bench.py.  Env: BUILD, PILLAR_BIN; BENCH_AGENTS (default 10),
# BENCH_PER_AGENT (default 1000).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
T=$BUILD/controller-test
R=$BUILD/bench-scale10k
sh "$ROOT/test/interop/lib/stubs.sh" "$T/py" csi agent health
rm -rf "$R" && mkdir -p "$R"
child=""
trap 'set +e; [ -n "$child" ] && kill "$child" 2>/dev/null; [ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT
echo "scale run: 10,000 volumes over 10 agents (loopback; fake configfs roots, file backend; embedded store)"
/usr/bin/python3 "$HERE/bench.py" "$R" &
child=$!
wait "$child"
rc=$?
child=""
rm -rf "$R"
exit "$rc"
