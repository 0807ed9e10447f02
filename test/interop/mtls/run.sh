#!/bin/sh
# mTLS end to end (issue 15, deploy.md §9): a running agent and controller with mutual TLS,
# certificates rotated on disk and picked up without a restart, and AgentConnected's
# Authenticated / TLSHandshakeFailed with the handshake's reason (unknown CA, expired, no IP SAN
# for the dialled address).  See mtls_suite.py.  Env: PILLAR_BIN, BUILD.
# Prints PASS/FAIL per case and "mtls interop: N passed, M failed"; exits 1 on failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
R=$BUILD/mtls-test
export BUILD PILLAR_BIN
child=""
cleanup() {
	[ -n "$child" ] && kill "$child" 2>/dev/null
	if [ -f "$R/run/pids" ]; then
		for p in $(cat "$R/run/pids"); do kill -9 "$p" 2>/dev/null; done
	fi
	wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$R" && mkdir -p "$R/run"
/usr/bin/python3 "$HERE/mtls_suite.py" "$R/run" > "$R/out" 2>&1 &
child=$!
wait "$child"
child=""
cleanup
cat "$R/out"
pass=$(grep -c '^PASS' "$R/out")
fail=$(grep -c '^FAIL' "$R/out")
grep -q '^(mtls suite: [0-9]* passed, [0-9]* failed)$' "$R/out" ||
	{ echo "FAIL mtls_suite.py did not finish"; fail=$((fail + 1)); }
echo "mtls interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
