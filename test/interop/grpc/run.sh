#!/bin/sh
# gRPC interop suite: our server and client (src/h2, src/grpc) against peers we did not write —
# grpcio (gRPC C-core) as client and server, curl --http2-prior-knowledge, h2load — over unix,
# TCP (IPv4/IPv6), TLS and mTLS.  Env: BUILD (absolute build dir).  Prints one line per case and
# "grpc interop: N passed, M failed"; exits 1 on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}"
T=$BUILD/grpc-test
R=$T/run
PY=/usr/bin/python3
export BUILD ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" UBSAN_OPTIONS="print_stacktrace=1"
pass=0 fail=0 pids=""

ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { # check NAME CMD...: runs CMD, shows its lines indented, PASS when it exits 0
	name=$1; shift
	if out=$("$@" 2>&1); then ok "$name"; else bad "$name"; fi
	printf '%s\n' "$out" | sed 's/^/    /' | head -40
}
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

sh "$HERE/build.sh" || { echo "FAIL build of the test peers"; exit 1; }
rm -rf "$R" && mkdir -p "$R"

# ---- throwaway certificates ----------------------------------------------------------------
mkcert() { # mkcert NAME CA SUBJ EXT
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$3" \
		-keyout "$R/$1.key" -out "$R/$1.csr" 2>/dev/null &&
	printf '%s\n' "$4" > "$R/$1.ext" &&
	openssl x509 -req -in "$R/$1.csr" -CA "$R/$2.crt" -CAkey "$R/$2.key" -CAcreateserial \
		-days 2 -extfile "$R/$1.ext" -out "$R/$1.crt" 2>/dev/null
}
for ca in ca evilca; do
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=pillar-test-$ca" -keyout "$R/$ca.key" -out "$R/$ca.crt" 2>/dev/null
done
mkcert server ca localhost "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
extendedKeyUsage=serverAuth"
mkcert client ca pillar-controller "extendedKeyUsage=clientAuth"
mkcert evil evilca pillar-controller "extendedKeyUsage=clientAuth"
[ -s "$R/evil.crt" ] && ok "test certificates generated" || { bad "openssl certificates"; exit 1; }

# ---- helpers to run servers -------------------------------------------------------------------
# start NAME CMD...: runs a server in the background, waits for its "ready PORT" line, sets $port
start() {
	name=$1; shift
	"$@" > "$R/$name.out" 2> "$R/$name.err" &
	pid=$!
	pids="$pids $pid"
	eval "pid_$name=$pid"
	i=0
	while [ $i -lt 100 ] && ! grep -q '^ready' "$R/$name.out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	port=$(awk '/^ready/ {print $2}' "$R/$name.out")
	[ -n "$port" ] || { bad "$name did not start"; cat "$R/$name.err"; }
}
# stop NAME: SIGTERM (graceful) and check a clean exit without sanitizer reports
stop() {
	eval "p=\$pid_$1"
	kill -TERM "$p" 2>/dev/null
	wait "$p"
	rc=$?
	if [ $rc -eq 0 ] && ! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$R/$1.err"; then
		ok "$1 exits cleanly on SIGTERM (no leaks, no sanitizer reports)"
	else
		bad "$1 exit status $rc"
		tail -30 "$R/$1.err" | sed 's/^/    /'
	fi
}

CASES_FAST=unary_ok,statuses,unknown,deadline,metadata,health_check
SRV=$T/echo_server
CLI=$T/echo_client

# ---- grpcio client -> our server: unix, TCP v4/v6 plaintext -------------------------------------
start plain "$SRV" --listen "unix://$R/plain.sock" --listen 127.0.0.1:0
PLAIN_PORT=$port
check "grpcio client -> our server, unix socket, every case" $PY "$HERE/py_peer.py" client "unix://$R/plain.sock"
check "grpcio client -> our server, TCP 127.0.0.1, every case" $PY "$HERE/py_peer.py" client "127.0.0.1:$PLAIN_PORT"
if [ "$(stat -c %a "$R/plain.sock")" = 660 ]; then ok "unix socket mode 0660"; else bad "unix socket mode $(stat -c %a "$R/plain.sock")"; fi

