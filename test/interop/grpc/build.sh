#!/bin/sh
# Builds the gRPC test peers into $BUILD/grpc-test (sourced by run.sh and the bench):
#   echo_server, echo_client       our side, ASan+UBSan (for leak checks)
#   echo_server.rel, echo_client.rel  our side, -O2 like the shipped binary
#   py/                            grpcio stubs generated from echo.proto and health.proto
# Our programs are compiled from the library sources they need (src/base/err.c, log.c, time.c,
# keylock.c, hash.c, str.c, mem.c, src/h2/*.c, src/grpc/*.c, src/metrics/*.c) with the Makefile's warning flags, plus the protoc-c code
# of echo.proto.
set -eu
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$BUILD/grpc-test
mkdir -p "$T/gen" "$T/py"
WARN="-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wvla"
STD="-std=c11 -D_GNU_SOURCE"
LIBS="-lprotobuf-c -lnghttp2 -lmbedtls -lmbedx509 -lmbedcrypto -pthread"
protoc-c -I"$ROOT/test/interop/grpc" --c_out="$T/gen" "$ROOT/test/interop/grpc/echo.proto"
protoc-c -I"$ROOT/proto/grpc/health/v1" --c_out="$T/gen" "$ROOT/proto/grpc/health/v1/health.proto"
# health.proto is compiled from its own directory so that its Python module is `health_pb2`
# (a `grpc.health.v1` Python package would shadow grpcio's `grpc`); the wire names are unchanged.
protoc -I"$ROOT/test/interop/grpc" -I"$ROOT/proto/grpc/health/v1" --python_out="$T/py" \
	--grpc_out="$T/py" --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin \
	"$ROOT/test/interop/grpc/echo.proto" "$ROOT/proto/grpc/health/v1/health.proto"
SRCS="$ROOT/src/base/err.c $ROOT/src/base/log.c $ROOT/src/base/str.c $ROOT/src/base/time.c $ROOT/src/base/keylock.c $ROOT/src/base/hash.c $ROOT/src/base/mem.c $(ls "$ROOT"/src/h2/*.c "$ROOT"/src/grpc/*.c "$ROOT"/src/metrics/*.c) $T/gen/echo.pb-c.c $T/gen/health.pb-c.c"
INC="-I$ROOT/src -I$T/gen"
newer() { # newer OUT SRC... : true when OUT is missing or older than a source
	out=$1; shift
	[ -e "$out" ] || return 0
	for f in "$@" "$ROOT"/src/h2/*.h "$ROOT"/src/grpc/*.h "$ROOT"/src/metrics/*.h; do [ "$f" -nt "$out" ] && return 0; done
	return 1
}
for prog in echo_server echo_client; do
	if newer "$T/$prog" "$ROOT/test/interop/grpc/$prog.c" $SRCS; then
		gcc $STD $WARN -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
			-fno-sanitize-recover=all $INC -o "$T/$prog" "$ROOT/test/interop/grpc/$prog.c" $SRCS $LIBS
	fi
	if newer "$T/$prog.rel" "$ROOT/test/interop/grpc/$prog.c" $SRCS; then
		gcc $STD $WARN -O2 -g $INC -o "$T/$prog.rel" "$ROOT/test/interop/grpc/$prog.c" $SRCS $LIBS
	fi
done
