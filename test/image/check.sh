#!/bin/bash
# The image test, without a container runtime (podman run cannot set RLIMIT_NOFILE on these
# machines): unpack the OCI archive made by `make image` into ROOT and run from it with chroot.
#   1. the scan of the programs the roles execute (test/image/programs.py) on fixtures: a new
#      exec'd program is listed, an exec whose program it cannot trace fails;
#   2. the archive: blob digests, layers, labels (version, revision, source);
#   3. /usr/bin/pillar-csi (stripped), its role symlinks and kubectl-pillar; `pillar-csi version` run in ROOT;
#   4. every program the scan finds in src/ and roles/ is in ROOT and runs there; mkfs.xfs,
#      mkfs.ext4, resize2fs and blkid also do their work on a file;
#   5. sizes: the archive, the unpacked root, the per-package share.
# Usage: test/image/check.sh ARCHIVE ROOT VERSION REVISION   (root, for chroot)
set -uo pipefail
ARCHIVE=$1 ROOT=$2 VERSION=$3 REVISION=$4
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { # check WHAT CMD... : CMD's status decides
	local what=$1; shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
# in_root CMD... : run CMD chrooted in ROOT with the image's PATH and nothing else inherited, in a
# mount namespace of its own with /proc and /sys mounted (lvm reads both), gone when CMD ends
in_root() {
	# shellcheck disable=SC2016
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LVM_SUPPRESS_FD_WARNINGS=1 $UNSHARE /bin/sh -c \
		'mount -t proc proc "$0/proc" && mount -t sysfs sysfs "$0/sys" && exec chroot "$0" "$@"' "$ROOT" "$@"
}
if [ "$(id -u)" = 0 ]; then UNSHARE="unshare --mount --propagation private"
else UNSHARE="unshare --map-root-user --mount --propagation private"; fi

# ---- 1. the scan on fixtures -------------------------------------------------------------------
fx=$(mktemp -d)
trap 'rm -rf "$fx"' EXIT
mkdir -p "$fx/src/base" "$fx/src/x" "$fx/roles/y"
cat >"$fx/src/x/x.c" <<'EOF'
static int run(void *b, const char *const argv[], int *res) { return exec_run(argv, 0, res, 0); }
int f(void) { const char *argv[] = {"newtool", "-x", NULL}; return run(0, argv, 0); }
int g(int n) { const char **v = calloc(4, 8); size_t a = 0;
	if (n) { v[a++] = "tool-a"; v[a++] = "arg"; } else { v[a++] = "tool-b"; }
	v[a] = NULL; return exec_run(v, 0, 0, 0); }
EOF
# another file's own static run() is not the wrapper above (model/kpath.c has one)
echo 'static int run(void *f, const void *v, int n) { return n; } int k(void *p) { return run(0, p, 1); }' >"$fx/src/x/z.c"
out=$(python3 "$HERE/programs.py" "$fx" 2>&1)
check "scan: a vector literal through a wrapper, and the first store of each block, are programs; a static function is a wrapper only in its own file" \
	[ "$(echo "$out" | cut -d' ' -f1 | tr '\n' ' ')" = "newtool tool-a tool-b " ]
echo 'int h(const char *p) { const char *argv[] = {p, NULL}; return exec_run(argv, 0, 0, 0); }' >"$fx/roles/y/y.c"
out=$(python3 "$HERE/programs.py" "$fx" 2>&1)
check "scan: an exec whose program it cannot trace fails ($(echo "$out" | grep -m1 'cannot tell'))" \
	sh -c '! python3 "$1/programs.py" "$2" >/dev/null 2>&1' sh "$HERE" "$fx"

# ---- 2. the programs of this tree ----------------------------------------------------------------
if ! PROGRAMS=$(python3 "$HERE/programs.py" "$REPO"); then
	bad "scan of src/ and roles/ (see above)"
	PROGRAMS=""
else
	ok "scan: $(echo "$PROGRAMS" | wc -l) programs executed by the roles: $(echo "$PROGRAMS" | cut -d' ' -f1 | tr '\n' ' ')"
fi

# ---- 3. the archive ------------------------------------------------------------------------------
rm -rf "$ROOT" "$ROOT.config.json"
if labels=$(python3 "$HERE/oci.py" unpack "$ARCHIVE" "$ROOT"); then
	ok "archive: blob digests, layer diff_ids, unpacked into $ROOT"
else
	bad "archive: cannot unpack $ARCHIVE"
	echo "image-check: $pass passed, $((failed)) failed"
	exit 1
fi
label() { echo "$labels" | python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }
check "label org.opencontainers.image.version = $VERSION" [ "$(label org.opencontainers.image.version)" = "$VERSION" ]
check "label org.opencontainers.image.revision = $REVISION" [ "$(label org.opencontainers.image.revision)" = "$REVISION" ]
check "label org.opencontainers.image.source = $(label org.opencontainers.image.source)" \
	[ -n "$(label org.opencontainers.image.source)" ]

# ---- 4. the binary -------------------------------------------------------------------------------
check "/usr/bin/pillar-csi is an executable file" [ -f "$ROOT/usr/bin/pillar-csi" -a -x "$ROOT/usr/bin/pillar-csi" ]
# shipped stripped (no symbol table, no debug sections); build/pillar-csi keeps them for debugging
if secs=$(readelf -S -W "$ROOT/usr/bin/pillar-csi" 2>&1); then
	syms=$(echo "$secs" | grep -Eo '\.(symtab|strtab|debug_[a-z]+)' | sort -u | tr '\n' ' ')
else syms="(readelf failed: $secs)"; fi
check "/usr/bin/pillar-csi is stripped ($(stat -c %s "$ROOT/usr/bin/pillar-csi") bytes; symbol/debug sections: '${syms}')" \
	[ -z "$syms" ]
want="pillar-csi $VERSION (${REVISION:0:12})"
got=$(in_root /usr/bin/pillar-csi version 2>&1 | head -1)
check "pillar-csi version in the image: '$got'" [ "$got" = "$want" ]
for r in controller node agent; do
	check "/usr/bin/pillar-$r -> pillar-csi" [ "$(readlink "$ROOT/usr/bin/pillar-$r")" = pillar-csi ]
	got=$(in_root "/usr/bin/pillar-$r" --version 2>&1 | head -1)
	check "pillar-$r --version in the image selects the role: '$got'" [ "$got" = "$want" ]
done
check "/usr/bin/kubectl-pillar -> pillar-csi" [ "$(readlink "$ROOT/usr/bin/kubectl-pillar")" = pillar-csi ]
got=$(in_root /usr/bin/kubectl-pillar --version 2>&1 | head -1)
check "kubectl-pillar --version in the image: '$got'" [ "$got" = "$want" ]

# ---- 5. every program the roles execute ----------------------------------------------------------
# how to ask each for its version (ARGS|EXIT STATUSES|ERE of the output); others: --version|0|.
probe() {
	case $1 in
	blkid) echo '-V|0|util-linux' ;;
	mkfs.ext4) echo '-V|0|^mke2fs 1\.' ;;
	resize2fs) echo '|1|^resize2fs 1\.' ;; # no version flag: the banner comes with the usage text
	mkfs.xfs | xfs_growfs) echo "-V|0|^$1 version" ;;
	lvm) echo 'version|0|LVM version:' ;;
	lv* | vg*) echo '--version|0|LVM version:' ;;
	# the userland version; exit 1 when this host has no zfs module to ask for the kernel's
	zfs | zpool) echo '--version|0 1|^zfs-[0-9]' ;;
	modprobe) echo '--version|0|^kmod version' ;;
	*) echo '--version|0|.' ;;
	esac
}
while read -r prog where; do
	[ -n "$prog" ] || continue
	path=""
	for d in /usr/sbin /usr/bin /sbin /bin; do
		if [ -x "$ROOT$d/$prog" ] && [ ! -d "$ROOT$d/$prog" ]; then path=$d/$prog; break; fi
	done
	if [ -z "$path" ]; then
		bad "$prog (executed at $where) is not in the image's PATH"
		continue
	fi
	IFS='|' read -r args code ere <<<"$(probe "$prog")"
	# shellcheck disable=SC2086
	out=$(in_root "$path" $args 2>&1)
	rc=$?
	if [[ " $code " = *" $rc "* ]] && echo "$out" | grep -Eq -- "$ere" && ! echo "$out" | grep -q 'error while loading shared libraries'; then
		ok "$prog: $path $args -> $(echo "$out" | grep -Em1 -- "$ere" | tr -s ' \t' ' ')"
	else
		bad "$prog: $path $args exited $rc (want $code, output matching /$ere/): $(echo "$out" | head -3 | tr '\n' ' ')"
	fi