if $PY -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
	start v6 "$SRV" --listen "[::1]:0"
	check "grpcio client -> our server, TCP [::1]" $PY "$HERE/py_peer.py" client "[::1]:$port" --cases $CASES_FAST
	check "our client -> our server, TCP [::1]" "$CLI" "[::1]:$port" --cases unary_ok,statuses
	stop v6
else
	echo "SKIP IPv6 loopback not available"
fi

# ---- curl and h2load ----------------------------------------------------------------------------
check_curl() {
	hdrs=$(curl -s --http2-prior-knowledge -D - -o /dev/null -X POST -H 'content-type: application/grpc' \
		-H 'te: trailers' --data-binary @/dev/null "http://127.0.0.1:$PLAIN_PORT/no.Such/Method")
	printf '%s\n' "$hdrs"
	printf '%s\n' "$hdrs" | grep -q '^HTTP/2 200' &&
	printf '%s\n' "$hdrs" | grep -qi '^content-type: application/grpc' &&
	printf '%s\n' "$hdrs" | grep -q '^grpc-status: 12' &&
	printf '%s\n' "$hdrs" | grep -q '^grpc-message: unknown service no.Such'
}
check "curl --http2-prior-knowledge: unknown method -> Trailers-Only UNIMPLEMENTED" check_curl

# one framed EchoRequest{message:"h2load"} as the body of every h2load request
printf '\000\000\000\000\010\012\006h2load' > "$R/req.bin"
run_h2load() {
	out=$(h2load -n "$1" -c 1 -m 100 -d "$R/req.bin" -H 'content-type: application/grpc' \
		-H 'te: trailers' "http://127.0.0.1:$2/pillar.test.v1.Echo/Unary" 2>&1)
	printf '%s\n' "$out" | grep -E 'finished in|requests:|status codes:|min.*max'
	printf '%s\n' "$out" | grep -q "requests: $1 total, $1 started, $1 done, $1 succeeded, 0 failed, 0 errored" &&
	printf '%s\n' "$out" | grep -q "status codes: $1 2xx"
}
check "h2load 100000 requests, 100 concurrent streams, ASan server: no failures" run_h2load 100000 "$PLAIN_PORT"

start limits "$SRV" --listen 127.0.0.1:0 --idle-ms 800 --max-conns 2
check "raw HTTP/2: SETTINGS after the preface, PING, idle close, connection limit" $PY "$HERE/h2_raw.py" 127.0.0.1 "$port" 800
stop limits

# graceful shutdown: a call in flight when SIGTERM arrives still completes.  SIGTERM goes only
# once the server's handler has begun the call's delay (its "naps" count rose): a call that has
# not reached the server yet is not in flight, and a loaded machine may take any time to get it
# there.  The delay (1 s of wall-clock time) then ends well within echo_server's 2 s grace.
$PY - "$R/plain.sock" <<'PYEOF' &
import os, sys, time
sys.path.insert(0, os.path.join(os.environ["BUILD"], "grpc-test", "py"))
import grpc, echo_pb2, echo_pb2_grpc
ch = grpc.insecure_channel("unix://" + sys.argv[1])
stub = echo_pb2_grpc.EchoStub(ch)
naps = lambda: int(stub.Unary(echo_pb2.EchoRequest(message="naps"), timeout=30).message[5:])
before = naps()
fut = stub.Unary.future(echo_pb2.EchoRequest(message="late", delay_ms=1000), timeout=60)
deadline = time.monotonic() + 30
while naps() == before and time.monotonic() < deadline:
    time.sleep(0.02)
