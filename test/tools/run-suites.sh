#!/bin/sh
# Run suite scripts (test/interop/*/run.sh, test/bench/*/run.sh) one after the other.
# Usage: run-suites.sh KIND SCRIPT...  Prints "KIND: N passed, M failed" (with the failed suites'
# names in parentheses when any failed) and fails on any failure.  Right before that line it
# repeats each failed suite's FAIL / "not ok" lines, so a log cut to its last lines still says
# what failed.
set -u
kind=$1
shift
if [ $# -eq 0 ]; then
	echo "$kind: no suites yet"
	exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/run-suites.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
passed=0 failed=0 names=
: > "$work/recap"
for s in "$@"; do
	name=$(basename "$(dirname "$s")")
	start=$(date +%s)
	# the suite writes to a file that is shown as it grows (a daemon a suite leaves behind must
	# not hold a pipe open), and its failure lines are picked from it afterwards
	# made before tail opens it: the suite's own redirection may come after tail starts
	: > "$work/out"
	sh "$s" > "$work/out" 2>&1 <&0 &
	pid=$!
	tail -n +1 -f --pid="$pid" "$work/out" &
	shown=$!
	wait "$pid"
	rc=$?
	wait "$shown"
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		echo "$kind: $name ok ($(($(date +%s) - start)) s)"
	else
		failed=$((failed + 1))
		names="${names:+$names }$name"
		echo "$kind: $name FAILED ($(($(date +%s) - start)) s)"
		grep -aE '^(FAIL|not ok)' "$work/out" | head -n 40 | sed "s|^|  $name: |" >> "$work/recap"
		grep -aqE '^(FAIL|not ok)' "$work/out" ||
			{ echo "  $name: no FAIL line; its last lines:"; tail -n 5 "$work/out" | sed "s|^|  $name:   |"; } >> "$work/recap"
	fi
done
if [ "$failed" -ne 0 ]; then
	echo "$kind: the failures again:"
	cat "$work/recap"
	echo "$kind: $passed passed, $failed failed ($names)"
else
	echo "$kind: $passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
