#!/usr/bin/env bash
# Stop the single-node SLURM cluster started by up.sh: cancel leftover jobs,
# then stop slurmd, slurmctld and munged (via their pid files only; no broad
# pkill). Packages, config and $RL_SLURM_DIR stay in place. Idempotent.
#
# Env: RL_SLURM_DIR (default /tmp/rl-slurm)
set -euo pipefail

DIR="${RL_SLURM_DIR:-/tmp/rl-slurm}"
log() { echo "rl-slurm down: $*" >&2; }

pid_alive() {
  local f="$1" name="$2" pid
  [ -s "$f" ] || return 1
  pid="$(cat "$f" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
  # A zombie (exited, not yet reaped by PID 1) counts as stopped.
  ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}
stop_pidfile() {
  local f="$1" name="$2" pid i
  if ! pid_alive "$f" "$name"; then return 0; fi
  pid="$(cat "$f")"
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do pid_alive "$f" "$name" || return 0; sleep 0.2; done
  log "$name did not exit after 10 s; sending KILL"
  kill -KILL "$pid" 2>/dev/null || true
}

# 1. Cancel all jobs while the controller still answers, then give steps a
#    moment to be killed (KillWait=5 in our slurm.conf).
if command -v scontrol >/dev/null 2>&1 && timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; then
  jobs="$(squeue -h -o %i 2>/dev/null || true)"
  if [ -n "$jobs" ]; then
    log "cancelling jobs: $(echo $jobs)"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for i in $(seq 1 50); do
      [ -z "$(squeue -h -t PD,R,CG,S -o %i 2>/dev/null || true)" ] && break
      sleep 0.2
    done
  fi
fi

# 2. Daemons, compute side first.
stop_pidfile "$DIR/run/slurmd.pid" slurmd
stop_pidfile "$DIR/run/slurmctld.pid" slurmctld
stop_pidfile /run/munge/munged.pid munged

echo "rl-slurm: DOWN (state kept in $DIR; packages installed)"
