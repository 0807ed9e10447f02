#!/bin/sh
# Secret scan (issue 28, docs/authentication.md "Keys"): a full DH-HMAC-CHAP cycle with every
# role at --v=5 on the test API server, then every key string searched for in every log,
# object, Event, metric and record (scan_suite.py).  Needs root (the block volume's stage is a
# bind mount of a device node; the fake /dev/nvme-fabrics is a pseudo-terminal's device node).
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per check and "secretscan interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
R=$BUILD/secretscan-test
child=""
cleanup() {
	[ -n "$child" ] && kill "$child" 2>/dev/null
	if [ -f "$R/run/pids" ]; then
		for p in $(cat "$R/run/pids"); do kill -9 "$p" 2>/dev/null; done
	fi
	# a stage left mounted by an interrupted run
	grep " $R/run/" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do
		umount -l "$m"
	done
	wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP secretscan needs root (a bind mount of the staged device node); CI runs as root"
	echo "secretscan interop: 0 passed, 0 failed (skipped: not root)"
	exit 0
fi
[ -d "$R/run" ] && cleanup
rm -rf "$R" && mkdir -p "$R/run"
sh "$ROOT/test/interop/lib/stubs.sh" "$BUILD/controller-test/py" csi agent health ||
	{ echo "FAIL generating the grpcio stubs"; echo "secretscan interop: 0 passed, 1 failed"; exit 1; }
/usr/bin/python3 "$HERE/scan_suite.py" "$R/run" > "$R/out" 2>&1 &
child=$!
wait "$child"
child=""
cleanup
cat "$R/out"
pass=$(grep -c '^PASS' "$R/out")
fail=$(grep -c '^FAIL' "$R/out")
grep -q '^(secretscan suite: [0-9]* passed, [0-9]* failed)$' "$R/out" ||
	{ echo "FAIL scan_suite.py did not finish"; fail=$((fail + 1)); }
echo "secretscan interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
