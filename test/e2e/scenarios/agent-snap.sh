#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-order: 37
# e2e-timeout: 900
# e2e-zfs: yes
# Snapshots and clones on the real kernel (docs/snapshots.md "Agent API"), one
# pool per backend that takes them: file (fp), LVM thin (e2evg, thin pool tp) and
# ZFS (e2ez), driven over gRPC the way the controller drives the agent:
#  1. a volume is exported and connected; data A is written from the worker;
#     CreateSnapshot (twice: idempotent); data B is written over A
#  2. a restore (CreateVolume from the snapshot) and a clone (CreateVolume from
#     the volume) are exported and connected: the restore reads exactly A, the
#     clone exactly B, each with its own identity (derived from its own NQN)
#  3. the source is deleted while its snapshot, restore and clone live: they
#     keep their data, the snapshot stays listed with its source
#  4. LVM linear: CreateSnapshot refused (snapshots need a thin pool)
#  5. storage reboot: one complete ReconcileState restores every restore and
#     clone; the worker reconnects with identities and data unchanged; no
#     snapshot is ever exported
#  6. DeleteSnapshot (ZFS: deferred, the restore still depends on it) and
#     DeleteVolume of everything: no dataset, snapshot, LV or file left
. /e2e/lib/e2e.sh
scenario_begin
. /e2e/scenarios/agent-lib.inc
POOLS="fp e2evg e2ez"
TMO=45
RD=1
VGIMG=$E2E_STATE/e2evg.img

