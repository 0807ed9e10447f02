# pools.sh - storage pools for the agent's backends (storage side). POSIX sh.
#
# ZFS (scenarios with "# e2e-zfs: yes", whose initramfs has the modules built
# by zfs-build.sh and zfs/zpool): the pool lives on its own virtual disk
# (serial e2e-zfs; a fresh image per run, kept across storage power cycles in
# topology b). There is no udev: `mdev -d` runs vm/zvol-link for the
# /dev/zvol/<dataset> links.
# LVM: a volume group on a loop device over an image file.

ZFS_POOL=${ZFS_POOL:-e2ez}

# zfs_disk : /dev/vdX whose virtio serial is e2e-zfs
zfs_disk() {
  for _b in /sys/block/vd*; do
    [ "$(sysfs_try "$_b/serial")" = e2e-zfs ] && { echo "/dev/${_b##*/}"; return 0; }
  done
  return 1
}
# zfs_load : modules in (ARC capped for the small VM), /dev/zfs, the mdev daemon
zfs_load() {
  modprobe virtio_pci && modprobe virtio_blk || fail "modprobe virtio_blk"
  if [ ! -e /dev/zfs ]; then
    _zt=$(up)
    modprobe zfs zfs_arc_max=$((64 << 20)) || fail "modprobe zfs"
    poll 10 [ -c /dev/zfs ] || fail "/dev/zfs did not appear after modprobe zfs"
    log "zfs modules loaded in $(since "$_zt")s"
  fi
  if ! pidof mdev >/dev/null; then mdev -d || fail "mdev -d"; fi
  poll 10 zfs_disk >/dev/null || fail "no virtual disk with serial e2e-zfs"
}
# zfs_part : the disk's one partition. The pool goes there, not on the whole
# disk: for a whole disk zpool writes a GPT and then waits for udev to report
# the new partition initialized, which never happens without udev.
zfs_part() { echo "$(zfs_disk)1"; }
# zfs_pool_create : a new pool on the virtual disk (no cache file: nothing
# imports it at boot, the scenario does)
zfs_pool_create() {
  zfs_load
  printf 'o\nn\np\n1\n\n\nw\n' | fdisk "$(zfs_disk)" >/dev/null 2>&1
  poll 10 [ -b "$(zfs_part)" ] || fail "no partition $(zfs_part) after fdisk"
  zpool create -f -o cachefile=none -m none "$ZFS_POOL" "$(zfs_part)" || fail "zpool create $ZFS_POOL"
}
# zfs_pool_import : import it again (after a storage boot) from that disk only
zfs_pool_import() {
  zfs_load
  zpool import -o cachefile=none -d "$(zfs_part)" "$ZFS_POOL" || fail "zpool import $ZFS_POOL"
}
# zfs_pool_export : what a clean shutdown does (topology a's simulated reboot)
zfs_pool_export() { zpool export "$ZFS_POOL" || fail "zpool export $ZFS_POOL"; }

# lvm_off_nvme : one kernel in topology a: the worker's NVMe-oF namespaces are
# block devices of the storage side too, and an LVM scan of a disconnected one
# blocks until ctrl_loss_tmo. lvm.conf's devices/filter still applies next to
# the agent's --config global_filter (agent-api.md §5.2), so keep LVM off /dev/nvme*.
lvm_off_nvme() {
  grep -q "r|^/dev/nvme|" /etc/lvm/lvm.conf ||
    sed -i 's@^devices {@devices { filter = [ "r|^/dev/nvme|" ]@' /etc/lvm/lvm.conf
  grep -q "r|^/dev/nvme|" /etc/lvm/lvm.conf || fail "lvm.conf filter"
}
# lvm_vg_create VG IMAGE MIB [THIN_LV THIN_MIB] : VG on a loop device over a
# sparse IMAGE of MIB MiB, optionally with a thin pool VG/THIN_LV
lvm_vg_create() {
  lvm_off_nvme
  modprobe loop && modprobe dm-mod && modprobe dm-thin-pool || fail "modprobe loop dm-mod dm-thin-pool"
  truncate -s "$3M" "$2" && _ld=$(losetup -f --show "$2") || fail "loop device for $2"
  lvm pvcreate -q "$_ld" && lvm vgcreate -q "$1" "$_ld" || fail "VG $1 on $_ld"
  [ -z "${4:-}" ] || lvm lvcreate -q -L "$5m" -T "$1/$4" || fail "thin pool $1/$4"
  lvm lvs "$1" >&2
}
