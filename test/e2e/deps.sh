#!/bin/bash
# Install the Debian packages the e2e test bed needs on the host.
# Idempotent: does nothing when every package is already installed, and runs
# `apt-get update` only when apt has no package lists or an install failed
# (stale lists). Usage: test/e2e/deps.sh   (root, or sudo)
set -euo pipefail

# qemu-system-x86  the VMs (TCG; brings qemu-system-data with qboot.rom)
# busybox-static   userland inside the VMs (static, no libs to copy)
# kmod             modprobe --show-depends / depmod for the module subset
# cpio             initramfs archive
# e2fsprogs xfsprogs lvm2 iproute2 util-linux
#                  tools copied into the VMs (with their shared libraries)
# xz-utils zstd    vmlinux extraction from vmlinuz, compressed modules
# nvme-cli         diagnostics inside the VMs only (our binary speaks to /dev/nvme-fabrics itself)
# strace           syscall counts of the agent inside the VM (scenario scale200)
# gcc make binutils libelf1
#                  OpenZFS's kernel modules (zfs-build.sh; libelf1 for the
#                  headers' objtool); the headers are only unpacked, never installed
# libtirpc3 libssl3 libudev1
#                  libraries of zfs/zpool (zfsutils-linux, unpacked, not installed)
#                  copied into the ZFS scenarios' VMs
PKGS="qemu-system-x86 busybox-static kmod cpio e2fsprogs xfsprogs lvm2 iproute2
      util-linux xz-utils zstd nvme-cli strace gcc make binutils libelf1 libtirpc3 libssl3 libudev1"

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

# bookworm-backports: the 6.12 kernel of the authentication scenarios (`# e2e-kernel:
# backports`, build.sh) is only downloaded from it, never installed. Its default pin (100)
# keeps every other package on bookworm. Added once, in a file of its own; the lists are
# refreshed when the file is new or apt has no backports lists yet.
BACKPORTS_LIST=/etc/apt/sources.list.d/pillar-csi-backports.list
BACKPORTS_LINE="deb http://deb.debian.org/debian bookworm-backports main"
backports_update=""
if ! grep -qsxF "$BACKPORTS_LINE" "$BACKPORTS_LIST"; then
  echo "e2e-deps: adding $BACKPORTS_LIST (bookworm-backports, for the 6.12 test kernel)"
  echo "$BACKPORTS_LINE" | $SUDO tee "$BACKPORTS_LIST.tmp" >/dev/null
  $SUDO mv "$BACKPORTS_LIST.tmp" "$BACKPORTS_LIST"
  backports_update=1
fi
ls /var/lib/apt/lists/*bookworm-backports_main_binary-amd64_Packages* >/dev/null 2>&1 ||
  backports_update=1
if [ -n "$backports_update" ]; then
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
fi

missing=""
for p in $PKGS; do
  s=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$s" = "install ok installed" ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "e2e-deps: all host packages present"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q --no-install-recommends -o Dpkg::Use-Pty=0)
echo "e2e-deps: installing:$missing"
if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
  $SUDO apt-get update -q
fi
# shellcheck disable=SC2086
if ! $SUDO apt-get install "${APT_OPTS[@]}" $missing; then
  echo "e2e-deps: install failed; refreshing package lists and retrying"
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  $SUDO apt-get install "${APT_OPTS[@]}" $missing
fi
