#!/bin/sh
# Generates the grpcio stubs of the controller suites (test/interop/controller,
# test/interop/controller-crash) into $BUILD/controller-test/py: csi_pb2, agent_pb2 and health_pb2
# (with their _grpc modules), each compiled from its own directory so the module names are flat.
set -eu
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
: "${BUILD:?BUILD must be set}"
PYOUT=$BUILD/controller-test/py
mkdir -p "$PYOUT"
gen() { # gen DIR FILE
	protoc -I"$1" --python_out="$PYOUT" --grpc_out="$PYOUT" \
		--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin "$1/$2"
}
gen "$ROOT/proto" csi.proto
gen "$ROOT/proto/pillar_csi/agent/v1" agent.proto
gen "$ROOT/proto/grpc/health/v1" health.proto
