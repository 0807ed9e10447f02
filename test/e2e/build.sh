#!/bin/bash
# Build what the e2e VMs boot, under $E2E_OUT (default build/e2e):
#   kernel/<KV>/        Debian's kernel .deb unpacked (never installed); cached
#   dl/*.deb            the downloaded kernel package; cached
#   vmlinux-<KV>        uncompressed ELF kernel for PVH direct boot (no in-guest
#                       XZ decompression, ~3 s saved per boot under TCG)
#   base-<KV>.cpio      busybox, modules, host tools + libs; rebuilt only when
#                       its inputs change (stamp file)
#   overlay.cpio        /init, test/e2e/{lib,scenarios,vm}, build/pillar-csi;
#                       rebuilt every run (cheap)
#   zfs-<KV>.cpio       with E2E_ZFS=1: OpenZFS modules (zfs-build.sh, cached
#                       outside the clone), zfs/zpool and their libraries
#   initrd.cpio         base + overlay concatenated (what qemu boots);
#                       initrd-zfs.cpio also has zfs-<KV>.cpio (E2E_ZFS=1).
#                       Concatenated cpio archives are one valid initramfs
#                       (later members win). Uncompressed on purpose: gunzip
#                       of ~36 MB under TCG costs 1-2 s of every boot.
# Prints KV=..., VMLINUX=..., INITRD=... for run.sh to read.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${E2E_OUT:-$ROOT/build/e2e}
mkdir -p "$OUT"
say() { echo "e2e-build: $*" >&2; }

# ---- 1. kernel: ask apt which image linux-image-amd64 resolves to -----------
# E2E_KERNEL selects the series: "default" (bookworm's linux-image-amd64, 6.1: every scenario
# unless its header says otherwise) or "backports" (bookworm-backports' linux-image-amd64,
# linux-image-6.12.*+deb12-amd64: NVME_AUTH=m, NVME_HOST_AUTH=y, NVME_TARGET_AUTH=y, for the
# authentication scenarios; deps.sh adds the backports source). Each series has its own
# download cache; the unpacked kernels live side by side under kernel/<KV>.
E2E_KERNEL=${E2E_KERNEL:-default}
case $E2E_KERNEL in
  default)   KSUITE=""; DL=$OUT/dl; KSERIES='^[0-9.]+-[0-9]+-amd64$' ;;
  backports) KSUITE=/bookworm-backports; DL=$OUT/dl-backports; KSERIES='^6\.12\.[0-9]+\+deb12-amd64$' ;;
  *) say "E2E_KERNEL=$E2E_KERNEL: want default or backports"; exit 1 ;;
