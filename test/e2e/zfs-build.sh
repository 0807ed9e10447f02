#!/bin/bash
# Build OpenZFS for the test bed's kernel from Debian's own packages, once per
# (kernel, ZFS version), and keep it outside the clone:
#   $CACHE/<KV>-<ZFSVER>/root/   lib/modules/<KV>/extra/*.ko (stripped),
#                                sbin/{zfs,zpool}, lib/udev/zvol_id and the
#                                shared libraries of libzfs (not the host's)
#   $CACHE/<KV>-<ZFSVER>/build.log, build-seconds
# CACHE is $E2E_ZFS_CACHE, else /var/cache/pillar-csi/zfs (root), else
# ~/.cache/pillar-csi/zfs. Usage: zfs-build.sh KV   (prints ZFS_ROOT=... ZFS_VERSION=...)
#
# Nothing is installed: a private apt configuration (lists under $CACHE/apt)
# enables contrib for this machine's Debian sources, `apt-get download` fetches
# zfs-dkms, zfsutils-linux and its libraries, linux-headers-<KV> with its
# -common and the matching linux-kbuild, and dpkg-deb -x unpacks them into a
# scratch directory where zfs-dkms's sources are configured against the
# unpacked headers and `make -C module` builds the modules (what dkms would do).
set -euo pipefail
KV=${1:?usage: zfs-build.sh KERNEL_VERSION}
HERE=$(cd "$(dirname "$0")" && pwd)
say() { echo "e2e-zfs: $*" >&2; }

if [ -n "${E2E_ZFS_CACHE:-}" ]; then CACHE=$E2E_ZFS_CACHE
elif [ -w /var/cache ] || [ -w /var/cache/pillar-csi ]; then CACHE=/var/cache/pillar-csi/zfs
else CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/pillar-csi/zfs; fi
mkdir -p "$CACHE"
exec 9> "$CACHE/.lock"
flock 9   # one build at a time; a second run waits and then finds the cache

# ---- private apt configuration: this machine's Debian sources, main + contrib ----------
read -ra APT_O <<< "$(sh "$HERE/../tools/apt-private.sh" "$CACHE" contrib)"
cand() {  # cand PKG : candidate version in the private lists (empty if unknown)
  apt-cache "${APT_O[@]}" policy "$1" 2>/dev/null | awk '/Candidate:/{if ($2 != "(none)") print $2; exit}'
}
ZV=$(cand zfs-dkms)
if [ -z "$ZV" ] || [ -z "$(cand "linux-headers-$KV")" ]; then
  say "refreshing the private package lists (main + contrib)"
  apt-get -q "${APT_O[@]}" update > "$CACHE/apt-update.log" 2>&1 ||
    { cat "$CACHE/apt-update.log" >&2; exit 1; }
  ZV=$(cand zfs-dkms)
fi
[ -n "$ZV" ] || { say "zfs-dkms is not available from this machine's Debian sources (contrib)"; exit 1; }
DIR=$CACHE/$KV-$ZV
if [ -f "$DIR/.complete" ]; then
  say "cached: $DIR (built in $(cat "$DIR/build-seconds")s)"
  echo "ZFS_ROOT=$DIR/root"; echo "ZFS_VERSION=$ZV"
  exit 0
fi

# ---- first build ---------------------------------------------------------------------
T0=$EPOCHREALTIME
HV=$(cand "linux-headers-$KV")
[ -n "$HV" ] || { say "linux-headers-$KV is not available from this machine's Debian sources"; exit 1; }
KBUILD=$(apt-cache "${APT_O[@]}" show "linux-headers-$KV=$HV" |
  sed -n 's/^Depends:.*\(linux-kbuild-[0-9.]*\) .*/\1/p' | head -1)
[ -n "$KBUILD" ] || { say "cannot tell the linux-kbuild package of linux-headers-$KV"; exit 1; }
say "building OpenZFS $ZV for $KV (first time; cached in $DIR)"
W=$DIR.tmp
rm -rf "$W"; mkdir -p "$W/dl" "$W/x" "$W/root"
(cd "$W/dl" && apt-get -q "${APT_O[@]}" download zfs-dkms="$ZV" zfsutils-linux="$ZV" \
   libzfs4linux="$ZV" libnvpair3linux="$ZV" libuutil3linux="$ZV" \
   "linux-headers-$KV=$HV" "linux-headers-${KV%-*}-common=$HV" "$KBUILD=$HV") > "$W/build.log" 2>&1 ||
  { cat "$W/build.log" >&2; exit 1; }
for d in "$W"/dl/*.deb; do dpkg-deb -x "$d" "$W/x"; done
H=$W/x/usr/src/linux-headers-$KV
# the headers' Makefile includes the -common tree by its installed path
sed -i "s#/usr/src/#$W/x/usr/src/#" "$H/Makefile"
src=$(ls -d "$W"/x/usr/src/zfs-* | head -1)
log=$W/build.log
T1=$EPOCHREALTIME
(cd "$src" && ./configure --with-config=kernel --with-linux="$W/x/usr/src/linux-headers-${KV%-*}-common" \
   --with-linux-obj="$H") >> "$log" 2>&1 || { tail -30 "$log" >&2; say "configure failed ($log)"; exit 1; }
T2=$EPOCHREALTIME
make -C "$src/module" -j"$(nproc)" >> "$log" 2>&1 || { tail -30 "$log" >&2; say "make failed ($log)"; exit 1; }
T3=$EPOCHREALTIME
R=$W/root
mkdir -p "$R/lib/modules/$KV/extra" "$R/sbin" "$R/lib/udev"
for ko in "$src"/module/*/*.ko; do
  strip --strip-debug -o "$R/lib/modules/$KV/extra/$(basename "$ko")" "$ko"
done
cp "$W/x/sbin/zfs" "$W/x/sbin/zpool" "$R/sbin/"
cp "$W/x/lib/udev/zvol_id" "$R/lib/udev/"
mkdir -p "$R/lib/x86_64-linux-gnu"
cp -a "$W"/x/lib/x86_64-linux-gnu/lib{zfs,zfs_core,nvpair,uutil}.so.* "$R/lib/x86_64-linux-gnu/" 2>/dev/null ||
  cp -a "$W"/x/usr/lib/x86_64-linux-gnu/lib{zfs,zfs_core,nvpair,uutil}.so.* "$R/lib/x86_64-linux-gnu/"
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.0f", b-a}'; }
echo "$(secs "$T0" "$EPOCHREALTIME")" > "$W/build-seconds"
say "built in $(cat "$W/build-seconds")s (download+unpack $(secs "$T0" "$T1")s, configure $(secs "$T1" "$T2")s, make $(secs "$T2" "$T3")s); modules $(du -sh "$R/lib/modules" | cut -f1)"
rm -rf "$W/x" "$W/dl"
touch "$W/.complete"
rm -rf "$DIR"; mv "$W" "$DIR"
echo "ZFS_ROOT=$DIR/root"; echo "ZFS_VERSION=$ZV"
