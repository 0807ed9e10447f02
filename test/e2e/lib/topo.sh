# topo.sh - the two topologies behind one set of functions. POSIX sh.
#
#  a) one VM. The storage side lives in network namespace "storage"
#     (e2e-s, 10.77.0.2) joined by a veth pair to the worker side in the root
#     namespace (e2e-w, 10.77.0.1). A storage reboot is simulated: roles
#     stopped, nvmet torn down and its modules unloaded and loaded again.
#  b) two VMs joined by a qemu UDP link on host 127.0.0.1 (eth0 in each,
#     same addresses). The storage VM keeps $E2E_STATE on a persistent disk
#     image (/dev/vda) and is really powered off and booted again by the host
#     (the worker asks through its second serial port, /dev/ttyS1 = fd 7).
#     on_storage runs scripts there through a tiny nc-based RPC (port 7070).
#
# Scenarios run on the worker side and stay topology-agnostic by using
# on_storage/on_worker, storage_down/storage_up/storage_reboot, link_cut/link_heal.

STORAGE_IP=10.77.0.2
WORKER_IP=10.77.0.1
E2E_NETNS=storage
E2E_RPC_PORT=7070

ip()      { /usr/sbin/ip "$@"; }        # iproute2: busybox ash prefers its applets
tc()      { /usr/sbin/tc "$@"; }
blkid()   { /usr/sbin/blkid "$@"; }
losetup() { /usr/sbin/losetup "$@"; }

topo() { echo "${E2E_TOPO:-a}"; }

# ---- setup (called by /init) ----------------------------------------------------
topo_a_setup() {
  modprobe veth || return 1
  ip netns add "$E2E_NETNS" || return 1
  ip link add e2e-w type veth peer name e2e-s || return 1
  ip link set e2e-s netns "$E2E_NETNS" || return 1
  ip addr add "$WORKER_IP/24" dev e2e-w && ip link set e2e-w up || return 1
  ip -n "$E2E_NETNS" link set lo up || return 1
  ip -n "$E2E_NETNS" addr add "$STORAGE_IP/24" dev e2e-s &&
    ip -n "$E2E_NETNS" link set e2e-s up || return 1
  poll 10 ping -c1 -W1 "$STORAGE_IP" >/dev/null 2>&1 || { echo "@@ no ping across veth" >&2; return 1; }
  # the storage "disk": ext4 on a loop device (nvmet opens files O_DIRECT,
  # which tmpfs refuses); survives simulated reboots like the disk in b
  modprobe loop && modprobe ext4 || return 1
  truncate -s 1G /tmp/storage-disk.img && _ld=$(losetup -f --show /tmp/storage-disk.img) || return 1
  mkfs.ext4 -q -F -L e2e-storage "$_ld" || return 1
  mkdir -p "$E2E_STATE" && mount -t ext4 "$_ld" "$E2E_STATE" || return 1
  echo "@@ [$(up)] topology a: netns $E2E_NETNS $STORAGE_IP <-veth-> $WORKER_IP" >&2
}

# topo_b_net_setup worker|storage : eth0 on the UDP link
topo_b_net_setup() {
  modprobe virtio_pci && modprobe virtio_net || return 1
  poll 10 [ -e /sys/class/net/eth0 ] || { echo "@@ no eth0" >&2; return 1; }
  if [ "$1" = storage ]; then _ip=$STORAGE_IP; else _ip=$WORKER_IP; fi
  ip addr add "$_ip/24" dev eth0 && ip link set eth0 up || return 1
  if [ "$1" = worker ]; then
    # control channel to the host: second serial port, raw, kept open as fd 7
    exec 7<>/dev/ttyS1 || return 1
    stty raw -echo <&7 || return 1
  fi
  echo "@@ [$(up)] topology b: $1 eth0 $_ip" >&2
}

