#!/bin/sh
# src/kube against the test API server (test/kube/: real etcd, HTTPS with HTTP/2): a client
# driver (driver.c, built here with ASan+UBSan from the library sources) is taken through get,
# create, conflicts, JSON patch with test ops, merge patch, paged list, a reflector's watch with
# a real etcd compaction (410 → relist), delete preconditions and a rotated token file.
# Prints each case and "kube-client interop: N passed, M failed".
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}"
T=$BUILD/kube-client-test
mkdir -p "$T"
WARN="-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wvla"
SRCS="$ROOT/src/base/err.c $ROOT/src/base/log.c $ROOT/src/base/json.c $ROOT/src/base/json_cut.c $ROOT/src/base/file.c $ROOT/src/base/time.c $ROOT/src/base/yaml.c $ROOT/src/base/str.c \
$(ls "$ROOT"/src/h2/*.c "$ROOT"/src/kube/*.c "$ROOT"/src/metrics/*.c)"
# cJSON is compiled by the Makefile from Debian's source package into $BUILD
gcc -std=c11 -D_GNU_SOURCE $WARN -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=all -I"$ROOT/src" -I"$BUILD/include" -I"$BUILD/gen" \
	-o "$T/driver" "$HERE/driver.c" $SRCS "$BUILD/cjson/src/cJSON.c" \
	-lnghttp2 -lmbedtls -lmbedx509 -lmbedcrypto -lyaml -pthread
set +e
/usr/bin/python3 "$HERE/scenario.py" "$T/driver" > "$T/out" 2>&1
rc=$?
set -e
cat "$T/out"
pass=$(grep -c '^PASS' "$T/out" || true)
fail=$(grep -c '^FAIL' "$T/out" || true)
[ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "kube-client interop: $pass passed, $fail failed"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
