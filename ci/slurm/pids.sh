# Shared by up.sh and down.sh (sourced; they define `log` first): daemons found by pid file.

# pid_alive PIDFILE NAME: the pid file names a live process called NAME.
pid_alive() {
  local f="$1" name="$2" pid
  [ -s "$f" ] || return 1
  pid="$(cat "$f" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
  # A zombie (exited, not yet reaped by PID 1) counts as stopped.
  ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

# stop_pidfile PIDFILE NAME: TERM, wait up to 10 s, then KILL.
stop_pidfile() {
  local f="$1" name="$2" pid i
  pid_alive "$f" "$name" || return 0
  pid="$(cat "$f")"
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do pid_alive "$f" "$name" || return 0; sleep 0.2; done
  log "$name did not exit after 10 s; sending KILL"
  kill -KILL "$pid" 2>/dev/null || true
}
