#!/bin/sh
# Builds every libFuzzer target in test/fuzz/ with clang (ASan+UBSan) into $BUILD/fuzz and runs
# each for FUZZ_SECONDS (default 60) from a seed corpus of well-formed gRPC requests.
# Exits non-zero when a target crashes, leaks or fails to build.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
F=${BUILD:-/tmp/pillar-fuzz}/fuzz
SECS=${FUZZ_SECONDS:-60}
mkdir -p "$F/gen"
protoc-c -I"$ROOT/test/interop/grpc" --c_out="$F/gen" "$ROOT/test/interop/grpc/echo.proto"
SRCS="$ROOT/src/base/err.c $ROOT/src/base/log.c $ROOT/src/base/time.c $(ls "$ROOT"/src/h2/*.c "$ROOT"/src/grpc/*.c) $F/gen/echo.pb-c.c"
# seed corpus: SETTINGS, then HEADERS (HPACK literals) + DATA for Unary and Stream requests
mkdir -p "$F/corpus"
/usr/bin/python3 - "$F/corpus" <<'PYEOF'
import os, struct, sys
def frame(t, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload
def lit(n, v):
    n, v = n.encode(), v.encode()
    return bytes([0, len(n)]) + n + bytes([len(v)]) + v
def req(sid, path, body, extra=()):
    h = b"".join(lit(k, v) for k, v in [(":method", "POST"), (":scheme", "http"), (":path", path),
        (":authority", "x"), ("content-type", "application/grpc"), ("te", "trailers")] + list(extra))
    return frame(1, 4, sid, h) + frame(0, 1, sid, b"\0" + struct.pack(">I", len(body)) + body)
s = frame(4, 0, 0, b"")
seeds = {
    "unary": s + req(1, "/pillar.test.v1.Echo/Unary", b"\x0a\x02hi"),
    "fail": s + req(1, "/pillar.test.v1.Echo/Unary", b"\x0a\x02hi", [("x-fail", "1")]),
    "stream": s + req(1, "/pillar.test.v1.Echo/Stream", b"\x30\x03"),
    "health": s + req(1, "/grpc.health.v1.Health/Check", b"\x0a\x00"),
    "timeout": s + req(1, "/pillar.test.v1.Echo/Unary", b"", [("grpc-timeout", "1m")]),
    "two": s + req(1, "/pillar.test.v1.Echo/Unary", b"") + req(3, "/x/y", b"\x01"),
}
for k, v in seeds.items():
    open(os.path.join(sys.argv[1], k), "wb").write(v)
PYEOF
# fuzz_kube: src/kube with cJSON as the Makefile builds it (run `make` first)
B=${BUILD:-$ROOT/build}
KUBE_SRCS="$ROOT/src/base/json.c $ROOT/src/base/file.c $ROOT/src/base/yaml.c $(ls "$ROOT"/src/kube/*.c | grep -v -e /lease.c -e /events.c) $B/cjson/src/cJSON.c"
rc=0
for src in "$HERE"/fuzz_*.c; do
	name=$(basename "$src" .c)
	extra=
	case $name in fuzz_kube*) extra="$KUBE_SRCS -I$B/include -I$B/gen -lyaml" ;; esac
	# shellcheck disable=SC2086
	clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -I"$ROOT/src" -I"$F/gen" -o "$F/$name" "$src" $SRCS \
		$extra -lprotobuf-c -lnghttp2 -lmbedtls -lmbedx509 -lmbedcrypto -pthread
	mkdir -p "$F/corpus-$name"
	if "$F/$name" -max_total_time="$SECS" -rss_limit_mb=1024 -max_len=65536 -print_final_stats=0 \
		-artifact_prefix="$F/$name-" "$F/corpus-$name" "$F/corpus" > "$F/$name.log" 2>&1; then
		echo "fuzz $name: ok ($(grep -c . "$F/$name.log") log lines, $(ls "$F/corpus-$name" | wc -l) corpus entries, ${SECS} s)"
	else
		echo "fuzz $name: FAILED, see $F/$name.log"
		grep -E 'ERROR|SUMMARY|runtime error' "$F/$name.log" | head -10
		rc=1
	fi
done
exit $rc
