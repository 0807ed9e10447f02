# Sourced by the run.sh of a bench that a Python script drives. Before sourcing, set HERE (the
# bench's folder) and RESULTS (its results folder's name under $BUILD). Needs BUILD and
# PILLAR_BIN (exported to the script); generates the grpcio stubs the scripts import; empties
# R=$BUILD/$RESULTS.
#
# python_bench SCRIPT ARGS... runs $HERE/SCRIPT with R and ARGS and returns its exit code. When the
# shell exits, the script and every process it listed in R/pids are killed.
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
R=$BUILD/$RESULTS
sh "$ROOT/test/interop/lib/stubs.sh" "$BUILD/controller-test/py" csi agent health
rm -rf "$R" && mkdir -p "$R"
child=""
trap 'set +e; [ -n "$child" ] && kill "$child" 2>/dev/null; [ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT

python_bench() {
	script=$1
	shift
	/usr/bin/python3 "$HERE/$script" "$R" "$@" &
	child=$!
	status=0
	wait "$child" || status=$?
	child=""
	return "$status"
}