done <<<"$PROGRAMS"

# the file system tools on a file in the image's /tmp, beyond their version banners
img=/tmp/image-check.img
rm -f "$ROOT$img" && truncate -s 320M "$ROOT$img"
got=$(in_root sh -c "mkfs.xfs -q -f $img && blkid -p -o export $img" 2>&1 | grep '^TYPE=')
check "mkfs.xfs -f, then blkid -p finds '$got' in the image" [ "$got" = TYPE=xfs ]
got=$(in_root sh -c "mkfs.ext4 -q -F -b 4096 $img 256M && truncate -s 384M $img && e2fsck -fy $img >/dev/null &&
	resize2fs $img 2>&1 && blkid -p -o export $img" 2>&1)
check "mkfs.ext4, resize2fs after the file grew to 384 MiB, blkid -p TYPE=ext4, in the image" \
	sh -c 'echo "$1" | grep -q "is now 98304 (4k) blocks long" && echo "$1" | grep -qx TYPE=ext4' sh "$got"
rm -f "$ROOT$img"

# ---- 6. sizes ------------------------------------------------------------------------------------
echo "---- sizes"
echo "archive (gzip layers):  $(stat -c %s "$ARCHIVE") bytes  $ARCHIVE"
echo "unpacked root:          $(du -sb "$ROOT" | cut -f1) bytes (du -sb)"
python3 "$HERE/oci.py" sizes "$ROOT" 20

echo "image-check: $pass passed, $failed failed"
[ "$failed" = 0 ]
