#!/bin/sh
# Runs libFuzzer targets (built by `make fuzz`) for FUZZ_S seconds each, from the seed corpus
# test/fuzz/corpus/<target>/ (read only; every crash ever found is kept there as a regression
# input) plus a working corpus $DIR/work/<target>/ that grows across runs.
# Usage: run.sh DIR TARGET...   Prints one line per target:
#   fuzz <target>: ok|CRASH  <execs> execs, cov <edges>, ft <features>, <crashes> crashes, <s> s
# and exits non-zero when any target crashed, leaked or hit a sanitizer report (the input is
# left as $DIR/<target>-crash-*: copy it into the seed corpus with the fix).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=$1
shift
SECS=${FUZZ_S:-300}
# scratch files of the targets on tmpfs when there is one: their durable writes fsync
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
	export TMPDIR=/dev/shm
fi
rc=0
for bin in "$@"; do
	name=$(basename "$bin")
	seed="$HERE/corpus/$name"
	work="$DIR/work/$name"
	log="$DIR/$name.log"
	mkdir -p "$work" "$seed"
	start=$(date +%s)
	"$bin" -max_total_time="$SECS" -rss_limit_mb=2048 -max_len=65536 -timeout=25 \
		-print_final_stats=1 -artifact_prefix="$DIR/$name-" "$work" "$seed" >"$log" 2>&1
	st=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
	if [ "$st" -eq 0 ]; then
		echo "fuzz $name: ok ${execs:-0} execs, ${cov:-cov: ?}, 0 crashes, $(($(date +%s) - start)) s"
	else
		echo "fuzz $name: CRASH ${execs:-?} execs, ${cov:-cov: ?}, 1 crash (exit $st), see $log"
		grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -8
		rc=1
	fi
done
exit $rc
