#!/bin/sh
# Run each Check test program given as an argument and add up what Check reports.
# Prints one closing line "unit: N passed, M failed" and exits non-zero on any failure.
set -u
passed=0 failed=0 broken=
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Check ends a test after 4 s by default; these tests assert behaviour, not time, so a loaded
# machine must not fail them: the budget is five times that unless the caller sets it.
export CK_TIMEOUT_MULTIPLIER="${CK_TIMEOUT_MULTIPLIER:-5}"
for t in "$@"; do
	out=$("$t" 2>&1)
	rc=$?
	printf '%s\n' "$out" | grep -v '^[0-9]*%: Checks' | grep -E ':[FE]:|ERROR|runtime error|Sanitizer' || true
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
	if [ -z "$line" ]; then
		printf '%s\n' "$out" | tail -n 30
		echo "unit: $(basename "$t"): no Check summary (exit $rc)"
		broken="$broken $(basename "$t")"
		failed=$((failed + 1))
		continue
	fi
	n=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
	f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
	e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
	printf '  %-28s %s\n' "$(basename "$t")" "$line"
	passed=$((passed + n - f - e))
	failed=$((failed + f + e))
	if [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ]; then
		echo "unit: $(basename "$t") exited $rc"
		broken="$broken $(basename "$t")"
		failed=$((failed + 1))
	fi
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
