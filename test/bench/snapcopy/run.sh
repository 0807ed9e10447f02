#!/bin/sh
# Snapshot copy throughput of the file backend (issue 27): CreateSnapshot's copy
# (src/backend/file_copy.c: reflink, else data extents only, then fsync, rename, fsync of the
# directory) against `cp --reflink=auto --sparse=always` followed by `sync -f` (the same
# durability) on the same file, in the same run, rounds alternating between the two so that a
# change of the machine's load hits both alike.  The file: BENCH_COPY_MIB MiB (default 512), its
# every other MiB written with random data and the rest a hole (half sparse, as a thin
# volume).  Each figure: MiB/s of the file's length, median of BENCH_REPS rounds (default 5)
# with the spread (min-max); the load average before and after.  Both copies must equal the
# source (cmp) and keep its holes (allocated blocks at most the source's); otherwise it fails.
# Env: BUILD; BENCH_COPY_DIR (default /var/tmp: a disk filesystem, as the file backend's
# directory is; a tmpfs has neither reflink nor direct I/O).
set -eu
: "${BUILD:?BUILD must be set}"
COPY=$BUILD/bench/snapcopy/copy_bench
REPS=${BENCH_REPS:-5}
MIB=${BENCH_COPY_MIB:-512}
T=$(mktemp -d "${BENCH_COPY_DIR:-/var/tmp}/pillar-copy.XXXXXX")
trap 'rm -rf "$T"' EXIT

stats() { echo "$1" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.0f %.0f %.0f", m, v[1], v[NR]}'; }
now() { date +%s.%N; }
blocks() { stat -c %b "$1"; }

i=0
while [ $i -lt "$MIB" ]; do
	dd if=/dev/urandom of="$T/src" bs=1M count=1 seek=$i conv=notrunc 2>/dev/null
	i=$((i + 2))
done
truncate -s "${MIB}M" "$T/src"
sync -f "$T/src"
fs=$(stat -f -c %T "$T")
echo "snapshot copy: ${MIB} MiB file (half holes) on $fs in $T, median of $REPS rounds (min-max) MiB/s"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
ours="" theirs=""
r=0
while [ $r -lt "$REPS" ]; do
	rm -f "$T/a" "$T/b"
	sync -f "$T/src"
	echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
	out=$(cd "$T" && "$COPY" src a)
	s=$(echo "$out" | sed -n 's/.*seconds=\([0-9.]*\).*/\1/p')
	ours="$ours $(awk -v s="$s" -v m="$MIB" 'BEGIN {printf "%.1f", m / s}')"
	echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
	t0=$(now)
	cp --reflink=auto --sparse=always "$T/src" "$T/b"
	sync -f "$T/b"
	t1=$(now)
	theirs="$theirs $(awk -v a="$t0" -v b="$t1" -v m="$MIB" 'BEGIN {printf "%.1f", m / (b - a)}')"
	cmp -s "$T/src" "$T/a" || { echo "FAIL: our copy differs from the source"; exit 1; }
	cmp -s "$T/src" "$T/b" || { echo "FAIL: cp's copy differs from the source"; exit 1; }
	[ "$(blocks "$T/a")" -le "$(blocks "$T/src")" ] || {
		echo "FAIL: our copy allocates $(blocks "$T/a") blocks, the source $(blocks "$T/src")"
		exit 1
	}
	r=$((r + 1))
done
set -- $(stats "$ours")
printf 'ours (backend_file_copy)           %6s MiB/s (%s-%s)\n' "$1" "$2" "$3"
o=$1
set -- $(stats "$theirs")
printf 'cp --reflink=auto --sparse=always  %6s MiB/s (%s-%s)\n' "$1" "$2" "$3"
awk -v o="$o" -v c="$1" 'BEGIN {printf "ours / cp: %.2f\n", o / c}'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "blocks allocated: source $(blocks "$T/src"), ours $(blocks "$T/a"), cp $(blocks "$T/b") (512-byte units)"
