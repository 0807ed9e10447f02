#!/bin/sh
# Snapshot suite (issue 27; snapshot_suite.py): csi-sanity's snapshot specs with csi-snapshotter's
# and csi-provisioner's requests against `pillar-csi controller` (embedded store) and
# `pillar-csi agent` (fake configfs root, `file` backend).
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per case and "snapshot interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
T=$BUILD/snapshot-test
R=$T/run
export BUILD PILLAR_BIN
. "$HERE/../lib/suite.sh"
suite_init "$R/pids"
suite_stubs snapshot "$BUILD/controller-test/py" csi agent health
rm -rf "$R" && mkdir -p "$R"
suite_run snapshot "$T/out" "$HERE/snapshot_suite.py" "$R"
