# nvmet.sh - kernel NVMe-oF target through configfs (storage side). POSIX sh.
#
# Order rules (Linux 6.1 drivers/nvme/target/configfs.c):
#  * device_uuid/device_nguid must be written before enable (EBUSY after)
#  * the first subsystem link into ports/N/subsystems enables the port, and the
#    listen socket is created in the network namespace of the writing process
#    (so in topology a, call nvmet_link through on_storage)
#  * unlinking drops that subsystem's controllers on the port; unlinking the
#    last one closes the listener (hosts then get ECONNREFUSED)

NVMET=/sys/kernel/config/nvmet

nvmet_load() {
  for _m in nvmet nvmet-tcp; do modprobe "$_m" || fail "modprobe $_m"; done
  [ -d "$NVMET" ] || fail "nvmet configfs root $NVMET missing"
}
# nvmet_unload : modules out (all configfs objects must be gone: nvmet_clear)
# (rmmod, not modprobe -r: busybox's also tries to remove in-use configfs)
nvmet_unload() {
  poll 15 sh_true '! lsmod | grep -q "^nvmet_tcp " || rmmod nvmet_tcp 2>/dev/null' &&
    poll 15 sh_true '! lsmod | grep -q "^nvmet " || rmmod nvmet 2>/dev/null' ||
    fail "cannot unload nvmet modules: $(lsmod | grep nvmet | tr '\n' ' ')"
}

# cfg_write VALUE FILE : write, then read back and compare (like our exporter)
cfg_write() {
  printf '%s' "$1" > "$2" || fail "configfs: cannot write '$1' to $2"
  _got=$(tr -d '\000\n' < "$2")
  [ "$_got" = "$1" ] || fail "configfs: $2 reads back '$_got' after writing '$1'"
}
# cfg_read FILE_UNDER_NVMET : e.g. cfg_read "subsystems/$NQN/namespaces/1/enable"
cfg_read() { sysfs_read "$NVMET/$1"; }

# nvmet_subsys NQN HOSTNQN|any
nvmet_subsys() {
  [ -d "$NVMET/subsystems/$1" ] || mkdir "$NVMET/subsystems/$1" || fail "mkdir subsystem $1"
  if [ "$2" = any ]; then
    cfg_write 1 "$NVMET/subsystems/$1/attr_allow_any_host"
  else
    cfg_write 0 "$NVMET/subsystems/$1/attr_allow_any_host"
    [ -d "$NVMET/hosts/$2" ] || mkdir "$NVMET/hosts/$2" || fail "mkdir host $2"
    [ -e "$NVMET/subsystems/$1/allowed_hosts/$2" ] ||
      ln -s "$NVMET/hosts/$2" "$NVMET/subsystems/$1/allowed_hosts/$2" || fail "allow host $2 on $1"
  fi
}
# nvmet_ns NQN NSID PATH UUID NGUID : PATH is a block device or a regular file
nvmet_ns() {
  _d=$NVMET/subsystems/$1/namespaces/$2
  [ -d "$_d" ] || mkdir "$_d" || fail "mkdir namespace $2 of $1"
  cfg_write "$3" "$_d/device_path"
  cfg_write "$4" "$_d/device_uuid"
  printf '%s' "$5" > "$_d/device_nguid" || fail "configfs: write nguid $5"
  cfg_write 1 "$_d/enable"
}
# nvmet_port ID TRADDR TRSVCID
nvmet_port() {
  _d=$NVMET/ports/$1
  [ -d "$_d" ] || mkdir "$_d" || fail "mkdir port $1"
  [ -n "$(ls "$_d/subsystems")" ] && return 0   # enabled ports are read-only
  cfg_write tcp "$_d/addr_trtype"
  cfg_write ipv4 "$_d/addr_adrfam"
  cfg_write "$2" "$_d/addr_traddr"
  cfg_write "$3" "$_d/addr_trsvcid"
}
nvmet_link() {
  [ -e "$NVMET/ports/$1/subsystems/$2" ] ||
    ln -s "$NVMET/subsystems/$2" "$NVMET/ports/$1/subsystems/$2" || fail "link $2 to port $1"
}
nvmet_unlink() { rm "$NVMET/ports/$1/subsystems/$2" || fail "unlink $2 from port $1"; }

# nvmet_clear : remove every port, subsystem and host (what a reboot loses)
nvmet_clear() {
  [ -d "$NVMET" ] || return 0
  for _l in "$NVMET"/ports/*/subsystems/*; do [ -L "$_l" ] && rm "$_l"; done
  for _p in "$NVMET"/ports/*; do [ -d "$_p" ] && rmdir "$_p"; done
  for _s in "$NVMET"/subsystems/*; do
    [ -d "$_s" ] || continue
    for _h in "$_s"/allowed_hosts/*; do [ -L "$_h" ] && rm "$_h"; done
    for _n in "$_s"/namespaces/*; do [ -d "$_n" ] && rmdir "$_n"; done
    rmdir "$_s"
  done
  for _h in "$NVMET"/hosts/*; do [ -d "$_h" ] && rmdir "$_h"; done
  return 0
}

# ---- recorded exports: what the test bed restores after a storage (re)boot ----------
# (until a scenario runs our agent, which restores from its own state)
E2E_EXPORTS=$E2E_STATE/e2e/exports

# nvmet_export NQN NSID PATH UUID NGUID HOSTNQN|any PORTID TRADDR TRSVCID
# Configure the export now and record it on the storage state (disk in b).
nvmet_export() {
  [ $# -eq 9 ] || fail "nvmet_export needs 9 arguments, got $#: $*"
  _nvmet_apply "$@"
  mkdir -p "${E2E_EXPORTS%/*}"
  { grep -v "^$1 $2 " "$E2E_EXPORTS" 2>/dev/null || true; echo "$*"; } > "$E2E_EXPORTS.tmp"
  mv "$E2E_EXPORTS.tmp" "$E2E_EXPORTS"; state_sync
}
_nvmet_apply() {
  nvmet_subsys "$1" "$6"
  nvmet_ns "$1" "$2" "$3" "$4" "$5"
  nvmet_port "$7" "$8" "$9"
  nvmet_link "$7" "$1"
}
# nvmet_restore : replay the recorded exports
nvmet_restore() {
  [ -s "$E2E_EXPORTS" ] || return 0
  while read -r _e; do
    # shellcheck disable=SC2086
    [ -n "$_e" ] && _nvmet_apply $_e
  done < "$E2E_EXPORTS"
  echo "@@ [$(up)] nvmet: restored $(wc -l < "$E2E_EXPORTS") export(s) from $E2E_EXPORTS" >&2
}
# nvmet_unexport_all : clear configfs and forget the records
nvmet_unexport_all() { nvmet_clear; rm -f "$E2E_EXPORTS"; }

# backing_file PATH MIB : a sparse file for a file-backed namespace
backing_file() {
  mkdir -p "${1%/*}" && truncate -s "${2}M" "$1" || fail "backing_file $1"
}
