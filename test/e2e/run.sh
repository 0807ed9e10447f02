#!/bin/bash
# Real-kernel e2e test bed: boot Debian's own kernel under qemu (TCG, no KVM)
# and run scenarios from test/e2e/scenarios/.
#
#   test/e2e/run.sh                 every fast scenario ("# e2e-fast: yes")
#   test/e2e/run.sh smoke smoke2    the named ones
#   E2E_SHELL=a test/e2e/run.sh     interactive VM, topology a (Ctrl-A x quits)
#
# Env: E2E_OUT (artefacts, default build/e2e), E2E_BIN (default build/pillar-csi),
#      E2E_KEEP_GOING=0 (stop at the first failure), E2E_VERBOSE=1 (echo serial),
#      E2E_FOLLOW=ERE (topology a: print the matching serial lines live, e.g.
#      '@@(SAY|E2E-FAIL)' for `make demo`), E2E_BACKEND=file|lvm|zfs (the agent's
#      backend in scenarios with "# e2e-backends:", i.e. demo: `make demo BACKEND=`).
# Prints PASS/FAIL per scenario with timings, the failing lines on failure,
# and ends with "e2e: N passed, M failed". Exit status 0 only if all passed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export E2E_OUT=${E2E_OUT:-$ROOT/build/e2e}
LOGS=$E2E_OUT/logs
mkdir -p "$LOGS"
T_STAGE=$EPOCHREALTIME

secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b-a}'; }
hdr() {  # hdr FILE KEY DEFAULT : "# e2e-KEY: value" from a scenario's header
  local v; v=$(sed -n "s/^# e2e-$2: *//p" "$1" | head -1); echo "${v:-$3}"
}

# nvmet_by NAME : who loads nvmet and nvmet_tcp on the scenario's storage side at each boot:
# "harness" (storage_on_boot, the default) or "scenario" ("# e2e-nvmet: scenario": its own boot
# hook does, e.g. image's run of the chart's init container)
nvmet_by() {
  if [ -f "$HERE/scenarios/$1.sh" ]; then hdr "$HERE/scenarios/$1.sh" nvmet harness; else echo harness; fi
}

# ---- host packages, kernel, images ----------------------------------------------
if [ -z "${E2E_SKIP_DEPS:-}" ]; then
  bash "$HERE/deps.sh" || { echo "e2e: installing host packages failed"; echo "e2e: 0 passed, 1 failed"; exit 1; }
