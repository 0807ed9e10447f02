#!/bin/sh
# Generates the grpcio stubs the agent suites use into $BUILD/agent-test/py: agent_pb2(_grpc)
# from proto/pillar_csi/agent/v1/agent.proto and health_pb2(_grpc) from the standard health proto.
# Each proto is compiled from its own directory so that the Python module names are flat
# (`agent_pb2`, `health_pb2`); the wire names (pillar_csi.agent.v1, grpc.health.v1) are unchanged.
set -eu
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
: "${BUILD:?BUILD must be set}"
PYOUT=$BUILD/agent-test/py
mkdir -p "$PYOUT"
gen() { # gen DIR FILE
	if [ ! -e "$PYOUT/$(basename "$2" .proto)_pb2.py" ] || [ "$1/$2" -nt "$PYOUT/$(basename "$2" .proto)_pb2.py" ]; then
		protoc -I"$1" --python_out="$PYOUT" --grpc_out="$PYOUT" \
			--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin "$1/$2"
	fi
}
gen "$ROOT/proto/pillar_csi/agent/v1" agent.proto
gen "$ROOT/proto/grpc/health/v1" health.proto
