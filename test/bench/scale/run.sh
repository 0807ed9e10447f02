#!/bin/sh
# Scale benchmark: cost per object must not grow with the number of objects (issue 14).
#   agent restore: one ReconcileState(complete) after a "reboot" (fake configfs on tmpfs emptied,
#     state directory kept), N exports with ACL on; wall and CPU seconds, per-export cost, the
#     seconds the restore waited runnable for a CPU (run queue; wall ~ cpu + runq, so on a loaded
#     machine the difference between wall and CPU is this wait), and syscalls per export from
#     `strace -c -f` (a restore of N minus a restore of 0, over N; the fake configfs's own
#     emulation of the attribute files the kernel makes is included, about a third of them).
#   store: the embedded store's create/update/get/list at N objects already stored (see
#     store_bench.c); per-operation cost at each N.
# Each figure is the median of BENCH_REPS runs (default 3) with the spread (min-max).  The goals
# are printed as met / NOT met; a functional failure (an export or a store call failing) fails.
# Env: BUILD; BENCH_AGENT_N (default "100 1000 10000"); BENCH_STORE_N (default "100 1000 10000");
# BENCH_TMP (default /dev/shm, a tmpfs); BENCH_STRACE=0 skips the syscall counts.
set -eu
: "${BUILD:?BUILD must be set}"
AGENT=$BUILD/bench/scale/agent_bench
STORE=$BUILD/bench/scale/store_bench
REPS=${BENCH_REPS:-3}
T=$(mktemp -d "${BENCH_TMP:-/dev/shm}/pillar-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT

# stats "v1 v2 ..." -> "median min max"
stats() { echo "$1" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%s %s %s", m, v[1], v[NR]}'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
syscalls() { # syscalls DIR N -> total syscalls of one restore
	"$AGENT" wipe "$1"
	strace -f -c -o "$T/strace.out" "$AGENT" restore "$1" "$2" > /dev/null
	awk '$NF == "total" {print $4}' "$T/strace.out"
}

echo "agent restore: one ReconcileState(complete) on a fake configfs (tmpfs), median of $REPS (min-max)"
"$AGENT" setup "$T/a0" 0
base=""
if [ "${BENCH_STRACE:-1}" != 0 ] && command -v strace > /dev/null; then base=$(syscalls "$T/a0" 0); fi
first=""
for n in ${BENCH_AGENT_N:-100 1000 10000}; do
	"$AGENT" setup "$T/a$n" "$n"
	wall="" cpu="" runq=""
	i=0
	while [ $i -lt "$REPS" ]; do
		"$AGENT" wipe "$T/a$n"
		out=$("$AGENT" restore "$T/a$n" "$n")
		case $out in *failed=0*) ;; *) echo "restore of $n failed: $out"; exit 1 ;; esac
		wall="$wall $(echo "$out" | field seconds)"
		cpu="$cpu $(echo "$out" | field cpu)"
		runq="$runq $(echo "$out" | field runq)"
		i=$((i + 1))
	done
	set -- $(stats "$wall")
	w=$1 wmin=$2 wmax=$3
	set -- $(stats "$cpu")
	c=$1
	set -- $(stats "$runq")
	q=$1
	sc="-"
	if [ -n "$base" ]; then sc=$(awk -v t="$(syscalls "$T/a$n" "$n")" -v b="$base" -v n="$n" 'BEGIN {printf "%.1f", (t - b) / n}'); fi
	per=$(awk -v s="$c" -v n="$n" 'BEGIN {printf "%.3f", s * 1000 / n}')
	[ -n "$first" ] || first=$per
	printf 'agent restore n=%-6s wall %7.3f s (%.3f-%.3f) %6.3f ms/export | cpu %7.3f s %6.3f ms/export (x%s of the first row) | runq %7.3f s | %s syscalls/export\n' \
		"$n" "$w" "$wmin" "$wmax" "$(awk -v s="$w" -v n="$n" 'BEGIN {printf "%.3f", s * 1000 / n}')" \
		"$c" "$per" "$(awk -v a="$per" -v b="$first" 'BEGIN {printf "%.2f", a / b}')" "$q" "$sc"
	case $n in
	1000) awk -v w="$w" -v c="$c" 'BEGIN {printf "  goal: 1,000 exports <= 0.3 s: %s (wall %.3f s; cpu %.3f s: %s without a run-queue wait)\n", (w <= 0.3 ? "met" : "NOT met"), w, c, (c <= 0.3 ? "met" : "NOT met")}' ;;
	10000) awk -v w="$w" -v c="$c" 'BEGIN {printf "  goal: 10,000 exports <= 3 s: %s (wall %.3f s; cpu %.3f s: %s without a run-queue wait)\n", (w <= 3 ? "met" : "NOT met"), w, c, (c <= 3 ? "met" : "NOT met")}' ;;
	esac
	rm -rf "$T/a$n"
done

echo "embedded store: cost per operation at N objects stored (tmpfs, then the build directory's disk), median of $REPS (min-max)"
for dir in "$T" "$BUILD"; do
	for n in ${BENCH_STORE_N:-100 1000 10000}; do
		"$STORE" "$dir/store-bench.$$" "$n" "$REPS" || exit 1
		rm -rf "$dir/store-bench.$$"
	done
done
if [ "${BENCH_STRACE:-1}" != 0 ] && command -v strace > /dev/null; then
	out=$(strace -f -c -e trace=fsync,fdatasync -o "$T/strace.out" "$STORE" "$T/store-fsync" 100 1)
	w=$(echo "$out" | field writes)
	awk -v w="$w" '$NF ~ /^(fsync|fdatasync)$/ {n += $4} END {printf "store: %.2f fsyncs per write over %d writes (create, update, status: temp file + directory = 2; delete: directory = 1; the counter ceiling: 2 per 1,024 versions)\n", n / w, w}' "$T/strace.out"
fi
