#!/bin/sh
# Agent interop suite: a grpcio client (gRPC C-core, Debian's python3-grpcio) drives a running
# `pillar-csi agent` over loopback TCP — file backend, fake configfs root (plain directories),
# fake host tree via the testing flag --host-root — through a full lifecycle: capabilities,
# health, the restore gate, fencing (stale and token-less), create/export/allow/restore/deny/
# unexport/delete, configfs contents and derived identity, SIGTERM drain, restart without
# reboot; then an mTLS run with throwaway openssl certificates.
# Env: PILLAR_BIN (absolute path of the binary), BUILD (absolute build dir).
# Prints PASS/FAIL per case and "agent interop: N passed, M failed"; exits 1 on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
PY=/usr/bin/python3
R=$BUILD/agent-test/run
export BUILD PILLAR_BIN
pass=0 fail=0 child=""
trap '[ -n "$child" ] && kill "$child" 2>/dev/null; wait 2>/dev/null' EXIT INT TERM

sh "$HERE/build.sh" || { echo "FAIL build of the grpcio stubs"; echo "agent interop: 0 passed, 1 failed"; exit 1; }
rm -rf "$R" && mkdir -p "$R/certs"

# part: runs one python part in the background (so the trap can stop it), tallies its lines
part() {
	"$PY" "$HERE/agent_suite.py" "$@" > "$R/part.out" 2>&1 &
	child=$!
	wait "$child"
	child=""
	cat "$R/part.out"
	pass=$((pass + $(grep -c '^PASS' "$R/part.out")))
	fail=$((fail + $(grep -c '^FAIL' "$R/part.out")))
	grep -q '^(.*: [0-9]* passed, [0-9]* failed)$' "$R/part.out" || {
		echo "FAIL python part $1 did not finish"; fail=$((fail + 1)); }
}

part plain "$R/plain"

# ---- throwaway certificates (server, client, and a client from another CA) ----
C=$R/certs
mkcert() { # mkcert NAME CA CN EXT
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$3" \
		-keyout "$C/$1.key" -out "$C/$1.csr" 2>/dev/null &&
	printf '%s\n' "$4" > "$C/$1.ext" &&
	openssl x509 -req -in "$C/$1.csr" -CA "$C/$2.crt" -CAkey "$C/$2.key" -CAcreateserial \
		-days 2 -extfile "$C/$1.ext" -out "$C/$1.crt" 2>/dev/null
}
for ca in ca evilca; do
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=pillar-test-$ca" -keyout "$C/$ca.key" -out "$C/$ca.crt" 2>/dev/null
done
mkcert server ca localhost "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
mkcert client ca pillar-controller "extendedKeyUsage=clientAuth"
mkcert evil evilca pillar-controller "extendedKeyUsage=clientAuth"
if [ -s "$C/evil.crt" ] && [ -s "$C/client.crt" ] && [ -s "$C/server.crt" ]; then
	part mtls "$R/mtls" "$C"
else
	echo "FAIL openssl test certificates"; fail=$((fail + 1))
fi

echo "agent interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
