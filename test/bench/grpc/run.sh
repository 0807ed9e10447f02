#!/bin/sh
# gRPC benchmark: our servers and client against Debian's C++ gRPC (libgrpc++) in alternating
# rounds on the same machine, so that both sides of every ratio see the same load.
#
# Pairs (ours : C++), each at 1 and 16 calls in flight, BENCH_ROUNDS rounds (default 3) of
# ours, C++, ours, C++, ...; every figure is the median of the rounds with min–max:
#   probe      the node's CSI Probe (pillar-csi node, fake host tree) : the C++ server's Echo Unary,
#              both called with an empty request by the C++ generic client, unix socket
#   echo-nb    echo_server with Unary listed nonblocking : the C++ server, 100 B each way, unix
#   echo       echo_server, Unary on its worker threads  : the C++ server, 100 B each way, unix
#   agent      the agent's GetCapacity of a file pool (a blocking method: statvfs, on the worker
#              path; pillar-csi agent, fake configfs and host tree) : the C++ server's Echo
#              Unary with an empty request, both by the C++ generic client, unix socket
#   controller the controller's CSI Probe (nonblocking: the readiness thread's last answer, no
#              store call; pillar-csi controller, dir store) : the C++ server's Echo Unary, as
#              for agent
#   echo-tcp   echo-nb over TCP loopback
#   client     our echo_client : the C++ client, both against the C++ server, unix
# For each: p50 latency, requests/s, and the server's CPU time per call (utime+stime from
# /proc/<pid>/stat around the run; for `client`, the C++ server's under either client).  The raw unix-socket
# ping-pong floor (pingpong.c: one read and one write a side, no protocol) is measured in every
# round too, and p50 at 1 in flight is given as a multiple of it.  Each row ends with its goals
# (issue 30) met or NOT met: p50 at 1 in flight ≤ 0.7× C++ in every round and ≤ 3× the floor;
# at 16 in flight req/s ≥ 1.3× C++ and server CPU per call ≤ 0.8× (medians).  Then BENCH_ROUNDS
# alternating runs per server count syscalls (and futex calls) per call with perf stat (strace
# -c -f without perf), goal: no more than the C++ server.  The load average is printed with
# every round.
# Peers are built here into $BUILD/grpc-test (ours -O2 from the library sources; C++ from
# cpp_peer.cc with Debian's libgrpc++).  Env: BUILD, PILLAR_BIN (default $BUILD/pillar-csi);
# BENCH_N (calls per run, default 20000), BENCH_ROUNDS (default 3), BENCH_PAIRS (a subset of
# the pairs above), BENCH_STRACE=0 skips the syscall counts, BENCH_BASE names a second
# pillar-csi binary (e.g. main's build copied aside) whose node, agent and controller run as a
# third side of the probe, agent and controller pairs in every round (ours, base, C++), with
# the ratios ours/base per round: an A/B of two builds in the same run.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}"
PILLAR_BIN=${PILLAR_BIN:-$BUILD/pillar-csi}
T=$BUILD/grpc-test
R=$T/bench
N=${BENCH_N:-20000}
ROUNDS=${BENCH_ROUNDS:-3}
SIZE=100
sh "$ROOT/test/interop/grpc/build.sh"
mkdir -p "$R/cpp"
if [ ! -x "$T/cpp_peer" ] || [ "$HERE/cpp_peer.cc" -nt "$T/cpp_peer" ]; then
	protoc -I"$ROOT/test/interop/grpc" --cpp_out="$R/cpp" --grpc_out="$R/cpp" \
		--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin "$ROOT/test/interop/grpc/echo.proto"
	g++ -std=c++17 -O2 -I"$R/cpp" -o "$T/cpp_peer" "$HERE/cpp_peer.cc" "$R/cpp/echo.pb.cc" \
		"$R/cpp/echo.grpc.pb.cc" $(pkg-config --cflags --libs grpc++ protobuf) -pthread
