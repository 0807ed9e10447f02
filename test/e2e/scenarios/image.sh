#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-timeout: 480
# e2e-image: yes
# e2e-backends: file lvm zfs
# e2e-nvmet: scenario
# The container image on the real kernel (`make image-e2e`, part of `make test`): the csi
# scenario (csi-body.inc: agent, controller and node, storage reboot while mounted) with every
# role - and every `pillar-csi call`/`apply` of the CO - run chrooted in the unpacked image of
# `make image` (a virtual disk, serial e2e-image), so each program the roles execute (lvm's lvs,
# lvcreate, vgs, lvremove, `lvm version`; blkid and mkfs.ext4; modprobe) comes from the image.
# The host paths a pod would mount (deploy.md §5: /dev, /sys, /proc, /lib/modules, /etc/nvme,
# the kubelet and state directories) are bind mounts with shared propagation, so the node's
# mounts inside the image appear at the same paths outside.  Backend: $E2E_BACKEND, default lvm.
# The harness loads no nvmet here ("# e2e-nvmet: scenario"): on every boot of the storage side,
# before the agent starts, the chart's agent init container runs from the image - the same
# command and args as charts/pillar-csi/templates/agent-daemonset.yaml renders with the default
# values (test/chart's test_agent pins them) - and nvmet, nvmet_tcp must be loaded after it.
. /e2e/lib/e2e.sh

IMG=/image
image_setup() {
  modprobe virtio_pci && modprobe virtio_blk || fail "modprobe virtio_blk"
  _d=""
  for _b in /sys/block/vd*; do
    [ "$(sysfs_try "$_b/serial")" = e2e-image ] && _d=/dev/${_b##*/}
  done
  [ -n "$_d" ] || fail "no virtual disk with serial e2e-image"
  mkdir -p $IMG && mount -t ext4 "$_d" $IMG || fail "mount the image disk $_d"
  [ -x $IMG/usr/bin/pillar-csi ] || fail "no /usr/bin/pillar-csi in the image"
  mount --make-rshared / || fail "make / rshared"
  mkdir -p /etc/nvme "$E2E_STATE" /run/e2e
  for _m in /dev /proc /sys /run /tmp /lib/modules /etc/nvme "$E2E_STATE"; do
    mkdir -p "$IMG$_m" && mount --rbind "$_m" "$IMG$_m" || fail "bind $_m into the image"
  done
  # as lvm_off_nvme does for the VM's own lvm.conf: in topology a the worker's namespaces
  # are devices of the storage side's kernel too
  sed -i 's@^devices {@devices { filter = [ "r|^/dev/nvme|" ]@' $IMG/etc/lvm/lvm.conf
  grep -q "r|^/dev/nvme|" $IMG/etc/lvm/lvm.conf || fail "lvm.conf filter in the image"
  mkdir -p /run/e2e-image
  printf '#!/bin/sh\nexec chroot %s /usr/bin/pillar-csi "$@"\n' $IMG > /run/e2e-image/pillar-csi
  chmod +x /run/e2e-image/pillar-csi
}
image_setup
export E2E_BIN=/run/e2e-image/pillar-csi
log "image: $("$E2E_BIN" version | head -1), $(sed -n 's/^PRETTY_NAME=//p' $IMG/etc/os-release)"
assert_eq "$(chroot $IMG /bin/sh -c 'for t in lvcreate blkid mkfs.ext4 modprobe; do command -v $t; done' | tr '\n' ' ')" \
  "/usr/sbin/lvcreate /usr/sbin/blkid /usr/sbin/mkfs.ext4 /usr/sbin/modprobe " "the image's tools"

# every role process must have the image as its root directory
image_roots() {
  for _r in agent controller node; do
    case $_r in agent) _h=$E2E_STATE/e2e ;; *) _h=/run/e2e ;; esac
    _p=$(cat "$_h/roles/$_r.pid" 2>/dev/null) || fail "role $_r has no pid file"
    assert_eq "$(readlink /proc/$_p/root)" $IMG "root directory of the $_r role (pid $_p)"
    log "role $_r (pid $_p) runs chrooted in $IMG"
  done
}
# the agent DaemonSet's init container "modprobe": command [/usr/bin/pillar-csi],
# args [modprobe, nvmet, nvmet_tcp], /lib/modules of the host mounted
INIT_MODPROBE="chroot $IMG /usr/bin/pillar-csi modprobe nvmet nvmet_tcp"
step "storage: nvmet is not loaded until the agent's init container runs from the image"
assert_eq "$(on_storage 'grep -cE "^nvmet(_tcp)? " /proc/modules || true')" 0 "nvmet modules before the init step"
assert_not on_storage '[ -e /sys/module/nvmet ] || [ -e /sys/module/nvmet_tcp ]'
# what the kubelet does at each boot of the storage node: the init container, then the agent
on_storage "printf '%s\n' 'echo \"@@ [\$(up)] agent init container: $INIT_MODPROBE\" >&2' \
  '$INIT_MODPROBE || exit 1' 'echo x >> \$E2E_STATE/e2e/init-steps' > \$E2E_STATE/e2e/boot-hook &&
  state_sync" || fail "storage: boot hook"
on_storage ". \$E2E_STATE/e2e/boot-hook" || fail "the agent's init container from the image failed"
init_step_done() {
  assert_eq "$(on_storage 'grep -E "^nvmet(_tcp)? " /proc/modules | cut -d" " -f1 | sort | tr "\n" " "')" \
    "nvmet nvmet_tcp " "modules loaded after the init step (/proc/modules)"
  assert on_storage '[ -d /sys/module/nvmet ] && [ -d /sys/module/nvmet_tcp ] && [ -d $NVMET ]'
  assert_eq "$(on_storage 'wc -l < $E2E_STATE/e2e/init-steps')" "$1" "init container runs on the storage side"
}
init_step_done 1
CSI_BACKEND=${E2E_BACKEND:-lvm}
CSI_AFTER_START=image_roots
CSI_AFTER_RESTORE="init_step_done 2"   # the storage reboot: modules unloaded, the init step again
. /e2e/scenarios/csi-body.inc
