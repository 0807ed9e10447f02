# core.sh - logging, assertions, waiting, data checks. POSIX sh (busybox ash).
# Sourced through /e2e/lib/e2e.sh; see test/e2e/README.md for the API.
#
# Lines for the host start with "@@" and go to stderr (the console), so that
# functions whose stdout is captured with $(...) stay clean.

E2E_STATE=${E2E_STATE:-/var/lib/pillar-csi}   # storage state root (disk in topology b)
E2E_SIDE=${E2E_SIDE:-worker}                  # which side this shell runs on

up()    { cut -d' ' -f1 /proc/uptime; }
# since T0: seconds elapsed since an earlier $(up), one decimal
since() { awk -v a="$(up)" -v b="$1" 'BEGIN{printf "%.1f", a-b}'; }
log()   { echo "@@ [$(up)] $*" >&2; }
step()  { E2E_STEP="$*"; echo "@@STEP [$(up)] $*" >&2; }

# fail MSG: the one way a check fails. Prints the failing line, diagnostics
# (on the side that runs the scenario), and exits the current (sub)shell.
fail() {
  E2E_FAILED=1
  echo "@@E2E-FAIL [$(up)] [$E2E_SIDE] ${E2E_SCENARIO:+$E2E_SCENARIO: }$*" >&2
  [ "$E2E_SIDE" = storage ] || e2e_diag >&2
  exit 1
}

e2e_diag() {
  echo "@@DIAG step: ${E2E_STEP:-none}"
  for c in /sys/class/nvme/nvme*; do
    [ -e "$c" ] || continue
    echo "@@DIAG ${c##*/}: state=$(cat "$c/state" 2>/dev/null) addr=$(cat "$c/address" 2>/dev/null | tr '\n' ' ')"
  done
  dmesg | grep -E 'nvme|nvmet|EXT4|XFS|device-mapper' | tail -25 | sed 's/^/@@DIAG dmesg /'
  role_logs_tail 2>/dev/null || true
  [ "$E2E_SIDE" = storage ] || on_storage 'role_logs_tail' 10 2>/dev/null || true
}

# Call at the top of a scenario: strict mode, and an exit trap that turns an
# unexpected non-zero exit (set -e) into a clear failure line.
scenario_begin() {
  set -eu
  E2E_T0=$(up)
  trap 'e2e_exit_trap $?' EXIT
  log "scenario ${E2E_SCENARIO:-?} begins (topology ${E2E_TOPO:-a})"
}
e2e_exit_trap() {
  if [ "$1" != 0 ] && [ -z "${E2E_FAILED:-}" ]; then
    echo "@@E2E-FAIL [$(up)] [$E2E_SIDE] ${E2E_SCENARIO:-?}: a command exited with status $1 during step '${E2E_STEP:-none}'" >&2
    e2e_diag >&2
  fi
}
scenario_end() {
  log "scenario ${E2E_SCENARIO:-?} PASSED in $(since "$E2E_T0")s"
}