# ---- running things on a side ---------------------------------------------------
# on_storage SCRIPT [TIMEOUT_S] : run SCRIPT (sh, library loaded) on the storage
# side; its stdout is ours, its stderr is our stderr, its status is returned.
on_storage() {
  if [ "$(topo)" = a ]; then
    nsenter --net="/run/netns/$E2E_NETNS" sh -c '. /e2e/lib/e2e.sh; E2E_SIDE=storage; '"$1"
  else
    _rpc "$1" "${2:-120}"
  fi
}
# on_worker SCRIPT : same, on the worker side (a fresh shell with the library)
on_worker() { sh -c '. /e2e/lib/e2e.sh; E2E_SIDE=worker; '"$1"; }

_rpc() {
  _ro=/tmp/rpc-out.$$
  # the storage VM's shell does not inherit our environment: forward ours
  _rn=25
  while :; do
    printf 'E2E_SCENARIO=%s E2E_BIN=%s\n%s\n' "$(shquote "$E2E_SCENARIO")" "$(shquote "$E2E_BIN")" "$1" |
      timeout "$2" nc "$STORAGE_IP" "$E2E_RPC_PORT" > "$_ro" 2> "$_ro.err"
    # refused: the server is between two connections (or not up yet)
    grep -q refused "$_ro.err" && [ ! -s "$_ro" ] && [ "$_rn" -gt 0 ] || break
    _rn=$((_rn - 1)); sleep 0.2
  done
  rm -f "$_ro.err"
  _rc=$(sed -n 's/^@@RPC-RC=//p' "$_ro" | tail -1)
  grep -v -e '^@@RPC-RC=' -e '^@@RPC-ERR ' "$_ro" || true
  sed -n 's/^@@RPC-ERR //p' "$_ro" >&2
  rm -f "$_ro"
  if [ -z "$_rc" ]; then
    echo "@@ [$(up)] on_storage: no answer from $STORAGE_IP:$E2E_RPC_PORT" >&2
    return 255
  fi
  return "$_rc"
}

# storage_ready : the storage side answers (always true in topology a)
storage_ready() { [ "$(topo)" = a ] || on_storage true 5 2>/dev/null; }
storage_wait_ready() { wait_for "${1:-120}" "storage side answers" storage_ready; }

# ---- host control channel (topology b, worker) ------------------------------------
# host_ctl CMD [TIMEOUT_S] : ask run.sh on the host; returns its status.
# Commands: storage-off (power cut: qemu killed), storage-kill (the same, SIGKILL at once),
#           storage-on (boot again),
#           storage-state (prints running|off)
host_ctl() {
  [ "$(topo)" = b ] || fail "host_ctl needs topology b"
  _id=$(( $(cat /run/e2e/ctl.id 2>/dev/null || echo 0) + 1 )); echo "$_id" > /run/e2e/ctl.id
  printf '@@CTL %s %s\n' "$_id" "$1" >&7
  _end=$(( $(cut -d. -f1 /proc/uptime) + ${2:-60} ))
  while [ "$(cut -d. -f1 /proc/uptime)" -lt "$_end" ]; do
    IFS= read -r -t 5 _line <&7 || continue
    _line=$(printf '%s' "$_line" | tr -d '\r')
    case $_line in
      "ACK $_id "*) _rest=${_line#"ACK $_id "}; _hrc=${_rest%% *}
                    [ "$_rest" = "$_hrc" ] || echo "${_rest#* }"
                    return "$_hrc" ;;
    esac
  done
  fail "host_ctl '$1': no answer from the host within ${2:-60}s"
}

