#!/bin/sh
# Builds the gRPC test peers into $BUILD/grpc-test (sourced by run.sh and the bench):
#   echo_server, echo_client       our side, ASan+UBSan (for leak checks)
#   echo_server.rel, echo_client.rel  our side, compiled like the shipped binary
#   py/                            grpcio stubs generated from echo.proto and health.proto
# Our programs are linked with the library as the Makefile builds it (test/tools/lib-link.sh:
# ASan+UBSan as the unit tests, or as the shipped binary), plus the protoc-c code of echo.proto
# and health.proto.
set -eu
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$BUILD/grpc-test
mkdir -p "$T/gen" "$T/py"
protoc-c -I"$ROOT/test/interop/grpc" --c_out="$T/gen" "$ROOT/test/interop/grpc/echo.proto"
protoc-c -I"$ROOT/proto/grpc/health/v1" --c_out="$T/gen" "$ROOT/proto/grpc/health/v1/health.proto"
# health.proto is compiled from its own directory so that its Python module is `health_pb2`
# (a `grpc.health.v1` Python package would shadow grpcio's `grpc`); the wire names are unchanged.
protoc -I"$ROOT/test/interop/grpc" -I"$ROOT/proto/grpc/health/v1" --python_out="$T/py" \
	--grpc_out="$T/py" --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin \
	"$ROOT/test/interop/grpc/echo.proto" "$ROOT/proto/grpc/health/v1/health.proto"
# our programs are linked with the library as the Makefile builds it (test/tools/lib-link.sh)
for prog in echo_server echo_client; do
	for kind in san rel; do
		case $kind in san) out=$T/$prog ;; rel) out=$T/$prog.rel ;; esac
		BUILD=$BUILD sh "$ROOT/test/tools/lib-link.sh" $kind "$out" "-I$T/gen" \
			"$ROOT/test/interop/grpc/$prog.c" "$T/gen/echo.pb-c.c" "$T/gen/health.pb-c.c"
	done
done
