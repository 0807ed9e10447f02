#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-timeout: 1500
# Scale on the real kernel (issue 14): one agent (file backend) exports N=200
# volumes (ACL on) to one worker, which connects an nvme-tcp controller to each
# (ctrl_loss_tmo=120, reconnect_delay=1). Then a simulated storage reboot: the
# agent comes back gated, one complete ReconcileState restores all N exports on
# the real configfs, and every worker controller must be live again. Reports
# (@@FIGURE lines): the agent's own restore time (its "ReconcileState done" log
# line) and per export, the call's time seen by the client, and the time from
# the restore to every controller live (the kernel retries every
# reconnect_delay). Syscalls per export on the real configfs: strace -c -f on
# the agent during a ReconcileState of S=20 other volumes on an empty configfs
# (the work of a restore) minus one of no volume, over S (ptrace under TCG
# costs milliseconds a syscall, too slow for all N). Checks: every item
# succeeds, identities unchanged across the reboot (uuid, nguid, serial of the
# first and last volume), no controller removed, data written before the
# reboot reads back.
. /e2e/lib/e2e.sh
scenario_begin
. /e2e/scenarios/agent-lib.inc

N=200
TMO=120
RD=1
vid()     { printf 'fp/s%03d' "$1"; }
vol_uid() { case $1 in fp/t*) _u=5ca2;; *) _u=5ca1;; esac
            printf '0e2e0000-%s-4000-8000-000000000%s' "$_u" "${1#fp/?}"; }
vol_bt()  { echo BACKEND_TYPE_FILE; }
vol_bp()  { echo '{"file":{"pool":"fp"}}'; }
# live_count : worker controllers in state live
live_count() { cat /sys/class/nvme/nvme*/state 2>/dev/null | grep -c '^live$' || true; }
all_live()   { [ "$(live_count)" -eq "$N" ]; }
none_live()  { [ "$(live_count)" -eq 0 ]; }
# request : the complete desired state of the N volumes (generation 1), on stdout
request() {
  printf '{"volumes":['
  i=1
  while [ "$i" -le "$N" ]; do
    [ "$i" = 1 ] || printf ','
    desired "$(vid "$i")" 1
    i=$((i + 1))
  done
  printf '],"complete":true}'
}
# restore_secs : the agent's last "ReconcileState done" line: "VOLUMES FAILED SECONDS"
restore_secs() {
  on_storage 'cat "$(role_home)/logs/agent.log"' | grep '"ReconcileState done"' | tail -1 |
    sed -n 's/.*volumes="\([0-9]*\)" failed="\([0-9]*\)".*seconds="\([0-9.]*\)".*/\1 \2 \3/p'
}
per_export_ms() { awk -v s="$1" -v n="$N" 'BEGIN {printf "%.2f", s * 1000 / n}'; }

step "storage: agent (file backend) with its state on the storage disk"
CFG='{"backends":[{"file":{"pool":"fp","directory":"'$E2E_STATE'/vols"}}]}'
on_storage "mkdir -p $E2E_STATE/vols && printf '%s\n' $(shquote "$CFG") > $CONF && state_sync" || fail "storage: config"
agent_start
assert gate_pending

