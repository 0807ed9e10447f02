#!/bin/sh
# Secret scan (issue 28, docs/authentication.md "Keys"): a full DH-HMAC-CHAP cycle with every
# role at --v=5 on the test API server, then every key string searched for in every log,
# object, Event, metric and record (scan_suite.py).  Needs root (the block volume's stage is a
# bind mount of a device node; the fake /dev/nvme-fabrics is a pseudo-terminal's device node).
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per check and "secretscan interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
export BUILD PILLAR_BIN
R=$BUILD/secretscan-test
. "$HERE/../lib/suite.sh"
# a stage left mounted by an interrupted run
suite_cleanup_more() {
	grep " $R/run/" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do
		umount -l "$m"
	done
}
suite_init "$R/run/pids"

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP secretscan needs root (a bind mount of the staged device node); CI runs as root"
	echo "secretscan interop: 0 passed, 0 failed (skipped: not root)"
	exit 0
fi
[ -d "$R/run" ] && suite_cleanup
rm -rf "$R" && mkdir -p "$R/run"
suite_stubs secretscan "$BUILD/controller-test/py" csi agent health
suite_run secretscan "$R/out" "$HERE/scan_suite.py" "$R/run"