open(sys.argv[1] + ".started", "w").write("1")
r = fut.result()
open(sys.argv[1] + ".graceful", "w").write(r.message)
PYEOF
cpid=$!
i=0
while [ $i -lt 600 ] && [ ! -e "$R/plain.sock.started" ]; do sleep 0.05; i=$((i + 1)); done
stop plain
wait $cpid
if [ "$(cat "$R/plain.sock.graceful" 2>/dev/null)" = late ]; then
	ok "graceful shutdown: in-flight call completes after GOAWAY"
else
	bad "graceful shutdown: in-flight call completes after GOAWAY"
fi

# ---- TLS and mTLS -----------------------------------------------------------------------------
start tls "$SRV" --listen 127.0.0.1:0 --cert "$R/server.crt" --key "$R/server.key"
check "grpcio client -> our server, TLS, every case" $PY "$HERE/py_peer.py" client "localhost:$port" --ca "$R/ca.crt"
check "our client -> our server, TLS, IP SAN verified" "$CLI" "127.0.0.1:$port" --ca "$R/ca.crt" --cases $CASES_FAST
check "our client refuses a server whose certificate does not name it" "$CLI" "127.0.0.1:$port" --ca "$R/ca.crt" --name wrong.example --expect-fail
check "plaintext client on the TLS listener is refused" "$CLI" "127.0.0.1:$port" --expect-fail
check "TLS server still serves after the plaintext client" "$CLI" "localhost:$port" --ca "$R/ca.crt" --cases unary_ok
stop tls

start mtls "$SRV" --listen 127.0.0.1:0 --cert "$R/server.crt" --key "$R/server.key" --ca "$R/ca.crt"
check "grpcio client -> our server, mTLS, every case" $PY "$HERE/py_peer.py" client "localhost:$port" --ca "$R/ca.crt" --cert "$R/client.crt" --key "$R/client.key"
check "grpcio client with a wrong client certificate is refused" $PY "$HERE/py_peer.py" client "localhost:$port" --ca "$R/ca.crt" --cert "$R/evil.crt" --key "$R/evil.key" --expect-fail
check "grpcio client without a client certificate is refused" $PY "$HERE/py_peer.py" client "localhost:$port" --ca "$R/ca.crt" --expect-fail
check "our client -> our server, mTLS" "$CLI" "localhost:$port" --ca "$R/ca.crt" --cert "$R/client.crt" --key "$R/client.key" --cases $CASES_FAST,concurrent
check "our client with a wrong client certificate is refused" "$CLI" "localhost:$port" --ca "$R/ca.crt" --cert "$R/evil.crt" --key "$R/evil.key" --expect-fail
stop mtls

# ---- our client -> grpcio server ---------------------------------------------------------------
start pyplain $PY "$HERE/py_peer.py" server --listen "unix://$R/py.sock"
check "our client -> grpcio server, unix socket, every case" "$CLI" "unix://$R/py.sock"
start pytcp $PY "$HERE/py_peer.py" server --listen 127.0.0.1:0
check "our client -> grpcio server, TCP, every case" "$CLI" "127.0.0.1:$port"
start pytls $PY "$HERE/py_peer.py" server --listen 127.0.0.1:0 --cert "$R/server.crt" --key "$R/server.key"
check "our client -> grpcio server, TLS" "$CLI" "localhost:$port" --ca "$R/ca.crt" --cases $CASES_FAST,concurrent,limit
start pymtls $PY "$HERE/py_peer.py" server --listen 127.0.0.1:0 --cert "$R/server.crt" --key "$R/server.key" --ca "$R/ca.crt"
check "our client -> grpcio server, mTLS" "$CLI" "localhost:$port" --ca "$R/ca.crt" --cert "$R/client.crt" --key "$R/client.key" --cases $CASES_FAST,oplock
check "our client with a wrong certificate is refused by grpcio mTLS" "$CLI" "localhost:$port" --ca "$R/ca.crt" --cert "$R/evil.crt" --key "$R/evil.key" --expect-fail

echo "grpc interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