esac
resolve_kpkg() {
  apt-cache depends "linux-image-amd64$KSUITE" 2>/dev/null |
    awk '/Depends: linux-image-[0-9].*-amd64$/{print $2; exit}' |
    { read -r p && [[ ${p#linux-image-} =~ $KSERIES ]] && echo "$p"; true; }
}
KPKG=${E2E_KPKG:-$(resolve_kpkg)}
if [ -z "$KPKG" ]; then
  # a cached kernel of the series is good enough when apt knows nothing (no lists yet)
  KPKG=$(ls "$OUT/kernel" 2>/dev/null | grep -E "$KSERIES" | sort -V | tail -1 || true)
  KPKG=${KPKG:+linux-image-$KPKG}
fi
if [ -z "$KPKG" ]; then
  say "apt does not resolve linux-image-amd64$KSUITE; running apt-get update"
  apt-get update -q >&2
  KPKG=$(resolve_kpkg)
fi
[ -n "$KPKG" ] || { say "cannot resolve linux-image-amd64$KSUITE via apt-cache depends (E2E_KERNEL=$E2E_KERNEL; test/e2e/deps.sh adds bookworm-backports)"; exit 1; }
KV=${KPKG#linux-image-}
KROOT=$OUT/kernel/$KV
download() { (cd "$DL" && apt-get download -q -o APT::Sandbox::User=root "$KPKG" >&2); }
if [ ! -f "$KROOT/.complete" ]; then
  mkdir -p "$DL"
  deb=$(ls "$DL"/"${KPKG}"_*.deb 2>/dev/null | tail -1 || true)
  if [ -z "$deb" ]; then
    say "downloading $KPKG (apt-get download; not installed)"
    if ! download; then
      # stale lists: the ABI may have moved on; refresh, resolve again, retry
      say "download failed; refreshing package lists and retrying"
      apt-get update -q >&2
      [ -n "${E2E_KPKG:-}" ] || KPKG=$(resolve_kpkg)
      KV=${KPKG#linux-image-}; KROOT=$OUT/kernel/$KV
      download
    fi
    deb=$(ls "$DL"/"${KPKG}"_*.deb | tail -1)
  fi
  say "unpacking $(basename "$deb")"
  rm -rf "$KROOT" "$KROOT.tmp"; mkdir -p "$KROOT.tmp"
  dpkg-deb -x "$deb" "$KROOT.tmp"
  # the .deb has no modules.dep (its postinst runs depmod)
  depmod -b "$KROOT.tmp" "$KV"
  mv "$KROOT.tmp" "$KROOT"
  touch "$KROOT/.complete"
  # keep only the newest download of this series
  for f in "$DL"/*.deb; do [ "$f" = "$deb" ] || rm -f "$f"; done
fi
MODDIR=$KROOT/lib/modules/$KV

# ---- 2. vmlinux: the ELF inside the compressed bzImage -----------------------
VMLINUX=$OUT/vmlinux-$KV
if [ ! -s "$VMLINUX" ]; then
  img=$KROOT/boot/vmlinuz-$KV
  for md in '\xfd7zXZ\x00:xz -dc --single-stream' '\x28\xb5\x2f\xfd:zstd -dcq' '\x1f\x8b\x08\x00:gzip -dcq'; do
    magic=${md%%:*}; dec=${md#*:}
    off=$(LC_ALL=C grep -obUaP "$magic" "$img" | head -1 | cut -d: -f1 || true)
    [ -n "$off" ] || continue
    tail -c +"$((off + 1))" "$img" | $dec > "$VMLINUX.tmp" 2>/dev/null || true
    if [ "$(head -c4 "$VMLINUX.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
      mv "$VMLINUX.tmp" "$VMLINUX"; break
    fi
  done
  rm -f "$VMLINUX.tmp"
  if [ ! -s "$VMLINUX" ]; then
    say "note: no ELF vmlinux found in the bzImage; booting vmlinuz (slower)"
    VMLINUX=$img
  fi
fi

# copy_libs ROOT BINARY : the shared libraries BINARY loads (ldd, so honouring
# LD_LIBRARY_PATH), copied under ROOT at their paths unless already there
copy_libs() {
  ldd "$2" 2>/dev/null | awk '$2=="=>" && $3 ~ /^\//{print $3} $1 ~ /^\//{print $1}' |
    while read -r lib; do
      [ -e "$1$lib" ] && continue
      mkdir -p "$1$(dirname "$lib")"; cp -L "$lib" "$1$lib"
    done
}

# ---- 3. base initramfs ----------------------------------------------------------
# Modules asked for by name; kmod resolves their dependencies (and softdeps
# are listed explicitly: crc32c/crct10dif/crc64 implementations).
MODULES="configfs nvmet nvmet-tcp nvme-core nvme-fabrics nvme-tcp loop
  ext4 xfs dm-mod dm-thin-pool dm-snapshot veth sch_netem
  virtio_pci virtio_net virtio_blk virtio-rng
  crc32c_generic crc32c-intel crct10dif_generic crct10dif-pclmul crc64_rocksoft_generic
  nvme-auth dh_generic hmac sha256_generic sha512_generic"
# (nvme-auth and the DH-HMAC-CHAP digests and groups exist only where the kernel has
# NVME_AUTH, i.e. the backports series; a module a kernel lacks is skipped here.)
# Host tools copied with their shared libraries: what our binary execs plus
# the scenario library's needs. Installed under /usr/sbin in the VM.
TOOLS="/usr/sbin/mke2fs /usr/sbin/e2fsck /usr/sbin/resize2fs /usr/sbin/tune2fs
  /usr/sbin/mkfs.xfs /usr/sbin/xfs_growfs /usr/sbin/xfs_repair /usr/sbin/xfs_db
  /usr/sbin/lvm /usr/sbin/dmsetup /usr/sbin/blkid /usr/sbin/wipefs
  /usr/sbin/losetup /usr/bin/findmnt /usr/bin/nsenter /usr/sbin/ip /usr/sbin/tc /usr/sbin/nvme
  /usr/bin/strace"
STAMP_IN=$( { cat "$0"; echo "$KV"; dpkg-query -W busybox-static e2fsprogs xfsprogs lvm2 iproute2 util-linux nvme-cli strace 2>/dev/null; } | sha256sum | cut -c1-16)
BASE=$OUT/base-$KV.cpio
if [ ! -s "$BASE" ] || [ "$(cat "$BASE.stamp" 2>/dev/null)" != "$STAMP_IN" ]; then
  say "building base initramfs for $KV"
  [ -x /bin/busybox ] || { say "no /bin/busybox (install busybox-static)"; exit 1; }
  if ldd /bin/busybox >/dev/null 2>&1; then say "/bin/busybox must be busybox-static"; exit 1; fi
  S=$OUT/base-root
  rm -rf "$S"
  mkdir -p "$S"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,mnt,root,lib/modules,var/lib,var/log}
  ln -s ../run "$S/var/run"
  cp /bin/busybox "$S/bin/busybox"
  for a in $(/bin/busybox --list); do
    [ "$a" = busybox ] || ln -s busybox "$S/bin/$a"
  done
  ln -s ../bin/busybox "$S/sbin/modprobe"   # the kernel's request_module() helper
  for t in $TOOLS; do
    [ -x "$t" ] || { say "missing host tool $t (run test/e2e/deps.sh)"; exit 1; }
    cp -L "$t" "$S/usr/sbin/$(basename "$t")"
    copy_libs "$S" "$t"
  done
  for l in mkfs.ext4 mkfs.ext3 mkfs.ext2; do ln -s mke2fs "$S/usr/sbin/$l"; done
  for l in fsck.ext4 e2fsck.ext4; do ln -s e2fsck "$S/usr/sbin/$l"; done
  for l in pvcreate pvremove pvs vgcreate vgremove vgs vgchange lvcreate lvremove lvs \
           lvchange lvextend lvresize lvconvert lvdisplay vgdisplay pvdisplay; do
    ln -s lvm "$S/usr/sbin/$l"
  done
  cp /etc/mke2fs.conf "$S/etc/"
  mkdir -p "$S/etc/lvm"
  # no udev in the VM; thin_check is not installed
  cat > "$S/etc/lvm/lvm.conf" <<'LVM'
devices { obtain_device_list_from_udev = 0 }
activation { udev_sync = 0 udev_rules = 0 }
global { use_lvmetad = 0 thin_check_executable = "" event_activation = 0 }
LVM
  echo 'root:x:0:0:root:/root:/bin/sh' > "$S/etc/passwd"
  echo 'root:x:0:' > "$S/etc/group"
  echo '127.0.0.1 localhost' > "$S/etc/hosts"
  # modules: resolve deps with the host's kmod against the unpacked tree
  for m in $MODULES; do
    modprobe -d "$KROOT" -S "$KV" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}' || true
  done | sort -u > "$OUT/modules.list"
  for m in configfs nvmet nvmet-tcp nvme-tcp ext4 xfs dm-thin-pool veth virtio_net virtio_blk; do
    grep -q "/${m//-/[-_]}\.ko" "$OUT/modules.list" ||
      { [ "$m" = configfs ] && grep -qw configfs "$MODDIR/modules.builtin"; } ||
      { say "module $m not found in $KV"; exit 1; }
  done
  while read -r ko; do
    rel=${ko#"$KROOT"}
    mkdir -p "$S$(dirname "$rel")"
    case $ko in
      *.ko.xz)  xz -dc "$ko" > "$S${rel%.xz}";;
      *.ko.zst) zstd -qdc "$ko" > "$S${rel%.zst}";;
      *.ko.gz)  gzip -dc "$ko" > "$S${rel%.gz}";;
      *)        cp "$ko" "$S$rel";;
    esac
  done < "$OUT/modules.list"
  cp "$MODDIR"/modules.{order,builtin,builtin.modinfo} "$S/lib/modules/$KV/" 2>/dev/null || true
  depmod -b "$S" "$KV"
  (cd "$S" && find . -print0 | cpio --null -o -H newc --quiet) > "$BASE.tmp"
  mv "$BASE.tmp" "$BASE"
  echo "$STAMP_IN" > "$BASE.stamp"
  rm -rf "$S"
  say "base initramfs $(du -h "$BASE" | cut -f1), $(wc -l < "$OUT/modules.list") modules"
fi

# ---- 3b. ZFS (only when a scenario asks for it: E2E_ZFS=1) --------------------------
# zfs-build.sh builds the OpenZFS modules for $KV once and caches them outside
# the clone. zfs-<KV>.cpio adds them (with a modules.dep covering base + ZFS),
# zfs, zpool, zvol_id and their libraries, and the mdev.conf that makes the
# /dev/zvol/<dataset> links (no udev in the VMs; vm/zvol-link).
INITRD_ZFS=""
if [ -n "${E2E_ZFS:-}" ]; then
  ZOUT=$(bash "$HERE/zfs-build.sh" "$KV")
  eval "$ZOUT"   # ZFS_ROOT ZFS_VERSION
  ZCPIO=$OUT/zfs-$KV.cpio
  ZSTAMP="$STAMP_IN $ZFS_ROOT"
  if [ ! -s "$ZCPIO" ] || [ "$(cat "$ZCPIO.stamp" 2>/dev/null)" != "$ZSTAMP" ]; then
    Z=$OUT/zfs-root
    rm -rf "$Z"; mkdir -p "$Z/etc" "$Z/lib/x86_64-linux-gnu"
    (cd "$Z" && cpio -idm --quiet "lib/modules/$KV/*" < "$BASE")
    cp -a "$ZFS_ROOT/." "$Z/"
    for t in "$Z/sbin/zfs" "$Z/sbin/zpool" "$Z/lib/udev/zvol_id"; do
      LD_LIBRARY_PATH=$Z/lib/x86_64-linux-gnu copy_libs "$Z" "$t"
    done
    printf '%s\n' 'zd[0-9]+ 0:0 660 ! */e2e/vm/zvol-link' '.* 0:0 660 !' > "$Z/etc/mdev.conf"
    depmod -b "$Z" "$KV"
    # only the ZFS modules and the new index: the others are in the base already
    find "$Z/lib/modules/$KV" -name '*.ko' ! -path '*/extra/*' -delete
    (cd "$Z" && find . -print0 | cpio --null -o -H newc --quiet) > "$ZCPIO.tmp"
    mv "$ZCPIO.tmp" "$ZCPIO"; echo "$ZSTAMP" > "$ZCPIO.stamp"
    rm -rf "$Z"
    say "zfs initramfs part $(du -h "$ZCPIO" | cut -f1) (OpenZFS $ZFS_VERSION)"
  fi
  INITRD_ZFS=$OUT/initrd-zfs.cpio
fi

# ---- 4. overlay: test bed scripts + our binary -----------------------------------
O=$OUT/overlay-root
rm -rf "$O"; mkdir -p "$O/e2e" "$O/usr/bin"
install -m 0755 "$HERE/vm/init" "$O/init"
cp -r "$HERE/lib" "$HERE/scenarios" "$HERE/vm" "$O/e2e/"
chmod 0755 "$O/e2e/vm/rpcd" "$O/e2e/vm/init" "$O/e2e/vm/zvol-link"   # exec bits may be lost in a checkout
BIN=${E2E_BIN:-$ROOT/build/pillar-csi}
if [ -x "$BIN" ]; then
  cp "$BIN" "$O/usr/bin/pillar-csi"
  for r in pillar-agent pillar-node pillar-controller; do ln -s pillar-csi "$O/usr/bin/$r"; done
  if ldd "$BIN" >/dev/null 2>&1; then say "warning: $BIN is not static; its libraries are not copied"; fi
else
  say "warning: $BIN not found; VMs run without pillar-csi"
fi
(cd "$O" && find . -print0 | cpio --null -o -H newc --quiet) > "$OUT/overlay.cpio"
rm -rf "$O"
# qemu takes one -initrd file (the backports series has its own, so that both can be used
# in one run)
INITRD=$OUT/initrd.cpio
[ "$E2E_KERNEL" = default ] || INITRD=$OUT/initrd-$KV.cpio
cat "$BASE" "$OUT/overlay.cpio" > "$INITRD"
[ -z "$INITRD_ZFS" ] || cat "$BASE" "$ZCPIO" "$OUT/overlay.cpio" > "$INITRD_ZFS"

echo "KV=$KV"
echo "VMLINUX=$VMLINUX"
echo "INITRD=$INITRD"
echo "INITRD_ZFS=$INITRD_ZFS"
