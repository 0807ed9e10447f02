#!/bin/sh
# Hostile-client suite: every case_*.sh in this folder sends what a hostile client would (grpcio
# requests, raw HTTP/2, the CLI, configuration files) to roles running on fake roots, and this
# harness proves that nothing outside what a call owns was touched.  It plants sentinel files
# (contents, an empty directory, a symlink, a mount point) in a tmpfs outside every root a case
# gives a role, runs each case, and compares every sentinel (existence, type, mode, size, mtime,
# content, the mounts beneath the sentinel directory) with the state before the case.
#
# As root the whole suite runs in a private mount namespace (unshare --mount --propagation
# private): the sentinels' tmpfs and anything a role mounts or unmounts stay inside it.
#
# Case contract: a case gets PILLAR_BIN, BUILD, HOSTILE_TMP (its own empty scratch directory,
# the only place it creates roots in), HOSTILE_SENTINEL_DIR (read-only for it: the targets its
# hostile inputs aim at, see the layout below) and HOSTILE_PY (grpcio stubs csi, agent, health);
# it prints one "ok - <what>" or "not ok - <what>" line per check and exits non-zero if any check
# failed.  Sentinel layout: passwd (a file with content), etc/passwd and etc/shadow, empty-dir/
# and mount/ (empty directories), dir/keep, link -> passwd, mnt/ (a tmpfs mount point holding
# mnt/inside).  Cases use /usr/bin/python3 (Debian's python3-grpcio).
# Env: PILLAR_BIN, BUILD; optional HOSTILE_CASES (names, e.g. "node ctl") to run some cases only,
# HOSTILE_CASE_DIR (the folder of the case scripts; this one by default).
# Prints each case's lines and "hostile: N passed, M failed" (checks), exits 1 on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
case $PILLAR_BIN in /*) ;; *) PILLAR_BIN=$PWD/$PILLAR_BIN ;; esac
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BUILD PILLAR_BIN

if [ "$(id -u)" = 0 ] && [ -z "${HOSTILE_IN_NS:-}" ]; then
	if HOSTILE_IN_NS=1 unshare --mount --propagation private true 2>/dev/null; then
		HOSTILE_IN_NS=1 exec unshare --mount --propagation private sh "$0" "$@"
	fi
	echo "# unshare --mount failed: running without a private mount namespace"
fi

# A short directory of its own: the roles' unix sockets live under each case's HOSTILE_TMP and a
# socket path has at most 107 bytes, whatever the length of the clone's path.
T=$(mktemp -d "${TMPDIR:-/tmp}/hostile.XXXXXX") || exit 1
S=$T/sentinel
mkdir -p "$T/cases" "$S"
echo "# scratch directory $T (removed when every check passed)"
if [ -n "${HOSTILE_IN_NS:-}" ] && mount -t tmpfs -o size=4m,mode=0755 hostile-sentinel "$S"; then
	echo "# private mount namespace; sentinels on a tmpfs at $S"
else
	echo "# sentinels in $S (no private mount namespace: not root or unshare unavailable)"
fi

plant() {
	printf 'root:x:0:0:root:/root:/bin/sh\nsentinel:x:1:1::/:/bin/false\n' > "$S/passwd"
	mkdir -p "$S/etc" "$S/empty-dir" "$S/mount" "$S/dir" "$S/mnt"
	cp "$S/passwd" "$S/etc/passwd"
	printf 'root:*:19000:0:99999:7:::\n' > "$S/etc/shadow"
	echo keep > "$S/dir/keep"
	ln -sf passwd "$S/link"
	if [ -n "${HOSTILE_IN_NS:-}" ] && ! mountpoint -q "$S/mnt"; then
		mount -t tmpfs -o size=1m hostile-sentinel-mnt "$S/mnt" && echo inside > "$S/mnt/inside"
	fi
	[ -e "$S/mnt/inside" ] || echo inside > "$S/mnt/inside"
	touch -h -d '2001-02-03 04:05:06' "$S/passwd" "$S/etc/passwd" "$S/etc/shadow" \
		"$S/dir/keep" "$S/mnt/inside" "$S/link"
}

# One line per path: type, mode, size, mtime, link target, sha256 of regular files; then the
# mounts at or beneath the sentinel directory.
snapshot() {
	(cd "$S" && find . -printf '%p %y %m %s %T@ %l\n' | sort)
	(cd "$S" && find . -type f -exec sha256sum {} + | sort -k2)
	awk -v s="$S" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo | sort
}

tools() {
	if ! sh "$ROOT/test/interop/lib/stubs.sh" "$T/py" csi agent health >"$T/stubs.log" 2>&1; then
		cat "$T/stubs.log"
		return 1
	fi
}

plant
snapshot > "$T/sentinel.before"
passed=0 failed=0
if ! tools; then
	echo "not ok - generating the grpcio stubs (test/interop/lib/stubs.sh)"
	failed=1
fi
for c in "${HOSTILE_CASE_DIR:-$HERE}"/case_*.sh; do
	[ -e "$c" ] || continue
	name=$(basename "$c" .sh)
	if [ -n "${HOSTILE_CASES:-}" ]; then
		case " $HOSTILE_CASES " in *" ${name#case_} "*) ;; *) continue ;; esac
	fi
	work=$T/cases/$name
	mkdir -p "$work"
	echo "# $name"
	start=$(date +%s)
	(cd "$work" && HOSTILE_TMP=$work HOSTILE_SENTINEL_DIR=$S HOSTILE_PY=$T/py \
		timeout -k 10 900 sh "$c") > "$T/$name.out" 2>&1
	rc=$?
	sed 's/^/  /' "$T/$name.out"
	ok=$(grep -c '^ok - ' "$T/$name.out")
	bad=$(grep -c '^not ok - ' "$T/$name.out")
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
		echo "not ok - $name exited $rc without a failed check"
		bad=1
	elif [ "$rc" -eq 0 ] && [ "$bad" -ne 0 ]; then
		echo "not ok - $name reported failed checks but exited 0"
		bad=$((bad + 1))
	fi
	snapshot > "$T/sentinel.after"
	if cmp -s "$T/sentinel.before" "$T/sentinel.after"; then
		echo "ok - $name: every sentinel outside the roots is unchanged"
		ok=$((ok + 1))
	else
		echo "not ok - $name: a sentinel outside the roots changed:"
		diff "$T/sentinel.before" "$T/sentinel.after" | sed 's/^/    /'
		bad=$((bad + 1))
		plant
		snapshot > "$T/sentinel.before"
	fi
	echo "# $name: $ok passed, $bad failed ($(($(date +%s) - start)) s)"
	passed=$((passed + ok))
	failed=$((failed + bad))
done
echo "hostile: $passed passed, $failed failed"
if [ "$failed" -eq 0 ]; then
	umount -R "$S" 2>/dev/null
	rm -rf "$T"
fi
[ "$failed" -eq 0 ]
