# nvme.sh - kernel NVMe/TCP host (worker side). POSIX sh.
# Devices are found by subsystem NQN and namespace uuid, never by name.
# With NVME_MULTIPATH=y, /dev/nvmeXnY is the multipath head; X is the
# subsystem instance, which need not equal the controller instance.

E2E_HOSTNQN=${E2E_HOSTNQN:-nqn.2014-08.org.nvmexpress:uuid:0e2e0e2e-0000-4000-8000-000000000001}

# nvme_connect NQN TRADDR TRSVCID [EXTRA_OPTS] : connect through /dev/nvme-fabrics
# (as nvme-cli does: write the options, read the answer on the same fd).
# Prints the controller instance number.
nvme_connect() {
  modprobe nvme-tcp || fail "modprobe nvme-tcp"
  _o="transport=tcp,traddr=$2,trsvcid=$3,nqn=$1,hostnqn=$E2E_HOSTNQN${4:+,$4}"
  _r=$(exec 3<>/dev/nvme-fabrics && printf '%s' "$_o" >&3 && read -r _x <&3 && echo "$_x") ||
    return 1
  _i=$(echo "$_r" | sed -n 's/^instance=\([0-9]*\),.*/\1/p')
  [ -n "$_i" ] || return 1
  echo "@@ [$(up)] connected nvme$_i: $_o -> $_r" >&2
  echo "$_i"
}
# nvme_ctrl_state N : live|connecting|resetting|deleting|... or "gone"
nvme_ctrl_state() { cat "/sys/class/nvme/nvme$1/state" 2>/dev/null || echo gone; }
nvme_ctrl_is()    { [ "$(nvme_ctrl_state "$1")" = "$2" ]; }
nvme_ctrl_isnt()  { [ "$(nvme_ctrl_state "$1")" != "$2" ]; }
nvme_ctrl_gone()  { [ ! -e "/sys/class/nvme/nvme$1" ]; }
# nvme_ctrl_by_nqn NQN : controller instances for the subsystem (one a line)
nvme_ctrl_by_nqn() {
  for _c in /sys/class/nvme/nvme*; do
    [ "$(sysfs_try "$_c/subsysnqn")" = "$1" ] && echo "${_c##*/nvme}"
  done
  return 0
}
# nvme_ns_dev UUID : /dev/nvmeXnY whose namespace uuid is UUID (empty if none)
nvme_ns_dev() {
  for _b in /sys/block/nvme*n*; do
    # skip per-path nodes (nvmeXcYnZ, hidden=1: no /dev node under multipath)
    case ${_b##*/} in nvme*c*n*) continue;; esac
    [ -e "$_b/uuid" ] || continue
    if [ "$(sysfs_try "$_b/uuid")" = "$1" ]; then echo "/dev/${_b##*/}"; return 0; fi
  done
  return 1
}
nvme_ns_present() { nvme_ns_dev "$1" >/dev/null && [ -b "$(nvme_ns_dev "$1")" ]; }
# nvme_disconnect N : delete the controller and wait until it is gone
nvme_disconnect() {
  [ -e "/sys/class/nvme/nvme$1" ] || return 0
  echo 1 > "/sys/class/nvme/nvme$1/delete_controller" 2>/dev/null || true
  wait_for 30 "nvme$1 deleted" nvme_ctrl_gone "$1"
}
nvme_disconnect_all() { for _c in /sys/class/nvme/nvme*; do [ -e "$_c" ] && nvme_disconnect "${_c##*/nvme}"; done; return 0; }
