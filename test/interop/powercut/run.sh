#!/bin/sh
# Power-cut suite (issue 30): the controller's and the agent's machine lose power at each fsync
# of a CSI CreateVolume (the binary's PILLAR_TEST_POWERCUT fault point), what was not yet durable
# is dropped, the process restarts and every acknowledged create must have survived.  See
# powercut.py.  Env: PILLAR_BIN, BUILD.  Prints "powercut interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
R=$BUILD/powercut-test
trap '[ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT
trap 'exit 130' INT TERM
sh "$HERE/../lib/stubs.sh" "$BUILD/controller-test/py" csi agent health ||
	{ echo "powercut interop: 0 passed, 1 failed (grpcio stubs)"; exit 1; }
rm -rf "$R" && mkdir -p "$R"
/usr/bin/python3 "$HERE/powercut.py" "$R"