# par K CMD... : CMD J K ... for J = 1..K in parallel (the VM has 2 vCPUs; one call
# at a time leaves them idle while a process starts); fails if any failed
par() {
  _k=$1; shift; _pids=""; _j=1
  while [ "$_j" -le "$_k" ]; do "$@" "$_j" "$_k" & _pids="$_pids $!"; _j=$((_j + 1)); done
  _bad=0
  for _p in $_pids; do wait "$_p" || _bad=1; done
  [ "$_bad" = 0 ]
}
# create_part PREFIX COUNT J K : CreateVolume PREFIX<i> (16 MiB, sparse) for i = J, J+K, ...
create_part() {
  _vi=$3
  while [ "$_vi" -le "$2" ]; do
    _v=$(printf '%s%03d' "$1" "$_vi")
    acall CreateVolume "{\"volume_id\":\"$_v\",\"capacity_bytes\":$((16 * MIB)),\"backend_type\":\"BACKEND_TYPE_FILE\",\"backend_params\":$(vol_bp "$_v"),\"fence\":$(tok "$_v" 1)}" \
      > /dev/null || { echo "@@ CreateVolume $_v failed" >&2; return 1; }
    _vi=$((_vi + $4))
  done
}
create() { par 4 create_part "$1" "$2" || fail "CreateVolume of $1001..$2"; }
# connect_one NQN : one controller
connect_one() {
  nvme_connect "$1" "$STORAGE_IP" "$PORT" \
    "ctrl_loss_tmo=$TMO,reconnect_delay=$RD,keep_alive_tmo=5,nr_io_queues=1" > /dev/null
}
# connect_part J K : the worker's controller of volume i, for i = J, J+K, ...
# (its own loop variable: nvme_connect sets _i)
connect_part() {
  _ci=$1
  while [ "$_ci" -le "$N" ]; do
    connect_one "$(vol_nqn "$(vid "$_ci")")" || { echo "@@ connect $(vid "$_ci") failed" >&2; return 1; }
    _ci=$((_ci + $2))
  done
}
# traced_syscalls REQUEST_FILE : syscalls of every agent thread during one ReconcileState
traced_syscalls() {
  on_storage 'rm -f /tmp/scale-strace.err
    strace -c -f -o /tmp/scale-strace.txt -p "$(cat "$(role_home)/roles/agent.pid")" > /dev/null 2> /tmp/scale-strace.err &
    echo $! > /tmp/scale-strace.pid'
  wait_for 60 "strace attached to the agent" grep -q attached /tmp/scale-strace.err
  _r=$("$E2E_BIN" call --timeout=600s "$AG" "$SVC/ReconcileState" - < "$1") || fail "traced ReconcileState: $_r"
  on_storage 'kill -INT "$(cat /tmp/scale-strace.pid)"; sleep 2; cat /tmp/scale-strace.txt' > /tmp/scale-strace-w.txt
  sed 's/^/@@strace /' /tmp/scale-strace-w.txt >&2
  _t=$(awk '$NF == "total" {print $4}' /tmp/scale-strace-w.txt)
  check "[ -n '$_t' ]" "strace summary of the agent"
  echo "$_t"
}

S=20
step "syscalls per export on the real configfs: ReconcileState of $S volumes minus one of none, under strace"
create fp/t "$S"
if on_storage 'command -v strace' > /dev/null; then
  N0=$N; N=$S; vid() { printf 'fp/t%03d' "$1"; }
  request > /tmp/scale-req-s.json
  N=$N0; vid() { printf 'fp/s%03d' "$1"; }
  echo '{"volumes":[],"complete":true}' > /tmp/scale-req-0.json
  ts=$(traced_syscalls /tmp/scale-req-s.json)
  t0=$(traced_syscalls /tmp/scale-req-0.json)
  check "[ -n '$ts' ] && [ -n '$t0' ]" "strace totals of both calls"
  echo "@@FIGURE syscalls per export on the real configfs: $(awk -v a="$ts" -v b="$t0" -v n="$S" 'BEGIN {printf "%.1f", (a - b) / n}') (ReconcileState of $S: $ts, of none: $t0)" >&2
else
  log "no strace in the image: syscalls per export not counted"
  acall_ok ReconcileState '{"volumes":[],"complete":true}' > /dev/null
fi
assert_not gate_pending

