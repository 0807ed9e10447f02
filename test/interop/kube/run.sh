#!/bin/sh
# Test Kubernetes API server suite (test/kube/): Debian's etcd-server as storage, the server
# (Python, hypercorn, HTTPS with HTTP/2) on free loopback ports with its own temp etcd data dir.
# test_server.py checks CRUD, resourceVersion, watch, 410 after a real etcd compaction, status
# subresource, CRD validation, patches, finalizers, preconditions, pagination, selectors, auth,
# ALPN h2, and the operator page's kubectl commands against it.
# Prints each case and "kube interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
T=${BUILD:-build}/kube-test
mkdir -p "$T"
/usr/bin/python3 "$ROOT/test/kube/test_server.py" > "$T/out" 2>&1
rc=$?
cat "$T/out"
pass=$(grep -c '\.\.\. ok$' "$T/out")
fail=$(grep -Ec '\.\.\. (FAIL|ERROR)$' "$T/out")
[ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "kube interop: $pass passed, $fail failed"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
