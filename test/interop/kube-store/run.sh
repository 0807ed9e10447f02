#!/bin/sh
# The store contract suite (test/unit/test_store_contract.c), unchanged, on the kube store
# against the test API server on a real etcd (test/kube/cluster.py).  make unit runs the same
# program on the embedded store.  Prints Check's summary and "kube-store interop: N passed, M failed".
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}"
PROG=$BUILD/unit/test_store_contract
[ -x "$PROG" ] || { echo "kube-store interop: $PROG missing (make $PROG)"; exit 1; }
T=$(mktemp -d /tmp/pillar-kube-store.XXXXXX)
/usr/bin/python3 "$ROOT/test/kube/cluster.py" "$T" > "$T/cluster.out" 2>&1 &
CPID=$!
cleanup() { kill "$CPID" 2>/dev/null; wait "$CPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM
i=0
while [ ! -f "$T/cluster.env" ]; do
	i=$((i + 1))
	# cluster.py exits when a server misses a start bound (3 x START_S = 360 s at most); the
	# 6000 steps of at least 0.1 s only back that up
	if [ $i -gt 6000 ] || ! kill -0 "$CPID" 2>/dev/null; then
		cat "$T/cluster.out"; echo "kube-store interop: 0 passed, 1 failed (no cluster)"; exit 1
	fi
	sleep 0.1
done
. "$T/cluster.env"
set +e
PILLAR_TEST_STORE=kube KUBECONFIG=$KUBECONFIG "$PROG" > "$T/out" 2>&1
rc=$?
set -e
cat "$T/out"
line=$(grep -E '^[0-9]+%: Checks: ' "$T/out" | tail -1)
checks=$(echo "$line" | sed -n 's/.*Checks: \([0-9]*\).*/\1/p')
fails=$(echo "$line" | sed -n 's/.*Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2/p')
nf=$(( ${fails%% *} + ${fails##* } )) 2>/dev/null || nf=1
[ -n "$checks" ] || { checks=0; nf=1; }
echo "kube-store interop: $((checks - nf)) passed, $nf failed"
[ "$rc" -eq 0 ] && [ "$nf" -eq 0 ]
