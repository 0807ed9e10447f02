# e2e.sh - the scenario library; source it: . /e2e/lib/e2e.sh
# POSIX sh for busybox ash inside the VMs. Pieces:
#   core.sh   log/step/fail, assert*, poll/wait_for, sysfs, data checksums, dmesg marks
#   topo.sh   topologies a/b: on_storage/on_worker, storage_down/up/reboot, link_cut/heal
#   nvmet.sh  kernel target via configfs (storage side), recorded exports
#   nvme.sh   kernel host via /dev/nvme-fabrics (worker side), device lookup by uuid
#   roles.sh  role_start/stop/kill/log for build/pillar-csi
#   pools.sh  ZFS pool on a virtual disk ("# e2e-zfs: yes"), LVM VG on a loop device
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export E2E_TOPO=${E2E_TOPO:-a} E2E_SCENARIO=${E2E_SCENARIO:-}
. /e2e/lib/core.sh
. /e2e/lib/topo.sh
. /e2e/lib/nvmet.sh
. /e2e/lib/nvme.sh
. /e2e/lib/roles.sh
. /e2e/lib/pools.sh
