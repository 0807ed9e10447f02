#!/bin/sh
# 10,000 volumes over 10 agents (issue 30): create through CSI, controller restarts, one
# storage-node reboot, RSS; see bench.py.  Runs once per store of BENCH_STORES (default "dir
# kube": the embedded store, then --store=kube against the test API server on etcd).  Env:
# BUILD, PILLAR_BIN; BENCH_STORES, BENCH_AGENTS (default 10), BENCH_PER_AGENT (default 1000),
# BENCH_RESTARTS (default 3), BENCH_REBOOTS (default 3), BENCH_OLD_BIN (a copy of the old build:
# each reboot round then reboots once with it and once with PILLAR_BIN), BENCH_RESYNC (the
# controller's periodic resync, default 30s), BENCH_REBOOT_AT_RESYNC=1 (each reboot timed so that
# its restore meets another agent's whole-list resync: the worst case), BENCH_KUBE_QPS (default 1000).  restart.sh measures restarts alone,
# old and new binary in turn, with the volumes' objects seeded instead of created through CSI.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS=bench-scale10k
. "$HERE/../lib/python.sh"
for store in ${BENCH_STORES:-dir kube}; do
	case $store in
	dir) echo "scale run: 10,000 volumes over 10 agents (loopback; fake configfs roots, file backend; embedded store)" ;;
	kube) echo "scale run: 10,000 volumes over 10 agents (loopback; fake configfs roots, file backend; kube store on the test API server)" ;;
	*) echo "scale10k: unknown store $store in BENCH_STORES (dir, kube)"; exit 2 ;;
	esac
	rm -rf "$R" && mkdir -p "$R"
	export BENCH_STORE=$store
	python_bench bench.py
done
rm -rf "$R"
