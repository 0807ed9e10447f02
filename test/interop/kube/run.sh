#!/bin/sh
# Test Kubernetes API server suite (test/kube/): Debian's etcd-server as storage, the server
# (Python, hypercorn, HTTPS with HTTP/2) on free loopback ports with its own temp etcd data dir.
# 1. test_server.py: CRUD, resourceVersion, watch, 410 after a real etcd compaction, status
#    subresource, CRD validation, patches, finalizers, preconditions, pagination, selectors, auth,
#    ALPN h2, and the operator page's kubectl commands against the server.
# 2. replay.py: every request of test/kube/transcripts (recorded from kube-apiserver 1.32) sent
#    again and the answer compared with the recording, one line per transcript.
# Prints "kube interop: N passed, M failed" (cases of 1 plus transcripts of 2).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
T=${BUILD:-build}/kube-test
mkdir -p "$T"
/usr/bin/python3 "$ROOT/test/kube/test_server.py" > "$T/out" 2>&1
rc1=$?
cat "$T/out"
/usr/bin/python3 "$ROOT/test/kube/replay.py" > "$T/replay" 2>&1
rc2=$?
cat "$T/replay"
pass=$(($(grep -c '\.\.\. ok$' "$T/out") + $(grep -c '^PASS' "$T/replay")))
fail=$(($(grep -Ec '\.\.\. (FAIL|ERROR)$' "$T/out") + $(grep -c '^FAIL' "$T/replay")))
[ "$rc1" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
[ "$rc2" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
skip=$(($(grep -c 'skipped ' "$T/out") + $(grep -c '^SKIP' "$T/replay")))
echo "kube interop: $pass passed, $fail failed, $skip skipped ($(grep -c '^DIFF' "$T/replay") transcripts differ for a stated reason)"
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$fail" -eq 0 ]
