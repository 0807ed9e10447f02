#!/bin/sh
# Runnable documentation: every command block in docs/ whose info string is "sh runnable" runs,
# in the order of the pages in docs/README.md, in one shell session (variables carry over from
# block to block), against the binary under test on an embedded store in a scratch directory.
# The session lives in its own network namespace, so the documented addresses (127.0.0.1:9500,
# ...) never collide with other processes on this machine.
#
#   ```sh runnable            the block must exit 0
#   ```sh runnable exit=1     the block must exit 1 (run in a subshell: its variables are lost)
#   ```sh runnable teardown   runs after every other block (stops what the pages started)
#   ```sh kubectl             runs with the real kubectl (and kubectl-pillar on PATH) against the
#                             test API server (test/kube) holding the objects of the try-it.md
#                             setup (kubectl-fixture.sh), after the other blocks, in one session
#                             of their own; <storage-node>, <name>, <pv-name>, <worker>, <uid>,
#                             <resourceVersion>, <ip>, <port> and <true|false> are replaced by
#                             values of that setup first; exit=N as for runnable blocks
#   ```output                 right after a runnable block (blank lines between are allowed):
#                             its combined stdout and stderr, line by line; "…" in an expected
#                             line stands for any text; trailing blanks are ignored
#
# Also checked: every page in docs/ is listed in docs/README.md, and every relative link in
# README.md and docs/ names a file inside the repository.
# Env: PILLAR_BIN, BUILD.  Prints PASS/FAIL per block and "docs interop: N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
: "${BUILD:?BUILD must be set}" "${PILLAR_BIN:?PILLAR_BIN must be set}"
DOCS=${DOCS_DIR:-$ROOT/docs}

if [ "${1:-}" != --inside ]; then
	# a private network namespace (root, or an unprivileged user namespace otherwise)
	ns="--net"
	[ "$(id -u)" = 0 ] || ns="--map-root-user --net"
	if ! unshare $ns true 2>/dev/null; then
		echo "FAIL cannot create a network namespace (unshare $ns): the docs suite needs one"
		echo "docs interop: 0 passed, 1 failed"
		exit 1
	fi
	exec unshare $ns sh "$0" --inside
fi
ip link set lo up || { echo "FAIL bringing up loopback in the test namespace"; exit 1; }

W=$BUILD/docs-test
rm -rf "$W" && mkdir -p "$W/blocks" "$W/out" "$W/rc" "$W/home" "$W/tmp"
passed=0 failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
finish() {
	echo "docs interop: $passed passed, $failed failed"
	[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
	exit $?
}

# ---- the pages, in the index's order ------------------------------------------------------
pages=$(sed -n 's/.*](\([a-z0-9-]*\.md\)).*/\1/p' "$DOCS/README.md" | awk '!seen[$0]++')
for f in "$DOCS"/*.md; do
	b=${f##*/}
	[ "$b" = README.md ] && continue
	if printf '%s\n' $pages | grep -qx "$b"; then :; else fail "docs/$b is not listed in docs/README.md"; fi
done

