#!/bin/sh
# mTLS end to end (issue 15, deploy.md §9): a running agent and controller with mutual TLS,
# certificates rotated on disk and picked up without a restart, and AgentConnected's
# Authenticated / TLSHandshakeFailed with the handshake's reason (unknown CA, expired, no IP SAN
# for the dialled address).  See mtls_suite.py.  Env: PILLAR_BIN, BUILD.
# Prints PASS/FAIL per case and "mtls interop: N passed, M failed"; exits 1 on failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
R=$BUILD/mtls-test
export BUILD PILLAR_BIN
. "$HERE/../lib/suite.sh"
suite_init "$R/run/pids"
rm -rf "$R" && mkdir -p "$R/run"
suite_run mtls "$R/out" "$HERE/mtls_suite.py" "$R/run"
