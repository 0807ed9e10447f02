#!/bin/sh
# `pillar-csi get` against kubectl: every `kubectl get` line of the operator's page (page.txt, a
# verbatim copy of ../shared/seed/maintain-nodes.txt) with kubectl on the test API server (real
# etcd) and with pillar-csi on the embedded store holding the same objects; outputs must be
# identical; then a long list over many pages of the API server (compare.py).  Env: PILLAR_BIN, BUILD.  Prints "kube-cli interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
T=$BUILD/kube-cli-test
rm -rf "$T" && mkdir -p "$T"
/usr/bin/python3 "$HERE/compare.py" "$T" > "$T/out" 2>&1
rc=$?
cat "$T/out"
pass=$(grep -c '^PASS' "$T/out")
fail=$(grep -c '^FAIL' "$T/out")
[ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "kube-cli interop: $pass passed, $fail failed"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
