#!/bin/sh
# Hostile command lines to `kubectl pillar` (the kubectl plugin: `pillar-csi kubectl-pillar`) and
# to the outage commands it runs: every flag (-o/--output, --store, --kubeconfig, --context,
# --kube-api-qps, --kube-api-burst, --duration) and the AGENT argument given values aimed at the
# sentinels (a store or kubeconfig inside them, a path out of a root), control bytes, overflows
# and names no object can have.  Each must end with a usage or server error (exit 1 or 2, never
# a signal), echo no raw control byte and no byte of a file it was pointed at; run.sh then proves
# that no sentinel changed.  Prints ok/not ok lines (run.sh's case contract).
set -u
: "${PILLAR_BIN:?}" "${HOSTILE_TMP:?}" "${HOSTILE_SENTINEL_DIR:?}"
D=$HOSTILE_TMP
S=$HOSTILE_SENTINEL_DIR
failed=0
ESC=$(printf '\033')
BEL=$(printf '\007')
LONG=$(printf 'a%.0s' $(seq 300))
# an empty store of its own (the default for the cases without --store)
mkdir -p "$D/store"
export PILLAR_CSI_STORE="dir:$D/store"
unset KUBECONFIG
KC=

# refused WHAT ARGS...: `pillar-csi kubectl-pillar ARGS` (with KUBECONFIG=$KC when KC is set)
# exits 1 or 2 with a message, without a raw control byte or the sentinels' secrets in its output
refused() {
	what=$1
	shift
	env ${KC:+KUBECONFIG=$KC} "$PILLAR_BIN" kubectl-pillar "$@" > "$D/out" 2> "$D/err" \
		< /dev/null
	rc=$?
	why=
	if [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then
		why="exit $rc"
	elif [ ! -s "$D/err" ]; then
		why="no message"
	elif LC_ALL=C grep -q "[$ESC$BEL]" "$D/out" "$D/err"; then
		why="a raw control byte in the output"
	elif grep -q 'root:\*:19000\|sentinel:x:1' "$D/out" "$D/err"; then
		why="a sentinel's content in the output"
	fi
	if [ -z "$why" ]; then
		echo "ok - $what: exit $rc, $(head -c 160 "$D/err" | tr '\n' ' ')"
	else
		echo "not ok - $what: $why: $(head -c 400 "$D/err" | LC_ALL=C tr -c '[:print:]\n' '?')"
		failed=$((failed + 1))
	fi
}

for cmd in outage-plan outage-status; do
	# the AGENT argument
	refused "$cmd AGENT with ESC" "$cmd" "storage${ESC}[2J-1"
	refused "$cmd AGENT with BEL and a C1 byte" "$cmd" "$(printf 'a\007\302\233b')"
	refused "$cmd AGENT ../../etc/passwd" "$cmd" "../../etc/passwd"
	refused "$cmd AGENT $S/passwd" "$cmd" "$S/passwd"
	refused "$cmd AGENT of 300 characters" "$cmd" "$LONG"
	refused "$cmd AGENT empty" "$cmd" ""
	refused "$cmd two AGENTs" "$cmd" storage-1 storage-2
	# -o / --output
	refused "$cmd -o with ESC" "$cmd" storage-1 -o "${ESC}[2J"
	refused "$cmd --output=../../etc/shadow" "$cmd" storage-1 "--output=../../etc/shadow"
	refused "$cmd -o without a value" "$cmd" storage-1 -o
	# --store
	refused "$cmd --store=dir:$S/passwd (a file)" "$cmd" storage-1 "--store=dir:$S/passwd"
	refused "$cmd --store=dir:$S/empty-dir" "$cmd" storage-1 "--store=dir:$S/empty-dir"
	refused "$cmd --store=dir:$S/link" "$cmd" storage-1 "--store=dir:$S/link"
	refused "$cmd --store=dir:$S/mnt (a mount point)" "$cmd" storage-1 "--store=dir:$S/mnt"
	refused "$cmd --store with ESC" "$cmd" storage-1 "--store=dir:${ESC}x"
	refused "$cmd --store=etcd:x" "$cmd" storage-1 "--store=etcd:x"
	# --kubeconfig and --context
	refused "$cmd --kubeconfig=$S/etc/shadow" "$cmd" storage-1 --store=kube \
		"--kubeconfig=$S/etc/shadow"
	refused "$cmd --kubeconfig=$S/empty-dir" "$cmd" storage-1 --store=kube \
		"--kubeconfig=$S/empty-dir"
	refused "$cmd --kubeconfig=$S/link" "$cmd" storage-1 --store=kube "--kubeconfig=$S/link"
	KC=$S/etc/shadow
	refused "$cmd KUBECONFIG=$S/etc/shadow" "$cmd" storage-1 --store=kube
	KC=$S/passwd:$S/etc/shadow
	refused "$cmd KUBECONFIG=$S/passwd:$S/etc/shadow" "$cmd" storage-1 --store=kube
	KC=
	refused "$cmd --context with ESC" "$cmd" storage-1 --store=kube \
		"--kubeconfig=$S/etc/passwd" "--context=${ESC}[2J"
	# the client's rate flags
	refused "$cmd --kube-api-qps=abc" "$cmd" storage-1 --kube-api-qps=abc
	refused "$cmd --kube-api-qps=99999999999999999999" "$cmd" storage-1 \
		--kube-api-qps=99999999999999999999
	refused "$cmd --kube-api-burst=${ESC}" "$cmd" storage-1 "--kube-api-burst=${ESC}"
	# an unknown flag, a bool flag's value
	refused "$cmd unknown flag with ESC" "$cmd" storage-1 "--${ESC}[2J"
	refused "$cmd --help=maybe" "$cmd" storage-1 --help=maybe
done
# --duration (outage-plan only)
refused "outage-plan --duration=-1s" outage-plan storage-1 --duration=-1s
refused "outage-plan --duration=99999999999999999999h" outage-plan storage-1 \
	--duration=99999999999999999999h
refused "outage-plan --duration with ESC" outage-plan storage-1 "--duration=${ESC}[2J"
refused "outage-plan --duration=" outage-plan storage-1 --duration=
refused "outage-status --duration (a flag of outage-plan only)" outage-status storage-1 \
	--duration=10m
# the plugin's own command
refused "kubectl pillar with an unknown command with ESC" "out${ESC}[2Jage"
refused "kubectl pillar ../../etc/passwd" "../../etc/passwd"
[ "$failed" -eq 0 ]
