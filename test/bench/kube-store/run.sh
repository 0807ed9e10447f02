#!/bin/sh
# Controller on the kube store (issue 12): API requests per resync pass and resident memory with
# BENCH_KUBE_N volumes (default 1000) created through CSI (bench.py); then CreateVolume, Publish,
# Unpublish and DeleteVolume at the default --kube-api-qps 5: wall time and API requests per call
# (csi.py); then a storage-node outage at N = 100, 1,000 and 10,000 published volumes with their
# claims: writes and API requests by verb while the agent is down and during its recovery, and
# the outage Events on the claims against the goal of one of each per claim (outage.py).  Env: BUILD,
# PILLAR_BIN; BENCH_KUBE_N, BENCH_KUBE_PASSES (default 10), BENCH_KUBE_CSI_ROUNDS (default 3),
# BENCH_OUTAGE_N (default 100,1000,10000), BENCH_DOWN_S (default 20).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
T=$BUILD/controller-test
R=$BUILD/bench-kube-store
sh "$ROOT/test/interop/lib/stubs.sh" "$T/py" csi agent health
rm -rf "$R" && mkdir -p "$R"
child=""
trap '[ -n "$child" ] && kill "$child" 2>/dev/null; [ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT
echo "controller on the kube store (loopback; test API server on etcd; agent on a fake configfs)"
/usr/bin/python3 "$HERE/bench.py" "$R" "${BENCH_KUBE_N:-1000}" "${BENCH_KUBE_PASSES:-10}" &
child=$!
set +e
wait "$child"
rc=$?
child=""
[ "$rc" -eq 0 ] || exit "$rc"
rm -rf "$R" && mkdir -p "$R"
/usr/bin/python3 "$HERE/csi.py" "$R" "${BENCH_KUBE_CSI_ROUNDS:-3}" &
child=$!
wait "$child"
rc=$?
child=""
[ "$rc" -eq 0 ] || exit "$rc"
rm -rf "$R" && mkdir -p "$R"
/usr/bin/python3 "$HERE/outage.py" "$R" "${BENCH_OUTAGE_N:-100,1000,10000}" &
child=$!
wait "$child"
rc=$?
child=""
exit "$rc"