vol_uid() { echo "uid-$(echo "$1" | tr /: --)"; }
vol_bt() { case $1 in fp/*) echo BACKEND_TYPE_FILE;; e2ez/*) echo BACKEND_TYPE_ZFS_ZVOL;; *) echo BACKEND_TYPE_LVM;; esac; }
vol_bp() {
  case $1 in
    fp/*) echo '{"file":{"pool":"fp"}}';;
    e2ez/*) echo '{"zfs":{"pool":"e2ez"}}';;
    *) echo '{"lvm":{"volume_group":"e2evg","provision_mode":"thin","thin_pool":"tp"}}';;
  esac
}
storage_has() {
  case $1 in
    fp/*) on_storage "[ -e $E2E_STATE/vols/${1#fp/}.img ]";;
    e2ez/*) on_storage "zfs list -H -o name $1" >/dev/null 2>&1;;
    *) on_storage "lvm lvs $1" >/dev/null 2>&1;;
  esac
}
# acall_retry RPC JSON : the call, retried while it answers UNAVAILABLE (a copy
# still running, as the controller retries)
acall_retry() {
  _n=0
  while :; do
    if _r=$(acall "$1" "$2" 2>&1); then echo "$_r"; return 0; fi
    case $_r in UNAVAILABLE:*) ;; *) fail "$1 failed: $_r";; esac
    _n=$((_n + 1)); [ $_n -lt 120 ] || fail "$1 still UNAVAILABLE after 120 tries: $_r"
    log "$1 -> $_r (retry)"; sleep 1
  done
}
create() {  # create VID [SOURCE_JSON]
  acall_retry CreateVolume "{\"volume_id\":\"$1\",\"capacity_bytes\":$((64 * MIB)),\"backend_type\":\"$(vol_bt "$1")\",\"backend_params\":$(vol_bp "$1"),\"fence\":$(tok "$1" 1)${2:+,\"content_source\":$2}}"
}
snapshot() {  # snapshot SID SOURCE_VID
  acall_retry CreateSnapshot "{\"snapshot_id\":\"$1\",\"source_volume_id\":\"$2\",\"backend_type\":\"$(vol_bt "$1")\",\"backend_params\":$(vol_bp "$1"),\"fence\":$(tok "snap:$1" 1)}"
}
export_connect() {  # export_connect VID : export, allow, connect; sets DEV_<key> CTRL_<key>
  _k=$(vol_key "$1"); _n=$(vol_nqn "$1")
  acall_ok ExportVolume "{\"volume_id\":\"$1\",\"protocol_type\":\"PROTOCOL_TYPE_NVMEOF_TCP\",\"export_params\":$(tcp),\"acl_enabled\":true,\"fence\":$(tok "$1" 2)}" >/dev/null
  acall_ok AllowInitiator "{\"volume_id\":\"$1\",\"protocol_type\":\"PROTOCOL_TYPE_NVMEOF_TCP\",\"initiator_id\":\"$E2E_HOSTNQN\",\"fence\":$(tok "$1" 3)}" >/dev/null
  _i=$(nvme_connect "$_n" "$STORAGE_IP" "$PORT" "ctrl_loss_tmo=$TMO,reconnect_delay=$RD,keep_alive_tmo=5") ||
    fail "connect to $_n failed"
  _u=$(id_uuid5 "uuid:$_n/namespaces/1")
  wait_for 30 "namespace $_u of $1 on the worker" nvme_ns_present "$_u"
  _d=$(nvme_ns_dev "$_u")
  check_identity "$1" "$_d" "$_i"
  eval "DEV_$_k=$_d CTRL_$_k=$_i"
}
unexport() {  # unexport VID : disconnect, unexport
  _k=$(vol_key "$1"); eval "_i=\$CTRL_$_k"
  nvme_disconnect "$_i"
  acall_ok UnexportVolume "{\"volume_id\":\"$1\",\"protocol_type\":\"PROTOCOL_TYPE_NVMEOF_TCP\",\"fence\":$(tok "$1" 4)}" >/dev/null
}
dev_of() { eval "echo \$DEV_$(vol_key "$1")"; }
head_sum() { drop_caches; dd if="$1" bs=1M count=4 2>/dev/null | md5sum | cut -d' ' -f1; }
put() { dd if="$2" of="$1" bs=1M conv=fsync 2>/dev/null || fail "write $2 to $1"; }

step "storage: file pool fp, LVM thin pool e2evg/tp on a loop device, ZFS pool e2ez; agent"
on_storage 'zfs_pool_create && zpool list -H -o name,size,health' >&2 || fail "storage: zpool create"
on_storage "printf '%s\n' 'modprobe loop; modprobe dm-mod; modprobe dm-thin-pool; losetup -j $VGIMG | grep -q . || losetup -f $VGIMG' > $E2E_STATE/e2e/boot-hook &&
  lvm_vg_create e2evg $VGIMG 256 tp 128" || fail "storage: VG e2evg with thin pool tp"
CFG='{"backends":[{"file":{"pool":"fp","directory":"'$E2E_STATE'/vols"}},{"lvm":{"volumeGroup":"e2evg","thinPool":"tp","provisioningMode":"thin"}},{"zfs":{"pool":"e2ez"}}]}'
on_storage "mkdir -p $E2E_STATE/vols && printf '%s\n' $(shquote "$CFG") > $CONF && state_sync" || fail "storage: config"
agent_start
acall_ok ReconcileState '{"volumes":[],"complete":true}' >/dev/null
A=$(data_write /tmp/a 4)
B=$(data_write /tmp/b 4)

for P in $POOLS; do
  step "$P: write A, snapshot, write B; restore reads A, clone reads B, each its own identity"
  create "$P/v1" >/dev/null
  export_connect "$P/v1"
  put "$(dev_of "$P/v1")" /tmp/a
  t=$(up)
  R=$(snapshot "$P/s1" "$P/v1")
  echo "@@TIME $P: CreateSnapshot of 64 MiB: $(since "$t")s" >&2
  assert_match "$R" "\"snapshotId\":\"$P/s1\"" "CreateSnapshot $P/s1 id"
  assert_match "$R" "\"sourceVolumeId\":\"$P/v1\"" "CreateSnapshot $P/s1 source"
  assert_match "$R" "\"sizeBytes\":\"?$((64 * MIB))\"?" "CreateSnapshot $P/s1 size"
  assert_match "$R" '"readyToUse":true' "CreateSnapshot $P/s1 ready"
  R2=$(snapshot "$P/s1" "$P/v1")
  assert_eq "$R2" "$R" "CreateSnapshot $P/s1 again (idempotent)"
  put "$(dev_of "$P/v1")" /tmp/b
  t=$(up)
  create "$P/r1" "{\"snapshot_id\":\"$P/s1\"}" >/dev/null
  echo "@@TIME $P: CreateVolume from the snapshot: $(since "$t")s" >&2
  t=$(up)
  create "$P/c1" "{\"volume_id\":\"$P/v1\"}" >/dev/null
  echo "@@TIME $P: CreateVolume from the volume: $(since "$t")s" >&2
  export_connect "$P/r1"
  export_connect "$P/c1"
  assert_eq "$(head_sum "$(dev_of "$P/r1")")" "$A" "data of the restore $P/r1 (snapshot time)"
  assert_eq "$(head_sum "$(dev_of "$P/c1")")" "$B" "data of the clone $P/c1 (clone time)"
  assert_eq "$(head_sum "$(dev_of "$P/v1")")" "$B" "data of the source $P/v1"
  R=$(acall_ok ListSnapshots "{\"backend_type\":\"$(vol_bt "$P/v1")\",\"source_volume_id\":\"$P/v1\"}")
  assert_match "$R" "\"snapshotId\":\"$P/s1\"" "ListSnapshots of $P/v1"

  step "$P: delete the source while its snapshot, restore and clone live"
  unexport "$P/v1"
  acall_ok DeleteVolume "{\"volume_id\":\"$P/v1\",\"backend_type\":\"$(vol_bt "$P/v1")\",\"fence\":$(tok "$P/v1" 5)}" >/dev/null
  assert_not storage_has "$P/v1"
  assert_eq "$(head_sum "$(dev_of "$P/r1")")" "$A" "data of $P/r1 after the source's delete"
  assert_eq "$(head_sum "$(dev_of "$P/c1")")" "$B" "data of $P/c1 after the source's delete"
  R=$(acall_ok ListSnapshots "{\"backend_type\":\"$(vol_bt "$P/v1")\",\"backend_params\":$(vol_bp "$P/v1")}")
  assert_match "$R" "\"snapshotId\":\"$P/s1\",\"sourceVolumeId\":\"$P/v1\"" "ListSnapshots of $P after the source's delete"
  t=$(up)
  create "$P/r2" "{\"snapshot_id\":\"$P/s1\"}" >/dev/null
  echo "@@TIME $P: CreateVolume from the snapshot of a deleted volume: $(since "$t")s" >&2
  export_connect "$P/r2"
  assert_eq "$(head_sum "$(dev_of "$P/r2")")" "$A" "data of the restore $P/r2 of the deleted source's snapshot"
done

step "LVM linear: CreateSnapshot refused"
L='"volume_id":"e2evg/l1","backend_type":"BACKEND_TYPE_LVM"'
acall_ok CreateVolume "{$L,\"capacity_bytes\":$((8 * MIB)),\"backend_params\":{\"lvm\":{\"volume_group\":\"e2evg\",\"provision_mode\":\"linear\"}},\"fence\":$(tok e2evg/l1 1)}" >/dev/null
assert_eq "$(acall_err CreateSnapshot "{\"snapshot_id\":\"e2evg/s9\",\"source_volume_id\":\"e2evg/l1\",\"backend_type\":\"BACKEND_TYPE_LVM\",\"fence\":$(tok snap:e2evg/s9 1)}")" \
  'FAILED_PRECONDITION: snapshots need a thin pool: volume "l1" is linear' "CreateSnapshot of a linear LV"
acall_ok DeleteVolume "{$L,\"fence\":$(tok e2evg/l1 2)}" >/dev/null

VOLS=""
for P in $POOLS; do VOLS="$VOLS $P/r1 $P/c1 $P/r2"; done
step "storage reboot: one complete ReconcileState restores every restore and clone, identities unchanged"
mark reboot
t=$(up)
storage_down
storage_up 60
wait_for 60 "agent answers after the storage boot" agent_answers
assert gate_pending
REQ='{"volumes":['; sep=""
for v in $VOLS; do REQ="$REQ$sep$(desired "$v" 3)"; sep=,; done
REQ="$REQ],\"complete\":true}"
R=$(acall_ok ReconcileState "$REQ")
assert_eq "$(echo "$R" | grep -o '"success":true' | wc -l)" 9 "successful items in $R"
assert_eq "$(on_storage 'ls /sys/kernel/config/nvmet/subsystems | wc -l')" 9 "subsystems (no snapshot exported)"
for v in $VOLS; do
  k=$(vol_key "$v"); eval "i=\$CTRL_$k d=\$DEV_$k"
  wait_for "$TMO" "nvme$i ($v) live again" nvme_ctrl_is "$i" live
  check_identity "$v" "$d" "$i"
done
echo "@@TIME storage down to every controller live: $(since "$t")s" >&2
for P in $POOLS; do
  assert_eq "$(head_sum "$(dev_of "$P/r1")")" "$A" "data of $P/r1 after the reboot"
  assert_eq "$(head_sum "$(dev_of "$P/c1")")" "$B" "data of $P/c1 after the reboot"
  assert_eq "$(head_sum "$(dev_of "$P/r2")")" "$A" "data of $P/r2 after the reboot"
done
expect_dmesg reboot 'Successfully reconnected' "reconnect"
assert_eq "$(count_dmesg reboot 'identifiers changed|Removing ctrl')" 0 "identity changes or removed controllers"

step "delete snapshots (ZFS: deferred while restores depend on them), restores and clones: nothing left"
for P in $POOLS; do
  acall_ok DeleteSnapshot "{\"snapshot_id\":\"$P/s1\",\"backend_type\":\"$(vol_bt "$P/s1")\",\"fence\":$(tok "snap:$P/s1" 2)}" >/dev/null
  R=$(acall_ok ListSnapshots "{\"backend_type\":\"$(vol_bt "$P/s1")\",\"backend_params\":$(vol_bp "$P/s1")}")
  assert_not sh_true "echo '$R' | grep -q snapshotId"
  assert_eq "$(head_sum "$(dev_of "$P/r1")")" "$A" "data of $P/r1 after its snapshot's delete"
done
for v in $VOLS; do
  unexport "$v"
  acall_ok DeleteVolume "{\"volume_id\":\"$v\",\"backend_type\":\"$(vol_bt "$v")\",\"fence\":$(tok "$v" 5)}" >/dev/null
done
assert_eq "$(on_storage 'zfs list -H -o name -t volume,snapshot -r e2ez | wc -l')" 0 "zvols and snapshots left in e2ez"
assert_eq "$(on_storage 'lvm lvs --noheadings -o lv_name e2evg | tr -d " " | grep -v "^tp$" | wc -l')" 0 "LVs left in e2evg"
assert_eq "$(on_storage "ls -A $E2E_STATE/vols | wc -l")" 0 "files left in the file pool"
assert_eq "$(on_storage 'ls /sys/kernel/config/nvmet/subsystems | wc -l')" 0 "subsystems left"
scenario_end
