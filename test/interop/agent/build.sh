#!/bin/sh
# Generates the grpcio stubs the agent suites use into $BUILD/agent-test/py: agent_pb2(_grpc)
# and health_pb2(_grpc) (test/interop/lib/stubs.sh).
set -eu
: "${BUILD:?BUILD must be set}"
exec sh "$(dirname "$0")/../lib/stubs.sh" "$BUILD/agent-test/py" agent health