# ---- the worker's own power cut (b, header "# e2e-worker-disk: yes") ----------------------
# worker_disk_setup (worker's init): its disk (/dev/vda) at $E2E_STATE, /etc/nvme kept on it
# (the host identity outlives a reboot, as on a real worker), the boot counted on it
worker_disk_setup() {
  modprobe virtio_blk; modprobe ext4
  poll 10 [ -b /dev/vda ] || { echo "@@ worker disk /dev/vda missing" >&2; return 1; }
  mount -t ext4 /dev/vda "$E2E_STATE" || return 1
  mkdir -p "$E2E_STATE/e2e" "$E2E_STATE/etc-nvme" /etc/nvme || return 1
  mount --bind "$E2E_STATE/etc-nvme" /etc/nvme || return 1
  _b=$(( $(cat "$E2E_STATE/e2e/worker-boots" 2>/dev/null || echo 0) + 1 ))
  echo "$_b" > "$E2E_STATE/e2e/worker-boots.tmp" &&
    mv "$E2E_STATE/e2e/worker-boots.tmp" "$E2E_STATE/e2e/worker-boots" && sync -f "$E2E_STATE" ||
    return 1
  echo "@@ [$(up)] worker disk at $E2E_STATE, boot #$_b" >&2
}
worker_boot_count() { cat "$E2E_STATE/e2e/worker-boots" 2>/dev/null || echo 0; }
# worker_power_cut : the host SIGKILLs this VM's qemu (no shutdown, no sync) and boots it again
# from its disk; the scenario then runs again from its start (worker_boot_count tells which
# boot it is).  Never returns.
worker_power_cut() {
  [ "$(topo)" = b ] || fail "worker_power_cut needs topology b"
  [ -n "${E2E_WORKER_DISK:-}" ] || fail "worker_power_cut needs the header e2e-worker-disk: yes"
  log "worker POWER CUT (asking the host to SIGKILL this VM)"
  _id=$(( $(cat /run/e2e/ctl.id 2>/dev/null || echo 0) + 1 )); echo "$_id" > /run/e2e/ctl.id
  printf '@@CTL %s worker-kill\n' "$_id" >&7
  sleep 120
  fail "worker_power_cut: still running 120 s after asking the host"
}

# ---- storage outages ----------------------------------------------------------------
# storage_down [--clean] : the storage node goes away.
#   a: stop storage roles (they stay enabled), tear nvmet down, unload modules
#   b: real power-off of the storage VM (qemu killed; --clean syncs first)
storage_down() {
  if [ "$(topo)" = a ]; then
    on_storage 'storage_sim_shutdown' || fail "storage_down: simulated shutdown failed"
  else
    [ "${1:-}" != --clean ] || on_storage 'state_sync' 30 || true
    host_ctl storage-off 60 >/dev/null || fail "storage_down: host could not power off the storage VM"
  fi
  log "storage side DOWN (topology $(topo))"
}
# storage_power_cut (topology b): the storage VM's qemu is SIGKILLed at once, in the middle of
# whatever it does (storage_down sends SIGTERM first and waits up to 10 s)
storage_power_cut() {
  [ "$(topo)" = b ] || fail "storage_power_cut needs topology b"
  host_ctl storage-kill 60 >/dev/null || fail "storage_power_cut: host could not kill the storage VM"
  log "storage side POWER CUT (qemu SIGKILLed)"
}
# storage_up [TIMEOUT_S] : the storage node comes back and restores its state
#   a: run storage_on_boot (modules loaded, enabled roles restarted, exports restored)
#   b: boot the storage VM again (its init runs storage_on_boot) and wait for it
storage_up() {
  _t=$(up)
  if [ "$(topo)" = a ]; then
    on_storage 'storage_on_boot' || fail "storage_up: simulated boot failed"
  else
    host_ctl storage-on 60 >/dev/null || fail "storage_up: host could not boot the storage VM"
    storage_wait_ready "${1:-180}"
  fi
  log "storage side UP after $(since "$_t")s (boot #$(storage_boot_count))"
}
# storage_reboot [DOWN_S] : down, stay down DOWN_S seconds (default 0), up
storage_reboot() {
  storage_down
  [ "${1:-0}" = 0 ] || sleep "$1"
  storage_up
}
storage_boot_count() { on_storage 'cat "$E2E_STATE/e2e/boots" 2>/dev/null || echo 0'; }

