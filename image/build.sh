#!/bin/bash
# Build the pillar-csi OCI image archive (deploy.md §1.5) without any image registry:
#   1. a Debian root filesystem made by mmdebstrap from this machine's Debian sources (main +
#      contrib, for zfsutils-linux), holding exactly the packages whose programs the roles run;
#      cached as a tar outside the clone, keyed by the exact package versions apt resolves;
#   2. buildah: that tar as the base layer, BIN (make passes build/pillar-csi.stripped: the image
#      ships the stripped binary, build/pillar-csi keeps the symbols for debugging) as
#      /usr/bin/pillar-csi with its three role symlinks and kubectl-pillar (the kubectl plugin)
#      as the second layer, OCI labels, committed to an oci-archive.
# Usage: image/build.sh BIN OUT.oci.tar VERSION REVISION SOURCE
# Env: PILLAR_IMAGE_CACHE (default /var/cache/pillar-csi/image; non-root ~/.cache/pillar-csi/image).
# Prints the archive path on success.
set -euo pipefail
BIN=$1 OUT=$2 VERSION=$3 REVISION=$4 SOURCE=$5
HERE=$(cd "$(dirname "$0")" && pwd)
say() { echo "image: $*" >&2; }

# The packages of deploy.md §1.5; test/image/check.sh proves each program the roles execute is
# in the result.  usr-is-merged (with mmdebstrap's merged-usr hook) satisfies init-system-helpers
# without usrmerge, which would bring perl (46 MB).
PACKAGES="e2fsprogs xfsprogs util-linux lvm2 kmod zfsutils-linux usr-is-merged"
# dpkg path excludes: documentation, manual pages, translations (copyright files are kept), and
# ICU, which only xfs_scrub links (not run by any role; 37 MB).  A customize hook also drops
# python's bytecode caches (zfsutils-linux depends on python3 for tools no role runs; 12 MB).
EXCLUDES="/usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/share/lintian/*
  /usr/lib/x86_64-linux-gnu/libicu*"
INCLUDES="/usr/share/doc/*/copyright"

if [ -n "${PILLAR_IMAGE_CACHE:-}" ]; then CACHE=$PILLAR_IMAGE_CACHE
elif [ "$(id -u)" = 0 ]; then CACHE=/var/cache/pillar-csi/image
else CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/pillar-csi/image; fi
mkdir -p "$CACHE"
[ -x "$BIN" ] || { say "no $BIN (run make first)"; exit 1; }
for t in mmdebstrap buildah; do
	command -v "$t" >/dev/null || { say "$t is missing (make deps installs it)"; exit 1; }
done

