# roles.sh - start/stop/kill our roles (build/pillar-csi) and collect their logs.
# POSIX sh.
#
# A role runs where it belongs: agent on the storage side, node and controller
# on the worker side (override with --on storage|worker). A started role is
# "enabled": storage_on_boot starts it again after a storage (re)boot, the way
# a DaemonSet would. role_stop disables it; role_kill (kill -9) does not.
# Storage-side records and logs live under $E2E_STATE/e2e (on the persistent
# disk in topology b); worker-side ones under /run/e2e.

E2E_BIN=${E2E_BIN:-/usr/bin/pillar-csi}

role_home() {  # role_home : this side's directory for role records and logs
  if [ "$E2E_SIDE" = storage ]; then echo "$E2E_STATE/e2e"; else echo /run/e2e; fi
}
_role_side() {  # default side for a role name
  case $1 in agent) echo storage;; *) echo worker;; esac
}
# _on SIDE SCRIPT : run SCRIPT on SIDE (directly when we are already there)
_on() {
  if [ "$1" = "$E2E_SIDE" ]; then sh -c '. /e2e/lib/e2e.sh; E2E_SIDE='"$1"'; '"$2"
  elif [ "$1" = storage ]; then on_storage "$2"
  else fail "cannot run on the worker side from the storage side"; fi
}
# _role_parse "$@" : sets _side, _name, and leaves the rest in _args (quoted)
_role_parse() {
  _side=""
  if [ "${1:-}" = --on ]; then _side=$2; shift 2; fi
  _name=${1:?role name}; shift
  [ "${1:-}" = -- ] && shift
  _side=${_side:-$(_role_side "$_name")}
  _args=$(shquote "$@")
}

# role_start [--on SIDE] NAME [--] ARGS... : start `pillar-csi NAME ARGS...`
# in the background; fails if it exits within the first 0.5 s.
role_start() {
  _role_parse "$@"
  _on "$_side" "_role_start_here $(shquote "$_name") $_args" || fail "role_start $_name failed"
}
_role_start_here() {
  _n=$1; shift
  [ -x "$E2E_BIN" ] || fail "role $_n: $E2E_BIN is not in the image (build/pillar-csi missing?)"
  _h=$(role_home); mkdir -p "$_h/roles" "$_h/logs"
  shquote "$@" > "$_h/roles/$_n.args"
  echo "$E2E_BIN" > "$_h/roles/$_n.bin"
  # durable before anything else happens: a power cut may follow right away
  [ "$E2E_SIDE" != storage ] || state_sync
  _role_spawn "$_n"
}
_role_spawn() {
  _h=$(role_home)
  _a=$(cat "$_h/roles/$1.args")
  _bin=$(cat "$_h/roles/$1.bin" 2>/dev/null || echo "$E2E_BIN")
  echo "==== start $(date -u +%H:%M:%S) uptime=$(up): $_bin $1 $_a" >> "$_h/logs/$1.log"
  # exec keeps $! the role's own pid; fds above 2 (the RPC listener, the
  # host control tty) are not the role's business
  ( eval "exec setsid $_bin $1 $_a" ) < /dev/null >> "$_h/logs/$1.log" 2>&1 \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  echo $! > "$_h/roles/$1.pid"
  sleep 0.5
  kill -0 "$(cat "$_h/roles/$1.pid")" 2>/dev/null || {
    tail -20 "$_h/logs/$1.log" | sed "s/^/@@log $1| /" >&2
    fail "role $1 exited right after start"; }
  echo "@@ [$(up)] role $1 started (pid $(cat "$_h/roles/$1.pid")) on $E2E_SIDE" >&2
}
# role_stop [--on SIDE] NAME : SIGTERM, wait up to 10 s, then SIGKILL; disables it
role_stop() { _role_parse "$@"; _on "$_side" "_role_signal $(shquote "$_name") TERM disable"; }
# role_kill [--on SIDE] NAME : kill -9 (a crash); stays enabled
role_kill() { _role_parse "$@"; _on "$_side" "_role_signal $(shquote "$_name") KILL keep"; }
_role_signal() {
  _h=$(role_home); _p=$(cat "$_h/roles/$1.pid" 2>/dev/null || true)
  if [ -n "$_p" ] && kill -0 "$_p" 2>/dev/null; then
    kill -s "$2" "$_p"
    poll 10 sh_true "! kill -0 $_p 2>/dev/null" || { kill -9 "$_p" 2>/dev/null; sleep 0.2; }
    echo "==== $2 $(date -u +%H:%M:%S) uptime=$(up)" >> "$_h/logs/$1.log"
    echo "@@ [$(up)] role $1 (pid $_p) stopped by SIG$2" >&2
  fi
  rm -f "$_h/roles/$1.pid"
  [ "$3" = keep ] || rm -f "$_h/roles/$1.args" "$_h/roles/$1.bin"
  [ "$E2E_SIDE" != storage ] || state_sync
}
# role_running [--on SIDE] NAME
role_running() {
  _role_parse "$@"
  _on "$_side" '_p=$(cat "$(role_home)/roles/'"$_name"'.pid" 2>/dev/null) && kill -0 "$_p" 2>/dev/null'
}
# role_enabled NAME : (this side) NAME is recorded as enabled
role_enabled() { [ -f "$(role_home)/roles/$1.args" ]; }
# role_log [--on SIDE] NAME : print the role's log (stdout)
role_log() { _role_parse "$@"; _on "$_side" 'cat "$(role_home)/logs/'"$_name"'.log" 2>/dev/null'; }
# role_wait_log [--on SIDE] NAME ERE TIMEOUT_S : wait until the log matches ERE
role_wait_log() {
  _o=""; if [ "$1" = --on ]; then _o="--on $2"; shift 2; fi
  wait_for "$3" "role $1 log matches /$2/" \
    sh_true "role_log $_o $(shquote "$1") | grep -qE -- $(shquote "$2")"
}

# this side: stop every running role without disabling it (for a shutdown)
roles_stop_all() {
  for _f in "$(role_home)"/roles/*.pid; do
    [ -f "$_f" ] || continue
    _n=${_f##*/}; _role_signal "${_n%.pid}" TERM keep
  done
  return 0
}
# this side: start every enabled role that is not running (after a boot)
roles_restart_enabled() {
  for _f in "$(role_home)"/roles/*.args; do
    [ -f "$_f" ] || continue
    _n=${_f##*/}; _n=${_n%.args}
    _p=$(cat "$(role_home)/roles/$_n.pid" 2>/dev/null || true)
    if [ -n "$_p" ] && kill -0 "$_p" 2>/dev/null; then continue; fi
    _role_spawn "$_n"
  done
  return 0
}
# role_logs_tail : last lines of every role log on this side (for diagnostics)
role_logs_tail() {
  for _f in "$(role_home)"/logs/*.log; do
    [ -f "$_f" ] || continue
    _n=${_f##*/}; tail -15 "$_f" | sed "s/^/@@log ${_n%.log}| /"
  done
}