fi
if [ $# -eq 0 ] && [ -z "${E2E_SHELL:-}" ]; then   # fast scenarios, by "# e2e-order: N" (default 50), then name
  set -- $(for f in "$HERE"/scenarios/*.sh; do
             [ "$(hdr "$f" fast no)" = yes ] && echo "$(hdr "$f" order 50) $(basename "$f" .sh)"
           done | sort -k1,1n -k2 | cut -d' ' -f2)
fi
# "# e2e-zfs: yes": the scenario's storage side gets OpenZFS (built once and
# cached outside the clone by zfs-build.sh) and a virtual disk for the pool
# (or "# e2e-backends: ... zfs ..." and E2E_BACKEND=zfs, as `make demo BACKEND=zfs`)
needs_zfs() {
  local f=$HERE/scenarios/$1.sh
  [ -f "$f" ] || return 1
  [ "$(hdr "$f" zfs no)" = yes ] ||
    { [ "${E2E_BACKEND:-}" = zfs ] && [[ " $(hdr "$f" backends "") " = *" zfs "* ]]; }
}
E2E_ZFS=${E2E_ZFS:-}
for name in "$@"; do needs_zfs "$name" && E2E_ZFS=1; done
export E2E_ZFS
# The kernel series a scenario boots: E2E_KERNEL for every scenario, else its header
# "# e2e-kernel: backports" (bookworm-backports' 6.12, with NVMe authentication), else the
# default (bookworm's linux-image-amd64). build.sh runs once per series in use; ZFS is built
# for the default series only.
kernel_of() {
  if [ -n "${E2E_KERNEL:-}" ]; then echo "$E2E_KERNEL"; return; fi
  local f=$HERE/scenarios/$1.sh
  if [ -f "$f" ]; then hdr "$f" kernel default; else echo default; fi
}
declare -A K_KV K_VMLINUX K_INITRD K_INITRD_ZFS
T_BUILD=$EPOCHREALTIME
KERNELS=$(if [ $# -eq 0 ]; then echo "${E2E_KERNEL:-default}"; fi
          for name in "$@"; do kernel_of "$name"; done | sort -u)
for k in $KERNELS; do
  zfs=""; [ "$k" = default ] && zfs=$E2E_ZFS
  if ! BUILD_OUT=$(E2E_KERNEL=$k E2E_ZFS=$zfs bash "$HERE/build.sh"); then
    echo "e2e: building the VM images failed (kernel series $k)"; echo "e2e: 0 passed, 1 failed"; exit 1
  fi
  eval "$BUILD_OUT"   # KV VMLINUX INITRD INITRD_ZFS
  K_KV[$k]=$KV; K_VMLINUX[$k]=$VMLINUX; K_INITRD[$k]=$INITRD; K_INITRD_ZFS[$k]=$INITRD_ZFS
  echo "e2e: kernel $KV ($k), images ready in $(secs "$T_BUILD" "$EPOCHREALTIME")s"
done
# use_kernel SERIES : the kernel and initramfs qemu_cmd boots from now on
use_kernel() {
  KV=${K_KV[$1]}; VMLINUX=${K_VMLINUX[$1]}; INITRD=${K_INITRD[$1]}; INITRD_ZFS=${K_INITRD_ZFS[$1]}
}
use_kernel "$(echo "$KERNELS" | head -1)"
QBOOT=/usr/share/qemu/qboot.rom

# qemu_cmd NAME SMP MEM APPEND... : the common command line (into array QEMU)
# (with ZFS_VM=1: the initramfs with OpenZFS).  no_timer_check: under TCG on a busy host the
# kernel's early check of the IO-APIC timer can miss its window and panic ("IO-APIC + timer
# doesn't work"); the emulated timer is known good, so the check is skipped.
qemu_cmd() {
  local initrd=$INITRD
  [ -z "${ZFS_VM:-}" ] || initrd=$INITRD_ZFS
  QEMU=(qemu-system-x86_64 -name "$1" -machine q35 -cpu max -smp "$2" -m "$3"
        -accel tcg,thread=multi -display none -monitor none -no-reboot -nic none
        -kernel "$VMLINUX" -initrd "$initrd"
        -append "console=ttyS0 quiet panic=-1 no_timer_check ${E2E_BACKEND:+E2E_BACKEND=$E2E_BACKEND }${*:4}"
        -serial "${E2E_SERIAL:-stdio}")
  [ -f "$QBOOT" ] && QEMU+=(-bios "$QBOOT")   # faster than SeaBIOS, no option ROMs
  return 0
}
# zfs_disk DIR : (ZFS_VM=1) a fresh 512 MiB virtual disk for the pool, serial
# e2e-zfs (the VM finds it by that serial); appended to QEMU
zfs_disk() {
  [ -n "${ZFS_VM:-}" ] || return 0
  rm -f "$1/zfs.img"; truncate -s 512M "$1/zfs.img"
  QEMU+=(-drive "file=$1/zfs.img,format=raw,if=none,id=zdisk,cache=writeback"
         -device virtio-blk-pci,drive=zdisk,serial=e2e-zfs)
}
# image_disk DIR NAME : ("# e2e-image: yes") the unpacked container image of `make image`
# ($E2E_IMAGE_ROOT, default build/image/root) as an ext4 disk, serial e2e-image, opened with
# snapshot=on so the VM's writes never reach the file; appended to QEMU
image_disk() {
  [ "$(hdr "$HERE/scenarios/$2.sh" image no)" = yes ] || return 0
  local root=${E2E_IMAGE_ROOT:-$ROOT/build/image/root}
  [ -x "$root/usr/bin/pillar-csi" ] || { echo "@@HOST no unpacked image in $root (make image-check)"; return 1; }
  local mib=$(( $(du -sm "$root" | cut -f1) * 5 / 4 + 64 ))
  rm -f "$1/image.ext4"
  mkfs.ext4 -q -F -L e2e-image -d "$root" "$1/image.ext4" "${mib}M" || { echo "@@HOST mkfs.ext4 -d $root failed"; return 1; }
  QEMU+=(-drive "file=$1/image.ext4,format=raw,if=none,id=idisk,snapshot=on"
         -device virtio-blk-pci,drive=idisk,serial=e2e-image)
}
# kube_host DIR NAME : ("# e2e-kube: yes", topology a) the test API server on real etcd
# (test/kube) for the VM, started in the background by kube-host.py (log DIR/kube/serve.log),
# reached through a second NIC on qemu's user-mode network with restrict=on: the guest
# reaches nothing but two forwards to 10.0.2.100, the API server (:6443, one relay process per
# connection) and kube-host.py's rpc (:7071: its kubeconfigs, kubectl on the host); appended
# to QEMU. The RBAC is the chart's own (test/interop/leader/rbac.sh), rendered with the values
# of the header "# e2e-kube-values: YAML" if any (e.g. "dhchap: {enabled: true}"). kube_host_stop
# ends it.
KUBE_PID=""
kube_host() {
  [ "$(hdr "$HERE/scenarios/$2.sh" kube no)" = yes ] || return 0
  local k=$1/kube rbac py="/usr/bin/python3 -I $HERE/kube-host.py"
  rm -rf "$k"; mkdir -p "$k"
  command -v etcd >/dev/null && command -v kubectl >/dev/null ||
    { echo "@@HOST scenario $2 needs etcd and kubectl on the host (make deps installs them)"; return 1; }
  rbac=$(BUILD=$ROOT/build sh "$ROOT/test/interop/leader/rbac.sh" "$ROOT" "$k" \
           "$(hdr "$HERE/scenarios/$2.sh" kube-values "")" 2>> "$k/serve.log") ||
    { echo "@@HOST rendering the chart's RBAC failed (see $k/serve.log)"; return 1; }
  PILLAR_KUBE_REQUEST_LOG=$k/requests.log \
    /usr/bin/python3 "$HERE/kube-host.py" serve "$k" "$rbac" >> "$k/serve.log" 2>&1 &
  KUBE_PID=$!
  QEMU+=(-netdev "user,id=k0,restrict=on,net=10.0.2.0/24,guestfwd=tcp:10.0.2.100:6443-cmd:$py relay $k,guestfwd=tcp:10.0.2.100:7071-cmd:$py rpc $k"
         -device virtio-net-pci,netdev=k0,mac=52:54:00:e2:e0:0a,romfile=)
}
kube_host_stop() {
  [ -n "$KUBE_PID" ] || return 0
  kill -TERM "$KUBE_PID" 2>/dev/null; wait "$KUBE_PID" 2>/dev/null; KUBE_PID=""
}
# stamp T0 : prefix each line with seconds since T0 (host clock)
stamp() {
  local line t0=${1/./}
  while IFS= read -r line; do
    printf '[%8.3f] %s\n' "$(( ${EPOCHREALTIME/./} - t0 ))e-6" "${line%$'\r'}"
  done
}
# boot_time LOG : host seconds from qemu start to the first @@E2E-BOOTED
boot_time() { grep -a -m1 '@@E2E-BOOTED' "$1" | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'; }

# boot_panic LOG... : a VM's kernel panicked and the first log (the scenario's) has no step yet
boot_panic() {
  grep -aq 'Kernel panic' "$@" && ! grep -aq '@@STEP' "$1"
}

# follow LOG : append stdin to LOG; with E2E_FOLLOW (an ERE) also print the
# matching lines live, "[seconds] text" ("@@SAY " and "@@STEP [uptime] " dropped)
follow() {
  if [ -z "${E2E_FOLLOW:-}" ]; then cat >> "$1"; return; fi
  tee -a "$1" | { grep -a --line-buffered -E -- "$E2E_FOLLOW" |
    sed -u -E 's/^\[ *([0-9.]+)\] /[\1s] /; s/@@SAY //; s/@@STEP \[[0-9.]+\] /== /'; true; }
}

# ---- topology a: one VM ---------------------------------------------------------------
run_a() {  # run_a NAME TIMEOUT -> log in $LOGS/NAME.log
  local name=$1 tmo=$2 log=$LOGS/$1.log t0=$EPOCHREALTIME
  qemu_cmd "e2e-$name" 2 1024 "E2E_ROLE=single E2E_TOPO=a E2E_SCENARIO=$name E2E_NVMET=$(nvmet_by "$name")"
  mkdir -p "$E2E_OUT/run/$name"; zfs_disk "$E2E_OUT/run/$name"
  : > "$log"
  image_disk "$E2E_OUT/run/$name" "$name" >> "$log" || return 0
  kube_host "$E2E_OUT/run/$name" "$name" >> "$log" || return 0
  timeout --foreground -k 5 "$tmo" "${QEMU[@]}" < /dev/null 2>&1 | stamp "$t0" | follow "$log"
  local rc=${PIPESTATUS[0]}
  kube_host_stop
  [ "$rc" = 124 ] && echo "@@HOST timeout: the VM was killed after ${tmo}s" >> "$log"
  VM_LOGS=("$log")
  BOOT_TIMES="boot $(boot_time "$log")s"
}

# ---- topology b: two VMs on a UDP link, storage VM power-cycled on request -------------
run_b() {  # run_b NAME TIMEOUT -> logs $LOGS/NAME-worker.log, $LOGS/NAME-storage.log
  local name=$1 tmo=$2 t0=$EPOCHREALTIME
  local d=$E2E_OUT/run/$name wlog=$LOGS/$name-worker.log slog=$LOGS/$name-storage.log
  rm -rf "$d"; mkdir -p "$d"
  : > "$slog"
  # persistent storage disk: formatted here (fast) and kept across storage boots
  truncate -s 1G "$d/storage.img"
  mkfs.ext4 -q -F -L e2e-storage "$d/storage.img" || { echo "@@HOST mkfs of the storage disk failed" > "$wlog"; return; }
  mkfifo "$d/ctl.in" "$d/ctl.out"
  local pw=$((20000 + RANDOM % 20000)); local ps=$((pw + 1))
  local sboots=0 spid="" sstart=() wargs="" wboots=0 wpid="" wstart=()
  # "# e2e-worker-disk: yes": the worker keeps $E2E_STATE on a disk of its own across its power
  # cycles (worker-kill)
  if [ "$(hdr "$HERE/scenarios/$name.sh" worker-disk no)" = yes ]; then
    truncate -s 256M "$d/worker.img"
    mkfs.ext4 -q -F -L e2e-worker "$d/worker.img" || { echo "@@HOST mkfs of the worker disk failed" > "$wlog"; return; }
    wargs=" E2E_WORKER_DISK=1"
  fi
  qemu_cmd "e2e-$name-storage" 1 768 "E2E_ROLE=storage E2E_TOPO=b E2E_NVMET=$(nvmet_by "$name")"
  sstart=("${QEMU[@]}"
    -netdev "socket,id=n0,udp=127.0.0.1:$pw,localaddr=127.0.0.1:$ps"
    -device virtio-net-pci,netdev=n0,mac=52:54:00:e2:e0:02,romfile=
    -drive "file=$d/storage.img,format=raw,if=none,id=disk0,cache=writeback"
    -device virtio-blk-pci,drive=disk0
    -pidfile "$d/storage.pid")
  QEMU=(); zfs_disk "$d"; sstart+=("${QEMU[@]}")
  CLEANUP_DIR=$d
  storage_on() {
    sboots=$((sboots + 1)); rm -f "$d/storage.pid"
    printf '[%8.3f] ==== host: storage VM power-on #%d\n' "$(secs "$t0" "$EPOCHREALTIME")" "$sboots" >> "$slog"
    ( exec timeout -k 5 "$tmo" "${sstart[@]}" < /dev/null 2>&1 | stamp "$t0" >> "$slog" ) &
    local i; for i in $(seq 50); do [ -s "$d/storage.pid" ] && break; sleep 0.1; done
    spid=$(cat "$d/storage.pid" 2>/dev/null)
    [ -n "$spid" ]
  }
  storage_off() {
    [ -n "$spid" ] || return 0
    kill -TERM "$spid" 2>/dev/null
    local i; for i in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$spid" 2>/dev/null && { kill -KILL "$spid"; sleep 0.2; }
    printf '[%8.3f] ==== host: storage VM powered off (qemu killed, no guest shutdown)\n' "$(secs "$t0" "$EPOCHREALTIME")" >> "$slog"
    spid=""
  }
  # storage_kill: SIGKILL at once (no SIGTERM first): qemu gets no chance to finish a request
  # it is emulating; the guest's page cache and every write it had not yet sent to its disk
  # are lost, what it sent stays in the image (the host keeps running)
  storage_kill() {
    [ -n "$spid" ] || return 0
    kill -KILL "$spid" 2>/dev/null
    local i; for i in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
    printf '[%8.3f] ==== host: storage VM powered off hard (qemu SIGKILLed)\n' "$(secs "$t0" "$EPOCHREALTIME")" >> "$slog"
    spid=""
  }
  storage_on || echo "@@HOST storage VM did not start" >> "$slog"
  ZFS_VM="" qemu_cmd "e2e-$name-worker" 1 768 "E2E_ROLE=worker E2E_TOPO=b E2E_SCENARIO=$name$wargs"
  QEMU+=(-netdev "socket,id=n0,udp=127.0.0.1:$ps,localaddr=127.0.0.1:$pw"
         -device virtio-net-pci,netdev=n0,mac=52:54:00:e2:e0:01,romfile=
         -chardev "pipe,id=ctl,path=$d/ctl" -serial chardev:ctl
         -pidfile "$d/worker.pid")
  [ -z "$wargs" ] || QEMU+=(-drive "file=$d/worker.img,format=raw,if=none,id=wdisk,cache=writeback"
                            -device virtio-blk-pci,drive=wdisk)
  wstart=("${QEMU[@]}")
  : > "$wlog"
  worker_on() {  # the rest of the run's time, at least 30 s
    wboots=$((wboots + 1)); rm -f "$d/worker.pid"
    local left=$(( tmo - ${EPOCHREALTIME%.*} + ${t0%.*} )); [ "$left" -ge 30 ] || left=30
    [ "$wboots" = 1 ] || printf '[%8.3f] ==== host: worker VM power-on #%d\n' "$(secs "$t0" "$EPOCHREALTIME")" "$wboots" >> "$wlog"
    ( exec timeout --foreground -k 5 "$left" "${wstart[@]}" < /dev/null 2>&1 | stamp "$t0" >> "$wlog" ) &
    wpid=$!
  }
  # worker_kill: the worker's power cut (SIGKILL of its qemu), and it boots again from its disk
  worker_kill() {
    local p; p=$(cat "$d/worker.pid" 2>/dev/null)
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
    wait "$wpid" 2>/dev/null
    printf '[%8.3f] ==== host: worker VM powered off hard (qemu SIGKILLed)\n' "$(secs "$t0" "$EPOCHREALTIME")" >> "$wlog"
    worker_on
  }
  worker_on
  # control loop: requests from the worker's /dev/ttyS1
  local cin cout line buf="" id cmd rc msg
  exec {cin}<>"$d/ctl.out" {cout}<>"$d/ctl.in"
  while kill -0 "$wpid" 2>/dev/null; do
    if [ -n "$spid" ] && ! kill -0 "$spid" 2>/dev/null; then
      printf '[%8.3f] ==== host: storage VM exited by itself\n' "$(secs "$t0" "$EPOCHREALTIME")" >> "$slog"
      spid=""
    fi
    if IFS= read -r -t 1 -u "$cin" line; then
      line=$buf${line%$'\r'}; buf=""
    else
      buf+=$line; continue
    fi
    case $line in
      "@@CTL "*) ;;
      *) continue ;;
    esac
    read -r _ id cmd <<< "$line"
    rc=0; msg=""
    if [ "$cmd" = worker-kill ] && [ -n "$wargs" ]; then  # the asker is gone: no answer
      printf '[%8.3f] ==== host: worker asked "%s"\n' "$(secs "$t0" "$EPOCHREALTIME")" "$cmd" >> "$slog"
      worker_kill; buf=""; continue
    fi
    case $cmd in
      storage-off)   storage_off ;;
      storage-kill)  storage_kill ;;
      storage-on)    if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then msg="already running"
                     else storage_on || { rc=1; msg="qemu did not start"; }; fi ;;
      storage-state) if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then msg=running; else msg=off; fi ;;
      *)             rc=2; msg="unknown host command '$cmd'" ;;
    esac
    printf '[%8.3f] ==== host: worker asked "%s" -> rc=%s %s\n' "$(secs "$t0" "$EPOCHREALTIME")" "$cmd" "$rc" "$msg" >> "$slog"
    printf 'ACK %s %s %s\n' "$id" "$rc" "$msg" >&"$cout"
  done
  wait "$wpid"
  local wrc=$?
  [ "$wrc" = 124 ] && echo "@@HOST timeout: the worker VM was killed after ${tmo}s" >> "$wlog"
  storage_off
  exec {cin}<&- {cout}>&-
  VM_LOGS=("$wlog" "$slog")
  local sb; sb=$(grep -a '@@E2E-BOOTED' "$slog" | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p' | tr '\n' ' ')
  BOOT_TIMES="worker boot $(boot_time "$wlog")s${wargs:+ (worker boots: $wboots)}; storage boots ($sboots) at ${sb% }s"
}

# an interrupted run must not leave a storage VM behind
CLEANUP_DIR=""
cleanup() {
  local f p
  kube_host_stop
  [ -n "$CLEANUP_DIR" ] || return 0
  for f in "$CLEANUP_DIR"/storage.pid "$CLEANUP_DIR"/worker.pid; do
    p=$(cat "$f" 2>/dev/null) || continue
    # only if that pid still is one of our qemus (pids get reused)
    tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "-name e2e-" &&
      kill -TERM "$p" 2>/dev/null
  done
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- interactive shell ------------------------------------------------------------------
if [ -n "${E2E_SHELL:-}" ]; then
  ZFS_VM=$E2E_ZFS   # E2E_ZFS=1: OpenZFS and the pool's disk too
  E2E_SERIAL=mon:stdio qemu_cmd e2e-shell 2 1024 "E2E_ROLE=single E2E_TOPO=a E2E_SCENARIO=shell"
  mkdir -p "$E2E_OUT/run/shell"; zfs_disk "$E2E_OUT/run/shell"
  exec "${QEMU[@]}"
fi

# ---- scenarios -------------------------------------------------------------------------
passed=0; failed=0; summary=(); failed_names=(); recap=""
for name in "$@"; do
  f=$HERE/scenarios/$name.sh
  if [ ! -f "$f" ]; then
    echo "FAIL $name: no such scenario ($f)"; failed=$((failed + 1)); failed_names+=("$name")
    recap+="  $name: no such scenario"$'\n'; continue
  fi
  topo=$(hdr "$f" topology a); tmo=$(hdr "$f" timeout 300)
  echo "---- $name (topology $topo, kernel series $(kernel_of "$name"), timeout ${tmo}s)"
  t=$EPOCHREALTIME
  VM_LOGS=(); BOOT_TIMES=""
  ZFS_VM=""; needs_zfs "$name" && ZFS_VM=1
  use_kernel "$(kernel_of "$name")"
  case $topo in a|b) ;; *)
    echo "FAIL $name: unknown topology '$topo'"; failed=$((failed + 1)); failed_names+=("$name")
    recap+="  $name: unknown topology '$topo'"$'\n'; continue ;;
  esac
  # A kernel that panics while booting under TCG, before the scenario's first step, says
  # nothing about the product (seen: an int3 oops in the boot's text patching): the scenario
  # is run once more, from the start, and the retry is printed. A panic after a step is a
  # verdict like any other failure.
  for attempt in 1 2; do
    VM_LOGS=(); BOOT_TIMES=""
    run_"$topo" "$name" "$tmo"
    [ "$attempt" = 1 ] && boot_panic "${VM_LOGS[@]}" || break
    echo "RETRY $name: a VM's kernel panicked while booting, before the scenario's first step:"
    grep -a -h -m3 -E 'Kernel panic|Oops' "${VM_LOGS[@]}" | sed 's/^/  /'
    for f in "${VM_LOGS[@]}"; do mv -f "$f" "${f%.log}.boot-panic.log"; done
  done
  dt=$(secs "$t" "$EPOCHREALTIME")
  main=${VM_LOGS[0]}
  [ -n "${E2E_VERBOSE:-}" ] && cat "${VM_LOGS[@]}"
  # the scenario's exit status is the verdict (a failure line from a check
  # that was expected to fail, e.g. assert_not on_storage ..., is not one)
  if grep -aq "@@E2E-SCENARIO-END $name rc=0" "$main"; then
    passed=$((passed + 1))
    echo "PASS $name ${dt}s ($BOOT_TIMES)"
    summary+=("PASS $name ${dt}s")
    grep -a -h -E '@@(STEP|TIME)' "$main" | sed 's/^/     /'
  else
    failed=$((failed + 1))
    echo "FAIL $name ${dt}s ($BOOT_TIMES)"
    summary+=("FAIL $name ${dt}s")
    failed_names+=("$name")
    if grep -aq '@@E2E-FAIL' "${VM_LOGS[@]}"; then
      grep -a -H '@@E2E-FAIL' "${VM_LOGS[@]}" | sed "s#^$ROOT/##; s/^/  /"
      grep -a -h '@@DIAG' "$main" | head -40 | sed 's/^/  /'
      recap+=$(grep -a -h '@@E2E-FAIL' "${VM_LOGS[@]}" | head -20 | sed "s/^/  $name: /")$'\n'
    else
      grep -a -h '@@HOST' "${VM_LOGS[@]}" | sed 's/^/  /'
      echo "  no failure line from the VM (timeout, crash or no @@E2E-SCENARIO-END); last step:"
      grep -a '@@STEP' "$main" | tail -1 | sed 's/^/  /'
      echo "  last lines of ${main#"$ROOT/"}:"
      tail -n 12 "$main" | sed 's/^/  /'
      recap+="  $name: no failure line from the VM; last step: $(grep -a '@@STEP' "$main" | tail -1)"$'\n'
    fi
    echo "  serial logs: ${VM_LOGS[*]#"$ROOT/"}"
    [ "${E2E_KEEP_GOING:-1}" = 0 ] && break
  fi
done
echo "e2e: stage took $(secs "$T_STAGE" "$EPOCHREALTIME")s (${summary[*]:-nothing run}); logs in ${LOGS#"$ROOT/"}"
# the failures again right before the closing line, so a log cut to its last lines says what failed
if [ "$failed" != 0 ]; then
  echo "e2e: the failures again:"
  printf '%s' "$recap"
  echo "e2e: $passed passed, $failed failed (${failed_names[*]})"
else
  echo "e2e: $passed passed, $failed failed"
fi
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
