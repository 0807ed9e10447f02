#!/bin/sh
# Leader election, Events and the node's CSINode on the test API server (test/kube: real etcd):
# two `pillar-csi controller --store=kube --leader-elect` — only the Lease holder reconciles, SIGSTOP
# of the holder hands over after the lease duration, on SIGCONT the old holder does not act,
# SIGTERM releases the Lease; the controller's condition Events in `kubectl get events`; `pillar-csi
# node` patching the host NQN/ID onto the CSINode kubelet creates, and DuplicateHostNQN.  The
# roles run with their ServiceAccounts' tokens under the chart's RBAC (rbac.sh).
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per case and "leader interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
T=$BUILD/leader-test
rm -rf "$T"
mkdir -p "$T"
RBAC=${LEADER_RBAC-$(sh "$HERE/rbac.sh" "$ROOT" "$T")} || exit 1
set +e
# shellcheck disable=SC2086
/usr/bin/python3 "$HERE/leader.py" "$PILLAR_BIN" "$T/run" $RBAC > "$T/out" 2>&1
rc=$?
set -e
cat "$T/out"
pass=$(grep -c '^PASS' "$T/out" || true)
fail=$(grep -c '^FAIL' "$T/out" || true)
[ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "leader interop: $pass passed, $fail failed"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