fi
if [ ! -x "$T/pingpong" ] || [ "$HERE/pingpong.c" -nt "$T/pingpong" ]; then
	gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$T/pingpong" "$HERE/pingpong.c"
fi
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done' EXIT
waitready() { i=0; while [ $i -lt 100 ] && ! grep -q "$2" "$1" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done; }

# Starts the node, agent and controller of binary BIN with their sockets and state under
# $R/TAG (TAG "ours" or "base"); sets TAG_NODE_PID, TAG_AGENT_PID and TAG_CTL_PID.
start_roles() {
	bin=$1 D=$R/$2
	rm -rf "$D"
	mkdir -p "$D/node/host/dev" "$D/node/host/etc/nvme" "$D/node/host/sys" "$D/node/host/proc" \
		"$D/node/state" "$D/node/kubelet"
	: > "$D/node/host/dev/nvme-fabrics"
	"$bin" node --csi-endpoint="unix://$D/node.sock" --node-id=bench --state-dir="$D/node/state" \
		--host-root="$D/node/host" --kubelet-dir="$D/node/kubelet" > "$D/node.out" 2>&1 &
	pids="$pids $!"
	eval "${2}_NODE_PID=$!"
	A=$D/agent
	mkdir -p "$A/cfs/nvmet/subsystems" "$A/cfs/nvmet/ports" "$A/cfs/nvmet/hosts" "$A/files" \
		"$A/state" "$A/host/sys/module/nvmet_tcp" "$D/ctl/store"
	printf '{"backends": [{"file": {"pool": "bench", "directory": "%s"}}]}\n' "$A/files" \
		> "$A/config.json"
	"$bin" agent --listen-address="unix://$D/agent.sock" --config="$A/config.json" \
		--configfs-root="$A/cfs" --state-dir="$A/state" --host-root="$A/host" \
		--shutdown-grace-period=0s > "$D/agent.out" 2>&1 &
	pids="$pids $!"
	eval "${2}_AGENT_PID=$!"
	"$bin" controller --csi-endpoint="unix://$D/ctl.sock" --store="dir:$D/ctl/store" \
		--health-probe-bind-address=127.0.0.1:0 --metrics-bind-address=127.0.0.1:0 \
		> "$D/ctl.out" 2>&1 &
	pids="$pids $!"
	eval "${2}_CTL_PID=$!"
	waitready "$D/node.out" "node plugin serving"
	waitready "$D/agent.out" "agent serving"
	waitready "$D/ctl.out" "controller serving"
}
rm -rf "$R"/*.sock
start_roles "$PILLAR_BIN" ours
[ -n "${BENCH_BASE:-}" ] && start_roles "$BENCH_BASE" base
"$T/echo_server.rel" --listen "unix://$R/ours.sock" > "$R/ours.out" 2>&1 &
ECHO_PID=$!
pids="$pids $!"
"$T/echo_server.rel" --listen "unix://$R/ours-nb.sock" --listen 127.0.0.1:0 \
	--nonblocking Unary > "$R/ours-nb.out" 2>&1 &
NB_PID=$!
pids="$pids $!"
"$T/cpp_peer" server "unix://$R/cpp.sock" > "$R/cpp_unix.out" 2>&1 &
CPP_PID=$!
pids="$pids $!"
CPP_PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$T/cpp_peer" server "127.0.0.1:$CPP_PORT" > "$R/cpp_tcp.out" 2>&1 &
CPP_TCP_PID=$!
pids="$pids $!"
# GetCapacityRequest{backend_type: BACKEND_TYPE_FILE (6), pool_name: "bench"}
CAPACITY_REQ=0806120562656e6368
for f in ours ours-nb cpp_unix cpp_tcp; do waitready "$R/$f.out" ready; done
NB_TCP=127.0.0.1:$(awk '/ready/ {print $2}' "$R/ours-nb.out")

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
load() { cut -d' ' -f1 /proc/loadavg; }

# One timed run: SERVER_PID, then the client command.  Appends "p50 rps cpu_us_per_call load"
# to the file $OUT.
run() {
	spid=$1
	shift
	before=$(cpu_ticks "$spid")
	line=$("$@")
	after=$(cpu_ticks "$spid")
	echo "$line" | awk -v b="$before" -v a="$after" -v t="$ticks" -v n="$N" -v l="$(load)" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s %s %.2f %s\n", v["p50_us"], v["rps"], (a - b) * 1e6 / t / n, l
	}' >> "$OUT"
}

# The client command of a pair's side: WHO (ours|cpp) PAIR CONC
client_cmd() {
	case "$2" in
	probe) if [ "$1" != cpp ]; then echo "$T/cpp_peer call unix://$R/$1/node.sock /csi.v1.Identity/Probe $N $3"
		else echo "$T/cpp_peer call unix://$R/cpp.sock /pillar.test.v1.Echo/Unary $N $3"; fi ;;
	agent) if [ "$1" != cpp ]; then echo "$T/cpp_peer call unix://$R/$1/agent.sock /pillar_csi.agent.v1.AgentService/GetCapacity $N $3 $CAPACITY_REQ"
		else echo "$T/cpp_peer call unix://$R/cpp.sock /pillar.test.v1.Echo/Unary $N $3"; fi ;;
	controller) if [ "$1" != cpp ]; then echo "$T/cpp_peer call unix://$R/$1/ctl.sock /csi.v1.Identity/Probe $N $3"
		else echo "$T/cpp_peer call unix://$R/cpp.sock /pillar.test.v1.Echo/Unary $N $3"; fi ;;
	echo-nb) if [ "$1" = ours ]; then echo "$T/cpp_peer client unix://$R/ours-nb.sock $N $3 $SIZE"
		else echo "$T/cpp_peer client unix://$R/cpp.sock $N $3 $SIZE"; fi ;;
	echo) if [ "$1" = ours ]; then echo "$T/cpp_peer client unix://$R/ours.sock $N $3 $SIZE"
		else echo "$T/cpp_peer client unix://$R/cpp.sock $N $3 $SIZE"; fi ;;
	echo-tcp) if [ "$1" = ours ]; then echo "$T/cpp_peer client $NB_TCP $N $3 $SIZE"
		else echo "$T/cpp_peer client 127.0.0.1:$CPP_PORT $N $3 $SIZE"; fi ;;
	client) if [ "$1" = ours ]; then echo "$T/echo_client.rel unix://$R/cpp.sock --bench $N --conc $3 --size $SIZE"
		else echo "$T/cpp_peer client unix://$R/cpp.sock $N $3 $SIZE"; fi ;;
	esac
}
# The process whose CPU a side's run is charged to: WHO PAIR
server_pid() {
	case "$1:$2" in
	ours:probe | base:probe) eval echo "\$${1}_NODE_PID" ;;
	ours:agent | base:agent) eval echo "\$${1}_AGENT_PID" ;;
	ours:controller | base:controller) eval echo "\$${1}_CTL_PID" ;;
	ours:echo-nb | ours:echo-tcp) echo "$NB_PID" ;;
	ours:echo) echo "$ECHO_PID" ;;
	cpp:echo-tcp) echo "$CPP_TCP_PID" ;;
	*) echo "$CPP_PID" ;;
	esac
}

PAIRS=${BENCH_PAIRS:-probe agent controller echo-nb echo echo-tcp client}
# The sides of a pair's round, in the order they run: with BENCH_BASE our roles' pairs also
# run the base binary's server between ours and the C++ one.
sides() {
	case "${BENCH_BASE:+base}:$1" in
	base:probe | base:agent | base:controller) echo "ours base cpp" ;;
	*) echo "ours cpp" ;;
	esac
}
echo "gRPC unary benchmark: $N calls per run, $ROUNDS alternating rounds (ours, C++, ours, C++, ...), $(nproc) CPUs"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$R"/res.*
for round in $(seq 1 "$ROUNDS"); do
	OUT=$R/res.floor
	line=$("$T/pingpong" "$N" "$SIZE")
	echo "$line" | awk -v l="$(load)" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s %s 0 %s\n", v["p50_us"], v["rps"], l }' >> "$OUT"
	for pair in $PAIRS; do
		for c in 1 16; do
			for who in $(sides "$pair"); do
				OUT=$R/res.$pair.$c.$who
				# shellcheck disable=SC2046
				run "$(server_pid $who $pair)" $(client_cmd $who $pair $c)
			done
		done
	done
	echo "round $round done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done

# median and min–max of column COL of FILE
stat_of() { sort -g -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END {
	m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	printf "%g (%g–%g)", m, v[1], v[NR] }'; }
# per-round ratios ours/C++ of column COL, one a line, sorted
ratios() { paste -d' ' "$1" "$2" | awk -v c="$3" '{ print ($(c + 4) > 0 ? $c / $(c + 4) : 0) }' | sort -g; }
# median (min–max) of numbers on stdin
median_spread() { awk '{ v[NR] = $1 } END {
	m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	printf "%.2f× (%.2f–%.2f)", m, v[1], v[NR] }'; }
ratio_of() { ratios "$1" "$2" "$3" | median_spread; }
# the ratios ours/other of column COL in round order
per_round() { paste -d' ' "$1" "$2" | awk -v c="$3" '{ printf "%s%.2f", (NR > 1 ? " " : ""), ($(c + 4) > 0 ? $c / $(c + 4) : 0) }'; }
# "met" or "NOT met": VALUE OP GOAL (OP is le or ge)
verdict() { awk -v v="$1" -v g="$3" -v op="$2" 'BEGIN { ok = op == "le" ? v <= g : v >= g; print ok ? "met" : "NOT met" }'; }
# the median / the largest of the per-round ratios
ratio_median() { ratios "$1" "$2" "$3" | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio_max() { ratios "$1" "$2" "$3" | tail -n 1; }
median_col() { sort -g -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
floor_p50=$(sort -g -k1 "$R/res.floor" | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
echo
echo "unix-socket ping-pong floor (${SIZE} B each way): p50 $(stat_of "$R/res.floor" 1) us, $(stat_of "$R/res.floor" 2) round trips/s"
for pair in $PAIRS; do
	for c in 1 16; do
		o=$R/res.$pair.$c.ours p=$R/res.$pair.$c.cpp
		echo "$pair c=$c (load $(stat_of "$o" 4)):"
		echo "  p50 us      ours $(stat_of "$o" 1)  C++ $(stat_of "$p" 1)  ratio $(ratio_of "$o" "$p" 1)"
		echo "  p50 ratio per round: $(per_round "$o" "$p" 1)"
		echo "  req/s       ours $(stat_of "$o" 2)  C++ $(stat_of "$p" 2)  ratio $(ratio_of "$o" "$p" 2)"
		if [ "$pair" = client ]; then
			echo "  the C++ server's CPU us/call  with our client $(stat_of "$o" 3)  with the C++ client $(stat_of "$p" 3)"
		else
			echo "  server CPU us/call  ours $(stat_of "$o" 3)  C++ $(stat_of "$p" 3)  ratio $(ratio_of "$o" "$p" 3)"
		fi
		b=$R/res.$pair.$c.base
		if [ -f "$b" ]; then
			echo "  base        p50 us $(stat_of "$b" 1)  req/s $(stat_of "$b" 2)  server CPU us/call $(stat_of "$b" 3)"
			echo "  ours/base   p50 $(ratio_of "$o" "$b" 1), per round $(per_round "$o" "$b" 1); req/s $(ratio_of "$o" "$b" 2); CPU $(ratio_of "$o" "$b" 3)"
		fi
		if [ "$c" = 1 ]; then
			of=$(awk -v a="$(median_col "$o" 1)" -v f="$floor_p50" 'BEGIN { printf "%.2f", a / f }')
			pf=$(awk -v a="$(median_col "$p" 1)" -v f="$floor_p50" 'BEGIN { printf "%.2f", a / f }')
			echo "  p50 / floor ours ${of}×  C++ ${pf}×"
			[ "$pair" = client ] && continue
			echo "  goal p50 ratio ≤ 0.7× in every round: $(verdict "$(ratio_max "$o" "$p" 1)" le 0.7)"
			echo "  goal p50 ≤ 3× the floor: $(verdict "$of" le 3)"
		elif [ "$pair" != client ]; then
			echo "  goal req/s ratio ≥ 1.3×: $(verdict "$(ratio_median "$o" "$p" 2)" ge 1.3)"
			echo "  goal server CPU per call ratio ≤ 0.8×: $(verdict "$(ratio_median "$o" "$p" 3)" le 0.8)"
		fi
	done
done

[ "${BENCH_STRACE:-1}" = 0 ] && exit 0
# syscalls (and futex calls) per call of one server process during one run: perf stat's syscall
# tracepoints where perf can read them (it barely slows the server), else strace -c -f (which
# does, and so shifts work between threads)
if perf stat -e raw_syscalls:sys_enter -- true > /dev/null 2>&1; then
	COUNTER=perf
elif command -v strace > /dev/null; then
	COUNTER=strace
else
	echo "syscalls per call: neither perf nor strace can count, skipped"
	exit 0
fi
count() { # PID CLIENT... -> appends "total futex load" to $OUT
	spid=$1
	shift
	if [ "$COUNTER" = perf ]; then
		perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_futex -p "$spid" \
			-o "$R/count.out" &
	else
		strace -c -f -p "$spid" -o "$R/count.out" 2> /dev/null &
	fi
	st=$!
	sleep 0.5
	"$@" > /dev/null
	kill -INT $st
	wait $st 2> /dev/null || true
	if [ "$COUNTER" = perf ]; then
		awk -F, -v n="$N" -v l="$(load)" '$3 == "raw_syscalls:sys_enter" { t = $1 }
			$3 == "syscalls:sys_enter_futex" { f = $1 } END { printf "%.2f %.2f %s\n", t / n, f / n, l }' \
			"$R/count.out" >> "$OUT"
	else
		awk -v n="$N" -v l="$(load)" '$NF == "total" { t = $4 } $NF == "futex" { f = $4 }
			END { printf "%.2f %.2f %s\n", t / n, f / n, l }' "$R/count.out" >> "$OUT"
	fi
}
echo
echo "syscalls per call on the server ($COUNTER, $ROUNDS alternating rounds of $N calls each):"
rm -f "$R"/sys.*
for round in $(seq 1 "$ROUNDS"); do
	for pair in $PAIRS; do
		case $pair in echo-tcp | client) continue ;; esac
		for c in 1 16; do
			for who in $(sides "$pair"); do
				OUT=$R/sys.$pair.$c.$who
				# shellcheck disable=SC2046
				count "$(server_pid $who $pair)" $(client_cmd $who $pair $c)
			done
		done
	done
done
for pair in $PAIRS; do
	case $pair in echo-tcp | client) continue ;; esac
	for c in 1 16; do
		o=$R/sys.$pair.$c.ours p=$R/sys.$pair.$c.cpp
		echo "  $pair c=$c (load $(stat_of "$o" 3)): ours $(stat_of "$o" 1) (futex $(stat_of "$o" 2))  C++ $(stat_of "$p" 1) (futex $(stat_of "$p" 2))"
		b=$R/sys.$pair.$c.base
		[ -f "$b" ] && echo "    base $(stat_of "$b" 1) (futex $(stat_of "$b" 2))"
		echo "    goal no more syscalls per call than C++: $(verdict "$(median_col "$o" 1)" le "$(median_col "$p" 1)")"
	done
done
