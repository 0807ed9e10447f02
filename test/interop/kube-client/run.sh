#!/bin/sh
# src/kube against the test API server (test/kube/: real etcd, HTTPS with HTTP/2): a client
# driver (driver.c, linked here with the library built with ASan+UBSan) is taken through get,
# create, conflicts, JSON patch with test ops, merge patch, paged list, a reflector's watch with
# a real etcd compaction (410 → relist), delete preconditions and a rotated token file.
# Prints each case and "kube-client interop: N passed, M failed".
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}"
T=$BUILD/kube-client-test
mkdir -p "$T"
# driver.c is linked with the library as the unit tests build it (test/tools/lib-link.sh)
BUILD=$BUILD sh "$ROOT/test/tools/lib-link.sh" san "$T/driver" "$HERE/driver.c"
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
