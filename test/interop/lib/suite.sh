# suite.sh - the run.sh part shared by the interop suites whose checks are one Python program
# that prints PASS/FAIL lines and ends with "(NAME suite: N passed, M failed)". Sourced (POSIX sh):
#   suite_init PIDS       cleanup on exit or interrupt: the program, and every process whose pid
#                         the suite wrote into the file PIDS (killed with SIGKILL); a run.sh may
#                         define suite_cleanup_more for more (it runs in suite_cleanup too)
#   suite_stubs NAME DIR PROTO...  the grpcio stubs (lib/stubs.sh); on failure the closing line
#                         of a failed run, and exit 1
#   suite_run NAME OUT PROGRAM ARG...  runs python3 PROGRAM ARG... with its output into OUT,
#                         cleans up, prints OUT and "NAME interop: N passed, M failed" (a program
#                         that did not print its closing line is one more failure); returns
#                         non-zero on any failure
suite_child=""
suite_pids=""
suite_lib=$(cd "$(dirname "$0")/../lib" && pwd)

suite_cleanup() {
	[ -n "$suite_child" ] && kill "$suite_child" 2>/dev/null
	if [ -n "$suite_pids" ] && [ -f "$suite_pids" ]; then
		for p in $(cat "$suite_pids"); do kill -9 "$p" 2>/dev/null; done
	fi
	if command -v suite_cleanup_more > /dev/null 2>&1; then suite_cleanup_more; fi
	wait 2>/dev/null
}

suite_init() {
	suite_pids=$1
	trap suite_cleanup EXIT
	trap 'exit 130' INT TERM
}

suite_stubs() {
	_sn=$1 _sd=$2
	shift 2
	sh "$suite_lib/stubs.sh" "$_sd" "$@" && return 0
	echo "FAIL generating the grpcio stubs"
	echo "$_sn interop: 0 passed, 1 failed"
	exit 1
}

suite_run() {
	_sn=$1 _so=$2
	shift 2
	/usr/bin/python3 "$@" > "$_so" 2>&1 &
	suite_child=$!
	wait "$suite_child"
	suite_child=""
	suite_cleanup
	cat "$_so"
	_sp=$(grep -c '^PASS' "$_so")
	_sf=$(grep -c '^FAIL' "$_so")
	grep -q "^($_sn suite: [0-9]* passed, [0-9]* failed)\$" "$_so" ||
		{ echo "FAIL ${1##*/} did not finish"; _sf=$((_sf + 1)); }
	echo "$_sn interop: $_sp passed, $_sf failed"
	[ "$_sf" -eq 0 ]
}