# ---- the Debian sources: this machine's own Debian suites, with contrib ------------------------
SUITE=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)
[ -n "$SUITE" ] || { say "no VERSION_CODENAME in /etc/os-release"; exit 1; }
APTDIR=$CACHE/apt
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/parts"
# one line per (URI, suite) of the suites SUITE, SUITE-updates, SUITE-security
{
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk 'BEGIN{RS=""} /(^|\n)Types:[^\n]*deb( |\n|$)/ {
			u=""; s=""; n=split($0, l, "\n")
			for (i = 1; i <= n; i++) {
				if (l[i] ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", l[i]); u=l[i] }
				if (l[i] ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", l[i]); s=l[i] }
			}
			split(u, us, /[ \t]+/); ns=split(s, ss, /[ \t]+/)
			for (j = 1; j <= ns; j++) print us[1], ss[j]
		}' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++; print $i, $(i+1) }' "$f"
	done
} | awk -v s="$SUITE" '$2 == s || $2 == s"-updates" || $2 == s"-security" { print "deb " $1 " " $2 " main contrib" }' |
	sort -u > "$APTDIR/sources.list.new"
[ -s "$APTDIR/sources.list.new" ] || { say "no Debian $SUITE sources in /etc/apt"; exit 1; }
mv "$APTDIR/sources.list.new" "$APTDIR/sources.list"
APT=(-o "Dir::Etc::SourceList=$APTDIR/sources.list" -o "Dir::Etc::SourceParts=$APTDIR/parts"
	-o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache" -o "APT::Sandbox::User=root"
	-o "Dir::State::status=/dev/null" -o "APT::Install-Recommends=false")

# ---- the cache key: every package version of the root filesystem, as apt resolves it now -------
exec 9>"$CACHE/lock"
flock 9   # concurrent builds: one updates the lists and makes the root filesystem at a time
if ! apt-get "${APT[@]}" -q update >"$CACHE/apt-update.log" 2>&1; then
	ls "$APTDIR"/lists/*_Packages* >/dev/null 2>&1 || { cat "$CACHE/apt-update.log" >&2; exit 1; }
	say "apt-get update failed; using the package lists of the last run"
fi
# shellcheck disable=SC2086
RESOLVED=$(apt-get "${APT[@]}" -s install '?essential' $PACKAGES 2>&1 | awk '$1 == "Inst" {print $2, $3}' | tr -d '(' | sort)
[ -n "$RESOLVED" ] || { say "apt resolves no packages"; apt-get "${APT[@]}" -s install '?essential' $PACKAGES >&2 || true; exit 1; }
KEY=$( { echo "$PACKAGES|$EXCLUDES|$INCLUDES|$SUITE|merged-usr|customize2"; echo "$RESOLVED"; } | sha256sum | cut -c1-16)
ROOTFS=$CACHE/rootfs-$KEY.tar

# ---- 1. the root filesystem (cached) -----------------------------------------------------------
if [ ! -s "$ROOTFS" ]; then
	say "mmdebstrap: Debian $SUITE root filesystem ($(echo "$RESOLVED" | wc -l) packages), key $KEY"
	t0=$(date +%s)
	# merged-usr hook: the /usr symlinks and usr-is-merged, instead of usrmerge and its perl
	opts=(--variant=essential --mode=root --format=tar "--include=${PACKAGES// /,}"
		--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
		--customize-hook='rm -f "$1"/var/cache/debconf/*-old "$1"/var/log/dpkg.log "$1"/var/log/apt/*.log'
		--customize-hook='find "$1"/usr/lib/python3* -name __pycache__ -prune -exec rm -rf {} +' 
		--aptopt='APT::Install-Recommends "false"')
	set -f   # the patterns are dpkg's, not the shell's
	for x in $EXCLUDES; do opts+=("--dpkgopt=path-exclude=$x"); done
	for x in $INCLUDES; do opts+=("--dpkgopt=path-include=$x"); done
	set +f
	# mmdebstrap --format=tar ends with this; an interrupted run leaves only the .tmp
	if ! SOURCE_DATE_EPOCH=$(git -C "$HERE" log -1 --format=%ct 2>/dev/null || date +%s) \
		mmdebstrap "${opts[@]}" "$SUITE" "$ROOTFS.tmp" - <"$APTDIR/sources.list" >"$CACHE/mmdebstrap.log" 2>&1; then
		tail -30 "$CACHE/mmdebstrap.log" >&2; rm -f "$ROOTFS.tmp"; say "mmdebstrap failed"; exit 1
	fi
	mv "$ROOTFS.tmp" "$ROOTFS"
	echo "$RESOLVED" > "$ROOTFS.packages"
	echo "$(( $(date +%s) - t0 ))" > "$ROOTFS.seconds"
	# keep the newest three root filesystems
	ls -t "$CACHE"/rootfs-*.tar | tail -n +4 | while read -r old; do rm -f "$old" "$old".*; done
else
	say "root filesystem from the cache: $ROOTFS"
fi
exec 9>&-

# ---- 2. the image ------------------------------------------------------------------------------
WORK=$(mktemp -d)
ctr=""
cleanup() {
	[ -z "$ctr" ] || buildah "${BA[@]}" rm "$ctr" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
# vfs: no overlay mounts needed (works inside containers); storage of its own, outside the clone
BA=(--storage-driver=vfs --root="$CACHE/buildah/root" --runroot="$CACHE/buildah/run")
mkdir -p "$WORK/bin/usr/bin"
install -m 0755 "$BIN" "$WORK/bin/usr/bin/pillar-csi"
for r in controller node agent; do ln -s pillar-csi "$WORK/bin/usr/bin/pillar-$r"; done
ln -s pillar-csi "$WORK/bin/usr/bin/kubectl-pillar" # the kubectl plugin (docs/cli.md)
tar -C "$WORK/bin" --owner=0 --group=0 --numeric-owner -cf "$WORK/bin.tar" usr

created=$(date -u -d "@$(git -C "$HERE" log -1 --format=%ct 2>/dev/null || date +%s)" +%Y-%m-%dT%H:%M:%SZ)
# two layers: the Debian root filesystem (shared by every build of the same packages, kept in
# buildah's storage as pillar-csi-base:KEY), then the binary
base=pillar-csi-base:$KEY
if ! buildah "${BA[@]}" inspect --type image "$base" >/dev/null 2>&1; then
	ctr=$(buildah "${BA[@]}" from scratch)
	buildah "${BA[@]}" add "$ctr" "$ROOTFS" / >/dev/null
	buildah "${BA[@]}" commit -q --format oci "$ctr" "$base" >/dev/null
	buildah "${BA[@]}" rm "$ctr" >/dev/null
	ctr=""
fi
# base images of other package versions are not needed any more
for old in $(buildah "${BA[@]}" images --format '{{.Name}}:{{.Tag}}' | grep '/pillar-csi-base:' | grep -v ":$KEY\$" || true); do
	buildah "${BA[@]}" rmi "$old" >/dev/null 2>&1 || true
done
ctr=$(buildah "${BA[@]}" from "$base")
buildah "${BA[@]}" add "$ctr" "$WORK/bin.tar" / >/dev/null
buildah "${BA[@]}" config --entrypoint '["/usr/bin/pillar-csi"]' --cmd '["version"]' \
	--env PATH=/usr/sbin:/usr/bin:/sbin:/bin --workingdir / \
	--label "org.opencontainers.image.title=pillar-csi" \
	--label "org.opencontainers.image.version=$VERSION" \
	--label "org.opencontainers.image.revision=$REVISION" \
	--label "org.opencontainers.image.source=$SOURCE" \
	--label "org.opencontainers.image.created=$created" \
	--label "org.opencontainers.image.description=pillar-csi (controller, node, agent) on Debian $SUITE made by mmdebstrap, packages key $KEY" "$ctr"
mkdir -p "$(dirname "$OUT")"
rm -f "$OUT.tmp"
buildah "${BA[@]}" commit -q --format oci --disable-compression=false "$ctr" "oci-archive:$OUT.tmp:pillar-csi:$VERSION" >/dev/null
mv "$OUT.tmp" "$OUT"
cp "$ROOTFS.packages" "${OUT%.tar}.packages"
say "$OUT: $(stat -c %s "$OUT") bytes"
echo "$OUT"
