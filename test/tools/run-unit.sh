#!/bin/sh
# Run each Check test program given as an argument and add up what Check reports.
# Prints one closing line "unit: N passed, M failed" (with the failing programs' names in
# parentheses when any failed) and exits non-zero on any failure.  Right before that line it
# repeats every failure's lines, so a log cut to its last lines still says what failed.
set -u
passed=0 failed=0 broken= names=
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Check ends a test after 4 s by default; these tests assert behaviour, not time, so a loaded
# machine must not fail them: the budget is five times that unless the caller sets it.
export CK_TIMEOUT_MULTIPLIER="${CK_TIMEOUT_MULTIPLIER:-5}"
# a test case without a timeout of its own gets 30 s (times the multiplier), not Check's 4 s
export CK_DEFAULT_TIMEOUT="${CK_DEFAULT_TIMEOUT:-30}"
recap=$(mktemp "${TMPDIR:-/tmp}/run-unit.XXXXXX") || exit 1
trap 'rm -f "$recap"' EXIT
# note NAME: records a failing program once for the closing line
note() {
	case " $names " in *" $1 "*) ;; *) names="${names:+$names }$1" ;; esac
}
for t in "$@"; do
	name=$(basename "$t")
	out=$("$t" 2>&1)
	rc=$?
	bad=$(printf '%s\n' "$out" | grep -v '^[0-9]*%: Checks' |
		grep -E ':[FE]:|ERROR|runtime error|Sanitizer' || true)
	if [ -n "$bad" ]; then
		printf '%s\n' "$bad"
		printf '%s\n' "$bad" | sed "s|^|  $name: |" >> "$recap"
	fi
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
	if [ -z "$line" ]; then
		printf '%s\n' "$out" | tail -n 30
		echo "unit: $name: no Check summary (exit $rc)"
		echo "  $name: no Check summary (exit $rc)" >> "$recap"
		broken="$broken $name"
		note "$name"
		failed=$((failed + 1))
		continue
	fi
	n=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
	f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
	e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
	printf '  %-28s %s\n' "$name" "$line"
	passed=$((passed + n - f - e))
	failed=$((failed + f + e))
	[ $((f + e)) -eq 0 ] || note "$name"
	if [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ]; then
		echo "unit: $name exited $rc"
		echo "  $name: exited $rc without a failed check" >> "$recap"
		broken="$broken $name"
		note "$name"
		failed=$((failed + 1))
	fi
done
if [ "$failed" -ne 0 ]; then
	echo "unit: the failures again:"
	cat "$recap"
	echo "unit: $passed passed, $failed failed ($names)"
else
	echo "unit: $passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
