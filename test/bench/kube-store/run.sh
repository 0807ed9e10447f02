#!/bin/sh
# Controller on the kube store (issue 12): API requests per resync pass and resident memory with
# BENCH_KUBE_N volumes (default 1000) created through CSI.  See bench.py.  Env: BUILD, PILLAR_BIN;
# BENCH_KUBE_N, BENCH_KUBE_PASSES (default 10).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
T=$BUILD/controller-test
R=$BUILD/bench-kube-store
mkdir -p "$T/py"
for p in "proto csi.proto" "proto/pillar_csi/agent/v1 agent.proto" "proto/grpc/health/v1 health.proto"; do
	set -- $p
	protoc -I"$ROOT/$1" --python_out="$T/py" --grpc_out="$T/py" \
		--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin "$ROOT/$1/$2"
done
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
exit "$rc"
