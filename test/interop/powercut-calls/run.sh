#!/bin/sh
# Power-cut suite of the calls other than CreateVolume (issue 30): the controller's machine and
# the storage node lose power at each fsync of DeleteVolume, Controller(Un)PublishVolume,
# ControllerExpandVolume, Create/DeleteSnapshot, CreateVolume from a snapshot and the agent's
# restore; see calls.py.  Env: PILLAR_BIN, BUILD (POWERCUT_CALLS="del pub ...": a subset).
# Prints "powercut-calls interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
R=$BUILD/powercut-calls-test
trap '[ -f "$R/pids" ] && kill -9 $(cat "$R/pids") 2>/dev/null; true' EXIT
trap 'exit 130' INT TERM
sh "$HERE/../lib/stubs.sh" "$BUILD/controller-test/py" csi agent health ||
	{ echo "powercut-calls interop: 0 passed, 1 failed (grpcio stubs)"; exit 1; }
rm -rf "$R" && mkdir -p "$R"
/usr/bin/python3 "$HERE/calls.py" "$R"
