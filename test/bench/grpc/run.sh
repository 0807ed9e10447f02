#!/bin/sh
# gRPC benchmark: unary p50/p99 latency and requests/s at 1 and 16 concurrent calls, on a unix
# socket and on TCP loopback, same 100-byte payload both ways:
#   servers: our echo_server vs the C++ gRPC server, both driven by the C++ gRPC client;
#   clients: our echo_client vs the C++ gRPC client, both against the C++ gRPC server.
# Peers are built here into $BUILD/grpc-test (ours -O2 from the library sources; C++ from
# cpp_peer.cc with Debian's libgrpc++).  Env: BUILD; BENCH_N (calls per run, default 20000).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}"
T=$BUILD/grpc-test
R=$T/bench
N=${BENCH_N:-20000}
SIZE=100
sh "$ROOT/test/interop/grpc/build.sh"
mkdir -p "$R/cpp"
if [ ! -x "$T/cpp_peer" ] || [ "$HERE/cpp_peer.cc" -nt "$T/cpp_peer" ]; then
	protoc -I"$ROOT/test/interop/grpc" --cpp_out="$R/cpp" --grpc_out="$R/cpp" \
		--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin "$ROOT/test/interop/grpc/echo.proto"
	g++ -std=c++17 -O2 -I"$R/cpp" -o "$T/cpp_peer" "$HERE/cpp_peer.cc" "$R/cpp/echo.pb.cc" \
		"$R/cpp/echo.grpc.pb.cc" $(pkg-config --cflags --libs grpc++ protobuf) -pthread
fi
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done' EXIT
waitready() { i=0; while [ $i -lt 100 ] && ! grep -q ready "$1"; do sleep 0.1; i=$((i + 1)); done; }

rm -f "$R"/*.sock
"$T/echo_server.rel" --listen "unix://$R/ours.sock" --listen 127.0.0.1:0 > "$R/ours.out" 2>&1 &
pids="$pids $!"
waitready "$R/ours.out"
OURS_TCP=127.0.0.1:$(awk '/ready/ {print $2}' "$R/ours.out")
CPP_PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$T/cpp_peer" server "unix://$R/cpp.sock" > "$R/cpp_unix.out" 2>&1 &
pids="$pids $!"
"$T/cpp_peer" server "127.0.0.1:$CPP_PORT" > "$R/cpp_tcp.out" 2>&1 &
pids="$pids $!"
waitready "$R/cpp_unix.out"
waitready "$R/cpp_tcp.out"

# run LABEL CMD... -> "p50 p99 rps"
measure() { "$@" | sed -E 's/p50_us=([0-9]+) p99_us=([0-9]+) rps=([0-9]+)/\1 \2 \3/'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
row() { # row WHAT SOCK CONC OURS(p50 p99 rps) CPP(p50 p99 rps)
	set -- "$1" "$2" "$3" $4 $5
	printf '%-7s %-5s c=%-3s ours: p50 %6s us p99 %6s us %7s req/s | C++: p50 %6s us p99 %6s us %7s req/s | p50 ratio %s, req/s ratio %s\n' \
		"$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "$(ratio "$4" "$7")" "$(ratio "$6" "$9")"
}
echo "gRPC unary benchmark: $N calls per run, ${SIZE}-byte payload each way (ratios: ours / C++)"
for sock in unix tcp; do
	if [ $sock = unix ]; then ours="unix://$R/ours.sock" cpp="unix://$R/cpp.sock"; else ours=$OURS_TCP cpp=127.0.0.1:$CPP_PORT; fi
	for c in 1 16; do
		s_ours=$(measure "$T/cpp_peer" client "$ours" "$N" "$c" "$SIZE")
		s_cpp=$(measure "$T/cpp_peer" client "$cpp" "$N" "$c" "$SIZE")
		row server $sock $c "$s_ours" "$s_cpp"
		c_ours=$(measure "$T/echo_client.rel" "$cpp" --bench "$N" --conc "$c" --size "$SIZE")
		row client $sock $c "$c_ours" "$s_cpp"
	done
done
