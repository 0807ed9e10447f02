#!/bin/sh
# Run suite scripts (test/interop/*/run.sh, test/bench/*/run.sh) one after the other.
# Usage: run-suites.sh KIND SCRIPT...  Prints "KIND: N passed, M failed" and fails on any failure.
set -u
kind=$1
shift
if [ $# -eq 0 ]; then
	echo "$kind: no suites yet"
	exit 0
fi
passed=0 failed=0
for s in "$@"; do
	name=$(basename "$(dirname "$s")")
	start=$(date +%s)
	if sh "$s"; then
		passed=$((passed + 1))
		echo "$kind: $name ok ($(($(date +%s) - start)) s)"
	else
		failed=$((failed + 1))
		echo "$kind: $name FAILED ($(($(date +%s) - start)) s)"
	fi
done
echo "$kind: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
