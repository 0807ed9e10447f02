#!/bin/sh
# Generates grpcio stubs for the interop suites: stubs.sh OUTDIR NAME... with NAME csi
# (proto/csi.proto), agent (proto/pillar_csi/agent/v1/agent.proto) or health (the standard gRPC
# health proto).  Each proto is compiled from its own directory so that the Python module names
# are flat (`csi_pb2`, `agent_pb2`, `health_pb2` and their `_grpc` modules); the wire names are
# unchanged.  A module newer than its proto is kept.
set -eu
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
out=$1
shift
mkdir -p "$out"
for name in "$@"; do
	case $name in
	csi) dir=$ROOT/proto ;;
	agent) dir=$ROOT/proto/pillar_csi/agent/v1 ;;
	health) dir=$ROOT/proto/grpc/health/v1 ;;
	*) echo "stubs.sh: unknown proto $name" >&2; exit 2 ;;
	esac
	if [ ! -e "$out/${name}_pb2.py" ] || [ "$dir/$name.proto" -nt "$out/${name}_pb2.py" ]; then
		protoc -I"$dir" --python_out="$out" --grpc_out="$out" \
			--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin "$dir/$name.proto"
	fi
done