step "create $N volumes (16 MiB, sparse) and export them all in one complete ReconcileState"
t=$(up)
create fp/s "$N"
echo "@@TIME $N CreateVolume calls: $(since "$t")s" >&2
request > /tmp/scale-req.json
t=$(up)
R=$("$E2E_BIN" call --timeout=300s "$AG" "$SVC/ReconcileState" - < /tmp/scale-req.json) || fail "ReconcileState (first export): $R"
echo "@@FIGURE first export of $N in one ReconcileState: call $(since "$t")s; agent $(restore_secs | cut -d' ' -f3)s" >&2
assert_eq "$(echo "$R" | grep -o '"success":true' | wc -l)" "$N" "successful items of the first export"
assert_eq "$(on_storage 'ls /sys/kernel/config/nvmet/subsystems | wc -l')" "$((N + S))" "subsystems in configfs"
assert_eq "$(on_storage 'ls /sys/kernel/config/nvmet/ports/*/subsystems | wc -l')" "$((N + S))" "port links in configfs"

step "worker: connect $N nvme-tcp controllers (ctrl_loss_tmo=$TMO, reconnect_delay=$RD)"
modprobe nvme-tcp || fail "modprobe nvme-tcp"
t=$(up)
par 4 connect_part || fail "connect of the worker's controllers"
wait_for 120 "$N controllers live" all_live
echo "@@FIGURE connect of $N controllers: $(since "$t")s" >&2
V1=$(vid 1); VN=$(vid "$N")
for v in "$V1" "$VN"; do
  k=$(vol_key "$v"); u=$(id_uuid5 "uuid:$(vol_nqn "$v")/namespaces/1")
  wait_for 60 "namespace of $v" nvme_ns_present "$u"
  c=$(nvme_ctrl_by_nqn "$(vol_nqn "$v")")
  check_identity "$v" "$(nvme_ns_dev "$u")" "$c"
  eval "CTRL_$k=$c DEV_$k=$(nvme_ns_dev "$u")"
done
eval "d=\$DEV_$(vol_key "$V1")"
mkfs.ext4 -F -q "$d" || fail "mkfs.ext4 $d"
mkdir -p /mnt/s1 && mount -t ext4 "$d" /mnt/s1 || fail "mount $d"
S1=$(data_write /mnt/s1/f1 4)

step "storage reboot: one complete ReconcileState restores $N exports; every controller reconnects"
mark reboot
t=$(up)
storage_down
wait_for 60 "the worker notices the outage on every controller" none_live
storage_up
wait_for 60 "agent answers after the storage boot" agent_answers
tb=$(up)
assert gate_pending
assert_eq "$(on_storage 'ls /sys/kernel/config/nvmet/subsystems | wc -l')" 0 "subsystems while gated"
t2=$(up)
R=$("$E2E_BIN" call --timeout=300s "$AG" "$SVC/ReconcileState" - < /tmp/scale-req.json) || fail "restore ReconcileState: $R"
call=$(since "$t2")
assert_eq "$(echo "$R" | grep -o '"success":true' | wc -l)" "$N" "successful items of the restore"
assert_not gate_pending
wait_for "$TMO" "every worker controller live again" all_live
live=$(since "$t2")
set -- $(restore_secs)
assert_eq "$1 $2" "$N 0" "volumes and failed items in the agent's ReconcileState line"
echo "@@FIGURE restore of $N on the real configfs: agent ${3}s = $(per_export_ms "$3") ms/export; call ${call}s; restore call to every controller live ${live}s (reconnect_delay=$RD); agent answering to every controller live $(since "$tb")s" >&2
echo "@@TIME storage down to every controller live: $(since "$t")s" >&2
assert_eq "$(count_dmesg reboot 'identifiers changed|Removing ctrl')" 0 "identity changes or removed controllers"
for v in "$V1" "$VN"; do
  k=$(vol_key "$v"); eval "c=\$CTRL_$k d=\$DEV_$k"
  assert_eq "$(nvme_ctrl_state "$c")" live "nvme$c ($v) after the restore"
  check_identity "$v" "$d" "$c"
done
data_verify /mnt/s1/f1 "$S1" "$V1 f1 after the storage reboot"

step "cleanup (the controllers go with the VM: deleting 200 takes minutes)"
umount /mnt/s1
role_stop agent
scenario_end