# ---- assertions -------------------------------------------------------------
# assert CMD...          : run CMD; fail "assertion failed: CMD" if it fails
assert() { "$@" || fail "assertion failed: $*"; }
# assert_not CMD...      : CMD must fail
assert_not() { if "$@"; then fail "assertion failed (expected failure): $*"; fi; }
# assert_eq GOT WANT WHAT
assert_eq() { [ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"; }
# assert_ne GOT UNWANTED WHAT
assert_ne() { [ "$1" != "$2" ] || fail "$3: got '$1', which it must not be"; }
# assert_match GOT ERE WHAT
assert_match() { printf '%s\n' "$1" | grep -qE -- "$2" || fail "$3: '$1' does not match /$2/"; }
# check 'SHELL EXPRESSION' [WHAT] : eval; failure message shows the expression
check() { eval "$1" || fail "check failed: ${2:-$1}"; }

# ---- waiting ----------------------------------------------------------------
# up_cs : uptime in centiseconds (integer, for deadlines)
up_cs() { _u=$(cut -d' ' -f1 /proc/uptime); echo "${_u%.*}${_u#*.}" | sed 's/^0*//;s/^$/0/'; }
# poll TIMEOUT_S CMD... : retry CMD every 0.2 s until it succeeds (0) or
# TIMEOUT_S (wall clock, decimals allowed) has passed (1)
poll() {
  _pd=$(( $(up_cs) + $(awk -v t="$1" 'BEGIN{printf "%d", t*100}') )); shift
  while :; do
    if "$@"; then return 0; fi
    [ "$(up_cs)" -lt "$_pd" ] || return 1
    sleep 0.2
  done
}
# wait_for TIMEOUT_S WHAT CMD... : poll, and fail "timed out ... WHAT" on timeout
wait_for() {
  _wt=$1; _ww=$2; shift 2
  _ws=$(up)
  poll "$_wt" "$@" || fail "timed out after ${_wt}s waiting for: $_ww"
  log "ok after $(since "$_ws")s: $_ww"
}
# sh_true 'EXPRESSION' : eval helper for poll/wait_for with a shell expression
sh_true() { eval "$1"; }

# ---- background jobs -----------------------------------------------------------
# bg_start NAME CMD... : run CMD in the background (set -e off); bg_done NAME
# tells whether it finished, bg_rc NAME prints its exit status.
bg_start() {
  _bn=$1; shift
  mkdir -p /run/e2e/bg; rm -f "/run/e2e/bg/$_bn.rc"
  ( set +e; "$@"; echo $? > "/run/e2e/bg/$_bn.rc.tmp"; mv "/run/e2e/bg/$_bn.rc.tmp" "/run/e2e/bg/$_bn.rc" ) &
}
bg_done() { [ -e "/run/e2e/bg/$1.rc" ]; }
bg_rc()   { cat "/run/e2e/bg/$1.rc" 2>/dev/null || echo running; }

# ---- sysfs / configfs -----------------------------------------------------------
# sysfs_read PATH : value without NULs/trailing newline; fails when missing
sysfs_read() {
  [ -e "$1" ] || fail "sysfs: $1 does not exist"
  tr -d '\000' < "$1"
}
# sysfs_try PATH : value or empty, never fails
sysfs_try() { tr -d '\000' < "$1" 2>/dev/null || true; }

# ---- data -----------------------------------------------------------------------
# data_write FILE MIB : write MIB MiB of random data with fsync; prints md5
data_write() {
  dd if=/dev/urandom of="$1" bs=1M count="$2" conv=fsync 2>/dev/null ||
    fail "data_write: cannot write $2 MiB to $1"
  md5sum < "$1" | cut -d' ' -f1
}
# data_sum FILE : md5 of FILE (fails if unreadable)
data_sum() {
  _s=$(md5sum < "$1" 2>/dev/null) || fail "data_sum: cannot read $1"
  echo "${_s%% *}"
}
# data_verify FILE MD5 [WHAT] : read back (after dropping caches) and compare
data_verify() {
  sync; echo 3 > /proc/sys/vm/drop_caches
  assert_eq "$(data_sum "$1")" "$2" "checksum of ${3:-$1}"
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# state_sync : flush the storage state filesystem only (syncfs). A global
# sync would wait for the worker's dirty pages on a disconnected nvme device.
state_sync() { sync -f "$E2E_STATE"; }

# ---- kernel log ----------------------------------------------------------------
# mark NAME : put a marker in the kernel log; dmesg_since NAME prints what follows
mark() { echo "E2EMARK $1" > /dev/kmsg; log "mark $1"; }
dmesg_since() { dmesg | sed -n "/E2EMARK $1\$/,\$p" | grep -v E2EMARK || true; }
# expect_dmesg NAME ERE WHAT : the kernel logged ERE after mark NAME
expect_dmesg() {
  dmesg_since "$1" | grep -qE -- "$2" || fail "kernel log after mark '$1' has no /$2/ ($3)"
  log "kernel log after '$1': $(dmesg_since "$1" | grep -E -- "$2" | head -1 | sed 's/^\[[^]]*\] //')"
}
# count_dmesg NAME ERE : number of matching kernel log lines after mark NAME
count_dmesg() { dmesg_since "$1" | grep -cE -- "$2" || true; }

# shquote ARG... : each argument single-quoted for re-evaluation by sh
shquote() {
  for _a in "$@"; do
    printf "'%s' " "$(printf '%s' "$_a" | sed "s/'/'\\\\''/g")"
  done
}