# link_cut / link_heal : a network partition between the sides.
#   a: the storage end of the veth goes down (the worker sees no carrier)
#   b: netem drops every packet the worker sends; nothing local fails, the
#      worker just gets no answers (like a dead switch port)
link_cut() {
  if [ "$(topo)" = a ]; then ip -n "$E2E_NETNS" link set e2e-s down
  else modprobe sch_netem && tc qdisc add dev eth0 root netem loss 100% || fail "link_cut: netem"; fi
  log "link CUT"
}
link_heal() {
  if [ "$(topo)" = a ]; then ip -n "$E2E_NETNS" link set e2e-s up
  else tc qdisc del dev eth0 root || fail "link_heal: netem"; fi
  log "link HEALED"
}

# ---- storage side ------------------------------------------------------------------
# storage_on_boot : what happens when the storage node (re)boots: count the
# boot, load nvmet (unless the scenario's header says "# e2e-nvmet: scenario":
# E2E_NVMET, then its boot hook does), run $E2E_STATE/e2e/boot-hook if any,
# restart enabled roles, and - when no agent role is enabled - replay the
# recorded nvmet exports (standing in for the agent's own restore).
storage_on_boot() {
  mkdir -p "$E2E_STATE/e2e"
  _b=$(( $(cat "$E2E_STATE/e2e/boots" 2>/dev/null || echo 0) + 1 ))
  echo "$_b" > "$E2E_STATE/e2e/boots.tmp" && mv "$E2E_STATE/e2e/boots.tmp" "$E2E_STATE/e2e/boots"
  state_sync
  [ "${E2E_NVMET:-harness}" = scenario ] || nvmet_load
  # the node's own boot work before the roles start (a scenario may record it,
  # e.g. attaching a disk); a failing hook is reported, the boot goes on
  if [ -f "$E2E_STATE/e2e/boot-hook" ]; then
    ( . "$E2E_STATE/e2e/boot-hook" ) >&2 || echo "@@ [$(up)] storage boot hook failed" >&2
  fi
  rm -f "$(role_home)"/roles/*.pid   # nothing runs after a boot; pids are stale
  roles_restart_enabled
  if ! role_enabled agent; then nvmet_restore; fi
  echo "@@ [$(up)] storage boot #$_b done" >&2
}
# storage_sim_shutdown (topology a, storage side): what a power-off loses
storage_sim_shutdown() {
  roles_stop_all
  nvmet_clear
  nvmet_unload
}

# storage_vm_main (topology b, storage VM's init): network, persistent disk,
# storage_on_boot, then serve on_storage requests until powered off.
storage_vm_main() {
  export E2E_SIDE=storage
  topo_b_net_setup storage || { echo "@@E2E-FAIL storage network setup failed"; return 1; }
  modprobe virtio_blk; modprobe ext4
  poll 10 [ -b /dev/vda ] || { echo "@@E2E-FAIL storage disk /dev/vda missing"; return 1; }
  mount -t ext4 /dev/vda "$E2E_STATE" || { echo "@@E2E-FAIL cannot mount /dev/vda"; return 1; }
  # in a subshell: a failing hook must not exit PID 1 (kernel panic)
  ( storage_on_boot ) || echo "@@E2E-FAIL [storage] storage_on_boot failed (serving anyway)"
  echo "@@E2E-STORAGE-READY uptime=$(up) boot=$(cat "$E2E_STATE/e2e/boots")"
  # One request at a time. Not `nc -ll`: its forking server sets SIGCHLD to
  # SIG_IGN, which every process it starts (our roles included) inherits,
  # breaking their waitpid(). Clients retry while the port is between two nc.
  while :; do nc -l -p "$E2E_RPC_PORT" -e /e2e/vm/rpcd || sleep 0.2; done
}