# ---- links stay inside the repository ---------------------------------------------------------
for f in "$ROOT/README.md" "$DOCS"/*.md; do
	dir=$(dirname "$f")
	for l in $(grep -o '](\([^)#]*\)[^)]*)' "$f" | sed 's/^](\([^)#]*\).*/\1/' | grep -v '^[a-z]*:' | sort -u); do
		t=$(realpath -m "$dir/$l")
		case $t in
		"$ROOT"/*) [ -e "$t" ] || fail "${f#"$ROOT"/}: link $l: no such file" ;;
		*) fail "${f#"$ROOT"/}: link $l leaves the repository" ;;
		esac
	done
done

# ---- extract the blocks -------------------------------------------------------------------------
# blocks/N.sh (body), blocks/N.meta ("page:line exit teardown"), blocks/N.want (expected output)
n=0
for p in README.md $pages; do
	[ -f "$DOCS/$p" ] || { fail "docs/README.md lists $p, which does not exist"; continue; }
	n=$(awk -v page="docs/$p" -v dir="$W/blocks" -v n="$n" '
	function open_fence(line,   info, k, w, m) {
		info = line; sub(/^ *```/, "", info)
		indent = match(line, /[^ ]/) - 1
		m = split(info, w, " ")
		kind = "plain"
		if (w[1] == "sh" && m >= 2 && (w[2] == "runnable" || w[2] == "kubectl")) {
			kind = "run"; n++; ex = 0; td = 0; kube = w[2] == "kubectl"
			for (k = 3; k <= m; k++) {
				if (w[k] ~ /^exit=[0-9]+$/) ex = substr(w[k], 6) + 0
				else if (w[k] == "teardown") td = 1
				else { printf "bad runnable option \"%s\" at %s:%d\n", w[k], page, NR > "/dev/stderr"; bad = 1 }
			}
			printf "%s:%d %d %d %d\n", page, NR, ex, td, kube > (dir "/" n ".meta")
			printf "" > (dir "/" n ".sh")
		} else if (w[1] == "output") {
			if (pending == 0) { printf "output block without a runnable block before it at %s:%d\n", page, NR > "/dev/stderr"; bad = 1 }
			kind = "want"; target = pending
			printf "" > (dir "/" target ".want")
		}
		pending = 0
	}
	/^ *```/ {
		if (!infence) { infence = 1; open_fence($0); next }
		infence = 0
		if (kind == "run") pending = n
		next
	}
	infence {
		line = $0
		if (indent > 0 && substr(line, 1, indent) ~ /^ *$/) line = substr(line, indent + 1)
		if (kind == "run") print line >> (dir "/" n ".sh")
		else if (kind == "want") print line >> (dir "/" target ".want")
		next
	}
	/[^ \t]/ { pending = 0 }
	END { print n; exit bad }
	' "$DOCS/$p") || fail "docs/$p: malformed runnable or output block (above)"
	n=${n:-0}
done
[ "$n" -gt 0 ] || { fail "no runnable blocks in docs/"; finish; }

# ---- one script: every block in order, teardown blocks last ---------------------------------
S=$W/session.sh
{
	echo 'set -e'
	echo "cd '$W/home'"
	for pass_ in 0 1; do
		i=1
		while [ "$i" -le "$n" ]; do
			set -- $(cat "$W/blocks/$i.meta")
			if [ "$3" = "$pass_" ] && [ "$4" = 0 ]; then
				echo "echo $i > '$W/current'"
				if [ "$2" = 0 ]; then
					echo "{ . '$W/blocks/$i.sh'; } > '$W/out/$i' 2>&1"
					echo "echo 0 > '$W/rc/$i'"
				else
					echo "set +e; ( set -e; . '$W/blocks/$i.sh' ) > '$W/out/$i' 2>&1; echo \$? > '$W/rc/$i'; set -e"
				fi
			fi
			i=$((i + 1))
		done
	done
} > "$S"

BIN_DIR=$W/bin
mkdir -p "$BIN_DIR" && ln -sf "$PILLAR_BIN" "$BIN_DIR/pillar-csi" &&
	ln -sf "$PILLAR_BIN" "$BIN_DIR/kubectl-pillar"
start=$(date +%s)
env -u PILLAR_CSI_STORE PATH="$BIN_DIR:$PATH" TMPDIR="$W/tmp" HOME="$W/home" \
	setsid timeout -k 5 ${DOCS_TIMEOUT:-120} sh "$S" < /dev/null > "$W/session.out" 2>&1 &
sid=$!
wait "$sid"
src=$?
# whatever the pages left running (daemons started with &) goes with the session
kill -TERM -- "-$sid" 2>/dev/null && sleep 1
kill -KILL -- "-$sid" 2>/dev/null

# ---- the kubectl blocks, against the test API server --------------------------------------------
K=$W/kube
KS=$W/kube-session.sh
i=1
{
	echo 'set -e'
	echo "cd '$W/home'"
	echo ". '$HERE/kubectl-fixture.sh'"
	while [ "$i" -le "$n" ]; do
		set -- $(cat "$W/blocks/$i.meta")
		if [ "$4" = 1 ]; then
			echo "echo $i > '$W/kube-current'"
			echo "docs_placeholders '$W/blocks/$i.sh' > '$W/blocks/$i.kube.sh'"
			echo "set +e; ( set -e; . '$W/blocks/$i.kube.sh' ) > '$W/out/$i' 2>&1; echo \$? > '$W/rc/$i'; set -e"
		fi
		i=$((i + 1))
	done
} > "$KS"
if grep -q docs_placeholders "$KS"; then
	mkdir -p "$K"
	/usr/bin/python3 "$ROOT/test/kube/cluster.py" "$K/cluster" > "$K/cluster.out" 2>&1 &
	kpid=$!
	t=0
	# cluster.py exits when etcd or the API server misses a start bound (3 x START_S = 360 s at
	# most): the 6000 steps of at least 0.1 s only back that up
	while [ ! -s "$K/cluster/cluster.env" ] && [ "$t" -lt 6000 ] && kill -0 "$kpid" 2>/dev/null; do
		sleep 0.1; t=$((t + 1))
	done
	if [ -s "$K/cluster/cluster.env" ]; then
		env -u PILLAR_CSI_STORE PATH="$BIN_DIR:$PATH" TMPDIR="$W/tmp" HOME="$W/home" \
			sh -c ". '$K/cluster/cluster.env' && exec timeout -k 5 ${DOCS_TIMEOUT:-120} sh '$KS'" \
			< /dev/null > "$W/kube-session.out" 2>&1
	else
		fail "the test API server did not start for the kubectl blocks:"
		sed 's/^/    | /' "$K/cluster.out"
	fi
	kill -TERM "$kpid" 2>/dev/null
	wait "$kpid" 2>/dev/null
fi

# ---- verdicts ---------------------------------------------------------------------------------
# match WANT GOT: line-by-line comparison, "…" matching any text within a line
match() {
	awk -v want="$1" '
	function rtrim(s) { sub(/[ \t]+$/, "", s); return s }
	function like(pat, s,   parts, k, m, pos) {
		m = split(pat, parts, "…")
		if (m == 1) return pat == s
		if (substr(s, 1, length(parts[1])) != parts[1]) return 0
		s = substr(s, length(parts[1]) + 1)
		for (k = 2; k < m; k++) {
			pos = index(s, parts[k])
			if (parts[k] != "" && pos == 0) return 0
			if (parts[k] != "") s = substr(s, pos + length(parts[k]))
		}
		return length(s) >= length(parts[m]) && substr(s, length(s) - length(parts[m]) + 1) == parts[m]
	}
	BEGIN { while ((getline l < want) > 0) w[++nw] = rtrim(l) }
	{ g[++ng] = rtrim($0) }
	END {
		if (ng != nw) exit 1
		for (k = 1; k <= nw; k++) if (!like(w[k], g[k])) exit 1
	}' "$2"
}
cur=$(cat "$W/current" 2>/dev/null || echo 0)
i=1
while [ "$i" -le "$n" ]; do
	set -- $(cat "$W/blocks/$i.meta")
	where=$1 want_rc=$2
	if [ ! -f "$W/rc/$i" ]; then
		if [ "$i" = "$cur" ]; then
			fail "$where: the block stopped the session with exit status $src (want $want_rc; 124 = timeout); its output:"
			sed 's/^/    | /' "$W/out/$i" 2>/dev/null
		else
			fail "$where: not run (an earlier block failed)"
		fi
	elif [ "$(cat "$W/rc/$i")" != "$want_rc" ]; then
		fail "$where: exit status $(cat "$W/rc/$i"), want $want_rc; output:"
		sed 's/^/    | /' "$W/out/$i"
	elif [ -f "$W/blocks/$i.want" ] && ! match "$W/blocks/$i.want" "$W/out/$i"; then
		fail "$where: output differs (- documented, + actual; … matches any text):"
		diff -u "$W/blocks/$i.want" "$W/out/$i" | tail -n +3 | sed 's/^/    /'
	else
		pass "$where"
	fi
	i=$((i + 1))
done
[ -s "$W/session.out" ] && { echo "session output outside the blocks:"; sed 's/^/    | /' "$W/session.out"; }
[ -s "$W/kube-session.out" ] && { echo "kubectl session output outside the blocks:"; sed 's/^/    | /' "$W/kube-session.out"; }
echo "(docs: $n blocks in $(($(date +%s) - start)) s)"
finish
